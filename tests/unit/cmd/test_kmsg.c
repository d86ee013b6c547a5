/*
 * Unit tests for kmsg.c: the block layer's, buffer heads', md RAID1's and
 * dm-integrity's error lines parsed from /dev/kmsg records as the kernels
 * of 6.1 to 6.18 write them; userspace's forged lines and other lines
 * skipped; a storm of lines for one range acted on once per quiet time;
 * the records the ring buffer overwrote counted from the sequence numbers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cmd/kmsg.h"

static int parse(const char *rec, struct kmsg_error *e)
{
	memset(e, 0, sizeof(*e));
	return kmsg_parse(rec, strlen(rec), e);
}

/* rec is an error line of format on dev at first (in unit). */
static void expect(const char *rec, const char *dev, uint64_t first, enum kmsg_unit unit,
		   const char *format)
{
	struct kmsg_error e;

	assert_int_equal(parse(rec, &e), 1);
	assert_string_equal(e.dev, dev);
	assert_int_equal(e.first, first);
	assert_int_equal(e.unit, unit);
	assert_string_equal(e.format, format);
}

static void test_request_error(void **state)
{
	struct kmsg_error e;

	(void)state;
	expect("3,2054188,35255942874,-;I/O error, dev loop0, sector 1088 op 0x0:(READ) flags "
	       "0x800 phys_seg 1 prio class 2\n", "loop0", 1088, KMSG_SECTOR, "request");
	assert_int_equal(parse("3,2054188,1,-;I/O error, dev loop0, sector 8 op 0x0:(READ)\n", &e),
			 1);
	assert_int_equal(e.seq, 2054188);
	expect("3,7,1,-;critical medium error, dev sdb, sector 123456789 op 0x1:(WRITE) flags 0x0 "
	       "phys_seg 1 prio class 0\n SUBSYSTEM=block\n DEVICE=+block:sdb\n", "sdb",
	       123456789, KMSG_SECTOR, "request");
	/* a failed discard or flush is no bad sector */
	assert_int_equal(parse("3,8,1,-;I/O error, dev sdb, sector 0 op 0x3:(DISCARD) flags 0x0 "
			       "phys_seg 1 prio class 0\n", &e), 0);
}

static void test_other_formats(void **state)
{
	(void)state;
	expect("3,9,1,-;Buffer I/O error on dev sda1, logical block 4242, async page read\n",
	       "sda1", 4242, KMSG_BLOCK, "buffer");
	expect("3,10,1,-;md/raid1:md0: sda1: unrecoverable I/O read error for block 2048\n", "md0",
	       2048, KMSG_SECTOR, "md raid1");
	expect("6,11,1,-;md/raid1:md127: redirecting sector 96 to other mirror: sdb1\n", "md127",
	       96, KMSG_SECTOR, "md raid1");
	/* the device under the integrity target, and a sector of the target */
	expect("3,12,1,-;device-mapper: integrity: sdb1: Checksum failed at sector 0x1f00\n",
	       "sdb1", 0x1f00, KMSG_INTEGRITY_SECTOR, "dm-integrity");
}

static void test_forged_and_others_skipped(void **state)
{
	struct kmsg_error e;

	(void)state;
	/* echo '<3>I/O error, ...' > /dev/kmsg: the kernel makes it LOG_USER (facility 1) */
	assert_int_equal(parse("11,13,1,-;I/O error, dev loop0, sector 8 op 0x0:(READ) flags "
			       "0x0 phys_seg 1 prio class 2\n", &e), 0);
	assert_int_equal(e.seq, 13);
	assert_int_equal(parse("6,14,1,-;loop0: detected capacity change from 0 to 8\n", &e), 0);
	assert_int_equal(parse("3,15,1,-;I/O error, dev , sector 8 op 0x0:(READ)\n", &e), 0);
	assert_int_equal(parse("3,16,1,-;I/O error, dev loop0, sector x op 0x0:(READ)\n", &e), 0);
	assert_int_equal(parse("no record at all", &e), -EINVAL);
	assert_int_equal(parse("3,17;", &e), -EINVAL);
}

static void test_storm_folded(void **state)
{
	static struct kmsg_recent r;

	(void)state;
	assert_false(kmsg_recent_seen(&r, "loop0", 4096, 4096, 100.0));
	for (int i = 0; i < 5000; i++)
		assert_true(kmsg_recent_seen(&r, "loop0", 4096 + (i % 2) * 512, 4096, 100.0 + i / 1000.0));
	assert_int_equal(r.v[0].folded, 5000);
	/* another device, another range: their own */
	assert_false(kmsg_recent_seen(&r, "loop1", 4096, 4096, 101.0));
	assert_false(kmsg_recent_seen(&r, "loop0", 8192, 4096, 101.0));
	/* the quiet time over, the range is acted on again */
	assert_false(kmsg_recent_seen(&r, "loop0", 4096, 4096, 100.0 + KMSG_QUIET_S));
}

static void test_records_missed(void **state)
{
	struct kmsg_seq s = { 0 };

	(void)state;
	assert_int_equal(kmsg_seq_read(&s, 500), 0);	/* the first read: nothing before counts */
	assert_int_equal(kmsg_seq_read(&s, 501), 0);
	assert_int_equal(kmsg_seq_read(&s, 502), 0);
	assert_int_equal(kmsg_seq_read(&s, 910), 407);	/* the ring wrapped: 503-909 lost */
	assert_int_equal(kmsg_seq_read(&s, 911), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_error),
		cmocka_unit_test(test_other_formats),
		cmocka_unit_test(test_forged_and_others_skipped),
		cmocka_unit_test(test_storm_folded),
		cmocka_unit_test(test_records_missed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
