/*
 * dataverify: the per-file data reader; see dataverify.h.
 */
#include "data/dataverify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/checkpoint.h"
#include "report/checks.h"
#include "scan/context.h"
#include "lib/inoset.h"
#include "data/ledger.h"
#include "data/ratelimit.h"
#include "data/regions.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

/* 4 MiB reads: large enough to stream a disk, small enough per thread. */
#define VERIFY_CHUNK (4U << 20)
/* O_DIRECT alignment that every block device and filesystem accepts. */
#define DIO_ALIGN 4096U
/* Granularity when a failed read is bisected into good and bad ranges. */
#define BAD_RANGE_STEP 4096U
/* At most this many bad ranges are itemised per file. */
#define MAX_BAD_RANGES 16

struct verify_thread {
	char *buf;
};

static void *verify_thread_init(struct scrub_ctx *ctx, unsigned index)
{
	struct verify_thread *vt = xcalloc(1, sizeof(*vt));

	(void)ctx;
	(void)index;
	if (posix_memalign((void **)&vt->buf, DIO_ALIGN, VERIFY_CHUNK))
		vt->buf = NULL;
	return vt;
}

static void verify_thread_free(void *p)
{
	struct verify_thread *vt = p;

	free(vt->buf);
	free(vt);
}

struct verify_file {
	struct walk_thread *t;
	const struct walk_dir *d;
	const struct walk_entry *e;
	const struct dataverify_args *args;
	int fd;
	bool direct;
	unsigned nr_bad;
	struct ledger_stream *ledger;	/* the checksum ledger's digest, or NULL */
};

static bool should_stop(void *ctx)
{
	return scrub_should_stop(ctx);
}

static void report_bad_range(struct verify_file *vf, uint64_t off, uint64_t len, int err)
{
	struct scrub_ctx *ctx = vf->t->ctx;

	if (++vf->nr_bad > MAX_BAD_RANGES) {
		if (vf->nr_bad == MAX_BAD_RANGES + 1)
			str_error(ctx, CHECK_DATA_READ, vf->d->node, vf->e->name,
				  vf->e->stx.stx_ino, "more than %d unreadable ranges; "
				  "further ones are not listed", MAX_BAD_RANGES);
		return;
	}
	str_error_range(ctx, CHECK_DATA_READ, vf->d->node, vf->e->name, vf->e->stx.stx_ino,
			off, len, "read error at offset %llu (%llu bytes): %s",
			(unsigned long long)off, (unsigned long long)len, strerror(err));
}

