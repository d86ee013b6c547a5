/*
 * Unit tests for ioengine: every range read once, and never more reads in
 * flight than depth_now() allows at the time (--limit auto shortens the
 * data scan's queue), with io_uring and with the pread thread pool.
 *
 * A read counts as in flight from admit() to the end of done(); done()
 * sleeps a little so that the pool's threads overlap.  After the 16th
 * read depth_now() says 0 a few times (a probe): nothing may start then,
 * and what was in flight is reaped.  With buffer(), ranges go straight
 * into the caller's buffers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/ioengine.h"

#define NR 48
#define LEN 65536

struct probe {
	atomic_uint inflight;
	atomic_uint admitted;
	unsigned max_seen[3];		/* most in flight in each phase */
	unsigned seen[NR];		/* done() calls per range */
	bool bad_data;
	unsigned zeros;			/* 0 answers given */
	bool last_zero;			/* the last answer was 0 */
	bool admitted_in_pause;
	unsigned inflight_at_resume;
};

#define PAUSE_ANSWERS 8

/* Four in flight for the first 16 reads, one for the next 16, then two. */
static unsigned cap_at(unsigned admitted)
{
	return admitted < 16 ? 4 : admitted < 32 ? 1 : 2;
}

static unsigned depth_now(void *arg)
{
	struct probe *p = arg;
	unsigned n = atomic_load(&p->admitted);

	if (n == 16 && p->zeros < PAUSE_ANSWERS) {
		p->zeros++;
		p->last_zero = true;
		return 0;
	}
	if (p->last_zero)
		p->inflight_at_resume = atomic_load(&p->inflight);
	p->last_zero = false;
	return cap_at(n);
}

static bool admit(void *arg, uint64_t len)
{
	struct probe *p = arg;
	unsigned n = atomic_load(&p->admitted);
	unsigned now = atomic_fetch_add(&p->inflight, 1) + 1;
	unsigned phase = n < 16 ? 0 : n < 32 ? 1 : 2;

	(void)len;
	if (p->last_zero)
		p->admitted_in_pause = true;
	/* The pool's admits are serialised: n and the phase are this read's. */
	if (now > p->max_seen[phase])
		p->max_seen[phase] = now;
	atomic_fetch_add(&p->admitted, 1);
	return true;
}

static void done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct probe *p = arg;
	unsigned i = (unsigned)(r->off / LEN);
	struct timespec ts = { 0, 2000000 };

	if (res != LEN || (unsigned char)buf[0] != i || (unsigned char)buf[LEN - 1] != i)
		p->bad_data = true;
	p->seen[i]++;
	nanosleep(&ts, NULL);
	atomic_fetch_sub(&p->inflight, 1);
}

/* A deleted temporary file of NR ranges of LEN bytes, range i filled with byte i. */
static int make_file(struct io_range *ranges)
{
	char path[] = "/tmp/fscrub-test-ioengine.XXXXXX";
	int fd = mkstemp(path);
	static char block[LEN];

	assert_true(fd >= 0);
	unlink(path);
	for (unsigned i = 0; i < NR; i++) {
		memset(block, (int)i, sizeof(block));
		assert_int_equal(pwrite(fd, block, LEN, (off_t)i * LEN), LEN);
		ranges[i] = (struct io_range){ .off = (uint64_t)i * LEN, .len = LEN };
	}
	return fd;
}

static void run(bool no_uring, const char *want_engine)
{
	struct io_range ranges[NR];
	int fd = make_file(ranges);
	struct probe p = { 0 };

	struct io_job job = {
		.fd = fd, .ranges = ranges, .nr_ranges = NR, .depth = 4, .max_len = LEN,
		.align = 4096, .no_uring = no_uring, .admit = admit, .done = done,
		.depth_now = depth_now, .arg = &p,
	};

	assert_int_equal(ioengine_run(&job), 0);
	close(fd);
	if (want_engine && strcmp(job.engine, want_engine))
		skip();		/* io_uring refused here: the pool was tested */
	for (unsigned i = 0; i < NR; i++)
		assert_int_equal(p.seen[i], 1);
	assert_false(p.bad_data);
	for (unsigned ph = 0; ph < 3; ph++)
		assert_true(p.max_seen[ph] >= 1 && p.max_seen[ph] <= cap_at(ph * 16));
	assert_int_equal(p.zeros, PAUSE_ANSWERS);
	assert_false(p.admitted_in_pause);
	assert_int_equal(p.inflight_at_resume, 0);
	/* io_uring fills its queue up to the cap before it waits */
	if (!no_uring && !strcmp(job.engine, "io_uring"))
		assert_int_equal(p.max_seen[0], 4);
}

static void test_depth_now_uring(void **state)
{
	(void)state;
	run(false, "io_uring");
}

static void test_depth_now_pool(void **state)
{
	(void)state;
	run(true, NULL);
}

/*
 * size_now() 16 KiB: each 64 KiB range is read in four pieces, each
 * admitted (with its own length) and timed by itself, never more pieces
 * in flight than depth_now() (2), done() once per range with all of it.
 * After the 10th piece (in the middle of a range) depth_now() says 0 a
 * few times: no piece starts then, and the ranges read in part go on.
 */
#define PIECE 16384

struct pieces {
	atomic_uint inflight, admitted;
	unsigned max_inflight, zeros;
	bool bad_len, admitted_in_pause, last_zero;
	unsigned seen[NR];
	bool bad_data;
};

