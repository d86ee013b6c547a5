/*
 * Unit tests for crosslink.c: crosslink_sweep(), the search for device
 * bytes claimed twice in an extent list sorted by physical offset, and
 * crosslink_collect()'s filtering of the extents it is handed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tree/crosslink.h"

#define KiB 1024ULL

static struct xlink_extent ext(uint64_t ino, uint64_t logical, uint64_t phys, uint64_t len,
			       bool shared)
{
	return xlink_extent_make(ino, logical, phys, len, shared, false, false);
}

/* What the sweep handed fn: pairs of indexes into the list. */
struct found {
	const struct xlink_extent *base;
	size_t a[8], b[8];
	size_t n;
	size_t stop_after;		/* 0: never stop */
};

static bool record(void *arg, const struct xlink_extent *a, const struct xlink_extent *b)
{
	struct found *f = arg;

	assert_true(f->n < 8);
	f->a[f->n] = (size_t)(a - f->base);
	f->b[f->n] = (size_t)(b - f->base);
	f->n++;
	return f->stop_after && f->n >= f->stop_after;
}

static struct found sweep(const struct xlink_extent *v, size_t n)
{
	struct found f = { .base = v };

	crosslink_sweep(v, n, record, &f);
	return f;
}

#define SWEEP(v) sweep(v, sizeof(v) / sizeof(v[0]))

static void test_empty_and_one(void **state)
{
	struct xlink_extent one[] = { ext(1, 0, 0, 4 * KiB, false) };

	(void)state;
	assert_int_equal(sweep(NULL, 0).n, 0);
	assert_int_equal(SWEEP(one).n, 0);
}

static void test_disjoint_and_adjacent(void **state)
{
	/* Each ends exactly where the next starts: touching is not sharing. */
	struct xlink_extent v[] = {
		ext(1, 0, 4 * KiB, 4 * KiB, false),
		ext(2, 0, 8 * KiB, 4 * KiB, false),
		ext(3, 0, 12 * KiB, 8 * KiB, false),
		ext(1, 4 * KiB, 40 * KiB, 4 * KiB, false),
	};

	(void)state;
	assert_int_equal(SWEEP(v).n, 0);
}

static void test_overlap_two_inodes(void **state)
{
	struct xlink_extent v[] = {
		ext(1, 0, 0, 8 * KiB, false),
		ext(2, 0, 4 * KiB, 8 * KiB, false),	/* its first 4 KiB are 1's last */
		ext(3, 0, 12 * KiB, 4 * KiB, false),	/* touches 2's end only */
	};
	struct found f = SWEEP(v);

	(void)state;
	assert_int_equal(f.n, 1);
	assert_int_equal(f.a[0], 0);
	assert_int_equal(f.b[0], 1);
}

/* Reflinks: both sides say shared.  Only one side saying so is not a reflink. */
static void test_shared(void **state)
{
	struct xlink_extent both[] = {
		ext(1, 0, 0, 8 * KiB, true),
		ext(2, 0, 0, 8 * KiB, true),
		ext(3, 0, 4 * KiB, 8 * KiB, true),
	};
	struct xlink_extent one_side[] = {
		ext(1, 0, 0, 8 * KiB, true),
		ext(2, 0, 0, 8 * KiB, false),
	};
	struct found f;

	(void)state;
	assert_int_equal(SWEEP(both).n, 0);
	f = SWEEP(one_side);
	assert_int_equal(f.n, 1);
	assert_int_equal(f.a[0], 0);
	assert_int_equal(f.b[0], 1);
}

/*
 * One inode, two extents mapping the same file offsets to the same bytes
 * (an ext2/ext3 indirect map split differently by two FIEMAPs): one
 * mapping.  The same bytes at other file offsets of the inode: mapped
 * twice, reported.
 */
