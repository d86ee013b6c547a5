/* Unit tests for sorted.c: empty and NULL arrays, sorting, search, comparators. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lib/sorted.h"

static unsigned calls;

/* u64_cmp(), counting its calls: an empty array must make none. */
static int counting_cmp(const void *a, const void *b)
{
	calls++;
	return u64_cmp(a, b);
}

static void test_empty_null_array(void **state)
{
	uint64_t key = 1;

	(void)state;
	calls = 0;
	sort_items(NULL, 0, sizeof(uint64_t), counting_cmp);
	assert_null(find_item(&key, NULL, 0, sizeof(uint64_t), counting_cmp));
	assert_int_equal(calls, 0);
}

static void test_one_item(void **state)
{
	uint64_t v[1] = { 7 }, hit = 7, miss = 8;

	(void)state;
	sort_items(v, 1, sizeof(*v), u64_cmp);
	assert_int_equal(v[0], 7);
	assert_ptr_equal(find_item(&hit, v, 1, sizeof(*v), u64_cmp), &v[0]);
	assert_null(find_item(&miss, v, 1, sizeof(*v), u64_cmp));
}

/* Values past INT_MAX and UINT32_MAX: a comparator that subtracts gets these wrong. */
static void test_sort_and_find_u64(void **state)
{
	uint64_t v[] = { UINT64_MAX, 0, (uint64_t)1 << 40, 3, (uint64_t)1 << 32, 3 };
	const uint64_t want[] = { 0, 3, 3, (uint64_t)1 << 32, (uint64_t)1 << 40, UINT64_MAX };
	size_t n = sizeof(v) / sizeof(*v);
	uint64_t miss = 4;

	(void)state;
	sort_items(v, n, sizeof(*v), u64_cmp);
	assert_memory_equal(v, want, sizeof(want));
	for (size_t i = 0; i < n; i++) {
		const uint64_t *hit = find_item(&want[i], v, n, sizeof(*v), u64_cmp);

		assert_non_null(hit);
		assert_true(*hit == want[i]);
	}
	assert_null(find_item(&miss, v, n, sizeof(*v), u64_cmp));
}

static void test_sort_and_find_u32(void **state)
{
	uint32_t v[] = { UINT32_MAX, 1, (uint32_t)1 << 31, 0 };
	const uint32_t want[] = { 0, 1, (uint32_t)1 << 31, UINT32_MAX };
	uint32_t hit = (uint32_t)1 << 31, miss = 2;

	(void)state;
	sort_items(v, 4, sizeof(*v), u32_cmp);
	assert_memory_equal(v, want, sizeof(want));
	assert_ptr_equal(find_item(&hit, v, 4, sizeof(*v), u32_cmp), &v[2]);
	assert_null(find_item(&miss, v, 4, sizeof(*v), u32_cmp));
}

static void test_comparators(void **state)
{
	uint64_t a = 1, b = UINT64_MAX;
	uint32_t c = 0, d = UINT32_MAX;

	(void)state;
	assert_int_equal(u64_cmp(&a, &b), -1);
	assert_int_equal(u64_cmp(&b, &a), 1);
	assert_int_equal(u64_cmp(&a, &a), 0);
	assert_int_equal(u32_cmp(&c, &d), -1);
	assert_int_equal(u32_cmp(&d, &c), 1);
	assert_int_equal(u32_cmp(&d, &d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_empty_null_array),
		cmocka_unit_test(test_one_item),
		cmocka_unit_test(test_sort_and_find_u64),
		cmocka_unit_test(test_sort_and_find_u32),
		cmocka_unit_test(test_comparators),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
