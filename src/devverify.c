/*
 * devverify: the physical-order device reader; see devverify.h.
 */
#include "devverify.h"

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

#include "adaptive.h"
#include "checkpoint.h"
#include "checks.h"
#include "context.h"
#include "crosslink.h"
#include "ioengine.h"
#include "ledger.h"
#include "mediamap.h"
#include "progress.h"
#include "ratelimit.h"
#include "regions.h"
#include "report.h"
#include "strbuf.h"
#include "walk.h"

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
};

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
 * then in the regions' reading order (regions.h).  *data: bytes of file
 * data covered.
 */
static struct io_range *plan_reads(const struct scrub_ctx *ctx, size_t *nr, uint64_t *data)
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
	if (rp)
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

	return ratelimit_depth(&dr->limit);
}

static uint64_t size_now(void *arg)
{
	struct devread *dr = arg;

	return ratelimit_size(&dr->limit);
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

static void read_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct devread *dr = arg;
	struct region_plan *rp = dr->ctx->regions;

	if (res == (int64_t)r->len) {
		/* --portion, --time-budget: no file is known to be read whole, nothing to judge */
		if (!regions_mode(&dr->ctx->opt))
			ledger_hash_read(dr->ctx->ledger, r->off, r->len, buf);
		atomic_fetch_add(&dr->bytes, r->len);
		progress_add(&dr->ctx->progress_done, r->len);
		regions_read_done(rp, r->off, true);
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
	regions_read_done(rp, r->off, bisect(dr, r, buf));
	atomic_fetch_add(&dr->bytes, r->len);
	progress_add(&dr->ctx->progress_done, r->len);
	/* A bisection cut short by a stop did not read the rest: not done. */
	if (!scrub_should_stop(dr->ctx))
		checkpoint_dev_done(dr->ctx->checkpoint, (size_t)(r - dr->reads));
	checkpoint_tick(dr->ctx);
}

/*
 * Resuming (checkpoint.h): not when the ledger hashes files or with
 * --portion (the regions read are the run history's), and the media errors
 * the stopped run found, reported with this run's.
 */
static void resume_cursor(struct scrub_ctx *ctx, struct devread *dr)
{
	bool restart = regions_mode(&ctx->opt) || ledger_hashes_files(ctx->ledger);
	const struct bad_range *bad;
	size_t n;

	if (restart && checkpoint_covered(ctx->checkpoint))
		report_verbose(ctx, "Phase 5: %s: the device is read from its start",
			       regions_mode(&ctx->opt) ? "--portion or --time-budget" :
			       "the checksum ledger needs whole files");
	checkpoint_dev_begin(ctx->checkpoint, restart);
	if (restart)
		atomic_store(&ctx->progress_base, 0);
	bad = checkpoint_dev_saved_bad(ctx->checkpoint, &n);
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

int devverify_run(struct scrub_ctx *ctx, unsigned long long *bytes, const char **why)
{
	struct devread dr = { .ctx = ctx };
	struct io_range *reads;
	size_t nr_reads;
	uint64_t data;
	int ret;

	dr.fd = open_device(ctx, why);
	if (dr.fd < 0)
		return dr.fd;
	crosslink_sort(ctx);
	ret = regions_plan(ctx, why);
	if (ret < 0) {
		close(dr.fd);
		return ret;
	}
	if (!regions_mode(&ctx->opt))
		ledger_device_begin(ctx->ledger, ctx->xlinks);
	pthread_mutex_init(&dr.lock, NULL);
	resume_cursor(ctx, &dr);
	reads = plan_reads(ctx, &nr_reads, &data);
	dr.reads = reads;
	checkpoint_dev_plan(ctx->checkpoint, reads, nr_reads);
	unsigned depth = ctx->opt.background ? 1 : DEVREAD_DEPTH;
	unsigned maj = ctx->root_stx.stx_dev_major, min = ctx->root_stx.stx_dev_minor;
	uint64_t req = smallest_read(maj, min), auto_max = AUTO_MAX;

	if (ctx->opt.limit_auto)	/* (a tag or two: fewer and smaller reads) */
		adaptive_fit_queue(queue_limit(maj, min, "nr_requests"), req, &depth, &auto_max);
	ratelimit_init(&dr.limit, ctx->opt.limit_rate, ctx->opt.limit_auto, depth, report_limit,
		       ctx);
	ratelimit_watch_device(&dr.limit, maj, min);
	ratelimit_split_reads(&dr.limit, req, auto_max);

	struct io_job job = {
		.fd = dr.fd, .ranges = reads, .nr_ranges = nr_reads, .depth = depth,
		.max_len = DEVREAD_MAX, .align = BAD_STEP,
		.no_uring = getenv("FSCRUB_DEBUG_NO_URING") != NULL,
		.admit = admit, .done = read_done, .timed = timed, .depth_now = depth_now,
		.size_now = size_now, .arg = &dr,
	};
	ret = ioengine_run(&job);
	checkpoint_dev_end(ctx->checkpoint);
	report_verbose(ctx, "Phase 5: read %s in device order: %zu reads of up to %u MiB, "
		       "%u in flight (%s), %llu bytes of file data in %llu bytes read",
		       ctx->source, nr_reads, DEVREAD_MAX >> 20, job.depth,
		       job.engine ? job.engine : "none", (unsigned long long)data,
		       (unsigned long long)atomic_load(&dr.bytes));
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot read %s", ctx->source);
	else if (dr.op_err)
		report_operational(ctx, NULL, NULL, dr.op_err, "reading %s", ctx->source);
	if (dr.bad_overflow)
		str_error(ctx, CHECK_MEDIA_FILE, NULL, NULL, 0,
			  "more than %d unreadable ranges on %s: only the first are examined",
			  MAX_BAD_RANGES, ctx->source);
	if (dr.nr_bad && !scrub_should_stop(ctx))
		mediamap_report(ctx, dr.fd, dr.bad, dr.nr_bad);
	/* The regions read to their end: the history records them. */
	regions_finish(ctx->regions, ret >= 0 && !stop_requested(ctx));
	*bytes = atomic_load(&dr.bytes);
	free(dr.bad);
	free(reads);
	pthread_mutex_destroy(&dr.lock);
	ratelimit_destroy(&dr.limit);
	close(dr.fd);
	return 0;
}
