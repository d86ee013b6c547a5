/*
 * Unit tests for ratelimit: --limit parsing and the bucket's pace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "data/ratelimit.h"

static void test_parse(void **state)
{
	uint64_t r = 0;
	bool a = true;

	(void)state;
	assert_int_equal(ratelimit_parse("200M", &r, &a), 0);
	assert_int_equal(r, 200ULL << 20);
	assert_int_equal(ratelimit_parse("1.5G", &r, &a), 0);
	assert_int_equal(r, 3ULL << 29);
	assert_int_equal(ratelimit_parse("800k", &r, &a), 0);
	assert_int_equal(r, 800ULL << 10);
	assert_int_equal(ratelimit_parse("50000000", &r, &a), 0);
	assert_int_equal(r, 50000000);
	assert_int_equal(ratelimit_parse("10MB/s", &r, &a), 0);
	assert_int_equal(r, 10ULL << 20);
	assert_false(a);
	assert_int_equal(ratelimit_parse("auto", &r, &a), 0);
	assert_true(a);
	assert_int_equal(r, 0);
	assert_int_equal(ratelimit_parse("auto:64M", &r, &a), 0);
	assert_true(a);
	assert_int_equal(r, 64ULL << 20);
	const char *bad[] = { "", "0", "-5M", "abc", "5X", "5M junk", " 5M", "0.1", "nan", "inf",
			      "auto:", "auto:0", "autox", "auto:auto", "auto 5M" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(ratelimit_parse(bad[i], &r, &a), -1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 3 MB at 10 MB/s with a 1 MB burst: at least 0.2 s, whatever the machine. */
static void test_pace(void **state)
{
	struct ratelimit rl;
	double t0 = now_s();

	(void)state;
	ratelimit_init(&rl, 10000000, false, 1, NULL, NULL);
	for (int i = 0; i < 30; i++)
		assert_true(ratelimit_take(&rl, 100000, NULL, NULL));
	assert_true(now_s() - t0 >= 0.19);
	ratelimit_destroy(&rl);
	assert_true(ratelimit_take(NULL, 1ULL << 40, NULL, NULL));	/* no limit */
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * --limit auto's probe waits for the reads in flight: with one read taken
 * and not noted done, ratelimit_depth() goes to 0 at the first probe
 * (after RL_PROBE_AT intervals of 100 ms) and stays 0 while the read is
 * out, however long it takes (up to 5 s); once it is noted, the 50 ms
 * probe runs and reads may start again.  Needs PSI (the probes measure
 * it; without it there are none).
 */
static void test_probe_waits_for_reads_in_flight(void **state)
{
	struct ratelimit rl;
	double t0 = now_s(), zero_at = 0;
	int i;

	(void)state;
	if (access("/proc/pressure/io", R_OK))
		skip();
	ratelimit_init(&rl, 0, true, 4, NULL, NULL);
	assert_int_equal(ratelimit_depth(&rl), 1);		/* the slow start */
	assert_true(ratelimit_take(&rl, 1 << 20, NULL, NULL));	/* one read out */
	while (now_s() - t0 < 2 && !zero_at) {
		if (ratelimit_depth(&rl) == 0)
			zero_at = now_s();
		sleep_ms(5);
	}
	assert_true(zero_at > 0);
	for (i = 0; i < 60; i++) {		/* 600 ms: far past the old settle */
		sleep_ms(10);
		assert_int_equal(ratelimit_depth(&rl), 0);
	}
	ratelimit_note(&rl, 1 << 20, 700000000);
	for (i = 0; i < 100 && ratelimit_depth(&rl) == 0; i++)
		sleep_ms(5);
	assert_true(i < 100);			/* probe done within 0.5 s */
	ratelimit_destroy(&rl);
}

/*
 * --limit auto with reads that can be split: the scan starts with one
 * read of the smallest size (the slow start); without --limit auto, or
 * without ratelimit_split_reads(), reads are whole (0) and the depth is
 * the user's.
 */
static void test_split_reads(void **state)
{
	struct ratelimit rl;

	(void)state;
	ratelimit_init(&rl, 0, true, 4, NULL, NULL);
	assert_true(ratelimit_size(&rl) == 0);
	ratelimit_split_reads(&rl, 64 << 10, 8 << 20);
	assert_true(ratelimit_size(&rl) == 64 << 10);
	assert_int_equal(ratelimit_depth(&rl), 1);
	ratelimit_destroy(&rl);
	ratelimit_init(&rl, 0, false, 4, NULL, NULL);
	ratelimit_split_reads(&rl, 64 << 10, 8 << 20);
	assert_true(ratelimit_size(&rl) == 0);
	assert_int_equal(ratelimit_depth(&rl), 4);
	ratelimit_destroy(&rl);
	assert_true(ratelimit_size(NULL) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_pace),
		cmocka_unit_test(test_probe_waits_for_reads_in_flight),
		cmocka_unit_test(test_split_reads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
