/*
 * xfs_walkstat: phase 3, every inode the walk reaches against a BULKSTAT
 * of it (link count, mode, size); see xfs.h.
 *
 * A BULKSTAT of one inode costs three times a statx here: the kernel
 * looks the untrusted number up in the inode btree first.  So each walk
 * thread holds the entries of the directory it reads and, at the end of
 * the directory (or every XFS_WALKSTAT_MAX entries), asks for them in
 * order, one request per run of inode numbers inside a 64-inode window:
 * a directory's files usually share inode chunks, and one request then
 * answers for all of them.  BULKSTAT returns the allocated inodes from the
 * first number on, so a request for the window never returns more inodes
 * than the window holds.
 *
 * An entry the batch disagrees with is looked at again, one inode at a
 * time, exactly as before batching: a fresh BULKSTAT and a fresh statx by
 * name, and only a difference that survives both is an error.  An inode
 * BULKSTAT does not return has been freed since the walk's statx.
 *
 * Requests of the same kind serve the walk's bulk_inodes hook
 * (backend.h): the inode numbers of a getdents buffer, asked for before
 * its entries are visited, give the walk its inodes without a statx each.
 * There a request goes on past its window while the numbers come at most
 * XFS_WALKSTAT_GAP apart (a directory whose files were made one after the
 * other), up to 16 chunks: BULKSTAT reads ahead the clusters of all the
 * chunks of a request before it looks at the first inode, so they are
 * read side by side (a million files in 1000 directories: 16 611 requests
 * became 3 445, and phase 3 took 15 % less time).
 * An entry taken from such a record is not compared again (its stx is
 * the record); one opened all the same (to map it) is compared as the
 * open file's statx shows it with that record, which is a BULKSTAT of
 * moments before, without a request of its own: only a disagreement is
 * added as a stat'ed entry is (on a million files without the rmapbt,
 * 22 525 fewer requests and 3.5 % of the run).  Every other entry is
 * compared as above.  A window BULKSTAT fails
 * on (a damaged inode stops it) gives no records: its entries are
 * stat'ed, and the failure is phase 2's to report.  HASATTR in a record
 * means "list the attributes" unless xfs_ownermap.c read the attribute
 * fork from the disk without a name (an empty fork, parent pointers) at
 * the ctime the record has.
 *
 * A directory is compared with a BULKSTAT of itself at its end.  XFS
 * puts a directory's files near its inode, so that BULKSTAT usually comes
 * with one of the directory's own bulk requests: the window of its
 * entries that its number fits in is asked from the lower of the two
 * numbers, and the directory's record is held for its end (on a kernel
 * tree, 93% of the directories; a request of its own costs 5 us of
 * system time).  A record that disagrees is asked for again, as a batch
 * is.
 *
 * Health (without the kernel scrub, xfs_inodes.c): an entry its getdents
 * buffer's bulk request had a record of (whether the walk took the inode
 * from it or stat'ed it) gets that record's flags in check_inode, where
 * its name is known: read before the walk opened or read the inode, so
 * not a flag the kernel set for what the walk's own reads found (a bmbt
 * FIEMAP trips on), which the walk reports itself, as when phase 2 read
 * every inode's flags before the walk.  Other entries and the directories
 * get their compare request's.  A record's flags are nearly always clear,
 * so only the numbers of the records and the flags that are set are held,
 * per thread, until the next getdents buffer's records replace them.
 */
#include "backends/xfs/xfs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "scan/context.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

/* Entries held per thread: 256 statx copies, ~70 KiB. */
#define XFS_WALKSTAT_MAX 256
/* Inode numbers one compare request covers: an inode chunk. */
#define XFS_WALKSTAT_WINDOW 64
/*
 * Inode numbers one bulk_inodes request may cover: 16 chunks.  BULKSTAT
 * reads ahead the inode clusters of every chunk a request spans before it
 * looks at the first inode, so the chunks of a directory's files are read
 * side by side rather than one request's chunk after the other's.
 */
#define XFS_WALKSTAT_SPAN 1024

struct walkstat_entry {
	struct statx stx;
	size_t name;			/* offset in names, or NO_NAME: the directory */
};

