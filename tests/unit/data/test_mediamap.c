/*
 * Unit tests for mediamap.c: mediamap_split(), which splits a bad device
 * range over the extents (sorted by physical offset) that own it, looked
 * up through a media_index.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tree/crosslink.h"
#include "data/mediamap.h"

#define KiB 1024ULL

/*
 * Three files' extents: ino 10 at device bytes [100K, 120K) for file
 * bytes [0, 20K); ino 11 at [120K, 130K) for [40K, 50K), right after it;
 * ino 12 at [200K, 210K) for [0, 10K); ino 13's unwritten extent at
 * [300K, 310K).
 */
static struct xlink_extent extents[] = {
	{ XLINK_EXTENT_INIT(10, 0, 100 * KiB, 20 * KiB) },
	{ XLINK_EXTENT_INIT(11, 40 * KiB, 120 * KiB, 10 * KiB) },
	{ XLINK_EXTENT_INIT(12, 0, 200 * KiB, 10 * KiB) },
	{ XLINK_EXTENT_INIT(13, 0, 300 * KiB, 10 * KiB), .unwritten = 1 },
};

static struct media_pieces split(uint64_t off, uint64_t len)
{
	struct xlink_list l = { .dev = 7, .v = extents, .n = 4, .sorted = true };
	struct media_pieces p = { .dev = 7 };
	struct bad_range b = { .off = off, .len = len, .err = EIO };
	struct media_index ix;

	media_index_init(&ix, &l);
	mediamap_split(&ix, &b, &p);
	media_index_release(&ix);
	return p;
}

/* Piece i is [off, off+len) of ino at file offset file_off (ino 0: unowned). */
static void assert_piece(const struct media_pieces *p, size_t i, uint64_t off, uint64_t len,
			 uint64_t ino, uint64_t file_off)
{
	assert_true(i < p->n);
	assert_int_equal(p->v[i].dev_off, off);
	assert_int_equal(p->v[i].len, len);
	assert_int_equal(p->v[i].ino, ino);
	if (ino)
		assert_int_equal(p->v[i].file_off, file_off);
	assert_int_equal(p->v[i].err, EIO);
	assert_false(p->v[i].still_mapped || p->v[i].still_bad);
}

static void test_inside_one_extent(void **state)
{
	struct media_pieces p = split(104 * KiB, 4 * KiB);

	(void)state;
	assert_int_equal(p.n, 1);
	assert_piece(&p, 0, 104 * KiB, 4 * KiB, 10, 4 * KiB);
	free(p.v);
}

static void test_whole_extent(void **state)
{
	struct media_pieces p = split(200 * KiB, 10 * KiB);

	(void)state;
	assert_int_equal(p.n, 1);
	assert_piece(&p, 0, 200 * KiB, 10 * KiB, 12, 0);
	free(p.v);
}

static void test_across_two_files(void **state)
{
	struct media_pieces p = split(116 * KiB, 8 * KiB);

	(void)state;
	assert_int_equal(p.n, 2);
	assert_piece(&p, 0, 116 * KiB, 4 * KiB, 10, 16 * KiB);
	assert_piece(&p, 1, 120 * KiB, 4 * KiB, 11, 40 * KiB);
	free(p.v);
}

/* From ino 11's tail through free space into ino 12's head. */
static void test_partly_free(void **state)
{
	struct media_pieces p = split(128 * KiB, 76 * KiB);

	(void)state;
	assert_int_equal(p.n, 3);
	assert_piece(&p, 0, 128 * KiB, 2 * KiB, 11, 48 * KiB);
	assert_piece(&p, 1, 130 * KiB, 70 * KiB, 0, 0);
	assert_piece(&p, 2, 200 * KiB, 4 * KiB, 12, 0);
	free(p.v);
}

static void test_before_first(void **state)
{
	struct media_pieces all_before = split(0, 100 * KiB);	/* ends where 10 starts */
	struct media_pieces into = split(96 * KiB, 8 * KiB);

	(void)state;
	assert_int_equal(all_before.n, 1);
	assert_piece(&all_before, 0, 0, 100 * KiB, 0, 0);
	assert_int_equal(into.n, 2);
	assert_piece(&into, 0, 96 * KiB, 4 * KiB, 0, 0);
	assert_piece(&into, 1, 100 * KiB, 4 * KiB, 10, 0);
	free(all_before.v);
	free(into.v);
}