static unsigned pieces_depth(void *arg)
{
	struct pieces *p = arg;

	if (atomic_load(&p->admitted) == 10 && p->zeros < PAUSE_ANSWERS) {
		p->zeros++;
		p->last_zero = true;
		return 0;
	}
	p->last_zero = false;
	return 2;
}

static uint64_t pieces_size(void *arg)
{
	(void)arg;
	return PIECE;
}

static bool pieces_admit(void *arg, uint64_t len)
{
	struct pieces *p = arg;
	unsigned now = atomic_fetch_add(&p->inflight, 1) + 1;

	if (len != PIECE)
		p->bad_len = true;
	if (p->last_zero)
		p->admitted_in_pause = true;
	if (now > p->max_inflight)
		p->max_inflight = now;
	atomic_fetch_add(&p->admitted, 1);
	return true;
}

static void pieces_timed(void *arg, uint64_t len, uint64_t lat_ns)
{
	struct pieces *p = arg;
	struct timespec ts = { 0, 1000000 };

	(void)lat_ns;
	if (len != PIECE)
		p->bad_len = true;
	nanosleep(&ts, NULL);	/* (the pool's threads overlap) */
	atomic_fetch_sub(&p->inflight, 1);
}

static void pieces_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct pieces *p = arg;
	unsigned i = (unsigned)(r->off / LEN);

	for (unsigned k = 0; k < LEN; k += PIECE)
		if (res != LEN || (unsigned char)buf[k] != i || (unsigned char)buf[k + PIECE - 1] != i)
			p->bad_data = true;
	p->seen[i]++;
}

static void run_pieces(bool no_uring, const char *want_engine)
{
	struct io_range ranges[NR];
	int fd = make_file(ranges);
	struct pieces p = { 0 };

	struct io_job job = {
		.fd = fd, .ranges = ranges, .nr_ranges = NR, .depth = 4, .max_len = LEN,
		.align = 4096, .no_uring = no_uring, .admit = pieces_admit, .done = pieces_done,
		.timed = pieces_timed, .depth_now = pieces_depth, .size_now = pieces_size,
		.arg = &p,
	};

	assert_int_equal(ioengine_run(&job), 0);
	close(fd);
	if (want_engine && strcmp(job.engine, want_engine))
		skip();
	for (unsigned i = 0; i < NR; i++)
		assert_int_equal(p.seen[i], 1);
	assert_false(p.bad_data);
	assert_false(p.bad_len);
	assert_int_equal(atomic_load(&p.admitted), NR * (LEN / PIECE));
	assert_true(p.max_inflight >= 1 && p.max_inflight <= 2);
	assert_int_equal(p.zeros, PAUSE_ANSWERS);
	assert_false(p.admitted_in_pause);
}

static void test_pieces_uring(void **state)
{
	(void)state;
	run_pieces(false, "io_uring");
}

static void test_pieces_pool(void **state)
{
	(void)state;
	run_pieces(true, NULL);
}

/*
 * buffer(): each range read straight into the caller's buffer for it (in
 * 16 KiB pieces, to cover the pieces' offsets too), done() handed that
 * buffer, and the ranges' buffers untouched by the others' reads.
 */
struct caller_bufs {
	char *buf[NR];
	unsigned seen[NR];
	bool wrong_buf;
};

static char *caller_buffer(void *arg, size_t i)
{
	return ((struct caller_bufs *)arg)->buf[i];
}

static void caller_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct caller_bufs *c = arg;
	unsigned i = (unsigned)(r->off / LEN);

	if (res != LEN || buf != c->buf[i])
		c->wrong_buf = true;
	c->seen[i]++;
}

static void run_caller_buffers(bool no_uring, const char *want_engine)
{
	struct io_range ranges[NR];
	int fd = make_file(ranges);
	struct caller_bufs c = { 0 };

	for (unsigned i = 0; i < NR; i++) {
		assert_int_equal(posix_memalign((void **)&c.buf[i], 4096, LEN), 0);
		memset(c.buf[i], 0xff, LEN);
	}
	struct io_job job = {
		.fd = fd, .ranges = ranges, .nr_ranges = NR, .depth = 4, .max_len = LEN,
		.align = 4096, .no_uring = no_uring, .done = caller_done,
		.size_now = pieces_size, .buffer = caller_buffer, .arg = &c,
	};

	assert_int_equal(ioengine_run(&job), 0);
	close(fd);
	for (unsigned i = 0; i < NR; i++) {
		for (unsigned k = 0; k < LEN; k++)
			if ((unsigned char)c.buf[i][k] != i)
				fail_msg("range %u byte %u: %u", i, k, (unsigned char)c.buf[i][k]);
		free(c.buf[i]);
	}
	if (want_engine && strcmp(job.engine, want_engine))
		skip();
	for (unsigned i = 0; i < NR; i++)
		assert_int_equal(c.seen[i], 1);
	assert_false(c.wrong_buf);
}

static void test_caller_buffers_uring(void **state)
{
	(void)state;
	run_caller_buffers(false, "io_uring");
}

static void test_caller_buffers_pool(void **state)
{
	(void)state;
	run_caller_buffers(true, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_depth_now_uring),
		cmocka_unit_test(test_depth_now_pool),
		cmocka_unit_test(test_pieces_uring),
		cmocka_unit_test(test_pieces_pool),
		cmocka_unit_test(test_caller_buffers_uring),
		cmocka_unit_test(test_caller_buffers_pool),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
