/*
 * xfs_inodes: what BULKSTAT and GETFSMAP tell about the inodes, checked
 * against the walk -- on any kernel, online scrub or not.
 *
 * Health.  Each inode's health flags (bs_sick, the metadata the kernel
 * found bad while using it, and bs_checked) are in every BULKSTAT record
 * of it.  With the kernel scrub (xfs_kscrub.c), phase 2 BULKSTATs every
 * inode to scrub it and takes them then.  Without it, a BULKSTAT of every
 * inode before the walk cost a pass over the inode table that phase 3's
 * own BULKSTATs repeat (the walk's bulk records, the comparisons of
 * xfs_walkstat.c): the flags are taken from those (xfs_health_take(),
 * once per inode, with the name the walk has for it then), and after the
 * walk from a BULKSTAT of the allocated inodes it did not see, with the
 * orphan candidates.  Those are only flags the kernel keeps for inodes it
 * has in memory, which a BULKSTAT before the walk saw no more of.
 * Findings about an inode are held back (xfs_defer) until phase 3's walk
 * has found a name for it, so they are reported with a path.
 *
 * Phase 3, after the walk:
 *
 * Orphans.  Every allocated inode with a link count above 0 must have been
 * reached by a name.  BULKSTAT does not return the internal metadata inodes
 * (quota, realtime bitmap and summary, metadir), and an inode with link
 * count 0 (unlinked but open, O_TMPFILE) is not an orphan.  The live rule:
 * an inode created or changed since the scan began is skipped (a rename
 * changes the ctime of the inode renamed); the rest are looked at again --
 * a second walk looks for a name (a directory moved during the first walk
 * moves its children without touching their ctime), and a BULKSTAT of the
 * one inode must still show it allocated, linked and unchanged.  A walk
 * that read a directory changed since it began may itself have missed a
 * moved directory: then it is repeated, up to MAX_SECOND_WALKS times, and
 * when none of them was quiet an inode still unreached is only an info.
 *
 * Reverse mappings (rmapbt filesystems, FIEMAP offsets on the data device,
 * no realtime device).  GETFSMAP lists every data-fork mapping by owner
 * inode and file offset.  Every extent FIEMAP gave the walk for a file that
 * did not change during the scan must be covered by rmap records of that
 * inode at that offset, mapping the same device bytes (xfs.rmap_missing),
 * and every rmap record of such a file must be one of its extents
 * (xfs.rmap_extra).  Shared (reflinked) blocks have one rmap record per
 * owner, so they are never a mismatch.  A mismatch is looked at again: the
 * file is opened by handle, mapped afresh (FIEMAP_FLAG_SYNC, so delayed
 * allocations written back since the walk are seen) and GETFSMAP is asked
 * for those device bytes again; only a mismatch that is still there, in a
 * file whose ctime did not move, is an error.
 *
 * Free space (filesystems without the rmapbt, same conditions).  GETFSMAP
 * still lists the free extents (from the bnobt): a block of a file's
 * extent that is among them is used space recorded as free (xfs.space,
 * which with the rmapbt xfs_xref.c finds from the disk).  Looked at again
 * the same way: the file maps it afresh and GETFSMAP still calls it free.
 *
 * Reference counts (reflink without the rmapbt): xfs_refcount.c, whose
 * owners are named by the same second walk.
 *
 * Memory: the rmap records of the data forks, 40 bytes each (as many as
 * the walk's extents), for the time of the check; orphan candidates and
 * mismatches are capped.
 */
#include "backends/xfs/xfs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/fsmap.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "scan/context.h"
#include "tree/dircache.h"
#include "lib/fsmap.h"
#include "lib/inoset.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

/* 512 records of 192 bytes: ~100 KiB per thread, a few ioctls per AG. */
#define BULKSTAT_BATCH 512
/* 1024 inode chunks of 24 bytes per INUMBERS call: 64k inodes. */
#define INUMBERS_BATCH 1024
/* Inodes per chunk: the bits of an INUMBERS record's allocation mask. */
#define CHUNK_INODES 64
/* Past these many suspects something is badly wrong: the first are enough. */
#define MAX_ORPHANS 10000
#define MAX_RMAP_SUSPECTS 1000

/* ------------------------------------------------------------------ names */

void xfs_names_init(struct xfs_names *nl)
{
	memset(nl, 0, sizeof(*nl));
	pthread_mutex_init(&nl->lock, NULL);
}

void xfs_names_add(struct xfs_names *nl, uint64_t ino)
{
	pthread_mutex_lock(&nl->lock);
	if (nl->n == nl->alloc) {
		nl->alloc = nl->alloc ? 2 * nl->alloc : 64;
		nl->v = xrealloc(nl->v, nl->alloc * sizeof(*nl->v));
	}
	nl->v[nl->n++] = (struct xfs_named){ .ino = ino };
	nl->sorted = false;
	pthread_mutex_unlock(&nl->lock);
}

