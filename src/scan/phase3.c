/*
 * Phase 3: scan all inodes and the directory tree.
 *
 * The parallel walk (walk.h) reads every directory from the mount root
 * and hands every entry to phase 3's visitor (inode_check.h): names, the
 * inode against its entry, link bookkeeping, extent maps, extended
 * attributes, and the backend's own per-directory and per-inode checks.
 * After the walk the backend's scan_inodes hook compares the inode table
 * it reads in bulk with what the walk reached; what of that does not
 * need the walk's products may begin before it (scan_inodes_start: btrfs
 * reads its tree check's first pass alongside the walk).
 *
 * Bulk inode records (issue 22, first slice).  Per file the walk used to
 * cost a statx by name, an open, a statx of the open file, a FIEMAP, an
 * xattr listing and a close (on ext4 the backend adds a FIEMAP and a
 * statx of its own): 6 system calls per file on XFS, 8 on ext4, measured
 * with strace -c on 200 000 small files.  A backend that reads inodes in
 * bulk now offers the bulk_inodes hook (backend.h): before a getdents
 * buffer's entries are visited, the walk hands it their inode numbers and
 * gets records (mode, links, size, times, blocks, extent count, xattr
 * presence), joined with the entries by inode number.  An entry whose
 * record agrees with it (same type, one link, not a directory) is not
 * stat'ed; a file whose record owns no blocks is not opened; an inode
 * without an attribute fork is not listed.  Everything else takes the old
 * path, and every finding is still confirmed through the VFS (a stale
 * record makes a suspect, never a report).  The records of one buffer are
 * all that is held: nothing per inode.  XFS implements it with BULKSTAT,
 * one request per 64-inode window of the buffer's sorted numbers;
 * FSCRUB_DEBUG_NO_BULK=1 takes the old path (bench/bulk.sh compares).
 * The data fork's map phase 3 read whole is handed to the backend too
 * (backend_entry.map): ext4 digests it instead of a FIEMAP and a statx
 * of its own.  A backend with a bulk_extents hook gives a recorded file's
 * whole map too, so that it is not opened at all (extents_check_bulk()):
 * XFS from GETFSMAP's owner records where they agree with the data fork
 * read from the disk in phase 2 (xfs_ownermap.c), which also tells the
 * attribute forks listxattr would find empty.  ext4 gives records and
 * in-inode maps from its inode tables (ext4_bulk.c), btrfs from the
 * INODE_ITEMs, XATTR_ITEMs and EXTENT_DATA items of the directory's
 * subvolume tree (btrfs_bulk.c: bulk_inodes is handed the directory, whose
 * subvolume says which tree the numbers are of).  With -x the bulk
 * records stay in use (they did not before issue 22's overlap: the ledger
 * wants the VFS size), except with --record or --ledger, which note every
 * file; a file whose record shows attributes, which may hold a checksum
 * record, is opened and noted with its VFS statx.
 *
 * Reads: what phase 1 found.  Leaves for later phases (context.h,
 * "Products", released by phases_release()):
 *   - ctx->links: every multiply-linked inode and the names found for it,
 *     and ctx->dotdot_suspects: ".." entries that did not point back
 *     (phase 4 looks at both again);
 *   - ctx->xlinks: every data extent with a place on the device, and the
 *     files whose extents are not all known (phase 4's cross-link check,
 *     phase 5's reads in physical order);
 *   - ctx->reached: every inode a name reached (the backends' orphan
 *     checks, in this phase's scan_inodes hook);
 *   - ctx->ledger: the files the checksum ledger will hash (phase 5);
 *   - ctx->devread: with -x, the device reads started before the walk,
 *     still running alongside it and phase 4 (devverify.h; phase 5 joins
 *     them);
 *   - ctx->stats and ctx->changed_since_ns: the totals, and the time
 *     after which an inode counts as changed during the scan.
 */
#include "scan/phase.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "scan/context.h"
#include "tree/crosslink.h"
#include "data/devverify.h"
#include "tree/inode_check.h"
#include "data/ledger.h"
#include "tree/linktable.h"
#include "tree/name_check.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

int phase3_inodes(struct scrub_ctx *ctx, unsigned long long *items)
{
	struct scrub_stats stats = { 0 };
	struct timespec now;
	int ret;

	/*
	 * Timestamps are coarse: the kernel's coarse clock lags by up to a
	 * tick, and some filesystems (ext4 with 128-byte inodes) keep whole
	 * seconds, so a change at or after the start may carry a ctime up to
	 * 1 s before it.  An inode whose ctime is within 1 s before the scan
	 * began is treated as changed during it.
	 */
	clock_gettime(CLOCK_REALTIME, &now);
	ctx->changed_since_ns = ((uint64_t)now.tv_sec - 1) * 1000000000ULL + (uint64_t)now.tv_nsec;
	ctx->links = linktable_new();
	/* Data extents, keyed by inode alone: those of the mount's own st_dev. */
	ctx->xlinks = xcalloc(1, sizeof(*ctx->xlinks));
	ctx->xlinks->dev = stx_devno(&ctx->root_stx);
	/* The walk notes the files the checksum ledger will hash in phase 5. */
	if (!ctx->ops->scan_data && ledger_new(ctx, &ctx->ledger) < 0)
		return EXIT_USAGE;
	/* -x: the device reads begin now, alongside this phase and the next (devverify.h). */
	if (ctx->opt.verify_data)
		devverify_start(ctx);
	name_check_setup(ctx);
	/* btrfs: the tree check's first pass reads alongside the walk */
	if (ctx->ops->scan_inodes_start)
		ctx->ops->scan_inodes_start(ctx);
	ret = walk_tree(ctx, &inode_check_visitor, NULL, &stats, items);
	devverify_walk_done(ctx);
	/* Test knob: the reads end inside phase 3, whatever the machine's speed. */
	if (getenv("FSCRUB_DEBUG_OVERLAP_WAIT"))
		devverify_wait(ctx);

	ctx->stats = stats;
	name_check_label(ctx, ctx->mnt_fd);
	if (ret < 0) {
		report_operational(ctx, NULL, NULL, -ret, "cannot start the tree walk");
		return EXIT_OPERATIONAL;
	}
	*items = stats.entries;
	report_verbose(ctx, "Phase 3: %llu directories, %llu files, %llu symlinks, %llu "
		       "special files, %llu extents, %llu attributes (%llu values read), "
		       "%llu names checked for look-alikes", stats.dirs, stats.files,
		       stats.symlinks, stats.specials, stats.extents, stats.xattrs,
		       stats.xattr_values, ctx->stats.names);
	report_verbose(ctx, "Phase 3: %llu directories opened as they were found, ahead of "
		       "their reading; %u descriptors open at most", ctx->dcache.opened_ahead,
		       ctx->dcache.peak_open);
	if (ctx->ops->bulk_inodes)
		report_verbose(ctx, "Phase 3: %llu of %llu entries' inodes from bulk records, "
			       "the others stat'ed", stats.bulk, stats.entries);
	if (ctx->ops->bulk_extents)
		report_verbose(ctx, "Phase 3: %llu files' extent maps from bulk records, "
			       "not opened", stats.bulk_maps);
	if (stats.symlinks_unread)
		str_info(ctx, CHECK_SYMLINK_UNREAD, NULL, NULL, 0,
			 "%llu of %llu symlinks were not read (symlink.size not checked): "
			 "reading them would change their access times, as the walk is not "
			 "through a noatime clone of the mount", stats.symlinks_unread,
			 stats.symlinks);
	phase_run_hook(ctx, ctx->ops->scan_inodes, "inode scan");
	return 0;
}
