/*
 * ext4_xref: the inode-core checks of e2fsck -fn's pass 1 that the rest of
 * the ext4 backend does not make; ext4_inodes.c's inode scan calls
 * ext4_xref_inode() for every inode in use whose checksum is good.
 *
 *   ext4.inode_dtime   a linked inode with a deletion time (e2fsck: "is in
 *                      use, but has dtime set"); a dtime below the inode
 *                      count is an orphan-list link, not a time, and is
 *                      left to ext4.orphan_list.
 *   ext4.inode_flags   a flag the inode's type or the filesystem's features
 *                      do not allow: an htree index on a non-directory or
 *                      without dir_index, extents without the extents
 *                      feature, inline data without inline_data, both at
 *                      once, extents or inline data on a device, fifo or
 *                      socket, huge_file, casefold, verity, encrypt or
 *                      ea_inode flags without their features, casefold on a
 *                      non-directory.
 *   ext4.inode_size    a directory whose i_size is not a whole number of
 *                      blocks or is more than the blocks it has; a regular
 *                      file whose extent tree (depth 0 or 1) maps written
 *                      blocks past its end (e2fsck: "i_size is X, should
 *                      be Y"; unwritten extents past it are preallocation).
 *   ext4.inode_blocks  i_blocks against what the extent tree maps plus its
 *                      own blocks and the extended attribute block
 *                      (extent trees of depth 0 and 1; not on bigalloc).
 *
 * Each is a suspect for ext4_confirm.c (the live rule): the inode's block,
 * and for i_blocks the tree's leaves, are read again twice after syncfs,
 * and the check is made again on those fresh bytes.
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext3_extents.h>

#include "checks.h"
#include "context.h"
#include "strbuf.h"

/* ext4's flag for an inode whose i_blocks counts fs blocks (huge_file). */
#define HUGE_FILE_BLOCKS(fs, in) \
	(ext2fs_has_feature_huge_file((fs)->super) && ((in)->i_flags & EXT4_HUGE_FILE_FL))

/* i_blocks in 512-byte sectors, both halves. */
static uint64_t inode_sectors(ext2_filsys fs, const struct ext2_inode *in)
{
	uint64_t b = in->i_blocks;

	if (ext2fs_has_feature_huge_file(fs->super))
		b |= (uint64_t)in->osd2.linux2.l_i_blocks_hi << 32;
	if (HUGE_FILE_BLOCKS(fs, in))
		b *= fs->blocksize / 512;
	return b;
}

/* The first flag the type or the features forbid, or NULL. */
static const char *bad_flag(ext2_filsys fs, const struct ext2_inode *in)
{
	struct ext2_super_block *sb = fs->super;
	uint32_t f = in->i_flags;
	bool dir = LINUX_S_ISDIR(in->i_mode), special = LINUX_S_ISCHR(in->i_mode) ||
		LINUX_S_ISBLK(in->i_mode) || LINUX_S_ISFIFO(in->i_mode) ||
		LINUX_S_ISSOCK(in->i_mode);

	if ((f & EXT2_INDEX_FL) && !dir)
		return "htree index (INDEX_FL) on a non-directory";
	if ((f & EXT2_INDEX_FL) && !ext2fs_has_feature_dir_index(sb))
		return "htree index (INDEX_FL) without the dir_index feature";
	if ((f & EXT4_EXTENTS_FL) && !ext2fs_has_feature_extents(sb))
		return "EXTENTS_FL without the extents feature";
	if ((f & EXT4_INLINE_DATA_FL) && !ext2fs_has_feature_inline_data(sb))
		return "INLINE_DATA_FL without the inline_data feature";
	if ((f & EXT4_EXTENTS_FL) && (f & EXT4_INLINE_DATA_FL))
		return "both EXTENTS_FL and INLINE_DATA_FL";
	if (special && (f & (EXT4_EXTENTS_FL | EXT4_INLINE_DATA_FL)))
		return "extents or inline data on a device, fifo or socket";
	if ((f & EXT4_HUGE_FILE_FL) && !ext2fs_has_feature_huge_file(sb))
		return "HUGE_FILE_FL without the huge_file feature";
	if ((f & EXT4_CASEFOLD_FL) && (!dir || !ext2fs_has_feature_casefold(sb)))
		return "CASEFOLD_FL on a non-directory or without the casefold feature";
	if ((f & EXT4_VERITY_FL) && !ext2fs_has_feature_verity(sb))
		return "VERITY_FL without the verity feature";
	if ((f & EXT4_ENCRYPT_FL) && !ext2fs_has_feature_encrypt(sb))
		return "ENCRYPT_FL without the encrypt feature";
	if ((f & EXT4_EA_INODE_FL) && !ext2fs_has_feature_ea_inode(sb))
		return "EA_INODE_FL without the ea_inode feature";
	return NULL;
}

