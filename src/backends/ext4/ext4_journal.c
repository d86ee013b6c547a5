/*
 * ext4_journal: the journal, as e2fsck -fn checks it before it trusts it
 * (all ext4.journal).
 *
 * The journal superblock -- the journal inode's first block, or the
 * header of an external journal device -- is read from the disk with
 * O_DIRECT and must be a jbd2 superblock (magic, type v1 or v2) whose
 * geometry is the filesystem's (block size; s_maxlen no more than the
 * journal's blocks and s_first inside it), with no incompatible feature
 * jbd2 does not know, not both checksum versions, and with checksum v2 or
 * v3 the CRC32c type and a checksum that matches; an internal journal's v2
 * superblock names one user at most.  The kernel checks all
 * this at mount, so such damage exists online only when it happened after
 * the mount (the kernel rewrites the superblock from memory when the log
 * tail moves).
 *
 * The internal journal's blocks (ext4_journal_map(), read through
 * libext2fs before the inode scan) belong to the journal alone: the inode
 * scan (ext4_inodes.c) reports another inode that maps one of them, a
 * journal block that is group metadata or marked free in the block bitmap,
 * and a journal extent outside the filesystem, as ext4.journal.
 *
 * An external journal (the superblock names its UUID, s_journal_uuid, and
 * has no journal inode) is looked for among the block devices by that UUID
 * with libblkid (ext4_journal_open(), phase 1); its header must also be a
 * v2 superblock with that UUID whose users include this filesystem.  Not
 * finding it is an error: e2fsck cannot check the filesystem without it,
 * and neither can ext4_confirm.c tell recent blocks from old (every other
 * suspect is then an info).  Found, it is also the journal ext4_confirm.c
 * reads.
 *
 * Every finding is a suspect for ext4_confirm.c: the blocks are read again
 * twice and checked on the fresh bytes (an external header is read again
 * from its device each time).
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <blkid/blkid.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/crc32c.h"
#include "report/report.h"
#include "lib/strbuf.h"

/* The kernel's journal_superblock_t (include/linux/jbd2.h): big-endian. */
#define JSB_MAGIC		0xc03b3998U
#define JSB_SIZE		1024	/* sizeof(journal_superblock_t) */
#define JSB_BLOCKTYPE		4
#define JSB_BLOCKSIZE		12
#define JSB_MAXLEN		16
#define JSB_FIRST		20
#define JSB_INCOMPAT		40
#define JSB_UUID		48	/* 16 bytes */
#define JSB_NR_USERS		64
#define JSB_CSUM_TYPE		80	/* a byte */
#define JSB_USERS		256	/* 16 bytes each */
#define JSB_MAX_USERS		48	/* JBD2_USERS_MAX */
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
		snprintf(why, len, "says %u blocks from block %u; the journal has %llu",
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

/*
 * The same for an internal journal, whose only user is its filesystem: a v2
 * superblock that says more users is a v1 superblock's bytes read as v2's
 * or damage, and e2fsck refuses it ("External journal has multiple
 * filesystem users (unsupported)"; e2fsprogs' f_bad_local_jnl,
 * d_corrupt_journal_nr_users).
 */
static const char *internal_jsb_bad(ext2_filsys fs, const unsigned char *b, uint64_t nblocks,
				    char *why, size_t len)
{
	uint32_t users = jget(b, JSB_NR_USERS);

	if (jsb_bad(fs, b, nblocks, why, len))
		return why;
	if (jget(b, JSB_BLOCKTYPE) != JSB_V2 || users <= 1)
		return NULL;
	snprintf(why, len, "says %u users; an internal journal has one", users);
	return why;
}

static bool jsb_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			  unsigned char *const *bufs)
{
	char why[96];

	return internal_jsb_bad(ext4_state(ctx)->fs, bufs[0], s->arg[0], why, sizeof(why));
}

/* ---- the internal journal's blocks --------------------------------------- */

