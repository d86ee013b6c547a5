/*
 * devverify: the physical-order device reader; see devverify.h.
 */
#include "data/devverify.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "data/adaptive.h"
#include "backends/backend.h"
#include "data/checkpoint.h"
#include "report/checks.h"
#include "scan/context.h"
#include "tree/crosslink.h"
#include "lib/ioengine.h"
#include "data/ledger.h"
#include "data/mediamap.h"
#include "data/ratelimit.h"
#include "data/regions.h"
#include "report/report.h"
#include "data/spacemap.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "tree/walk.h"
#include "lib/thread.h"

/*
 * While the walk runs beside them, the reads that overlap it keep one read
 * of 1 MiB in flight, not four of 8 MiB: the walk's small metadata reads
 * queue behind whatever is in flight on the device, and 32 MiB ahead of
 * each is some 35 ms at 900 MB/s (the walk took 20-30 % longer with four
 * in flight, bench/README.md).  Once phase 3 ends they take the full depth.
 */
#define WALK_DEPTH 1
#define WALK_READ (1U << 20)

/* Granularity of a bisected failure, and the O_DIRECT alignment we use. */
#define BAD_STEP 4096U
/* Past this many bad ranges the device is failing: stop itemising. */
#define MAX_BAD_RANGES 1024

struct devread {
	struct scrub_ctx *ctx;
	int fd;
	struct ratelimit limit;
	pthread_mutex_t lock;		/* bad ranges, operational errors */
	struct bad_range *bad;
	size_t nr_bad;
	bool bad_overflow;
	int op_err;			/* first error that is not the media's */
	atomic_ullong bytes;
	const struct io_range *reads;	/* the read list, for the checkpoint */
	unsigned depth;			/* reads in flight, at most */
	uint64_t fixed_read;		/* FSCRUB_DEBUG_FIXED_READ: a fixed --limit's reads, or 0 */
	const char *engine;		/* the engine of the last ioengine_run() */
	/* The overlap (devverify_start()): the pass alongside phases 3 and 4. */
	bool early;			/* this pass reads the space map's ranges */
	bool live;			/* phase 5 began: count into its progress (lock) */
	struct io_range *early_reads;	/* the space map's read list */
	struct io_range *skip;		/* ranges it leaves out (space_not_data), sorted */
	size_t nr_skip, alloc_skip;
	size_t nr_early_reads;
	struct io_range *verified;	/* its reads read to their end (lock) */
	size_t nr_verified, alloc_verified;
	pthread_t thread;
	bool joined;			/* the thread was joined */
	atomic_bool planned;		/* early_reads is set (the thread's read list) */
	atomic_bool walking_done;	/* phase 3 ended: depth back to full */
	atomic_bool cancel;		/* devverify_release(): stop submitting */
	int map_ret;			/* spacemap_data()'s: 0, or a negative errno */
	int early_ret;			/* the pass's read_list(): 0, or a negative errno */
	unsigned long long early_bytes;	/* read by it */
};

/*
 * Why devverify_start() did not start the reads alongside the walk (a
 * static string), for phase 5's -v line; NULL if it did or was not asked.
 * One scan per process: this is the run's.
 */
static const char *overlap_refused;

static uint64_t round_down(uint64_t x, uint64_t a)
{
	return x - x % a;
}

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return round_down(x + a - 1, a);
}

/* Append [off, off+len) to the read list, split into DEVREAD_MAX pieces. */
static void add_reads(struct io_range **v, size_t *n, size_t *alloc, uint64_t off, uint64_t len)
{
	while (len) {
		uint64_t piece = len < DEVREAD_MAX ? len : DEVREAD_MAX;

		if (*n == *alloc) {
			*alloc = *alloc ? *alloc * 2 : 1024;
			*v = xrealloc(*v, *alloc * sizeof(**v));
		}
		(*v)[(*n)++] = (struct io_range){ .off = off, .len = piece };
		off += piece;
		len -= piece;
	}
}

/* The read list being made: the open read [start, end), merged into. */
struct planner {
	struct io_range *v;
	size_t n, alloc;
	uint64_t start, end;
	bool open;
	uint64_t data;			/* bytes of file data covered */
	uint64_t region;		/* no read crosses a multiple of this; 0: none */
};

/* Does [s, ...) begin in another region than the open read? */
static bool other_region(const struct planner *p, uint64_t s)
{
	return p->region && s / p->region != (p->end - 1) / p->region;
}

/* Add the aligned piece [s, e) of an extent (in device order). */
static void plan_piece(struct planner *p, uint64_t s, uint64_t e)
{
	if (p->open && e <= p->end)
		return;			/* inside the current read (shared) */
	p->data += e - (p->open && s < p->end ? p->end : s);
	if (p->open && s <= p->end + DEVREAD_MERGE_GAP && !other_region(p, s)) {
		p->end = e;
		return;
	}
	if (p->open)
		add_reads(&p->v, &p->n, &p->alloc, p->start, p->end - p->start);
	p->start = s;
	p->end = e;
	p->open = true;
}

