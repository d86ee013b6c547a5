/*
 * btrfs_check: the logical cross-checks of `btrfs check`, on a mounted btrfs.
 *
 * Runs in phase 3, after phase 2 has vouched for the tree blocks'
 * checksums and before their contents are compared: the first pass in a
 * thread of its own beside the walk (btrfs_check_trees_start(), from the
 * backend's scan_inodes_start hook; btrfs_readahead.h reads the trees
 * ahead of it), what it found said and read again after the walk (the
 * scan_inodes hook).  One pass reads, with the streaming reader of
 * btrfs_trees.h (BTRFS_IOC_TREE_SEARCH_V2):
 *
 *  1. the root tree: every fs tree (5, each subvolume and snapshot, the
 *     data relocation tree), and whether it shares leaves with another
 *     (a snapshot: its ROOT_ITEM's offset or parent_uuid is set); its
 *     ROOT_REF / ROOT_BACKREF items (btrfs_roots.c: btrfs.root_ref);
 *  2. each fs tree in key order: an inode's INODE_ITEM comes before its
 *     EXTENT_DATA items, so nbytes is compared with the sum of the inode's
 *     regular/prealloc extents' num_bytes (disk_bytenr != 0) plus its
 *     inline extents' ram_bytes when the next inode starts, for regular
 *     files and symlinks as `btrfs check` does (btrfs.nbytes; inodes with
 *     no links are being deleted: skipped); the items' file ranges must
 *     not overlap and, without the no-holes feature, must cover the file
 *     up to i_size (btrfs.file_extent); its flags must be ones the kernel
 *     sets (btrfs.inode_flags); its names go by too
 *     (btrfs_names.c: btrfs.dir_item, btrfs.inode_ref, btrfs.orphan).
 *     Each file extent item with disk_bytenr != 0 is kept as a 72-byte
 *     record (disk_bytenr, tree, inode, back reference offset, the bytes
 *     its checksums cover);
 *  3. the block groups (the block group tree if the filesystem has one,
 *     else the extent tree's BLOCK_GROUP_ITEMs);
 *  4. the extent tree in key order, merged with the sorted records: each
 *     data extent's refs must equal the sum of its back references (inline
 *     and keyed EXTENT_DATA_REF / SHARED_DATA_REF); each back reference
 *     (tree, inode, offset, count) must be matched by that many file extent
 *     items of that tree (exactly when the tree shares no leaves and the
 *     extent has no shared reference, at most otherwise: a snapshot's file
 *     extent items in leaves it still shares are counted by the reference
 *     of the leaves' owner or by a SHARED_DATA_REF to the leaf, which a
 *     mounted reader cannot see); each file extent item must have a back
 *     reference naming its inode and offset, or the extent a shared one
 *     (btrfs.extent_refs; btrfs.crosslink when the extent's references name
 *     only other files).  Reflinks are references of their own and
 *     snapshots share through the rules above: neither is ever reported.
 *     Extent and metadata items are summed per block group
 *     (btrfs.bg_used), and the block groups' used bytes are summed and
 *     compared with the superblock's bytes_used read from the first device
 *     (btrfs.bytes_used).  Alongside, a second reader streams the csum
 *     tree (btrfs_csum.c: btrfs.csum) and a third the free space tree
 *     (btrfs_fst.c: btrfs.free_space_tree), or, without one, the v1 space
 *     cache of each block group is read from the device as the extents
 *     reach it (btrfs_v1cache.c: btrfs.space_cache); with quotas on, every
 *     extent's references are kept and the qgroups, every level, compared
 *     with them afterwards (btrfs_qgroup.c: btrfs.qgroup);
 *  5. the chunk tree and the device tree, against each other and the block
 *     groups (btrfs_chunks.c: btrfs.chunk).
 *
 * A rescue= mount may leave trees unloaded (ignorebadroots: those the
 * kernel could not read; ignoredatacsums: the csum tree), which a tree
 * search then does not find (ENOENT).  Such a mount is read-only, and the
 * readers then walk the tree from the devices instead (btrfs_devtree.h),
 * feeding the same callbacks; a block bad in every copy is an error and
 * the findings that need the whole tree are dropped (drop_incomplete()).
 * Where even that cannot be done, what needs the tree is not checked, an
 * info says so once (report_unread_trees()), and the rest is.
 *
 * The live-filesystem rule: btrfs applies extent reference changes at
 * transaction commit (delayed refs), and updates block group items and the
 * superblock only then, so a filesystem in use disagrees with itself in
 * between.  A pass that finds nothing is the end.  Otherwise the trees are
 * read again once what the pass read is committed: without -n a commit is
 * forced (BTRFS_IOC_SYNC); with -n nothing may be written, so the kernel's
 * own commit is waited for (the disk superblock's generation reaching the
 * newest leaf the pass read; at most the commit interval and a margin), and
 * not at all when everything read was committed already.  A filesystem
 * read-only as a whole (ctx->fs_readonly: its superblock, not a read-only
 * bind of one written elsewhere) is not in flux: it is read again at once.
 * A finding whose items -- keys and the fields it compares -- read the
 * same in both passes is an error, whatever the generation of the leaves
 * that hold them (a background transaction, the cleaner deleting an unused
 * block group, rewrites leaves and leaves the damage in them as it was).
 * One exception: when the leaf
 * that holds the finding's subject (a file extent item, a directory entry,
 * a name) is being rewritten as the second reading is judged, a file being
 * written can show the same stale reference twice for two causes, so a
 * third reading must agree.  A counter (a block group's used bytes, the
 * superblock's, a free space info's count) is summed from many items read
 * one leaf after another, so a reading that overlaps a commit can sum a
 * torn mix of old and new items -- and a churn that repeats itself can tear
 * the same way twice (seen: a free space info counting 1 range against 2,
 * in two readings, both with leaves newer than the commit on disk when the
 * reading began, but committed by the time it was judged).  A counter
 * with an item newer than the commit on disk when its reading began
 * therefore needs a third agreeing reading.  Not a reading with none: the
 * items of every block group's free space share a leaf or two, which any
 * allocation anywhere rewrites.  Where the same items read differently, the
 * trees are read again, at most MAX_PASSES times and, past the third, for
 * twice the commit interval; a finding no two readings agree on, or that
 * goes, is an info "changed while being checked", counted as not confirmed
 * (report.h).
 *
 * Memory: three readers' 256 KiB buffers, 72 bytes per file extent item
 * with a disk extent (72 MiB per million, up to twice that while the array
 * doubles; sorted in place), 48 bytes per block group, 40 per subvolume, the
 * chunks and their stripes (btrfs_chunks.c), the
 * back references, csum items and free ranges that reach the data extent
 * being looked at, 8 bytes per unlinked inode, and at most MAX_FINDINGS
 * findings per pass (btrfs_names.h says what a subvolume whose names
 * disagree costs), and without a free space tree the v1 cache headers
 * and one block group's cache at a time (btrfs_v1cache.c).
 */
#include "backends/btrfs/btrfs_check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "backends/btrfs/btrfs_datasum.h"
#include "backends/btrfs/btrfs_readahead.h"
#include "backends/btrfs/btrfs_trees.h"
#include "report/checks.h"
#include "scan/context.h"
#include "lib/inokey.h"
#include "lib/mountpoint.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/thread.h"

/* Items read between looks at cancellation: a few milliseconds' worth. */
#define CANCEL_CHECK_ITEMS 4096
/* Findings kept per pass; more are only counted (an info says how many). */
#define MAX_FINDINGS 4096
/* The primary superblock: 64 KiB into the device, 4 KiB long. */
#define SUPER_OFFSET (64 * 1024)
#define SUPER_SIZE 4096
#define SUPER_FSID_OFF 0x20
#define SUPER_MAGIC_OFF 0x40
#define SUPER_GENERATION_OFF 0x48
#define SUPER_BYTES_USED_OFF 0x78
#define SUPER_CACHE_GENERATION_OFF 0x22b
/* Readings of the trees at most while findings move (the first included). */
#define MAX_PASSES 4
/* btrfs's default commit interval (BTRFS_DEFAULT_COMMIT_INTERVAL), seconds. */
#define DEFAULT_COMMIT_S 30
/* A longer commit interval is as good as never: -n's waits stop at a day. */
#define MAX_COMMIT_S 86400
/* -n waits for the kernel's commit this much past its interval: a commit takes time. */
#define COMMIT_MARGIN_S 5
/* How often the disk superblock is read while waiting: a 4 KiB read. */
#define COMMIT_POLL_MS 100
/* Inline reference sizes: a type byte and its payload. */
#define IREF_DATA_SIZE (1 + sizeof(struct btrfs_extent_data_ref))
#define IREF_SHARED_DATA_SIZE (1 + 8 + 4)
#define IREF_OFFSET_SIZE (1 + 8)	/* tree block refs, owner refs */
/* Simple-quota owner reference (not in older uapi headers). */
#define EXTENT_OWNER_REF_KEY 172
/* The deepest tree btrfs builds has levels 0-7 (BTRFS_MAX_LEVEL, not in the uapi headers). */
#define MAX_TREE_LEVEL 8
/* Where the regular/prealloc fields start in a file extent item. */
#define FE_DISK_BYTENR 21
#define FE_OFFSET 37
#define FE_NUM_BYTES 45
#define FE_REG_SIZE 53
#define FE_COMPRESSION 16
#define FE_DISK_NUM_BYTES 29
/* btrfs_inode_item.flags (BTRFS_INODE_*, not in the uapi headers). */
#define INODE_NODATASUM (1ULL << 0)
#define INODE_NOCOMPRESS (1ULL << 3)
#define INODE_IMMUTABLE (1ULL << 6)
#define INODE_APPEND (1ULL << 7)
#define INODE_COMPRESS (1ULL << 11)
/*
 * The bits the kernel defines: BTRFS_INODE_FLAG_MASK (bits 0-11, and
 * ROOT_ITEM_INIT, bit 31) and, in the upper half, the read-only compat
 * flags (BTRFS_INODE_RO_VERITY, bit 32).
 */
#define INODE_FLAGS_KNOWN (0xfffULL | 1ULL << 31 | 1ULL << 32)

static const struct btrfs_tkey KEY_MIN = { 0, 0, 0 };
static const struct btrfs_tkey KEY_MAX = { UINT64_MAX, UINT8_MAX, UINT64_MAX };