/* A leaf extent: its blocks into *count, the end of a written one into *end. */
static void add_extent(const struct ext3_extent *x, uint64_t *count, uint64_t *end)
{
	unsigned len = le16toh(x->ee_len);

	if (len > EXT_INIT_MAX_LEN) {		/* unwritten */
		*count += len - EXT_INIT_MAX_LEN;
		return;
	}
	*count += len;
	if (len && le32toh(x->ee_block) + (uint64_t)len > *end)
		*end = le32toh(x->ee_block) + (uint64_t)len;
}

/*
 * What an extent tree of depth 0 or 1 maps, in fs blocks, with its leaf
 * blocks (*count), and the file block after its last written extent
 * (*written_end, 0: none): from the inode's root and leaves[i] (leaf i's
 * bytes), and the leaves' numbers.  Returns false if the tree is deeper or
 * does not parse (its own checks say why).
 */
static bool tree_blocks(ext2_filsys fs, const struct ext2_inode *in,
			unsigned char *const *leaves, unsigned nleaves, uint64_t *count,
			uint64_t *written_end, blk64_t *leaf_no, unsigned *nleaf_no)
{
	const struct ext3_extent_header *h = (const void *)in->i_block;
	unsigned n = le16toh(h->eh_entries);

	*count = 0;
	*written_end = 0;
	*nleaf_no = 0;
	if (le16toh(h->eh_magic) != EXT3_EXT_MAGIC || n > 4 || le16toh(h->eh_depth) > 1)
		return false;
	for (unsigned i = 0; i < n; i++) {
		if (!le16toh(h->eh_depth)) {
			add_extent((const void *)(h + 1) + i * sizeof(struct ext3_extent), count,
				   written_end);
			continue;
		}
		const struct ext3_extent_idx *ix = (const void *)(h + 1) + i * sizeof(*ix);

		leaf_no[(*nleaf_no)++] = le32toh(ix->ei_leaf) |
					 (blk64_t)le16toh(ix->ei_leaf_hi) << 32;
		*count += 1;
		if (!leaves)
			continue;
		if (i >= nleaves)
			return false;
		const struct ext3_extent_header *lh = (const void *)leaves[i];
		unsigned ln = le16toh(lh->eh_entries);

		if (le16toh(lh->eh_magic) != EXT3_EXT_MAGIC || le16toh(lh->eh_depth) ||
		    ln > (fs->blocksize - sizeof(*lh)) / sizeof(struct ext3_extent))
			return false;
		for (unsigned k = 0; k < ln; k++)
			add_extent((const void *)(lh + 1) + k * sizeof(struct ext3_extent), count,
				   written_end);
	}
	return true;
}

/* The inode core out of a fresh copy of its inode-table block. */
static bool fresh(ext2_filsys fs, const struct ext4_suspect *s, unsigned char *const *bufs,
		  struct ext2_inode *in)
{
	(void)fs;
	/* Little-endian on the disk and here (the backend is built for it). */
	memcpy(in, bufs[0] + s->arg[0], sizeof(*in));
	return in->i_generation == (uint32_t)s->arg[1];
}

static bool dtime_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode in;

	return fresh(fs, s, bufs, &in) && in.i_links_count &&
	       in.i_dtime > fs->super->s_inodes_count;
}