static void test_same_inode(void **state)
{
	struct xlink_extent split[] = {
		ext(5, 0, 64 * KiB, 48 * KiB, false),
		ext(5, 8 * KiB, 72 * KiB, 4 * KiB, false),	/* inside, same delta */
		ext(5, 16 * KiB, 80 * KiB, 48 * KiB, false),	/* overlaps, same delta */
	};
	struct xlink_extent twice[] = {
		ext(5, 0, 64 * KiB, 16 * KiB, false),
		ext(5, 1024 * KiB, 72 * KiB, 4 * KiB, false),
	};
	struct found f;

	(void)state;
	assert_int_equal(SWEEP(split).n, 0);
	f = SWEEP(twice);
	assert_int_equal(f.n, 1);
	assert_int_equal(f.a[0], 0);
	assert_int_equal(f.b[0], 1);
}

/*
 * An extent inside another: paired with the one that contains it; a
 * later extent still inside the big one is paired with it too, as that
 * one reaches furthest.
 */
static void test_contained(void **state)
{
	struct xlink_extent v[] = {
		ext(1, 0, 0, 100 * KiB, false),
		ext(2, 0, 8 * KiB, 4 * KiB, false),
		ext(3, 0, 20 * KiB, 4 * KiB, false),
		ext(4, 0, 100 * KiB, 4 * KiB, false),	/* just past 1's end */
	};
	struct found f = SWEEP(v);

	(void)state;
	assert_int_equal(f.n, 2);
	assert_int_equal(f.a[0], 0);
	assert_int_equal(f.b[0], 1);
	assert_int_equal(f.a[1], 0);
	assert_int_equal(f.b[1], 2);
}

/* A chain: each overlap is with the extent before that reaches furthest. */
static void test_furthest_reaching(void **state)
{
	struct xlink_extent v[] = {
		ext(1, 0, 0, 10 * KiB, false),
		ext(2, 0, 2 * KiB, 18 * KiB, false),	/* reaches 20 KiB */
		ext(3, 0, 15 * KiB, 1 * KiB, false),	/* inside 2, past 1 */
	};
	struct found f = SWEEP(v);

	(void)state;
	assert_int_equal(f.n, 2);
	assert_int_equal(f.a[0], 0);
	assert_int_equal(f.b[0], 1);
	assert_int_equal(f.a[1], 1);
	assert_int_equal(f.b[1], 2);
}

static void test_stop(void **state)
{
	struct xlink_extent v[] = {
		ext(1, 0, 0, 100 * KiB, false),
		ext(2, 0, 8 * KiB, 4 * KiB, false),
		ext(3, 0, 20 * KiB, 4 * KiB, false),
	};
	struct found f = { .base = v, .stop_after = 1 };

	(void)state;
	crosslink_sweep(v, 3, record, &f);
	assert_int_equal(f.n, 1);
}

/* crosslink_collect(): only located, non-empty extents of the list's st_dev. */
static void test_collect(void **state)
{
	struct xlink_list l = { .dev = 42 };
	struct fiemap_extent x[4];

	(void)state;
	memset(x, 0, sizeof(x));
	x[0] = (struct fiemap_extent){ .fe_logical = 0, .fe_physical = 4096, .fe_length = 4096,
				       .fe_flags = FIEMAP_EXTENT_SHARED };
	x[1] = (struct fiemap_extent){ .fe_logical = 4096, .fe_physical = 0, .fe_length = 4096,
				       .fe_flags = FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNKNOWN };
	x[2] = (struct fiemap_extent){ .fe_logical = 8192, .fe_physical = 65536, .fe_length = 0 };
	x[3] = (struct fiemap_extent){ .fe_logical = 12288, .fe_physical = 8192, .fe_length = 4096,
				       .fe_flags = FIEMAP_EXTENT_UNWRITTEN | FIEMAP_EXTENT_LAST };
	assert_false(crosslink_collect(&l, (struct ino_key){ 42, 7 }, true, x, 4));
	assert_int_equal(l.n, 2);
	assert_true(l.v[0].ino == 7 && xlink_phys(&l.v[0]) == 4096 && l.v[0].shared && l.v[0].recent);
	assert_true(xlink_logical(&l.v[1]) == 12288 && l.v[1].unwritten && !l.v[1].shared);
	assert_true(crosslink_collect(&l, (struct ino_key){ 42, 8 }, false, x, 1));
	assert_false(crosslink_collect(&l, (struct ino_key){ 43, 9 }, false, x, 1));
	assert_int_equal(l.n, 3);
	xlink_list_release(&l);
	assert_int_equal(l.dev, 42);
	assert_int_equal(l.n, 0);
}

