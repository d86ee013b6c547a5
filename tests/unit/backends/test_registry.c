/*
 * Unit tests for registry.c's answers to the subcommands: the backend of
 * a mount table's type, and which types fscrub health and fscrub watch
 * support -- those whose backend has the hook (ext4, XFS, btrfs), and no
 * other: not a type the scan checks with the generic backend, not
 * "generic" itself, not ext4's older names (the old has_source() and
 * watchable() listed exactly these three).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "backends/backend.h"

static void test_backend_of_fstype(void **state)
{
	(void)state;
	assert_ptr_equal(backend_of_fstype("xfs"), &xfs_ops);
	assert_ptr_equal(backend_of_fstype("ext4"), &ext4_ops);
	assert_ptr_equal(backend_of_fstype("btrfs"), &btrfs_ops);
	assert_null(backend_of_fstype("generic"));
	assert_null(backend_of_fstype("tmpfs"));
	assert_null(backend_of_fstype("ext3"));
	assert_null(backend_of_fstype(""));
}

static void test_supported_types(void **state)
{
	static const char *const yes[] = { "xfs", "ext4", "btrfs" };
	static const char *const no[] = { "generic", "tmpfs", "ext2", "ext3", "overlay", "vfat" };

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		assert_true(backend_has_health(yes[i]));
		assert_true(backend_has_watch(yes[i]));
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		assert_false(backend_has_health(no[i]));
		assert_false(backend_has_watch(no[i]));
	}
}

/* Only the backends with a source of their own poll or read one; each that opens one closes it. */
static void test_watch_hooks_pair(void **state)
{
	const struct scrub_ops *const all[] = { &xfs_ops, &ext4_ops, &btrfs_ops, &generic_ops };

	(void)state;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		const struct scrub_ops *b = all[i];

		if (b->watch_read || b->watch_poll)
			assert_non_null(b->watch_close);
		if (b->watch_read || b->watch_poll || b->watch_close)
			assert_non_null(b->watch_open);
	}
	assert_null(generic_ops.watch_open);
	assert_null(generic_ops.health);
	assert_non_null(xfs_ops.watch_read);
	assert_non_null(btrfs_ops.watch_poll);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backend_of_fstype),
		cmocka_unit_test(test_supported_types),
		cmocka_unit_test(test_watch_hooks_pair),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
