/*
 * xfs: the XFS backend (see xfs.h for how its files divide the work).
 *
 * Phase 1 recognises XFS by its statfs magic, reads the geometry
 * (XFS_IOC_FSGEOMETRY) and every AG's (XFS_IOC_AG_GEOMETRY), prints them
 * with -v, and reports the health masks the kernel keeps: metadata it has
 * found sick at run time.  Where the kernel has online scrub, phase 2 scrubs
 * those objects anyway and its verdict is the finding; without it a sick
 * mask is an error.
 *
 * Phase 2 is the kernel's online scrub of every object (xfs_kscrub.c, with
 * a BULKSTAT of every inode) and the reads from the device (xfs_ondisk.c).
 * Phase 3 runs the generic walk with two hooks here: every inode the walk
 * reaches is compared with a BULKSTAT of it (link count, mode, size;
 * xfs_walkstat.c) or taken from one, whose health flags are taken too
 * without the kernel scrub (xfs_inodes.c), regular files are remembered
 * for the reverse-mapping check, and the names of the inodes phase 2 had
 * something to say about are recorded.  After the walk xfs_inodes.c looks
 * for orphans and cross-checks GETFSMAP.
 */
#include "backends/backend.h"
#include "backends/xfs/xfs.h"
#include "backends/xfs/xfs_health.h"

#include <errno.h>
#include <linux/fsmap.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/fsmap.h"
#include "lib/inoset.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "lib/stx.h"
#include "lib/workqueue.h"

#ifndef XFS_SUPER_MAGIC
#define XFS_SUPER_MAGIC 0x58465342	/* "XFSB" */
#endif

static bool xfs_match(const struct scrub_ctx *ctx)
{
	return (uint32_t)ctx->sfs.f_type == XFS_SUPER_MAGIC;
}

struct mask_name {
	uint32_t bit;
	const char *name;
};

/*
 * Health bits of Linux 6.10 to 6.13 that Debian 12's xfslibs-dev does not
 * define; the kernel sets them whatever the headers fscrub was built with.
 */
#ifndef XFS_FSOP_GEOM_SICK_QUOTACHECK
#define XFS_FSOP_GEOM_SICK_QUOTACHECK (1 << 6)
#endif
#ifndef XFS_FSOP_GEOM_SICK_NLINKS
#define XFS_FSOP_GEOM_SICK_NLINKS (1 << 7)
#endif
#ifndef XFS_FSOP_GEOM_SICK_METADIR
#define XFS_FSOP_GEOM_SICK_METADIR (1 << 8)
#endif
#ifndef XFS_FSOP_GEOM_SICK_METAPATH
#define XFS_FSOP_GEOM_SICK_METAPATH (1 << 9)
#endif
#ifndef XFS_AG_GEOM_SICK_INODES
#define XFS_AG_GEOM_SICK_INODES (1 << 10)
#endif
#ifndef XFS_BS_SICK_DIRTREE
#define XFS_BS_SICK_DIRTREE (1 << 8)
#endif

static const struct mask_name fs_sick_names[] = {
	{ XFS_FSOP_GEOM_SICK_COUNTERS, "summary counters" },
	{ XFS_FSOP_GEOM_SICK_UQUOTA, "user quota" },
	{ XFS_FSOP_GEOM_SICK_GQUOTA, "group quota" },
	{ XFS_FSOP_GEOM_SICK_PQUOTA, "project quota" },
	{ XFS_FSOP_GEOM_SICK_RT_BITMAP, "realtime bitmap" },
	{ XFS_FSOP_GEOM_SICK_RT_SUMMARY, "realtime summary" },
	{ XFS_FSOP_GEOM_SICK_QUOTACHECK, "quota counts" },
	{ XFS_FSOP_GEOM_SICK_NLINKS, "inode link counts" },
	{ XFS_FSOP_GEOM_SICK_METADIR, "metadata directory" },
	{ XFS_FSOP_GEOM_SICK_METAPATH, "metadata directory paths" },
	{ 0, NULL },
};

