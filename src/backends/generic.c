/*
 * generic: the backend for every filesystem, through the VFS only.
 *
 * All of the generic checks are the core's (the walk visitors in
 * inode_check.c, extents.c, xattrs.c, names.c, dataverify.c), because every
 * other backend runs them too.  What is left for this backend is what only
 * statfs can tell: phase 2 checks the free/total counters for consistency,
 * phase 6 compares what the walk counted with what statfs claims (an info:
 * a live filesystem, reserved blocks and metadata make them differ).
 *
 * Phase 1 also says what a filesystem does not promise (enum fs_quirks):
 * overlayfs without index=on breaks hard links on copy-up, and may give a
 * directory a new inode number after its inode was evicted; FUSE inode
 * numbers (which may change the same way), link counts and statfs counters
 * are a daemon's word.
 */
#include "backends/backend.h"

#include <libmount.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/mountpoint.h"
#include "report/report.h"

const char *statvfs_insane(const struct statvfs *sv)
{
	if (sv->f_bfree > sv->f_blocks)
		return "more free blocks than blocks";
	if (sv->f_bavail > sv->f_bfree)
		return "more blocks available than free";
	if (sv->f_files && sv->f_ffree > sv->f_files)
		return "more free inodes than inodes";
	return NULL;
}

static bool is_fuse(const char *fstype)
{
	return !strcmp(fstype, "fuse") || !strcmp(fstype, "fuseblk") ||
	       !strncmp(fstype, "fuse.", 5);
}

static bool is_remote(const char *fstype)
{
	return !strcmp(fstype, "cifs") || !strcmp(fstype, "smb3") || !strcmp(fstype, "9p");
}

/* ctx's mount in the table: by its id, or the last one at its mount point. */
static struct libmnt_fs *find_own_mount(const struct scrub_ctx *ctx, struct libmnt_table *tb)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
	struct libmnt_fs *fs, *found = NULL;

	while (it && !found && mnt_table_next_fs(tb, it, &fs) == 0)
		if (ctx->table_mnt_id ? mnt_fs_get_id(fs) == ctx->table_mnt_id :
		    mnt_fs_streq_target(fs, ctx->mntpoint))
			found = fs;
	mnt_free_iter(it);
	return found;
}

/* overlay's module default for index=, from sysfs: Y or N. */
static bool overlay_index_default(void)
{
	FILE *f = fopen("/sys/module/overlay/parameters/index", "re");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	return c == 'Y';
}

/*
 * Does the overlay keep an index of its copied-up hard links (index=on)?
 * Its options name index= only where it is not the module's default, and
 * the kernel writes index=off there when it had to turn the index off.
 * Unknown: no (the kernel's default, CONFIG_OVERLAY_FS_INDEX, is off).
 */
static bool overlay_index_on(const struct scrub_ctx *ctx)
{
	int err = 0;
	struct libmnt_table *tb = mount_table_load(ctx->opt.mtab, &err);
	struct libmnt_fs *fs = tb ? find_own_mount(ctx, tb) : NULL;
	char *val = NULL;
	size_t len = 0;
	bool on = overlay_index_default();
	int ret = fs ? mnt_optstr_get_option(mnt_fs_get_options(fs), "index", &val, &len) : 1;

	if (ret == 0 && val)
		on = len == 2 && !strncmp(val, "on", 2);
	if (tb)
		mount_table_free(tb);
	return on;
}

