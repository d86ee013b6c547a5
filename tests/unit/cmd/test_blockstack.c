/*
 * Unit tests for blockstack.c: a sector followed up partitions, md arrays,
 * device-mapper tables and loop devices, over a sysfs tree made here (the
 * machine's kernel has neither md RAID1 nor device-mapper).
 */
#include <errno.h>
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

#include "cmd/blockstack.h"

static char root[64];

/* Write text to root/rel, making its directories. */
static void put(const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(path, 0755);
			*p = '/';
		}
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	char link[512];

	(void)state;
	strcpy(root, "/tmp/fscrub-bstack-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	/* sda: 2 partitions, sda1 at sector 2048 (1 MiB), sda2 at 1050624. */
	put("class/block/sda/dev", "8:0\n");
	put("class/block/sda/size", "4194304\n");
	put("class/block/sda/sda1/partition", "1\n");
	put("class/block/sda/sda1/start", "2048\n");
	put("class/block/sda/sda1/size", "1048576\n");
	put("class/block/sda/sda2/partition", "2\n");
	put("class/block/sda/sda2/start", "1050624\n");
	put("class/block/sda/sda2/size", "2097152\n");
	put("class/block/sda/queue/rotational", "0\n");	/* not a partition */
	put("class/block/sda1/dev", "8:1\n");
	/*
	 * md0 (raid1) on sdb, data offset 2048 sectors; md1 (raid6 in a DDF
	 * layout, not followed) on sdc; md2 (raid5, left-symmetric, chunks of
	 * 64 KiB) on sdd (slot 1), sde (slot 0) and sdf (slot 2).
	 */
	put("class/block/sdb/dev", "8:16\n");
	put("class/block/sdb/holders/md0", "");
	put("class/block/md0/dev", "9:0\n");
	put("class/block/md0/size", "1000000\n");
	put("class/block/md0/md/level", "raid1\n");
	put("class/block/md0/md/dev-sdb/offset", "2048\n");
	put("class/block/md0/md/dev-sdb/slot", "0\n");
	put("class/block/sdc/dev", "8:32\n");
	put("class/block/sdc/holders/md1", "");
	put("class/block/md1/dev", "9:1\n");
	put("class/block/md1/size", "1000000\n");
	put("class/block/md1/md/level", "raid6\n");
	put("class/block/md1/md/layout", "8\n");
	put("class/block/md1/md/chunk_size", "65536\n");
	put("class/block/md1/md/raid_disks", "4\n");
	put("class/block/md1/md/dev-sdc/offset", "2048\n");
	put("class/block/md1/md/dev-sdc/slot", "2\n");
	put("class/block/sdd/dev", "8:48\n");
	put("class/block/sdd/holders/md2", "");
	put("class/block/md2/dev", "9:2\n");
	put("class/block/md2/size", "1000000\n");
	put("class/block/md2/md/level", "raid5\n");
	put("class/block/md2/md/layout", "2\n");
	put("class/block/md2/md/chunk_size", "65536\n");
	put("class/block/md2/md/raid_disks", "3\n");
	put("class/block/md2/md/dev-sdd/offset", "2048\n");
	put("class/block/md2/md/dev-sdd/slot", "1\n");
	/* loop0 on a file from byte 1 MiB, at most 8 MiB; loop1 unbound. */
	put("class/block/loop0/dev", "7:0\n");
	put("class/block/loop0/size", "16384\n");
	put("class/block/loop0/loop/backing_file", "/srv/disk.img\n");
	put("class/block/loop0/loop/offset", "1048576\n");
	put("class/block/loop0/loop/sizelimit", "8388608\n");
	put("class/block/loop1/dev", "7:1\n");
	put("class/block/loop1/size", "0\n");
	put("dev/block/.keep", "");
	snprintf(link, sizeof(link), "%s/dev/block/8:1", root);
	return symlink("../../devices/pci0000:00/block/sda/sda1", link);
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd);
}

static void test_names(void **state)
{
	struct bstack b = { root };
	char name[BSTACK_NAME_MAX];
	dev_t d;
	uint64_t size;

	(void)state;
	assert_int_equal(bstack_name_of(&b, makedev(8, 1), name, sizeof(name)), 0);
	assert_string_equal(name, "sda1");
	assert_true(bstack_name_of(&b, makedev(8, 99), name, sizeof(name)) < 0);
	assert_int_equal(bstack_devno_of(&b, "md0", &d), 0);
	assert_true(d == makedev(9, 0));
	assert_int_equal(bstack_size_of(&b, "sda", &size), 0);
	assert_true(size == 4194304ULL * 512);
}

static void test_partitions(void **state)
{
	struct bstack b = { root };
	struct bstack_hops h = { 0 };

	(void)state;
	/* Sector 1050624 + 8 of the disk is sector 0 of sda2. */
	assert_int_equal(bstack_partitions(&b, "sda", 1050624ULL * 512 + 8 * 512, 512, &h), 0);
	assert_int_equal(h.n, 1);
	assert_string_equal(h.v[0].name, "sda2");
	assert_true(h.v[0].off == 8 * 512 && h.v[0].len == 512);
	bstack_hops_release(&h);
	/* A range across the end of sda1 into sda2: a piece of each. */
	assert_int_equal(bstack_partitions(&b, "sda", (2048ULL + 1048576 - 1) * 512, 4096, &h),
			 0);
	assert_int_equal(h.n, 2);
	for (size_t i = 0; i < 2; i++) {
		if (!strcmp(h.v[i].name, "sda1"))
			assert_true(h.v[i].off == (1048576ULL - 1) * 512 && h.v[i].len == 512);
		else
			assert_true(!strcmp(h.v[i].name, "sda2") && h.v[i].off == 0 &&
				    h.v[i].len == 3584);
	}
	bstack_hops_release(&h);
	/* The partition table itself: no partition. */
	assert_int_equal(bstack_partitions(&b, "sda", 0, 512, &h), 0);
	assert_int_equal(h.n, 0);
}

