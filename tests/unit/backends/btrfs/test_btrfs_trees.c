/*
 * Unit tests for btrfs_trees, the TREE_SEARCH_V2 streaming reader, against a
 * fake ioctl (linked with -Wl,--wrap=ioctl): a sorted set of keys, some at
 * the edges of the key space (offset and type at their maxima, so that the
 * cursor's carry is exercised), served a few items per call as the kernel
 * may.  Every key of a range comes back once, in order, with its bytes; an
 * error of the ioctl comes back as a negative errno.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <linux/btrfs.h>

#include "backends/btrfs/btrfs_trees.h"
#include "fake_tree_search.h"

#define NKEYS 40
#define TREE 7		/* the tree the tests read */

static struct btrfs_tkey keys[NKEYS];

static int key_cmp(const void *a, const void *b)
{
	return btrfs_key_cmp(a, b);
}

/* The fake tree of NKEYS keys, served per_call items a call. */
static void make_keys(unsigned per_call)
{
	unsigned n = 0;

	for (uint64_t o = 1; o <= 5; o++) {
		keys[n++] = (struct btrfs_tkey){ o, 1, 0 };
		keys[n++] = (struct btrfs_tkey){ o, 1, UINT64_MAX };	/* carry into type */
		keys[n++] = (struct btrfs_tkey){ o, 12, 7 };
		keys[n++] = (struct btrfs_tkey){ o, UINT8_MAX, UINT64_MAX };	/* into objectid */
		keys[n++] = (struct btrfs_tkey){ o, 108, 4096 * o };
	}
	while (n < NKEYS - 1) {
		keys[n] = (struct btrfs_tkey){ 100 + n, 96, n };
		n++;
	}
	keys[n++] = (struct btrfs_tkey){ UINT64_MAX, UINT8_MAX, UINT64_MAX };	/* the last key */
	qsort(keys, NKEYS, sizeof(keys[0]), key_cmp);
	/* the fake tree: each item's data is its key's objectid */
	fake_tree_reset(per_call, 9);
	for (n = 0; n < NKEYS; n++)
		fake_put64(fake_tree_add(TREE, keys[n], 8)->data, keys[n].objectid);
}

/* Read [lo, hi]; every key of the fake tree inside it, in order, once. */
static void read_range(struct btrfs_tkey lo, struct btrfs_tkey hi)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	unsigned want = 0;
	int ret;

	assert_int_equal(btrfs_tree_open(&r, 3, TREE, lo, hi), 0);
	while (want < NKEYS && btrfs_key_cmp(&keys[want], &lo) < 0)
		want++;
	while ((ret = btrfs_tree_next(&r, &it)) > 0) {
		assert_true(want < NKEYS);
		assert_int_equal(btrfs_key_cmp(&it.key, &keys[want]), 0);
		assert_int_equal(it.len, 8);
		assert_int_equal(btrfs_get64(it.data), keys[want].objectid);
		assert_int_equal(it.transid, 9);
		want++;
	}
	assert_int_equal(ret, 0);
	assert_true(want == NKEYS || btrfs_key_cmp(&keys[want], &hi) > 0);
	btrfs_tree_close(&r);
}

static void test_whole_tree_in_small_batches(void **state)
{
	struct btrfs_tkey all_lo = { 0, 0, 0 }, all_hi = { UINT64_MAX, UINT8_MAX, UINT64_MAX };

	(void)state;
	for (unsigned per_call = 1; per_call <= 7; per_call++) {
		make_keys(per_call);
		read_range(all_lo, all_hi);
		/* a call per batch, and one that finds nothing (none after the last key) */
		assert_true(fake_tree.calls >= NKEYS / per_call);
	}
}

static void test_sub_ranges(void **state)
{
	(void)state;
	make_keys(3);
	for (unsigned i = 0; i < NKEYS; i++)
		for (unsigned j = i; j < NKEYS; j += 3)
			read_range(keys[i], keys[j]);
	/* a range between keys, and an empty (inverted) one */
	read_range((struct btrfs_tkey){ 1, 2, 0 }, (struct btrfs_tkey){ 1, 11, UINT64_MAX });
	read_range((struct btrfs_tkey){ 9, 0, 0 }, (struct btrfs_tkey){ 8, 0, 0 });
}

static void test_errors(void **state)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;

	(void)state;
	make_keys(2);
	fake_tree.err = ENOENT;
	assert_int_equal(btrfs_tree_open(&r, 3, TREE, keys[0], keys[NKEYS - 1]), 0);
	assert_int_equal(btrfs_tree_next(&r, &it), -ENOENT);
	btrfs_tree_close(&r);
}

/* The keys keys[i .. j] from r, then the end of its range. */
static void expect_keys(struct btrfs_tree_reader *r, unsigned i, unsigned j)
{
	struct btrfs_tree_item it;

	for (unsigned k = i; k <= j; k++) {
		assert_int_equal(btrfs_tree_next(r, &it), 1);
		assert_int_equal(btrfs_key_cmp(&it.key, &keys[k]), 0);
	}
	assert_int_equal(btrfs_tree_next(r, &it), 0);
}

/*
 * A reader moved to another range in the middle of a buffer (the bulk
 * records' windows, btrfs_bulk.c) gives that range's keys only: none of
 * what its buffer still held, none after the new end; an inverted range
 * gives nothing; and it can be moved again after its end.
 */
static void test_seek(void **state)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;

	(void)state;
	make_keys(5);
	assert_int_equal(btrfs_tree_open(&r, 3, TREE, keys[0], keys[NKEYS - 1]), 0);
	assert_int_equal(btrfs_tree_next(&r, &it), 1);
	assert_int_equal(btrfs_tree_next(&r, &it), 1);	/* 3 more wait in the buffer */
	btrfs_tree_seek(&r, TREE, keys[10], keys[20]);
	expect_keys(&r, 10, 20);
	btrfs_tree_seek(&r, TREE, keys[9], keys[8]);
	assert_int_equal(btrfs_tree_next(&r, &it), 0);
	btrfs_tree_seek(&r, TREE, keys[3], keys[4]);
	expect_keys(&r, 3, 4);
	btrfs_tree_close(&r);
}

static void test_get(void **state)
{
	const unsigned char b[8] = { 1, 2, 3, 4, 5, 6, 7, 0x80 };

	(void)state;
	assert_true(btrfs_get64(b) == 0x8007060504030201ULL);
	assert_int_equal(btrfs_get32(b), 0x04030201);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_tree_in_small_batches),
		cmocka_unit_test(test_sub_ranges),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_seek),
		cmocka_unit_test(test_get),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