static bool flags_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode in;

	return fresh(fs, s, bufs, &in) && bad_flag(fs, &in);
}

static const char *dir_size_bad(ext2_filsys fs, const struct ext2_inode *in)
{
	uint64_t size = EXT2_I_SIZE(in);

	if (!LINUX_S_ISDIR(in->i_mode) || (in->i_flags & EXT4_INLINE_DATA_FL))
		return NULL;
	if (!size || size % fs->blocksize)
		return "is not a whole number of blocks";
	if (size > inode_sectors(fs, in) * 512)
		return "is more than the blocks it has";
	return NULL;
}

static bool size_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			   unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode in;

	return fresh(fs, s, bufs, &in) && dir_size_bad(fs, &in);
}

/* What i_blocks must say, in sectors, of a tree that maps count blocks. */
static uint64_t want_sectors(ext2_filsys fs, const struct ext2_inode *in, uint64_t count)
{
	if (ext2fs_file_acl_block(fs, in))
		count++;
	return count * (fs->blocksize / 512);
}

/*
 * A regular file's written blocks past its end: e2fsck's rule, an error
 * if i_size is below the start of the last written block (so a block that
 * begins exactly at i_size is allowed).  Verity keeps its tree past the
 * end; inline data has no extents.
 */
static bool written_past_end(ext2_filsys fs, const struct ext2_inode *in,
			     uint64_t written_end)
{
	return LINUX_S_ISREG(in->i_mode) && written_end &&
	       !(in->i_flags & (EXT4_VERITY_FL | EXT4_INLINE_DATA_FL)) &&
	       EXT2_I_SIZE(in) < (written_end - 1) * fs->blocksize;
}

/* The fresh inode's tree, from its fresh leaves (still the same blocks). */
static bool fresh_tree(ext2_filsys fs, const struct ext4_suspect *s, unsigned char *const *bufs,
		       struct ext2_inode *in, uint64_t *count, uint64_t *written_end)
{
	blk64_t leaf_no[4];
	unsigned nleaf;

	if (!fresh(fs, s, bufs, in) ||
	    !tree_blocks(fs, in, bufs + 1, s->nr_blocks - 1, count, written_end, leaf_no, &nleaf))
		return false;
	for (unsigned i = 0; i < nleaf; i++)
		if (i + 1 >= s->nr_blocks || leaf_no[i] != s->blocks[i + 1])
			return false;
	return true;
}

static bool blocks_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode in;
	uint64_t count, end;

	return fresh_tree(fs, s, bufs, &in, &count, &end) &&
	       inode_sectors(fs, &in) != want_sectors(fs, &in, count);
}

static bool past_end_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			       unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode in;
	uint64_t count, end;

	return fresh_tree(fs, s, bufs, &in, &count, &end) && written_past_end(fs, &in, end);
}

static struct ext4_suspect *suspect(struct scrub_ctx *ctx, const char *check, ext2_ino_t ino,
				    const struct ext2_inode *in, ext4_still_bad_fn fn,
				    const char *what)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext4_suspect *s = ext4_suspect_add(ctx, check, ino, fn, "%s", what);
	blk64_t blk;
	unsigned off;

	if (!ext4_inode_location(fs, ino, &blk, &off)) {
		s->cleared = "its inode table cannot be found";
		return s;
	}
	ext4_suspect_block(s, blk);
	s->arg[0] = off;
	s->arg[1] = in->i_generation;
	return s;
}

/* A suspect about the tree: the inode's block, then its leaves. */
static void tree_suspect(struct scrub_ctx *ctx, const char *check, ext2_ino_t ino,
			 const struct ext2_inode *in, ext4_still_bad_fn fn, const char *what,
			 const blk64_t *leaf_no, unsigned nleaf)
{
	struct ext4_suspect *s = suspect(ctx, check, ino, in, fn, what);

	for (unsigned i = 0; i < nleaf; i++)
		ext4_suspect_block(s, leaf_no[i]);
}

/*
 * i_blocks of an extent-mapped inode (not on bigalloc), and a regular
 * file's written blocks past its end: the leaves are read from the disk.
 */
