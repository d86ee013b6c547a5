/*
 * ext4_xattr_refs: the reference counts of the attribute blocks (phase 3,
 * after the inode scan); see ext4.h.
 *
 * The extended attributes that do not fit in an inode live in one block
 * (i_file_acl), which inodes with the same attributes share: the block's
 * header counts them (h_refcount), each sharer deleted or given other
 * attributes takes one off, and the block is freed at zero.  A count below
 * the number of inodes that use the block frees it while some still do
 * (their attributes then read as whatever the block holds next); a count
 * above it never frees the block.  e2fsck counts the sharers in pass 1 and
 * compares; so does this, from the inode scan: every inode in use whose
 * i_file_acl names a block inside the filesystem is noted
 * (ext4_xattr_refs_note()), and after the scan each block's header is read
 * and its count compared (ext4_xattr_refs_check()).
 *
 * The kernel verifies a block's magic, checksum and entries whenever it
 * reads it, so the walk's listxattr of each file with attributes reports
 * those; it never checks the count.  A block whose header is not an
 * attribute block's is left to that.
 *
 * The live rule: a sharer added or removed during the scan moves the count
 * while the scan counted the inodes before or after the change.  Too low a
 * count is a suspect (ext4_confirm.c): in fresh copies of the block and of
 * the inode-table blocks that hold the sharers, the count must still be
 * below the number of inodes there (with links) that name the block -- a
 * sharer added meanwhile elsewhere only widens the gap, one removed is no
 * longer counted.  Too high a count cannot be confirmed that way (a sharer
 * given the attributes in a slot the scan had passed was not counted) and
 * only keeps a block from being freed: an info.
 *
 * With the ea_inode feature, a value too large for the inode and the block
 * lives in an inode of its own (an EA inode), named by its entry's
 * e_value_inum; ext4_ea_inode_blocks() counts what the owner is charged for
 * it (ext4_xref.c's i_blocks check).
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2_ext_attr.h>

#include "report/checks.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

/* Inodes named in a message: the first few say enough. */
#define NAMED_USERS 3

/*
 * One inode that names an attribute block: 32 bytes per inode with one.
 * Its generation and quota ids are for the EA inodes the block's entries
 * name (ext4_eainode.c, ext4_quota.c).
 */
struct ext4_xattr_ref {
	blk64_t blk;
	ext2_ino_t ino;
	uint32_t gen;
	uint32_t ids[EXT4_QUOTA_TYPES];
};

void ext4_xattr_refs_note(struct ext4_state *st, ext2_ino_t ino,
			  const struct ext2_inode_large *in, blk64_t blk)
{
	struct ext4_xattr_ref r = { .blk = blk, .ino = ino, .gen = in->i_generation };

	ext4_quota_ids(st->fs, in, r.ids);
	if (st->nr_xattr_refs == st->alloc_xattr_refs) {
		st->alloc_xattr_refs = st->alloc_xattr_refs ? 2 * st->alloc_xattr_refs : 64;
		st->xattr_refs = xrealloc(st->xattr_refs,
					  st->alloc_xattr_refs * sizeof(*st->xattr_refs));
	}
	st->xattr_refs[st->nr_xattr_refs++] = r;
}

void ext4_xattr_refs_release(struct ext4_state *st)
{
	free(st->xattr_refs);
	st->xattr_refs = NULL;
	st->nr_xattr_refs = st->alloc_xattr_refs = 0;
}