/* An extent is 24 bytes: the list's memory per extent (crosslink.h). */
static void test_size(void **state)
{
	(void)state;
	assert_int_equal(sizeof(struct xlink_extent), 24);
}

/*
 * crosslink_collect(): an extent longer than a piece is kept as pieces
 * that touch and cover it exactly; one that is not in whole sectors, or
 * ends past 128 PiB, is not kept, and the file counts as not all located.
 */
static void test_collect_pieces_and_unfit(void **state)
{
	struct xlink_list l = { .dev = 42 };
	uint64_t piece = XLINK_MAX_PIECE * XLINK_SECTOR;
	struct fiemap_extent big = { .fe_logical = 1ULL << 40, .fe_physical = 1ULL << 41,
				     .fe_length = 2 * piece + 4096 };
	struct fiemap_extent odd = { .fe_logical = 0, .fe_physical = 4096, .fe_length = 1000 };
	struct fiemap_extent far = { .fe_logical = XLINK_MAX_SECTORS * XLINK_SECTOR,
				     .fe_physical = 4096, .fe_length = 4096 };

	(void)state;
	assert_true(crosslink_collect(&l, (struct ino_key){ 42, 5 }, false, &big, 1));
	assert_int_equal(l.n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(l.v[i].ino, 5);
		assert_int_equal(xlink_phys(&l.v[i]) - xlink_logical(&l.v[i]), 1ULL << 40);
	}
	assert_int_equal(xlink_phys(&l.v[0]), 1ULL << 41);
	assert_int_equal(xlink_len(&l.v[0]), piece);
	assert_int_equal(xlink_phys(&l.v[1]), xlink_end(&l.v[0]));
	assert_int_equal(xlink_end(&l.v[2]), (1ULL << 41) + 2 * piece + 4096);
	assert_int_equal(crosslink_collect(&l, (struct ino_key){ 42, 6 }, false, &odd, 1), false);
	assert_int_equal(crosslink_collect(&l, (struct ino_key){ 42, 7 }, false, &far, 1), false);
	assert_int_equal(l.n, 3);
	xlink_list_release(&l);
}

/* A deterministic generator for the sort test. */
static uint64_t next_rand(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

/*
 * crosslink_sort_extents(): in place, by (device offset, inode), whatever
 * the order it is given (random with many equal offsets, sorted, reversed,
 * all equal); no extent lost or duplicated (the sum of the inodes stays).
 */
static void test_sort(void **state)
{
	enum { N = 5000 };
	struct xlink_extent *v = malloc(N * sizeof(*v));
	uint64_t seed = 1;

	(void)state;
	for (int order = 0; order < 4; order++) {
		uint64_t sum = 0, after = 0;

		for (size_t i = 0; i < N; i++) {
			uint64_t phys = order == 0 ? next_rand(&seed) % 700 :
					order == 1 ? i : order == 2 ? N - i : 7;
			v[i] = xlink_extent_make(next_rand(&seed) % 50, 0, phys * 4096, 4096,
						 false, false, false);
			sum += v[i].ino;
		}
		crosslink_sort_extents(v, N);
		for (size_t i = 0; i < N; i++) {
			after += v[i].ino;
			if (i)
				assert_true(v[i - 1].phys_sec < v[i].phys_sec ||
					    (v[i - 1].phys_sec == v[i].phys_sec &&
					     v[i - 1].ino <= v[i].ino));
		}
		assert_int_equal(sum, after);
	}
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_and_one),
		cmocka_unit_test(test_disjoint_and_adjacent),
		cmocka_unit_test(test_overlap_two_inodes),
		cmocka_unit_test(test_shared),
		cmocka_unit_test(test_same_inode),
		cmocka_unit_test(test_contained),
		cmocka_unit_test(test_furthest_reaching),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_collect),
		cmocka_unit_test(test_size),
		cmocka_unit_test(test_collect_pieces_and_unfit),
		cmocka_unit_test(test_sort),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