static void check_blocks(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode *in)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext4_state *st = ext4_state(ctx);
	unsigned char *leaves[4] = { 0 };
	blk64_t leaf_no[4];
	unsigned nleaf;
	uint64_t count, end;
	struct strbuf sb = STRBUF_INIT;

	if (!(in->i_flags & EXT4_EXTENTS_FL) || (in->i_flags & EXT4_INLINE_DATA_FL) ||
	    !tree_blocks(fs, in, NULL, 0, &count, &end, leaf_no, &nleaf))
		return;
	for (unsigned i = 0; i < nleaf; i++) {
		leaves[i] = ext4_block_buf(st);
		if (!ext4_blocks_in_fs(fs, leaf_no[i], 1) ||
		    ext4_read_direct(st, leaf_no[i], leaves[i]) < 0)
			goto out;
	}
	if (!tree_blocks(fs, in, leaves, nleaf, &count, &end, leaf_no, &nleaf))
		goto out;
	if (!ext2fs_has_feature_bigalloc(fs->super) &&
	    inode_sectors(fs, in) != want_sectors(fs, in, count)) {
		strbuf_addf(&sb, "i_blocks is %llu, the extent tree%s maps %llu",
			    (unsigned long long)inode_sectors(fs, in),
			    ext2fs_file_acl_block(fs, in) ? " and the attribute block" : "",
			    (unsigned long long)want_sectors(fs, in, count));
		tree_suspect(ctx, CHECK_EXT4_INODE_BLOCKS, ino, in, blocks_still_bad, sb.buf,
			     leaf_no, nleaf);
		strbuf_reset(&sb);
	}
	if (written_past_end(fs, in, end)) {
		strbuf_addf(&sb, "i_size is %llu, but the extent tree maps written blocks up to "
			    "file block %llu (%llu bytes)", (unsigned long long)EXT2_I_SIZE(in),
			    (unsigned long long)end - 1, (unsigned long long)end * fs->blocksize);
		tree_suspect(ctx, CHECK_EXT4_INODE_SIZE, ino, in, past_end_still_bad, sb.buf,
			     leaf_no, nleaf);
	}
out:
	strbuf_release(&sb);
	for (unsigned i = 0; i < nleaf; i++)
		free(leaves[i]);
}

void ext4_xref_inode(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *big)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	const struct ext2_inode *in = (const void *)big;
	const char *why;

	if (ino < EXT2_FIRST_INODE(fs->super) && ino != EXT2_ROOT_INO)
		return;		/* reserved inodes: the journal, resize... have their own rules */
	if (in->i_links_count && in->i_dtime > fs->super->s_inodes_count) {
		struct strbuf sb = STRBUF_INIT;

		strbuf_addf(&sb, "in use with %u links, but has a deletion time (dtime %u)",
			    in->i_links_count, in->i_dtime);
		suspect(ctx, CHECK_EXT4_INODE_DTIME, ino, in, dtime_still_bad, sb.buf);
		strbuf_release(&sb);
	}
	if ((why = bad_flag(fs, in))) {
		struct strbuf sb = STRBUF_INIT;

		strbuf_addf(&sb, "flags 0x%x: %s", in->i_flags, why);
		suspect(ctx, CHECK_EXT4_INODE_FLAGS, ino, in, flags_still_bad, sb.buf);
		strbuf_release(&sb);
		return;		/* the rest reads the inode by its flags */
	}
	if ((why = dir_size_bad(fs, in))) {
		struct strbuf sb = STRBUF_INIT;

		strbuf_addf(&sb, "directory i_size %llu %s (%llu bytes in %u-byte blocks)",
			    (unsigned long long)EXT2_I_SIZE(in), why,
			    (unsigned long long)inode_sectors(fs, in) * 512, fs->blocksize);
		suspect(ctx, CHECK_EXT4_INODE_SIZE, ino, in, size_still_bad, sb.buf);
		strbuf_release(&sb);
	}
	check_blocks(ctx, ino, in);
}
