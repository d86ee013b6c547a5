/* Unit tests for mountpoint.c: resolution against crafted mount tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/mountpoint.h"

static char tmpdir[64];
static char table[128];
static char realdir[256];

static int setup(void **state)
{
	FILE *f;

	(void)state;
	strcpy(tmpdir, "/tmp/fscrub-mt-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(table, sizeof(table), "%s/mountinfo", tmpdir);
	snprintf(realdir, sizeof(realdir), "%s/mnt", tmpdir);
	mkdir(realdir, 0755);
	f = fopen(table, "w");
	if (!f)
		return -1;
	/* id parent maj:min root target options - type source superopts */
	fprintf(f,
		"20 1 254:0 / / rw - ext4 /dev/vda rw\n"
		"30 20 7:1 / /mnt/a rw - xfs /dev/loop1 rw\n"
		"31 30 0:50 / /mnt/a rw - tmpfs none rw\n"
		"40 20 7:5 /sub /mnt/b rw - ext4 /dev/loop5 rw\n"
		"41 20 7:5 / /mnt/c rw - ext4 /dev/loop5 rw\n"
		"42 20 7:5 / /mnt/d rw - ext4 /dev/loop5 rw\n"
		"43 41 0:51 / /mnt/c/sub rw - tmpfs none rw\n"
		"50 20 7:6 / %s rw - btrfs /dev/loop6 rw\n"
		"60 20 7:7 / /mnt/ro ro,relatime - ext4 /dev/loop7 ro,noload\n"
		"61 20 7:8 / /mnt/robind ro,relatime - ext4 /dev/loop8 rw\n"
		"62 20 7:8 / /mnt/rw rw,relatime - ext4 /dev/loop8 rw\n", realdir);
	fclose(f);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(table);
	rmdir(realdir);
	rmdir(tmpdir);
	return 0;
}

static void test_target_topmost(void **state)
{
	int err = 0;
	struct libmnt_table *tb = mount_table_load(table, &err);
	struct mount_info mi = { 0 };

	(void)state;
	assert_non_null(tb);
	assert_int_equal(mount_find_by_target(tb, "/mnt/a", &mi), 0);
	/* two mounts on /mnt/a: the path shows the last one */
	assert_string_equal(mi.fstype, "tmpfs");
	assert_int_equal(mi.id, 31);
	assert_int_equal(mi.nr_stacked, 2);
	assert_int_equal(mount_find_by_target(tb, "/mnt/nothing", &mi), -2 /* -ENOENT */);
	mount_info_release(&mi);
	mount_table_free(tb);
}

static void test_device_mounted_thrice(void **state)
{
	int err = 0;
	struct libmnt_table *tb = mount_table_load(table, &err);
	struct mount_info mi = { 0 };

	(void)state;
	/* first mount of 7:5 is a bind of /sub: prefer the first whole-fs one */
	assert_int_equal(mount_find_by_devno(tb, makedev(7, 5), &mi, false), 3);
	assert_string_equal(mi.target, "/mnt/c");
	assert_string_equal(mi.fsroot, "/");
	assert_int_equal(mi.nr_mounts, 3);
	mount_info_release(&mi);
	assert_int_equal(mount_find_by_devno(tb, makedev(7, 9), &mi, false), 0);
	mount_table_free(tb);
}

static void test_find_same_and_target_of(void **state)
{
	int err = 0;
	struct libmnt_table *tb = mount_table_load(table, &err);
	struct mount_info mi = { 0 };

	(void)state;
	/* the xfs under the tmpfs on /mnt/a, found again by what it is */
	assert_int_equal(mount_find_by_devno(tb, makedev(7, 1), &mi, false), 1);
	assert_int_equal(mount_find_same(tb, &mi), 30);
	free(mi.fsroot);
	mi.fsroot = strdup("/other");
	assert_int_equal(mount_find_same(tb, &mi), -2 /* -ENOENT */);
	mount_info_release(&mi);
	assert_string_equal(mount_target_of(tb, 43), "/mnt/c/sub");
	assert_null(mount_target_of(tb, 99));
	mount_table_free(tb);
}

static void test_sb_readonly(void **state)
{
	int err = 0;
	struct libmnt_table *tb = mount_table_load(table, &err);

	(void)state;
	/* the superblock's options decide, not the mount's */
	assert_true(mount_sb_readonly_in(tb, makedev(7, 7)));
	assert_false(mount_sb_readonly_in(tb, makedev(7, 8)));
	assert_false(mount_sb_readonly_in(tb, makedev(7, 5)));
	assert_false(mount_sb_readonly_in(tb, makedev(7, 99)));
	mount_table_free(tb);
}

struct kids {
	int n;
	char first[64];
};

static void kid(const char *target, const char *fstype, void *arg)
{
	struct kids *k = arg;

	(void)fstype;
	if (!k->n++)
		snprintf(k->first, sizeof(k->first), "%s", target);
}

static void test_children(void **state)
{
	int err = 0;
	struct libmnt_table *tb = mount_table_load(table, &err);
	struct kids k = { 0 };

	(void)state;
	mount_for_each_child(tb, 41, kid, &k);
	assert_int_equal(k.n, 1);
	assert_string_equal(k.first, "/mnt/c/sub");
	mount_table_free(tb);
}

static void test_resolve_errors(void **state)
{
	struct mount_info mi;
	struct strbuf err = STRBUF_INIT;

	(void)state;
	assert_int_equal(mount_resolve("/nonexistent/x", table, &mi, &err), 16);
	assert_non_null(strstr(err.buf, "cannot access '/nonexistent/x'"));
	strbuf_reset(&err);
	assert_int_equal(mount_resolve(table, table, &mi, &err), 16);
	assert_non_null(strstr(err.buf, "is not a mount point or a block device"));
	strbuf_reset(&err);
	assert_int_equal(mount_resolve(tmpdir, table, &mi, &err), 16);
	assert_non_null(strstr(err.buf, "is not a mount point"));
	strbuf_reset(&err);
	assert_int_equal(mount_resolve(realdir, table, &mi, &err), 0);
	assert_string_equal(mi.fstype, "btrfs");
	assert_string_equal(mi.target, realdir);
	mount_info_release(&mi);
	assert_int_equal(mount_resolve(realdir, "/nonexistent/table", &mi, &err), 16);
	strbuf_release(&err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_target_topmost),
		cmocka_unit_test(test_device_mounted_thrice),
		cmocka_unit_test(test_children),
		cmocka_unit_test(test_find_same_and_target_of),
		cmocka_unit_test(test_resolve_errors),
		cmocka_unit_test(test_sb_readonly),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