static const struct mask_name ag_sick_names[] = {
	{ XFS_AG_GEOM_SICK_SB, "superblock" },
	{ XFS_AG_GEOM_SICK_AGF, "free space header (AGF)" },
	{ XFS_AG_GEOM_SICK_AGFL, "free list (AGFL)" },
	{ XFS_AG_GEOM_SICK_AGI, "inode header (AGI)" },
	{ XFS_AG_GEOM_SICK_BNOBT, "free space by block btree" },
	{ XFS_AG_GEOM_SICK_CNTBT, "free space by length btree" },
	{ XFS_AG_GEOM_SICK_INOBT, "inode btree" },
	{ XFS_AG_GEOM_SICK_FINOBT, "free inode btree" },
	{ XFS_AG_GEOM_SICK_RMAPBT, "reverse mapping btree" },
	{ XFS_AG_GEOM_SICK_REFCNTBT, "reference count btree" },
	{ 0, NULL },
};

static const struct mask_name inode_sick_names[] = {
	{ XFS_BS_SICK_INODE, "inode core" },
	{ XFS_BS_SICK_BMBTD, "data fork mapping" },
	{ XFS_BS_SICK_BMBTA, "attribute fork mapping" },
	{ XFS_BS_SICK_BMBTC, "copy-on-write fork mapping" },
	{ XFS_BS_SICK_DIR, "directory" },
	{ XFS_BS_SICK_XATTR, "extended attributes" },
	{ XFS_BS_SICK_SYMLINK, "symlink target" },
	{ XFS_BS_SICK_PARENT, "parent pointers" },
	{ XFS_BS_SICK_DIRTREE, "directory tree" },
	{ 0, NULL },
};

/* "a, b and c" for the bits of mask; unknown bits by number. */
static void mask_describe(struct strbuf *sb, uint32_t mask, const struct mask_name *names)
{
	for (unsigned bit = 0; bit < 32; bit++) {
		uint32_t b = 1u << bit;
		const char *name = NULL;

		if (!(mask & b))
			continue;
		for (const struct mask_name *n = names; n->name; n++)
			if (n->bit == b)
				name = n->name;
		if (sb->len)
			strbuf_addstr(sb, ", ");
		if (name)
			strbuf_addstr(sb, name);
		else
			strbuf_addf(sb, "health bit %u", bit);
	}
}

const char *xfs_inode_sick_name(unsigned bit)
{
	for (const struct mask_name *n = inode_sick_names; n->name; n++)
		if (n->bit == 1u << bit)
			return n->name;
	return NULL;
}

/* Report a sick mask: an error unless the kernel scrub will judge it. */
static void report_sick(struct scrub_ctx *ctx, const char *where, uint32_t sick,
			const struct mask_name *names)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct strbuf sb = STRBUF_INIT;

	mask_describe(&sb, sick, names);
	if (xs->kscrub)
		str_info(ctx, CHECK_XFS_HEALTH, NULL, NULL, 0,
			 "%s: the kernel has marked as sick: %s (the kernel scrub checks it)",
			 where, sb.buf);
	else
		str_error(ctx, CHECK_XFS_HEALTH, NULL, NULL, 0,
			  "%s: the kernel found this metadata corrupt while using it: %s",
			  where, sb.buf);
	strbuf_release(&sb);
}

/*
 * XFS_AG_GEOM_SICK_INODES: an inode of the AG left memory sick (the kernel
 * inactivates an inode it deleted, or one it still had blocks to trim).
 * Which one, and whether its damage went with it (a deleted file's did),
 * the kernel no longer says, and the flag stays until unmount.  Damage
 * still there is this scan's to find: every inode of the AG is read
 * again, its core, forks, directory, symlink and attributes checked.  So
 * a warning, not an error that nothing could confirm.
 */
static void report_inodes_let_go(struct scrub_ctx *ctx, const char *where)
{
	if (xfs_state(ctx)->kscrub)
		str_info(ctx, CHECK_XFS_HEALTH, NULL, NULL, 0,
			 "%s: the kernel has marked as sick: inodes it has since let go "
			 "(the kernel scrub checks the AG's inodes)", where);
	else
		str_warn(ctx, CHECK_XFS_HEALTH, NULL, NULL, 0,
			 "%s: the kernel found inodes here sick and has since let them go from "
			 "memory (a deleted file, or one it evicted): which ones it no longer "
			 "says, and the flag stays until unmount; this scan reads every inode of "
			 "the AG again and reports any damage still there", where);
}