static int named_cmp(const void *a, const void *b)
{
	const struct xfs_named *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

void xfs_names_finish(struct xfs_names *nl)
{
	size_t out = 0;

	sort_items(nl->v, nl->n, sizeof(*nl->v), named_cmp);
	for (size_t i = 0; i < nl->n; i++)
		if (!out || nl->v[out - 1].ino != nl->v[i].ino)
			nl->v[out++] = nl->v[i];
	nl->n = out;
	nl->sorted = true;
}

struct xfs_named *xfs_names_find(struct xfs_names *nl, uint64_t ino)
{
	struct xfs_named key = { .ino = ino };

	if (!nl->sorted)
		return NULL;
	return find_item(&key, nl->v, nl->n, sizeof(key), named_cmp);
}

void xfs_names_note(struct xfs_names *nl, struct dir_node *dir, const char *name,
		    size_t namelen, uint64_t ino)
{
	struct xfs_named *n = xfs_names_find(nl, ino);

	if (!n)
		return;
	pthread_mutex_lock(&nl->lock);
	if (!n->found) {
		n->found = true;
		dir_node_get(dir);
		n->dir = dir;
		n->name = name ? xstrndup(name, namelen) : NULL;
	}
	pthread_mutex_unlock(&nl->lock);
}

void xfs_names_release(struct scrub_ctx *ctx, struct xfs_names *nl)
{
	for (size_t i = 0; i < nl->n; i++) {
		if (nl->v[i].dir)
			dir_node_put(&ctx->dcache, nl->v[i].dir);
		free(nl->v[i].name);
	}
	free(nl->v);
	pthread_mutex_destroy(&nl->lock);
	memset(nl, 0, sizeof(*nl));
}

/* ------------------------------------------------------- deferred reports */

/*
 * Hold a finding.  to_name: the walk is to name the inode (before it
 * only: xfs_names_add() unsorts the list the walk looks names up in);
 * else dir and name are the name it has (dir NULL: none).
 */
static void defer_v(struct xfs_state *xs, uint64_t ino, enum severity sev, const char *check,
		    bool if_named, bool to_name, struct dir_node *dir, const char *name,
		    const char *file, int line, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_vaddf(&sb, fmt, ap);
	if (dir)
		dir_node_get(dir);
	pthread_mutex_lock(&xs->lock);
	if (xs->nr_deferred == xs->alloc_deferred) {
		xs->alloc_deferred = xs->alloc_deferred ? 2 * xs->alloc_deferred : 16;
		xs->deferred = xrealloc(xs->deferred, xs->alloc_deferred * sizeof(*xs->deferred));
	}
	xs->deferred[xs->nr_deferred++] = (struct xfs_deferred){
		.ino = ino, .sev = sev, .check = check, .msg = strbuf_detach(&sb),
		.file = file, .line = line, .if_named = if_named, .dir = dir,
		.name = dir && name ? xstrdup(name) : NULL,
	};
	pthread_mutex_unlock(&xs->lock);
	if (to_name)
		xfs_names_add(&xs->named, ino);
}

void xfs_defer_at(struct xfs_state *xs, uint64_t ino, enum severity sev, const char *check,
		  const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	defer_v(xs, ino, sev, check, false, true, NULL, NULL, file, line, fmt, ap);
	va_end(ap);
}

void xfs_defer_if_named_at(struct xfs_state *xs, uint64_t ino, enum severity sev,
			   const char *check, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	defer_v(xs, ino, sev, check, true, true, NULL, NULL, file, line, fmt, ap);
	va_end(ap);
}

/*
 * A finding about an inode with no link that the walk reached by a name:
 * an error if the kernel still gives it no link and did not change it
 * during the scan (a link or unlink stamps its ctime: an O_TMPFILE linked
 * after phase 2 read the disk, a file unlinked after the walk passed).
 */
static void report_named(struct scrub_ctx *ctx, struct xfs_state *xs,
			 const struct xfs_deferred *d, const struct xfs_named *n)
{
	struct xfs_bulkstat bs;
	int ret = d->sev == SEV_ERROR ? xfs_bulkstat_one(xs, d->ino, &bs) : 0;
	bool still = ret == 1 && !bs.bs_nlink &&
		     (uint64_t)bs.bs_ctime * 1000000000ULL + bs.bs_ctime_nsec <
		     ctx->changed_since_ns;

	if (d->sev != SEV_ERROR || still)
		report_at(ctx, d->sev, d->check, n->dir, n->name, d->ino, d->file, d->line,
			  "%s", d->msg);
	else
		report_changed_at(ctx, d->check, n->dir, n->name, d->ino, d->file, d->line,
				  "changed while being checked: %s", d->msg);
}

static int deferred_cmp(const void *a, const void *b)
{
	const struct xfs_deferred *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Report what phases 2 and 3 held back, with the names the walk found. */
static void report_deferred(struct scrub_ctx *ctx, struct xfs_state *xs)
{
	/* By inode: the findings about one file come together. */
	sort_items(xs->deferred, xs->nr_deferred, sizeof(*xs->deferred), deferred_cmp);
	for (size_t i = 0; i < xs->nr_deferred; i++) {
		const struct xfs_deferred *d = &xs->deferred[i];
		const struct xfs_named *n = xfs_names_find(&xs->named, d->ino);

		if (d->dir) {
			report_at(ctx, d->sev, d->check, d->dir, d->name, d->ino, d->file, d->line,
				  "%s", d->msg);
			continue;
		}
		if (d->if_named) {
			if (n && n->found)
				report_named(ctx, xs, d, n);
			continue;
		}
		if (n && n->found)
			report_at(ctx, d->sev, d->check, n->dir, n->name, d->ino, d->file, d->line,
				  "%s", d->msg);
		else
			report_at(ctx, d->sev, d->check, NULL, NULL, d->ino, d->file, d->line,
				  "%s (no name found for the inode)", d->msg);
	}
}

void xfs_inodes_release(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);

	for (size_t i = 0; i < xs->nr_deferred; i++) {
		free(xs->deferred[i].msg);
		free(xs->deferred[i].name);
		if (xs->deferred[i].dir)
			dir_node_put(&ctx->dcache, xs->deferred[i].dir);
	}
	free(xs->deferred);
	xs->deferred = NULL;
	xs->nr_deferred = 0;
	xfs_names_release(ctx, &xs->named);
}

/* --------------------------------------------------------------- bulkstat */

/* The AG of inode number ino: agno, then the AG block, then the inode in the block. */
static uint32_t ino_agno(const struct xfs_state *xs, uint64_t ino)
{
	unsigned agblklog = 0, inopblog = 0;

	while ((1ULL << agblklog) < xs->geo.agblocks)
		agblklog++;
	while (xs->geo.inodesize && (xs->geo.inodesize << inopblog) < xs->geo.blocksize)
		inopblog++;
	return (uint32_t)(ino >> (agblklog + inopblog));
}

/*
 * Refusals of an AG's BULKSTAT as damaged after which its requests are
 * answered with the refusal at once: a damaged inode btree costs each
 * request the kernel's walk of it (a fuzzed inobt root's record count:
 * 15 ms a request, 250 requests in a scan of 350 files, 10 s under the
 * sanitizers).  Two: the damage read twice, as every finding is.
 */
#define BULKSTAT_REFUSALS 2

/*
 * Unless the request names its AG, it is kept to the AG of its first
 * inode: one not filled there would go on into the next AGs' inode
 * btrees.  The walk's and the checks' requests want inodes near their
 * first.  An AG refused BULKSTAT_REFUSALS times is not asked again.
 */
int xfs_bulkstat_req(struct xfs_state *xs, struct xfs_bulkstat_req *req)
{
	uint32_t agno;
	int err;

	if (!(req->hdr.flags & XFS_BULK_IREQ_AGNO) && req->hdr.ino) {
		req->hdr.flags |= XFS_BULK_IREQ_AGNO;
		req->hdr.agno = ino_agno(xs, req->hdr.ino);
	}
	agno = req->hdr.flags & XFS_BULK_IREQ_AGNO ? req->hdr.agno : 0;
	if (agno < xs->geo.agcount &&
	    atomic_load(&xs->bulkstat_refused[agno]) >= BULKSTAT_REFUSALS)
		return -EUCLEAN;	/* EFSCORRUPTED */
	atomic_fetch_add(&xs->bs_requests, 1);
	if (ioctl(xs->fd, XFS_IOC_BULKSTAT, req) < 0) {
		err = errno;
		if ((err == EUCLEAN || err == EIO) && agno < xs->geo.agcount)
			atomic_fetch_add(&xs->bulkstat_refused[agno], 1);
		return -err;
	}
	atomic_fetch_add(&xs->bs_inodes, req->hdr.ocount);
	return 0;
}

int xfs_bulkstat_one(struct xfs_state *xs, uint64_t ino, struct xfs_bulkstat *bs)
{
	struct {
		struct xfs_bulkstat_req req;
		struct xfs_bulkstat one;
	} r;
	int ret;

	memset(&r, 0, sizeof(r));
	r.req.hdr.ino = ino;
	r.req.hdr.icount = 1;
	ret = xfs_bulkstat_req(xs, &r.req);
	if (ret < 0)
		return ret;
	if (r.req.hdr.ocount != 1 || r.one.bs_ino != ino)
		return 0;
	*bs = r.one;
	return 1;
}

struct bs_run {
	struct scrub_ctx *ctx;
	xfs_inode_fn fn;
	void *arg;
	atomic_int err;			/* first errno, positive */
};

/*
 * The kernel found a damaged inode (or inode btree) and cannot go past
 * it: that is a finding about the filesystem, not a failure of the scan
 * (said once per AG).  whole: a pass over the AG, whose later inodes are
 * then not looked at; else a BULKSTAT of the one inode ino.
 */
static void bulkstat_corrupt(struct scrub_ctx *ctx, uint32_t agno, uint64_t ino, int err,
			     bool whole)
{
	struct xfs_state *xs = xfs_state(ctx);

	if (atomic_exchange(&xs->bulkstat_corrupt_said[agno], true))
		return;
	if (whole)
		str_error(ctx, CHECK_XFS_BULKSTAT, NULL, NULL, 0,
			  "AG %u: BULKSTAT stops at damaged inode metadata after inode %llu "
			  "(%s): the AG's later inodes are not cross-checked", agno,
			  (unsigned long long)ino, strerror(err));
	else
		str_error(ctx, CHECK_XFS_BULKSTAT, NULL, NULL, 0,
			  "AG %u: BULKSTAT stops at damaged inode metadata at inode %llu (%s): "
			  "its health flags are not known", agno, (unsigned long long)ino,
			  strerror(err));
}

static void bs_ag_fn(void *arg, uint32_t agno, unsigned thread)
{
	struct bs_run *br = arg;
	struct xfs_state *xs = xfs_state(br->ctx);
	struct xfs_bulkstat_req *req = xcalloc(1, XFS_BULKSTAT_REQ_SIZE(BULKSTAT_BATCH));

	(void)thread;
	req->hdr.flags = XFS_BULK_IREQ_AGNO;
	req->hdr.agno = agno;
	req->hdr.ino = 0;	/* the AG's first inode */
	while (!scrub_should_stop(br->ctx)) {
		int ret;

		req->hdr.icount = BULKSTAT_BATCH;
		ret = xfs_bulkstat_req(xs, req);
		if (ret < 0) {
			int zero = 0, err = -ret;

			if (errno_is_corruption(err)) {
				bulkstat_corrupt(br->ctx, agno, req->hdr.ino, err, true);
				break;
			}
			atomic_compare_exchange_strong(&br->err, &zero, err);
			break;
		}
		if (!req->hdr.ocount)
			break;
		for (uint32_t i = 0; i < req->hdr.ocount; i++)
			br->fn(br->ctx, &req->bulkstat[i], br->arg);
	}
	free(req);
}

int xfs_bulkstat_each(struct scrub_ctx *ctx, xfs_inode_fn fn, void *arg)
{
	struct bs_run br = { .ctx = ctx, .fn = fn, .arg = arg };
	int ret = xfs_for_each_ag(ctx, bs_ag_fn, &br);

	return ret < 0 ? ret : -atomic_load(&br.err);
}

/*
 * Count one inode's health flags; true if it is sick, its sick parts
 * then described in sb.
 */
static bool health_count(struct xfs_state *xs, uint32_t sick, uint32_t checked,
			 struct strbuf *sb)
{
	atomic_fetch_add(&xs->nr_bulkstat, 1);
	if (checked)
		atomic_fetch_add(&xs->nr_checked, 1);
	if (!sick)
		return false;
	atomic_fetch_add(&xs->nr_sick, 1);
	for (unsigned bit = 0; bit < 16; bit++) {
		const char *name;

		if (!(sick & (1u << bit)))
			continue;
		name = xfs_inode_sick_name(bit);
		if (sb->len)
			strbuf_addstr(sb, ", ");
		if (name)
			strbuf_addstr(sb, name);
		else
			strbuf_addf(sb, "health bit %u", bit);
	}
	return true;
}

void xfs_inode_health(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct strbuf sb = STRBUF_INIT;

	if (health_count(xs, bs->bs_sick, bs->bs_checked, &sb))
		xfs_defer(xs, bs->bs_ino, SEV_INFO, CHECK_XFS_HEALTH,
			  "the kernel has marked as sick: %s (the kernel scrub checks it)", sb.buf);
	strbuf_release(&sb);
}

/* Hold a finding with the name the walk has for the inode now (dir NULL: none). */
static void defer_named(struct xfs_state *xs, uint64_t ino, struct dir_node *dir,
			const char *name, enum severity sev, const char *check, const char *file,
			int line, const char *fmt, ...)
	__attribute__((format(printf, 9, 10)));

static void defer_named(struct xfs_state *xs, uint64_t ino, struct dir_node *dir,
			const char *name, enum severity sev, const char *check, const char *file,
			int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	defer_v(xs, ino, sev, check, false, false, dir, name, file, line, fmt, ap);
	va_end(ap);
}

void xfs_health_take(struct scrub_ctx *ctx, uint64_t ino, uint32_t sick, uint32_t checked,
		     struct dir_node *dir, const char *name)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct strbuf sb = STRBUF_INIT;

	if (!inoset_test_and_set(xs->health_seen, 0, ino) && health_count(xs, sick, checked, &sb))
		defer_named(xs, ino, dir, name, SEV_ERROR, CHECK_XFS_HEALTH, __FILE__, __LINE__,
			    "the kernel found this inode's metadata corrupt while using it: %s",
			    sb.buf);
	strbuf_release(&sb);
}

