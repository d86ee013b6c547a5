/* Unit tests for advice.c: actions by check id and severity, sentences, the summary's order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "report/advice.h"
#include "report/checks.h"
#include "lib/strbuf.h"

static const struct advice_fs ext4 = { .fstype = "ext4" };

/* advice_text() of check at sev on fs, in a static buffer. */
static const char *text(const char *check, enum severity sev, const struct advice_fs *fs)
{
	static char buf[512];
	struct strbuf sb = STRBUF_INIT;

	advice_text(&sb, check, sev, fs);
	snprintf(buf, sizeof(buf), "%s", sb.buf);
	strbuf_release(&sb);
	return buf;
}

static void test_one_action_per_class(void **state)
{
	(void)state;
	assert_int_equal(advice_action(CHECK_DATA_READ, SEV_ERROR), ADVICE_RESTORE);
	assert_int_equal(advice_action(CHECK_MEDIA_FILE, SEV_ERROR), ADVICE_RESTORE);
	assert_int_equal(advice_action(CHECK_BTRFS_DATA_CSUM, SEV_ERROR), ADVICE_RESTORE);
	assert_int_equal(advice_action(CHECK_NLINK_COUNT, SEV_ERROR), ADVICE_OFFLINE);
	assert_int_equal(advice_action(CHECK_BTRFS_MISSING_DEVICE, SEV_ERROR), ADVICE_DEVICE);
	assert_int_equal(advice_action(CHECK_BTRFS_DEV_STATS, SEV_WARNING), ADVICE_DEVICE);
	assert_int_equal(advice_action(CHECK_NAME_CONFUSABLE, SEV_WARNING), ADVICE_RENAME);
	assert_int_equal(advice_action(CHECK_MEDIA_UNOWNED, SEV_WARNING), ADVICE_RECHECK);
	assert_string_equal(advice_action_name(ADVICE_OFFLINE), "offline");
	assert_string_equal(advice_action_name(ADVICE_RESTORE), "restore");
}

/* An info is never damage; a repair needs nothing but a failing device's. */
static void test_severity_overrides(void **state)
{
	(void)state;
	assert_int_equal(advice_action(CHECK_NLINK_COUNT, SEV_INFO), ADVICE_NONE);
	assert_string_equal(text(CHECK_NLINK_COUNT, SEV_INFO, &ext4), "Nothing to do.");
	assert_int_equal(advice_action(CHECK_XFS_SCRUB, SEV_REPAIRED), ADVICE_NONE);
	assert_string_equal(text(CHECK_XFS_SCRUB, SEV_REPAIRED, &ext4),
			    "Nothing to do: it was corrected.");
	assert_int_equal(advice_action(CHECK_BTRFS_SCRUB, SEV_REPAIRED), ADVICE_DEVICE);
	assert_string_equal(text(CHECK_DIR_LOCKED, SEV_INFO, &ext4),
			    "Nothing to do: load the directory's key to have its files checked.");
}

/* The offline checker is the filesystem's, and / is reached by booting. */
static void test_offline_checker(void **state)
{
	const struct advice_fs xfs = { .fstype = "xfs" }, btrfs = { .fstype = "btrfs" };
	const struct advice_fs root = { .fstype = "ext4", .root = true }, other = { 0 };

	(void)state;
	assert_string_equal(text(CHECK_NLINK_COUNT, SEV_ERROR, &ext4),
			    "Unmount and run e2fsck -fn, then e2fsck -f to repair.");
	assert_string_equal(text(CHECK_XFS_SPACE, SEV_ERROR, &xfs),
			    "Unmount and run xfs_repair -n, then xfs_repair to repair.");
	assert_string_equal(text(CHECK_BTRFS_TREE, SEV_ERROR, &btrfs),
			    "Unmount and run btrfs check --readonly; repair only as its output advises.");
	assert_string_equal(text(CHECK_EXT4_HTREE, SEV_ERROR, &root),
			    "Boot from rescue media (or with fsck.mode=force) and run e2fsck -fn on "
			    "the unmounted filesystem, then e2fsck -f to repair.");
	assert_string_equal(text(CHECK_DIRENT_INO, SEV_ERROR, &other),
			    "Unmount and run fsck -n, then fsck to repair.");
	assert_string_equal(text(CHECK_DATA_READ, SEV_ERROR, &ext4),
			    "Restore this file from a backup.");
}

/* An id another branch adds, without a row yet, gets its class's default by prefix. */
static void test_unknown_id_by_prefix(void **state)
{
	(void)state;
	assert_int_equal(advice_action("name.future", SEV_WARNING), ADVICE_RENAME);
	assert_int_equal(advice_action("media.future", SEV_ERROR), ADVICE_RESTORE);
	assert_int_equal(advice_action("ledger.future", SEV_ERROR), ADVICE_RESTORE);
	assert_int_equal(advice_action("xfs.future", SEV_ERROR), ADVICE_OFFLINE);
	assert_int_equal(advice_action("future", SEV_ERROR), ADVICE_OFFLINE);
	assert_int_equal(advice_action("xfs.future", SEV_INFO), ADVICE_NONE);
	assert_string_equal(text("ext4.future", SEV_ERROR, &ext4),
			    "Unmount and run e2fsck -fn, then e2fsck -f to repair.");
}

static void test_summary_order(void **state)
{
	struct strbuf sb = STRBUF_INIT;
	unsigned all = 1u << ADVICE_NONE | 1u << ADVICE_RENAME | 1u << ADVICE_RESTORE |
		       1u << ADVICE_OFFLINE | 1u << ADVICE_DEVICE;

	(void)state;
	assert_int_equal(advice_worst(0), ADVICE_NONE);
	assert_int_equal(advice_worst(all), ADVICE_DEVICE);
	advice_summary(&sb, 1u << ADVICE_NONE, &ext4);
	assert_string_equal(sb.buf, "");
	advice_summary(&sb, all, &ext4);
	assert_string_equal(sb.buf, " Check the devices first (smartctl -a): replace a failing "
			    "one, reattach a missing one. Then unmount and run e2fsck -fn, then e2fsck -f to repair. Then "
			    "restore the damaged files from a backup (fscrub status lists them).");
	strbuf_release(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_action_per_class),
		cmocka_unit_test(test_severity_overrides),
		cmocka_unit_test(test_offline_checker),
		cmocka_unit_test(test_unknown_id_by_prefix),
		cmocka_unit_test(test_summary_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
