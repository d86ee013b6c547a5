/* Unit tests for linktable.c: counting names per inode, races, keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tree/dircache.h"
#include "lib/inoset.h"
#include "tree/linktable.h"

struct seen {
	unsigned n;
	struct link_entry *e[16];
};

static void collect(struct link_entry *e, void *arg)
{
	struct seen *s = arg;

	if (s->n < 16)
		s->e[s->n] = e;
	s->n++;
}

static void put_dir(struct dir_node *dir, void *arg)
{
	dir_node_put(arg, dir);
}

static void test_counts_and_mismatch(void **state)
{
	struct dircache dc;
	struct linktable *lt = linktable_new();
	struct dir_node *root = dir_node_new_root(-1, 1, 2);
	struct seen s = { 0 };

	(void)state;
	dircache_init(&dc, 4);
	/* inode 10: nlink 1000, all 1000 names found */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(linktable_add(lt, 1, 10, 1000, 5, root, "a", 1, 1), i == 0);
	/* inode 11: nlink 3, 2 names found */
	linktable_add(lt, 1, 11, 3, 5, root, "b", 1, 1);
	linktable_add(lt, 1, 11, 3, 5, root, "c", 1, 1);
	/* inode 11 on another st_dev (a btrfs subvolume): a different inode */
	linktable_add(lt, 2, 11, 2, 5, root, "d", 1, 1);
	linktable_add(lt, 2, 11, 2, 5, root, "e", 1, 1);
	assert_int_equal(linktable_count(lt), 3);
	linktable_for_each_mismatch(lt, collect, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.e[0]->ino, 11);
	assert_int_equal(s.e[0]->dev, 1);
	assert_int_equal(s.e[0]->found, 2);
	assert_int_equal(s.e[0]->nlink, 3);
	assert_string_equal(s.e[0]->name, "b");
	assert_false(s.e[0]->changed);
	assert_ptr_equal(s.e[0]->dir, root);
	linktable_free(lt, put_dir, &dc);
	dir_node_put(&dc, root);
	dircache_release(&dc);
}

static void test_changed_between_sightings(void **state)
{
	struct linktable *lt = linktable_new();
	struct seen s = { 0 };

	(void)state;
	linktable_add(lt, 1, 20, 3, 100, NULL, "x", 1, 1);
	/* an unlink() in between changes ctime and nlink: a race, flagged */
	linktable_add(lt, 1, 20, 2, 200, NULL, "y", 1, 1);
	linktable_for_each_mismatch(lt, collect, &s);
	assert_int_equal(s.n, 1);
	assert_true(s.e[0]->changed);
	linktable_free(lt, NULL, NULL);
}

static void test_single_link_reached_twice(void **state)
{
	struct linktable *lt = linktable_new();
	struct seen s = { 0 };

	(void)state;
	/* the walk saw an nlink-1 inode a second time: the entry starts at 2 */
	assert_true(linktable_add(lt, 1, 30, 1, 9, NULL, "second", 6, 2));
	linktable_add(lt, 1, 30, 1, 9, NULL, "third", 5, 1);
	linktable_for_each_mismatch(lt, collect, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.e[0]->found, 3);
	assert_int_equal(s.e[0]->nlink, 1);
	linktable_free(lt, NULL, NULL);
}

static void test_inoset(void **state)
{
	struct inoset *set = inoset_new();

	(void)state;
	/* dense ext4-like numbers and sparse XFS-like ones, two devices */
	for (uint64_t ino = 1; ino < 200000; ino++)
		assert_false(inoset_test_and_set(set, 1, ino));
	for (uint64_t i = 0; i < 1000; i++)
		assert_false(inoset_test_and_set(set, 2, (i << 32) | 128));
	for (uint64_t ino = 1; ino < 200000; ino += 777)
		assert_true(inoset_test_and_set(set, 1, ino));
	assert_false(inoset_test_and_set(set, 2, 129));
	assert_true(inoset_test_and_set(set, 2, (7ULL << 32) | 128));
	assert_false(inoset_test_and_set(set, 3, 1));
	/* ~1 bit per dense inode number plus per-bitmap overhead */
	assert_true(inoset_bytes(set) < 200000 / 8 * 2 + 1000 * 600 + 64 * 1024);
	inoset_free(set);
}

static void test_many_inodes(void **state)
{
	struct linktable *lt = linktable_new();
	struct seen s = { 0 };

	(void)state;
	for (uint64_t ino = 1; ino <= 100000; ino++) {
		linktable_add(lt, 7, ino, 2, 1, NULL, "n", 1, 1);
		if (ino % 1000)
			linktable_add(lt, 7, ino, 2, 1, NULL, "m", 1, 1);
	}
	assert_int_equal(linktable_count(lt), 100000);
	linktable_for_each_mismatch(lt, collect, &s);
	assert_int_equal(s.n, 100);
	linktable_free(lt, NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts_and_mismatch),
		cmocka_unit_test(test_changed_between_sightings),
		cmocka_unit_test(test_single_link_reached_twice),
		cmocka_unit_test(test_inoset),
		cmocka_unit_test(test_many_inodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
