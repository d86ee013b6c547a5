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
 *                      non-directory, extents on a fast symlink.
 *   ext4.inode_field   i_file_acl_hi set without the 64bit feature.
 *   ext4.inode_size    a directory whose i_size is not a whole number of
 *                      blocks or is more than the blocks it has; a regular
 *                      file whose extent tree or block map maps written
 *                      blocks past its end (e2fsck: "i_size is X, should be
 *                      Y"; unwritten extents past it are preallocation).
 *   ext4.inode_blocks  i_blocks against what the extent tree or block map
 *                      maps plus its own blocks, the extended attribute
 *                      block and what ext4 charges for attribute values
 *                      kept in EA inodes (ext4_ea_inode_blocks(); not on
 *                      bigalloc).
 *
 * The last two take the tree as ext4_inodes.c's scan walked it, whole, at
 * any depth (ext4_xref_tree()), as ext4_xref_journal() takes the journal's:
 * every block of its i_size mapped, no hole (ext4.journal).
 *
 * Each is a suspect for ext4_confirm.c (the live rule): the inode's block,
 * and for the tree checks the tree's blocks (the first 31 of them; a
 * larger tree's others are read afresh as the check reaches them), are
 * read again twice after syncfs, and the check is made again on those
 * fresh bytes.
 */
#include "backends/ext4/ext4.h"

#include <stdlib.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/strbuf.h"

/* Reserved inodes (the journal, resize...) have their own rules; the root is checked. */
static bool reserved(ext2_filsys fs, ext2_ino_t ino)
{
	return ino < EXT2_FIRST_INODE(fs->super) && ino != EXT2_ROOT_INO;
}

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

uint64_t ext4_inode_bytes(ext2_filsys fs, const struct ext2_inode_large *in)
{
	return inode_sectors(fs, (const struct ext2_inode *)in) * 512;
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
	/* Its target is in i_block, no extent header (e2fsck: "Fast symlink has EXTENT_FL"). */
	if ((f & EXT4_EXTENTS_FL) && ext2fs_is_fast_symlink((struct ext2_inode *)in))
		return "EXTENTS_FL on a fast symlink, whose target is in i_block";
	return NULL;
}

/*
 * The high half of the attribute block's number without the 64bit feature,
 * where the kernel never reads it (ext4_iget()): e2fsck "i_file_acl_hi
 * ... should be zero".
 */
static bool acl_hi_bad(ext2_filsys fs, const struct ext2_inode *in)
{
	return !ext2fs_has_feature_64bit(fs->super) && in->osd2.linux2.l_i_file_acl_high;
}

static bool acl_hi_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) &&
	       acl_hi_bad(ext4_state(ctx)->fs, (const void *)&in);
}

static bool dtime_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && in.i_links_count &&
	       in.i_dtime > fs->super->s_inodes_count;
}

static bool flags_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && bad_flag(fs, (const void *)&in);
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
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && dir_size_bad(fs, (const void *)&in);
}

/*
 * What i_blocks must say, in sectors, of a tree that maps count blocks,
 * with ea blocks charged for values in EA inodes.
 */
static uint64_t want_sectors(ext2_filsys fs, const struct ext2_inode *in, uint64_t count,
			     uint64_t ea)
{
	if (ext2fs_file_acl_block(fs, in))
		count++;
	return (count + ea) * (fs->blocksize / 512);
}

/*
 * The blocks charged for the inode's values in EA inodes (raw: its bytes
 * as on the disk) into *ea; its attribute block from held (NULL: read
 * from the disk).  False if that block cannot be read.
 */
static bool ea_charge(struct ext4_state *st, const void *raw, const unsigned char *held,
		      uint64_t *ea)
{
	ext2_filsys fs = st->fs;
	blk64_t acl = ext2fs_file_acl_block(fs, raw);
	unsigned char *buf = NULL;
	bool ok = true;

	*ea = 0;
	if (!ext2fs_has_feature_ea_inode(fs->super))
		return true;
	if (acl && !held && ext4_blocks_in_fs(fs, acl, 1)) {
		buf = ext4_block_buf(st);
		ok = ext4_read_direct(st, acl, buf) == 0;
		held = buf;
	}
	if (ok)
		*ea = ext4_ea_inode_blocks(fs, raw, acl ? held : NULL);
	free(buf);
	return ok;
}

