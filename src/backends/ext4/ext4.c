/*
 * ext4: the backend for ext2/3/4 on a block device; see ext4.h for the
 * shape of the backend and the live-filesystem rule.
 *
 * Phase 1 identifies the filesystem (statfs magic, the mount's device, the
 * superblock's magic and features), syncs it (syncfs: everything written
 * before the scan is at least in the journal) and opens the device
 * read-only with libext2fs: no journal replay (libext2fs never replays),
 * no write, direct I/O, the I/O manager's cache off, checksum errors
 * ignored by libext2fs so that fscrub verifies each checksum itself.
 *
 * Phase 2 checks what the superblock and the group descriptors say: the
 * primary superblock's checksum and geometry, every backup superblock
 * against the primary (the fields that never change on a mounted
 * filesystem but with an online resize, which writes all of them), every
 * group descriptor's checksum and the places it names, the checksums of
 * the block and inode bitmaps and the free counts of each group against
 * its bitmaps; and, as an info, the sums of the group counts against
 * statfs (on a live filesystem they differ by reservations, delayed
 * allocation and changes not yet on the disk).
 *
 * Phase 3 gives the walk its files' inodes and small extent maps from the
 * inode tables (ext4_bulk.c) and its directories' blocks ahead of it in
 * the page cache (ext4_dirra.c), and reads the inode tables again after the
 * walk (ext4_inodes.c).
 * Every suspect is confirmed by ext4_confirm.c before it is reported.
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <et/com_err.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "scan/context.h"
#include "lib/crc32c.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

#define EXT4_STATFS_MAGIC 0xEF53	/* statfs f_type of ext2, ext3 and ext4 */

const char *ext4_strerror(errcode_t err)
{
	return error_message(err);
}

bool ext4_inode_location(ext2_filsys fs, ext2_ino_t ino, blk64_t *blk, unsigned *off)
{
	uint32_t ipg = fs->super->s_inodes_per_group;
	uint64_t byte;
	dgrp_t g;

	if (ino == 0 || ino > fs->super->s_inodes_count)
		return false;
	g = (ino - 1) / ipg;
	byte = (uint64_t)((ino - 1) % ipg) * EXT2_INODE_SIZE(fs->super);
	*blk = ext2fs_inode_table_loc(fs, g) + byte / fs->blocksize;
	*off = (unsigned)(byte % fs->blocksize);
	return ext2fs_inode_table_loc(fs, g) != 0;
}

bool ext4_all_zero(const void *p, size_t len)
{
	const unsigned char *b = p;

	return len == 0 || (b[0] == 0 && !memcmp(b, b + 1, len - 1));
}

bool ext4_blocks_in_fs(ext2_filsys fs, blk64_t b, blk64_t n)
{
	return b >= fs->super->s_first_data_block && b < ext2fs_blocks_count(fs->super) &&
	       n <= ext2fs_blocks_count(fs->super) - b;
}

uint32_t ext4_itable_in_use(ext2_filsys fs, dgrp_t g)
{
	uint32_t ipg = fs->super->s_inodes_per_group, unused;

	if (!ext2fs_has_group_desc_csum(fs))
		return ipg;
	if (ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT))
		return 0;
	unused = ext2fs_bg_itable_unused(fs, g);
	return unused <= ipg ? ipg - unused : ipg;	/* a tail past the group proves nothing */
}

blk64_t ext4_gd_block(ext2_filsys fs, dgrp_t g)
{
	return ext2fs_descriptor_block_loc2(fs, fs->super->s_first_data_block,
					    g / EXT2_DESC_PER_BLOCK(fs->super));
}

const void *ext4_gd_in_block(ext2_filsys fs, dgrp_t g, const unsigned char *blockbuf)
{
	return blockbuf + (size_t)(g % EXT2_DESC_PER_BLOCK(fs->super)) * EXT2_DESC_SIZE(fs->super);
}

/*
 * Run a libext2fs check of group g's descriptor against a fresh copy of
 * it: the copy stands in for the descriptor read at open time meanwhile.
 */
struct gd_swap {
	void *slot;
	unsigned char saved[EXT2_MAX_DESC_SIZE];
	size_t size;
};

static void gd_swap_in(ext2_filsys fs, dgrp_t g, const unsigned char *gdblock, struct gd_swap *sw)
{
	sw->slot = ext2fs_group_desc(fs, fs->group_desc, g);
	sw->size = EXT2_DESC_SIZE(fs->super);
	memcpy(sw->saved, sw->slot, sw->size);
	memcpy(sw->slot, ext4_gd_in_block(fs, g, gdblock), sw->size);
}

static void gd_swap_out(struct gd_swap *sw)
{
	memcpy(sw->slot, sw->saved, sw->size);
}

/* ---- identification and setup ------------------------------------------ */

static bool is_ext_fstype(const char *t)
{
	return !strcmp(t, "ext4") || !strcmp(t, "ext3") || !strcmp(t, "ext2");
}

static bool ext4_match(const struct scrub_ctx *ctx)
{
	struct stat st;

	return ctx->sfs.f_type == EXT4_STATFS_MAGIC && is_ext_fstype(ctx->fstype) &&
	       ctx->source && stat(ctx->source, &st) == 0 && S_ISBLK(st.st_mode);
}

/* Is the mount's source the device the mount is on (not a stale name)? */
static bool source_is_mounted_device(const struct scrub_ctx *ctx)
{
	struct stat st;

	return stat(ctx->source, &st) == 0 && S_ISBLK(st.st_mode) &&
	       major(st.st_rdev) == ctx->root_stx.stx_dev_major &&
	       minor(st.st_rdev) == ctx->root_stx.stx_dev_minor;
}