static void report_features(struct scrub_ctx *ctx)
{
	const struct xfs_fsop_geom *g = &xfs_state(ctx)->geo;
	static const struct mask_name features[] = {
		{ XFS_FSOP_GEOM_FLAGS_V5SB, "crc" },
		{ XFS_FSOP_GEOM_FLAGS_FTYPE, "ftype" },
		{ XFS_FSOP_GEOM_FLAGS_FINOBT, "finobt" },
		{ XFS_FSOP_GEOM_FLAGS_SPINODES, "sparse" },
		{ XFS_FSOP_GEOM_FLAGS_RMAPBT, "rmapbt" },
		{ XFS_FSOP_GEOM_FLAGS_REFLINK, "reflink" },
		{ XFS_FSOP_GEOM_FLAGS_BIGTIME, "bigtime" },
		{ XFS_FSOP_GEOM_FLAGS_INOBTCNT, "inobtcount" },
		{ XFS_FSOP_GEOM_FLAGS_NREXT64, "nrext64" },
		{ XFS_FSOP_GEOM_FLAGS_PARENT, "parent" },
		{ XFS_FSOP_GEOM_FLAGS_QUOTA, "quota" },
		{ 0, NULL },
	};
	struct strbuf sb = STRBUF_INIT;

	for (const struct mask_name *f = features; f->name; f++)
		strbuf_addf(&sb, " %s%s", (g->flags & f->bit) ? "+" : "-", f->name);
	strbuf_addf(&sb, " %srealtime", g->rtblocks ? "+" : "-");
	report_verbose(ctx, "Phase 1: XFS v%s, %u AGs of %u blocks, block %u bytes, inode %u "
		       "bytes, sector %u bytes, directory block %u bytes, %llu data blocks, "
		       "%llu realtime blocks, log %u blocks%s",
		       (g->flags & XFS_FSOP_GEOM_FLAGS_V5SB) ? "5" : "4", g->agcount,
		       g->agblocks, g->blocksize, g->inodesize, g->sectsize, g->dirblocksize,
		       (unsigned long long)g->datablocks, (unsigned long long)g->rtblocks,
		       g->logblocks, g->logstart ? " (internal)" : " (external)");
	report_verbose(ctx, "Phase 1: XFS features:%s", sb.buf);
	strbuf_release(&sb);
}

/* Geometry and health of the filesystem and its AGs. */
static int xfs_read_geometry(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);

	if (ioctl(xs->fd, XFS_IOC_FSGEOMETRY, &xs->geo) < 0)
		return -errno;
	xs->ags = xcalloc(xs->geo.agcount ? xs->geo.agcount : 1, sizeof(*xs->ags));
	xs->bulkstat_corrupt_said = xcalloc(xs->geo.agcount ? xs->geo.agcount : 1,
					    sizeof(*xs->bulkstat_corrupt_said));
	xs->bulkstat_refused = xcalloc(xs->geo.agcount ? xs->geo.agcount : 1,
				       sizeof(*xs->bulkstat_refused));
	for (uint32_t ag = 0; ag < xs->geo.agcount; ag++) {
		xs->ags[ag].ag_number = ag;
		if (ioctl(xs->fd, XFS_IOC_AG_GEOMETRY, &xs->ags[ag]) < 0) {
			int err = errno;

			if (err == ENOTTY || err == EOPNOTSUPP)
				break;	/* kernels before 5.2: no AG geometry */
			return -err;
		}
	}
	return 0;
}

static void xfs_report_health(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	char where[64];

	if (xs->geo.sick)
		report_sick(ctx, "filesystem", xs->geo.sick, fs_sick_names);
	for (uint32_t ag = 0; ag < xs->geo.agcount; ag++) {
		const struct xfs_ag_geometry *a = &xs->ags[ag];

		report_verbose(ctx, "Phase 1: AG %u: %u blocks, %u free, %u inodes, %u free "
			       "inodes%s", ag, a->ag_length, a->ag_freeblks, a->ag_icount,
			       a->ag_ifree, a->ag_checked ? ", checked since mount" : "");
		snprintf(where, sizeof(where), "AG %u", ag);
		if (a->ag_sick & ~XFS_AG_GEOM_SICK_INODES)
			report_sick(ctx, where, a->ag_sick & ~XFS_AG_GEOM_SICK_INODES,
				    ag_sick_names);
		if (a->ag_sick & XFS_AG_GEOM_SICK_INODES)
			report_inodes_let_go(ctx, where);
	}
}

