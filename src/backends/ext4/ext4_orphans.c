/*
 * ext4_orphans: the inodes the disk says are orphans -- open when their
 * last name went, to be freed when the last user closes them or, after a
 * crash, at the next mount.  ext4 keeps them in one of two places:
 *
 *   - the superblock's orphan list: s_last_orphan names the first, and
 *     each orphan's i_dtime (no deletion time while it is in use) names
 *     the next, 0 ending the list;
 *   - with the orphan_file feature, the orphan file: blocks of 32-bit
 *     inode numbers (0: a free slot), each block ending in a tail of its
 *     magic and checksum.
 *
 * ext4_orphans_collect() reads both into st->orphans before the inode
 * scan, which then judges an inode with no links that the inode bitmap
 * marks in use (ext4_inodes.c): on neither, nothing will ever free it.
 * A list that leaves the inodes (past the last, or one not in use) or
 * loops is check_orphan_list()'s finding; here the walk only stops.
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "scan/context.h"

/* The orphan file block's tail: ob_magic and ob_checksum (fs/ext4/ext4.h). */
#define ORPHAN_BLOCK_TAIL 8

/* The superblock's list, to its end or to the first link that leaves the inodes. */
static void collect_list(struct ext4_state *st)
{
	ext2_filsys fs = st->fs;
	ext2_ino_t ino = fs->super->s_last_orphan;
	struct ext2_inode_large in;

	/* A list through every inode has as many steps as there are inodes: more is a loop. */
	for (uint32_t steps = 0; ino && ino <= fs->super->s_inodes_count &&
	     steps <= fs->super->s_inodes_count; steps++) {
		if (ext2fs_fast_test_inode_bitmap2(st->orphans, ino) || !ext4_inode_placed(fs, ino) ||
		    ext2fs_read_inode_full(fs, ino, (struct ext2_inode *)&in, sizeof(in)))
			return;
		ext2fs_mark_inode_bitmap2(st->orphans, ino);
		ino = in.i_dtime;
	}
}

struct orphan_file_walk {
	struct ext4_state *st;
	unsigned char *buf;
};

/* One block of the orphan file: its inode numbers into st->orphans. */
static int orphan_file_block(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt,
			     blk64_t ref_blk, int ref_offset, void *priv)
{
	struct orphan_file_walk *w = priv;
	uint32_t slots = (fs->blocksize - ORPHAN_BLOCK_TAIL) / sizeof(uint32_t);

	(void)blockcnt;
	(void)ref_blk;
	(void)ref_offset;
	if (!ext4_blocks_in_fs(fs, *blocknr, 1) || ext4_read_direct(w->st, *blocknr, w->buf) < 0)
		return 0;
	for (uint32_t i = 0; i < slots; i++) {
		uint32_t ino;

		memcpy(&ino, w->buf + i * sizeof(ino), sizeof(ino));
		ino = le32toh(ino);
		if (ino && ino <= fs->super->s_inodes_count)
			ext2fs_mark_inode_bitmap2(w->st->orphans, ino);
	}
	return 0;
}

/* The orphan file's slots (the orphan_file feature), as far as its map can be read. */
static void collect_file(struct ext4_state *st)
{
	ext2_filsys fs = st->fs;
	ext2_ino_t ino = fs->super->s_orphan_file_inum;
	struct orphan_file_walk w = { .st = st };

	if (!ext2fs_has_feature_orphan_file(fs->super) || !ext4_inode_placed(fs, ino))
		return;
	w.buf = ext4_block_buf(st);
	ext2fs_block_iterate3(fs, ino, BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY, NULL,
			      orphan_file_block, &w);
	free(w.buf);
}

void ext4_orphans_collect(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (ext2fs_allocate_inode_bitmap(st->fs, "orphans", &st->orphans)) {
		st->orphans = NULL;
		return;
	}
	collect_list(st);
	collect_file(st);
}

bool ext4_orphan_listed(const struct ext4_state *st, ext2_ino_t ino)
{
	return !st->orphans || ext2fs_fast_test_inode_bitmap2(st->orphans, ino);
}