/*
 * ext2fs_open2()'s errors that name a superblock or descriptor it will not
 * use (a kernel that mounted it took it, or took it read-only): damage for
 * phase 2 to report, not a failure to check.
 */
static bool superblock_refused(errcode_t err)
{
	return err == EXT2_ET_BAD_MAGIC || err == EXT2_ET_CORRUPT_SUPERBLOCK ||
	       err == EXT2_ET_UNSUPP_FEATURE || err == EXT2_ET_RO_UNSUPP_FEATURE ||
	       err == EXT2_ET_REV_TOO_HIGH || err == EXT2_ET_UNEXPECTED_BLOCK_SIZE ||
	       err == EXT2_ET_BAD_DESC_SIZE || err == EXT2_ET_GDESC_BAD_BLOCK_MAP ||
	       err == EXT2_ET_GDESC_BAD_INODE_MAP || err == EXT2_ET_GDESC_BAD_INODE_TABLE ||
	       err == EXT2_ET_CORRUPT_JOURNAL_SB;
}

static int ext4_scan_fs(struct scrub_ctx *ctx)
{
	static bool error_table_added;
	struct ext4_state *st = xcalloc(1, sizeof(*st));
	errcode_t err;
	int ret = generic_ops.scan_fs(ctx);

	/* libext2fs does not register its messages: without this, "Unknown code ext2 26". */
	if (!error_table_added) {
		add_error_table(&et_ext2_error_table);
		error_table_added = true;
	}

	st->direct_fd = -1;
	st->cached_fd = -1;
	st->jdev_fd = -1;
	ctx->backend = st;
	if (ret < 0)
		return ret;
	if (!source_is_mounted_device(ctx)) {
		str_info(ctx, CHECK_EXT4_UNCHECKED, NULL, NULL, 0,
			 "%s is not the device the filesystem is mounted from: only the "
			 "generic checks are done", ctx->source);
		return 0;
	}
	if (syncfs(ctx->mnt_fd) < 0)
		report_verbose(ctx, "Phase 1: syncfs failed (%s)", strerror(errno));
	st->direct_fd = open(ctx->source, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (st->direct_fd < 0)
		return -errno;
	/*
	 * Read-only (no EXT2_FLAG_RW), no MMP (it writes), every checksum
	 * verified here rather than refused at open, all I/O direct.
	 */
	err = ext2fs_open2(ctx->source, "cache=off", EXT2_FLAG_64BITS | EXT2_FLAG_DIRECT_IO |
			   EXT2_FLAG_IGNORE_CSUM_ERRORS | EXT2_FLAG_SKIP_MMP, 0, 0,
			   unix_io_manager, &st->fs);
	if (err) {
		st->fs = NULL;
		if (superblock_refused(err)) {
			/* The superblock check of phase 2 says what is wrong. */
			st->open_err = err;
			report_verbose(ctx, "Phase 1: libext2fs cannot open %s: %s", ctx->source,
				       ext4_strerror(err));
			return 0;
		}
		report_operational(ctx, NULL, NULL, 0, "cannot open %s with libext2fs: %s",
				   ctx->source, ext4_strerror(err));
		return 0;
	}
	st->nr_seen_groups = st->fs->group_desc_count;
	st->seen = xcalloc(st->nr_seen_groups, sizeof(*st->seen));
	st->journal_known = ext2fs_has_feature_journal(st->fs->super) &&
			    !ext2fs_has_feature_journal_dev(st->fs->super) &&
			    st->fs->super->s_journal_inum != 0;
	report_verbose(ctx, "Phase 1: %s: %u block groups of %u blocks, %u-byte blocks, "
		       "%u inodes, %s journal%s", ctx->source, st->fs->group_desc_count,
		       st->fs->super->s_blocks_per_group, st->fs->blocksize,
		       st->fs->super->s_inodes_count,
		       st->journal_known ? "internal" : ext2fs_has_feature_journal(st->fs->super) ?
		       "external" : "no",
		       ext2fs_has_feature_metadata_csum(st->fs->super) ? ", metadata checksums" : "");
	if (ext2fs_has_feature_shared_blocks(st->fs->super)) {
		/* e2fsck's pass 1 takes a block claimed twice for shared, then. */
		ctx->quirks |= QUIRK_BLOCKS_SHARED;
		report_verbose(ctx, "Phase 1: the shared_blocks feature lets files share blocks "
			       "with each other, the journal and group metadata: "
			       "extent.crosslinked and ext4.crosslink are not looked for");
	}
	if (!st->journal_known && ext2fs_has_feature_journal(st->fs->super)) {
		ext4_journal_open(ctx);
		if (st->jdev_fd < 0)
			str_info(ctx, CHECK_EXT4_UNCHECKED, NULL, NULL, 0,
				 "the journal is on another device, which is not found: recent "
				 "transactions cannot be read, so every suspect is an info");
	}
	return 0;
}

static void ext4_cleanup(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (!st)
		return;
	ext4_dirra_stop(ctx, false);	/* a scan stopped during the walk */
	for (size_t i = 0; i < st->nr_suspects; i++)
		free(st->suspects[i].msg);
	free(st->suspects);
	if (st->seen) {
		for (dgrp_t g = 0; g < st->nr_seen_groups; g++)
			free(atomic_load(&st->seen[g]));
		free(st->seen);
	}
	if (st->claimed)
		ext2fs_free_block_bitmap(st->claimed);
	if (st->metadata)
		ext2fs_free_block_bitmap(st->metadata);
	if (st->badblocks)
		ext2fs_free_block_bitmap(st->badblocks);
	if (st->orphans)
		ext2fs_free_inode_bitmap(st->orphans);
	ext4_quota_release(st);
	ext4_bulk_free(st);
	ext4_xattr_refs_release(st);
	ext4_eainode_release(st);
	free(st->jruns);
	if (st->jdev_fd >= 0)
		close(st->jdev_fd);
	if (st->fs)
		ext2fs_close_free(&st->fs);
	if (st->direct_fd >= 0)
		close(st->direct_fd);
	free(st);
	ctx->backend = NULL;
}

/* ---- phase 2: superblocks ----------------------------------------------- */

/* The primary superblock's block and its offset in it. */
static blk64_t sb_block(ext2_filsys fs, unsigned *off)
{
	*off = SUPERBLOCK_OFFSET % fs->blocksize;
	return SUPERBLOCK_OFFSET / fs->blocksize;
}

/*
 * A group's size out of range?  One bitmap block maps a group, one bit per
 * allocation unit: a block, or with bigalloc a cluster of 2^s_log_cluster_size
 * blocks.  So the limit of 8 bits per byte of a bitmap block is on clusters
 * per group, and blocks per group is clusters per group times the cluster
 * ratio (a bigalloc group of 1 KiB blocks and 16-block clusters has 131072
 * blocks, sixteen times 8 * 1024).  Without bigalloc the cluster fields
 * equal the block fields (mke2fs writes both).
 */
static bool sb_groups_insane(ext2_filsys fs, const struct ext2_super_block *sb)
{
	bool bigalloc = ext2fs_has_feature_bigalloc((struct ext2_super_block *)sb);
	uint32_t cpg = bigalloc ? sb->s_clusters_per_group : sb->s_blocks_per_group;
	unsigned log_ratio;

	/*
	 * libext2fs's own bound on the cluster size: log2 of its bytes at most
	 * EXT2_MAX_CLUSTER_LOG_SIZE (512 MiB); the field counts from 1 KiB.
	 */
	if (bigalloc && (sb->s_log_cluster_size < sb->s_log_block_size ||
			 sb->s_log_cluster_size > EXT2_MAX_CLUSTER_LOG_SIZE - EXT2_MIN_BLOCK_LOG_SIZE))
		return true;
	log_ratio = bigalloc ? sb->s_log_cluster_size - sb->s_log_block_size : 0;
	if (cpg == 0 || cpg > 8 * fs->blocksize ||
	    (uint64_t)sb->s_blocks_per_group != (uint64_t)cpg << log_ratio)
		return true;
	return sb->s_inodes_per_group == 0 || sb->s_inodes_per_group > 8 * fs->blocksize;
}

bool ext4_inode_placed(ext2_filsys fs, ext2_ino_t ino)
{
	dgrp_t g;

	if (!ino || ino > fs->super->s_inodes_count || !fs->super->s_inodes_per_group)
		return false;
	g = (dgrp_t)((ino - 1) / fs->super->s_inodes_per_group);
	return g < fs->group_desc_count &&
	       ext4_blocks_in_fs(fs, ext2fs_inode_table_loc(fs, g), fs->inode_blocks_per_group);
}

const char *ext4_sb_insane(ext2_filsys fs, const struct ext2_super_block *sb)
{
	uint64_t blocks = ext2fs_blocks_count((struct ext2_super_block *)sb);
	uint64_t groups;

	if (sb->s_magic != EXT2_SUPER_MAGIC)
		return "bad magic number";
	if ((unsigned)EXT2_BLOCK_SIZE(sb) != fs->blocksize)
		return "block size differs from the one the filesystem was opened with";
	if (sb_groups_insane(fs, sb))
		return "blocks, clusters or inodes per group out of range";
	if (sb->s_first_data_block != (fs->blocksize == 1024 ? 1U : 0U) &&
	    !(fs->blocksize == 1024 && sb->s_first_data_block == 0))
		return "first data block is wrong for the block size";
	groups = (blocks - sb->s_first_data_block + sb->s_blocks_per_group - 1) /
		 sb->s_blocks_per_group;
	if ((uint64_t)sb->s_inodes_count != groups * sb->s_inodes_per_group)
		return "inode count is not inodes per group times the number of groups";
	if (ext2fs_r_blocks_count((struct ext2_super_block *)sb) > blocks)
		return "more reserved blocks than blocks";
	if (sb->s_free_inodes_count > sb->s_inodes_count)
		return "more free inodes than inodes";
	if (sb->s_rev_level > EXT2_DYNAMIC_REV)
		return "unknown revision level";
	if (sb->s_rev_level == EXT2_DYNAMIC_REV &&
	    (sb->s_inode_size < EXT2_GOOD_OLD_INODE_SIZE || sb->s_inode_size > fs->blocksize ||
	     (sb->s_inode_size & (sb->s_inode_size - 1))))
		return "inode size out of range";
	return NULL;
}

/*
 * A quota inode number that is neither the reserved one of its type (3,
 * 4; ext4 keeps project quota in an ordinary inode) nor an ordinary inode
 * of the filesystem, with the quota feature (e2fsck: "Invalid user quota
 * inode").  The kernel reads these at a read-write mount with the quota
 * feature and refuses the mount; a read-only mount never opens them.
 */
static const char *sb_quota_inum_bad(const struct ext2_super_block *sb, char *why, size_t len)
{
	static const char *const names[] = { "user", "group", "project" };
	const uint32_t inums[] = { sb->s_usr_quota_inum, sb->s_grp_quota_inum,
				   sb->s_prj_quota_inum };

	/* Without the feature neither the kernel nor e2fsck's verdict (exit 0) reads them. */
	if (!ext2fs_has_feature_quota((struct ext2_super_block *)sb))
		return NULL;
	for (unsigned t = 0; t < 3; t++) {
		uint32_t ino = inums[t];
		bool reserved = ino == EXT4_USR_QUOTA_INO || ino == EXT4_GRP_QUOTA_INO;

		if (ino && ((ino < EXT2_FIRST_INO(sb) && !reserved) || ino > sb->s_inodes_count)) {
			snprintf(why, len, "the %s quota inode is %u, which is %s", names[t], ino,
				 ino > sb->s_inodes_count ? "past the last inode" :
				 "a reserved inode of another use");
			return why;
		}
	}
	return NULL;
}

/* What is wrong with the primary superblock (why: room for the message), NULL if nothing. */
static const char *sb_primary_why(ext2_filsys fs, const struct ext2_super_block *sb,
				  char *why, size_t len)
{
	const char *insane;

	if (!ext2fs_superblock_csum_verify(fs, (struct ext2_super_block *)sb))
		return "checksum does not match";
	if ((insane = ext4_sb_insane(fs, sb)))
		return insane;
	return sb_quota_inum_bad(sb, why, len);
}

static bool sb_primary_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			   unsigned char *const *bufs)
{
	char why[96];	/* sb_quota_inum_bad()'s longest message, with a 10-digit number */

	return sb_primary_why(ext4_state(ctx)->fs, (void *)(bufs[0] + s->arg[0]), why,
			      sizeof(why));
}