static void test_md(void **state)
{
	struct bstack b = { root };
	struct bstack_hops h = { 0 };
	struct strbuf un = STRBUF_INIT;

	(void)state;
	assert_int_equal(bstack_holders(&b, "sdb", makedev(8, 16), 4096ULL * 512, 1024, &h, &un),
			 0);
	assert_int_equal(h.n, 1);
	assert_string_equal(h.v[0].name, "md0");
	assert_true(h.v[0].off == 2048ULL * 512 && h.v[0].len == 1024);
	assert_int_equal(un.len, 0);
	bstack_hops_release(&h);
	/* Before the data offset: the member's superblock, no array byte. */
	assert_int_equal(bstack_holders(&b, "sdb", makedev(8, 16), 0, 512, &h, &un), 0);
	assert_int_equal(h.n, 0);
	/* raid6 in a DDF layout: said to be unsupported, not mapped. */
	assert_int_equal(bstack_holders(&b, "sdc", makedev(8, 32), 4096ULL * 512, 512, &h, &un),
			 0);
	assert_int_equal(h.n, 0);
	assert_non_null(strstr(un.buf, "md1: md raid6 is not supported"));
	strbuf_release(&un);
	/*
	 * raid5 left-symmetric over 3 members, rows D0 D1 P / D3 P D2 / P D4 D5:
	 * slot 1's first 64 KiB of data is D1 (array bytes 64 KiB on), its
	 * second parity of row 1 (array bytes 128-256 KiB), its third D4; a
	 * range over all three gives the three pieces in order.
	 */
	assert_int_equal(bstack_holders(&b, "sdd", makedev(8, 48), 2048ULL * 512 + 4096,
					3 * 65536 - 4096, &h, &un), 0);
	assert_int_equal(h.n, 3);
	assert_true(h.v[0].off == 65536 + 4096 && h.v[0].len == 65536 - 4096 && !h.v[0].parity);
	assert_string_equal(h.v[0].how, "md raid5");
	assert_true(h.v[1].off == 2 * 65536 && h.v[1].len == 2 * 65536 && h.v[1].parity == 'P');
	assert_true(h.v[2].off == 4 * 65536 && h.v[2].len == 65536 && !h.v[2].parity);
	assert_int_equal(un.len, 0);
	bstack_hops_release(&h);
}

static void test_dm(void **state)
{
	/* Two segments of 8:16, the second before the first on the disk. */
	const char *table = "0 2048 linear 8:16 4096\n"
			    "2048 1024 linear 8:32 0\n"
			    "3072 1024 linear 8:16 0\n";
	struct bstack_hops h = { 0 };
	char what[32] = "";

	(void)state;
	/* Sector 100 of sdb: in the third segment, dm sector 3172. */
	assert_int_equal(bstack_dm_map(table, "dm-0", makedev(8, 16), 100 * 512, 512, &h, what,
				       sizeof(what)), 0);
	assert_int_equal(h.n, 1);
	assert_true(h.v[0].off == 3172ULL * 512 && h.v[0].len == 512);
	assert_string_equal(h.v[0].how, "dm linear");
	bstack_hops_release(&h);
	/* Sector 5000 of sdb: the first segment, dm sector 904. */
	assert_int_equal(bstack_dm_map(table, "dm-0", makedev(8, 16), 5000 * 512, 512, &h, what,
				       sizeof(what)), 0);
	assert_int_equal(h.n, 1);
	assert_true(h.v[0].off == 904ULL * 512);
	bstack_hops_release(&h);
	/* Sector 2000 of sdb: in no segment. */
	assert_int_equal(bstack_dm_map(table, "dm-0", makedev(8, 16), 2000 * 512, 512, &h, what,
				       sizeof(what)), 0);
	assert_int_equal(h.n, 0);
	/* A striped target over the device: refused, with its type. */
	assert_int_equal(bstack_dm_map("0 4096 striped 2 128 8:16 0 8:32 0\n", "dm-1",
				       makedev(8, 16), 0, 512, &h, what, sizeof(what)),
			 -EOPNOTSUPP);
	assert_string_equal(what, "striped");
	assert_int_equal(h.n, 0);
	assert_int_equal(bstack_dm_map("0 x linear\n", "dm-1", makedev(8, 16), 0, 512, &h, what,
				       sizeof(what)), -EINVAL);
	assert_int_equal(bstack_dm_map("", "dm-1", makedev(8, 16), 0, 512, &h, what,
				       sizeof(what)), 0);
}

static void test_loops(void **state)
{
	struct bstack b = { root };
	struct bstack_loops l = { 0 };
	uint64_t o, n;

	(void)state;
	assert_int_equal(bstack_loops(&b, &l), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.v[0].name, "loop0");
	assert_string_equal(l.v[0].backing, "/srv/disk.img");
	/* File byte 1 MiB + 4096 is the loop device's byte 4096. */
	assert_true(bstack_loop_map(&l.v[0], (1 << 20) + 4096, 512, &o, &n));
	assert_true(o == 4096 && n == 512);
	/* Before the offset, and past the size limit: not shown. */
	assert_false(bstack_loop_map(&l.v[0], 4096, 512, &o, &n));
	assert_false(bstack_loop_map(&l.v[0], (1 << 20) + (8 << 20), 512, &o, &n));
	bstack_loops_release(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_partitions),
		cmocka_unit_test(test_md),
		cmocka_unit_test(test_dm),
		cmocka_unit_test(test_loops),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
