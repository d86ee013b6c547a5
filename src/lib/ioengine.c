/*
 * ioengine: io_uring, with a pread thread pool as the fallback; see
 * ioengine.h.
 *
 * io_uring is refused in many places (kernel.io_uring_disabled, seccomp
 * filters of service managers and containers, old kernels): a failing
 * io_uring_queue_init() is not an error, the pool does the same work.
 */
#include "lib/ioengine.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "lib/strbuf.h"
#include "lib/thread.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void tell_time(const struct io_job *job, int64_t res, uint64_t start)
{
	if (job->timed)
		job->timed(job->arg, res > 0 ? (uint64_t)res : 0, now_ns() - start);
}

/* Reads that may be in flight now: depth_now()'s answer, at most depth. */
static unsigned depth_now(const struct io_job *job)
{
	unsigned d = job->depth_now ? job->depth_now(job->arg) : job->depth;

	return d > job->depth ? job->depth : d;
}

/* depth_now() is 0 and nothing is in flight: ask again this much later. */
#define PAUSE_NS 10000000L

static void pause_slice(void)
{
	struct timespec ts = { 0, PAUSE_NS };

	nanosleep(&ts, NULL);
}

/* The next piece of r from pos: size_now()'s answer, aligned, at most the rest. */
static uint64_t piece_len(const struct io_job *job, const struct io_range *r, uint64_t pos)
{
	uint64_t rest = r->len - pos, max = job->size_now ? job->size_now(job->arg) : 0;

	if (max && job->align > 1)
		max -= max % job->align;
	return max && max < rest ? max : rest;
}

/* What done() is told: the piece's error, or the bytes of the range read. */
static int64_t range_result(int64_t res, uint64_t pos)
{
	return res < 0 ? res : (int64_t)pos + res;
}

/* The engine's own buffer for a slot; NULL if the caller gives each range's. */
static char *alloc_buffer(const struct io_job *job, bool *failed)
{
	void *p;

	if (job->buffer)
		return NULL;
	*failed = posix_memalign(&p, job->align, job->max_len) != 0;
	return *failed ? NULL : p;
}

/* Where range i is read: the caller's buffer for it, or the slot's own. */
static char *range_buffer(const struct io_job *job, size_t i, char *own)
{
	return job->buffer ? job->buffer(job->arg, i) : own;
}

/* ---- io_uring ----------------------------------------------------------- */

