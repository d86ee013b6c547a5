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

#define NKEYS 40

static struct btrfs_tkey keys[NKEYS];
static int fake_errno;		/* nonzero: the ioctl fails with it */
static unsigned per_call;	/* items served per call at most */
static unsigned calls;

static int key_cmp(const void *a, const void *b)
{
	return btrfs_key_cmp(a, b);
}

static void make_keys(void)
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
}

int __wrap_ioctl(int fd, unsigned long req, ...);

/* Items in [min, max] from the fake tree, their data the key's objectid. */
int __wrap_ioctl(int fd, unsigned long req, ...)
{
	struct btrfs_ioctl_search_args_v2 *a;
	struct btrfs_ioctl_search_key *k;
	struct btrfs_tkey lo, hi;
	size_t pos = 0;
	unsigned n = 0;
	va_list ap;

	(void)fd;
	va_start(ap, req);
	a = va_arg(ap, struct btrfs_ioctl_search_args_v2 *);
	va_end(ap);
	assert_true(req == BTRFS_IOC_TREE_SEARCH_V2);
	calls++;
	if (fake_errno) {
		errno = fake_errno;
		return -1;
	}
	k = &a->key;
	lo = (struct btrfs_tkey){ k->min_objectid, (uint8_t)k->min_type, k->min_offset };
	hi = (struct btrfs_tkey){ k->max_objectid, (uint8_t)k->max_type, k->max_offset };
	for (unsigned i = 0; i < NKEYS && n < per_call; i++) {
		struct btrfs_ioctl_search_header h = {
			.transid = 9, .objectid = keys[i].objectid, .type = keys[i].type,
			.offset = keys[i].offset, .len = 8,
		};

		if (btrfs_key_cmp(&keys[i], &lo) < 0 || btrfs_key_cmp(&keys[i], &hi) > 0)
			continue;
		if (pos + sizeof(h) + 8 > a->buf_size)
			break;
		memcpy(a->buf + pos, &h, sizeof(h));
		memcpy(a->buf + pos + sizeof(h), &keys[i].objectid, 8);
		pos += sizeof(h) + 8;
		n++;
	}
	k->nr_items = n;
	return 0;
}

/* Read [lo, hi]; every key of the fake tree inside it, in order, once. */
static void read_range(struct btrfs_tkey lo, struct btrfs_tkey hi)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	unsigned want = 0;
	int ret;

	assert_int_equal(btrfs_tree_open(&r, 3, 7, lo, hi), 0);
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
	make_keys();
	for (per_call = 1; per_call <= 7; per_call++) {
		calls = 0;
		read_range(all_lo, all_hi);
		/* a call per batch, and one that finds nothing (none after the last key) */
		assert_true(calls >= NKEYS / per_call);
	}
}

static void test_sub_ranges(void **state)
{
	(void)state;
	make_keys();
	per_call = 3;
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
	make_keys();
	per_call = 2;
	fake_errno = ENOENT;
	assert_int_equal(btrfs_tree_open(&r, 3, 7, keys[0], keys[NKEYS - 1]), 0);
	assert_int_equal(btrfs_tree_next(&r, &it), -ENOENT);
	btrfs_tree_close(&r);
	fake_errno = 0;
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
		cmocka_unit_test(test_get),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