/* The fresh copy of the suspect's attribute block among its bufs, or NULL. */
static const unsigned char *held_block(const struct ext4_suspect *s,
				       unsigned char *const *bufs, blk64_t blk)
{
	for (unsigned i = 0; blk && i < s->nr_blocks; i++)
		if (s->blocks[i] == blk)
			return bufs[i];
	return NULL;
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

/*
 * The tree checks' suspects: blocks[0] the inode's block, then the tree's
 * blocks as first read (tree_beyond: there were more than it holds);
 * ext4_fresh_tree_totals() walks the fresh copies.
 */
static bool blocks_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	struct ext2_inode_large in;
	uint64_t count, end, ea;

	return ext4_fresh_tree_totals(ctx, s, bufs, &in, &count, &end) &&
	       ea_charge(st, bufs[0] + s->arg[0],
			 held_block(s, bufs, ext2fs_file_acl_block(fs, (const void *)&in)), &ea) &&
	       inode_sectors(fs, (const void *)&in) != want_sectors(fs, (const void *)&in, count, ea);
}

static bool past_end_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			       unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;
	uint64_t count, end;

	return ext4_fresh_tree_totals(ctx, s, bufs, &in, &count, &end) &&
	       written_past_end(fs, (const void *)&in, end);
}

static const char *tree_name(const struct ext2_inode *in)
{
	return in->i_flags & EXT4_EXTENTS_FL ? "extent tree" : "block map";
}

/* A suspect about the tree: the inode's block, then the tree's blocks. */
static void tree_suspect(struct scrub_ctx *ctx, const char *check, ext2_ino_t ino,
			 const struct ext2_inode_large *in, ext4_still_bad_fn fn, const char *what,
			 const blk64_t *tree, unsigned nr_tree)
{
	ext4_suspect_tree(ext4_inode_suspect(ctx, check, ino, in, fn, "%s", what), tree, nr_tree);
}

/*
 * The i_blocks suspect; with values in EA inodes, their entries in the
 * attribute block are read again with the inode's block, before the tree.
 */
static void blocks_suspect(struct scrub_ctx *ctx, ext2_ino_t ino,
			   const struct ext2_inode_large *in, const char *what, uint64_t ea,
			   const blk64_t *tree, unsigned nr_tree)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_INODE_BLOCKS, ino, in,
						    blocks_still_bad, "%s", what);
	blk64_t acl = ext2fs_file_acl_block(fs, (const void *)in);

	if (ea && acl && ext4_blocks_in_fs(fs, acl, 1))
		ext4_suspect_block(s, acl);
	ext4_suspect_tree(s, tree, nr_tree);
}

void ext4_xref_tree(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *big,
		    uint64_t count, uint64_t written_end, const blk64_t *tree, unsigned nr_tree)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	const struct ext2_inode *in = (const void *)big;
	struct strbuf sb = STRBUF_INIT;
	uint64_t ea;

	if (reserved(fs, ino))
		return;
	if (!ext2fs_has_feature_bigalloc(fs->super) &&
	    ea_charge(ext4_state(ctx), big, NULL, &ea) &&
	    inode_sectors(fs, in) != want_sectors(fs, in, count, ea)) {
		strbuf_addf(&sb, "i_blocks is %llu, the %s%s maps %llu",
			    (unsigned long long)inode_sectors(fs, in), tree_name(in),
			    ext2fs_file_acl_block(fs, in) ? " and the attribute block" : "",
			    (unsigned long long)want_sectors(fs, in, count, ea));
		if (ea)
			strbuf_addf(&sb, " (with %llu blocks charged for attribute values in EA "
				    "inodes)", (unsigned long long)ea);
		blocks_suspect(ctx, ino, big, sb.buf, ea, tree, nr_tree);
		strbuf_reset(&sb);
	}
	if (written_past_end(fs, in, written_end)) {
		strbuf_addf(&sb, "i_size is %llu, but the %s maps written blocks up to "
			    "file block %llu (%llu bytes)", (unsigned long long)EXT2_I_SIZE(in),
			    tree_name(in),
			    (unsigned long long)written_end - 1,
			    (unsigned long long)written_end * fs->blocksize);
		tree_suspect(ctx, CHECK_EXT4_INODE_SIZE, ino, big, past_end_still_bad, sb.buf,
			     tree, nr_tree);
	}
	strbuf_release(&sb);
}