/* *started: whether any read was attempted (else the pool may take over). */
static int run_uring(struct io_job *job, bool *started)
{
	struct io_uring ring;
	unsigned depth = job->depth, inflight = 0;
	size_t next = 0;
	char **bufs, **slot_buf;	/* the slots' own buffers; the one in use */
	size_t *slot_range;
	uint64_t *slot_start, *slot_pos, *slot_len;	/* the piece in flight */
	unsigned *free_slots, nr_free = 0;
	unsigned *parked, nr_parked = 0;	/* ranges read in part, none in flight */
	bool stop = false;
	int ret = io_uring_queue_init(depth, &ring, 0);

	if (ret < 0)
		return ret;
	bufs = xcalloc(depth, sizeof(*bufs));
	slot_buf = xcalloc(depth, sizeof(*slot_buf));
	slot_range = xcalloc(depth, sizeof(*slot_range));
	slot_start = xcalloc(depth, sizeof(*slot_start));
	slot_pos = xcalloc(depth, sizeof(*slot_pos));
	slot_len = xcalloc(depth, sizeof(*slot_len));
	free_slots = xcalloc(depth, sizeof(*free_slots));
	parked = xcalloc(depth, sizeof(*parked));
	for (unsigned i = 0; i < depth; i++) {
		bool failed = false;

		bufs[i] = alloc_buffer(job, &failed);
		if (failed) {
			ret = -ENOMEM;
			goto out;
		}
		free_slots[nr_free++] = i;
	}
	job->engine = "io_uring";
	*started = true;
	while (inflight || nr_parked || (next < job->nr_ranges && !stop)) {
		/* The rest of a range read in part first, then a new range. */
		while (inflight < depth_now(job)) {
			bool fresh = !nr_parked;
			struct io_uring_sqe *sqe;

			if (fresh && (!nr_free || next >= job->nr_ranges || stop))
				break;
			unsigned slot = fresh ? free_slots[nr_free - 1] : parked[nr_parked - 1];
			const struct io_range *r = &job->ranges[fresh ? next : slot_range[slot]];
			uint64_t pos = fresh ? 0 : slot_pos[slot], len = piece_len(job, r, pos);

			if (job->admit && !job->admit(job->arg, len)) {
				stop = true;
				break;
			}
			sqe = io_uring_get_sqe(&ring);
			if (!sqe)
				break;
			if (fresh) {
				nr_free--;
				slot_buf[slot] = range_buffer(job, next, bufs[slot]);
				slot_range[slot] = next++;
				slot_pos[slot] = 0;
			} else {
				nr_parked--;
			}
			slot_len[slot] = len;
			slot_start[slot] = now_ns();
			io_uring_prep_read(sqe, job->fd, slot_buf[slot] + pos, (unsigned)len,
					   r->off + pos);
			io_uring_sqe_set_data64(sqe, slot);
			inflight++;
		}
		while (stop && nr_parked)	/* cut short: dropped, not done */
			free_slots[nr_free++] = parked[--nr_parked];
		if (!inflight) {
			if (!nr_parked && (next >= job->nr_ranges || stop))
				break;
			pause_slice();		/* depth_now() is 0: a pause */
			continue;
		}
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret < 0 && ret != -EINTR)
			goto out;
		struct io_uring_cqe *cqe;

		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			unsigned slot = (unsigned)io_uring_cqe_get_data64(cqe);
			const struct io_range *r = &job->ranges[slot_range[slot]];
			uint64_t pos = slot_pos[slot], len = slot_len[slot];
			int64_t res = cqe->res;

			io_uring_cqe_seen(&ring, cqe);
			if (res == -EINTR || res == -EAGAIN)
				res = pread(job->fd, slot_buf[slot] + pos, len, (off_t)(r->off + pos)) < 0 ?
				      -errno : (int64_t)len;
			tell_time(job, res, slot_start[slot]);
			inflight--;
			if (res == (int64_t)len && pos + len < r->len) {
				slot_pos[slot] = pos + len;
				parked[nr_parked++] = slot;
				continue;
			}
			job->done(job->arg, r, slot_buf[slot], range_result(res, pos));
			free_slots[nr_free++] = slot;
		}
	}
	ret = 0;
out:
	io_uring_queue_exit(&ring);
	for (unsigned i = 0; i < depth; i++)
		free(bufs[i]);
	free(bufs);
	free(slot_buf);
	free(slot_range);
	free(slot_start);
	free(slot_pos);
	free(slot_len);
	free(free_slots);
	free(parked);
	return ret;
}

/* ---- pread thread pool -------------------------------------------------- */

struct pool {
	struct io_job *job;
	atomic_size_t next;
	atomic_bool stop;		/* no more ranges to start */
	atomic_bool cancel;		/* admit() said stop: none more pieces either */
	pthread_mutex_t admit_lock;	/* admit() in submission order */
	pthread_mutex_t slot_lock;	/* active, under depth_now() */
	pthread_cond_t slot_freed;
	unsigned active;		/* reads between a slot taken and freed */
};

/*
 * Wait for a slot: fewer than depth_now() reads active.  An active read
 * wakes the waiters when it ends; while depth_now() is 0 there may be
 * none, so they also look again every PAUSE_NS.
 */
static void take_slot(struct pool *pool)
{
	pthread_mutex_lock(&pool->slot_lock);
	while (pool->active >= depth_now(pool->job) && !atomic_load(&pool->cancel)) {
		struct timespec until = deadline_in(PAUSE_NS);

		pthread_cond_timedwait(&pool->slot_freed, &pool->slot_lock, &until);
	}
	pool->active++;
	pthread_mutex_unlock(&pool->slot_lock);
}