static uint64_t ts_ns(int64_t sec, uint32_t nsec)
{
	return sec < 0 ? 0 : (uint64_t)sec * 1000000000ULL + nsec;
}

/* ---------------------------------------------------------------- orphans */

struct orphan {
	uint64_t ino;
	struct xfs_bulkstat bs;
};

struct orphan_run {
	struct scrub_ctx *ctx;
	pthread_mutex_t lock;
	struct orphan *v;
	size_t n, alloc;
	bool overflow;
	bool orphans;			/* every name was seen: look for orphans */
	uint64_t dev;
	atomic_int err;			/* first errno of INUMBERS, positive */
	atomic_ullong unreached;	/* allocated inodes INUMBERS gave, not reached */
	atomic_ullong requests;		/* BULKSTAT requests for them */
};

bool xfs_bs_changed_during_scan(const struct scrub_ctx *ctx, const struct xfs_bulkstat *bs)
{
	return ts_ns(bs->bs_ctime, bs->bs_ctime_nsec) >= ctx->changed_since_ns ||
	       ts_ns(bs->bs_btime, bs->bs_btime_nsec) >= ctx->changed_since_ns;
}

static void orphan_fn(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs, void *arg)
{
	struct orphan_run *or = arg;

	if (!bs->bs_nlink || backend_reached(ctx, or->dev, bs->bs_ino) ||
	    xfs_bs_changed_during_scan(ctx, bs))
		return;
	pthread_mutex_lock(&or->lock);
	if (or->n == MAX_ORPHANS) {
		or->overflow = true;
	} else {
		if (or->n == or->alloc) {
			or->alloc = or->alloc ? 2 * or->alloc : 16;
			or->v = xrealloc(or->v, or->alloc * sizeof(*or->v));
		}
		or->v[or->n++] = (struct orphan){ .ino = bs->bs_ino, .bs = *bs };
	}
	pthread_mutex_unlock(&or->lock);
}

/* Has the walk taken ino's health flags (or is that phase 2's, kernel scrub)? */
static bool health_known(struct xfs_state *xs, uint64_t ino)
{
	return !xs->walk_health || inoset_test(xs->health_seen, 0, ino);
}

/*
 * An inode BULKSTAT'ed after the walk: its health flags if the walk did
 * not take them, an orphan candidate if it was not reached.
 */
static void after_fn(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs, void *arg)
{
	struct orphan_run *or = arg;
	struct xfs_state *xs = xfs_state(ctx);

	if (!health_known(xs, bs->bs_ino)) {
		atomic_fetch_add(&xs->health_after, 1);
		xfs_health_take(ctx, bs->bs_ino, bs->bs_sick, bs->bs_checked, NULL, NULL);
	}
	if (or->orphans)
		orphan_fn(ctx, bs, or);
}

/*
 * The inodes of mask (bits of the chunk at start) one by one; a damaged
 * one is said (xfs.bulkstat) where phase 2 did not BULKSTAT every inode.
 */
static void after_one_by_one(struct orphan_run *or, uint32_t agno, uint64_t start,
			     uint64_t mask)
{
	struct xfs_state *xs = xfs_state(or->ctx);

	for (unsigned k = 0; k < CHUNK_INODES; k++) {
		struct xfs_bulkstat one;
		int ret;

		if (!((mask >> k) & 1))
			continue;
		ret = xfs_bulkstat_one(xs, start + k, &one);
		if (ret == 1)
			after_fn(or->ctx, &one, or);
		else if (ret < 0 && xs->walk_health && errno_is_corruption(-ret))
			bulkstat_corrupt(or->ctx, agno, start + k, -ret, false);
	}
}

/*
 * The allocated inodes of one INUMBERS record (an inode chunk) that the
 * walk did not reach, or whose health flags it did not take, BULKSTAT'ed
 * in one request over the window from the first to the last of them,
 * each then after_fn's.  A window BULKSTAT fails on, or that stops short
 * (a damaged inode stops it), is asked inode by inode for the rest.
 */