static void test_after_last(void **state)
{
	struct media_pieces after = split(400 * KiB, 4 * KiB);
	struct media_pieces from = split(206 * KiB, 8 * KiB);	/* 12's end, then free */

	(void)state;
	assert_int_equal(after.n, 1);
	assert_piece(&after, 0, 400 * KiB, 4 * KiB, 0, 0);
	assert_int_equal(from.n, 2);
	assert_piece(&from, 0, 206 * KiB, 4 * KiB, 12, 6 * KiB);
	assert_piece(&from, 1, 210 * KiB, 4 * KiB, 0, 0);
	free(after.v);
	free(from.v);
}

/* An unwritten extent holds no data: its bytes are nobody's. */
static void test_unwritten(void **state)
{
	struct media_pieces p = split(304 * KiB, 4 * KiB);

	(void)state;
	assert_int_equal(p.n, 1);
	assert_piece(&p, 0, 304 * KiB, 4 * KiB, 0, 0);
	free(p.v);
}

/* Pieces of several ranges are appended to one list, in order. */
static void test_appends(void **state)
{
	struct xlink_list l = { .dev = 7, .v = extents, .n = 4, .sorted = true };
	struct media_pieces p = { .dev = 7 };
	struct bad_range b[] = {
		{ .off = 104 * KiB, .len = 4 * KiB, .err = EIO },
		{ .off = 500 * KiB, .len = 4 * KiB, .err = EIO },
	};
	struct media_index ix;

	(void)state;
	media_index_init(&ix, &l);
	mediamap_split(&ix, &b[0], &p);
	mediamap_split(&ix, &b[1], &p);
	media_index_release(&ix);
	assert_int_equal(p.n, 2);
	assert_piece(&p, 0, 104 * KiB, 4 * KiB, 10, 4 * KiB);
	assert_piece(&p, 1, 500 * KiB, 4 * KiB, 0, 0);
	free(p.v);
}

static void test_empty_list(void **state)
{
	struct xlink_list l = { .dev = 7 };
	struct media_pieces p = { .dev = 7 };
	struct bad_range b = { .off = 4 * KiB, .len = 4 * KiB, .err = EIO };
	struct media_index ix;

	(void)state;
	media_index_init(&ix, &l);
	assert_null(ix.end_max);
	mediamap_split(&ix, &b, &p);
	media_index_release(&ix);
	assert_int_equal(p.n, 1);
	assert_piece(&p, 0, 4 * KiB, 4 * KiB, 0, 0);
	free(p.v);
}

/*
 * Cross-linked extents: ino 2's extent lies inside ino 1's, ino 3's
 * overlaps the end of ino 1's.  A bad range in ino 1's extent past ino 2's
 * is still ino 1's (a lookup that stepped back only over the extents
 * reaching the offset stopped at ino 2's and called it nobody's); one in
 * both is a piece of each.
 */
static void test_contained_extent(void **state)
{
	struct xlink_extent v[] = {
		{ XLINK_EXTENT_INIT(1, 0, 0, 100 * KiB) },
		{ XLINK_EXTENT_INIT(2, 0, 8 * KiB, 4 * KiB) },
		{ XLINK_EXTENT_INIT(3, 0, 96 * KiB, 8 * KiB) },
	};
	struct xlink_list l = { .dev = 7, .v = v, .n = 3, .sorted = true };
	struct bad_range past = { .off = 50 * KiB, .len = 4 * KiB, .err = EIO };
	struct bad_range in_both = { .off = 8 * KiB, .len = 4 * KiB, .err = EIO };
	struct media_pieces p = { .dev = 7 }, q = { .dev = 7 };
	struct media_index ix;

	(void)state;
	media_index_init(&ix, &l);
	mediamap_split(&ix, &past, &p);
	mediamap_split(&ix, &in_both, &q);
	media_index_release(&ix);
	assert_int_equal(p.n, 1);
	assert_piece(&p, 0, 50 * KiB, 4 * KiB, 1, 50 * KiB);
	assert_int_equal(q.n, 2);
	assert_piece(&q, 0, 8 * KiB, 4 * KiB, 1, 8 * KiB);
	assert_piece(&q, 1, 8 * KiB, 4 * KiB, 2, 0);
	free(p.v);
	free(q.v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_inside_one_extent),
		cmocka_unit_test(test_whole_extent),
		cmocka_unit_test(test_across_two_files),
		cmocka_unit_test(test_partly_free),
		cmocka_unit_test(test_before_first),
		cmocka_unit_test(test_after_last),
		cmocka_unit_test(test_unwritten),
		cmocka_unit_test(test_appends),
		cmocka_unit_test(test_empty_list),
		cmocka_unit_test(test_contained_extent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