/* Features the kernel sets and clears on the primary only while mounted. */
#define INCOMPAT_LIVE (EXT3_FEATURE_INCOMPAT_RECOVER)
#define RO_COMPAT_LIVE (EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT)

/* The first field in which a backup disagrees with the primary, or NULL. */
static const char *sb_backup_differs(const struct ext2_super_block *p,
				     const struct ext2_super_block *b)
{
#define SAME(f) if (p->f != b->f) return #f
	SAME(s_magic);
	SAME(s_inodes_count);
	SAME(s_blocks_count);
	SAME(s_blocks_count_hi);
	SAME(s_first_data_block);
	SAME(s_log_block_size);
	SAME(s_log_cluster_size);
	SAME(s_blocks_per_group);
	SAME(s_clusters_per_group);
	SAME(s_inodes_per_group);
	SAME(s_rev_level);
	SAME(s_first_ino);
	SAME(s_inode_size);
	SAME(s_reserved_gdt_blocks);
	SAME(s_desc_size);
	SAME(s_log_groups_per_flex);
	SAME(s_journal_inum);
	SAME(s_checksum_type);
#undef SAME
	if ((p->s_feature_incompat & ~INCOMPAT_LIVE) != (b->s_feature_incompat & ~INCOMPAT_LIVE))
		return "s_feature_incompat";
	if ((p->s_feature_ro_compat & ~RO_COMPAT_LIVE) != (b->s_feature_ro_compat & ~RO_COMPAT_LIVE))
		return "s_feature_ro_compat";
	if (memcmp(p->s_uuid, b->s_uuid, sizeof(p->s_uuid)))
		return "s_uuid";
	return NULL;
}