static void chunk_unreached(struct orphan_run *or, uint32_t agno, struct xfs_bulkstat_req *req,
			    const struct xfs_inumbers *g)
{
	struct scrub_ctx *ctx = or->ctx;
	struct xfs_state *xs = xfs_state(ctx);
	uint64_t mask = 0, unreached = 0, got = 0;
	unsigned first, last;

	for (unsigned k = 0; k < CHUNK_INODES; k++) {
		uint64_t ino = g->xi_startino + k;

		if (!((g->xi_allocmask >> k) & 1))
			continue;
		if (or->orphans && !backend_reached(ctx, or->dev, ino))
			unreached |= 1ULL << k;
		if (((unreached >> k) & 1) || !health_known(xs, ino))
			mask |= 1ULL << k;
	}
	if (!mask)
		return;
	first = (unsigned)__builtin_ctzll(mask);
	last = 63 - (unsigned)__builtin_clzll(mask);
	atomic_fetch_add(&or->unreached, (unsigned long long)__builtin_popcountll(unreached));
	atomic_fetch_add(&or->requests, 1);
	memset(&req->hdr, 0, sizeof(req->hdr));
	req->hdr.ino = g->xi_startino + first;
	req->hdr.icount = last - first + 1;
	if (xfs_bulkstat_req(xs, req) < 0) {
		after_one_by_one(or, agno, g->xi_startino, mask);
		return;
	}
	for (uint32_t i = 0; i < req->hdr.ocount; i++) {
		uint64_t k = req->bulkstat[i].bs_ino - g->xi_startino;

		if (k < CHUNK_INODES && ((mask >> k) & 1)) {
			got |= 1ULL << k;
			after_fn(ctx, &req->bulkstat[i], or);
		}
	}
	/* Fewer than asked for: the end of the filesystem, or damage. */
	if (req->hdr.ocount < last - first + 1 && (mask & ~got))
		after_one_by_one(or, agno, g->xi_startino, mask & ~got);
}

static void inumbers_ag_fn(void *arg, uint32_t agno, unsigned thread)
{
	struct orphan_run *or = arg;
	struct xfs_state *xs = xfs_state(or->ctx);
	struct xfs_inumbers_req *in = xcalloc(1, XFS_INUMBERS_REQ_SIZE(INUMBERS_BATCH));
	struct xfs_bulkstat_req *req = xcalloc(1, XFS_BULKSTAT_REQ_SIZE(CHUNK_INODES));

	(void)thread;
	in->hdr.flags = XFS_BULK_IREQ_AGNO;
	in->hdr.agno = agno;
	in->hdr.ino = 0;	/* the AG's first inode */
	while (!scrub_should_stop(or->ctx)) {
		in->hdr.icount = INUMBERS_BATCH;
		if (ioctl(xs->fd, XFS_IOC_INUMBERS, in) < 0) {
			int zero = 0, err = errno;

			/*
			 * Damage stops it, as it stops BULKSTAT: phase 2 said so
			 * if it BULKSTAT'ed every inode (kernel scrub), else here.
			 */
			if (!errno_is_corruption(err))
				atomic_compare_exchange_strong(&or->err, &zero, err);
			else if (xs->walk_health)
				bulkstat_corrupt(or->ctx, agno, in->hdr.ino, err, true);
			break;
		}
		if (!in->hdr.ocount)
			break;
		for (uint32_t i = 0; i < in->hdr.ocount; i++)
			chunk_unreached(or, agno, req, &in->inumbers[i]);
	}
	free(req);
	free(in);
}

/*
 * The orphan candidates, and the health flags of the inodes the walk did
 * not BULKSTAT: INUMBERS gives each AG's inode chunks and which of their
 * inodes are allocated, from the inode btree alone, so only those
 * allocated inodes are BULKSTAT'ed, not all of them (a BULKSTAT
 * instantiates every inode it returns in the kernel: most of its cost).
 * FSCRUB_DEBUG_NO_BULK=1 BULKSTATs them all, as before.
 */
static int after_walk_collect(struct scrub_ctx *ctx, struct orphan_run *or, const char **what)
{
	int ret;

	*what = "XFS_IOC_BULKSTAT";
	if (getenv("FSCRUB_DEBUG_NO_BULK"))
		return xfs_bulkstat_each(ctx, after_fn, or);
	*what = "XFS_IOC_INUMBERS";
	ret = xfs_for_each_ag(ctx, inumbers_ag_fn, or);
	if (ret < 0)
		return ret;
	if (or->orphans)
		report_verbose(ctx, "Phase 3: orphans: %llu allocated inodes not reached by the "
			       "walk (INUMBERS), BULKSTAT'ed in %llu requests",
			       (unsigned long long)atomic_load(&or->unreached),
			       (unsigned long long)atomic_load(&or->requests));
	return -atomic_load(&or->err);
}

static void report_orphan(struct scrub_ctx *ctx, struct xfs_state *xs,
			  struct xfs_names *second, const struct orphan *o, bool quiet)
{
	const struct xfs_named *n = xfs_names_find(second, o->ino);
	struct xfs_bulkstat now;

	if (n && n->found) {
		str_changed(ctx, CHECK_XFS_ORPHAN, n->dir, n->name, o->ino,
			    "not reached by the walk, but by a second one: moved during the scan");
		return;
	}
	if (xfs_bulkstat_one(xs, o->ino, &now) != 1 || now.bs_gen != o->bs.bs_gen ||
	    !now.bs_nlink || ts_ns(now.bs_ctime, now.bs_ctime_nsec) !=
	    ts_ns(o->bs.bs_ctime, o->bs.bs_ctime_nsec)) {
		str_changed(ctx, CHECK_XFS_ORPHAN, NULL, NULL, o->ino,
			    "unreached inode freed or changed since");
		return;
	}
	if (!quiet) {
		str_changed(ctx, CHECK_XFS_ORPHAN, NULL, NULL, o->ino,
			    "not reached by the walks looking again either, but each of them "
			    "saw directories change: moved during the scan, or an orphan");
		return;
	}
	str_error(ctx, CHECK_XFS_ORPHAN, NULL, NULL, o->ino,
		  "orphaned inode: allocated with %u link%s, but no directory entry reaches it "
		  "(%s, %llu bytes, owner uid %u gid %u)", now.bs_nlink,
		  now.bs_nlink == 1 ? "" : "s", inode_mode_name(now.bs_mode),
		  (unsigned long long)now.bs_size, now.bs_uid, now.bs_gid);
}

/* ------------------------------------------------------- reverse mappings */

/* What GETFSMAP gave: counts only (the records are compared as they come). */
struct rmap_list {
	size_t n;			/* data fork records, or free extents */
	uint64_t free_bytes;		/* FMR_OWN_FREE on the data device */
};

bool xfs_is_data_rmap(const struct fsmap *m)
{
	return !(m->fmr_flags & (FMR_OF_SPECIAL_OWNER | FMR_OF_ATTR_FORK | FMR_OF_EXTENT_MAP));
}

/* RMAP_FREE: without the rmapbt, a file's block that GETFSMAP calls free. */
enum rmap_kind { RMAP_MISSING, RMAP_EXTRA, RMAP_FREE };

struct rmap_suspect {
	enum rmap_kind kind;
	uint64_t ino, logical, phys, len;
};

/*
 * Does fd map the byte at logical to device byte phys (fresh, synced)?
 * 1 yes, 0 no, -1 the map cannot be read (reported by the extent checks).
 */
static int fresh_fiemap_maps(int fd, uint64_t logical, uint64_t phys)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext[1];
	} m;

	memset(&m, 0, sizeof(m));
	m.fm.fm_start = logical;
	m.fm.fm_length = 1;
	m.fm.fm_flags = FIEMAP_FLAG_SYNC;
	m.fm.fm_extent_count = 1;
	if (ioctl(fd, FS_IOC_FIEMAP, &m.fm) < 0)
		return -1;
	if (m.fm.fm_mapped_extents != 1)
		return 0;
	const struct fiemap_extent *e = &m.ext[0];

	return !(e->fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC)) &&
	       e->fe_logical <= logical && logical < e->fe_logical + e->fe_length &&
	       e->fe_physical + (logical - e->fe_logical) == phys;
}

struct rmap_probe {
	uint64_t ino, logical, phys;
	bool found;
};

static void probe_rmap(const struct fsmap *m, void *arg)
{
	struct rmap_probe *p = arg;

	if (xfs_is_data_rmap(m) && m->fmr_owner == p->ino && m->fmr_physical <= p->phys &&
	    p->phys < m->fmr_physical + m->fmr_length &&
	    m->fmr_offset + (p->phys - m->fmr_physical) == p->logical)
		p->found = true;
}