/* Is root a subvolume tree the kernel refuses a block of (read_fs_trees())? */
static bool root_unreadable(const struct pass *p, uint64_t root)
{
	for (size_t i = 0; i < p->nr_roots && p->nr_unreadable; i++)
		if (p->roots[i].id == root && p->roots[i].err)
			return true;
	return false;
}

void btrfs_add_finding(struct pass *p, const struct tfinding *f)
{
	/*
	 * A tree read in part says nothing of what it holds: the references
	 * to its extents that were not read, its names and link counts.  Its
	 * damage is the finding (report_unread_trees()).
	 */
	if (p->nr_unreadable && root_unreadable(p, f->root)) {
		p->unreadable_skipped++;
		return;
	}
	if (p->nr_f >= MAX_FINDINGS) {
		p->dropped++;
		return;
	}
	p->f[p->nr_f++] = *f;
}

/* Read a whole key range, calling fn on every item; counts items read. */
static int read_tree(struct pass *p, uint64_t tree, struct btrfs_tkey min, struct btrfs_tkey max,
		     int (*fn)(struct pass *, uint64_t, const struct btrfs_tree_item *),
		     unsigned long long *count)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, p->fd, tree, min, max);

	btrfs_pass_fallback(p, &r);
	while (ret == 0) {
		/* A signal or -a stops the check within this many items. */
		if (r.items % CANCEL_CHECK_ITEMS == 0 && scrub_should_stop(p->ctx)) {
			ret = -ECANCELED;
			break;
		}
		if ((ret = btrfs_tree_next(&r, &it)) <= 0)
			break;
		if (it.transid > p->max_transid)
			p->max_transid = it.transid;
		ret = fn(p, tree, &it);
	}
	*count += r.items;
	p->calls += r.calls;
	btrfs_tree_close(&r);
	return ret;
}

void btrfs_pass_fallback(struct pass *p, struct btrfs_tree_reader *r)
{
	if (p->devread)
		btrfs_tree_fallback(r, &p->devlog);
}

static int count_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	(void)p;
	(void)tree;
	(void)it;
	return 0;
}

/*
 * A tree the kernel refused a block of (is_damage()), read once more:
 * the same error is damage; one that reads through now saw a change
 * (-EAGAIN).  Other errors are the caller's.
 */
static int read_again(struct pass *p, uint64_t tree)
{
	unsigned long long items = 0;
	int ret = read_tree(p, tree, KEY_MIN, KEY_MAX, count_item, &items);

	return ret == 0 ? -EAGAIN : ret;
}

int btrfs_read_tree(struct pass *p, uint64_t tree, struct btrfs_tkey min, struct btrfs_tkey max,
		    int (*fn)(struct pass *, uint64_t, const struct btrfs_tree_item *))
{
	return read_tree(p, tree, min, max, fn, &p->quota_items);
}

/* ---- 1. the root tree ---- */

static bool is_fs_tree(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID || id == BTRFS_DATA_RELOC_TREE_OBJECTID ||
	       (id >= BTRFS_FIRST_FREE_OBJECTID && id <= BTRFS_LAST_FREE_OBJECTID);
}

/*
 * The trees the kernel keeps one of, found by (id, ROOT_ITEM, 0): extent,
 * device, csum, quota, uuid, free space, block group, raid stripe.  (With
 * extent-tree-v2, still experimental, the offset numbers one of several
 * global roots: not judged.)
 */
#ifndef BTRFS_RAID_STRIPE_TREE_OBJECTID
#define BTRFS_RAID_STRIPE_TREE_OBJECTID 12ULL	/* Linux 6.7; not in older headers */
#endif

static bool is_global_tree(uint64_t id)
{
	return id == BTRFS_EXTENT_TREE_OBJECTID || id == BTRFS_DEV_TREE_OBJECTID ||
	       (id >= BTRFS_CSUM_TREE_OBJECTID && id <= BTRFS_RAID_STRIPE_TREE_OBJECTID);
}

static void check_global_root_key(struct pass *p, const struct btrfs_tree_item *it)
{
	uint64_t id = it->key.objectid;

	if (!is_global_tree(id) || !it->key.offset || p->extent_tree_v2)
		return;
	p->bad_root_keys |= 1U << id;
	btrfs_add_finding(p, &(struct tfinding){
		.kind = F_ROOT_KEY, .logical = id, .a = it->key.offset, .transid = it->transid,
	});
}

static int root_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	static const unsigned char zero_uuid[BTRFS_UUID_SIZE];
	struct fs_root *r;

	(void)tree;
	if (btrfs_v1_root_item(p, it) < 0)
		return -ENOMEM;
	if (it->key.type == BTRFS_ROOT_REF_KEY || it->key.type == BTRFS_ROOT_BACKREF_KEY)
		return btrfs_root_ref_item(p, it);
	if (it->key.type != BTRFS_ROOT_ITEM_KEY)
		return 0;
	check_global_root_key(p, it);
	if (it->key.objectid == BTRFS_BLOCK_GROUP_TREE_OBJECTID)
		p->bg_tree = true;
	if (it->key.objectid == BTRFS_FREE_SPACE_TREE_OBJECTID)
		p->fst = true;
	if (!is_fs_tree(it->key.objectid) ||
	    it->len < offsetof(struct btrfs_root_item, drop_progress))
		return 0;
	if (btrfs_grow((void **)&p->roots, &p->alloc_roots, p->nr_roots + 1, sizeof(*r)) < 0)
		return -ENOMEM;
	r = &p->roots[p->nr_roots++];
	*r = (struct fs_root){ 0 };
	r->id = it->key.objectid;
	r->transid = it->transid;
	r->dead = btrfs_get32(it->data + offsetof(struct btrfs_root_item, refs)) == 0;
	r->shared = it->key.offset != 0;
	r->created = it->key.offset;
	if (it->len >= offsetof(struct btrfs_root_item, parent_uuid) + BTRFS_UUID_SIZE &&
	    memcmp(it->data + offsetof(struct btrfs_root_item, parent_uuid), zero_uuid,
		   BTRFS_UUID_SIZE))
		r->shared = true;
	return 0;
}

static const struct fs_root *find_root(const struct pass *p, uint64_t id)
{
	for (size_t i = 0; i < p->nr_roots; i++)
		if (p->roots[i].id == id)
			return &p->roots[i];
	return NULL;
}

/* ---- 2. the fs trees ---- */


/*
 * Where the inode's file bytes below i_size are first not covered by an
 * item, or UINT64_MAX: btrfs check's rule without the no-holes feature
 * (then a hole has an item of its own, disk_bytenr 0), for files and
 * symlinks with links and a size.
 */
static uint64_t first_uncovered(const struct pass *p, const struct inode_sum *s)
{
	uint64_t at;

	if (p->no_holes || !s->nlink || !s->size || !(S_ISREG(s->mode) || S_ISLNK(s->mode)))
		return UINT64_MAX;
	at = !s->have_ext || s->ext_start ? 0 : s->gap ? s->gap_at : s->ext_end;
	return at < s->size ? at : UINT64_MAX;
}

/* A regular file btrfs keeps no data checksums for: -x reads it (btrfs_datasum.h). */
static void note_nodatasum(struct pass *p, uint64_t root, const struct inode_sum *s)
{
	if (!S_ISREG(s->mode) || !(s->flags & INODE_NODATASUM) || !s->size)
		return;
	/* no memory: the list is incomplete, so phase 5 reads every file */
	if (btrfs_grow((void **)&p->nodatasum, &p->alloc_nodatasum, p->nr_nodatasum + 1,
		       sizeof(*p->nodatasum)) < 0)
		p->nodatasum_lost = true;
	else
		p->nodatasum[p->nr_nodatasum++] = (struct subvol_ino){ root, s->ino };
}

static void inode_done(struct pass *p, uint64_t root)
{
	struct inode_sum *s = &p->cur_inode;
	uint64_t hole;

	if (!s->active)
		return;
	note_nodatasum(p, root, s);
	/* btrfs check's rule: files and symlinks (a subvolume's root directory has nbytes). */
	if (s->nlink && (S_ISREG(s->mode) || S_ISLNK(s->mode)) && s->nbytes != s->found)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_NBYTES, .root = root, .ino = s->ino,
			.a = s->nbytes, .b = s->found, .transid = s->transid, .stamp = s->stamp,
		});
	if (s->overlap)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_EXTENT_OVERLAP, .root = root, .ino = s->ino,
			.file_off = s->overlap_at, .a = s->overlap_end, .transid = s->transid, .stamp = s->stamp,
		});
	if ((hole = first_uncovered(p, s)) != UINT64_MAX)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_EXTENT_HOLE, .root = root, .ino = s->ino,
			.file_off = hole, .a = s->size, .transid = s->transid, .stamp = s->stamp,
		});
	s->active = false;
}

/*
 * The file range of the current inode's file extent item it, of type:
 * num_bytes of a regular or preallocated one (a hole's too), an inline
 * one's ram_bytes to the next sector.  Items come in file offset order;
 * one that begins before the last ended overlaps it (the kernel's tree
 * checker refuses that only between two items of one leaf).
 */
static void extent_range(struct pass *p, const struct btrfs_tree_item *it, uint8_t type)
{
	struct inode_sum *s = &p->cur_inode;
	uint64_t off = it->key.offset, len, mask = p->sectorsize - 1;

	if (type == BTRFS_FILE_EXTENT_INLINE)
		len = (btrfs_get64(it->data + 8) + mask) & ~mask;
	else if (it->len >= FE_REG_SIZE)
		len = btrfs_get64(it->data + FE_NUM_BYTES);
	else
		return;
	if (!s->have_ext) {
		s->have_ext = true;
		s->ext_start = off;
	} else if (off < s->ext_end && !s->overlap) {
		s->overlap = true;
		s->overlap_at = off;
		s->overlap_end = s->ext_end;
	} else if (off > s->ext_end && !s->gap) {
		s->gap = true;
		s->gap_at = s->ext_end;
	}
	s->ext_end = off + len;
}

/*
 * Which disk bytes of a written (regular) extent carry checksums: all of a
 * compressed extent, even in a nodatasum file, else the part the file
 * uses; a prealloc extent has none, the data relocation tree's inodes are
 * not looked at.
 */