#define NO_NAME ((size_t)-1)

/* The health flags of a bulk record that has one set. */
struct walkstat_flags {
	uint64_t ino;
	uint32_t sick, checked;
};

struct xfs_walkstat {
	const struct dir_node *dir;	/* whose entries these are */
	struct walkstat_entry *v;
	size_t n;
	struct strbuf names;
	struct xfs_bulkstat_req *req;
	struct walkstat_flags *flags;	/* of the last bulk_inodes call's records */
	size_t nflags, aflags;
	uint64_t *recs;			/* the numbers of those records, sorted */
	size_t nrecs, arecs;
	/* The directory's own record from its bulk requests, for its end. */
	struct xfs_bulkstat dir_rec;
	const struct dir_node *dir_rec_node;	/* whose record (NULL: none held) */
};

struct xfs_walkstat *xfs_walkstat_new(unsigned nr_threads)
{
	struct xfs_walkstat *w = xcalloc(nr_threads, sizeof(*w));

	for (unsigned i = 0; i < nr_threads; i++) {
		w[i].v = xcalloc(XFS_WALKSTAT_MAX, sizeof(*w[i].v));
		strbuf_init(&w[i].names);
		w[i].req = xcalloc(1, XFS_BULKSTAT_REQ_SIZE(XFS_WALKSTAT_SPAN));
	}
	return w;
}

void xfs_walkstat_free(struct xfs_walkstat *w, unsigned nr_threads)
{
	if (!w)
		return;
	for (unsigned i = 0; i < nr_threads; i++) {
		free(w[i].v);
		strbuf_release(&w[i].names);
		free(w[i].req);
		free(w[i].flags);
		free(w[i].recs);
	}
	free(w);
}

/*
 * BULKSTAT gives the size on disk, which lags behind writes still in the
 * page cache: only a BULKSTAT size above the file's size is a mismatch.
 */
static bool agrees(uint32_t nlink, uint16_t mode, uint64_t size, const struct statx *s)
{
	return nlink == s->stx_nlink && mode == s->stx_mode && size <= s->stx_size;
}

static bool bs_agrees(const struct xfs_bulkstat *bs, const struct statx *s)
{
	return agrees(bs->bs_nlink, bs->bs_mode, bs->bs_size, s);
}

/*
 * The second look at one inode: both paths read the same inode, so a
 * difference that survives a fresh look at both is damage in one of the
 * two (or in memory); a change in between is a race.
 */
static void look_again(struct scrub_ctx *ctx, struct xfs_state *xs,
		       const struct backend_dir *d, const char *name, const struct statx *stx)
{
	struct xfs_bulkstat bs;
	struct statx again;

	if (xfs_bulkstat_one(xs, stx->stx_ino, &bs) != 1 || bs_agrees(&bs, stx))
		return;		/* freed meanwhile, or the batch's view was older */
	if (stx_get(d->fd, name, &again) < 0 || !stx_unchanged(&again, stx) ||
	    stx_changed_during_scan(ctx, stx)) {
		str_changed(ctx, CHECK_XFS_BULKSTAT, d->node, name, stx->stx_ino,
			    "bulkstat vs stat");
		return;
	}
	if (xfs_bulkstat_one(xs, stx->stx_ino, &bs) != 1 || bs_agrees(&bs, &again))
		return;
	str_error(ctx, CHECK_XFS_BULKSTAT, d->node, name, stx->stx_ino,
		  "BULKSTAT says link count %u, mode %o, size %llu; stat says %u, %o, %llu",
		  bs.bs_nlink, bs.bs_mode, (unsigned long long)bs.bs_size,
		  again.stx_nlink, again.stx_mode, (unsigned long long)again.stx_size);
}

static int entry_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct walkstat_entry *)a)->stx.stx_ino;
	uint64_t y = ((const struct walkstat_entry *)b)->stx.stx_ino;

	return x < y ? -1 : x > y;
}

static const char *entry_name(const struct xfs_walkstat *w, const struct walkstat_entry *e)
{
	return e->name == NO_NAME ? NULL : w->names.buf + e->name;
}

