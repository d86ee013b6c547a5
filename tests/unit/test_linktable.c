/* Unit tests for linktable.c: counting names per inode, races, keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dircache.h"
#include "linktable.h"

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
		assert_int_equal(linktable_add(lt, 1, 10, 1000, 5, root, "a", 1), i == 0);
	/* inode 11: nlink 3, 2 names found */
	linktable_add(lt, 1, 11, 3, 5, root, "b", 1);
	linktable_add(lt, 1, 11, 3, 5, root, "c", 1);
	/* inode 11 on another st_dev (a btrfs subvolume): a different inode */
	linktable_add(lt, 2, 11, 2, 5, root, "d", 1);
	linktable_add(lt, 2, 11, 2, 5, root, "e", 1);
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
}

static void test_changed_between_sightings(void **state)
{
	struct linktable *lt = linktable_new();
	struct seen s = { 0 };

	(void)state;
	linktable_add(lt, 1, 20, 3, 100, NULL, "x", 1);
	/* an unlink() in between changes ctime and nlink: a race, flagged */
	linktable_add(lt, 1, 20, 2, 200, NULL, "y", 1);
	linktable_for_each_mismatch(lt, collect, &s);
	assert_int_equal(s.n, 1);
	assert_true(s.e[0]->changed);
	linktable_free(lt, NULL, NULL);
}

static void test_many_inodes(void **state)
{
	struct linktable *lt = linktable_new();
	struct seen s = { 0 };

	(void)state;
	for (uint64_t ino = 1; ino <= 100000; ino++) {
		linktable_add(lt, 7, ino, 2, 1, NULL, "n", 1);
		if (ino % 1000)
			linktable_add(lt, 7, ino, 2, 1, NULL, "m", 1);
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
		cmocka_unit_test(test_many_inodes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