static void want_csum(struct pass *p, uint64_t root, struct fe_rec *e, uint8_t type,
		      const struct btrfs_tree_item *it)
{
	const struct inode_sum *s = &p->cur_inode;

	if (type != BTRFS_FILE_EXTENT_REG || root == BTRFS_DATA_RELOC_TREE_OBJECTID ||
	    !s->active || s->ino != it->key.objectid)
		return;
	if (it->data[FE_COMPRESSION]) {
		e->cs_start = e->bytenr;
		e->cs_len = btrfs_get64(it->data + FE_DISK_NUM_BYTES);
		/* compressed data is always checksummed, even in a nodatasum file */
		e->want_csum = s->flags & INODE_NODATASUM ? WANT_CSUM_COMPRESSED : 1;
		return;
	}
	e->cs_start = e->bytenr + btrfs_get64(it->data + FE_OFFSET);
	e->cs_len = btrfs_get64(it->data + FE_NUM_BYTES);
	e->want_csum = s->flags & INODE_NODATASUM ? -1 : 1;
}

static int file_extent(struct pass *p, uint64_t root, const struct btrfs_tree_item *it)
{
	struct inode_sum *s = &p->cur_inode;
	uint8_t type;
	uint64_t bytenr;

	if (it->len < FE_DISK_BYTENR)
		return 0;
	type = it->data[20];
	if (s->active && s->ino == it->key.objectid) {
		if (it->transid > s->transid)
			s->transid = it->transid;
		extent_range(p, it, type);
	}
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		if (s->active && s->ino == it->key.objectid)
			s->found += btrfs_get64(it->data + 8);
		return 0;
	}
	if (it->len < FE_REG_SIZE || !(bytenr = btrfs_get64(it->data + FE_DISK_BYTENR)))
		return 0;
	if (s->active && s->ino == it->key.objectid)
		s->found += btrfs_get64(it->data + FE_NUM_BYTES);
	if (btrfs_grow((void **)&p->fe, &p->alloc_fe, p->nr_fe + 1, sizeof(*p->fe)) < 0)
		return -ENOMEM;
	p->fe[p->nr_fe++] = (struct fe_rec){
		.bytenr = bytenr, .root = root, .ino = it->key.objectid,
		.ref_off = it->key.offset - btrfs_get64(it->data + FE_OFFSET),
		.file_off = it->key.offset, .transid = it->transid,
	};
	want_csum(p, root, &p->fe[p->nr_fe - 1], type, it);
	p->file_extents++;
	return 0;
}

/*
 * An inode item's flags: bits no kernel defines (its tree checker refuses
 * unknown ones in the lower half, read-only compat ones only on a
 * read-write mount); a symlink immutable or append-only (`btrfs check`:
 * "odd inode flags"; the kernel sets no flags on symlinks); COMPRESS with
 * NOCOMPRESS (the kernel refuses to set both).
 */
static void check_inode_flags(struct pass *p, uint64_t root, const struct inode_sum *s)
{
	struct tfinding f = { .root = root, .ino = s->ino, .a = s->flags,
			      .transid = s->transid, .stamp = s->stamp };

	if (s->flags & ~INODE_FLAGS_KNOWN) {
		f.kind = F_FLAGS_UNKNOWN;
		f.b = s->flags & ~INODE_FLAGS_KNOWN;
		btrfs_add_finding(p, &f);
	}
	if (S_ISLNK(s->mode) && (s->flags & (INODE_IMMUTABLE | INODE_APPEND))) {
		f.kind = F_FLAGS_SYMLINK;
		btrfs_add_finding(p, &f);
	}
	if ((s->flags & INODE_COMPRESS) && (s->flags & INODE_NOCOMPRESS)) {
		f.kind = F_FLAGS_COMPRESS;
		btrfs_add_finding(p, &f);
	}
}

static int fs_item(struct pass *p, uint64_t root, const struct btrfs_tree_item *it)
{
	struct inode_sum *s = &p->cur_inode;
	int ret = names_item(&p->names, p, it);

	if (ret < 0)
		return ret;
	if (it->key.type == BTRFS_INODE_ITEM_KEY) {
		inode_done(p, root);
		if (it->len < sizeof(struct btrfs_inode_item))
			return 0;
		*s = (struct inode_sum){
			.ino = it->key.objectid, .active = true, .transid = it->transid,
			.nbytes = btrfs_get64(it->data + offsetof(struct btrfs_inode_item, nbytes)),
			.nlink = btrfs_get32(it->data + offsetof(struct btrfs_inode_item, nlink)),
			.mode = btrfs_get32(it->data + offsetof(struct btrfs_inode_item, mode)),
			.flags = btrfs_get64(it->data + offsetof(struct btrfs_inode_item, flags)),
			.size = btrfs_get64(it->data + offsetof(struct btrfs_inode_item, size)),
			.stamp = btrfs_inode_stamp(it->data),
		};
		check_inode_flags(p, root, s);
		p->inodes++;
		return 0;
	}
	if (it->key.type == BTRFS_EXTENT_DATA_KEY)
		return file_extent(p, root, it);
	return 0;
}

/* An error of a tree read: damage the kernel met (a tree block unreadable). */
static bool is_damage(int err)
{
	return err == -EIO || err == -EUCLEAN;
}

/*
 * Every subvolume's tree.  One the kernel refuses a block of (EIO, or
 * EUCLEAN from its tree checker: a leaf it will not hand out) is damage,
 * not a failure to check: it is marked, its findings so far are dropped
 * and later ones left out (btrfs_add_finding()), and the other trees are
 * read on.
 */
static int read_fs_trees(struct pass *p)
{
	for (size_t i = 0; i < p->nr_roots; i++) {
		size_t nr_f = p->nr_f;
		int ret;

		if (p->roots[i].dead)
			continue;
		p->cur_inode.active = false;
		names_begin(&p->names, p->roots[i].id);
		ret = read_tree(p, p->roots[i].id, KEY_MIN, KEY_MAX, fs_item, &p->fs_items);
		if (is_damage(ret)) {
			p->roots[i].err = ret;
			p->nr_unreadable++;
			p->nr_f = nr_f;
			continue;
		}
		inode_done(p, p->roots[i].id);
		if (ret == 0)
			ret = names_end(&p->names, p, p->fd);
		/* ENOENT: deleted since the root tree was read. */
		if (ret < 0 && ret != -ENOENT)
			return ret;
	}
	return 0;
}

static int fe_cmp(const void *a, const void *b)
{
	const struct fe_rec *x = a, *y = b;

	if (x->bytenr != y->bytenr)
		return x->bytenr < y->bytenr ? -1 : 1;
	if (x->root != y->root)
		return x->root < y->root ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->ref_off != y->ref_off)
		return x->ref_off < y->ref_off ? -1 : 1;
	return 0;
}

/* ---- 3. block groups ---- */

static int bg_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	struct bgroup *g;

	(void)tree;
	if (it->key.type != BTRFS_BLOCK_GROUP_ITEM_KEY || it->len < sizeof(struct btrfs_block_group_item))
		return 0;
	if (btrfs_grow((void **)&p->bg, &p->alloc_bg, p->nr_bg + 1, sizeof(*p->bg)) < 0)
		return -ENOMEM;
	g = &p->bg[p->nr_bg++];
	*g = (struct bgroup){
		.start = it->key.objectid, .len = it->key.offset,
		.used = btrfs_get64(it->data), .transid = it->transid,
		.flags = btrfs_get64(it->data + offsetof(struct btrfs_block_group_item, flags)),
	};
	/* Extent items at the group's start sort before its item (extent tree). */
	if (p->pending_at == g->start) {
		g->found += p->pending_sum;
		g->found_transid = p->pending_transid;
		p->pending_sum = p->pending_transid = 0;
	}
	p->bg_items++;
	return 0;
}

/* What a block group must hold for an extent of each kind (mixed groups hold both). */
#define BG_FOR_DATA BTRFS_BLOCK_GROUP_DATA
#define BG_FOR_TREE (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM)

/* A data extent or tree block in a group that holds none of its kind. */
static void check_group_type(struct pass *p, const struct bgroup *g, uint64_t start,
			     uint64_t len, uint64_t transid, uint64_t kind)
{
	if (g->flags & kind)
		return;
	btrfs_add_finding(p, &(struct tfinding){
		.kind = F_EXTENT_TYPE, .logical = start, .len = len, .transid = transid,
		.a = kind, .b = g->flags & (BG_FOR_DATA | BG_FOR_TREE),
	});
}

/*
 * Add an extent's bytes to the block group that holds it, which must hold
 * extents of its kind (BG_FOR_*).  The one at a group's very start sorts
 * before the group's item in the extent tree: its kind is not judged.
 */
static void bg_account(struct pass *p, uint64_t start, uint64_t len, uint64_t transid,
		       uint64_t kind)
{
	size_t lo = 0, hi = p->nr_bg;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->bg[mid].start + p->bg[mid].len <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nr_bg && p->bg[lo].start <= start) {
		check_group_type(p, &p->bg[lo], start, len, transid, kind);
		p->bg[lo].found += len;
		if (transid > p->bg[lo].found_transid)
			p->bg[lo].found_transid = transid;
		return;
	}
	if (p->pending_at != start) {
		p->pending_at = start;
		p->pending_sum = p->pending_transid = 0;
	}
	p->pending_sum += len;
	if (transid > p->pending_transid)
		p->pending_transid = transid;
}

/* ---- 4. the extent tree ---- */

static int ref_cmp(const void *a, const void *b)
{
	const struct data_ref *x = a, *y = b;

	if (x->shared != y->shared)
		return x->shared ? 1 : -1;
	if (x->root != y->root)
		return x->root < y->root ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return 0;
}

static int add_ref(struct pass *p, const struct data_ref *r)
{
	if (btrfs_grow((void **)&p->refs, &p->alloc_refs, p->nr_refs + 1, sizeof(*p->refs)) < 0)
		return -ENOMEM;
	p->refs[p->nr_refs++] = *r;
	return 0;
}

/*
 * The back reference (root, ino, off) of the extent, by binary search in
 * the sorted references; with any_root, one from any tree (a linear scan,
 * taken only when the exact one is missing).
 */
