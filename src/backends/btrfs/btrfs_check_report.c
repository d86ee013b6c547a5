/*
 * btrfs_check_report: the text of each btrfs tree finding, with the paths
 * of the files it names (btrfs_file_path(): subvolume path + file path).
 */
#include "backends/btrfs/btrfs_check.h"

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <string.h>
#include <sys/ioctl.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "scan/context.h"
#include "report/checks.h"
#include "report/report.h"
#include "lib/strbuf.h"

/*
 * The path of (root, ino) for a message: under the mount if it is there,
 * else "<subvolume R>/path in that subvolume" (BTRFS_IOC_INO_LOOKUP, which
 * follows the inode's first name up), else "<subvolume R>/<inode I>".
 */
static void name_of(struct scrub_ctx *ctx, uint64_t root, uint64_t ino, struct strbuf *out)
{
	struct btrfs_ioctl_ino_lookup_args lk = { .treeid = root, .objectid = ino };
	size_t n;

	if (btrfs_file_path(ctx, root, ino, out))
		return;
	strbuf_addf(out, "<subvolume %llu>/", (unsigned long long)root);
	if (ioctl(ctx->mnt_fd, BTRFS_IOC_INO_LOOKUP, &lk) < 0 || !lk.name[0]) {
		strbuf_addf(out, "<inode %llu>", (unsigned long long)ino);
		return;
	}
	n = strlen(lk.name);
	if (lk.name[n - 1] == '/')
		lk.name[--n] = 0;	/* INO_LOOKUP ends every component with '/' */
	strbuf_addstr(out, lk.name);
}

static const char *check_of(enum finding_kind k)
{
	switch (k) {
	case F_NBYTES: return CHECK_BTRFS_NBYTES;
	case F_EXTENT_OVERLAP:
	case F_EXTENT_HOLE: return CHECK_BTRFS_FILE_EXTENT;
	case F_BG_USED: return CHECK_BTRFS_BG_USED;
	case F_BYTES_USED: return CHECK_BTRFS_BYTES_USED;
	case F_CROSSLINK: return CHECK_BTRFS_CROSSLINK;
	case F_ROOT_REF_ALONE:
	case F_ROOT_REF_DIR:
	case F_ROOT_UNREFERENCED: return CHECK_BTRFS_ROOT_REF;
	case F_CSUM_MISSING:
	case F_CSUM_UNEXPECTED:
	case F_CSUM_ORPHAN:
	case F_CSUM_COMPRESSED:
	case F_CSUM_OVERLAP: return CHECK_BTRFS_CSUM;
	case F_EXTENT_GEN:
	case F_EXTENT_IREF:
	case F_EXTENT_LEVEL:
	case F_EXTENT_STRIPE:
	case F_EXTENT_TYPE: return CHECK_BTRFS_EXTENT_ITEM;
	case F_FST_USED_FREE:
	case F_FST_COUNT:
	case F_FST_NO_BG: return CHECK_BTRFS_FREE_SPACE_TREE;
	case F_V1_USED_FREE: return CHECK_BTRFS_SPACE_CACHE;
	case F_DIR_PAIR:
	case F_DIR_ISIZE:
	case F_ENTRY_NO_REF:
	case F_REF_NO_ENTRY: return CHECK_BTRFS_DIR_ITEM;
	case F_NLINK_REFS: return CHECK_BTRFS_INODE_REF;
	case F_CHUNK_NO_BG:
	case F_BG_NO_CHUNK:
	case F_CHUNK_BG_DIFF:
	case F_STRIPE_NO_DEV_EXTENT:
	case F_DEV_EXTENT_ORPHAN:
	case F_DEV_EXTENT_LEN:
	case F_DEV_BYTES_USED:
	case F_DEV_EXTENT_PAST_END: return CHECK_BTRFS_CHUNK;
	case F_FLAGS_UNKNOWN:
	case F_FLAGS_SYMLINK:
	case F_FLAGS_COMPRESS: return CHECK_BTRFS_INODE_FLAGS;
	case F_QGROUP_RFER:
	case F_QGROUP_EXCL:
	case F_QGROUP_CYCLE: return CHECK_BTRFS_QGROUP;
	case F_ROOT_KEY: return CHECK_BTRFS_TREE;
	case F_UNNAMED:
	case F_ORPHAN_LOST: return CHECK_BTRFS_ORPHAN;
	default: return CHECK_BTRFS_EXTENT_REFS;
	}
}

/* The low 48 bits of a qgroup id: the subvolume, or the number at its level. */
#define QGROUP_SUBVOLID_MASK ((1ULL << BTRFS_QGROUP_LEVEL_SHIFT) - 1)