static void probe_free(const struct fsmap *m, void *arg)
{
	struct rmap_probe *p = arg;

	if ((m->fmr_flags & FMR_OF_SPECIAL_OWNER) && m->fmr_owner == FMR_OWN_FREE &&
	    m->fmr_physical <= p->phys && p->phys < m->fmr_physical + m->fmr_length)
		p->found = true;
}

/*
 * GETFSMAP of device byte phys, now, through probe: 1 found, 0 not, -1
 * the query failed (a damaged btree on the way, or no memory).
 * FSCRUB_DEBUG_FRESH_FSMAP_FAILS: every such query fails (for the tests).
 */
static int fresh_query(int fd, uint32_t dev, uint64_t phys,
		       void (*probe)(const struct fsmap *, void *), struct rmap_probe *p)
{
	if (getenv("FSCRUB_DEBUG_FRESH_FSMAP_FAILS") ||
	    fsmap_query(fd, dev, phys, phys, probe, p) < 0)
		return -1;
	return p->found;
}

/* Is device byte phys free, now (GETFSMAP, from the bnobt)?  As fresh_query(). */
static int fresh_free(int fd, uint32_t dev, uint64_t phys)
{
	struct rmap_probe p = { .phys = phys };

	return fresh_query(fd, dev, phys, probe_free, &p);
}

/* Does a data-fork rmap record of ino map device byte phys to logical, now?  As fresh_query(). */
static int fresh_rmap_maps(int fd, uint32_t dev, uint64_t ino, uint64_t logical, uint64_t phys)
{
	struct rmap_probe p = { .ino = ino, .logical = logical, .phys = phys };

	return fresh_query(fd, dev, phys, probe_rmap, &p);
}

int xfs_open_by_ino(struct xfs_state *xs, uint64_t ino, uint32_t gen)
{
	xfs_handle_t h;
	uint32_t hlen = sizeof(h);
	struct xfs_fsop_handlereq req = {
		.fd = (uint32_t)xs->fd, .ohandle = &h, .ohandlen = &hlen,
	};
	int fd;

	memset(&h, 0, sizeof(h));
	if (ioctl(xs->fd, XFS_IOC_FD_TO_HANDLE, &req) < 0)
		return -errno;
	memset(&h.ha_fid, 0, sizeof(h.ha_fid));
	h.ha_fid.fid_len = sizeof(xfs_fid_t) - sizeof(h.ha_fid.fid_len);
	h.ha_fid.fid_gen = gen;
	h.ha_fid.fid_ino = ino;
	memset(&req, 0, sizeof(req));
	req.oflags = O_RDONLY | O_NOATIME | O_CLOEXEC;
	req.ihandle = &h;
	req.ihandlen = sizeof(h);
	fd = ioctl(xs->fd, XFS_IOC_OPEN_BY_HANDLE, &req);
	return fd < 0 ? -errno : fd;
}

/*
 * Is the mismatch still there?  1 yes, 0 no (a race), -1 changed, -2 the
 * file's map cannot be read now (the extent checks say so).
 */
static int rmap_recheck(struct scrub_ctx *ctx, struct xfs_state *xs, uint32_t dev,
			const struct rmap_suspect *s)
{
	struct xfs_bulkstat bs, after;
	int fd, still;

	if (xfs_bulkstat_one(xs, s->ino, &bs) != 1 || xfs_bs_changed_during_scan(ctx, &bs))
		return -1;
	fd = xfs_open_by_ino(xs, s->ino, bs.bs_gen);
	if (fd < 0)
		return -1;
	int ext = fresh_fiemap_maps(fd, s->logical, s->phys);
	int rmap = s->kind == RMAP_FREE ? fresh_free(xs->fd, dev, s->phys) :
		   fresh_rmap_maps(xs->fd, dev, s->ino, s->logical, s->phys);

	close(fd);
	if (ext < 0)
		return -2;
	if (rmap < 0) {
		/*
		 * A query that fails tells nothing about the record: the
		 * sweep's reading stands (the byte free, the record there or
		 * missing), judged with the file's fresh map and its ctime as
		 * any other.  Taking it for "changed" excused the damage that
		 * made the btree unreadable on the way.
		 */
		report_verbose(ctx, "Phase 3: inode %llu: GETFSMAP failed at the second look; the "
			       "first reading of the reverse mappings stands",
			       (unsigned long long)s->ino);
		rmap = s->kind != RMAP_MISSING;
	}
	/* For RMAP_FREE, rmap: GETFSMAP calls the byte free. */
	still = s->kind == RMAP_EXTRA ? rmap && !ext : ext && (s->kind == RMAP_FREE) == rmap;
	if (xfs_bulkstat_one(xs, s->ino, &after) != 1 ||
	    ts_ns(after.bs_ctime, after.bs_ctime_nsec) != ts_ns(bs.bs_ctime, bs.bs_ctime_nsec))
		return -1;
	return still;
}

struct rmap_check {
	struct rmap_list rl;
	size_t nr_extents;		/* the walk's extents compared */
	struct rmap_suspect *sus;
	size_t nr_sus;
	bool overflow;
	uint32_t dev;
};

static void add_suspect(struct rmap_check *rc, enum rmap_kind kind, uint64_t ino,
			uint64_t logical, uint64_t phys, uint64_t len)
{
	/* One per inode and kind is enough to name the damage: the first in the file. */
	for (size_t i = 0; i < rc->nr_sus; i++)
		if (rc->sus[i].ino == ino && rc->sus[i].kind == kind) {
			if (logical < rc->sus[i].logical)
				rc->sus[i] = (struct rmap_suspect){ kind, ino, logical, phys, len };
			return;
		}
	if (rc->nr_sus == MAX_RMAP_SUSPECTS) {
		rc->overflow = true;
		return;
	}
	rc->sus = xrealloc(rc->sus, (rc->nr_sus + 1) * sizeof(*rc->sus));
	rc->sus[rc->nr_sus++] = (struct rmap_suspect){ kind, ino, logical, phys, len };
}

/*
 * The comparison, in device order: the walk's extents (sorted by device
 * offset, backend_extents_by_phys()) against GETFSMAP's records as they
 * come, which are in device order too, so that neither side is copied or
 * sorted again (a copy of each by owner took 64 bytes per extent, a third
 * of them for qsort()'s own copy).  A mapping is covered when every byte
 * of it is mapped by the other side to the same device byte for the same
 * inode: by the items of the other side with its inode and its distance
 * between device and file offset that overlap it.  Each side's items that
 * may still overlap what comes ("active") are kept with how far from
 * their start they are covered; an item that comes from the other side
 * past that point, or the sweep passing its end, leaves a gap there: a
 * suspect (RMAP_MISSING for an extent of the walk, RMAP_EXTRA for a
 * record), if its inode is a file the check is for (xs->files).  The
 * others, and nothing of an inode changed during the scan, only cover.
 */
struct sweep_item {
	uint64_t ino, off, phys, len;	/* bytes: file offset, device offset */
	uint64_t pos;			/* [phys, pos) is covered */
	uint32_t next;			/* the hash chain, SWEEP_NONE at its end */
	bool rec;			/* a reverse mapping, else the walk's extent */
	bool check;			/* a gap is a suspect */
};

#define SWEEP_NONE UINT32_MAX
/* Active items kept before the passed ones are dropped, at least. */
#define SWEEP_MIN 1024

struct rmap_sweep {
	struct rmap_check *rc;
	struct inoset *files;
	struct scrub_ctx *ctx;
	size_t next, nr;		/* the walk's extents: the next to enter, all */
	struct sweep_item *v;		/* active items */
	size_t n, limit;		/* limit: drop the passed ones at this many */
	uint32_t *head;			/* v hashed by inode, chained through next */
	size_t nhead;			/* a power of two */
};

static size_t sweep_hash(const struct rmap_sweep *sw, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ULL) >> 32) & (sw->nhead - 1);
}

