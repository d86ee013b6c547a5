/*
 * Unit tests for btrfs_chunks (btrfs.chunk) against a fake TREE_SEARCH_V2
 * ioctl (linked with -Wl,--wrap=ioctl) serving a chunk tree (CHUNK_ITEMs,
 * DEV_ITEMs) and a device tree (DEV_EXTENTs), with the block groups put in
 * the pass directly, as btrfs_check.c leaves them.  The kernel refuses to
 * mount most of this damage (btrfs_verify_dev_extents, the block group to
 * chunk mapping check), so only here can every finding be made: a
 * consistent set gives none, each disagreement its own finding with the
 * right figures, striped profiles their per-device stripe length.
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
#include <linux/btrfs_tree.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "fake_tree_search.h"

#define GiB (1ULL << 30)
#define MiB (1ULL << 20)
#define MAX_FINDINGS 4096	/* as btrfs_check.c allocates */

/* A CHUNK_ITEM at logical of len bytes, type, n stripes (devid 1, offsets phys[]). */
static void chunk(uint64_t logical, uint64_t len, uint64_t type, uint16_t n, uint16_t sub,
		  const uint64_t *phys)
{
	struct fake_item *it = fake_tree_add(BTRFS_CHUNK_TREE_OBJECTID,
					     (struct btrfs_tkey){ BTRFS_FIRST_CHUNK_TREE_OBJECTID,
								  BTRFS_CHUNK_ITEM_KEY, logical },
					     48 + 32 * n);

	fake_put64(it->data, len);
	fake_put64(it->data + 16, 64 * 1024);
	fake_put64(it->data + 24, type);
	fake_put16(it->data + 44, n);
	fake_put16(it->data + 46, sub);
	for (uint16_t i = 0; i < n; i++) {
		fake_put64(it->data + 48 + 32 * i, 1);
		fake_put64(it->data + 48 + 32 * i + 8, phys[i]);
	}
}

static void dev_item(uint64_t devid, uint64_t bytes_used)
{
	struct fake_item *it = fake_tree_add(BTRFS_CHUNK_TREE_OBJECTID,
					     (struct btrfs_tkey){ BTRFS_DEV_ITEMS_OBJECTID,
								  BTRFS_DEV_ITEM_KEY, devid },
					     98);

	fake_put64(it->data, devid);
	fake_put64(it->data + 8, 100 * GiB);
	fake_put64(it->data + 16, bytes_used);
}