static void describe_qgroup(const struct tfinding *f, struct strbuf *m)
{
	unsigned long long level = f->root >> BTRFS_QGROUP_LEVEL_SHIFT;
	unsigned long long a = f->a, b = f->b;

	strbuf_addf(m, "qgroup %llu/%llu: %s %llu bytes, the extents of %s add up to %llu "
		    "(btrfs quota rescan recounts)", level,
		    (unsigned long long)(f->root & QGROUP_SUBVOLID_MASK),
		    f->kind == F_QGROUP_RFER ? "referenced" : "exclusive", a,
		    level ? "its member subvolumes" : "the subvolume", b);
}

static void describe(struct scrub_ctx *ctx, const struct tfinding *f, struct strbuf *m)
{
	struct strbuf other = STRBUF_INIT, rel = STRBUF_INIT;

	unsigned long long lg = f->logical, len = f->len, a = f->a, b = f->b;
	unsigned long long fo = f->file_off, root = f->root, ino = f->ino;
	unsigned long long dev = f->devid, phys = f->physical;

	switch (f->kind) {
	case F_REFS_SUM:
		strbuf_addf(m, "data extent at logical %llu (%llu bytes): its extent item counts "
			    "%llu references, its back references add up to %llu", lg, len, a, b);
		break;
	case F_REF_COUNT:
		strbuf_addf(m, "data extent at logical %llu (%llu bytes): its back reference from "
			    "tree %llu inode %llu offset %llu counts %llu file extent items, the "
			    "tree has %llu", lg, len, root, ino,
			    (unsigned long long)f->ref_off, a, b);
		break;
	case F_NO_BACKREF:
		strbuf_addf(m, "file extent at file offset %llu uses the data extent at logical "
			    "%llu (%llu bytes), which has no back reference to it", fo, lg, len);
		break;
	case F_CROSSLINK:
		name_of(ctx, f->other_root, f->other_ino, &rel);
		report_path(ctx, &other, NULL, rel.buf);
		strbuf_addf(m, "file extent at file offset %llu uses the data extent at logical "
			    "%llu (%llu bytes), whose back references name another file, %s "
			    "(inode %llu), and not this one: cross-linked", fo, lg, len, other.buf,
			    (unsigned long long)f->other_ino);
		break;
	case F_NO_EXTENT:
		strbuf_addf(m, "file extent at file offset %llu points at logical %llu, where "
			    "the extent tree has no data extent", fo, lg);
		break;
	case F_REF_NO_ROOT:
		strbuf_addf(m, "data extent at logical %llu (%llu bytes) has a back reference "
			    "from tree %llu inode %llu, a tree that does not exist", lg, len, root, ino);
		break;
	case F_ROOT_REF_ALONE:
		strbuf_addf(m, "subvolume %llu \"%s\" (directory index %llu): its %s has no "
			    "matching %s", lg, f->name, b, a ? "ROOT_BACKREF" : "ROOT_REF",
			    a ? "ROOT_REF" : "ROOT_BACKREF");
		break;
	case F_ROOT_REF_DIR:
		strbuf_addf(m, "subvolume %llu \"%s\": its ROOT_REF names directory index %llu, "
			    "which is not an entry of that name for the subvolume", lg, f->name, b);
		break;
	case F_ROOT_UNREFERENCED:
		strbuf_addf(m, "subvolume %llu has no ROOT_BACKREF: no directory names it", lg);
		break;
	case F_CSUM_MISSING:
		strbuf_addf(m, "file extent at file offset %llu: its data at logical %llu "
			    "(%llu bytes from %llu) has no checksum items from logical %llu on, and "
			    "the file is checksummed", fo, a, len, a, lg);
		break;
	case F_CSUM_UNEXPECTED:
		strbuf_addf(m, "file extent at file offset %llu: the file is nodatasum but its "
			    "data at logical %llu (%llu bytes) has checksum items (from logical "
			    "%llu)", fo, a, len, lg);
		break;
	case F_CSUM_ORPHAN:
		strbuf_addf(m, "checksum items cover logical %llu-%llu (%llu bytes), where the "
			    "extent tree has no data extent", lg, lg + len, len);
		break;
	case F_FST_USED_FREE:
		strbuf_addf(m, "the free space tree calls bytes of the extent at logical %llu "
			    "(%llu bytes) free (its free range %llu-%llu)", lg, len, a, b);
		break;
	case F_V1_USED_FREE:
		strbuf_addf(m, "the free space cache (v1, generation %llu) calls bytes of the "
			    "extent at logical %llu (%llu bytes) free (its free range %llu-%llu)",
			    (unsigned long long)f->ref_off, lg, len, a, b);
		break;
	case F_CSUM_COMPRESSED:
		strbuf_addf(m, "file extent at file offset %llu: its compressed data at logical "
			    "%llu (%llu bytes) has no checksum items from logical %llu on; the file "
			    "is nodatasum, but compressed data is always checksummed: a bad byte "
			    "in it cannot be told before it is decompressed", fo, a, len, lg);
		break;
	case F_CSUM_OVERLAP:
		strbuf_addf(m, "the checksum item at logical %llu (%llu bytes) begins before the "
			    "one before it ends (at %llu): two items checksum the same sectors",
			    lg, len, a);
		break;
	case F_EXTENT_GEN:
		strbuf_addf(m, "extent item at logical %llu (%llu bytes): generation %llu, past "
			    "the superblock's %llu and the transaction after it", lg, len, a, b);
		break;
	case F_EXTENT_IREF:
		strbuf_addf(m, "extent item at logical %llu (%llu bytes): its inline back "
			    "reference at byte %llu is of unknown type %llu or runs past the item",
			    lg, len, b, a);
		break;
	case F_EXTENT_LEVEL:
		strbuf_addf(m, "tree block at logical %llu: its METADATA_ITEM gives level %llu, "
			    "a tree has at most 8 (0-7)", lg, a);
		break;
	case F_EXTENT_STRIPE:
		strbuf_addf(m, "tree block at logical %llu (%llu bytes) crosses a 64 KiB stripe "
			    "boundary (btrfs check: \"bad metadata crossing stripe boundary\"; the "
			    "kernel never allocates one so)", lg, len);
		break;
	case F_EXTENT_TYPE:
		strbuf_addf(m, "extent item at logical %llu (%llu bytes): %s in a block group "
			    "that holds %s (btrfs check: \"type mismatch with chunk\")", lg, len,
			    a & BTRFS_BLOCK_GROUP_DATA ? "data" : "a tree block",
			    b & BTRFS_BLOCK_GROUP_DATA ? "data only" : "metadata only");
		break;
	case F_FST_NO_BG:
		strbuf_addf(m, "the free space tree describes a block group at logical %llu "
			    "(%llu bytes) that does not exist: the block groups end at %llu",
			    lg, len, a);
		break;
	case F_DEV_EXTENT_PAST_END:
		strbuf_addf(m, "device extent on device %llu at physical %llu (%llu bytes) of the "
			    "chunk at logical %llu ends past the device's end (total_bytes %llu)",
			    dev, phys, a, lg, b);
		break;
	case F_QGROUP_RFER:
	case F_QGROUP_EXCL:
		describe_qgroup(f, m);
		break;
	case F_QGROUP_CYCLE:
		strbuf_addf(m, "qgroup %llu/%llu is its own ancestor: its QGROUP_RELATION items "
			    "make a cycle (the kernel only makes a member of a qgroup of a higher "
			    "level); its figures are not checked", root >> BTRFS_QGROUP_LEVEL_SHIFT,
			    root & QGROUP_SUBVOLID_MASK);
		break;
	case F_ROOT_KEY: {
		char name[64];

		strbuf_addf(m, "the root tree's ROOT_ITEM of the %s has key offset %llu; a global "
			    "tree's is 0 (btrfs check: \"global root with too large of an offset\"): "
			    "the kernel finds it by (%llu ROOT_ITEM 0), so reads of it fail",
			    btrfs_tree_name(lg, name, sizeof(name)), a, lg);
		break;
	}
	case F_FLAGS_UNKNOWN:
		strbuf_addf(m, "inode flags 0x%llx: bits 0x%llx are no flag any kernel defines",
			    a, b);
		break;
	case F_FLAGS_SYMLINK:
		strbuf_addf(m, "inode flags 0x%llx: a symlink immutable or append-only, which "
			    "the kernel never sets", a);
		break;
	case F_FLAGS_COMPRESS:
		strbuf_addf(m, "inode flags 0x%llx: both COMPRESS and NOCOMPRESS, which the "
			    "kernel refuses to set together", a);
		break;
	case F_FST_COUNT:
		strbuf_addf(m, "block group at logical %llu (%llu bytes): its free space info "
			    "counts %llu free ranges, the free space tree has %llu", lg, len, a, b);
		break;
	case F_DIR_PAIR:
		strbuf_addf(m, "directory has %llu DIR_ITEM and %llu DIR_INDEX entries, and they "
			    "are not the same names", a, b);
		break;
	case F_DIR_ISIZE:
		strbuf_addf(m, "directory i_size %llu, its names add up to %llu bytes (counted "
			    "in DIR_ITEM and DIR_INDEX)", a, b);
		break;
	case F_ENTRY_NO_REF:
		strbuf_addf(m, "directory entry \"%s\" (index %llu) names inode %llu, which has "
			    "no INODE_REF back to it", f->name, b, lg);
		break;
	case F_REF_NO_ENTRY:
		strbuf_addf(m, "the inode's INODE_REF names \"%s\" in directory inode %llu "
			    "(index %llu), which has no such entry", f->name, lg, b);
		break;
	case F_NLINK_REFS:
		strbuf_addf(m, "inode nlink %llu, it has %llu names (INODE_REF, INODE_EXTREF)", a, b);
		break;
	case F_UNNAMED:
		strbuf_addf(m, "inode has %llu links and no name: no directory reaches it", a);
		break;
	case F_ORPHAN_LOST:
		strbuf_addf(m, "inode has no links and is not on the orphan list: its space is "
			    "never freed");
		break;
	case F_CHUNK_NO_BG:
		strbuf_addf(m, "chunk at logical %llu (%llu bytes, type 0x%llx) has no block "
			    "group item", lg, len, a);
		break;
	case F_BG_NO_CHUNK:
		strbuf_addf(m, "block group at logical %llu (%llu bytes, flags 0x%llx) has no "
			    "chunk", lg, len, a);
		break;
	case F_CHUNK_BG_DIFF:
		strbuf_addf(m, "chunk at logical %llu: %llu bytes, type 0x%llx; its block group "
			    "item: %llu bytes, flags 0x%llx", lg, len, a, phys, b);
		break;
	case F_STRIPE_NO_DEV_EXTENT:
		strbuf_addf(m, "chunk at logical %llu (%llu bytes): its stripe on device %llu at "
			    "physical %llu has no device extent", lg, len, dev, phys);
		break;
	case F_DEV_EXTENT_ORPHAN:
		strbuf_addf(m, "device extent on device %llu at physical %llu (%llu bytes) names "
			    "the chunk at logical %llu, %s", dev, phys, a, lg,
			    len ? "which has no stripe there" : "which does not exist");
		break;
	case F_DEV_EXTENT_LEN:
		strbuf_addf(m, "device extent on device %llu at physical %llu of the chunk at "
			    "logical %llu is %llu bytes, the chunk's stripes are %llu", dev, phys,
			    lg, a, b);
		break;
	case F_DEV_BYTES_USED:
		strbuf_addf(m, "device %llu item bytes_used %llu, its device extents add up to %llu",
			    dev, a, b);
		break;
	case F_NBYTES:
		strbuf_addf(m, "inode item nbytes %llu, its file extents add up to %llu", a, b);
		break;
	case F_EXTENT_OVERLAP:
		strbuf_addf(m, "the file extent item at file offset %llu begins before the one "
			    "before it ends (at %llu): two extents map the same file bytes",
			    (unsigned long long)f->file_off, a);
		break;
	case F_EXTENT_HOLE:
		strbuf_addf(m, "no file extent item covers file offset %llu (i_size %llu); "
			    "without the no-holes feature every hole has one",
			    (unsigned long long)f->file_off, a);
		break;
	case F_BG_USED:
		strbuf_addf(m, "block group at logical %llu (%llu bytes): used %llu, its extent "
			    "items add up to %llu", lg, len, a, b);
		break;
	case F_BYTES_USED:
		strbuf_addf(m, "superblock bytes_used %llu, the block groups' used add up to %llu",
			    a, b);
		break;
	}
	strbuf_release(&other);
	strbuf_release(&rel);
}