static void sweep_gap(struct rmap_sweep *sw, struct sweep_item *it)
{
	uint64_t end = it->phys + it->len;

	if (it->check && it->pos < end)
		add_suspect(sw->rc, it->rec ? RMAP_EXTRA : RMAP_MISSING, it->ino,
			    it->off + (it->pos - it->phys), it->pos, end - it->pos);
	it->pos = end;
}

/*
 * Drop the items that end at or before pos (nothing that comes can
 * overlap them), saying their gaps; room for twice as many as are left.
 * Amortised: each item is looked at a constant number of times.
 */
static void sweep_retire(struct rmap_sweep *sw, uint64_t pos)
{
	size_t w = 0;

	for (size_t i = 0; i < sw->n; i++) {
		if (sw->v[i].phys + sw->v[i].len <= pos)
			sweep_gap(sw, &sw->v[i]);
		else
			sw->v[w++] = sw->v[i];
	}
	sw->n = w;
	if (2 * w > sw->limit || !sw->v) {
		sw->limit = 2 * w > SWEEP_MIN ? 2 * w : SWEEP_MIN;
		sw->v = xrealloc(sw->v, sw->limit * sizeof(*sw->v));
		sw->nhead = 1;
		while (sw->nhead < 2 * sw->limit)
			sw->nhead <<= 1;
		free(sw->head);
		sw->head = xmalloc(sw->nhead * sizeof(*sw->head));
	}
	for (size_t h = 0; h < sw->nhead; h++)
		sw->head[h] = SWEEP_NONE;
	for (size_t i = 0; i < sw->n; i++) {
		size_t h = sweep_hash(sw, sw->v[i].ino);

		sw->v[i].next = sw->head[h];
		sw->head[h] = (uint32_t)i;
	}
}

/* y enters at its device offset: it and the other side's items cover each other. */
static void sweep_enter(struct rmap_sweep *sw, struct sweep_item y)
{
	uint64_t y_end = y.phys + y.len;
	size_t h;

	if (!y.len)
		return;
	if (sw->n == sw->limit)
		sweep_retire(sw, y.phys);
	y.pos = y.phys;
	h = sweep_hash(sw, y.ino);
	for (uint32_t i = sw->head[h]; i != SWEEP_NONE; i = sw->v[i].next) {
		struct sweep_item *z = &sw->v[i];
		uint64_t z_end = z->phys + z->len;

		if (z->ino != y.ino || z->rec == y.rec || z->phys - z->off != y.phys - y.off)
			continue;
		/* z started at or before y: it covers y from y's start to its end. */
		if (z_end > y.pos)
			y.pos = z_end < y_end ? z_end : y_end;
		/* y covers z from y's start, if z is covered up to there. */
		if (y.phys > z->pos)
			sweep_gap(sw, z);
		else if (z->pos < z_end && y_end > z->pos)
			z->pos = y_end < z_end ? y_end : z_end;
	}
	y.next = sw->head[h];
	sw->head[h] = (uint32_t)sw->n;
	sw->v[sw->n++] = y;
}

/* The walk's extents that start before pos enter. */
static void sweep_extents_before(struct rmap_sweep *sw, uint64_t pos)
{
	for (; sw->next < sw->nr; sw->next++) {
		struct backend_extent x = backend_extent_at(sw->ctx, sw->next);

		if (x.phys >= pos)
			break;
		if (x.recent)
			continue;
		sw->rc->nr_extents++;
		sweep_enter(sw, (struct sweep_item){
			.ino = x.ino, .off = x.logical, .phys = x.phys, .len = x.len,
			.check = inoset_test(sw->files, 0, x.ino) });
	}
}

static void sweep_rmap(const struct fsmap *m, void *arg)
{
	struct rmap_sweep *sw = arg;

	if ((m->fmr_flags & FMR_OF_SPECIAL_OWNER) && m->fmr_owner == FMR_OWN_FREE)
		sw->rc->rl.free_bytes += m->fmr_length;
	if (!xfs_is_data_rmap(m))
		return;
	sw->rc->rl.n++;
	sweep_extents_before(sw, m->fmr_physical);
	sweep_enter(sw, (struct sweep_item){
		.ino = m->fmr_owner, .off = m->fmr_offset, .phys = m->fmr_physical,
		.len = m->fmr_length, .rec = true,
		.check = inoset_test(sw->files, 0, m->fmr_owner) });
}

/*
 * Without the rmapbt: each extent of the walk against the free extent
 * that is the first to end after its start (GETFSMAP's free extents come
 * in device order, disjoint, as do the walk's extents); overlaps go to
 * rc->sus.
 */
static void sweep_free(const struct fsmap *m, void *arg)
{
	struct rmap_sweep *sw = arg;
	uint64_t f = m->fmr_physical, f_end = m->fmr_physical + m->fmr_length;

	if (!(m->fmr_flags & FMR_OF_SPECIAL_OWNER) || m->fmr_owner != FMR_OWN_FREE)
		return;
	sw->rc->rl.free_bytes += m->fmr_length;
	sw->rc->rl.n++;
	for (; sw->next < sw->nr; sw->next++) {
		struct backend_extent x = backend_extent_at(sw->ctx, sw->next);
		uint64_t s, e;

		if (x.phys >= f_end)
			break;
		if (x.recent)
			continue;
		sw->rc->nr_extents++;
		if (!inoset_test(sw->files, 0, x.ino) || x.phys + x.len <= f)
			continue;
		s = f > x.phys ? f : x.phys;
		e = f_end < x.phys + x.len ? f_end : x.phys + x.len;
		add_suspect(sw->rc, RMAP_FREE, x.ino, x.logical + (s - x.phys), s, e - s);
	}
}

/* A file's blocks that the bnobt calls free, by AG and block too. */
static void report_free_used(struct scrub_ctx *ctx, const struct xfs_state *xs,
			     const struct rmap_suspect *s, const struct dir_node *dir,
			     const char *name)
{
	uint64_t bsize = xs->geo.blocksize, first = s->phys / bsize;
	uint64_t last = (s->phys + s->len - 1) / bsize;
	uint32_t ag = (uint32_t)(first / xs->geo.agblocks);
	uint64_t agbno = first % xs->geo.agblocks;
	char blocks[48];

	if (last == first)
		snprintf(blocks, sizeof(blocks), "block %llu", (unsigned long long)agbno);
	else
		snprintf(blocks, sizeof(blocks), "blocks %llu-%llu", (unsigned long long)agbno,
			 (unsigned long long)(agbno + last - first));
	str_error_range(ctx, CHECK_XFS_SPACE, dir, name, s->ino, s->logical, s->len,
			"file offset %llu maps device bytes %llu-%llu (AG %u, %s), which the "
			"bnobt calls free", (unsigned long long)s->logical,
			(unsigned long long)s->phys, (unsigned long long)(s->phys + s->len - 1),
			ag, blocks);
}

static void report_rmap(struct scrub_ctx *ctx, struct xfs_state *xs, struct rmap_check *rc,
			struct xfs_names *names)
{
	for (size_t i = 0; i < rc->nr_sus && !scrub_should_stop(ctx); i++) {
		const struct rmap_suspect *s = &rc->sus[i];
		const struct xfs_named *n = xfs_names_find(names, s->ino);
		const struct dir_node *dir = n && n->found ? n->dir : NULL;
		const char *name = n && n->found ? n->name : NULL;
		int still = rmap_recheck(ctx, xs, rc->dev, s);
		const char *check = s->kind == RMAP_MISSING ? CHECK_XFS_RMAP_MISSING :
				    s->kind == RMAP_EXTRA ? CHECK_XFS_RMAP_EXTRA : CHECK_XFS_SPACE;

		if (still == -2) {
			report_verbose(ctx, "Phase 3: inode %llu: its map cannot be read: reverse "
				       "mappings not compared", (unsigned long long)s->ino);
		} else if (still <= 0) {
			str_changed(ctx, check, dir, name, s->ino, "%s at file offset %llu",
				    s->kind == RMAP_FREE ? "free space" : "reverse mapping",
				    (unsigned long long)s->logical);
		} else if (s->kind == RMAP_FREE) {
			report_free_used(ctx, xs, s, dir, name);
		} else if (still && s->kind == RMAP_MISSING) {
			str_error_range(ctx, check, dir, name, s->ino, s->logical, s->len,
					"file offset %llu maps device bytes %llu-%llu, but no "
					"reverse mapping record of this inode says so",
					(unsigned long long)s->logical, (unsigned long long)s->phys,
					(unsigned long long)(s->phys + s->len - 1));
		} else if (still) {
			str_error_range(ctx, check, dir, name, s->ino, s->logical, s->len,
					"a reverse mapping record gives device bytes %llu-%llu to "
					"this inode at file offset %llu, but the file does not map "
					"them", (unsigned long long)s->phys,
					(unsigned long long)(s->phys + s->len - 1),
					(unsigned long long)s->logical);
		}
	}
	if (rc->overflow)
		str_info(ctx, CHECK_XFS_RMAP_MISSING, NULL, NULL, 0,
			 "more than %d reverse mapping mismatches: only the first are examined",
			 MAX_RMAP_SUSPECTS);
}