static int ref_cmp(const void *a, const void *b)
{
	const struct ext4_xattr_ref *x = a, *y = b;

	if (x->blk != y->blk)
		return x->blk < y->blk ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

/* An attribute block's header: true, and its count, if it is one. */
static bool xattr_header(const unsigned char *b, uint32_t *refcount)
{
	struct ext2_ext_attr_header h;

	memcpy(&h, b, sizeof(h));
	*refcount = le32toh(h.h_refcount);
	return le32toh(h.h_magic) == EXT2_EXT_ATTR_MAGIC && le32toh(h.h_blocks) == 1;
}

/*
 * An entry's name hash, as ext4 starts e_hash (a 5-bit rotate and xor per
 * name byte); signed_chars: the old signed-char variant, which e2fsck also
 * accepts.
 */
static uint32_t name_hash(const unsigned char *name, unsigned len, bool signed_chars)
{
	uint32_t h = 0;

	for (unsigned i = 0; i < len; i++) {
		uint32_t c = signed_chars ? (uint32_t)(int32_t)(signed char)name[i] : name[i];

		h = (h << 5) ^ (h >> 27) ^ c;
	}
	return h;
}

unsigned ext4_ea_entries(const unsigned char *p, const unsigned char *end,
			 ext4_ea_entry_fn fn, void *arg)
{
	struct ext2_ext_attr_entry e;
	unsigned n = 0;
	uint32_t first;

	while (p + sizeof(e) <= end) {
		memcpy(&first, p, sizeof(first));
		if (!first)
			break;
		memcpy(&e, p, sizeof(e));
		if (p + sizeof(e) + e.e_name_len > end)
			break;
		if (e.e_value_inum) {
			const unsigned char *name = p + sizeof(e);
			struct ext4_ea_entry x = {
				.inum = le32toh(e.e_value_inum),
				.value_size = le32toh(e.e_value_size),
				.e_hash = le32toh(e.e_hash),
				.name_hash = name_hash(name, e.e_name_len, false),
				.name_hash_signed = name_hash(name, e.e_name_len, true),
			};

			n++;
			if (fn)
				fn(arg, &x);
		}
		p += EXT2_EXT_ATTR_LEN(e.e_name_len);
	}
	return n;
}

/*
 * The blocks charged for one EA-inode value: ceil(size / cluster)
 * clusters.  The kernel's ext4_xattr_inode_alloc_quota() charges them to
 * the referring inode's i_blocks (dquot_alloc_block(), quota on or off),
 * again for every inode that refers to a value shared through one EA
 * inode with a reference count; e2fsck's pass 1 expects the same.  An old
 * Lustre-style reference (its hash not the value's), which e2fsck charges
 * nothing, is not told apart.
 */
struct ea_charge {
	ext2_filsys fs;
	uint64_t clusters;
};

static void charge_entry(void *arg, const struct ext4_ea_entry *e)
{
	struct ea_charge *c = arg;
	uint64_t csize = EXT2_CLUSTER_SIZE(c->fs->super);

	c->clusters += (e->value_size + csize - 1) / csize;
}

static uint64_t ea_entries_blocks(ext2_filsys fs, const unsigned char *p,
				  const unsigned char *end)
{
	struct ea_charge c = { fs, 0 };

	ext4_ea_entries(p, end, charge_entry, &c);
	return EXT2FS_C2B(fs, c.clusters);
}

unsigned ext4_ibody_entries(ext2_filsys fs, const void *rawp)
{
	const unsigned char *raw = rawp;
	unsigned isize = EXT2_INODE_SIZE(fs->super), off;
	uint16_t extra;
	uint32_t magic;

	if (isize <= EXT2_GOOD_OLD_INODE_SIZE)
		return 0;
	memcpy(&extra, raw + offsetof(struct ext2_inode_large, i_extra_isize), sizeof(extra));
	off = EXT2_GOOD_OLD_INODE_SIZE + le16toh(extra);
	if (off + sizeof(magic) > isize)
		return 0;
	memcpy(&magic, raw + off, sizeof(magic));
	return le32toh(magic) == EXT2_EXT_ATTR_MAGIC ? off + (unsigned)sizeof(magic) : 0;
}

uint64_t ext4_ea_inode_blocks(ext2_filsys fs, const void *raw, const unsigned char *acl)
{
	unsigned off = ext4_ibody_entries(fs, raw);
	uint64_t blocks = 0;
	uint32_t count;

	if (!ext2fs_has_feature_ea_inode(fs->super))
		return 0;
	if (off)
		blocks += ea_entries_blocks(fs, (const unsigned char *)raw + off,
					    (const unsigned char *)raw + EXT2_INODE_SIZE(fs->super));
	if (acl && xattr_header(acl, &count))
		blocks += ea_entries_blocks(fs, acl + sizeof(struct ext2_ext_attr_header),
					    acl + fs->blocksize);
	return blocks;
}

/* Inodes with links in one inode-table block whose attribute block is blk. */
static unsigned users_in(ext2_filsys fs, const unsigned char *table, blk64_t blk)
{
	unsigned isize = EXT2_INODE_SIZE(fs->super), n = 0;
	struct ext2_inode in;

	for (unsigned off = 0; off + sizeof(in) <= fs->blocksize; off += isize) {
		memcpy(&in, table + off, sizeof(in));
		n += in.i_links_count && ext2fs_file_acl_block(fs, &in) == blk;
	}
	return n;
}

/* Too-low-count suspects: blocks[0] the attribute block, then inode-table blocks. */
static bool low_count_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	uint32_t count;
	unsigned users = 0;

	if (!xattr_header(bufs[0], &count))
		return false;
	for (unsigned i = 1; i < s->nr_blocks; i++)
		users += users_in(fs, bufs[i], s->blocks[0]);
	return count < users;
}