void btrfs_report_finding(struct scrub_ctx *ctx, const struct tfinding *f, enum severity sev,
		       const char *why)
{
	struct strbuf path = STRBUF_INIT, msg = STRBUF_INIT;
	bool named = f->ino && f->kind != F_REF_NO_ROOT;

	if (named)
		name_of(ctx, f->root, f->ino, &path);
	if (why)
		strbuf_addf(&msg, "changed while being checked (%s): ", why);
	describe(ctx, f, &msg);
	if (f->shared_by)
		strbuf_addf(&msg, "; the same item, in a leaf shared with %llu %s, is seen through "
			    "subvolume %llu%s", f->shared_by, f->shared_by == 1 ? "snapshot" : "snapshots",
			    (unsigned long long)f->shared_root, f->shared_by > 1 ? " and others" : "");
	/* An empty path is the mounted subvolume's top directory. */
	if (why)
		report_changed_at(ctx, check_of(f->kind), NULL, named && path.len ? path.buf : NULL,
				  named ? f->ino : 0, __FILE__, __LINE__, "%s", msg.buf);
	else
		report_at(ctx, sev, check_of(f->kind), NULL, named && path.len ? path.buf : NULL,
			  named ? f->ino : 0, __FILE__, __LINE__, "%s", msg.buf);
	strbuf_release(&path);
	strbuf_release(&msg);
}