static const struct data_ref *ref_for(const struct pass *p, uint64_t root, uint64_t ino,
				      uint64_t off, bool any_root)
{
	if (!any_root) {
		struct data_ref key = { .root = root, .ino = ino, .off = off };

		return find_item(&key, p->refs, p->nr_refs, sizeof(*p->refs), ref_cmp);
	}
	for (size_t i = 0; i < p->nr_refs; i++) {
		const struct data_ref *r = &p->refs[i];

		if (!r->shared && r->ino == ino && r->off == off && (any_root || r->root == root))
			return r;
	}
	return NULL;
}

/* The file extent items [from, to) of one (tree, inode, offset) against the refs. */
static void check_group(struct pass *p, size_t from, size_t to, bool has_shared)
{
	const struct fe_rec *e = &p->fe[from];
	const struct fs_root *root = find_root(p, e->root);
	const struct data_ref *r = ref_for(p, e->root, e->ino, e->ref_off, false);
	uint64_t n = to - from, transid = p->d_transid;
	bool exact = root && !root->shared && !has_shared;

	for (size_t i = from; i < to; i++)
		transid = p->fe[i].transid > transid ? p->fe[i].transid : transid;
	if (!r && !has_shared && !ref_for(p, e->root, e->ino, e->ref_off, true))
		btrfs_add_finding(p, &(struct tfinding){
			.kind = p->nr_refs ? F_CROSSLINK : F_NO_BACKREF, .root = e->root,
			.ino = e->ino, .file_off = e->file_off, .logical = p->d_bytenr,
			.len = p->d_len, .transid = transid,
			.other_root = p->nr_refs ? p->refs[0].root : 0,
			.other_ino = p->nr_refs ? p->refs[0].ino : 0, .stamp = p->d_gen,
		});
	else if (r && (exact ? r->count != n : r->count > n))
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_REF_COUNT, .root = e->root, .ino = e->ino,
			.file_off = e->file_off, .logical = p->d_bytenr, .len = p->d_len,
			.a = r->count, .b = n, .ref_off = r->off, .transid = transid,
			.stamp = p->d_gen,
		});
}

/* A back reference that no file extent item [fe_pos, end) of its tree uses. */
static void check_unused_ref(struct pass *p, const struct data_ref *r, size_t end)
{
	const struct fs_root *root = find_root(p, r->root);
	struct fe_rec key = { .bytenr = p->d_bytenr, .root = r->root, .ino = r->ino,
			      .ref_off = r->off };

	/* Dropped trees and relocation trees (balance) keep references too. */
	if ((root && root->dead) || !is_fs_tree(r->root))
		return;
	if (end > p->fe_pos &&
	    find_item(&key, p->fe + p->fe_pos, end - p->fe_pos, sizeof(*p->fe), fe_cmp))
		return;
	btrfs_add_finding(p, &(struct tfinding){
		.kind = root ? F_REF_COUNT : F_REF_NO_ROOT, .root = r->root, .ino = r->ino,
		.file_off = r->off, .logical = p->d_bytenr, .len = p->d_len,
		.a = r->count, .b = 0, .ref_off = r->off, .transid = p->d_transid,
		.stamp = p->d_gen,
	});
}

/* File extent items before the data extent at bytenr point at nothing. */
static void skip_to(struct pass *p, uint64_t bytenr)
{
	while (p->fe_pos < p->nr_fe && p->fe[p->fe_pos].bytenr < bytenr) {
		const struct fe_rec *e = &p->fe[p->fe_pos];

		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_NO_EXTENT, .root = e->root, .ino = e->ino,
			.file_off = e->file_off, .logical = e->bytenr, .transid = e->transid,
		});
		/* One finding per (extent, tree, inode): a file's many pieces. */
		while (p->fe_pos < p->nr_fe && p->fe[p->fe_pos].bytenr == e->bytenr &&
		       p->fe[p->fe_pos].root == e->root && p->fe[p->fe_pos].ino == e->ino)
			p->fe_pos++;
	}
}

static void data_extent_done(struct pass *p)
{
	uint64_t sum = 0;
	bool has_shared = false;
	size_t end;

	if (!p->in_data)
		return;
	p->in_data = false;
	p->data_extents++;
	skip_to(p, p->d_bytenr);
	sort_items(p->refs, p->nr_refs, sizeof(*p->refs), ref_cmp);
	for (size_t i = 0; i < p->nr_refs; i++) {
		sum += p->refs[i].count;
		has_shared |= p->refs[i].shared;
	}
	end = p->fe_pos;
	while (end < p->nr_fe && p->fe[end].bytenr == p->d_bytenr)
		end++;
	if (sum != p->d_refs) {
		const struct data_ref *r = p->nr_refs && !p->refs[0].shared ? &p->refs[0] : NULL;

		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_REFS_SUM, .logical = p->d_bytenr, .len = p->d_len,
			.root = r ? r->root : end > p->fe_pos ? p->fe[p->fe_pos].root : 0,
			.ino = r ? r->ino : end > p->fe_pos ? p->fe[p->fe_pos].ino : 0,
			.a = p->d_refs, .b = sum, .transid = p->d_transid, .stamp = p->d_gen,
		});
	}
	for (size_t i = p->fe_pos; i < end;) {
		size_t j = i + 1;

		while (j < end && !fe_cmp(&p->fe[i], &p->fe[j]))
			j++;
		check_group(p, i, j, has_shared);
		i = j;
	}
	for (size_t i = 0; i < p->nr_refs; i++)
		if (!p->refs[i].shared)
			check_unused_ref(p, &p->refs[i], end);
	btrfs_check_csums(p, p->fe_pos, end);
	p->fe_pos = end;
}

/* The inline references after an EXTENT_ITEM's fixed part. */
static int inline_refs(struct pass *p, const struct btrfs_tree_item *it)
{
	size_t off = sizeof(struct btrfs_extent_item);

	while (off < it->len) {
		const unsigned char *q = it->data + off;
		int ret = 0;

		if (q[0] == BTRFS_EXTENT_DATA_REF_KEY && off + IREF_DATA_SIZE <= it->len) {
			ret = add_ref(p, &(struct data_ref){
				.root = btrfs_get64(q + 1), .ino = btrfs_get64(q + 9),
				.off = btrfs_get64(q + 17), .count = btrfs_get32(q + 25),
			});
			off += IREF_DATA_SIZE;
		} else if (q[0] == BTRFS_SHARED_DATA_REF_KEY && off + IREF_SHARED_DATA_SIZE <= it->len) {
			ret = add_ref(p, &(struct data_ref){
				.shared = true, .root = btrfs_get64(q + 1), .count = btrfs_get32(q + 9),
			});
			off += IREF_SHARED_DATA_SIZE;
		} else if (q[0] == EXTENT_OWNER_REF_KEY || q[0] == BTRFS_TREE_BLOCK_REF_KEY ||
			   q[0] == BTRFS_SHARED_BLOCK_REF_KEY) {
			off += IREF_OFFSET_SIZE;
		} else {
			break;	/* unknown: the scrub and the kernel's tree checker say more */
		}
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Where the inline references from byte off on stop being ones of a known type (len: none). */
static size_t bad_iref(const struct btrfs_tree_item *it, size_t off)
{
	while (off < it->len) {
		size_t size;

		switch (it->data[off]) {
		case BTRFS_EXTENT_DATA_REF_KEY: size = IREF_DATA_SIZE; break;
		case BTRFS_SHARED_DATA_REF_KEY: size = IREF_SHARED_DATA_SIZE; break;
		case EXTENT_OWNER_REF_KEY:
		case BTRFS_TREE_BLOCK_REF_KEY:
		case BTRFS_SHARED_BLOCK_REF_KEY: size = IREF_OFFSET_SIZE; break;
		default: return off;
		}
		if (off + size > it->len)
			return off;	/* runs past the item */
		off += size;
	}
	return it->len;
}

/*
 * An extent item's own fields, as the kernel's tree checker judges them
 * (it refuses the leaf: on a rescue= mount the extent tree is then read
 * from the devices) and `btrfs check` does: a generation past the
 * superblock's next transaction ("invalid generation for extent"; on a
 * live filesystem one no newer than its leaf is a transaction committed
 * since the superblock was read), an inline reference of no known type
 * ("corrupt extent record"), a METADATA_ITEM's level past the deepest
 * tree ("bad backref level").
 */
/* btrfs's stripe length: scrub and RAID deal metadata in pieces of this. */
#define STRIPE_LEN (64 * 1024)

static void check_extent_fields(struct pass *p, const struct btrfs_tree_item *it)
{
	const struct btrfs_tkey *k = &it->key;
	bool meta = k->type == BTRFS_METADATA_ITEM_KEY;
	uint64_t gen, flags;
	size_t off = sizeof(struct btrfs_extent_item), bad;
	struct tfinding f;

	if ((!meta && k->type != BTRFS_EXTENT_ITEM_KEY) || it->len < off)
		return;
	gen = btrfs_get64(it->data + offsetof(struct btrfs_extent_item, generation));
	flags = btrfs_get64(it->data + offsetof(struct btrfs_extent_item, flags));
	f = (struct tfinding){ .logical = k->objectid, .len = meta ? p->nodesize : k->offset,
			       .transid = it->transid, .stamp = gen };
	if (meta && k->offset >= MAX_TREE_LEVEL) {
		f.kind = F_EXTENT_LEVEL;
		f.a = k->offset;
		btrfs_add_finding(p, &f);
	}
	if ((meta || (flags & BTRFS_EXTENT_FLAG_TREE_BLOCK)) &&
	    k->objectid / STRIPE_LEN != (k->objectid + p->nodesize - 1) / STRIPE_LEN) {
		f.kind = F_EXTENT_STRIPE;
		f.len = p->nodesize;
		btrfs_add_finding(p, &f);
		f.len = meta ? p->nodesize : k->offset;
	}
	if (p->sb_ok && gen > p->sb_generation + 1 && gen > it->transid) {
		f.kind = F_EXTENT_GEN;
		f.a = gen;
		f.b = p->sb_generation;
		btrfs_add_finding(p, &f);
	}
	if (!meta && flags & BTRFS_EXTENT_FLAG_TREE_BLOCK)
		off += sizeof(struct btrfs_tree_block_info);
	if ((bad = bad_iref(it, off)) < it->len) {
		f.kind = F_EXTENT_IREF;
		f.a = it->data[bad];
		f.b = bad;
		btrfs_add_finding(p, &f);
	}
}

static int extent_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	const struct btrfs_tkey *k = &it->key;
	bool block;

	(void)tree;
	btrfs_qgroup_extent_item(p, it);
	check_extent_fields(p, it);
	if (p->in_data && k->objectid != p->d_bytenr)
		data_extent_done(p);
	switch (k->type) {
	case BTRFS_METADATA_ITEM_KEY:
		p->tree_blocks++;
		bg_account(p, k->objectid, p->nodesize, it->transid, BG_FOR_TREE);
		btrfs_fst_used(p, k->objectid, k->objectid + p->nodesize, it->transid);
		return 0;
	case BTRFS_EXTENT_ITEM_KEY:
		if (it->len < sizeof(struct btrfs_extent_item))
			return 0;
		block = btrfs_get64(it->data + offsetof(struct btrfs_extent_item, flags)) &
			BTRFS_EXTENT_FLAG_TREE_BLOCK;
		bg_account(p, k->objectid, k->offset, it->transid,
			   block ? BG_FOR_TREE : BG_FOR_DATA);
		btrfs_fst_used(p, k->objectid, k->objectid + k->offset, it->transid);
		if (block) {
			p->tree_blocks++;
			return 0;
		}
		p->in_data = true;
		p->d_bytenr = k->objectid;
		p->d_len = k->offset;
		p->d_refs = btrfs_get64(it->data);
		p->d_gen = btrfs_get64(it->data + offsetof(struct btrfs_extent_item, generation));
		p->d_transid = it->transid;
		p->nr_refs = 0;
		return inline_refs(p, it);
	case BTRFS_EXTENT_DATA_REF_KEY:
		if (!p->in_data || it->len < sizeof(struct btrfs_extent_data_ref))
			return 0;
		if (it->transid > p->d_transid)
			p->d_transid = it->transid;
		return add_ref(p, &(struct data_ref){
			.root = btrfs_get64(it->data), .ino = btrfs_get64(it->data + 8),
			.off = btrfs_get64(it->data + 16), .count = btrfs_get32(it->data + 24),
		});
	case BTRFS_SHARED_DATA_REF_KEY:
		if (!p->in_data || it->len < sizeof(struct btrfs_shared_data_ref))
			return 0;
		if (it->transid > p->d_transid)
			p->d_transid = it->transid;
		return add_ref(p, &(struct data_ref){
			.shared = true, .root = k->offset, .count = btrfs_get32(it->data),
		});
	case BTRFS_BLOCK_GROUP_ITEM_KEY:
		return p->bg_tree ? 0 : bg_item(p, tree, it);
	}
	return 0;
}

static void check_block_groups(struct pass *p)
{
	uint64_t sum = 0, transid = 0;

	for (size_t i = 0; i < p->nr_bg; i++) {
		const struct bgroup *g = &p->bg[i];

		uint64_t newest = g->found_transid > g->transid ? g->found_transid : g->transid;

		sum += g->used;
		transid = newest > transid ? newest : transid;
		if (g->used != g->found)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_BG_USED, .logical = g->start, .len = g->len,
				.a = g->used, .b = g->found, .transid = newest,
			});
	}
	if (p->sb_ok && p->nr_bg && sum != p->sb_bytes_used)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_BYTES_USED, .a = p->sb_bytes_used, .b = sum, .transid = transid,
		});
}