static int xfs_scan_fs(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xcalloc(1, sizeof(*xs));
	struct xfs_bulkstat root;
	int ret;

	xs->fd = ctx->mnt_fd;
	pthread_mutex_init(&xs->lock, NULL);
	xs->files = inoset_new();
	xs->health_seen = inoset_new();
	xs->nr_walkstat = ctx->opt.nr_threads ? ctx->opt.nr_threads : 1;
	xs->walkstat = xfs_walkstat_new(xs->nr_walkstat);
	xfs_names_init(&xs->named);
	ctx->backend = xs;
	ret = xfs_read_geometry(ctx);
	if (ret < 0)
		return ret;
	xfs_ownermap_init(xs);
	/*
	 * BULKSTAT, the kernel scrub and GETFSMAP need CAP_SYS_ADMIN (the
	 * geometry does not): without it, say so once and leave the
	 * filesystem to the generic checks rather than fail each of them.
	 */
	ret = xfs_bulkstat_one(xs, ctx->root_stx.stx_ino, &root);
	if (ret == -EPERM || ret == -EACCES)
		return ret;
	report_features(ctx);
	/* The probe decides whether a sick mask is an error or a to-do. */
	xfs_kscrub_probe(ctx);
	xfs_report_health(ctx);
	return 0;
}

static int xfs_scan_metadata(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	const char *why = statvfs_insane(&ctx->svfs);
	struct statvfs again;

	/* Look again: statfs of a live fs is a snapshot of moving counters. */
	if (why && fstatvfs(ctx->mnt_fd, &again) == 0 && (why = statvfs_insane(&again)))
		str_error(ctx, CHECK_STATFS_COUNTERS, NULL, NULL, 0,
			  "statfs counters are inconsistent: %s", why);
	/* Phase 3's map, read while the rest of this phase reads too. */
	xfs_ownermap_start(ctx);
	/* Without the kernel scrub, phase 3's BULKSTATs give the inodes' health. */
	if (xs->kscrub)
		xfs_kscrub_all(ctx);
	else
		xs->walk_health = true;
	xfs_ondisk_check(ctx);
	xfs_counters_check(ctx);
	xfs_ownermap_wait(ctx);
	if (xs->kscrub)
		report_verbose(ctx, "Phase 2: BULKSTAT: %llu inodes, %llu checked by the kernel "
			       "since mount, %llu marked sick",
			       (unsigned long long)atomic_load(&xs->nr_bulkstat),
			       (unsigned long long)atomic_load(&xs->nr_checked),
			       (unsigned long long)atomic_load(&xs->nr_sick));
	/* Phase 3's walk names the inodes phase 2 had something to say about. */
	xfs_names_finish(&xs->named);
	return 0;
}

static void xfs_check_inode(struct scrub_ctx *ctx, const struct backend_dir *d,
			    const struct backend_entry *e)
{
	struct xfs_state *xs = xfs_state(ctx);

	/* Its health flags as its bulk record had them, before the walk read it. */
	if (xs->walk_health)
		xfs_walkstat_health(ctx, d, e->name, e->stx->stx_ino);
	/*
	 * An inode from a bulk record is that BULKSTAT: nothing to compare;
	 * opened since, the open file against that record.
	 */
	if (e->opened_from)
		xfs_walkstat_opened(ctx, d, e->name, e->stx, e->opened_from);
	else if (!e->bulk)
		xfs_walkstat_add(ctx, d, e->name, e->stx);
	/* Its map is collected: opened, none by its bulk record, or GETFSMAP's. */
	if ((e->fd >= 0 || e->no_extents || e->bulk_map) && S_ISREG(e->stx->stx_mode) &&
	    !stx_changed_during_scan(ctx, e->stx))
		inoset_test_and_set(xs->files, 0, e->stx->stx_ino);
	xfs_names_note(&xs->named, d->node, e->name, e->namelen, e->stx->stx_ino);
}

static void xfs_check_dir(struct scrub_ctx *ctx, const struct backend_dir *d)
{
	struct xfs_state *xs = xfs_state(ctx);

	if (!xfs_walkstat_dir(ctx, d))
		xfs_walkstat_add(ctx, d, NULL, d->stx);
	xfs_walkstat_flush(ctx, d);
	xfs_names_note(&xs->named, d->node, NULL, 0, d->stx->stx_ino);
}

/* Realtime files' extents are offsets on the realtime device, not ours. */
static bool xfs_data_elsewhere(struct scrub_ctx *ctx, int fd)
{
	struct fsxattr fsx;

	return xfs_state(ctx)->geo.rtblocks && ioctl(fd, FS_IOC_FSGETXATTR, &fsx) == 0 &&
	       (fsx.fsx_xflags & FS_XFLAG_REALTIME);
}