/* A backup: its checksum, its group number, the fields that must agree. */
static const char *sb_backup_bad(ext2_filsys fs, const struct ext2_super_block *primary,
				 const struct ext2_super_block *b, dgrp_t g)
{
	static char why[96];
	const char *field;

	if (b->s_magic != EXT2_SUPER_MAGIC)
		return "bad magic number";
	if (!ext2fs_superblock_csum_verify(fs, (struct ext2_super_block *)b))
		return "checksum does not match";
	if ((dgrp_t)b->s_block_group_nr != g) {
		snprintf(why, sizeof(why), "says it is in group %u", b->s_block_group_nr);
		return why;
	}
	if ((field = sb_backup_differs(primary, b))) {
		snprintf(why, sizeof(why), "%s differs from the primary's", field);
		return why;
	}
	return NULL;
}

/*
 * A backup that was never written: all zero but for s_overhead_clusters,
 * which the kernel writes into every backup at mount
 * (ext4_update_overhead(), without looking at the magic).  e2fsck neither
 * reads nor reports such a backup (check_backup_super_block() skips one
 * without the magic): redundancy lost, not damage to what is there.
 */
static bool sb_backup_unwritten(const unsigned char *b)
{
	struct ext2_super_block copy;

	memcpy(&copy, b, sizeof(copy));
	copy.s_overhead_clusters = 0;
	return ext4_all_zero(&copy, sizeof(copy));
}

static bool sb_backup_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	const struct ext2_super_block *p = (void *)(bufs[1] + s->arg[1]);

	return sb_backup_bad(fs, p, (void *)bufs[0], (dgrp_t)s->arg[0]) != NULL;
}