/* "inodes 12, 13, 14 and 2 more" */
static void name_users(struct strbuf *sb, const struct ext4_xattr_ref *refs, size_t n)
{
	strbuf_addstr(sb, n == 1 ? "inode " : "inodes ");
	for (size_t i = 0; i < n && i < NAMED_USERS; i++)
		strbuf_addf(sb, "%s%u", i ? ", " : "", refs[i].ino);
	if (n > NAMED_USERS)
		strbuf_addf(sb, " and %zu more", n - NAMED_USERS);
}

/*
 * A count below n: a suspect with the block and as many of the sharers'
 * inode-table blocks as it holds; one that could not show more sharers
 * than the count is cleared at once.
 */
static void low_count(struct scrub_ctx *ctx, const struct ext4_xattr_ref *refs, size_t n,
		      uint32_t count, const char *users)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_XATTR_REFCOUNT, refs[0].ino,
		low_count_still_bad, "attribute block %llu counts %u %s, but %zu inodes in use "
		"refer to it (%s): deleting %u of them would free it while the others still use "
		"it", (unsigned long long)refs[0].blk, count, count == 1 ? "reference" :
		"references", n, users, count);
	size_t shown = 0;

	ext4_suspect_block(s, refs[0].blk);
	for (size_t i = 0; i < n; i++) {
		blk64_t table;
		unsigned off;

		if (!ext4_inode_location(fs, refs[i].ino, &table, &off) ||
		    (s->nr_blocks == EXT4_SUSPECT_BLOCKS && !ext4_suspect_has_block(s, table)))
			continue;
		ext4_suspect_block(s, table);
		shown++;
	}
	if (shown <= count && !s->cleared)
		s->cleared = "the inodes that use it lie in more inode-table blocks than can be "
			     "confirmed";
}

/*
 * The EA inodes the block's entries name: one reference each for the block
 * (however many inodes share it: the kernel takes one per block, and
 * e2fsck counts the block once), and one inode each charged to the quota
 * of every sharer (the kernel's ext4_xattr_inode_alloc_quota() for each,
 * e2fsck's ea_block_quota_inodes).
 */
static void ea_inode_users(struct scrub_ctx *ctx, const struct ext4_xattr_ref *refs, size_t n,
			   const unsigned char *buf)
{
	struct ext4_state *st = ext4_state(ctx);
	unsigned k;

	if (!ext2fs_has_feature_ea_inode(st->fs->super))
		return;
	k = ext4_eainode_note_block(ctx, refs[0].blk, refs[0].ino, refs[0].gen, buf);
	for (size_t i = 0; k && i < n; i++)
		ext4_quota_charge_inodes(ctx, refs[i].ids, k);
}

/* One attribute block and the n inodes that name it (sorted by number). */
static void judge_block(struct scrub_ctx *ctx, const struct ext4_xattr_ref *refs, size_t n,
			unsigned char *buf)
{
	struct ext4_state *st = ext4_state(ctx);
	struct strbuf users = STRBUF_INIT;
	uint32_t count;

	if (ext4_read_direct(st, refs[0].blk, buf) < 0 || !xattr_header(buf, &count)) {
		st->xattr_blocks_unjudged++;
		ext4_eainode_unknown(ctx);
		return;
	}
	st->xattr_blocks_judged++;
	ea_inode_users(ctx, refs, n, buf);
	if (count == n)
		return;
	name_users(&users, refs, n);
	if (count < n)
		low_count(ctx, refs, n, count, users.buf);
	else
		str_info(ctx, CHECK_EXT4_XATTR_REFCOUNT, NULL, NULL, 0, "attribute block %llu "
			 "counts %u references, but %zu inodes in use refer to it (%s): it would "
			 "not be freed with them (e2fsck -f corrects the count); not confirmed on "
			 "a mounted filesystem, where a file given the same attributes during the "
			 "scan is not counted", (unsigned long long)refs[0].blk, count, n,
			 users.buf);
	strbuf_release(&users);
}

void ext4_xattr_refs_check(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_xattr_ref *v = st->xattr_refs;
	size_t n = st->nr_xattr_refs;
	unsigned char *buf;

	if (!n)
		return;
	sort_items(v, n, sizeof(*v), ref_cmp);
	buf = ext4_block_buf(st);
	for (size_t i = 0, j; i < n && !scrub_should_stop(ctx); i = j) {
		for (j = i + 1; j < n && v[j].blk == v[i].blk; j++)
			;
		judge_block(ctx, v + i, j - i, buf);
	}
	free(buf);
	report_verbose(ctx, "Phase 3: ext4: %llu attribute blocks' reference counts checked "
		       "against the %zu inodes that use them (%llu blocks without an attribute "
		       "header left to the kernel's checks)", st->xattr_blocks_judged, n,
		       st->xattr_blocks_unjudged);
	ext4_xattr_refs_release(st);
}
