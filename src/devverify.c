/*
 * devverify: the physical-order device reader; see devverify.h.
 */
#include "devverify.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backends/backend.h"
#include "checks.h"
#include "context.h"
#include "crosslink.h"
#include "ioengine.h"
#include "ledger.h"
#include "mediamap.h"
#include "progress.h"
#include "ratelimit.h"
#include "readplan.h"
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
	atomic_bool abandon;		/* the scan ends before phase 5 */
};

/*
 * The read list: data extents in device order (readplan.h), less what the
 * reads during the walk (done) covered -- but all of a file the checksum
 * ledger hashes, which those reads did not.  *data: bytes of file data.
 */
static struct io_range *plan_reads(const struct scrub_ctx *ctx, const struct io_range *done,
				   size_t nr_done, size_t *nr, uint64_t *data)
{
	const struct xlink_list *l = &ctx->xlinks;
	struct readplan p;
	uint64_t counted = 0;	/* file data up to here is counted */
	size_t j = 0;

	readplan_init(&p, ctx->dev_size);
	*data = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct xlink_extent *x = &l->v[i];
		uint64_t s = readplan_round_down(x->phys), e = readplan_round_up(x->phys + x->len);

		if (x->unwritten || s >= ctx->dev_size)
			continue;
		/* Files in a manifest are read file by file: their digests need order. */
		if (ledger_reads_per_file(ctx->ledger, x->ino))
			continue;
		if (e > ctx->dev_size)
			e = ctx->dev_size;
		if (e > counted) {
			*data += e - (s > counted ? s : counted);
			counted = e;
		}
		if (nr_done && !ledger_hashes(ctx->ledger, x->ino))
			readplan_add_uncovered(&p, s, e, done, nr_done, &j);
		else
			readplan_add(&p, s, e);
	}
	readplan_end(&p);
	*nr = p.n;
	return p.v;
}

static bool stop_requested(void *ctx)
{
	return scrub_should_stop(ctx);
}

static bool admit(void *arg, uint64_t len)
{
	struct devread *dr = arg;

	return !scrub_should_stop(dr->ctx) && !atomic_load(&dr->abandon) && ratelimit_take(&dr->limit, len, stop_requested,
							     dr->ctx);
}

static void add_bad(struct devread *dr, uint64_t off, uint64_t len, int err)
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

static void note_op_error(struct devread *dr, int err)
{
	pthread_mutex_lock(&dr->lock);
	if (!dr->op_err)
		dr->op_err = err;
	pthread_mutex_unlock(&dr->lock);
}