/* Entries [i, j] (sorted, inside one window) against one BULKSTAT request. */
static void check_window(struct scrub_ctx *ctx, struct xfs_state *xs, struct xfs_walkstat *w,
			 const struct backend_dir *d, size_t i, size_t j)
{
	struct xfs_bulkstat_req *req = w->req;
	uint64_t first = w->v[i].stx.stx_ino;

	memset(&req->hdr, 0, sizeof(req->hdr));
	req->hdr.ino = first;
	req->hdr.icount = (uint32_t)(w->v[j].stx.stx_ino - first + 1);
	atomic_fetch_add(&xs->walkstat_requests, 1);
	atomic_fetch_add(&xs->walkstat_inodes, j - i + 1);
	if (xfs_bulkstat_req(xs, req) < 0)
		req->hdr.ocount = 0;	/* each is looked at by itself */
	uint32_t r = 0;

	for (size_t k = i; k <= j; k++) {
		const struct walkstat_entry *e = &w->v[k];

		while (r < req->hdr.ocount && req->bulkstat[r].bs_ino < e->stx.stx_ino)
			r++;
		if (r < req->hdr.ocount && req->bulkstat[r].bs_ino == e->stx.stx_ino) {
			const struct xfs_bulkstat *bs = &req->bulkstat[r];

			if (xs->walk_health)
				xfs_health_take(ctx, bs->bs_ino, bs->bs_sick, bs->bs_checked,
						d->node, entry_name(w, e));
			if (bs_agrees(bs, &e->stx))
				continue;
		}
		/* Disagrees, not returned, or the request failed: one by one. */
		look_again(ctx, xs, d, entry_name(w, e), &e->stx);
	}
}

void xfs_walkstat_flush(struct scrub_ctx *ctx, const struct backend_dir *d)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct xfs_walkstat *w = &xs->walkstat[d->thread];

	if (w->dir == d->node && !scrub_should_stop(ctx)) {
		sort_items(w->v, w->n, sizeof(*w->v), entry_cmp);
		for (size_t i = 0, j; i < w->n; i = j + 1) {
			for (j = i; j + 1 < w->n &&
			     w->v[j + 1].stx.stx_ino - w->v[i].stx.stx_ino < XFS_WALKSTAT_WINDOW;)
				j++;
			check_window(ctx, xs, w, d, i, j);
		}
	}
	w->n = 0;
	strbuf_reset(&w->names);
}

bool xfs_walkstat_dir(struct scrub_ctx *ctx, const struct backend_dir *d)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct xfs_walkstat *w = &xs->walkstat[d->thread];
	const struct xfs_bulkstat *bs = &w->dir_rec;

	if (w->dir_rec_node != d->node || bs->bs_ino != d->stx->stx_ino)
		return false;
	w->dir_rec_node = NULL;
	atomic_fetch_add(&xs->walkstat_inodes, 1);
	if (xs->walk_health)
		xfs_health_take(ctx, bs->bs_ino, bs->bs_sick, bs->bs_checked, d->node, NULL);
	return bs_agrees(bs, d->stx);
}

void xfs_walkstat_opened(struct scrub_ctx *ctx, const struct backend_dir *d, const char *name,
			 const struct statx *stx, const struct backend_inode *rec)
{
	struct xfs_state *xs = xfs_state(ctx);

	if (rec->ino != stx->stx_ino || !agrees(rec->nlink, rec->mode, rec->size, stx)) {
		xfs_walkstat_add(ctx, d, name, stx);
		return;
	}
	atomic_fetch_add(&xs->walkstat_inodes, 1);
	atomic_fetch_add(&xs->walkstat_opened, 1);
}

void xfs_walkstat_report(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);

	report_verbose(ctx, "Phase 3: %llu inodes compared with BULKSTAT in %llu requests "
		       "(%llu opened files with the record the walk took them from)",
		       (unsigned long long)atomic_load(&xs->walkstat_inodes),
		       (unsigned long long)atomic_load(&xs->walkstat_requests),
		       (unsigned long long)atomic_load(&xs->walkstat_opened));
	report_verbose(ctx, "Phase 3: %llu bulk records for the walk from %llu BULKSTAT requests",
		       (unsigned long long)atomic_load(&xs->bulk_records),
		       (unsigned long long)atomic_load(&xs->bulk_requests));
}