bool ext4_xref_inode(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *big)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	const struct ext2_inode *in = (const void *)big;
	const char *why;

	if (reserved(fs, ino))
		return true;
	if (in->i_links_count && in->i_dtime > fs->super->s_inodes_count) {
		struct strbuf sb = STRBUF_INIT;

		strbuf_addf(&sb, "in use with %u links, but has a deletion time (dtime %u)",
			    in->i_links_count, in->i_dtime);
		ext4_inode_suspect(ctx, CHECK_EXT4_INODE_DTIME, ino, big, dtime_still_bad, "%s",
				   sb.buf);
		strbuf_release(&sb);
	}
	if ((why = bad_flag(fs, in))) {
		struct strbuf sb = STRBUF_INIT;

		strbuf_addf(&sb, "flags 0x%x: %s", in->i_flags, why);
		ext4_inode_suspect(ctx, CHECK_EXT4_INODE_FLAGS, ino, big, flags_still_bad, "%s",
				   sb.buf);
		strbuf_release(&sb);
		return false;	/* the rest reads the inode by its flags */
	}
	if (acl_hi_bad(fs, in))
		ext4_inode_suspect(ctx, CHECK_EXT4_INODE_FIELD, ino, big, acl_hi_still_bad,
				   "i_file_acl_hi is %u without the 64bit feature",
				   in->osd2.linux2.l_i_file_acl_high);
	if ((why = dir_size_bad(fs, in))) {
		struct strbuf sb = STRBUF_INIT;

		strbuf_addf(&sb, "directory i_size %llu %s (%llu bytes in %u-byte blocks)",
			    (unsigned long long)EXT2_I_SIZE(in), why,
			    (unsigned long long)inode_sectors(fs, in) * 512, fs->blocksize);
		ext4_inode_suspect(ctx, CHECK_EXT4_INODE_SIZE, ino, big, size_still_bad, "%s",
				   sb.buf);
		strbuf_release(&sb);
	}
	return true;
}

/* Does the journal's map leave a file block below its i_size unmapped? */
static bool journal_map_bad(ext2_filsys fs, const struct ext2_inode *in, uint64_t mapped_in_size)
{
	return mapped_in_size != EXT2_I_SIZE(in) / fs->blocksize;
}

static bool journal_map_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				  unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;
	uint64_t mapped;

	return ext4_fresh_tree_in_size(ctx, s, bufs, &in, &mapped) &&
	       journal_map_bad(fs, (const void *)&in, mapped);
}

void ext4_xref_journal(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *big,
		       uint64_t mapped_in_size, const blk64_t *tree, unsigned nr_tree)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	const struct ext2_inode *in = (const void *)big;
	struct ext4_suspect *s;

	if (!journal_map_bad(fs, in, mapped_in_size))
		return;
	s = ext4_inode_suspect(ctx, CHECK_EXT4_JOURNAL, ino, big, journal_map_still_bad,
			       "the journal's %s maps %llu of the %llu blocks of its size: jbd2 "
			       "needs every one of them, no hole", tree_name(in),
			       (unsigned long long)mapped_in_size,
			       (unsigned long long)(EXT2_I_SIZE(in) / fs->blocksize));
	ext4_suspect_tree(s, tree, nr_tree);
	/* About the journal itself (as its map's other findings): no journal to judge it. */
	s->journal_free = true;
}
