/*
 * xfs_counters: the kernel's filesystem-wide inode counters against the
 * sums of its per-AG ones (xfs.counters), phase 2, after the disk reads.
 *
 * xfs_repair -n sets sb_icount and sb_ifree against the sums of the AGIs.
 * While mounted the superblock's copies on the disk are lazy (written back
 * at unmount, freeze and log covering) and say nothing.  The kernel's
 * counters in memory do: with a clean log it takes them from the
 * superblock at mount without summing the AGIs, so a superblock that lies
 * (xfs_repair: "sb_icount 640, counted 6656") is believed until the next
 * unclean mount.  What the kernel keeps per AG (XFS_IOC_AG_GEOMETRY, read
 * from each AGI, which xfs.ondisk holds against the disk) must add up to
 * what it keeps for the filesystem:
 *
 *   inodes in use: statfs f_files - f_ffree (exact sums of the per-cpu
 *                  counters) == sum(ag_icount - ag_ifree);
 *   inodes:        XFS_IOC_FSCOUNTS allocino == sum(ag_icount), within
 *                  what the per-cpu counter may hold back: allocino is an
 *                  approximate read, every CPU keeps up to 127 unfolded
 *                  (XFS_ICOUNT_BATCH is 128).
 *
 * Free blocks are not judged: the kernel's free count is the AGFs' free,
 * AGFL and btree blocks less the reserve pool, the per-AG metadata
 * reservations (no interface shows them) and delayed allocations.
 *
 * The live rule.  A look is whole only if the filesystem-wide figures
 * read the same before and after the AGs are read (else a file made or
 * removed between them tears it: taken again, a few times).  A mismatch
 * is looked at again after syncfs and a pause, and once more after a
 * longer one.  What is damage is the difference, not the figures: a
 * superblock that lied at mount leaves the kernel's counters off by the
 * same number however many files come and go, while a race between the
 * reads gives a difference that does not stay.  So the same difference
 * in statfs's figure in every whole look (and the FSCOUNTS figure past
 * its slack in each) is an error, however the counts moved; a mismatch
 * that goes away or changes, or looks that stay torn, an info "changed
 * while being checked".
 */
#include "backends/xfs/xfs.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "report/checks.h"
#include "scan/context.h"
#include "report/report.h"
#include "lib/strbuf.h"

/* XFS_ICOUNT_BATCH in the kernel: each CPU folds its delta past 128. */
#define CNT_ICOUNT_BATCH 128
/* The pauses between the looks: long enough for a transaction in flight. */
#define CNT_PAUSE_NS 500000000L
#define CNT_LAST_PAUSE_NS 1500000000L
/* Tries at a whole look, and the pause between them. */
#define CNT_TRIES 8
#define CNT_RETRY_NS 20000000L

struct cnt_look {
	unsigned long long allocino;	/* FSCOUNTS */
	unsigned long long used;	/* statfs f_files - f_ffree */
	unsigned long long ag_icount, ag_ifree;	/* sums of AG_GEOMETRY */
	bool used_ok;			/* statfs's figure can be compared */
};

/* The filesystem-wide figures of l, read now. */
static int look_fs(const struct xfs_state *xs, struct cnt_look *l)
{
	struct xfs_fsop_counts c;
	struct statvfs sv;

	if (ioctl(xs->fd, XFS_IOC_FSCOUNTS, &c) < 0 || fstatvfs(xs->fd, &sv) < 0)
		return -errno;
	l->allocino = c.allocino;
	/* f_ffree is clamped at 0 (a full filesystem): then it says nothing. */
	l->used_ok = sv.f_ffree > 0 && sv.f_files >= sv.f_ffree;
	l->used = sv.f_files - sv.f_ffree;
	return 0;
}

/*
 * One try: the filesystem's figures, every AG's, the filesystem's again.
 * 1 whole, 0 torn (the filesystem's moved meanwhile), or a negative errno.
 */
static int look_once(const struct xfs_state *xs, struct cnt_look *l)
{
	struct cnt_look after;

	memset(l, 0, sizeof(*l));
	if (look_fs(xs, l) < 0)
		return -errno;
	for (uint32_t ag = 0; ag < xs->geo.agcount; ag++) {
		struct xfs_ag_geometry a = { .ag_number = ag };

		if (ioctl(xs->fd, XFS_IOC_AG_GEOMETRY, &a) < 0)
			return -errno;
		l->ag_icount += a.ag_icount;
		l->ag_ifree += a.ag_ifree;
	}
	if (look_fs(xs, &after) < 0)
		return -errno;
	return after.allocino == l->allocino && after.used == l->used &&
	       after.used_ok == l->used_ok;
}