void ext4_check_superblocks(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	unsigned char *pbuf = ext4_block_buf(st), *bbuf = ext4_block_buf(st);
	unsigned off;
	blk64_t pblk = sb_block(fs, &off);
	const struct ext2_super_block *primary = (void *)(pbuf + off);
	const char *why;
	char whybuf[96];	/* as sb_primary_bad()'s */
	int ret;

	if ((ret = ext4_read_direct(st, pblk, pbuf)) < 0) {
		report_operational(ctx, NULL, NULL, -ret, "cannot read the superblock");
		goto out;
	}
	why = sb_primary_why(fs, primary, whybuf, sizeof(whybuf));
	if (why) {
		struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_SUPERBLOCK, 0,
							  sb_primary_bad, "superblock: %s", why);
		ext4_suspect_block(s, pblk);
		s->arg[0] = off;
		/* Backups are compared with a primary of sound checksum and geometry only. */
		if (why != whybuf)
			goto out;
	}
	for (dgrp_t g = 1; g < fs->group_desc_count && !scrub_should_stop(ctx); g++) {
		blk64_t b;

		if (!ext2fs_bg_has_super(fs, g))
			continue;
		b = ext2fs_group_first_block2(fs, g);
		if ((ret = ext4_read_direct(st, b, bbuf)) < 0) {
			if (errno_is_corruption(-ret))
				str_error(ctx, CHECK_EXT4_SB_BACKUP, NULL, NULL, 0,
					  "backup superblock in group %u (block %llu) cannot be "
					  "read: %s", g, (unsigned long long)b, strerror(-ret));
			else
				report_operational(ctx, NULL, NULL, -ret, "reading block %llu",
						   (unsigned long long)b);
			continue;
		}
		why = sb_backup_bad(fs, primary, (void *)bbuf, g);
		if (why) {
			bool unwritten = sb_backup_unwritten(bbuf);
			struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_SB_BACKUP, 0,
				sb_backup_still_bad, "backup superblock in group %u (block %llu): %s",
				g, (unsigned long long)b, unwritten ? "never written (all zero: "
				"an image that kept the primary's metadata only, as e2image -r "
				"makes); there is no backup to recover from" : why);

			s->warn = unwritten;
			ext4_suspect_block(s, b);
			ext4_suspect_block(s, pblk);
			s->arg[0] = g;
			s->arg[1] = off;
		}
	}
out:
	free(pbuf);
	free(bbuf);
}

/* ---- phase 2: the MMP block --------------------------------------------- */

/*
 * What is wrong with the multiple-mount protection block's bytes, NULL if
 * nothing.  kmmpd rewrites the block whole every update interval of a
 * read-write mount (magic, sequence, checksum), and a read-write mount
 * refuses a block it cannot verify: what fails twice was not written so.
 */
static const char *mmp_bad(ext2_filsys fs, unsigned char *b)
{
	struct mmp_struct *mmp = (void *)b;

	if (le32toh(mmp->mmp_magic) != EXT4_MMP_MAGIC)
		return "bad magic number";
	if (!ext2fs_mmp_csum_verify(fs, mmp))
		return "checksum does not match";
	return NULL;
}

static bool mmp_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			  unsigned char *const *bufs)
{
	(void)s;	/* its one block is bufs[0] */
	return mmp_bad(ext4_state(ctx)->fs, bufs[0]);
}

/* The MMP block the superblock names (the mmp feature): inside the filesystem, sound. */
static void check_mmp(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	blk64_t blk = fs->super->s_mmp_block;
	unsigned char *buf;
	const char *why;
	int ret;

	if (!ext2fs_has_feature_mmp(fs->super))
		return;
	if (!ext4_blocks_in_fs(fs, blk, 1)) {
		str_error(ctx, CHECK_EXT4_MMP, NULL, NULL, 0, "the superblock's MMP block %llu "
			  "is outside the filesystem", (unsigned long long)blk);
		return;
	}
	buf = ext4_block_buf(st);
	if ((ret = ext4_read_direct(st, blk, buf)) < 0)
		report_operational(ctx, NULL, NULL, -ret, "reading the MMP block %llu",
				   (unsigned long long)blk);
	else if ((why = mmp_bad(fs, buf))) {
		struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_MMP, 0, mmp_still_bad,
			"MMP block %llu: %s", (unsigned long long)blk, why);

		ext4_suspect_block(s, blk);
		s->journal_free = true;		/* never journalled: kmmpd writes it in place */
	}
	free(buf);
}

/* ---- phase 2: group descriptors and bitmaps ------------------------------ */

enum bitmap_kind { BITMAP_BLOCK, BITMAP_INODE };

/* Bits that map group g: its inodes, or its blocks' allocation units (clusters). */
static uint32_t bitmap_bits(ext2_filsys fs, dgrp_t g, enum bitmap_kind k)
{
	if (k == BITMAP_INODE)
		return fs->super->s_inodes_per_group;
	return (uint32_t)(((blk64_t)ext2fs_group_blocks_count(fs, g) +
			   EXT2FS_CLUSTER_RATIO(fs) - 1) >> fs->cluster_ratio_bits);
}

/* What is wrong with group g's descriptor's fields, its checksum aside, or NULL. */
static const char *gd_fields_bad(ext2_filsys fs, dgrp_t g)
{
	blk64_t first = ext2fs_group_first_block2(fs, g), last = ext2fs_group_last_block2(fs, g);
	blk64_t bb = ext2fs_block_bitmap_loc(fs, g), ib = ext2fs_inode_bitmap_loc(fs, g);
	blk64_t it = ext2fs_inode_table_loc(fs, g);
	bool flex = ext2fs_has_feature_flex_bg(fs->super);

	if (!ext4_blocks_in_fs(fs, bb, 1) || !ext4_blocks_in_fs(fs, ib, 1) ||
	    !ext4_blocks_in_fs(fs, it, fs->inode_blocks_per_group))
		return "a bitmap or the inode table is outside the filesystem";
	if (!flex && (bb < first || bb > last || ib < first || ib > last || it < first ||
		      it + fs->inode_blocks_per_group - 1 > last))
		return "a bitmap or the inode table is outside its group";
	/* With bigalloc the descriptor counts free clusters, not blocks. */
	if (ext2fs_bg_free_blocks_count(fs, g) > bitmap_bits(fs, g, BITMAP_BLOCK))
		return EXT2FS_CLUSTER_RATIO(fs) > 1 ? "more free clusters than the group has" :
		       "more free blocks than the group has";
	if (ext2fs_bg_free_inodes_count(fs, g) > fs->super->s_inodes_per_group)
		return "more free inodes than the group has";
	if (ext2fs_bg_itable_unused(fs, g) > fs->super->s_inodes_per_group)
		return "more unused inode-table entries than the group has";
	return NULL;
}