void xfs_walkstat_add(struct scrub_ctx *ctx, const struct backend_dir *d, const char *name,
		      const struct statx *stx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct xfs_walkstat *w = &xs->walkstat[d->thread];

	if (w->dir != d->node) {
		/* A directory left without its end (a cancelled walk): drop. */
		w->n = 0;
		strbuf_reset(&w->names);
		w->dir = d->node;
	}
	if (w->n == XFS_WALKSTAT_MAX)
		xfs_walkstat_flush(ctx, d);
	struct walkstat_entry *e = &w->v[w->n++];

	e->stx = *stx;
	e->name = NO_NAME;
	if (name) {
		e->name = w->names.len;
		strbuf_add(&w->names, name, strlen(name) + 1);
	}
}


static void record_of(const struct xfs_bulkstat *bs, struct backend_inode *r)
{
	*r = (struct backend_inode){
		.ino = bs->bs_ino,
		.size = bs->bs_size,
		/* bs_blocks counts filesystem blocks; st_blocks 512-byte units. */
		.blocks = bs->bs_blocks * (bs->bs_blksize / 512),
		.atime_ns = ns_of(bs->bs_atime, bs->bs_atime_nsec),
		.mtime_ns = ns_of(bs->bs_mtime, bs->bs_mtime_nsec),
		.ctime_ns = ns_of(bs->bs_ctime, bs->bs_ctime_nsec),
		.btime_ns = ns_of(bs->bs_btime, bs->bs_btime_nsec),
		.nlink = bs->bs_nlink, .uid = bs->bs_uid, .gid = bs->bs_gid, .gen = bs->bs_gen,
		.nextents = bs->bs_extents,
		.mode = bs->bs_mode,
		.flags = bs->bs_xflags & FS_XFLAG_HASATTR ? BACKEND_INODE_XATTRS : 0,
	};
}

/* Hold a record's health flags for check_inode (xfs_walkstat_health()). */
static void hold_flags(struct xfs_walkstat *w, const struct xfs_bulkstat *bs)
{
	if (w->nflags == w->aflags) {
		w->aflags = w->aflags ? 2 * w->aflags : 8;
		w->flags = xrealloc(w->flags, w->aflags * sizeof(*w->flags));
	}
	w->flags[w->nflags++] = (struct walkstat_flags){
		.ino = bs->bs_ino, .sick = bs->bs_sick, .checked = bs->bs_checked,
	};
}

bool xfs_walkstat_health(struct scrub_ctx *ctx, const struct backend_dir *d, const char *name,
			 uint64_t ino)
{
	const struct xfs_walkstat *w = &xfs_state(ctx)->walkstat[d->thread];
	uint32_t sick = 0, checked = 0;

	if (bulk_index_of(w->recs, w->nrecs, ino) == w->nrecs)
		return false;
	for (size_t i = 0; i < w->nflags; i++)
		if (w->flags[i].ino == ino) {
			sick = w->flags[i].sick;
			checked = w->flags[i].checked;
		}
	xfs_health_take(ctx, ino, sick, checked, d->node, name);
	return true;
}

/* Widen [*lo, *hi] to take in inode dir (0: none). */
static void span_with(uint64_t dir, uint64_t *lo, uint64_t *hi)
{
	if (dir && dir < *lo)
		*lo = dir;
	if (dir > *hi)
		*hi = dir;
}

/*
 * inos[i .. j] (one window) from one request into out[i .. j]; dir (0:
 * none) is the directory's own number, to be asked for in the same
 * request (it fits in the window) and its record held.
 */
