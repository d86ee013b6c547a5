/*
 * ioengine: io_uring, with a pread thread pool as the fallback; see
 * ioengine.h.
 *
 * io_uring is refused in many places (kernel.io_uring_disabled, seccomp
 * filters of service managers and containers, old kernels): a failing
 * io_uring_queue_init() is not an error, the pool does the same work.
 */
#include "ioengine.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "strbuf.h"

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

static char *alloc_buffer(const struct io_job *job)
{
	void *p;

	return posix_memalign(&p, job->align, job->max_len) ? NULL : p;
}

/* ---- io_uring ----------------------------------------------------------- */

/* *started: whether any read was attempted (else the pool may take over). */
static int run_uring(struct io_job *job, bool *started)
{
	struct io_uring ring;
	unsigned depth = job->depth, inflight = 0;
	size_t next = 0;
	char **bufs;
	size_t *slot_range;
	uint64_t *slot_start;
	unsigned *free_slots, nr_free = 0;
	bool stop = false;
	int ret = io_uring_queue_init(depth, &ring, 0);

	if (ret < 0)
		return ret;
	bufs = xcalloc(depth, sizeof(*bufs));
	slot_range = xcalloc(depth, sizeof(*slot_range));
	slot_start = xcalloc(depth, sizeof(*slot_start));
	free_slots = xcalloc(depth, sizeof(*free_slots));
	for (unsigned i = 0; i < depth; i++) {
		bufs[i] = alloc_buffer(job);
		if (!bufs[i]) {
			ret = -ENOMEM;
			goto out;
		}
		free_slots[nr_free++] = i;
	}
	job->engine = "io_uring";
	*started = true;
	while (inflight || (next < job->nr_ranges && !stop)) {
		while (nr_free && next < job->nr_ranges && !stop && inflight < depth_now(job)) {
			const struct io_range *r = &job->ranges[next];
			struct io_uring_sqe *sqe;

			if (job->admit && !job->admit(job->arg, r->len)) {
				stop = true;
				break;
			}
			sqe = io_uring_get_sqe(&ring);
			if (!sqe)
				break;
			unsigned slot = free_slots[--nr_free];

			slot_range[slot] = next++;
			slot_start[slot] = now_ns();
			io_uring_prep_read(sqe, job->fd, bufs[slot], (unsigned)r->len, r->off);
			io_uring_sqe_set_data64(sqe, slot);
			inflight++;
		}
		if (!inflight) {
			if (next >= job->nr_ranges || stop)
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
			int64_t res = cqe->res;

			io_uring_cqe_seen(&ring, cqe);
			if (res == -EINTR || res == -EAGAIN)
				res = pread(job->fd, bufs[slot], r->len, (off_t)r->off) < 0 ?
				      -errno : (int64_t)r->len;
			tell_time(job, res, slot_start[slot]);
			job->done(job->arg, r, bufs[slot], res);
			free_slots[nr_free++] = slot;
			inflight--;
		}
	}
	ret = 0;
out:
	io_uring_queue_exit(&ring);
	for (unsigned i = 0; i < depth; i++)
		free(bufs[i]);
	free(bufs);
	free(slot_range);
	free(slot_start);
	free(free_slots);
	return ret;
}

/* ---- pread thread pool -------------------------------------------------- */

struct pool {
	struct io_job *job;
	atomic_size_t next;
	atomic_bool stop;
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
	while (pool->active >= depth_now(pool->job) && !atomic_load(&pool->stop)) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += PAUSE_NS;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&pool->slot_freed, &pool->slot_lock, &until);
	}
	pool->active++;
	pthread_mutex_unlock(&pool->slot_lock);
}

/* Broadcast: depth_now() may have grown meanwhile, or a stop be set. */
static void free_slot(struct pool *pool)
{
	pthread_mutex_lock(&pool->slot_lock);
	pool->active--;
	pthread_cond_broadcast(&pool->slot_freed);
	pthread_mutex_unlock(&pool->slot_lock);
}

static void *pool_thread(void *p)
{
	struct pool *pool = p;
	struct io_job *job = pool->job;
	char *buf = alloc_buffer(job);

	if (!buf) {
		atomic_store(&pool->stop, true);
		return NULL;
	}
	while (!atomic_load(&pool->stop)) {
		pthread_mutex_lock(&pool->admit_lock);
		take_slot(pool);
		size_t i = atomic_fetch_add(&pool->next, 1);
		bool go = i < job->nr_ranges && !atomic_load(&pool->stop) &&
			  (!job->admit || job->admit(job->arg, job->ranges[i].len));

		pthread_mutex_unlock(&pool->admit_lock);
		if (!go) {
			atomic_store(&pool->stop, true);
			free_slot(pool);
			break;
		}
		const struct io_range *r = &job->ranges[i];
		uint64_t start = now_ns();
		ssize_t n = pread(job->fd, buf, r->len, (off_t)r->off);
		int64_t res = n < 0 ? -errno : n;

		tell_time(job, res, start);
		job->done(job->arg, r, buf, res);
		free_slot(pool);
	}
	free(buf);
	return NULL;
}

static int run_pool(struct io_job *job)
{
	struct pool pool = { .job = job };
	pthread_t *tids = xcalloc(job->depth, sizeof(*tids));
	unsigned started = 0;

	pthread_mutex_init(&pool.admit_lock, NULL);
	pthread_mutex_init(&pool.slot_lock, NULL);
	pthread_cond_init(&pool.slot_freed, NULL);
	job->engine = "pread";
	for (unsigned i = 0; i < job->depth; i++) {
		if (pthread_create(&tids[i], NULL, pool_thread, &pool))
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
