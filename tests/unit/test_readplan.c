/*
 * Unit tests for readplan: the device reader's reads -- alignment,
 * merging through small gaps, the size cap, the device's end, and what an
 * earlier plan (the reads during the walk) left to read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "devverify.h"
#include "readplan.h"

#define KiB 1024ULL
#define MiB (1024ULL * KiB)

static void assert_read(const struct readplan *p, size_t i, uint64_t off, uint64_t len)
{
	assert_true(i < p->n);
	assert_int_equal(p->v[i].off, off);
	assert_int_equal(p->v[i].len, len);
}

static void test_align_merge_and_split(void **state)
{
	struct readplan p;

	(void)state;
	readplan_init(&p, 1ULL << 40);
	readplan_add(&p, 100, 5000);			/* [0, 8 KiB) aligned */
	readplan_add(&p, 6000, 7000);			/* inside it: dropped */
	readplan_add(&p, 8 * KiB + DEVREAD_MERGE_GAP, 300 * KiB);	/* gap = the limit: merged */
	readplan_add(&p, 300 * KiB + DEVREAD_MERGE_GAP + 4 * KiB, 400 * KiB + DEVREAD_MERGE_GAP);
	readplan_add(&p, 10 * MiB, 10 * MiB + DEVREAD_MAX + 4 * KiB);	/* split at the cap */
	readplan_end(&p);
	assert_int_equal(p.n, 4);
	assert_read(&p, 0, 0, 300 * KiB);
	assert_read(&p, 1, 300 * KiB + DEVREAD_MERGE_GAP + 4 * KiB, 96 * KiB);
	assert_read(&p, 2, 10 * MiB, DEVREAD_MAX);
	assert_read(&p, 3, 10 * MiB + DEVREAD_MAX, 4 * KiB);
	free(p.v);
}

static void test_device_end(void **state)
{
	struct readplan p;

	(void)state;
	readplan_init(&p, 1 * MiB);
	readplan_add(&p, 1 * MiB - 4 * KiB, 2 * MiB);	/* clipped */
	readplan_add(&p, 3 * MiB, 4 * MiB);		/* past the end: nothing */
	readplan_end(&p);
	assert_int_equal(p.n, 1);
	assert_read(&p, 0, 1 * MiB - 4 * KiB, 4 * KiB);
	free(p.v);
}

/* Reads done during the walk: [1, 2) MiB and [3, 4) MiB. */
static const struct io_range done[] = {
	{ .off = 1 * MiB, .len = 1 * MiB },
	{ .off = 3 * MiB, .len = 1 * MiB },
};

static void test_uncovered(void **state)
{
	struct readplan p;
	size_t cursor = 0;

	(void)state;
	readplan_init(&p, 1ULL << 40);
	/* wholly inside a done read: nothing */
	readplan_add_uncovered(&p, 1 * MiB + 4 * KiB, 1 * MiB + 8 * KiB, done, 2, &cursor);
	/* straddling the first read's end and the second's start */
	readplan_add_uncovered(&p, 2 * MiB - 4 * KiB, 3 * MiB + 4 * KiB, done, 2, &cursor);
	/* past both */
	readplan_add_uncovered(&p, 5 * MiB, 5 * MiB + 4 * KiB, done, 2, &cursor);
	readplan_end(&p);
	assert_int_equal(p.n, 2);
	assert_read(&p, 0, 2 * MiB, 1 * MiB);
	assert_read(&p, 1, 5 * MiB, 4 * KiB);
	free(p.v);
}

static void test_uncovered_spanning_both(void **state)
{
	struct readplan p;
	size_t cursor = 0;

	(void)state;
	readplan_init(&p, 1ULL << 40);
	/* before, between and after the done reads, in one extent */
	readplan_add_uncovered(&p, 0, 6 * MiB, done, 2, &cursor);
	readplan_end(&p);
	/* the pieces [0,1) [2,3) [4,6) MiB are 1 MiB apart: more than the gap */
	assert_int_equal(p.n, 3);
	assert_read(&p, 0, 0, 1 * MiB);
	assert_read(&p, 1, 2 * MiB, 1 * MiB);
	assert_read(&p, 2, 4 * MiB, 2 * MiB);
	free(p.v);
}

static void test_nothing_done(void **state)
{
	struct readplan p;
	size_t cursor = 0;

	(void)state;
	readplan_init(&p, 1ULL << 40);
	readplan_add_uncovered(&p, 4 * KiB, 12 * KiB, NULL, 0, &cursor);
	readplan_end(&p);
	assert_int_equal(p.n, 1);
	assert_read(&p, 0, 4 * KiB, 8 * KiB);
	free(p.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_align_merge_and_split),
		cmocka_unit_test(test_device_end),
		cmocka_unit_test(test_uncovered),
		cmocka_unit_test(test_uncovered_spanning_both),
		cmocka_unit_test(test_nothing_done),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