static int suspect_cmp(const void *a, const void *b)
{
	const struct rmap_suspect *x = a, *y = b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->logical < y->logical ? -1 : x->logical > y->logical;
}

/* The walk's extents [first, last) (by device offset) against GETFSMAP's [lo, hi]. */
static int sweep_range(struct scrub_ctx *ctx, struct xfs_state *xs, bool rmapbt,
		       struct rmap_check *rc, size_t first, size_t last, uint64_t lo, uint64_t hi)
{
	struct rmap_sweep sw = {
		.rc = rc, .files = xs->files, .ctx = ctx, .next = first, .nr = last,
	};
	int ret;

	sweep_retire(&sw, 0);
	ret = fsmap_query(xs->fd, rc->dev, lo, hi, rmapbt ? sweep_rmap : sweep_free, &sw);
	if (ret >= 0 && rmapbt) {
		sweep_extents_before(&sw, UINT64_MAX);
		sweep_retire(&sw, UINT64_MAX);
	}
	/* Without the rmapbt, those past the last free extent are counted too. */
	for (; ret >= 0 && !rmapbt && sw.next < sw.nr; sw.next++)
		rc->nr_extents += !backend_extent_at(ctx, sw.next).recent;
	free(sw.v);
	free(sw.head);
	return ret;
}

/*
 * The sweep AG by AG, the AGs in parallel (xfs_for_each_ag(): -j
 * threads): GETFSMAP's records and free extents never leave their AG, and
 * where none of the walk's extents does either, each AG's records meet
 * only its own extents.  A part per AG, merged in AG (device) order.
 */
struct rmap_ags {
	struct scrub_ctx *ctx;
	struct xfs_state *xs;
	bool rmapbt;
	uint64_t agbytes;
	size_t *first;			/* agcount + 1: each AG's first extent, then all */
	struct rmap_check *part;
	int *err;
};

static void rmap_ag(void *arg, uint32_t ag, unsigned thread)
{
	struct rmap_ags *ra = arg;
	bool last = ag + 1 == ra->xs->geo.agcount;

	(void)thread;
	/* The last AG's part takes in whatever lies past the filesystem's end. */
	ra->err[ag] = sweep_range(ra->ctx, ra->xs, ra->rmapbt, &ra->part[ag], ra->first[ag],
				  ra->first[ag + 1], ag * ra->agbytes,
				  last ? UINT64_MAX : (ag + 1) * ra->agbytes - 1);
}

/*
 * Each AG's first extent in the walk's n (sorted by device offset) into
 * first[0 .. nags]; false if an extent runs past the end of its AG.
 */
static bool ag_slices(const struct scrub_ctx *ctx, size_t n, uint64_t agbytes, uint32_t nags,
		      size_t *first)
{
	uint32_t ag = 0;

	first[0] = 0;
	for (size_t i = 0; i < n; i++) {
		struct backend_extent x = backend_extent_at(ctx, i);

		if (x.len && x.phys / agbytes != (x.phys + x.len - 1) / agbytes)
			return false;
		while (ag + 1 < nags && x.phys >= (uint64_t)(ag + 1) * agbytes)
			first[++ag] = i;
	}
	while (ag < nags)
		first[++ag] = n;
	return true;
}

/* The sweep by AG (rmap_ag()); -EXDEV, nothing swept, if an extent leaves its AG. */
static int sweep_by_ag(struct scrub_ctx *ctx, struct xfs_state *xs, bool rmapbt,
		       struct rmap_check *rc, size_t n)
{
	uint32_t nags = xs->geo.agcount;
	struct rmap_ags ra = {
		.ctx = ctx, .xs = xs, .rmapbt = rmapbt,
		.agbytes = (uint64_t)xs->geo.agblocks * xs->geo.blocksize,
		.first = xcalloc(nags + 1, sizeof(*ra.first)),
	};
	int ret;

	if (!ag_slices(ctx, n, ra.agbytes, nags, ra.first)) {
		free(ra.first);
		return -EXDEV;
	}
	ra.part = xcalloc(nags, sizeof(*ra.part));
	ra.err = xcalloc(nags, sizeof(*ra.err));
	for (uint32_t ag = 0; ag < nags; ag++)
		ra.part[ag].dev = rc->dev;
	ret = xfs_for_each_ag(ctx, rmap_ag, &ra);
	for (uint32_t ag = 0; ag < nags; ag++) {
		const struct rmap_check *p = &ra.part[ag];

		if (!ret)
			ret = ra.err[ag];
		rc->rl.n += p->rl.n;
		rc->rl.free_bytes += p->rl.free_bytes;
		rc->nr_extents += p->nr_extents;
		rc->overflow |= p->overflow;
		for (size_t i = 0; i < p->nr_sus; i++)
			add_suspect(rc, p->sus[i].kind, p->sus[i].ino, p->sus[i].logical,
				    p->sus[i].phys, p->sus[i].len);
		free(p->sus);
	}
	free(ra.first);
	free(ra.part);
	free(ra.err);
	return ret;
}

static void fsmap_ignore(const struct fsmap *r, void *arg)
{
	(void)r;
	(void)arg;
}

/*
 * GETFSMAP failed.  EUCLEAN or EIO is the kernel's verifier refusing a
 * block of the free-space, reverse-mapping or reference count btrees:
 * damage, not a failure to check, once a second GETFSMAP over the whole
 * device says the same; a second one that reads through saw a change.
 */
static void rmap_refused(struct scrub_ctx *ctx, const struct rmap_check *rc, int ret)
{
	if (ret != -EUCLEAN && ret != -EIO) {
		report_operational(ctx, NULL, NULL, -ret, "FS_IOC_GETFSMAP");
		return;
	}
	ret = fsmap_query(ctx->mnt_fd, rc->dev, 0, UINT64_MAX, fsmap_ignore, NULL);
	if (ret == -EUCLEAN || ret == -EIO)
		str_error(ctx, CHECK_XFS_ONDISK, NULL, NULL, 0,
			  "GETFSMAP: %s, read twice: the kernel refuses a block of the "
			  "free-space, reverse-mapping or reference count btrees", strerror(-ret));
	else if (ret == 0)
		str_changed(ctx, CHECK_XFS_ONDISK, NULL, NULL, 0,
			    "GETFSMAP failed, then read through when asked again");
	else
		report_operational(ctx, NULL, NULL, -ret, "FS_IOC_GETFSMAP");
}