/* ---- snapshots: one item, one finding ---- */

/* Equal but for the tree: the same check of the same inode and numbers. */
static bool same_but_root(const struct tfinding *a, const struct tfinding *b)
{
	return a->kind == b->kind && a->ino == b->ino && a->file_off == b->file_off &&
	       a->logical == b->logical && a->a == b->a && a->b == b->b &&
	       a->ref_off == b->ref_off && a->transid == b->transid &&
	       !strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

/*
 * A snapshot shares the leaves of its source that neither has changed
 * since; a damaged item in such a leaf is read through both trees.  A
 * finding of a snapshot whose items are no newer than the snapshot itself
 * and which another tree made identically, leaf generation included, is
 * that same item: it is folded into the other tree's finding.
 */
static void fold_snapshot_findings(struct pass *p)
{
	for (size_t i = 0; i < p->nr_f; i++) {
		struct tfinding *f = &p->f[i];
		const struct fs_root *r = f->root ? find_root(p, f->root) : NULL;

		if (!r || !r->shared || f->transid > r->created)
			continue;
		for (size_t j = 0; j < p->nr_f; j++) {
			struct tfinding *g = &p->f[j];

			if (j == i || g->dup || g->root == f->root || !same_but_root(f, g))
				continue;
			f->dup = true;
			if (!g->shared_by++)
				g->shared_root = f->root;
			break;
		}
	}
}

/* ---- the superblock ---- */

/*
 * The on-disk superblock of one device that holds this filesystem's (a
 * seed device's is the seed's own, never written again): true when buf
 * holds it, by its magic and fsid.  The fsid is the kernel's, or the
 * metadata UUID it keeps: a clone of a mounted filesystem's single device
 * is mounted with a temporary fsid (Linux 6.7, temp_fsid) that only the
 * kernel knows, while its disk keeps the one it was made with -- which the
 * kernel then keeps as the metadata UUID.  Refused, the superblock read as
 * unknown and every finding of the tree check waited for a commit that
 * could never be seen, then excused as "changed while being checked".
 */
static bool read_dev_super(const char *path, const struct btrfs_ioctl_fs_info_args *fs,
			   void *buf)
{
	/* O_DIRECT: btrfs writes the superblock past the page cache. */
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	const char *disk = (const char *)buf + SUPER_FSID_OFF;
	bool ok;

	if (fd < 0)
		return false;
	ok = pread(fd, buf, SUPER_SIZE, SUPER_OFFSET) == SUPER_SIZE &&
	     !memcmp((char *)buf + SUPER_MAGIC_OFF, "_BHRfS_M", 8) &&
	     (!memcmp(disk, fs->fsid, BTRFS_FSID_SIZE) ||
	      ((fs->flags & BTRFS_FS_INFO_FLAG_METADATA_UUID) &&
	       !memcmp(disk, fs->metadata_uuid, BTRFS_FSID_SIZE)));
	close(fd);
	return ok;
}

void btrfs_read_super(struct pass *p)
{
	struct btrfs_ioctl_fs_info_args fs = { .flags = BTRFS_FS_INFO_FLAG_METADATA_UUID };
	void *buf = NULL;
	bool found = false;

	p->sb_ok = false;
	if (ioctl(p->fd, BTRFS_IOC_FS_INFO, &fs) < 0 ||
	    posix_memalign(&buf, SUPER_SIZE, SUPER_SIZE))
		return;
	for (uint64_t id = 1; id <= fs.max_id && !found; id++) {
		struct btrfs_ioctl_dev_info_args d = { .devid = id };

		if (ioctl(p->fd, BTRFS_IOC_DEV_INFO, &d) == 0 && d.path[0])
			found = read_dev_super((const char *)d.path, &fs, buf);
	}
	if (found) {
		p->sb_bytes_used = btrfs_get64((unsigned char *)buf + SUPER_BYTES_USED_OFF);
		p->sb_generation = btrfs_get64((unsigned char *)buf + SUPER_GENERATION_OFF);
		p->sb_cache_generation = btrfs_get64((unsigned char *)buf +
						     SUPER_CACHE_GENERATION_OFF);
		p->sb_ok = true;
	}
	free(buf);
}

/* ---- a pass ---- */

static void pass_release(struct pass *p)
{
	for (size_t i = 0; i < p->nr_rrefs; i++)
		free(p->rrefs[i].name);
	free(p->rrefs);
	names_release(&p->names);
	if (p->csr.args)
		btrfs_tree_close(&p->csr);
	if (p->fsr.args)
		btrfs_tree_close(&p->fsr);
	for (size_t i = 0; i < p->nr_fq; i++)
		free(p->fq[i].bitmap);
	free(p->fq);
	free(p->fsi);
	btrfs_qgroup_release(p);
	btrfs_v1_release(p);
	free(p->cs);
	free(p->roots);
	free(p->fe);
	free(p->nodatasum);
	free(p->bg);
	free(p->refs);
	free(p->f);
	memset(p, 0, sizeof(*p));
}

/*
 * The block groups and the extent tree, with the csum and free space trees
 * alongside, and what is checked against them.  A rescue= mount may have
 * left the extent or block group tree unloaded (ENOENT): nothing that
 * needs them is checked -- every file extent item would point at no
 * extent, every chunk lack its block group -- and that is said once.
 */
static int read_extents(struct pass *p)
{
	uint64_t tree = BTRFS_BLOCK_GROUP_TREE_OBJECTID;
	int ret = 0;

	if (p->bg_tree)
		ret = read_tree(p, tree, KEY_MIN, KEY_MAX, bg_item, &p->bg_items);
	if (ret == 0)
		ret = read_tree(p, tree = BTRFS_EXTENT_TREE_OBJECTID, KEY_MIN, KEY_MAX,
				extent_item, &p->extent_items);
	if (is_damage(ret)) {
		p->extent_err = read_again(p, tree);
		p->extent_err_tree = tree;
		if (p->extent_err < 0 && !is_damage(p->extent_err))
			return p->extent_err;
	}
	/* a rescue= mount's unloaded tree, or one its ROOT_ITEM's key hides (reported) */
	if ((ret == -ENOENT && (p->rescue || (p->bad_root_keys & 1U << tree))) ||
	    is_damage(ret)) {
		p->unloaded |= UNLOADED_EXTENT;
		if (ret == -ENOENT && !p->rescue)
			p->hidden_tree = tree;
		p->nr_bg = 0;
		btrfs_qgroup_release(p);
		return 0;
	}
	if (ret < 0)
		return ret;
	btrfs_qgroup_finish(p);
	data_extent_done(p);
	skip_to(p, UINT64_MAX);
	btrfs_csum_finish(p);
	btrfs_fst_finish(p);
	check_block_groups(p);
	btrfs_fst_check_groups(p);
	return 0;
}

/*
 * The tree whose every item a finding of kind k needs to have seen: a
 * count or an absence (0: none; then an item found is the evidence).
 */
static uint64_t needs_whole(enum finding_kind k)
{
	switch (k) {
	case F_REFS_SUM: case F_REF_COUNT: case F_NO_BACKREF: case F_CROSSLINK:
	case F_NO_EXTENT: case F_BG_USED: case F_BYTES_USED: case F_CSUM_ORPHAN:
	case F_CHUNK_NO_BG: case F_CHUNK_BG_DIFF: case F_QGROUP_RFER: case F_QGROUP_EXCL:
		return BTRFS_EXTENT_TREE_OBJECTID;
	case F_CSUM_MISSING: case F_CSUM_COMPRESSED:
		return BTRFS_CSUM_TREE_OBJECTID;
	case F_FST_COUNT:
		return BTRFS_FREE_SPACE_TREE_OBJECTID;
	case F_STRIPE_NO_DEV_EXTENT: case F_DEV_BYTES_USED:
		return BTRFS_DEV_TREE_OBJECTID;
	default:
		return 0;
	}
}

/* Did the walk from the devices skip a subtree of tree (or, for the extent tree, the block group tree)? */
static bool read_in_part(const struct pass *p, uint64_t tree)
{
	for (unsigned i = 0; i < p->devlog.nr; i++)
		if (p->devlog.bad[i].tree == tree ||
		    (tree == BTRFS_EXTENT_TREE_OBJECTID &&
		     p->devlog.bad[i].tree == BTRFS_BLOCK_GROUP_TREE_OBJECTID))
			return true;
	return p->devlog.more > 0;	/* which trees is not known: all are suspect */
}

/*
 * A tree read from the devices in part (a block bad in every copy: its
 * subtree skipped, btrfs_devtree.h) says nothing of what it lacks: the
 * findings that count its items or miss one are dropped, as for a
 * subvolume the kernel refuses a block of; the block is the finding
 * (report_devtrees()).
 */
static void drop_incomplete(struct pass *p)
{
	size_t keep = 0;

	if (!p->devlog.nr)
		return;
	for (size_t i = 0; i < p->nr_f; i++) {
		uint64_t tree = needs_whole(p->f[i].kind);

		if (!tree || !read_in_part(p, tree))
			p->f[keep++] = p->f[i];
	}
	p->nr_f = keep;
}

static int run_pass(struct scrub_ctx *ctx, struct pass *p)
{
	struct btrfs_ioctl_fs_info_args fs = { .flags = BTRFS_FS_INFO_FLAG_CSUM_INFO };
	struct btrfs_ioctl_feature_flags features;
	struct btrfs_tkey cmin = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 0 };
	struct btrfs_tkey cmax = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, UINT64_MAX };
	int ret;

	memset(p, 0, sizeof(*p));
	p->ctx = ctx;
	p->fd = ctx->mnt_fd;
	p->rescue = mount_option(ctx->table_mnt_id, "rescue", NULL);
	/* only read-only: btrfs_devtree.h says why (a rescue= mount always is) */
	p->devread = p->rescue && (ctx->svfs.f_flag & ST_RDONLY);
	p->pending_at = UINT64_MAX;
	if (!(p->f = calloc(MAX_FINDINGS, sizeof(*p->f))))
		return -ENOMEM;
	if (ioctl(p->fd, BTRFS_IOC_FS_INFO, &fs) < 0)
		return -errno;
	p->nodesize = fs.nodesize;
	p->sectorsize = fs.sectorsize;
	if (ioctl(p->fd, BTRFS_IOC_GET_FEATURES, &features) < 0)
		return -errno;
	p->no_holes = features.incompat_flags & BTRFS_FEATURE_INCOMPAT_NO_HOLES;
	p->extent_tree_v2 = features.incompat_flags & BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2;
	/* Kernels before 5.5 do not fill csum_size: crc32c's 4 bytes then. */
	p->csum_size = (fs.flags & BTRFS_FS_INFO_FLAG_CSUM_INFO) && fs.csum_size ? fs.csum_size : 4;
	if (btrfs_tree_open(&p->csr, p->fd, BTRFS_CSUM_TREE_OBJECTID, cmin, cmax) < 0)
		return -ENOMEM;
	btrfs_pass_fallback(p, &p->csr);
	btrfs_read_super(p);
	ret = read_tree(p, BTRFS_ROOT_TREE_OBJECTID, KEY_MIN, KEY_MAX, root_item, &p->root_items);
	if (ret == 0)
		ret = read_fs_trees(p);
	if (ret == 0 && p->fst && (ret = btrfs_tree_open(&p->fsr, p->fd,
							 BTRFS_FREE_SPACE_TREE_OBJECTID, KEY_MIN,
							 KEY_MAX)) == 0)
		btrfs_pass_fallback(p, &p->fsr);
	else if (ret == 0)
		ret = btrfs_v1_open(p);
	if (ret < 0)
		return ret;
	sort_items(p->fe, p->nr_fe, sizeof(*p->fe), fe_cmp);
	if ((ret = btrfs_qgroup_open(p)) < 0 || (ret = read_extents(p)) < 0)
		return ret;
	p->csum_items = p->csr.items;
	p->calls += p->csr.calls + p->fsr.calls;
	/* after the extent tree: p->bg is complete (it may come from there) */
	ret = btrfs_check_chunks(p);
	if (ret == -ENOENT && p->rescue)
		p->unloaded |= UNLOADED_DEV;
	else if (ret < 0)
		return ret;
	btrfs_check_root_refs(p);
	drop_incomplete(p);
	fold_snapshot_findings(p);
	return 0;
}

