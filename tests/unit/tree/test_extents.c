/* Unit tests for extents.c: extent_validate() on synthetic maps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tree/extents.h"

#define MiB (1ULL << 20)

static struct fiemap_extent ext(uint64_t logical, uint64_t physical, uint64_t len,
				uint32_t flags)
{
	struct fiemap_extent e;

	memset(&e, 0, sizeof(e));
	e.fe_logical = logical;
	e.fe_physical = physical;
	e.fe_length = len;
	e.fe_flags = flags;
	return e;
}

static enum extent_problem validate(const struct fiemap_extent *x, size_t n,
				    uint64_t dev_size, struct extent_cursor *cur)
{
	extent_cursor_init(cur, dev_size);
	return extent_validate(cur, x, n);
}

static void test_clean_sparse_map(void **state)
{
	struct extent_cursor cur;
	struct fiemap_extent x[] = {
		ext(0, 10 * MiB, MiB, 0),
		ext(4 * MiB, 2 * MiB, MiB, FIEMAP_EXTENT_UNWRITTEN),
		ext(8 * MiB, 0, MiB, FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNKNOWN |
				     FIEMAP_EXTENT_LAST),
	};

	(void)state;
	assert_int_equal(validate(x, 3, 100 * MiB, &cur), EXTENT_OK);
	assert_int_equal(cur.nr_extents, 3);
}

static void test_zero_length(void **state)
{
	struct extent_cursor cur;
	struct fiemap_extent x[] = { ext(0, MiB, MiB, 0), ext(MiB, 5 * MiB, 0, 0) };

	(void)state;
	assert_int_equal(validate(x, 2, 0, &cur), EXTENT_ZERO_LENGTH);
	assert_int_equal(cur.bad_logical, MiB);
}

static void test_overlap_and_order(void **state)
{
	struct extent_cursor cur;
	struct fiemap_extent overlap[] = { ext(0, MiB, 2 * MiB, 0), ext(MiB, 9 * MiB, MiB, 0) };
	struct fiemap_extent backwards[] = { ext(4 * MiB, MiB, MiB, 0), ext(0, 9 * MiB, MiB, 0) };
	struct fiemap_extent touching[] = { ext(0, MiB, MiB, 0), ext(MiB, 9 * MiB, MiB, 0) };

	(void)state;
	assert_int_equal(validate(overlap, 2, 0, &cur), EXTENT_OVERLAP);
	assert_int_equal(cur.bad_logical, MiB);
	assert_int_equal(validate(backwards, 2, 0, &cur), EXTENT_OVERLAP);
	assert_int_equal(validate(touching, 2, 0, &cur), EXTENT_OK);
}

static void test_past_device(void **state)
{
	struct extent_cursor cur;
	struct fiemap_extent x[] = { ext(0, 99 * MiB, 2 * MiB, 0) };
	struct fiemap_extent unknown[] = { ext(0, 500 * MiB, 2 * MiB, FIEMAP_EXTENT_UNKNOWN) };
	struct fiemap_extent huge[] = { ext(0, UINT64_MAX - 10, 20, 0) };

	(void)state;
	assert_int_equal(validate(x, 1, 100 * MiB, &cur), EXTENT_PAST_DEVICE);
	assert_int_equal(cur.bad_physical, 99 * MiB);
	/* dev_size 0: physical offsets are not device offsets (btrfs, overlay) */
	assert_int_equal(validate(x, 1, 0, &cur), EXTENT_OK);
	/* delalloc/unknown extents have no physical location to check */
	assert_int_equal(validate(unknown, 1, 100 * MiB, &cur), EXTENT_OK);
	/* no overflow in physical + length */
	assert_int_equal(validate(huge, 1, 100 * MiB, &cur), EXTENT_PAST_DEVICE);
}

/*
 * An encoded extent's FIEMAP length is its uncompressed length (erofs: a
 * 1 MiB cluster compressed into 4 KiB at the end of a small image): only
 * its start must be on the device.  Encoded by its flag (btrfs) or because
 * the whole file is compressed (erofs sets no flag).
 */
static void test_encoded(void **state)
{
	struct extent_cursor cur;
	struct fiemap_extent flagged[] = { ext(0, 99 * MiB, 2 * MiB, FIEMAP_EXTENT_ENCODED) };
	struct fiemap_extent plain[] = { ext(0, 99 * MiB, 2 * MiB, 0),
					 ext(2 * MiB, 3 * MiB, 2 * MiB, FIEMAP_EXTENT_LAST) };
	struct fiemap_extent start_past[] = { ext(0, 100 * MiB, 2 * MiB, FIEMAP_EXTENT_ENCODED) };
	struct fiemap_extent overlap[] = { ext(0, MiB, 2 * MiB, FIEMAP_EXTENT_ENCODED),
					   ext(MiB, 2 * MiB, MiB, FIEMAP_EXTENT_ENCODED) };

	(void)state;
	assert_int_equal(validate(flagged, 1, 100 * MiB, &cur), EXTENT_OK);
	assert_int_equal(validate(plain, 2, 100 * MiB, &cur), EXTENT_PAST_DEVICE);
	extent_cursor_init(&cur, 100 * MiB);
	cur.encoded = true;
	assert_int_equal(extent_validate(&cur, plain, 2), EXTENT_OK);
	/* still checked: the start, and the logical order */
	assert_int_equal(validate(start_past, 1, 100 * MiB, &cur), EXTENT_PAST_DEVICE);
	assert_int_equal(validate(overlap, 2, 100 * MiB, &cur), EXTENT_OVERLAP);
}

static void test_last_flag(void **state)
{
	struct extent_cursor cur;
	struct fiemap_extent x[] = { ext(0, MiB, MiB, FIEMAP_EXTENT_LAST), ext(MiB, 5 * MiB, MiB, 0) };

	(void)state;
	assert_int_equal(validate(x, 2, 0, &cur), EXTENT_LAST_FLAG);
	assert_int_equal(cur.bad_logical, MiB);
}

static void test_across_batches(void **state)
{
	struct extent_cursor cur;
	struct fiemap_extent a[] = { ext(0, MiB, 2 * MiB, 0) };
	struct fiemap_extent b[] = { ext(MiB, 9 * MiB, MiB, 0) };

	(void)state;
	extent_cursor_init(&cur, 0);
	assert_int_equal(extent_validate(&cur, a, 1), EXTENT_OK);
	/* the overlap spans two FIEMAP calls */
	assert_int_equal(extent_validate(&cur, b, 1), EXTENT_OVERLAP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_sparse_map),
		cmocka_unit_test(test_zero_length),
		cmocka_unit_test(test_overlap_and_order),
		cmocka_unit_test(test_past_device),
		cmocka_unit_test(test_encoded),
		cmocka_unit_test(test_last_flag),
		cmocka_unit_test(test_across_batches),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