/* A read of r failed: read it again block by block to find the bad ones. */
static void bisect(struct devread *dr, const struct io_range *r, char *buf)
{
	uint64_t bad_start = 0, bad_len = 0;
	int bad_err = 0;

	for (uint64_t pos = r->off; pos < r->off + r->len && !scrub_should_stop(dr->ctx);
	     pos += BAD_STEP) {
		ssize_t n = pread(dr->fd, buf, BAD_STEP, (off_t)pos);

		if (n < 0 && !errno_is_corruption(errno)) {
			note_op_error(dr, errno);
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
}

static void read_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct devread *dr = arg;

	if (res == (int64_t)r->len) {
		ledger_hash_read(dr->ctx->ledger, r->off, r->len, buf);
		atomic_fetch_add(&dr->bytes, r->len);
		progress_add(&dr->ctx->progress_done, r->len);
		return;
	}
	if (res < 0 && !errno_is_corruption((int)-res)) {
		note_op_error(dr, (int)-res);
		return;
	}
	/* A media error, or a short read inside the device: find the bad blocks. */
	bisect(dr, r, buf);
	atomic_fetch_add(&dr->bytes, r->len);
	progress_add(&dr->ctx->progress_done, r->len);
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
	if (ctx->xlinks.overflow) {
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
 * The reads during the walk (devverify_start): the plan from GETFSMAP, run
 * by a thread of its own; phase 5 joins it, or devverify_abandon() stops it.
 */
struct early_read {
	struct devread dr;
	struct io_range *reads;
	size_t nr_reads;
	uint64_t fsmap_bytes;
	struct io_job job;
	pthread_t thread;
	int ret;
	bool joined;
};

static void *early_main(void *arg)
{
	struct early_read *er = arg;

	er->ret = ioengine_run(&er->job);
	return NULL;
}

static void devread_init(struct devread *dr, struct scrub_ctx *ctx, int fd)
{
	*dr = (struct devread){ .ctx = ctx, .fd = fd };
	ratelimit_init(&dr->limit, ctx->opt.limit_rate);
	pthread_mutex_init(&dr->lock, NULL);
}

static void devread_destroy(struct devread *dr)
{
	free(dr->bad);
	pthread_mutex_destroy(&dr->lock);
	ratelimit_destroy(&dr->limit);
	close(dr->fd);
}

static void job_init(struct io_job *job, struct devread *dr, const struct io_range *reads,
		     size_t nr_reads)
{
	*job = (struct io_job){
		.fd = dr->fd, .ranges = reads, .nr_ranges = nr_reads,
		.depth = dr->ctx->opt.background ? 1 : DEVREAD_DEPTH,
		.max_len = DEVREAD_MAX, .align = BAD_STEP,
		.no_uring = getenv("FSCRUB_DEBUG_NO_URING") != NULL,
		.admit = admit, .done = read_done, .arg = dr,
	};
}

/*
 * Why the device cannot be read while the tree is walked, or NULL.  The
 * checksum ledger's --record, --ledger and --manifest need every file's
 * bytes matched to the file as they are read, which GETFSMAP alone cannot
 * give on every filesystem: then the device is read after the walk.
 */
static const char *no_early_read(const struct scrub_ctx *ctx)
{
	if (!ctx->opt.verify_data || ctx->ops->scan_data || !ctx->dev_size)
		return "";
	if (getenv("FSCRUB_DEBUG_NO_DEVREAD"))
		return "";
	if (getenv("FSCRUB_DEBUG_NO_EARLY_READ"))
		return "FSCRUB_DEBUG_NO_EARLY_READ is set";
	if (ctx->opt.record || ctx->opt.ledger_dir || ctx->opt.manifest_path)
		return "the checksum ledger hashes files as the device is read";
	return NULL;
}

void devverify_start(struct scrub_ctx *ctx)
{
	const char *why = no_early_read(ctx);
	struct early_read *er;
	struct readplan p;
	int fd, ret;

	if (why) {
		if (why[0])
			report_verbose(ctx, "Phase 3: the device is read after the walk: %s", why);
		return;
	}
	fd = open_device(ctx, &why);
	if (fd < 0)
		return;		/* phase 5 says why */
	readplan_init(&p, ctx->dev_size);
	er = xcalloc(1, sizeof(*er));
	ret = readplan_from_fsmap(ctx, &p, &er->fsmap_bytes);
	if (ret < 0) {
		report_verbose(ctx, "Phase 3: the device is read after the walk: GETFSMAP: %s",
			       strerror(-ret));
		free(er);
		close(fd);
		return;
	}
	er->reads = p.v;
	er->nr_reads = p.n;
	devread_init(&er->dr, ctx, fd);
	job_init(&er->job, &er->dr, er->reads, er->nr_reads);
	ret = pthread_create(&er->thread, NULL, early_main, er);
	if (ret) {
		report_verbose(ctx, "Phase 3: the device is read after the walk: %s",
			       strerror(ret));
		devread_destroy(&er->dr);
		free(er->reads);
		free(er);
		return;
	}
	report_verbose(ctx, "Phase 3: reading %s in device order while the tree is walked: "
		       "%llu bytes that GETFSMAP does not list as free space or metadata, %zu reads",
		       ctx->source, (unsigned long long)er->fsmap_bytes, er->nr_reads);
	ctx->early_read = er;
}

static void early_join(struct early_read *er)
{
	if (!er->joined)
		pthread_join(er->thread, NULL);
	er->joined = true;
}

void devverify_abandon(struct scrub_ctx *ctx)
{
	struct early_read *er = ctx->early_read;

	if (!er)
		return;
	atomic_store(&er->dr.abandon, true);
	early_join(er);
	devread_destroy(&er->dr);
	free(er->reads);
	free(er);
	ctx->early_read = NULL;
}

int devverify_run(struct scrub_ctx *ctx, unsigned long long *bytes, const char **why)
{
	struct early_read *er = ctx->early_read;
	struct devread fresh, *dr = &fresh;
	const struct io_range *done = NULL;
	size_t nr_done = 0, nr_reads;
	struct io_range *reads;
	uint64_t data;
	int ret = 0, fd;

	if (er) {
		early_join(er);
		if (er->ret < 0)
			report_operational(ctx, NULL, NULL, -er->ret, "cannot read %s", ctx->source);
	}
	fd = open_device(ctx, why);
	if (fd < 0) {
		devverify_abandon(ctx);		/* the file-by-file reader sees it all */
		return fd;
	}
	if (er) {
		close(fd);
		dr = &er->dr;
		done = er->reads;
		nr_done = er->nr_reads;
	} else {
		devread_init(dr, ctx, fd);
	}
	crosslink_sort(ctx);
	ledger_device_begin(ctx->ledger, &ctx->xlinks);
	reads = plan_reads(ctx, done, nr_done, &nr_reads, &data);

	struct io_job job;

	job_init(&job, dr, reads, nr_reads);
	ret = ioengine_run(&job);
	if (er)
		report_verbose(ctx, "Phase 5: read %s in device order during the walk: %zu reads "
			       "of up to %u MiB, %u in flight (%s); after it, %zu reads of what "
			       "the walk found outside them", ctx->source, er->nr_reads,
			       DEVREAD_MAX >> 20, er->job.depth,
			       er->job.engine ? er->job.engine : "none", nr_reads);
	report_verbose(ctx, "Phase 5: read %s in device order: %zu reads of up to %u MiB, "
		       "%u in flight (%s), %llu bytes of file data in %llu bytes read",
		       ctx->source, nr_reads + nr_done, DEVREAD_MAX >> 20, job.depth,
		       job.engine ? job.engine : er && er->job.engine ? er->job.engine : "none",
		       (unsigned long long)data, (unsigned long long)atomic_load(&dr->bytes));
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot read %s", ctx->source);
	else if (dr->op_err)
		report_operational(ctx, NULL, NULL, dr->op_err, "reading %s", ctx->source);
	if (dr->bad_overflow)
		str_error(ctx, CHECK_MEDIA_FILE, NULL, NULL, 0,
			  "more than %d unreadable ranges on %s: only the first are examined",
			  MAX_BAD_RANGES, ctx->source);
	if (dr->nr_bad && !scrub_should_stop(ctx)) {
		mediamap_report(ctx, dr->fd, dr->bad, dr->nr_bad);
	}
	*bytes = atomic_load(&dr->bytes);
	free(reads);
	if (er)
		devverify_abandon(ctx);
	else
		devread_destroy(dr);
	return 0;
}