/* ---- reporting ---- */

/*
 * The trees read from the devices because this rescue= mount left them
 * unloaded (btrfs_devtree.h): said once; each block no copy of which
 * passed its checks, read twice on a read-only mount, is an error (its
 * subtree was not read).
 */
static void report_devtrees(struct scrub_ctx *ctx, const struct btrfs_devtree_log *log)
{
	struct strbuf names = STRBUF_INIT;
	char buf[32];

	for (unsigned i = 0; i < log->nr_trees; i++)
		strbuf_addf(&names, "%s%s", i ? ", " : "",
			    btrfs_tree_name(log->trees[i], buf, sizeof(buf)));
	if (log->nr_trees)
		str_info(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "not loaded on this rescue= mount, "
			 "read from the devices instead (%llu blocks): %s", log->blocks, names.buf);
	if (log->err < 0)
		str_info(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "a tree this rescue= mount left "
			 "unloaded cannot be read from the devices either: %s", strerror(-log->err));
	for (unsigned i = 0; i < log->nr; i++) {
		const struct btrfs_devtree_bad *b = &log->bad[i];
		struct strbuf where = STRBUF_INIT;

		if (b->parent)
			strbuf_addf(&where, "pointed at by the node at logical %llu",
				    (unsigned long long)b->parent);
		else
			strbuf_addstr(&where, "the tree's root");
		str_error(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "tree block at logical %llu (the "
			  "%s, level %u, %s), read from the devices: %s in every copy, read twice; "
			  "the blocks below it are not read, and what needs the whole tree is not "
			  "checked", (unsigned long long)b->logical,
			  btrfs_tree_name(b->tree, buf, sizeof(buf)), b->level, where.buf,
			  btrfs_devtree_why(b->why));
		strbuf_release(&where);
	}
	if (log->more)
		str_error(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "and %llu more tree blocks read "
			  "from the devices fail their checks", log->more);
	strbuf_release(&names);
}

/*
 * The trees the first pass could not read alongside the others, said once.
 * A csum tree the kernel cannot read is damage: an error naming it (the
 * checksums of the data are lost with it).  A rescue= mount may not load
 * the csum tree at all (rescue=ignoredatacsums, ignorebadroots): an info.
 */
/* What is not checked without the extent tree (report_unread_trees()). */
#define EXTENT_CHECKS "data extent references, checksum items, block group and superblock " \
	"used bytes, the free space tree and chunks against block groups are not checked"

static const char *tree_name(uint64_t tree)
{
	return tree == BTRFS_EXTENT_TREE_OBJECTID ? "extent" : "block group";
}

static void report_unread_trees(struct scrub_ctx *ctx, const struct pass *p)
{
	for (size_t i = 0; i < p->nr_roots; i++) {
		struct strbuf path = STRBUF_INIT;

		if (!p->roots[i].err)
			continue;
		/* the subvolume's top directory, where the mount reaches it */
		if (p->roots[i].id != BTRFS_FS_TREE_OBJECTID)
			btrfs_file_path(ctx, p->roots[i].id, BTRFS_FIRST_FREE_OBJECTID, &path);
		str_error(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "the tree of subvolume %llu%s%s "
			  "cannot be read (%s): the kernel refuses a block of it (its log says "
			  "which and why, e.g. 'corrupt leaf'); the files in that block cannot be "
			  "reached, and the tree's other checks are left out (%llu findings)",
			  (unsigned long long)p->roots[i].id,
			  p->roots[i].id == BTRFS_FS_TREE_OBJECTID ? " (the top level)" :
			  path.len ? " at " : "", path.buf, strerror(-p->roots[i].err),
			  p->unreadable_skipped);
		strbuf_release(&path);
	}
	if (is_damage(p->extent_err))
		str_error(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "the %s tree cannot be read (%s), "
			  "read twice: the kernel refuses a block of it (its log says which and "
			  "why, e.g. 'corrupt leaf'); %s", tree_name(p->extent_err_tree),
			  strerror(-p->extent_err), EXTENT_CHECKS);
	else if (p->extent_err)
		str_changed(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "the %s tree was refused, then "
			    "read through when read again; %s", tree_name(p->extent_err_tree),
			    EXTENT_CHECKS);
	else if ((p->unloaded & UNLOADED_EXTENT) && !p->rescue)
		str_info(ctx, CHECK_BTRFS_EXTENT_REFS, NULL, NULL, 0, "the %s tree cannot be "
			 "searched (its ROOT_ITEM's key, reported): %s", tree_name(p->hidden_tree),
			 EXTENT_CHECKS);
	else if (p->unloaded & UNLOADED_EXTENT)
		str_info(ctx, CHECK_BTRFS_EXTENT_REFS, NULL, NULL, 0, "the extent tree%s is not "
			 "loaded on this rescue= mount (the kernel could not read it, or was told "
			 "to ignore it): %s", p->bg_tree ? " or the block group tree" : "",
			 EXTENT_CHECKS);
	if (p->unloaded & UNLOADED_DEV)
		str_info(ctx, CHECK_BTRFS_CHUNK, NULL, NULL, 0, "the device tree is not loaded on "
			 "this rescue= mount: chunks against device extents are not checked");
	if (p->fsr_err == -ENOENT && p->rescue)
		str_info(ctx, CHECK_BTRFS_FREE_SPACE_TREE, NULL, NULL, 0, "the free space tree is "
			 "not loaded on this rescue= mount: it is not checked");
	else if (p->fsr_err == -ENOENT && (p->bad_root_keys & 1U << BTRFS_FREE_SPACE_TREE_OBJECTID))
		str_info(ctx, CHECK_BTRFS_FREE_SPACE_TREE, NULL, NULL, 0, "the free space tree "
			 "cannot be searched (its ROOT_ITEM's key, reported): it is not checked");
	else if (p->fsr_err < 0)
		report_operational(ctx, NULL, NULL, -p->fsr_err,
				   "cannot read the btrfs free space tree");
	if (p->v1_err < 0)
		report_operational(ctx, NULL, NULL, -p->v1_err,
				   "cannot read the btrfs free space cache");
	if (p->csr_err == -ENOENT && p->rescue)
		str_info(ctx, CHECK_BTRFS_CSUM, NULL, NULL, 0, "the csum tree is not loaded on "
			 "this rescue= mount: data checksum items are not checked");
	else if (is_damage(p->csr_err))
		str_error(ctx, CHECK_BTRFS_CSUM, NULL, NULL, 0, "the csum tree cannot be read (%s): "
			  "the checksums of the data it holds are lost; the kernel's scrub stops "
			  "at it", strerror(-p->csr_err));
	else if (p->csr_err == -ENOENT && (p->bad_root_keys & 1U << BTRFS_CSUM_TREE_OBJECTID))
		str_info(ctx, CHECK_BTRFS_CSUM, NULL, NULL, 0, "the csum tree cannot be searched "
			 "(its ROOT_ITEM's key, reported): data checksum items are not checked");
	else if (p->csr_err < 0)
		report_operational(ctx, NULL, NULL, -p->csr_err, "cannot read the btrfs csum tree");
	report_devtrees(ctx, &p->devlog);
}