/* What is wrong with group g's descriptor (as now in fs->group_desc), or NULL. */
static const char *gd_bad(ext2_filsys fs, dgrp_t g)
{
	if (!ext2fs_group_desc_csum_verify(fs, g))
		return "checksum does not match";
	return gd_fields_bad(fs, g);
}

/*
 * Is the checksum all that is wrong with group g's descriptor?  That is
 * what e2fsck rewrites without calling the filesystem damaged (a latched,
 * preen-safe problem; its -n run exits 0), as after tune2fs enables
 * uninit_bg.  Not with BLOCK_UNINIT or INODE_UNINIT: the checksum is what
 * vouches for them, and without it the bitmaps are read from blocks never
 * written (e2fsck: "Padding at end of inode bitmap is not set").
 */
static bool gd_csum_alone(ext2_filsys fs, dgrp_t g)
{
	return !gd_fields_bad(fs, g) && !ext2fs_bg_flags_test(fs, g, EXT2_BG_BLOCK_UNINIT) &&
	       !ext2fs_bg_flags_test(fs, g, EXT2_BG_INODE_UNINIT);
}

static bool gd_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			 unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct gd_swap sw;
	bool bad;

	gd_swap_in(fs, (dgrp_t)s->arg[0], bufs[0], &sw);
	bad = gd_bad(fs, (dgrp_t)s->arg[0]) != NULL;
	gd_swap_out(&sw);
	return bad;
}

/* Zero bits among the first nbits of a bitmap block. */
static uint32_t count_free(const unsigned char *bm, uint32_t nbits)
{
	uint32_t used = 0;

	for (uint32_t i = 0; i < nbits / 8; i++)
		used += (uint32_t)__builtin_popcount(bm[i]);
	for (uint32_t i = nbits & ~7U; i < nbits; i++)
		used += (bm[i / 8] >> (i % 8)) & 1;
	return nbits - used;
}

/* The last bit set among the first nbits of a bitmap block, or -1. */
static int64_t last_set(const unsigned char *bm, uint32_t nbits)
{
	for (int64_t i = (int64_t)nbits - 1; i >= 0; i--)
		if ((bm[i / 8] >> (i % 8)) & 1)
			return i;
	return -1;
}

/*
 * An inode in use past the inode-table entries bg_itable_unused leaves in
 * use: the kernel lowers the field as it allocates there (ext4_new_inode()),
 * and e2fsck skips that tail ("found in group's unused inodes area").
 */
static const char *itable_unused_bad(ext2_filsys fs, dgrp_t g, const unsigned char *bm)
{
	static char why[160];
	uint32_t used = ext4_itable_in_use(fs, g);
	int64_t last = last_set(bm, fs->super->s_inodes_per_group);

	if (!ext2fs_has_group_desc_csum(fs) || last < (int64_t)used)
		return NULL;
	snprintf(why, sizeof(why), "inode %llu is in use, but the group descriptor's "
		 "itable_unused (%u) says the inodes from %llu on were never used",
		 (unsigned long long)g * fs->super->s_inodes_per_group + (uint64_t)last + 1,
		 ext2fs_bg_itable_unused(fs, g),
		 (unsigned long long)g * fs->super->s_inodes_per_group + used + 1);
	return why;
}

/* arg: group, kind, what (0: checksum, 1: free count, 2: itable_unused, inodes only) */
static const char *bitmap_bad(ext2_filsys fs, dgrp_t g, enum bitmap_kind k,
			      const unsigned char *bm, int what)
{
	static char why[128];

	if (what == 2)
		return k == BITMAP_INODE ? itable_unused_bad(fs, g, bm) : NULL;
	if (what == 0) {
		bool ok = k == BITMAP_BLOCK ?
			ext2fs_block_bitmap_csum_verify(fs, g, (char *)bm,
							EXT2_CLUSTERS_PER_GROUP(fs->super) / 8) :
			ext2fs_inode_bitmap_csum_verify(fs, g, (char *)bm,
							EXT2_INODES_PER_GROUP(fs->super) / 8);
		return ok ? NULL : "checksum does not match";
	}
	uint32_t free_bits = count_free(bm, bitmap_bits(fs, g, k));
	uint32_t gd = k == BITMAP_BLOCK ? ext2fs_bg_free_blocks_count(fs, g) :
					  ext2fs_bg_free_inodes_count(fs, g);

	if (free_bits == gd)
		return NULL;
	snprintf(why, sizeof(why), "the group descriptor says %u free %s, the bitmap has %u",
		 gd, k == BITMAP_BLOCK ? (EXT2FS_CLUSTER_RATIO(fs) > 1 ? "clusters" : "blocks") :
		 "inodes", free_bits);
	return why;
}

static bool bitmap_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	dgrp_t g = (dgrp_t)s->arg[0];
	struct gd_swap sw;
	bool bad;

	gd_swap_in(fs, g, bufs[1], &sw);
	/* The bitmap must still be where the fresh descriptor says. */
	blk64_t where = s->arg[1] == BITMAP_BLOCK ? ext2fs_block_bitmap_loc(fs, g) :
						    ext2fs_inode_bitmap_loc(fs, g);
	bool uninit = ext2fs_bg_flags_test(fs, g, s->arg[1] == BITMAP_BLOCK ?
					   EXT2_BG_BLOCK_UNINIT : EXT2_BG_INODE_UNINIT);

	bad = where == s->blocks[0] && !uninit &&
	      bitmap_bad(fs, g, (enum bitmap_kind)s->arg[1], bufs[0], (int)s->arg[2]) != NULL;
	gd_swap_out(&sw);
	return bad;
}