/*
 * Add [s, e) clipped to the regions chosen (regions.h; all without a plan)
 * past the part of each a run before read, and, resuming, to what the
 * checkpoint has not verified (checkpoint.h).
 */
static void plan_extent(struct planner *p, const struct region_plan *rp,
			const struct checkpoint *cp, uint64_t s, uint64_t e)
{
	while (s < e) {
		uint64_t end = rp ? (s / rp->size + 1) * rp->size : e, until;
		uint64_t from = regions_read_from(rp, s);
		bool verified = checkpoint_dev_verified(cp, s, &until);

		if (end > e)
			end = e;
		if (s < from) {		/* read in part by a run before: from there on */
			s = from < end ? from : end;
			continue;
		}
		if (until < end)
			end = until;
		if (!verified && regions_chosen(rp, s))
			plan_piece(p, s, end);
		s = end;
	}
}

/*
 * The read list: data extents in device order, neighbours merged when the
 * gap between them is small (one long read beats two seeks), aligned to
 * BAD_STEP and clipped to the device and to the regions chosen, no read
 * crossing a region boundary (region sizes are multiples of BAD_STEP);
 * then, if order, in the regions' reading order (regions.h; else in device
 * order, each region's reads not counted yet).  *data: bytes of file data
 * covered.
 */
static struct io_range *plan_reads(const struct scrub_ctx *ctx, size_t *nr, uint64_t *data,
				   bool order)
{
	const struct xlink_list *l = ctx->xlinks;
	struct region_plan *rp = ctx->regions;
	struct planner p = { .region = rp ? rp->size : 0 };

	for (size_t i = 0; i < l->n; i++) {
		const struct xlink_extent *x = &l->v[i];
		uint64_t s = round_down(xlink_phys(x), BAD_STEP);
		uint64_t e = round_up(xlink_end(x), BAD_STEP);

		if (x->unwritten || s >= ctx->dev_size)
			continue;
		/* Files in a manifest are read file by file: their digests need order. */
		if (ledger_reads_per_file(ctx->ledger, xlink_key(l, x)))
			continue;
		if (e > ctx->dev_size)
			e = ctx->dev_size;
		plan_extent(&p, rp, ctx->checkpoint, s, e);
	}
	if (p.open)
		add_reads(&p.v, &p.n, &p.alloc, p.start, p.end - p.start);
	if (rp && order)
		regions_order_reads(rp, p.v, p.n);
	*nr = p.n;
	*data = p.data;
	return p.v;
}

/* Cancelled, stopped by -a, or --time-budget spent (regions.h). */
static bool stop_requested(void *ctx)
{
	return scrub_should_stop(ctx) || regions_budget_spent(ctx);
}

static bool admit(void *arg, uint64_t len)
{
	struct devread *dr = arg;

	/* The walk found a file with a checksum record: phase 5 reads it all again, hashing. */
	if (dr->early && (ledger_noted(dr->ctx->ledger) || atomic_load(&dr->cancel)))
		return false;
	return !stop_requested(dr->ctx) && ratelimit_take(&dr->limit, len, stop_requested,
							  dr->ctx);
}

static void timed(void *arg, uint64_t len, uint64_t lat_ns)
{
	struct devread *dr = arg;

	ratelimit_note(&dr->limit, len, lat_ns);
}

static unsigned depth_now(void *arg)
{
	struct devread *dr = arg;
	unsigned d = ratelimit_depth(&dr->limit);

	/* Alongside the walk, fewer reads in flight: its own small reads queue behind them. */
	if (dr->early && !atomic_load_explicit(&dr->walking_done, memory_order_relaxed) &&
	    d > WALK_DEPTH)
		return WALK_DEPTH;
	return d;
}

static uint64_t size_now(void *arg)
{
	struct devread *dr = arg;
	uint64_t size = ratelimit_size(&dr->limit);

	if (!size)
		size = dr->fixed_read;
	if (dr->early && !atomic_load_explicit(&dr->walking_done, memory_order_relaxed) &&
	    (!size || size > WALK_READ))
		return WALK_READ;
	return size;
}

/* --limit auto's smallest read: one request of the device's largest, at
 * most 1 MiB (a slow start's first read beside a foreground job must be
 * short), at least BAD_STEP; 1 MiB if sysfs does not say. */
#define SPLIT_MAX (1U << 20)
/* --limit auto's largest read (the planned reads stay DEVREAD_MAX): a
 * foreground job that starts while the scan runs at full speed finds all
 * of its reads in flight queued ahead, and the probe that sees the job
 * waits for them to end -- 4 MiB, not 32 (3 s beside a job on a 20 MB/s
 * device, in bench/adaptive_io_vm.sh).  Four reads of 1 MiB in flight
 * still stream a disk: 1 MiB is at least any disk's largest request. */