static size_t bulk_window(struct scrub_ctx *ctx, struct xfs_state *xs, struct xfs_walkstat *w,
			  const struct backend_dir *d, uint64_t dir, const uint64_t *inos, size_t i,
			  size_t j, struct backend_inode *out)
{
	struct xfs_bulkstat_req *req = w->req;
	uint64_t lo = inos[i], hi = inos[j];
	size_t found = 0;
	uint32_t r = 0;

	span_with(dir, &lo, &hi);
	memset(&req->hdr, 0, sizeof(req->hdr));
	req->hdr.ino = lo;
	req->hdr.icount = (uint32_t)(hi - lo + 1);
	atomic_fetch_add(&xs->bulk_requests, 1);
	if (xfs_bulkstat_req(xs, req) < 0)
		req->hdr.ocount = 0;
	for (uint32_t k = 0; dir && k < req->hdr.ocount; k++)
		if (req->bulkstat[k].bs_ino == dir) {
			w->dir_rec = req->bulkstat[k];
			w->dir_rec_node = d->node;
		}
	for (size_t k = i; k <= j; k++) {
		while (r < req->hdr.ocount && req->bulkstat[r].bs_ino < inos[k])
			r++;
		out[k].ino = 0;
		if (r < req->hdr.ocount && req->bulkstat[r].bs_ino == inos[k]) {
			const struct xfs_bulkstat *bs = &req->bulkstat[r];

			record_of(bs, &out[k]);
			if (xs->walk_health && (bs->bs_sick || bs->bs_checked))
				hold_flags(w, bs);
			if ((out[k].flags & BACKEND_INODE_XATTRS) &&
			    xfs_ownermap_nameless(ctx, bs->bs_ino, bs->bs_ctime, bs->bs_ctime_nsec))
				out[k].flags &= ~BACKEND_INODE_XATTRS;
			found++;
		}
	}
	return found;
}

/*
 * Wanted inodes at most this far apart are asked for in one request
 * beyond a chunk: BULKSTAT returns icount allocated inodes from the first
 * number on, wanted or not, each an inode read and a record, so a request
 * across a wider gap pays for the inodes in it (another directory's files).
 */
#define XFS_WALKSTAT_GAP 4

/* Is inos[j + 1] to go in the request that begins with inos[i] and ends with inos[j]? */
static bool same_request(const uint64_t *inos, size_t i, size_t j)
{
	uint64_t span = inos[j + 1] - inos[i] + 1;

	return span <= XFS_WALKSTAT_WINDOW ||
	       (span <= XFS_WALKSTAT_SPAN && inos[j + 1] - inos[j] <= XFS_WALKSTAT_GAP);
}

/* The last of inos[i ..] (sorted) for the request that begins with inos[i]. */
static size_t request_end(const uint64_t *inos, size_t i, size_t n)
{
	size_t j = i;

	while (j + 1 < n && same_request(inos, i, j))
		j++;
	return j;
}

/*
 * Does the request for [first, last] also ask for the directory's own
 * number dir (0: none)?  Where it lies inside the request, or the two
 * still fit in a window.
 */
static bool request_takes_dir(uint64_t first, uint64_t last, uint64_t dir)
{
	uint64_t lo = first, hi = last;

	span_with(dir, &lo, &hi);
	return dir && (hi - lo < XFS_WALKSTAT_WINDOW || (dir >= first && dir <= last));
}

int xfs_walkstat_bulk(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const uint64_t *inos, size_t n, struct backend_inode *out)
{
	struct xfs_state *xs = xfs_state(ctx);
	/* Phase 3 has the thread's request to itself until the entries are visited. */
	struct xfs_walkstat *w = &xs->walkstat[d->thread];
	size_t found = 0;

	/* The directory's own number, until a request has brought its record. */
	uint64_t dir = w->dir_rec_node == d->node ? 0 : d->stx->stx_ino;

	xfs_ownermap_prepare(ctx);
	w->nflags = 0;
	for (size_t i = 0, j; i < n; i = j + 1) {
		uint64_t with = 0;

		j = request_end(inos, i, n);
		if (request_takes_dir(inos[i], inos[j], dir)) {
			with = dir;
			dir = 0;
		}
		found += bulk_window(ctx, xs, w, d, with, inos, i, j, out);
	}
	if (n > w->arecs) {
		w->arecs = n;
		w->recs = xrealloc(w->recs, n * sizeof(*w->recs));
	}
	w->nrecs = 0;
	for (size_t k = 0; k < n; k++)
		if (out[k].ino)
			w->recs[w->nrecs++] = inos[k];
	atomic_fetch_add(&xs->bulk_records, found);
	return (int)found;
}
