/*
 * ext4_journal: the internal journal's superblock, as e2fsck -fn checks it
 * before it trusts the journal (ext4.journal).
 *
 * The journal inode's first block is read from the disk with O_DIRECT
 * and must be a jbd2 superblock (magic, type v1 or v2) whose geometry is
 * the filesystem's (block size; s_maxlen no more than the inode's blocks
 * and s_first inside it), with no incompatible feature jbd2 does not know,
 * not both checksum versions, and with checksum v2 or v3 the CRC32c type
 * and a checksum that matches.  The kernel checks all this at mount, so
 * such damage exists online only when it happened after the mount (the
 * kernel rewrites the superblock from memory when the log tail moves).
 *
 * A finding is a suspect for ext4_confirm.c: the block is read again twice
 * and checked on the fresh bytes.  An external journal device is not read
 * (ext4.unchecked says so in phase 1).
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "context.h"
#include "crc32c.h"
#include "report.h"

/* The kernel's journal_superblock_t (include/linux/jbd2.h): big-endian. */
#define JSB_MAGIC		0xc03b3998U
#define JSB_SIZE		1024	/* sizeof(journal_superblock_t) */
#define JSB_BLOCKTYPE		4
#define JSB_BLOCKSIZE		12
#define JSB_MAXLEN		16
#define JSB_FIRST		20
#define JSB_INCOMPAT		40
#define JSB_CSUM_TYPE		80	/* a byte */
#define JSB_CHECKSUM		0xfc
#define JSB_V1			3
#define JSB_V2			4
#define JINCOMPAT_CSUM_V2	0x8
#define JINCOMPAT_CSUM_V3	0x10
/* REVOKE, 64BIT, ASYNC_COMMIT, CSUM_V2, CSUM_V3, FAST_COMMIT. */
#define JINCOMPAT_KNOWN		0x3f
#define JCSUM_CRC32C		4

static uint32_t jget(const unsigned char *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, 4);
	return be32toh(v);
}

/* What is wrong with the journal superblock b (of a journal of nblocks), or NULL. */
static const char *jsb_bad(ext2_filsys fs, const unsigned char *b, uint64_t nblocks,
			   char *why, size_t len)
{
	uint32_t type = jget(b, JSB_BLOCKTYPE), incompat = jget(b, JSB_INCOMPAT);
	uint32_t maxlen = jget(b, JSB_MAXLEN), first = jget(b, JSB_FIRST);
	unsigned char copy[JSB_SIZE];

	if (jget(b, 0) != JSB_MAGIC)
		snprintf(why, len, "has magic 0x%08x", jget(b, 0));
	else if (type != JSB_V1 && type != JSB_V2)
		snprintf(why, len, "has block type %u", type);
	else if (jget(b, JSB_BLOCKSIZE) != fs->blocksize)
		snprintf(why, len, "says blocks of %u bytes, the filesystem's are %u",
			 jget(b, JSB_BLOCKSIZE), fs->blocksize);
	else if (maxlen > nblocks || !first || first >= maxlen)
		snprintf(why, len, "says %u blocks from block %u; the journal inode has %llu",
			 maxlen, first, (unsigned long long)nblocks);
	else if (type == JSB_V1)
		return NULL;
	else if (incompat & ~JINCOMPAT_KNOWN)
		snprintf(why, len, "has unknown incompatible features 0x%x",
			 incompat & ~JINCOMPAT_KNOWN);
	else if ((incompat & JINCOMPAT_CSUM_V2) && (incompat & JINCOMPAT_CSUM_V3))
		snprintf(why, len, "has both checksum v2 and v3");
	else if (!(incompat & (JINCOMPAT_CSUM_V2 | JINCOMPAT_CSUM_V3)))
		return NULL;
	else if (b[JSB_CSUM_TYPE] != JCSUM_CRC32C)
		snprintf(why, len, "has checksum type %u", b[JSB_CSUM_TYPE]);
	else {
		/* jbd2_superblock_csum(): CRC32c from ~0 of it with the field 0. */
		memcpy(copy, b, JSB_SIZE);
		memset(copy + JSB_CHECKSUM, 0, 4);
		if (crc32c(0xffffffff, copy, JSB_SIZE) == jget(b, JSB_CHECKSUM))
			return NULL;
		snprintf(why, len, "fails its checksum");
	}
	return why;
}

static bool jsb_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			  unsigned char *const *bufs)
{
	char why[96];

	return jsb_bad(ext4_state(ctx)->fs, bufs[0], s->arg[0], why, sizeof(why));
}

void ext4_journal_check(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	ext2_ino_t jino = fs->super->s_journal_inum;
	struct ext2_inode in;
	unsigned char *b;
	blk64_t pblk = 0;
	uint64_t nblocks;
	char why[96];

	if (!st->journal_known || ext2fs_read_inode(fs, jino, &in))
		return;
	nblocks = EXT2_I_SIZE(&in) / fs->blocksize;
	if (ext2fs_bmap2(fs, jino, &in, NULL, 0, 0, NULL, &pblk) || !pblk ||
	    !ext4_blocks_in_fs(fs, pblk, 1)) {
		report_verbose(ctx, "Phase 3: ext4: the journal inode maps no superblock: "
			       "it is not checked");
		return;
	}
	b = ext4_block_buf(st);
	if (ext4_read_direct(st, pblk, b) == 0 && jsb_bad(fs, b, nblocks, why, sizeof(why))) {
		struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_JOURNAL, jino,
			jsb_still_bad, "journal superblock (block %llu) %s",
			(unsigned long long)pblk, why);

		ext4_suspect_block(s, pblk);
		s->arg[0] = nblocks;
	}
	free(b);
}