struct jmap {
	struct ext4_state *st;
	size_t alloc;
};

static int jmap_block(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt, blk64_t ref_blk,
		      int ref_offset, void *priv)
{
	struct jmap *m = priv;
	struct ext4_state *st = m->st;
	struct ext4_run *r = st->nr_jruns ? &st->jruns[st->nr_jruns - 1] : NULL;

	(void)ref_blk;
	(void)ref_offset;
	/* Blocks outside the filesystem: the extent walk says so (ext4_inodes.c). */
	if (blockcnt < 0 || !ext4_blocks_in_fs(fs, *blocknr, 1))
		return 0;
	if (r && r->start + r->len == *blocknr) {
		r->len++;
		return 0;
	}
	if (st->nr_jruns == m->alloc) {
		m->alloc = m->alloc ? 2 * m->alloc : 16;
		st->jruns = xrealloc(st->jruns, m->alloc * sizeof(*st->jruns));
	}
	st->jruns[st->nr_jruns++] = (struct ext4_run){ *blocknr, 1 };
	return 0;
}

void ext4_journal_map(struct scrub_ctx *ctx, bool say)
{
	struct ext4_state *st = ext4_state(ctx);
	struct jmap m = { .st = st };

	if (!st->journal_known)
		return;
	if (!st->jmapped) {
		st->jmapped = true;
		st->jmap_err = !ext4_inode_placed(st->fs, st->fs->super->s_journal_inum) ?
			       EXT2_ET_GDESC_BAD_INODE_TABLE :
			       ext2fs_block_iterate3(st->fs, st->fs->super->s_journal_inum,
						     BLOCK_FLAG_READ_ONLY | BLOCK_FLAG_DATA_ONLY,
						     NULL, jmap_block, &m);
	}
	if (!say)
		return;
	if (st->jmap_err)
		report_verbose(ctx, "Phase 3: ext4: the journal inode's blocks cannot be listed "
			       "(%s): other inodes are not checked against them",
			       ext4_strerror(st->jmap_err));
	else
		report_verbose(ctx, "Phase 3: ext4: the journal is %zu %s of blocks",
			       st->nr_jruns, st->nr_jruns == 1 ? "run" : "runs");
}

bool ext4_journal_overlap(const struct ext4_state *st, blk64_t p, uint64_t len,
			  blk64_t *first, blk64_t *last)
{
	bool hit = false;

	/* A journal is a handful of runs (mke2fs makes it contiguous). */
	for (size_t i = 0; i < st->nr_jruns; i++) {
		const struct ext4_run *r = &st->jruns[i];
		blk64_t lo = p > r->start ? p : r->start;
		blk64_t hi = p + len < r->start + r->len ? p + len : r->start + r->len;

		if (lo >= hi)
			continue;
		if (!hit || lo < *first)
			*first = lo;
		if (!hit || hi - 1 > *last)
			*last = hi - 1;
		hit = true;
	}
	return hit;
}

const char *ext4_metadata_owner(ext2_filsys fs, blk64_t b, char *buf, size_t len)
{
	/* The descriptor blocks after a backup superblock, and their reserve (not with meta_bg). */
	blk64_t old_desc_blocks = ext2fs_has_feature_meta_bg(fs->super) ?
		fs->super->s_first_meta_bg : fs->desc_blocks + fs->super->s_reserved_gdt_blocks;

	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk64_t super = 0, old_desc = 0, new_desc = 0, it = ext2fs_inode_table_loc(fs, g);
		blk_t used = 0;

		if (b == ext2fs_block_bitmap_loc(fs, g))
			snprintf(buf, len, "the block bitmap of group %u", g);
		else if (b == ext2fs_inode_bitmap_loc(fs, g))
			snprintf(buf, len, "the inode bitmap of group %u", g);
		else if (it && b >= it && b - it < fs->inode_blocks_per_group)
			snprintf(buf, len, "the inode table of group %u", g);
		else if (ext2fs_super_and_bgd_loc2(fs, g, &super, &old_desc, &new_desc, &used) == 0 &&
			 ((ext2fs_bg_has_super(fs, g) && b == super) ||
			  (old_desc && b >= old_desc && b - old_desc < old_desc_blocks) ||
			  (new_desc && b == new_desc)))
			snprintf(buf, len, "the superblock or group descriptors in group %u", g);
		else
			continue;
		return buf;
	}
	if (ext2fs_has_feature_mmp(fs->super) && b == fs->super->s_mmp_block) {
		snprintf(buf, len, "the MMP block");
		return buf;
	}
	return NULL;
}