static void check_one_bitmap(struct scrub_ctx *ctx, dgrp_t g, enum bitmap_kind k,
			     unsigned char *buf)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	const char *name = k == BITMAP_BLOCK ? "block" : "inode";
	blk64_t blk = k == BITMAP_BLOCK ? ext2fs_block_bitmap_loc(fs, g) :
					  ext2fs_inode_bitmap_loc(fs, g);
	int ret;

	if (ext2fs_bg_flags_test(fs, g, k == BITMAP_BLOCK ? EXT2_BG_BLOCK_UNINIT :
				 EXT2_BG_INODE_UNINIT))
		return;		/* never written: nothing on the disk to check */
	if ((ret = ext4_read_direct(st, blk, buf)) < 0) {
		if (errno_is_corruption(-ret))
			str_error(ctx, k == BITMAP_BLOCK ? CHECK_EXT4_BLOCK_BITMAP :
				  CHECK_EXT4_INODE_BITMAP, NULL, NULL, 0,
				  "%s bitmap of group %u (block %llu) cannot be read: %s", name,
				  g, (unsigned long long)blk, strerror(-ret));
		else
			report_operational(ctx, NULL, NULL, -ret, "reading block %llu",
					   (unsigned long long)blk);
		return;
	}
	for (int what = 0; what < 3; what++) {
		const char *why = bitmap_bad(fs, g, k, buf, what);

		if (!why)
			continue;
		const char *check = what == 2 ? CHECK_EXT4_GROUP_DESC :
				    what == 1 ? CHECK_EXT4_GROUP_COUNTS :
				    k == BITMAP_BLOCK ? CHECK_EXT4_BLOCK_BITMAP :
				    CHECK_EXT4_INODE_BITMAP;
		struct ext4_suspect *s = ext4_suspect_add(ctx, check, 0, bitmap_still_bad,
			"group %u: %s bitmap (block %llu): %s", g, name,
			(unsigned long long)blk, why);

		ext4_suspect_block(s, blk);
		ext4_suspect_block(s, ext4_gd_block(fs, g));
		s->arg[0] = g;
		s->arg[1] = k;
		s->arg[2] = (uint64_t)what;
		if (what == 0)
			break;	/* a bitmap that fails its checksum is not counted */
	}
}

void ext4_check_groups(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	unsigned char *buf = ext4_block_buf(st);
	unsigned long long bad_gd = 0;

	for (dgrp_t g = 0; g < fs->group_desc_count && !scrub_should_stop(ctx); g++) {
		const char *why = gd_bad(fs, g);
		bool csum_only = why && gd_csum_alone(fs, g);

		if (why) {
			struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_GROUP_DESC, 0,
				gd_still_bad, "group descriptor %u (in block %llu): %s%s", g,
				(unsigned long long)ext4_gd_block(fs, g), why, csum_only ?
				" (its fields are sound: e2fsck rewrites it; until then the "
				"kernel mounts the filesystem only read-only)" : "");

			ext4_suspect_block(s, ext4_gd_block(fs, g));
			s->arg[0] = g;
			s->warn = csum_only;
			bad_gd++;
			if (!csum_only)
				continue;	/* its bitmaps may be anywhere */
		}
		check_one_bitmap(ctx, g, BITMAP_BLOCK, buf);
		check_one_bitmap(ctx, g, BITMAP_INODE, buf);
	}
	free(buf);
}

/* Sums of the group counts against statfs: an info (the live fs differs). */
static void compare_statfs(struct scrub_ctx *ctx)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	unsigned long long fb = 0, fi = 0;
	struct statvfs sv;

	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		fb += ext2fs_bg_free_blocks_count(fs, g);
		fi += ext2fs_bg_free_inodes_count(fs, g);
	}
	fb <<= fs->cluster_ratio_bits;
	if (fstatvfs(ctx->mnt_fd, &sv) < 0)
		return;
	/* statfs f_frsize is the block size on ext4 (clusters are shown as blocks). */
	str_info(ctx, CHECK_EXT4_STATFS, NULL, NULL, 0,
		 "group descriptors on the disk: %llu free blocks, %llu free inodes; statfs: "
		 "%llu free blocks, %llu free inodes", fb, fi,
		 (unsigned long long)sv.f_bfree, (unsigned long long)sv.f_ffree);
}

static int ext4_scan_metadata(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	generic_check_statfs(ctx);
	if (!st || st->direct_fd < 0)
		return 0;
	if (!st->fs) {
		/* libext2fs refused the superblock: say why, from the disk. */
		unsigned char *buf;
		int r;

		if (posix_memalign((void **)&buf, 4096, 4096))
			abort();
		r = (int)pread(st->direct_fd, buf, 4096, 0);
		const struct ext2_super_block *sb = (void *)(buf + SUPERBLOCK_OFFSET);

		if (r == 4096 && sb->s_magic != EXT2_SUPER_MAGIC)
			str_error(ctx, CHECK_EXT4_SUPERBLOCK, NULL, NULL, 0,
				  "superblock: bad magic number 0x%04x", sb->s_magic);
		else
			str_error(ctx, CHECK_EXT4_SUPERBLOCK, NULL, NULL, 0,
				  "superblock: libext2fs cannot use it: %s",
				  ext4_strerror(st->open_err));
		free(buf);
		return 0;
	}
	ext4_check_superblocks(ctx);
	check_mmp(ctx);
	ext4_check_groups(ctx);
	ext4_confirm_run(ctx, false);
	compare_statfs(ctx);
	report_verbose(ctx, "Phase 2: ext4: superblock, %u group descriptors and their "
		       "bitmaps checked", st->fs->group_desc_count);
	ext4_bulk_init(ctx);
	ext4_dirra_start(ctx);
	return 0;
}