/* Quotas on, and their qgroups not checked: why, once. */
static void report_qgroups(struct scrub_ctx *ctx, const struct pass *p)
{
	static const char *const why[] = {
		[QG_RESCAN] = "a quota rescan is running: the kernel is recounting them",
		[QG_INCONSISTENT] = "the kernel marks them inconsistent (btrfs quota rescan "
				    "recounts them)",
		[QG_SIMPLE] = "simple quotas count by owner, not by reference",
		[QG_DROPPING] = "a deleted subvolume is being dropped",
		[QG_NO_MEMORY] = "not enough memory to hold the extents' references",
	};

	if (p->qg_state == QG_CHECKED)
		report_verbose(ctx, "Phase 3: btrfs trees: qgroups checked: %zu of level 0, %zu "
			       "above", p->qg_nr[0], p->qg_nr[1]);
	else if (p->qg_state != QG_OFF)
		str_info(ctx, CHECK_BTRFS_QGROUP, NULL, NULL, 0, "qgroups are not checked: %s",
			 why[p->qg_state]);
}

static void report_counts(struct scrub_ctx *ctx, const struct pass *p, const char *which)
{
	report_verbose(ctx, "Phase 3: btrfs trees (%s): root tree %llu items, %zu fs trees "
		       "%llu items (%llu inodes, %llu file extents with disk extents), extent "
		       "tree %llu items (%llu data extents, %llu tree blocks), csum tree %llu "
		       "items, free space tree %llu items, %llu block groups%s, chunk tree %llu "
		       "items, device tree %llu items; %llu TREE_SEARCH_V2 calls", which,
		       p->root_items, p->nr_roots, p->fs_items, p->inodes, p->file_extents,
		       p->extent_items, p->data_extents, p->tree_blocks, p->csum_items,
		       p->fst_items, p->bg_items, p->bg_tree ? " (block group tree)" : "",
		       p->chunk_items, p->dev_items, p->calls);
	if (p->v1_caches)
		report_verbose(ctx, "Phase 3: btrfs trees (%s): %llu v1 space caches: %llu "
			       "checked, %llu stale (the kernel ignores them), %llu not read "
			       "(striped or unreadable)", which, p->v1_caches, p->v1_loaded,
			       p->v1_stale, p->v1_unread);
}

/*
 * Is the file extent item of a finding about one (it points at f->logical)
 * still there, as a search of that one key shows now?  A pass reads a
 * subvolume's tree and the extent tree one after the other: a file
 * deleted in between, its deletion committed before the extent tree was
 * read, leaves an item read before the commit (in a leaf no newer than
 * it) pointing at an extent item that is gone -- twice, if it was also
 * being made during the first pass.  True for the other kinds, and where
 * the search cannot be made (the two passes stand).
 */
static bool file_extent_still(struct scrub_ctx *ctx, const struct tfinding *f)
{
	struct btrfs_tkey k = { f->ino, BTRFS_EXTENT_DATA_KEY, f->file_off };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	bool still;
	int ret;

	if (f->kind != F_NO_EXTENT && f->kind != F_NO_BACKREF && f->kind != F_CROSSLINK)
		return true;
	if (btrfs_tree_open(&r, ctx->mnt_fd, f->root, k, k) < 0)
		return true;
	ret = btrfs_tree_next(&r, &it);
	still = ret < 0 || (ret == 1 && it.len >= FE_DISK_BYTENR + 8 &&
			    btrfs_get64(it.data + FE_DISK_BYTENR) == f->logical);
	btrfs_tree_close(&r);
	return still;
}

/* ---- confirmation: the same damage read again ---- */

/*
 * The key of the item a finding is about, in the subvolume's tree: the
 * file extent item (or where it would be), the directory entry, the
 * inode's name.  False for the findings that have none there.
 */
static bool subject_key(const struct tfinding *f, struct btrfs_tkey *k)
{
	switch (f->kind) {
	case F_REFS_SUM:
	case F_REF_COUNT:
	case F_NO_BACKREF:
	case F_CROSSLINK:
	case F_NO_EXTENT:
		*k = (struct btrfs_tkey){ f->ino, BTRFS_EXTENT_DATA_KEY, f->file_off };
		return f->ino != 0;
	case F_ENTRY_NO_REF:
		*k = (struct btrfs_tkey){ f->ino, BTRFS_DIR_INDEX_KEY, f->b };
		return true;
	case F_REF_NO_ENTRY:
		*k = (struct btrfs_tkey){ f->ino, BTRFS_INODE_REF_KEY, f->logical };
		return true;
	default:
		return false;
	}
}

/* Summed from many items: a block group's used bytes, the superblock's, the free space tree's. */
static bool is_counter(const struct tfinding *f)
{
	return f->kind == F_BG_USED || f->kind == F_BYTES_USED || f->kind == F_FST_COUNT ||
	       f->kind == F_FST_USED_FREE;
}

/*
 * The commit a reading can be trusted to: the one on disk when it began
 * (btrfs_read_super() at the start of run_pass()), or the one now if that
 * was not read.  An item no newer than it was not rewritten while the
 * reading went on.
 */
static uint64_t settled_generation(const struct pass *cur, uint64_t committed)
{
	return cur->sb_ok && cur->sb_generation < committed ? cur->sb_generation : committed;
}

/*
 * Is the leaf that holds (or would hold) the finding's subject newer than
 * the last commit -- being rewritten by the running transaction?  For a
 * counter, the newest leaf of the items it was summed from.  Two
 * readings of a file being written and rewritten can see the same stale
 * back reference from two different causes: its file extent item made
 * after the first reading passed the file, then, after the commit, the
 * item replaced and the reference's drop still queued.  One search for one
 * item (TREE_SEARCH v1, nr_items 1): the first at or after the key, in
 * the leaf where the key sits.
 */
static bool subject_in_flux(struct scrub_ctx *ctx, const struct pass *cur,
			    const struct tfinding *f, uint64_t committed)
{
	struct btrfs_ioctl_search_args sa;
	struct btrfs_ioctl_search_header h;
	struct btrfs_tkey k;

	if (!committed || ctx->fs_readonly)
		return false;
	/* A counter: were any of the items it sums rewritten while they were read? */
	if (is_counter(f))
		return f->transid > settled_generation(cur, committed);
	if (!subject_key(f, &k))
		return false;
	memset(&sa, 0, sizeof(sa));
	sa.key.tree_id = f->root;
	sa.key.min_objectid = k.objectid;
	sa.key.min_type = k.type;
	sa.key.min_offset = k.offset;
	sa.key.max_objectid = UINT64_MAX;
	sa.key.max_type = UINT8_MAX;
	sa.key.max_offset = UINT64_MAX;
	sa.key.max_transid = UINT64_MAX;
	sa.key.nr_items = 1;
	if (ioctl(ctx->mnt_fd, BTRFS_IOC_TREE_SEARCH, &sa) < 0 || sa.key.nr_items < 1)
		return false;	/* nothing after it, or no answer: the readings stand */
	memcpy(&h, sa.buf, sizeof(h));
	return h.transid > committed;
}

/*
 * The disk superblock's generation: the last transaction the kernel
 * committed (0 if unknown).
 */
static uint64_t committed_generation(struct scrub_ctx *ctx)
{
	struct pass probe = { .fd = ctx->mnt_fd };

	btrfs_read_super(&probe);
	return probe.sb_ok ? probe.sb_generation : 0;
}

unsigned btrfs_commit_interval(const struct scrub_ctx *ctx)
{
	struct strbuf v = STRBUF_INIT;
	unsigned long secs = 0;

	if (mount_option(ctx->table_mnt_id, "commit", &v) && v.len)
		secs = strtoul(v.buf, NULL, 10);
	strbuf_release(&v);
	if (!secs)	/* commit=0 is the default, as for the kernel */
		return DEFAULT_COMMIT_S;
	return secs < MAX_COMMIT_S ? (unsigned)secs : MAX_COMMIT_S;
}

/*
 * Under -n nothing may be written, so no commit is forced: wait for the
 * kernel's own (the disk superblock's generation reaching want), at most
 * the commit interval and a margin.  False if it did not come in time or
 * the scan was stopped.
 */