/* ---- an external journal --------------------------------------------------- */

static void uuid_text(const unsigned char *u, char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

/* The block device whose (journal device's) superblock has UUID u; free() it. */
static char *device_by_uuid(const unsigned char *u)
{
	blkid_cache cache;
	blkid_dev dev;
	char text[37], *name = NULL;

	uuid_text(u, text);
	/* "/dev/null": probe afresh, and write no cache file (fscrub writes nothing). */
	if (blkid_get_cache(&cache, "/dev/null") < 0)
		return NULL;
	if (blkid_probe_all(cache) == 0 && (dev = blkid_find_dev_with_tag(cache, "UUID", text)))
		name = xstrdup(blkid_dev_devname(dev));
	blkid_put_cache(cache);
	return name;
}

void ext4_journal_open(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	char *name = device_by_uuid(st->fs->super->s_journal_uuid);

	if (!name)
		return;
	st->jdev_fd = open(name, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (st->jdev_fd < 0)
		report_operational(ctx, NULL, NULL, errno, "cannot open the external journal %s",
				   name);
	else
		report_verbose(ctx, "Phase 1: ext4: the external journal is %s", name);
	free(name);
}

/* The external journal's superblock, fresh from its device, into b; 0 or -errno. */
static int ext_header_read(struct ext4_state *st, unsigned char *b, uint64_t *nblocks)
{
	unsigned bs = st->fs->blocksize;
	uint64_t bytes;
	ssize_t n;

	if (ioctl(st->jdev_fd, BLKGETSIZE64, &bytes) < 0)
		return -errno;
	*nblocks = bytes / bs;
	n = pread(st->jdev_fd, b, bs, (off_t)ext2fs_journal_sb_start((int)bs) * bs);
	return n < 0 ? -errno : (size_t)n == bs ? 0 : -EIO;
}

/* What is wrong with an external journal's header b for the superblock sb, or NULL. */
static const char *ext_header_bad(ext2_filsys fs, const struct ext2_super_block *sb,
				  const unsigned char *b, uint64_t nblocks, char *why, size_t len)
{
	uint32_t users = jget(b, JSB_NR_USERS);
	char have[37], want[37];

	if (jsb_bad(fs, b, nblocks, why, len))
		return why;
	if (jget(b, JSB_BLOCKTYPE) != JSB_V2) {
		snprintf(why, len, "is a v1 superblock, which cannot be an external journal's");
		return why;
	}
	if (memcmp(b + JSB_UUID, sb->s_journal_uuid, 16)) {
		uuid_text(b + JSB_UUID, have);
		uuid_text(sb->s_journal_uuid, want);
		snprintf(why, len, "has UUID %s, the filesystem's journal is %s", have, want);
		return why;
	}
	for (uint32_t i = 0; i < users && i < JSB_MAX_USERS; i++)
		if (!memcmp(b + JSB_USERS + 16 * i, sb->s_uuid, 16))
			return NULL;
	uuid_text(sb->s_uuid, want);
	snprintf(why, len, "does not list this filesystem (%s) among its %u users", want, users);
	return why;
}

/* The superblock out of the fresh copy of its block (bufs[0]). */
static const struct ext2_super_block *fresh_sb(ext2_filsys fs, unsigned char *const *bufs)
{
	return (const void *)(bufs[0] + SUPERBLOCK_OFFSET % fs->blocksize);
}

static bool ext_missing_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				  unsigned char *const *bufs)
{
	char *name = device_by_uuid(fresh_sb(ext4_state(ctx)->fs, bufs)->s_journal_uuid);

	(void)s;
	free(name);
	return !name;
}

static bool ext_header_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				 unsigned char *const *bufs)
{
	struct ext4_state *st = ext4_state(ctx);
	unsigned char *b = ext4_block_buf(st);
	uint64_t nblocks;
	char why[160];
	bool bad;

	(void)s;
	bad = ext_header_read(st, b, &nblocks) == 0 &&
	      ext_header_bad(st->fs, fresh_sb(st->fs, bufs), b, nblocks, why, sizeof(why));
	free(b);
	return bad;
}