/* Broadcast: depth_now() may have grown meanwhile, or a cancel be set. */
static void free_slot(struct pool *pool)
{
	pthread_mutex_lock(&pool->slot_lock);
	pool->active--;
	pthread_cond_broadcast(&pool->slot_freed);
	pthread_mutex_unlock(&pool->slot_lock);
}

/*
 * Read r from its first piece (len, admitted and holding a slot) to its
 * end, each further piece waiting for a slot and admitted by itself.
 * The last piece's result (*pos: where it started), still holding its
 * slot; or -ECANCELED, its slot freed, if admit() said stop.
 */
static int64_t read_pieces(struct pool *pool, const struct io_range *r, char *buf,
			   uint64_t *pos, uint64_t len)
{
	struct io_job *job = pool->job;

	for (;;) {
		uint64_t start = now_ns();
		ssize_t n = pread(job->fd, buf + *pos, len, (off_t)(r->off + *pos));
		int64_t res = n < 0 ? -errno : n;

		tell_time(job, res, start);
		if (res != (int64_t)len || *pos + len >= r->len)
			return res;
		*pos += len;
		free_slot(pool);
		pthread_mutex_lock(&pool->admit_lock);
		take_slot(pool);
		len = piece_len(job, r, *pos);
		bool go = !atomic_load(&pool->cancel) && (!job->admit || job->admit(job->arg, len));

		if (!go)
			atomic_store(&pool->cancel, true);
		pthread_mutex_unlock(&pool->admit_lock);
		if (!go) {
			atomic_store(&pool->stop, true);
			free_slot(pool);
			return -ECANCELED;
		}
	}
}

static void *pool_thread(void *p)
{
	struct pool *pool = p;
	struct io_job *job = pool->job;
	bool failed = false;
	char *own = alloc_buffer(job, &failed);

	if (failed) {
		atomic_store(&pool->stop, true);
		return NULL;
	}
	while (!atomic_load(&pool->stop)) {
		pthread_mutex_lock(&pool->admit_lock);
		take_slot(pool);
		size_t i = atomic_fetch_add(&pool->next, 1);
		const struct io_range *r = i < job->nr_ranges ? &job->ranges[i] : NULL;
		uint64_t pos = 0, len = r ? piece_len(job, r, 0) : 0;
		bool go = r && !atomic_load(&pool->stop);

		if (go && job->admit && !job->admit(job->arg, len)) {
			go = false;
			atomic_store(&pool->cancel, true);
		}
		pthread_mutex_unlock(&pool->admit_lock);
		if (!go) {
			atomic_store(&pool->stop, true);
			free_slot(pool);
			break;
		}
		char *buf = range_buffer(job, i, own);
		int64_t res = read_pieces(pool, r, buf, &pos, len);

		if (res == -ECANCELED)
			break;		/* cut short by a stop: dropped */
		job->done(job->arg, r, buf, range_result(res, pos));
		free_slot(pool);
	}
	free(own);
	return NULL;
}

static int run_pool(struct io_job *job)
{
	struct pool pool = { .job = job };
	pthread_t *tids = xcalloc(job->depth, sizeof(*tids));
	unsigned started = 0;

	pthread_mutex_init(&pool.admit_lock, NULL);
	pthread_mutex_init(&pool.slot_lock, NULL);
	cond_init_monotonic(&pool.slot_freed);
	job->engine = "pread";
	for (unsigned i = 0; i < job->depth; i++) {
		if (thread_start(&tids[i], pool_thread, &pool))
			break;
		started++;
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pthread_mutex_destroy(&pool.admit_lock);
	pthread_mutex_destroy(&pool.slot_lock);
	pthread_cond_destroy(&pool.slot_freed);
	free(tids);
	return started ? 0 : -EAGAIN;
}

int ioengine_run(struct io_job *job)
{
	if (!job->depth)
		job->depth = 1;
	if (!job->no_uring) {
		bool started = false;
		int ret = run_uring(job, &started);

		if (started)
			return ret;
	}
	return run_pool(job);
}