/* Read GETFSMAP and compare; false if it does not apply here. */
static bool rmap_collect(struct scrub_ctx *ctx, struct xfs_state *xs, struct rmap_check *rc)
{
	bool rmapbt = xs->geo.flags & XFS_FSOP_GEOM_FLAGS_RMAPBT;
	size_t n;
	int ret = -EXDEV;

	if (!ctx->dev_size || xs->geo.rtblocks) {
		report_verbose(ctx, "Phase 3: FIEMAP offsets are not offsets on the data device "
			       "alone: extents are not checked against GETFSMAP");
		return false;
	}
	rc->dev = fsmap_dev(ctx->root_stx.stx_dev_major, ctx->root_stx.stx_dev_minor);
	n = backend_extents_by_phys(ctx);
	if (xs->geo.agblocks && xs->geo.agcount > 1)
		ret = sweep_by_ag(ctx, xs, rmapbt, rc, n);
	if (ret == -EXDEV)
		ret = sweep_range(ctx, xs, rmapbt, rc, 0, n, 0, UINT64_MAX);
	/* Reported by kind, then inode and file offset, whatever the device order. */
	sort_items(rc->sus, rc->nr_sus, sizeof(*rc->sus), suspect_cmp);
	if (ret < 0) {
		rmap_refused(ctx, rc, ret);
		return false;
	}
	if (!rmapbt) {
		report_verbose(ctx, "Phase 3: no reverse mapping btree: %zu data extents against "
			       "%zu free extents: %zu to look at again", rc->nr_extents, rc->rl.n,
			       rc->nr_sus);
		return true;
	}
	report_verbose(ctx, "Phase 3: %zu data extents against %zu reverse mappings: %zu to "
		       "look at again", rc->nr_extents, rc->rl.n, rc->nr_sus);
	return true;
}

static void fsmap_free_space(struct scrub_ctx *ctx, struct xfs_state *xs,
			     const struct rmap_check *rc)
{
	uint64_t ags = 0;

	for (uint32_t ag = 0; ag < xs->geo.agcount; ag++)
		ags += xs->ags[ag].ag_freeblks;
	str_info(ctx, CHECK_XFS_FSMAP_COUNTS, NULL, NULL, 0,
		 "free space: GETFSMAP %llu blocks, AG headers %llu blocks (with free lists and "
		 "reserves), statfs %llu blocks",
		 (unsigned long long)(rc->rl.free_bytes / xs->geo.blocksize),
		 (unsigned long long)ags, (unsigned long long)ctx->svfs.f_bfree);
}

/* ------------------------------------------------------------- the checks */

/*
 * The second look's walks.  A file is missed by a walk when a directory
 * above it moves from the part not yet read to the part already read; the
 * move changes the ctime of the directory it left, so a walk that reads no
 * directory changed since it began cannot have been fooled that way.
 * Under steady renames every walk may be; after MAX_SECOND_WALKS such
 * walks an inode still not found is a race, not an orphan.
 */
#define MAX_SECOND_WALKS 3

struct second_walk {
	struct xfs_names *names;
	uint64_t since_ns;		/* the walk's start, less the ctime margin */
	atomic_bool dirs_changed;	/* it read a directory changed since then */
};

static void second_entry(struct scrub_ctx *ctx, void *arg, const struct backend_dir *d,
			 const struct backend_entry *e)
{
	struct second_walk *sw = arg;

	(void)ctx;
	xfs_names_note(sw->names, d->node, e->name, e->namelen, e->stx->stx_ino);
}

static void second_dir_end(struct scrub_ctx *ctx, void *arg, const struct backend_dir *d)
{
	struct second_walk *sw = arg;
	struct statx after;

	(void)ctx;
	if (stx_ns(&d->stx->stx_ctime) >= sw->since_ns ||
	    stx_get(d->fd, NULL, &after) < 0 || stx_ns(&after.stx_ctime) >= sw->since_ns)
		atomic_store(&sw->dirs_changed, true);
}

static const struct backend_walk second_walk_fns = {
	.entry = second_entry,
	.dir_end = second_dir_end,
};

static size_t names_not_found(const struct xfs_names *nl)
{
	size_t n = 0;

	for (size_t i = 0; i < nl->n; i++)
		n += !nl->v[i].found;
	return n;
}

/*
 * Walk again until every inode in second is found, or a walk read no
 * changed directory.  Returns the number of walks, 0 if none could start;
 * *quiet: the last one read no changed directory.
 */
static int second_walks(struct scrub_ctx *ctx, struct xfs_names *second, bool *quiet)
{
	struct second_walk sw = { .names = second };
	int walks = 0;

	*quiet = false;
	while (walks < MAX_SECOND_WALKS && !scrub_should_stop(ctx)) {
		struct timespec now;

		clock_gettime(CLOCK_REALTIME, &now);
		sw.since_ns = ((uint64_t)now.tv_sec - 1) * 1000000000ULL + (uint64_t)now.tv_nsec;
		atomic_store(&sw.dirs_changed, false);
		if (backend_walk_tree(ctx, &second_walk_fns, &sw) < 0)
			break;
		walks++;
		*quiet = !atomic_load(&sw.dirs_changed);
		if (*quiet || !names_not_found(second))
			break;
	}
	return walks;
}

/*
 * After the findings held back: the orphan candidates looked at (when
 * orphans), the reverse mappings and reference counts cross-checked, the
 * inodes they name looked for in a second walk.
 */
static void after_walk_checks(struct scrub_ctx *ctx, struct xfs_state *xs,
			      const struct orphan_run *or, bool orphans)
{
	struct rmap_check rc = { 0 };
	struct refc_check *refc;
	struct xfs_names second;
	bool rmap, quiet = true;

	xfs_names_init(&second);
	rmap = rmap_collect(ctx, xs, &rc);
	refc = xfs_refcount_collect(ctx, &second);
	for (size_t i = 0; i < or->n; i++)
		xfs_names_add(&second, or->v[i].ino);
	for (size_t i = 0; i < rc.nr_sus; i++)
		xfs_names_add(&second, rc.sus[i].ino);
	if (second.n) {
		xfs_names_finish(&second);
		int walks = second_walks(ctx, &second, &quiet);

		report_verbose(ctx, "Phase 3: %zu inodes looked for again in %d more walk%s: "
			       "%zu not found", second.n, walks, walks == 1 ? "" : "s",
			       names_not_found(&second));
		if (!walks) {
			report_operational(ctx, NULL, NULL, 0, "cannot start the second walk");
			orphans = rmap = false;
		}
	}
	for (size_t i = 0; orphans && i < or->n && !scrub_should_stop(ctx); i++)
		report_orphan(ctx, xs, &second, &or->v[i], quiet);
	if (or->overflow)
		str_info(ctx, CHECK_XFS_ORPHAN, NULL, NULL, 0,
			 "more than %d unreached inodes: only the first are examined", MAX_ORPHANS);
	if (rmap) {
		report_rmap(ctx, xs, &rc, &second);
		fsmap_free_space(ctx, xs, &rc);
	}
	xfs_refcount_report(refc, &second);
	xfs_names_release(ctx, &second);
	free(rc.sus);
}

void xfs_inodes_after_walk(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct orphan_run or = { .ctx = ctx, .dev = stx_devno(&ctx->root_stx) };
	bool orphans;

	pthread_mutex_init(&or.lock, NULL);
	orphans = or.orphans = ctx->reached && !atomic_load(&ctx->names_hidden);
	if (!orphans)
		report_verbose(ctx, "Phase 3: not every name was seen: no orphaned inode check");
	/* Before the findings held back: the health flags of what the walk did not see. */
	if ((orphans || xs->walk_health) && !scrub_should_stop(ctx)) {
		const char *what;
		int ret = after_walk_collect(ctx, &or, &what);

		if (ret < 0) {
			orphans = false;
			report_operational(ctx, NULL, NULL, -ret, "%s", what);
		}
	}
	if (xs->walk_health)
		report_verbose(ctx, "Phase 3: BULKSTAT health flags of %llu inodes (%llu of them "
			       "BULKSTAT'ed after the walk): %llu checked by the kernel since mount, "
			       "%llu marked sick", (unsigned long long)atomic_load(&xs->nr_bulkstat),
			       (unsigned long long)atomic_load(&xs->health_after),
			       (unsigned long long)atomic_load(&xs->nr_checked),
			       (unsigned long long)atomic_load(&xs->nr_sick));
	report_deferred(ctx, xs);
	if (!scrub_should_stop(ctx))
		after_walk_checks(ctx, xs, &or, orphans);
	free(or.v);
	pthread_mutex_destroy(&or.lock);
}