/* Phase 1: the conventions of filesystems that do not promise everything. */
static int generic_scan_fs(struct scrub_ctx *ctx)
{
	const char *t = ctx->fstype;

	if (!strcmp(t, "overlay") && !overlay_index_on(ctx)) {
		ctx->quirks |= QUIRK_NLINK_NAMES_ANY;
		report_verbose(ctx, "Phase 1: overlay without index=on breaks hard links on "
			       "copy-up: a file's link count that differs from its names is an "
			       "info (nlink.count)");
	}
	if (is_fuse(t)) {
		ctx->quirks |= QUIRK_INO_MAYBE_PER_NAME | QUIRK_STATFS_ANY | QUIRK_INO_UNSTABLE |
			       QUIRK_XATTR_ANY;
		report_verbose(ctx, "Phase 1: %s inode numbers and statfs counters come from "
			       "a daemon: link counts are checked only if inode numbers are "
			       "seen to be shared by hard links; statfs.counters is an info; a "
			       "directory or file met again under another number is the same if "
			       "its type and times are; an attribute listed but not found is a "
			       "warning", t);
	}

	if (!strcmp(t, "overlay")) {
		ctx->quirks |= QUIRK_DIR_INO_UNSTABLE;
		report_verbose(ctx, "Phase 1: overlay may renumber a directory whose inode was "
			       "evicted: a directory found again under another number is the same "
			       "if its file handle is");
	}
	if (!strcmp(t, "overlay") || is_fuse(t) || is_remote(t)) {
		ctx->quirks |= QUIRK_DINO_UNRELATED;
		report_verbose(ctx, "Phase 1: %s does not keep directory entry inode numbers "
			       "equal to st_ino: dirent.ino, dir.dot and dir.dotdot are not "
			       "checked", t);
	}
	if (is_fuse(t) || is_remote(t)) {
		ctx->quirks |= QUIRK_DIR_NLINK_ANY | QUIRK_ERRORS_RELAYED;
		report_verbose(ctx, "Phase 1: %s directory link counts and errors come from a "
			       "daemon or a server: dir.nlink is not checked, and only EIO, "
			       "EUCLEAN and EBADMSG say an inode is damaged", t);
	}
	return 0;
}

void generic_check_statfs(struct scrub_ctx *ctx)
{
	const char *why = statvfs_insane(&ctx->svfs);

	if (why) {
		/* Look again: statfs of a live fs is a snapshot of moving counters. */
		struct statvfs again;

		if (fstatvfs(ctx->mnt_fd, &again) < 0 || !(why = statvfs_insane(&again)))
			return;
		if (ctx->quirks & QUIRK_STATFS_ANY)
			str_info(ctx, CHECK_STATFS_COUNTERS, NULL, NULL, 0,
				 "the %s daemon's statfs counters are inconsistent: %s (blocks "
				 "%llu, free %llu, available %llu, inodes %llu, free inodes %llu); "
				 "they are what the daemon says, not what is on the disk",
				 ctx->fstype, why, (unsigned long long)again.f_blocks,
				 (unsigned long long)again.f_bfree,
				 (unsigned long long)again.f_bavail,
				 (unsigned long long)again.f_files,
				 (unsigned long long)again.f_ffree);
		else
			str_error(ctx, CHECK_STATFS_COUNTERS, NULL, NULL, 0,
				  "statfs counters are inconsistent: %s (blocks %llu, free %llu, "
				  "available %llu, inodes %llu, free inodes %llu)", why,
				  (unsigned long long)again.f_blocks,
				  (unsigned long long)again.f_bfree,
				  (unsigned long long)again.f_bavail,
				  (unsigned long long)again.f_files,
				  (unsigned long long)again.f_ffree);
	}
}

static int generic_scan_metadata(struct scrub_ctx *ctx)
{
	generic_check_statfs(ctx);
	report_verbose(ctx, "Phase 2: the generic backend has no metadata of its own to "
		       "check beyond statfs.");
	return 0;
}

static int generic_summary(struct scrub_ctx *ctx)
{
	struct statvfs sv;
	const struct scrub_stats *s = &ctx->stats;
	unsigned long long found = s->inodes;

	if (fstatvfs(ctx->mnt_fd, &sv) < 0)
		return 0;
	/* f_ffree > f_files is statfs.counters' business, not a count in use. */
	if (sv.f_files && sv.f_ffree <= sv.f_files)
		str_info(ctx, CHECK_SUMMARY_COUNTS, NULL, NULL, 0,
			 "%llu inodes found by name; statfs reports %llu in use",
			 found, (unsigned long long)(sv.f_files - sv.f_ffree));
	str_info(ctx, CHECK_SUMMARY_COUNTS, NULL, NULL, 0,
		 "%llu KiB allocated to the inodes found; statfs reports %llu KiB in use",
		 s->blocks / 2,
		 (unsigned long long)((sv.f_blocks - sv.f_bfree) * sv.f_frsize / 1024));
	return 0;
}

const struct scrub_ops generic_ops = {
	.name = "generic",
	.match = NULL,		/* matches every filesystem */
	.scan_fs = generic_scan_fs,
	.scan_metadata = generic_scan_metadata,
	.summary = generic_summary,
};