static int xfs_scan_inodes(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);

	xfs_walkstat_report(ctx);
	xfs_ownermap_report(ctx);
	xfs_ownermap_handover(ctx);
	xfs_ownermap_release(xfs_state(ctx));
	xfs_inodes_after_walk(ctx);
	xfs_quota_check(ctx);
	report_verbose(ctx, "Phase 3: %llu BULKSTAT requests since the scan began, %llu inodes "
		       "returned", (unsigned long long)atomic_load(&xs->bs_requests),
		       (unsigned long long)atomic_load(&xs->bs_inodes));
	return 0;
}

static int xfs_summary(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct statvfs sv;

	if (fstatvfs(ctx->mnt_fd, &sv) < 0)
		return 0;
	str_info(ctx, CHECK_SUMMARY_COUNTS, NULL, NULL, 0,
		 "%llu inodes found by name, %llu by BULKSTAT (metadata inodes not included); "
		 "statfs reports %llu in use", ctx->stats.inodes,
		 (unsigned long long)atomic_load(&xs->nr_bulkstat),
		 (unsigned long long)(sv.f_files - sv.f_ffree));
	str_info(ctx, CHECK_SUMMARY_COUNTS, NULL, NULL, 0,
		 "%llu KiB allocated to the inodes found; statfs reports %llu KiB in use",
		 ctx->stats.blocks / 2,
		 (unsigned long long)((sv.f_blocks - sv.f_bfree) * sv.f_frsize / 1024));
	return 0;
}

static void xfs_cleanup(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);

	if (!xs)
		return;
	xfs_inodes_release(ctx);
	xfs_ownermap_release(xs);
	inoset_free(xs->files);
	inoset_free(xs->health_seen);
	xfs_walkstat_free(xs->walkstat, xs->nr_walkstat);
	pthread_mutex_destroy(&xs->lock);
	free(xs->ags);
	free(xs->bulkstat_corrupt_said);
	free(xs->bulkstat_refused);
	free(xs);
	ctx->backend = NULL;
}

const struct scrub_ops xfs_ops = {
	.name = "xfs",
	.needs = "CAP_SYS_ADMIN for BULKSTAT, GETFSMAP and the kernel scrub",
	.match = xfs_match,
	.scan_fs = xfs_scan_fs,
	.scan_metadata = xfs_scan_metadata,
	.scan_inodes = xfs_scan_inodes,
	.check_dir = xfs_check_dir,
	.bulk_inodes = xfs_walkstat_bulk,
	.bulk_extents = xfs_ownermap_extents,
	.bulk_extents_keep = xfs_ownermap_keep,
	.check_inode = xfs_check_inode,
	.data_elsewhere = xfs_data_elsewhere,
	.list_xattrs = xfs_list_xattrs,
	.fsmap_owner_name = fsmap_xfs_owner_name,
	.summary = xfs_summary,
	.cleanup = xfs_cleanup,
	.health = xfs_health,
	.watch_open = xfs_watch_open,
	.watch_read = xfs_watch_read,
	.watch_close = xfs_watch_close,
};

/* Work items of xfs_for_each_ag(): one AG each. */
struct ag_item {
	struct wq_item work;
	uint32_t agno;
};

struct ag_run {
	xfs_ag_fn fn;
	void *arg;
};

static void ag_item_fn(struct workqueue *wq, struct wq_item *item, unsigned thread, void *arg)
{
	const struct ag_run *r = arg;

	(void)wq;
	r->fn(r->arg, ((struct ag_item *)item)->agno, thread);
}

unsigned xfs_ag_threads(const struct scrub_ctx *ctx)
{
	return ctx->opt.nr_threads ? ctx->opt.nr_threads : 1;
}

int xfs_for_each_ag(struct scrub_ctx *ctx, xfs_ag_fn fn, void *arg)
{
	uint32_t nags = xfs_state(ctx)->geo.agcount;
	struct ag_item *items = xcalloc(nags ? nags : 1, sizeof(*items));
	struct ag_run r = { .fn = fn, .arg = arg };
	struct workqueue wq;
	int ret = workqueue_init(&wq, xfs_ag_threads(ctx), ag_item_fn, &r);

	if (ret < 0) {
		free(items);
		return ret;
	}
	for (uint32_t ag = 0; ag < nags; ag++) {
		items[ag].agno = ag;
		workqueue_add(&wq, &items[ag].work);
	}
	workqueue_wait(&wq);
	workqueue_destroy(&wq);
	free(items);
	return 0;
}