/* pread that drops O_DIRECT for the rest of the file if it is refused. */
static ssize_t verify_pread(struct verify_file *vf, char *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(vf->fd, buf, len, (off_t)off);

	if (n < 0 && errno == EINVAL && vf->direct) {
		int fl = fcntl(vf->fd, F_GETFL);

		if (fl >= 0 && fcntl(vf->fd, F_SETFL, fl & ~O_DIRECT) == 0) {
			vf->direct = false;
			posix_fadvise(vf->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
			n = pread(vf->fd, buf, len, (off_t)off);
		}
	}
	return n;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * One block of a bisection, through the rate limiter: --limit's bandwidth
 * covers it, and --limit auto counts it as ours without taking its
 * latency for the device's (ratelimit_note_aside).  -ECANCELED if a stop
 * came while it waited.
 */
static ssize_t bisect_read(struct verify_file *vf, char *buf, uint64_t pos)
{
	ssize_t n;
	int err;

	if (!ratelimit_take(vf->args->limit, BAD_RANGE_STEP, should_stop, vf->t->ctx))
		return -ECANCELED;
	n = verify_pread(vf, buf, BAD_RANGE_STEP, pos);
	err = errno;
	ratelimit_note_aside(vf->args->limit, n > 0 ? (uint64_t)n : 0);
	errno = err;		/* (the caller looks at it) */
	return n;
}

/* A read of [off, off+len) failed: find and report the bad ranges in it. */
static void bisect_failure(struct verify_file *vf, char *buf, uint64_t off, uint64_t len)
{
	uint64_t bad_start = 0, bad_len = 0;
	int bad_err = 0;

	for (uint64_t pos = off; pos < off + len && !scrub_should_stop(vf->t->ctx);
	     pos += BAD_RANGE_STEP) {
		ssize_t n = bisect_read(vf, buf, pos);

		if (n == -ECANCELED)
			break;
		if (n >= 0 || !errno_is_corruption(errno)) {
			if (bad_len)
				report_bad_range(vf, bad_start, bad_len, bad_err);
			bad_len = 0;
			if (n == 0)
				return;		/* end of file */
			continue;
		}
		if (!bad_len)
			bad_start = pos, bad_err = errno;
		bad_len += BAD_RANGE_STEP;
	}
	if (bad_len)
		report_bad_range(vf, bad_start, bad_len, bad_err);
}

/* Read [start, end) of the file; returns false to give up on the file. */
static bool verify_range(struct verify_file *vf, char *buf, uint64_t start, uint64_t end)
{
	struct scrub_ctx *ctx = vf->t->ctx;

	for (uint64_t off = start & ~(uint64_t)(DIO_ALIGN - 1); off < end;) {
		size_t want = VERIFY_CHUNK;

		if (scrub_should_stop(ctx) || (vf->args->budget && regions_budget_spent(ctx)))
			return false;
		if (end - off < want)
			want = (size_t)((end - off + DIO_ALIGN - 1) & ~(uint64_t)(DIO_ALIGN - 1));
		if (!ratelimit_take(vf->args->limit, want, should_stop, ctx))
			return false;
		uint64_t t0 = now_ns();
		ssize_t n = verify_pread(vf, buf, want, off);

		ratelimit_note(vf->args->limit, n > 0 ? (uint64_t)n : 0, now_ns() - t0);

		if (n < 0) {
			if (!errno_is_corruption(errno)) {
				report_operational(ctx, vf->d->node, vf->e->name, errno,
						   "cannot read at offset %llu",
						   (unsigned long long)off);
				return false;
			}
			bisect_failure(vf, buf, off, want);
			ledger_stream_fail(vf->ledger);
			off += want;
			continue;
		}
		if (n == 0)
			return false;	/* truncated meanwhile: the rest is gone */
		ledger_stream_feed(vf->ledger, off, buf, (uint64_t)n);
		vf->t->stats.bytes_read += (unsigned long long)n;
		progress_add(&ctx->progress_done, (unsigned long long)n);
		if (!vf->direct)
			posix_fadvise(vf->fd, (off_t)off, n, POSIX_FADV_DONTNEED);
		off += (uint64_t)n;
	}
	return true;
}

/*
 * --since: has the file (open on fd) changed since the date, or, with a
 * --ledger database, no record of its current version (never hashed as it
 * is)?  If not, it is counted as skipped.
 */
static bool changed_since(struct dataverify_since *since, const struct walk_entry *e, int fd)
{
	const struct statx *stx = &e->stx;

	if ((int64_t)stx_ns(&stx->stx_mtime) >= since->ns ||
	    (int64_t)stx_ns(&stx->stx_ctime) >= since->ns)
		return true;
	if (since->ledger && !ledger_has_current_record(since->ledger, fd, stx))
		return true;
	atomic_fetch_add(&since->skipped, 1);
	/* st_blocks counts 512-byte units whatever the block size. */
	atomic_fetch_add(&since->skipped_bytes, (unsigned long long)stx->stx_blocks * 512);
	return false;
}

/* Is the file in args->only, or (by its subvolume) in args->only_sv? */
static bool listed(const struct dataverify_args *args, const struct statx *stx)
{
	struct ino_key id = ino_key_of(stx);
	struct subvol_ino sv = { .ino = stx->stx_ino };

	if (find_item(&id, args->only, args->nr_only, sizeof(*args->only), ino_key_cmp))
		return true;
	return args->nr_only_sv && stx_subvol(stx, &sv.subvol) &&
	       find_item(&sv, args->only_sv, args->nr_only_sv, sizeof(*args->only_sv),
			 subvol_ino_cmp);
}

/* --portion, --time-budget by file: is the file's bucket read now?  Counts its bytes. */
static bool in_bucket(struct scrub_ctx *ctx, const struct dataverify_args *args,
		      const struct statx *stx)
{
	size_t b = regions_bucket_of(stx);

	/* st_blocks counts 512-byte units whatever the block size. */
	if (args->bucket_bytes)
		atomic_fetch_add(&args->bucket_bytes[b], (unsigned long long)stx->stx_blocks * 512);
	return args->buckets[b] && !(args->budget && regions_budget_spent(ctx));
}

static void verify_entry(struct walk_thread *t, struct walk_dir *d,
			 const struct walk_entry *e)
{
	struct verify_thread *vt = t->vstate;
	const struct dataverify_args *args = t->varg;
	struct verify_file vf = { .t = t, .d = d, .e = e, .args = args, .direct = true };
	unsigned long long bytes_before;

	if (e->stat_err || e->submount || !S_ISREG(e->stx.stx_mode) || !vt->buf)
		return;
	if (args->only && !listed(args, &e->stx))
		return;
	struct ino_key id = ino_key_of(&e->stx);

	/* Read to its end by the run this one resumes (checkpoint.h). */
	if (checkpoint_file_skip(t->ctx->checkpoint, id))
		return;
	/* Read each inode once, whatever number of names it has. */
	if (e->seen_before || (e->stx.stx_nlink > 1 &&
			       inoset_test_and_set(args->linked, stx_devno(&e->stx),
						   e->stx.stx_ino)))
		return;
	if (args->buckets && !in_bucket(t->ctx, args, &e->stx))
		return;
	vf.fd = walk_open_file(t, d, e, O_DIRECT);
	if (vf.fd == -EINVAL) {
		vf.direct = false;
		vf.fd = walk_open_file(t, d, e, 0);
	}
	if (vf.fd < 0)
		return;
	if (args->since && !changed_since(args->since, e, vf.fd)) {
		close(vf.fd);
		return;
	}
	t->stats.files++;
	bytes_before = t->stats.bytes_read;
	vf.ledger = ledger_stream_begin(t->ctx->ledger, e);
	if (!vf.direct)
		posix_fadvise(vf.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (uint64_t pos = 0;;) {
		off_t data = lseek(vf.fd, (off_t)pos, SEEK_DATA);
		off_t hole = data < 0 ? -1 : lseek(vf.fd, data, SEEK_HOLE);

		if (data < 0 && errno == ENXIO)
			break;		/* no more data */
		if (data < 0 || hole < 0) {
			/*
			 * The extent map itself cannot be read (or SEEK_DATA is not
			 * supported): read everything up to EOF, so that each
			 * unreadable range is still found and reported.
			 */
			if (!verify_range(&vf, vt->buf, pos, e->stx.stx_size))
				ledger_stream_fail(vf.ledger);
			break;
		}
		if (hole <= data ||
		    !verify_range(&vf, vt->buf, (uint64_t)data, (uint64_t)hole)) {
			ledger_stream_fail(vf.ledger);
			break;
		}
		pos = (uint64_t)hole;
	}
	ledger_stream_end(t, d, e, vf.fd, vf.ledger);
	close(vf.fd);
	/* A read cut short by a stop is not done: the resumed run reads the file again. */
	if (!scrub_should_stop(t->ctx))
		checkpoint_file_done(t->ctx->checkpoint, id, t->stats.bytes_read - bytes_before);
	checkpoint_tick(t->ctx);
}

const struct walk_visitor dataverify_visitor = {
	.name = "data verification",
	.thread_init = verify_thread_init,
	.thread_free = verify_thread_free,
	.entry = verify_entry,
};