static int ext4_summary(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	generic_ops.summary(ctx);
	if (st && st->fs)
		report_verbose(ctx, "Phase 6: ext4: %llu inodes, %llu extent tree and block map "
			       "blocks, %llu directory blocks read from the disk; %llu suspects "
			       "confirmed, %llu cleared", st->inodes_scanned, st->extent_blocks,
			       st->dir_blocks, st->confirmed, st->cleared);
	return 0;
}

static int ext4_scan_inodes_hook(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (!st || !st->fs)
		return 0;
	ext4_dirra_stop(ctx, true);
	ext4_bulk_report(ctx);
	return ext4_scan_inodes(ctx);
}

/*
 * GETFSMAP's special owners of ext4 (fs/ext4/fsmap.h): its own codes
 * (type 'f') and, for the superblocks, the journal and the inode tables,
 * XFS's (type 'X').
 */
static const char *ext4_fsmap_owner_name(uint64_t owner)
{
	static const char *const ext4[] = {
		NULL, "group descriptors", "reserved group descriptors", "a block bitmap",
		"an inode bitmap",
	};
	uint32_t type = FMR_OWNER_TYPE(owner), code = FMR_OWNER_CODE(owner);

	if (type == 'f' && code < sizeof(ext4) / sizeof(*ext4))
		return ext4[code];
	if (type != 'X')
		return NULL;
	return code == 1 ? "static filesystem metadata (superblocks)" :
	       code == 2 ? "the journal" : code == 5 ? "an inode table" : NULL;
}

/* GETFSMAP calls the internal journal's blocks "unknown": they are no file's data. */
static void ext4_space_not_data(struct scrub_ctx *ctx,
				void (*fn)(void *arg, uint64_t off, uint64_t len), void *arg)
{
	struct ext4_state *st = ext4_state(ctx);
	uint64_t bs = st->fs->blocksize;

	ext4_journal_map(ctx, false);
	for (size_t i = 0; i < st->nr_jruns; i++)
		fn(arg, st->jruns[i].start * bs, st->jruns[i].len * bs);
}

const struct scrub_ops ext4_ops = {
	.name = "ext4",
	.needs = "read access to the block device",
	.match = ext4_match,
	.scan_fs = ext4_scan_fs,
	.scan_metadata = ext4_scan_metadata,
	.scan_inodes = ext4_scan_inodes_hook,
	.check_dir = ext4_check_dir,
	.bulk_inodes = ext4_bulk_inodes,
	.bulk_extents = ext4_bulk_extents,
	.check_inode = ext4_check_inode,
	.fsmap_owner_name = ext4_fsmap_owner_name,
	.space_not_data = ext4_space_not_data,
	.summary = ext4_summary,
	.cleanup = ext4_cleanup,
	.health = ext4_health,
	.watch_open = ext4_watch_open,
};

uint32_t ext4_csum(ext2_filsys fs, ext2_ino_t ino, uint32_t gen, const void *b, size_t len)
{
	uint32_t le_ino = ext2fs_cpu_to_le32(ino), le_gen = ext2fs_cpu_to_le32(gen), crc;

	crc = crc32c(fs->csum_seed, &le_ino, sizeof(le_ino));
	crc = crc32c(crc, &le_gen, sizeof(le_gen));
	return crc32c(crc, b, len);
}

/* Offsets in the on-disk inode (struct ext2_inode_large). */
#define I_CSUM_LO offsetof(struct ext2_inode_large, osd2.linux2.l_i_checksum_lo)
#define I_CSUM_HI offsetof(struct ext2_inode_large, i_checksum_hi)

/*
 * The checksum covers the whole inode with its two checksum halves as
 * zero; the high half exists only if the extra part of the inode reaches
 * it.  An inode of all zeroes (never used) passes, as with libext2fs.
 */
bool ext4_inode_csum_ok(ext2_filsys fs, ext2_ino_t ino, const void *raw)
{
	const struct ext2_inode_large *in = raw;
	const unsigned char *b = raw;
	size_t isize = EXT2_INODE_SIZE(fs->super);
	bool has_hi = isize > EXT2_GOOD_OLD_INODE_SIZE &&
		      (size_t)EXT2_GOOD_OLD_INODE_SIZE + in->i_extra_isize >= I_CSUM_HI + 2;
	uint16_t zero = 0;
	uint32_t crc, stored = in->osd2.linux2.l_i_checksum_lo;

	if (!ext2fs_has_feature_metadata_csum(fs->super))
		return true;
	crc = ext4_csum(fs, ino, in->i_generation, b, I_CSUM_LO);
	crc = crc32c(crc, &zero, sizeof(zero));
	crc = crc32c(crc, b + I_CSUM_LO + 2, EXT2_GOOD_OLD_INODE_SIZE - I_CSUM_LO - 2);
	if (isize > EXT2_GOOD_OLD_INODE_SIZE) {
		size_t off = has_hi ? I_CSUM_HI + 2 : I_CSUM_HI;

		crc = crc32c(crc, b + EXT2_GOOD_OLD_INODE_SIZE, I_CSUM_HI - EXT2_GOOD_OLD_INODE_SIZE);
		if (has_hi)
			crc = crc32c(crc, &zero, sizeof(zero));
		crc = crc32c(crc, b + off, isize - off);
	}
	if (has_hi)
		stored |= (uint32_t)in->i_checksum_hi << 16;
	else
		crc &= 0xffff;
	if (crc == stored)
		return true;
	for (size_t i = 0; i < sizeof(struct ext2_inode); i++)
		if (b[i])
			return false;
	return true;
}