#define AUTO_MAX (1U << 20)

/* A queue limit of the device (or of the disk a partition is on); 0 if none. */
static unsigned long long queue_limit(unsigned maj, unsigned min, const char *name)
{
	static const char *const fmt[] = { "/sys/dev/block/%u:%u/queue/%s",
					   "/sys/dev/block/%u:%u/../queue/%s" };
	char path[128];
	unsigned long long v = 0;

	for (size_t i = 0; i < sizeof(fmt) / sizeof(*fmt) && !v; i++) {
		FILE *f;

		snprintf(path, sizeof(path), fmt[i], maj, min, name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* The device's largest request: max_sectors_kb, and at most max_segments
 * pages (a direct read's buffer is in pages that need not be contiguous):
 * --limit auto counts our requests in these (ratelimit_watch_device). */
static uint64_t smallest_read(unsigned maj, unsigned min)
{
	unsigned long long kb = queue_limit(maj, min, "max_sectors_kb");
	unsigned long long segs = queue_limit(maj, min, "max_segments");

	if (segs && kb && segs * (BAD_STEP >> 10) < kb)
		kb = segs * (BAD_STEP >> 10);
	if (!kb || kb << 10 > SPLIT_MAX)
		return SPLIT_MAX;
	return kb << 10 < BAD_STEP ? BAD_STEP : round_down(kb << 10, BAD_STEP);
}

static void add_bad_range(struct devread *dr, uint64_t off, uint64_t len, int err)
{
	pthread_mutex_lock(&dr->lock);
	if (dr->nr_bad && dr->bad[dr->nr_bad - 1].off + dr->bad[dr->nr_bad - 1].len == off &&
	    dr->bad[dr->nr_bad - 1].err == err) {
		dr->bad[dr->nr_bad - 1].len += len;
	} else if (dr->nr_bad < MAX_BAD_RANGES) {
		dr->bad = xrealloc(dr->bad, (dr->nr_bad + 1) * sizeof(*dr->bad));
		dr->bad[dr->nr_bad++] = (struct bad_range){ .off = off, .len = len, .err = err };
	} else {
		dr->bad_overflow = true;
	}
	pthread_mutex_unlock(&dr->lock);
}

/* A media error found now: reported at the end, and kept by the checkpoint till then. */
static void add_bad(struct devread *dr, uint64_t off, uint64_t len, int err)
{
	checkpoint_dev_bad(dr->ctx->checkpoint, off, len, err);
	add_bad_range(dr, off, len, err);
}

static void note_op_error(struct devread *dr, int err)
{
	pthread_mutex_lock(&dr->lock);
	if (!dr->op_err)
		dr->op_err = err;
	pthread_mutex_unlock(&dr->lock);
}

/*
 * One block of a bisection, read through the rate limiter: --limit's
 * bandwidth covers it, and --limit auto counts its request as ours (not
 * another load's) without taking its latency for the device's.
 * -ECANCELED if a stop came while it waited.
 */
static ssize_t bisect_read(struct devread *dr, char *buf, uint64_t pos)
{
	ssize_t n;

	if (!ratelimit_take(&dr->limit, BAD_STEP, stop_requested, dr->ctx))
		return -ECANCELED;
	n = pread(dr->fd, buf, BAD_STEP, (off_t)pos);
	int err = errno;

	ratelimit_note_aside(&dr->limit, n > 0 ? (uint64_t)n : 0);
	errno = err;		/* (the caller looks at it) */
	return n;
}

/*
 * A read of r failed: read it again block by block to find the bad ones.
 * False if it stopped before the end (cancelled, or not a media error).
 */
static bool bisect(struct devread *dr, const struct io_range *r, char *buf)
{
	uint64_t bad_start = 0, bad_len = 0, pos;
	int bad_err = 0;
	bool whole = true;

	for (pos = r->off; pos < r->off + r->len; pos += BAD_STEP) {
		ssize_t n;

		if (scrub_should_stop(dr->ctx)) {
			whole = false;
			break;
		}
		n = bisect_read(dr, buf, pos);
		if (n == -ECANCELED) {
			whole = false;
			break;
		}
		if (n < 0 && !errno_is_corruption(errno)) {
			note_op_error(dr, errno);
			whole = false;
			break;
		}
		if (n >= 0) {
			if (bad_len)
				add_bad(dr, bad_start, bad_len, bad_err);
			bad_len = 0;
			continue;
		}
		if (!bad_len)
			bad_start = pos, bad_err = errno;
		bad_len += BAD_STEP;
	}
	if (bad_len)
		add_bad(dr, bad_start, bad_len, bad_err);
	return whole;
}

/*
 * A read's bytes: phase 5's progress, but not while the pass alongside
 * phases 3 and 4 runs before phase 5 began (the line shows their work).
 */
static void count_read(struct devread *dr, uint64_t len)
{
	atomic_fetch_add(&dr->bytes, len);
	if (!dr->early) {
		progress_add(&dr->ctx->progress_done, len);
		return;
	}
	pthread_mutex_lock(&dr->lock);
	if (dr->live)
		progress_add(&dr->ctx->progress_done, len);
	pthread_mutex_unlock(&dr->lock);
}

/* The pass alongside the walk read r to its end: phase 5 need not read it again. */
static void note_verified(struct devread *dr, const struct io_range *r)
{
	pthread_mutex_lock(&dr->lock);
	if (dr->nr_verified == dr->alloc_verified) {
		dr->alloc_verified = dr->alloc_verified ? 2 * dr->alloc_verified : 1024;
		dr->verified = xrealloc(dr->verified, dr->alloc_verified * sizeof(*dr->verified));
	}
	dr->verified[dr->nr_verified++] = *r;
	pthread_mutex_unlock(&dr->lock);
}

static void read_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct devread *dr = arg;
	struct region_plan *rp = dr->early ? NULL : dr->ctx->regions;
	bool whole;

	if (res == (int64_t)r->len) {
		/* --portion, --time-budget: no file is known to be read whole, nothing to judge */
		if (!regions_mode(&dr->ctx->opt) && !dr->early)
			ledger_hash_read(dr->ctx->ledger, r->off, r->len, buf);
		count_read(dr, r->len);
		regions_read_done(rp, r->off, true);
		if (dr->early)
			note_verified(dr, r);
		checkpoint_dev_done(dr->ctx->checkpoint, (size_t)(r - dr->reads));
		checkpoint_tick(dr->ctx);
		return;
	}
	if (res < 0 && !errno_is_corruption((int)-res)) {
		note_op_error(dr, (int)-res);
		regions_read_done(rp, r->off, false);
		return;
	}
	/* A media error, or a short read inside the device: find the bad blocks. */
	whole = bisect(dr, r, buf);
	regions_read_done(rp, r->off, whole);
	count_read(dr, r->len);
	if (whole && dr->early)
		note_verified(dr, r);
	/* A bisection cut short by a stop did not read the rest: not done. */
	if (!scrub_should_stop(dr->ctx))
		checkpoint_dev_done(dr->ctx->checkpoint, (size_t)(r - dr->reads));
	checkpoint_tick(dr->ctx);
}

/*
 * Resuming (checkpoint.h): not when the ledger hashes files or with
 * --portion (the regions read are the run history's).  early: the pass
 * alongside phase 3, before the ledger knows its files; phase 5 decides
 * again (finish_overlap()), and says which only then.
 */
static void resume_cursor(struct scrub_ctx *ctx, bool early)
{
	bool restart = regions_mode(&ctx->opt) || ledger_hashes_files(ctx->ledger);

	if (!early)
		checkpoint_say_data(ctx, !restart ? NULL : regions_mode(&ctx->opt) ?
				    "--portion and --time-budget read the run history's regions" :
				    "files have checksum records, compared on whole files");
	checkpoint_dev_begin(ctx->checkpoint, restart);
	if (restart)
		atomic_store(&ctx->progress_base, 0);
}

/* The media errors the stopped run found, reported with this run's. */
static void add_saved_bad(struct scrub_ctx *ctx, struct devread *dr)
{
	size_t n;
	const struct bad_range *bad = checkpoint_dev_saved_bad(ctx->checkpoint, &n);

	for (size_t i = 0; i < n; i++)
		add_bad_range(dr, bad[i].off, bad[i].len, bad[i].err);
}

/* The device, open for direct reads, if it is the mount's own. */
static int open_device(const struct scrub_ctx *ctx, const char **why)
{
	struct stat st;
	int fd;

	if (!ctx->dev_size) {
		*why = "extent offsets are not offsets on one block device";
		return -EOPNOTSUPP;
	}
	if (ctx->xlinks->overflow) {
		*why = "the extent list reached its bound";
		return -E2BIG;
	}
	if (getenv("FSCRUB_DEBUG_NO_DEVREAD")) {
		*why = "FSCRUB_DEBUG_NO_DEVREAD is set";
		return -EOPNOTSUPP;
	}
	fd = open(ctx->source, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		*why = errno == EACCES || errno == EPERM ? "the device cannot be opened "
			"(permission denied)" : "the device cannot be opened";
		return -errno;
	}
	if (fstat(fd, &st) < 0 || !S_ISBLK(st.st_mode) ||
	    major(st.st_rdev) != ctx->root_stx.stx_dev_major ||
	    minor(st.st_rdev) != ctx->root_stx.stx_dev_minor) {
		close(fd);
		*why = "the device is no longer the mount's";
		return -ENODEV;
	}
	return fd;
}

/*
 * FSCRUB_DEBUG_FIXED_READ=BYTES: a fixed --limit reads at most BYTES at a
 * time (a multiple of BAD_STEP, at least one).  The token bucket takes a
 * whole read's bytes before it starts, so at 0.1 MB/s a DEVREAD_MAX read
 * waits 80 s: bench/adaptive_io.sh's fixed rate at --limit auto's average
 * reads 64 KiB at a time to read at all in its seconds.  0 if unset.
 */
static uint64_t fixed_read_size(const struct scrub_ctx *ctx)
{
	const char *knob = getenv("FSCRUB_DEBUG_FIXED_READ");
	unsigned long long v;
	char *end;

	if (!knob || !*knob || ctx->opt.limit_auto || !ctx->opt.limit_rate)
		return 0;
	errno = 0;
	v = strtoull(knob, &end, 10);
	if (errno || *end || v < BAD_STEP)
		return BAD_STEP;
	return v > DEVREAD_MAX ? DEVREAD_MAX : round_down(v, BAD_STEP);
}

/* Set dr up to read the device open on fd: the lock, the rate limit. */
static void devread_init(struct scrub_ctx *ctx, struct devread *dr, int fd)
{
	unsigned maj = ctx->root_stx.stx_dev_major, min = ctx->root_stx.stx_dev_minor;
	uint64_t req = smallest_read(maj, min), auto_max = AUTO_MAX;

	dr->ctx = ctx;
	dr->fd = fd;
	dr->depth = ctx->opt.background ? 1 : DEVREAD_DEPTH;
	if (ctx->opt.limit_auto)	/* (a tag or two: fewer and smaller reads) */
		adaptive_fit_queue(queue_limit(maj, min, "nr_requests"), req, &dr->depth, &auto_max);
	pthread_mutex_init(&dr->lock, NULL);
	ratelimit_init(&dr->limit, ctx->opt.limit_rate, ctx->opt.limit_auto, dr->depth,
		       report_limit, ctx);
	ratelimit_watch_device(&dr->limit, maj, min);
	ratelimit_split_reads(&dr->limit, req, auto_max);
	dr->fixed_read = fixed_read_size(ctx);
}

static void devread_release(struct devread *dr)
{
	free(dr->bad);
	free(dr->verified);
	free(dr->early_reads);
	free(dr->skip);
	pthread_mutex_destroy(&dr->lock);
	ratelimit_destroy(&dr->limit);
	close(dr->fd);
}

/* Read the list (in reading order), the checkpoint following it; 0 or a negative errno. */
static int read_list(struct devread *dr, const struct io_range *reads, size_t n, bool partial)
{
	struct io_job job = {
		.fd = dr->fd, .ranges = reads, .nr_ranges = n, .depth = dr->depth,
		.max_len = DEVREAD_MAX, .align = BAD_STEP,
		.no_uring = getenv("FSCRUB_DEBUG_NO_URING") != NULL,
		.admit = admit, .done = read_done, .timed = timed, .depth_now = depth_now,
		.size_now = size_now, .arg = dr,
	};
	int ret;

	dr->reads = reads;
	checkpoint_dev_plan(dr->ctx->checkpoint, reads, n, partial);
	ret = ioengine_run(&job);
	checkpoint_dev_end(dr->ctx->checkpoint);
	dr->depth = job.depth;
	dr->engine = job.engine;
	return ret;
}

/* Operational errors, the bad ranges mapped to files, the regions read: the reader's end. */
static void report_end(struct scrub_ctx *ctx, struct devread *dr, int ret)
{
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot read %s", ctx->source);
	else if (dr->op_err)
		report_operational(ctx, NULL, NULL, dr->op_err, "reading %s", ctx->source);
	if (dr->bad_overflow)
		str_error(ctx, CHECK_MEDIA_FILE, NULL, NULL, 0,
			  "more than %d unreadable ranges on %s: only the first are examined",
			  MAX_BAD_RANGES, ctx->source);
	if (dr->nr_bad && !scrub_should_stop(ctx))
		mediamap_report(ctx, dr->fd, dr->bad, dr->nr_bad);
	/* The regions read to their end: the history records them. */
	regions_finish(ctx->regions, ret >= 0 && !stop_requested(ctx));
}

/* Phase 5 without the overlap: plan from the walk's extents, read, report. */
static int run_sequential(struct scrub_ctx *ctx, unsigned long long *bytes, const char **why)
{
	struct devread dr = { 0 };
	struct io_range *reads;
	size_t nr_reads;
	uint64_t data;
	int fd, ret;

	fd = open_device(ctx, why);
	if (fd < 0)
		return fd;
	crosslink_sort(ctx);
	ret = regions_plan(ctx, why);
	if (ret < 0) {
		close(fd);
		return ret;
	}
	if (!regions_mode(&ctx->opt))
		ledger_device_begin(ctx->ledger, ctx->xlinks);
	devread_init(ctx, &dr, fd);
	resume_cursor(ctx, false);
	add_saved_bad(ctx, &dr);
	reads = plan_reads(ctx, &nr_reads, &data, true);
	if (overlap_refused)
		report_verbose(ctx, "Phase 5: the reads did not overlap phases 3 and 4: %s",
			       overlap_refused);
	ret = read_list(&dr, reads, nr_reads, false);
	report_verbose(ctx, "Phase 5: read %s in device order: %zu reads of up to %u MiB, "
		       "%u in flight (%s), %llu bytes of file data in %llu bytes read",
		       ctx->source, nr_reads, DEVREAD_MAX >> 20, dr.depth,
		       dr.engine ? dr.engine : "none", (unsigned long long)data,
		       (unsigned long long)atomic_load(&dr.bytes));
	report_end(ctx, &dr, ret);
	*bytes = atomic_load(&dr.bytes);
	free(reads);
	devread_release(&dr);
	return 0;
}

/* --- the overlap: reads alongside phases 3 and 4 --- */

static int range_cmp(const void *a, const void *b)
{
	const struct io_range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static uint64_t round_len(uint64_t off, uint64_t len, uint64_t dev_size, uint64_t *start)
{
	uint64_t s = round_down(off, BAD_STEP), e = round_up(off + len, BAD_STEP);

	if (e > dev_size)
		e = dev_size;
	*start = s;
	return e > s ? e - s : 0;
}

/* The pass alongside the walk: the planner, and the ranges it leaves out. */
struct space_plan {
	struct planner p;
	const struct devread *dr;
};

/* spacemap_data()'s ranges into the planner, less dr->skip, clipped to a resumed cursor. */
static void plan_space(void *arg, uint64_t off, uint64_t len)
{
	struct space_plan *sp = arg;
	const struct devread *dr = sp->dr;
	const struct scrub_ctx *ctx = dr->ctx;
	uint64_t s, e;

	len = round_len(off, len, ctx->dev_size, &s);
	e = s + len;
	for (size_t k = 0; k < dr->nr_skip && s < e; k++) {
		const struct io_range *x = &dr->skip[k];

		if (x->off + x->len <= s || x->off >= e)
			continue;
		if (x->off > s)
			plan_extent(&sp->p, NULL, ctx->checkpoint, s, x->off);
		s = x->off + x->len;
	}
	if (s < e)
		plan_extent(&sp->p, NULL, ctx->checkpoint, s, e);
}

/* A range the backend says holds no file data (space_not_data). */
static void add_skip(void *arg, uint64_t off, uint64_t len)
{
	struct devread *dr = arg;
	uint64_t s = round_up(off, BAD_STEP), e = round_down(off + len, BAD_STEP);

	if (e > s)
		add_reads(&dr->skip, &dr->nr_skip, &dr->alloc_skip, s, e - s);
}

static void *early_main(void *arg)
{
	struct devread *dr = arg;
	struct scrub_ctx *ctx = dr->ctx;
	struct space_plan sp = { .dr = dr };
	struct planner p;
	dev_t dev = makedev(ctx->root_stx.stx_dev_major, ctx->root_stx.stx_dev_minor);

	dr->map_ret = spacemap_data(ctx->mnt_fd, dev, ctx->dev_size, plan_space, &sp);
	p = sp.p;
	if (p.open)
		add_reads(&p.v, &p.n, &p.alloc, p.start, p.end - p.start);
	dr->early_reads = p.v;
	dr->nr_early_reads = dr->map_ret ? 0 : p.n;
	atomic_store(&dr->planned, true);
	if (!dr->map_ret)
		dr->early_ret = read_list(dr, p.v, p.n, true);
	return NULL;
}

/* Why the reads cannot overlap the walk, or NULL. */
static const char *no_overlap(const struct scrub_ctx *ctx)
{
	const struct scrub_options *o = &ctx->opt;

	if (getenv("FSCRUB_DEBUG_NO_OVERLAP"))
		return "FSCRUB_DEBUG_NO_OVERLAP is set";
	if (ctx->ops->scan_data || o->rescan_errors || o->since)
		return "only some files are read";
	if (regions_mode(o))
		return "--portion and --time-budget choose regions by the files' data";
	if (o->record || o->ledger_dir || o->manifest_path)
		return "the checksum ledger hashes every file's bytes as they are read";
	if (o->limit_auto)
		return "--limit auto would take the walk's reads for another job's";
	/* A scan told to go easy on the device does not add its reads to the walk's. */
	if (o->limit_rate)
		return "--limit keeps the data reads out of the walk's way";
	return NULL;
}

int devverify_start(struct scrub_ctx *ctx)
{
	struct devread *dr;
	const char *why = no_overlap(ctx);
	int fd;

	if (!why && (fd = open_device(ctx, &why)) >= 0) {
		dr = xcalloc(1, sizeof(*dr));
		devread_init(ctx, dr, fd);
		dr->early = true;
		if (ctx->ops->space_not_data)
			ctx->ops->space_not_data(ctx, add_skip, dr);
		sort_items(dr->skip, dr->nr_skip, sizeof(*dr->skip), range_cmp);
		resume_cursor(ctx, true);
		clock_gettime(CLOCK_MONOTONIC, &ctx->data_began);
		if (!thread_start(&dr->thread, early_main, dr)) {
			ctx->devread = dr;
			return 0;
		}
		why = "no thread for it";
		ctx->data_began = (struct timespec){ 0 };
		devread_release(dr);
		free(dr);
	}
	overlap_refused = why;
	return -EOPNOTSUPP;
}

/* Wait for the thread of the pass alongside the walk (once). */
static void early_end(struct devread *dr)
{
	if (dr->joined)
		return;
	pthread_join(dr->thread, NULL);
	dr->joined = true;
	dr->early_bytes = atomic_load(&dr->bytes);
}

/* Phase 5 begins: the early pass's reads are its progress from now on. */
static void early_live(struct scrub_ctx *ctx, struct devread *dr)
{
	pthread_mutex_lock(&dr->lock);
	if (!dr->live)
		atomic_fetch_add(&ctx->progress_base, atomic_load(&dr->bytes));
	dr->live = true;
	pthread_mutex_unlock(&dr->lock);
}

void devverify_walk_done(struct scrub_ctx *ctx)
{
	if (ctx->devread)
		atomic_store(&ctx->devread->walking_done, true);
}

void devverify_wait(struct scrub_ctx *ctx)
{
	if (ctx->devread)
		early_end(ctx->devread);
}

void devverify_release(struct scrub_ctx *ctx)
{
	struct devread *dr = ctx->devread;

	if (!dr)
		return;
	atomic_store(&dr->cancel, true);
	early_end(dr);
	devread_release(dr);
	free(dr);
	ctx->devread = NULL;
}


static int range_cmp_bad(const void *a, const void *b)
{
	const struct bad_range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Sort and merge the ranges the early pass read whole; returns their number. */
static size_t merge_verified(struct devread *dr)
{
	size_t w = 0;

	sort_items(dr->verified, dr->nr_verified, sizeof(*dr->verified), range_cmp);
	for (size_t i = 0; i < dr->nr_verified; i++) {
		struct io_range *last = w ? &dr->verified[w - 1] : NULL;

		if (last && dr->verified[i].off <= last->off + last->len) {
			uint64_t end = dr->verified[i].off + dr->verified[i].len;

			if (end > last->off + last->len)
				last->len = end - last->off;
		} else {
			dr->verified[w++] = dr->verified[i];
		}
	}
	dr->nr_verified = w;
	return w;
}

/* The first of v[0..n-1] (sorted, disjoint) that ends after off. */
static size_t first_ending_after(const struct io_range *v, size_t n, uint64_t off)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].off + v[mid].len > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * The parts of each read of plan (sorted, disjoint) outside v (sorted,
 * disjoint), in device order (a piece never crosses its read's region).
 */
static struct io_range *subtract(const struct io_range *v, size_t nv,
				 const struct io_range *plan, size_t n, size_t *nr)
{
	size_t c = 0, alloc = 0;
	struct io_range *out = NULL;

	for (size_t i = 0; i < n; i++) {
		uint64_t pos = plan[i].off, end = plan[i].off + plan[i].len;

		for (size_t k = first_ending_after(v, nv, pos); k < nv && v[k].off < end; k++) {
			if (v[k].off > pos)
				add_reads(&out, &c, &alloc, pos, v[k].off - pos);
			pos = v[k].off + v[k].len;
		}
		if (pos < end)
			add_reads(&out, &c, &alloc, pos, end - pos);
	}
	*nr = c;
	return out;
}

/*
 * Phase 5 has the walk's read list: the early pass's list holds all of it
 * below the first read the list lacks, so the checkpoint's watermark may
 * follow the early pass up to there (checkpoint.h).
 */
static void bound_cursor(struct scrub_ctx *ctx, struct devread *dr, const struct io_range *plan,
			 size_t n)
{
	struct io_range *rest;
	size_t nr_rest;

	if (!atomic_load(&dr->planned) || dr->map_ret)
		return;
	rest = subtract(dr->early_reads, dr->nr_early_reads, plan, n, &nr_rest);
	checkpoint_dev_bound(ctx->checkpoint, nr_rest ? rest[0].off : UINT64_MAX);
	free(rest);
}

/*
 * Keep of the bad ranges only their parts inside plan (sorted, disjoint):
 * the media errors the sequential reader would have found.  The early pass
 * also read directories, extent trees and data freed since; those are not
 * said (a run without the overlap does not read them).
 */
static void keep_planned_bad(struct devread *dr, const struct io_range *plan, size_t n)
{
	struct bad_range *old = dr->bad;
	size_t nr_old = dr->nr_bad;

	dr->bad = NULL;
	dr->nr_bad = 0;
	sort_items(old, nr_old, sizeof(*old), range_cmp_bad);
	for (size_t i = 0; i < nr_old; i++) {
		uint64_t s = old[i].off, e = old[i].off + old[i].len;

		for (size_t k = first_ending_after(plan, n, s); k < n && plan[k].off < e; k++) {
			uint64_t a = plan[k].off > s ? plan[k].off : s;
			uint64_t b = plan[k].off + plan[k].len < e ? plan[k].off + plan[k].len : e;

			add_bad_range(dr, a, b - a, old[i].err);
		}
	}
	free(old);
}

/* The early pass's results are of no use (no extent list, or the ledger hashes files). */
static int drop_early(struct scrub_ctx *ctx, const char *why, unsigned long long *bytes,
		      const char **why_out)
{
	atomic_store(&ctx->devread->cancel, true);
	early_end(ctx->devread);
	report_verbose(ctx, "Phase 5: the %llu bytes read alongside phases 3 and 4 are read "
		       "again: %s", ctx->devread->early_bytes, why);
	atomic_store(&ctx->progress_base, checkpoint_covered(ctx->checkpoint));
	devverify_release(ctx);
	return run_sequential(ctx, bytes, why_out);
}

/*
 * Phase 5 after the overlap: the walk's read list less what the early
 * pass read, then the media errors of both inside that list.
 */
static int finish_overlap(struct scrub_ctx *ctx, unsigned long long *bytes, const char **why)
{
	struct devread *dr = ctx->devread;
	struct io_range *plan, *rest;
	size_t nr_plan, nr_rest;
	uint64_t data;
	int ret;

	early_live(ctx, dr);
	if (ctx->xlinks->overflow) {
		*why = "the extent list reached its bound";
		devverify_release(ctx);
		return -E2BIG;
	}
	if (ledger_hashes_files(ctx->ledger))
		return drop_early(ctx, "files have checksum records to compare", bytes, why);
	checkpoint_say_data(ctx, NULL);		/* the early pass went on from the cursor */
	crosslink_sort(ctx);
	ret = regions_plan(ctx, why);
	if (ret < 0) {
		devverify_release(ctx);
		return ret;
	}
	plan = plan_reads(ctx, &nr_plan, &data, false);
	bound_cursor(ctx, dr, plan, nr_plan);
	early_end(dr);
	dr->early = false;
	/* The pass's list has ended: what it read now counts as verified (checkpoint.h). */
	checkpoint_dev_bound(ctx->checkpoint, UINT64_MAX);
	if (dr->map_ret)
		ctx->data_began = (struct timespec){ 0 };	/* -T: nothing overlapped */
	if (dr->map_ret)
		report_verbose(ctx, "Phase 5: no reads alongside phases 3 and 4: %s",
			       dr->map_ret == -EOPNOTSUPP ? "the space map does not tell file data "
			       "from metadata (XFS without the rmapbt)" : strerror(-dr->map_ret));
	merge_verified(dr);
	keep_planned_bad(dr, plan, nr_plan);
	add_saved_bad(ctx, dr);
	rest = subtract(dr->verified, dr->nr_verified, plan, nr_plan, &nr_rest);
	if (ctx->regions)
		regions_order_reads(ctx->regions, rest, nr_rest);
	ret = read_list(dr, rest, nr_rest, false);
	report_verbose(ctx, "Phase 5: read %s in device order: %zu reads of up to %u MiB "
		       "alongside phases 3 and 4 and %zu after them, %u in flight (%s), %llu "
		       "bytes of file data in %llu bytes read, %llu of them alongside",
		       ctx->source, dr->nr_early_reads, DEVREAD_MAX >> 20, nr_rest, dr->depth,
		       dr->engine ? dr->engine : "none", (unsigned long long)data,
		       (unsigned long long)atomic_load(&dr->bytes), dr->early_bytes);
	report_end(ctx, dr, ret < 0 ? ret : dr->early_ret);
	*bytes = atomic_load(&dr->bytes);
	free(plan);
	free(rest);
	devverify_release(ctx);
	return 0;
}

int devverify_run(struct scrub_ctx *ctx, unsigned long long *bytes, const char **why)
{
	if (ctx->devread)
		return finish_overlap(ctx, bytes, why);
	return run_sequential(ctx, bytes, why);
}