static void ext_journal_check(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	struct ext4_suspect *s;
	unsigned char *b;
	uint64_t nblocks;
	char uuid[37], why[160];
	int ret;

	uuid_text(fs->super->s_journal_uuid, uuid);
	if (st->jdev_fd < 0) {
		s = ext4_suspect_add(ctx, CHECK_EXT4_JOURNAL, 0, ext_missing_still_bad,
			"the external journal (UUID %s, device %u:%u) is not found: no block device "
			"has that UUID", uuid, major(fs->super->s_journal_dev),
			minor(fs->super->s_journal_dev));
		ext4_suspect_block(s, SUPERBLOCK_OFFSET / fs->blocksize);
		s->journal_free = true;
		return;
	}
	b = ext4_block_buf(st);
	if ((ret = ext_header_read(st, b, &nblocks)) < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot read the external journal's "
				   "superblock");
	else if (ext_header_bad(fs, fs->super, b, nblocks, why, sizeof(why))) {
		s = ext4_suspect_add(ctx, CHECK_EXT4_JOURNAL, 0, ext_header_still_bad,
			"the external journal's superblock (UUID %s, block %d of its device) %s",
			uuid, ext2fs_journal_sb_start((int)fs->blocksize), why);
		ext4_suspect_block(s, SUPERBLOCK_OFFSET / fs->blocksize);
		s->journal_free = true;
	}
	free(b);
}

/* ---- the journal superblock ---------------------------------------------- */

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

	if (ext2fs_has_feature_journal(fs->super) && !st->journal_known && !jino) {
		ext_journal_check(ctx);
		return;
	}
	if (!st->journal_known || !ext4_inode_placed(fs, jino) || ext2fs_read_inode(fs, jino, &in))
		return;
	nblocks = EXT2_I_SIZE(&in) / fs->blocksize;
	if (ext2fs_bmap2(fs, jino, &in, NULL, 0, 0, NULL, &pblk) || !pblk ||
	    !ext4_blocks_in_fs(fs, pblk, 1)) {
		report_verbose(ctx, "Phase 3: ext4: the journal inode maps no superblock: "
			       "it is not checked");
		return;
	}
	/* The map's fault, which the inode scan reports (ext4.journal): not a superblock. */
	if (ext4_metadata_owner(fs, pblk, why, sizeof(why))) {
		report_verbose(ctx, "Phase 3: ext4: the journal inode maps its superblock to %s: "
			       "it is not checked", why);
		return;
	}
	b = ext4_block_buf(st);
	if (ext4_read_direct(st, pblk, b) == 0 &&
	    internal_jsb_bad(fs, b, nblocks, why, sizeof(why))) {
		struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_JOURNAL, jino,
			jsb_still_bad, "journal superblock (block %llu) %s",
			(unsigned long long)pblk, why);

		ext4_suspect_block(s, pblk);
		s->arg[0] = nblocks;
		/*
		 * About the journal itself: jbd2 keeps its superblock in
		 * memory and writes it whole, never in the form found, so
		 * what two fresh reads show of it needs no journal to judge
		 * (a bad magic leaves none to read).
		 */
		s->journal_free = true;
	}
	free(b);
}