/* 1 a whole look in l, 0 every try torn, or a negative errno. */
static int look(struct scrub_ctx *ctx, struct cnt_look *l)
{
	struct timespec pause = { 0, CNT_RETRY_NS };
	int ret = 0;

	for (int i = 0; i < CNT_TRIES && !ret; i++) {
		if (i)
			nanosleep(&pause, NULL);
		ret = look_once(xfs_state(ctx), l);
	}
	return ret;
}

/*
 * A project quota on the root changes statfs's inode figures to the
 * project's (xfs_qm_statvfs): then only FSCOUNTS is compared.
 */
static bool statfs_is_project(int fd)
{
	struct fsxattr fsx;

	return ioctl(fd, FS_IOC_FSGETXATTR, &fsx) == 0 && (fsx.fsx_xflags & FS_XFLAG_PROJINHERIT);
}

static unsigned long long icount_slack(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_CONF);

	return (unsigned long long)(cpus > 0 ? cpus : 1) * (CNT_ICOUNT_BATCH - 1);
}

static unsigned long long absdiff(unsigned long long a, unsigned long long b)
{
	return a > b ? a - b : b - a;
}

/* Whether the figures of l disagree; why says how. */
static bool mismatch(const struct cnt_look *l, bool project, struct strbuf *why)
{
	bool bad = false;

	strbuf_reset(why);
	if (absdiff(l->allocino, l->ag_icount) > icount_slack()) {
		strbuf_addf(why, "the kernel counts %llu inodes (XFS_IOC_FSCOUNTS), its AGs %llu",
			    l->allocino, l->ag_icount);
		bad = true;
	}
	if (!project && l->used_ok && l->ag_icount >= l->ag_ifree &&
	    l->used != l->ag_icount - l->ag_ifree) {
		strbuf_addf(why, "%sthe kernel counts %llu inodes in use (statfs), its AGs %llu",
			    bad ? "; " : "", l->used, l->ag_icount - l->ag_ifree);
		bad = true;
	}
	return bad;
}

/* statfs's in-use figure less the AGs' (0 when it cannot be compared). */
static long long used_diff(const struct cnt_look *l, bool project)
{
	if (project || !l->used_ok || l->ag_icount < l->ag_ifree)
		return 0;
	return (long long)l->used - (long long)(l->ag_icount - l->ag_ifree);
}

/* Both looks wrong in the same way: the same difference, the same parts. */
static bool same_wrong(const struct cnt_look *a, const struct cnt_look *b, bool project)
{
	bool fa = absdiff(a->allocino, a->ag_icount) > icount_slack();
	bool fb = absdiff(b->allocino, b->ag_icount) > icount_slack();

	return fa == fb && used_diff(a, project) == used_diff(b, project);
}

/*
 * Looks again after syncfs and pause_ns: true if that look is whole and
 * wrong as first is (why then says how).
 */
static bool wrong_again(struct scrub_ctx *ctx, const struct cnt_look *first, long pause_ns,
			bool project, struct strbuf *why)
{
	struct timespec pause = { pause_ns / 1000000000L, pause_ns % 1000000000L };
	struct cnt_look again;

	syncfs(ctx->mnt_fd);
	nanosleep(&pause, NULL);
	return look(ctx, &again) == 1 && mismatch(&again, project, why) &&
	       same_wrong(first, &again, project);
}

void xfs_counters_check(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct cnt_look first;
	struct strbuf why = STRBUF_INIT;
	bool project = statfs_is_project(xs->fd);

	if (look(ctx, &first) != 1 || !mismatch(&first, project, &why))
		goto out;
	if (wrong_again(ctx, &first, CNT_PAUSE_NS, project, &why) &&
	    wrong_again(ctx, &first, CNT_LAST_PAUSE_NS, project, &why))
		str_error(ctx, CHECK_XFS_COUNTERS, NULL, NULL, 0,
			  "summary counters: %s (xfs_repair: sb_icount, sb_ifree)", why.buf);
	else
		str_changed(ctx, CHECK_XFS_COUNTERS, NULL, NULL, 0, "summary counters: %s",
			    why.len ? why.buf : "a mismatch that went away");
out:
	strbuf_release(&why);
}