static void dev_extent(uint64_t devid, uint64_t phys, uint64_t logical, uint64_t len)
{
	struct fake_item *it = fake_tree_add(BTRFS_DEV_TREE_OBJECTID,
					     (struct btrfs_tkey){ devid, BTRFS_DEV_EXTENT_KEY, phys }, 48);

	fake_put64(it->data, BTRFS_CHUNK_TREE_OBJECTID);
	fake_put64(it->data + 8, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	fake_put64(it->data + 16, logical);
	fake_put64(it->data + 24, len);
}

static struct pass p;
static struct bgroup bgs[8];

static void bg(uint64_t start, uint64_t len, uint64_t flags)
{
	bgs[p.nr_bg++] = (struct bgroup){ .start = start, .len = len, .flags = flags, .transid = 7 };
}

/*
 * A consistent filesystem: a DUP metadata chunk (two 256 MiB stripes), a
 * SINGLE data chunk (1 GiB), a SINGLE system chunk; tests then break it.
 */
static int setup(void **state)
{
	static const uint64_t meta[] = { 1 * GiB, 1 * GiB + 256 * MiB }, data[] = { 2 * GiB },
			      sys[] = { 4 * GiB };

	(void)state;
	fake_tree_reset(3, 7);
	memset(&p, 0, sizeof(p));
	p.fd = 3;
	p.f = calloc(MAX_FINDINGS, sizeof(*p.f));
	p.bg = bgs;
	dev_item(1, 2 * 256 * MiB + GiB + 32 * MiB);
	chunk(10 * GiB, 256 * MiB, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP, 2, 0, meta);
	chunk(11 * GiB, GiB, BTRFS_BLOCK_GROUP_DATA, 1, 0, data);
	chunk(12 * GiB, 32 * MiB, BTRFS_BLOCK_GROUP_SYSTEM, 1, 0, sys);
	bg(10 * GiB, 256 * MiB, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP);
	bg(11 * GiB, GiB, BTRFS_BLOCK_GROUP_DATA);
	bg(12 * GiB, 32 * MiB, BTRFS_BLOCK_GROUP_SYSTEM);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(p.f);
	return 0;
}

/* The device tree of the consistent set, with one extent's length changed. */
static void dev_extents(uint64_t data_len)
{
	dev_extent(1, 1 * GiB, 10 * GiB, 256 * MiB);
	dev_extent(1, 1 * GiB + 256 * MiB, 10 * GiB, 256 * MiB);
	dev_extent(1, 2 * GiB, 11 * GiB, data_len);
	dev_extent(1, 4 * GiB, 12 * GiB, 32 * MiB);
}

static const struct tfinding *only_finding(enum finding_kind kind)
{
	for (size_t i = 0; i < p.nr_f; i++)
		if (p.f[i].kind == kind)
			return &p.f[i];
	fail_msg("no finding of kind %d among %zu", kind, p.nr_f);
	return NULL;
}

static void test_consistent(void **state)
{
	(void)state;
	dev_extents(GiB);
	assert_int_equal(btrfs_check_chunks(&p), 0);
	assert_int_equal(p.nr_f, 0);
	assert_int_equal(p.chunk_items, 4);
	assert_int_equal(p.dev_items, 4);
}

static void test_dev_extent_length(void **state)
{
	const struct tfinding *f;

	(void)state;
	dev_extents(GiB + MiB);
	assert_int_equal(btrfs_check_chunks(&p), 0);
	f = only_finding(F_DEV_EXTENT_LEN);
	assert_true(f->logical == 11 * GiB && f->devid == 1 && f->physical == 2 * GiB);
	assert_true(f->a == GiB + MiB && f->b == GiB);
	/* and the device's bytes_used is then not the sum */
	f = only_finding(F_DEV_BYTES_USED);
	assert_true(f->a + MiB == f->b);
	assert_int_equal(p.nr_f, 2);
}

static void test_stripe_without_dev_extent(void **state)
{
	const struct tfinding *f;

	(void)state;
	/* the DUP chunk's second copy has no DEV_EXTENT */
	dev_extent(1, 1 * GiB, 10 * GiB, 256 * MiB);
	dev_extent(1, 2 * GiB, 11 * GiB, GiB);
	dev_extent(1, 4 * GiB, 12 * GiB, 32 * MiB);
	assert_int_equal(btrfs_check_chunks(&p), 0);
	f = only_finding(F_STRIPE_NO_DEV_EXTENT);
	assert_true(f->logical == 10 * GiB && f->physical == 1 * GiB + 256 * MiB);
	f = only_finding(F_DEV_BYTES_USED);
	assert_true(f->a == f->b + 256 * MiB);
	assert_int_equal(p.nr_f, 2);
}

static void test_dev_extent_of_no_chunk(void **state)
{
	const struct tfinding *f;

	(void)state;
	dev_extents(GiB);
	/* a DEV_EXTENT naming a chunk that does not exist, and one naming a
	 * chunk that has no stripe at its offset */
	dev_extent(1, 5 * GiB, 13 * GiB, 16 * MiB);
	dev_extent(1, 6 * GiB, 11 * GiB, GiB);
	assert_int_equal(btrfs_check_chunks(&p), 0);
	assert_int_equal(p.nr_f, 3);	/* both, and bytes_used */
	f = &p.f[0];
	assert_int_equal(f->kind, F_DEV_EXTENT_ORPHAN);
	assert_true(f->logical == 13 * GiB && f->len == 0 && f->physical == 5 * GiB);
	f = &p.f[1];
	assert_int_equal(f->kind, F_DEV_EXTENT_ORPHAN);
	assert_true(f->logical == 11 * GiB && f->len == GiB && f->physical == 6 * GiB);
	assert_int_equal(p.f[2].kind, F_DEV_BYTES_USED);
}

static void test_block_groups(void **state)
{
	const struct tfinding *f;

	(void)state;
	dev_extents(GiB);
	/* the data group has the wrong profile; the system group is missing;
	 * a group at 20 GiB has no chunk */
	bgs[1].flags |= BTRFS_BLOCK_GROUP_DUP;
	p.nr_bg = 2;
	bg(20 * GiB, GiB, BTRFS_BLOCK_GROUP_DATA);
	assert_int_equal(btrfs_check_chunks(&p), 0);
	assert_int_equal(p.nr_f, 3);
	f = only_finding(F_CHUNK_BG_DIFF);
	assert_true(f->logical == 11 * GiB && f->a == BTRFS_BLOCK_GROUP_DATA &&
		    f->b == (BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_DUP));
	f = only_finding(F_CHUNK_NO_BG);
	assert_true(f->logical == 12 * GiB && f->len == 32 * MiB);
	f = only_finding(F_BG_NO_CHUNK);
	assert_true(f->logical == 20 * GiB);
}

static void test_block_group_length(void **state)
{
	const struct tfinding *f;

	(void)state;
	dev_extents(GiB);
	bgs[1].len = GiB / 2;
	assert_int_equal(btrfs_check_chunks(&p), 0);
	f = only_finding(F_CHUNK_BG_DIFF);
	assert_true(f->len == GiB && f->physical == GiB / 2);
	assert_int_equal(p.nr_f, 1);
}

/* Striped profiles: each device extent is the chunk's length over its data stripes. */
static void test_striped_profiles(void **state)
{
	static const uint64_t r5[] = { 20 * GiB, 21 * GiB, 22 * GiB };
	static const uint64_t r10[] = { 30 * GiB, 31 * GiB, 32 * GiB, 33 * GiB };
	static const uint64_t r1c3[] = { 40 * GiB, 41 * GiB, 42 * GiB };

	(void)state;
	fake_tree_reset(3, 7);
	p.nr_bg = 0;
	dev_item(1, 10 * GiB);	/* 3 + 4 + 3 device extents of 1 GiB */
	chunk(10 * GiB, 2 * GiB, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID5, 3, 0, r5);
	chunk(12 * GiB, 2 * GiB, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID10, 4, 2, r10);
	chunk(14 * GiB, GiB, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_RAID1C3, 3, 0, r1c3);
	bg(10 * GiB, 2 * GiB, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID5);
	bg(12 * GiB, 2 * GiB, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID10);
	bg(14 * GiB, GiB, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_RAID1C3);
	for (int i = 0; i < 3; i++)
		dev_extent(1, r5[i], 10 * GiB, GiB);
	for (int i = 0; i < 4; i++)
		dev_extent(1, r10[i], 12 * GiB, GiB);
	for (int i = 0; i < 3; i++)
		dev_extent(1, r1c3[i], 14 * GiB, GiB);
	assert_int_equal(btrfs_check_chunks(&p), 0);
	assert_int_equal(p.nr_f, 0);
}

static void test_ioctl_error(void **state)
{
	(void)state;
	fake_tree.err = EPERM;
	assert_int_equal(btrfs_check_chunks(&p), -EPERM);
	assert_int_equal(p.nr_f, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_consistent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dev_extent_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stripe_without_dev_extent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dev_extent_of_no_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_groups, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_group_length, setup, teardown),
		cmocka_unit_test_setup_teardown(test_striped_profiles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ioctl_error, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