static bool wait_for_commit(struct scrub_ctx *ctx, uint64_t want, unsigned commit_s)
{
	const struct timespec pause = { 0, COMMIT_POLL_MS * 1000000L };
	unsigned long waited = 0, limit = (commit_s + COMMIT_MARGIN_S) * 1000UL;

	report_verbose(ctx, "Phase 3: btrfs trees: -n forces no commit; waiting for the kernel "
		       "to commit transaction %llu (at most %u s)", (unsigned long long)want,
		       commit_s + COMMIT_MARGIN_S);
	for (;;) {
		uint64_t gen = committed_generation(ctx);

		if (gen >= want)
			return true;
		if (!gen || waited >= limit || scrub_should_stop(ctx))
			return false;
		nanosleep(&pause, NULL);
		waited += COMMIT_POLL_MS;
	}
}

/*
 * Before a finding is read again, what the reading before saw must be
 * committed: btrfs applies back references and block group counters at
 * commit, so until then a tree disagrees with itself.  A read-only filesystem
 * does not change: nothing to wait for.  Without -n a commit is forced
 * (BTRFS_IOC_SYNC); with -n the kernel's own is waited for, when the
 * reading saw a transaction that was not committed yet.
 */
static bool commit_before_look(struct scrub_ctx *ctx, const struct pass *p, unsigned commit_s)
{
	if (ctx->fs_readonly)
		return true;
	/* (a read-only bind of a filesystem written elsewhere: its commits are waited for) */
	if (!ctx->opt.check_only && !(ctx->svfs.f_flag & ST_RDONLY))
		return ioctl(ctx->mnt_fd, BTRFS_IOC_SYNC, NULL) == 0;
	return committed_generation(ctx) >= p->max_transid ||
	       wait_for_commit(ctx, p->max_transid, commit_s);
}

/* The same item as f (its keys), whatever the fields it compares read. */
static bool same_item(const struct tfinding *a, const struct tfinding *b)
{
	return a->kind == b->kind && a->root == b->root && a->ino == b->ino &&
	       a->file_off == b->file_off && a->logical == b->logical &&
	       a->ref_off == b->ref_off && a->devid == b->devid && a->physical == b->physical &&
	       !strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

/* ... and the fields it compares read the same too. */
static bool same(const struct tfinding *a, const struct tfinding *b)
{
	return same_item(a, b) && a->a == b->a && a->b == b->b && a->stamp == b->stamp;
}

static struct tfinding *match(const struct pass *p, const struct tfinding *f,
			      bool (*eq)(const struct tfinding *, const struct tfinding *))
{
	for (size_t i = 0; i < p->nr_f; i++)
		if (!p->f[i].dup && eq(&p->f[i], f))
			return &p->f[i];
	return NULL;
}

/*
 * One reading (cur) against the one before (prev).  A finding whose items
 * read the same in both is damage: an error, once (marked confirmed, so
 * that a later reading does not report it again), whatever the generation
 * of the leaves that hold them -- a background transaction (the cleaner,
 * a block group removed, discard) may rewrite a leaf without touching the
 * damage -- but when its subject's leaf is being rewritten now, only if
 * the reading before agreed with its own predecessor too.  One of prev's
 * that cur no longer has went with a change: an info.  Returns how many
 * of cur's findings are worth another reading: the same items with other
 * numbers, and those waiting for a third reading.
 */
static size_t judge_reading(struct scrub_ctx *ctx, struct pass *prev, struct pass *cur)
{
	uint64_t committed = committed_generation(ctx);
	/*
	 * cur read leaves newer than the last commit: the filesystem was
	 * being written as it was read, and two readings may agree by chance
	 * (seen: an orphan csum range under churn).  Then every finding needs
	 * a third agreeing reading, not only those whose subject moved.
	 */
	bool busy = committed && !ctx->fs_readonly &&
		    cur->max_transid > settled_generation(cur, committed);
	size_t moving = 0;

	for (size_t i = 0; i < cur->nr_f; i++) {
		struct tfinding *f = &cur->f[i];
		const struct tfinding *g;

		if (f->dup)
			continue;
		g = match(prev, f, same);
		if (g && g->confirmed) {
			f->confirmed = true;
		} else if (g && !g->agreed && (busy || subject_in_flux(ctx, cur, f, committed))) {
			f->agreed = true;
			moving++;
		} else if (g && file_extent_still(ctx, f)) {
			f->confirmed = true;
			btrfs_report_finding(ctx, f, SEV_ERROR, NULL);
		} else if (match(prev, f, same_item)) {
			moving++;
		}
	}
	for (size_t i = 0; i < prev->nr_f; i++) {
		const struct tfinding *g = &prev->f[i];

		if (!g->dup && !g->confirmed && !match(cur, g, same_item))
			btrfs_report_finding(ctx, g, SEV_INFO, "not found when read again");
	}
	return moving;
}

/* The last reading's findings that no reading confirmed: infos. */
static void report_unconfirmed(struct scrub_ctx *ctx, const struct pass *last, unsigned passes)
{
	char why[64];

	if (passes == 1)
		snprintf(why, sizeof(why), "no commit came in time to read it again after");
	else
		snprintf(why, sizeof(why), "not the same in %u readings", passes);
	for (size_t i = 0; i < last->nr_f; i++)
		if (!last->f[i].dup && !last->f[i].confirmed)
			btrfs_report_finding(ctx, &last->f[i], SEV_INFO, last->f[i].agreed ?
					     "the same each time, but being rewritten as it was read" :
					     why);
	if (last->dropped)
		str_info(ctx, CHECK_BTRFS_EXTENT_REFS, NULL, NULL, 0,
			 "%llu more tree findings were not kept", last->dropped);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * Read the trees again until every finding is confirmed or gone, or the
 * findings that move have had MAX_PASSES readings or, past the third, the
 * commit interval twice over: the first pass is in p[0]; the last reading
 * is left in p[0].
 * 0, or a negative errno of a pass (-ECANCELED: stopped).
 */
static int confirm(struct scrub_ctx *ctx, struct pass p[2], const struct timespec *t0)
{
	unsigned commit_s = btrfs_commit_interval(ctx), passes = 1;
	size_t moving = 1;
	int ret = 0;

	while (moving && passes < MAX_PASSES &&
	       (passes < 3 || seconds_since(t0) < 2.0 * commit_s)) {
		report_verbose(ctx, "Phase 3: btrfs trees: %zu findings; reading them again "
			       "(reading %u)", p[0].nr_f, passes + 1);
		if (!commit_before_look(ctx, &p[0], commit_s))
			break;
		if ((ret = run_pass(ctx, &p[1])) < 0) {
			pass_release(&p[1]);
			return ret;
		}
		passes++;
		report_counts(ctx, &p[1], "read again");
		moving = judge_reading(ctx, &p[0], &p[1]);
		pass_release(&p[0]);
		p[0] = p[1];
		memset(&p[1], 0, sizeof(p[1]));
	}
	report_unconfirmed(ctx, &p[0], passes);
	return 0;
}

/* The first pass, read alongside the walk (btrfs_check_trees_start()). */
struct btrfs_tree_check {
	struct scrub_ctx *ctx;
	pthread_t thread;
	struct pass p;
	struct timespec t0;
	double took;		/* the pass's own seconds, not the walk's */
	int ret;
};

static void *first_pass_thread(void *arg)
{
	struct btrfs_tree_check *c = arg;
	struct btrfs_readahead *ra = btrfs_readahead_start(c->ctx, c->ctx->mnt_fd);

	c->ret = run_pass(c->ctx, &c->p);
	btrfs_readahead_stop(ra);
	c->took = seconds_since(&c->t0);
	return NULL;
}

struct btrfs_tree_check *btrfs_check_trees_start(struct scrub_ctx *ctx)
{
	struct btrfs_tree_check *c;

	if (getenv("FSCRUB_DEBUG_NO_BTRFS_TREES") || !(c = calloc(1, sizeof(*c))))
		return NULL;	/* none, or read after the walk as before */
	c->ctx = ctx;
	clock_gettime(CLOCK_MONOTONIC, &c->t0);
	if (thread_start(&c->thread, first_pass_thread, c) != 0) {
		free(c);
		return NULL;
	}
	return c;
}

void btrfs_check_trees_stop(struct btrfs_tree_check *c)
{
	if (!c)
		return;
	pthread_join(c->thread, NULL);
	pass_release(&c->p);
	free(c);
}

/*
 * The first pass into p: the one read alongside the walk (c), else read
 * now.  t0: when it began; *took: the seconds it took before now.
 */
static int first_pass(struct scrub_ctx *ctx, struct btrfs_tree_check *c, struct pass *p,
		      struct timespec *t0, double *took)
{
	int ret;

	*took = 0;
	if (!c) {
		clock_gettime(CLOCK_MONOTONIC, t0);
		return run_pass(ctx, p);
	}
	pthread_join(c->thread, NULL);
	*p = c->p;
	*t0 = c->t0;
	*took = c->took;
	ret = c->ret;
	free(c);
	return ret;
}

int btrfs_check_trees(struct scrub_ctx *ctx, struct btrfs_tree_check *c)
{
	struct pass p[2] = { { 0 } };
	struct timespec t0, joined;
	double took;
	bool alongside = c != NULL;
	int ret;

	/* For bench/btrfs_trees.sh: the same run without this check. */
	if (getenv("FSCRUB_DEBUG_NO_BTRFS_TREES")) {
		report_verbose(ctx, "Phase 3: btrfs trees not checked (FSCRUB_DEBUG_NO_BTRFS_TREES)");
		return 0;
	}
	ret = first_pass(ctx, c, &p[0], &t0, &took);
	clock_gettime(CLOCK_MONOTONIC, &joined);
	if (ret == 0 && !p[0].nodatasum_lost)	/* what phase 5 has left to read (-x) */
		btrfs_unsummed_keep(btrfs_unsummed_of(ctx), p[0].nodatasum, p[0].nr_nodatasum);
	if (ret != -ECANCELED) {
		report_counts(ctx, &p[0], "first pass");
		report_unread_trees(ctx, &p[0]);
		report_qgroups(ctx, &p[0]);
	}
	if (ret == 0 && (p[0].nr_f || p[0].dropped))
		ret = confirm(ctx, p, &t0);
	pass_release(&p[0]);
	if (ret == -ECANCELED)	/* stopped: nothing to say */
		return 0;
	/* the first pass's own time: beside the walk, it did not wait for it */
	report_verbose(ctx, "Phase 3: btrfs trees checked in %.3f s%s",
		       took + seconds_since(&joined), alongside ? " (first pass alongside the walk)" : "");
	return ret;
}
