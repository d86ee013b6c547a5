/*
 * Unit tests for healthmon: the XFS health monitor's V0 records as read()
 * returns them, fed through a pipe in place of the monitor's descriptor.
 * The byte streams are laid out here field by field at the offsets of the
 * Linux 7.0 record (see backends/xfs/xfs_healthmon.c), independently of the decoder: every
 * type, a record split across two reads, an unknown type and domain
 * (skipped and counted), lost events, and the end of file after unmount.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/xfs/xfs_healthmon.h"

#define MAX_SEEN 32

struct seen {
	int nr;
	struct healthmon_event ev[MAX_SEEN];
};

static void collect(const struct healthmon_event *ev, void *arg)
{
	struct seen *s = arg;

	if (s->nr < MAX_SEEN)
		s->ev[s->nr] = *ev;
	s->nr++;
}

/* A record: domain, type, time, then (offset, size, value) triples, 0 ended. */
static void rec(unsigned char *out, uint32_t domain, uint32_t type, ...)
{
	uint64_t time_ns = 1767225600000000000ULL;	/* 2026-01-01 */
	va_list ap;
	unsigned off;

	memset(out, 0, HEALTHMON_RECORD_SIZE);
	memcpy(out, &domain, 4);
	memcpy(out + 4, &type, 4);
	memcpy(out + 8, &time_ns, 8);
	va_start(ap, type);
	while ((off = va_arg(ap, unsigned)) != 0) {
		unsigned size = va_arg(ap, unsigned);
		uint64_t v = va_arg(ap, uint64_t);
		uint32_t v32 = (uint32_t)v;

		if (size == 4)
			memcpy(out + off, &v32, 4);
		else
			memcpy(out + off, &v, 8);
	}
	va_end(ap);
}

#define U32(off, v) (unsigned)(off), 4u, (uint64_t)(v)
#define U64(off, v) (unsigned)(off), 8u, (uint64_t)(v)

struct pipe_fd {
	int r, w;
};

static void open_pipe(struct pipe_fd *p)
{
	int fds[2];

	assert_int_equal(pipe(fds), 0);
	p->r = fds[0];
	p->w = fds[1];
}

static void put(struct pipe_fd *p, const void *buf, size_t len)
{
	assert_int_equal(write(p->w, buf, len), (ssize_t)len);
}

/* Every known type, one record each, in one read. */
static void test_every_type(void **state)
{
	unsigned char stream[14][HEALTHMON_RECORD_SIZE];
	struct healthmon_reader r = { 0 };
	struct seen s = { 0 };
	struct pipe_fd p;
	int i = 0;

	(void)state;
	rec(stream[i++], HM_DOMAIN_MOUNT, HM_TYPE_RUNNING, 0);
	rec(stream[i++], HM_DOMAIN_FS, HM_TYPE_SICK, U32(16, 0x41), 0);
	rec(stream[i++], HM_DOMAIN_AG, HM_TYPE_CORRUPT, U32(16, 0x10), U32(20, 3), 0);
	rec(stream[i++], HM_DOMAIN_INODE, HM_TYPE_SICK, U32(16, 0x10), U32(20, 77),
	    U64(24, 0x100000083ULL), 0);
	rec(stream[i++], HM_DOMAIN_RTGROUP, HM_TYPE_HEALTHY, U32(16, 2), U32(20, 1), 0);
	rec(stream[i++], HM_DOMAIN_MOUNT, HM_TYPE_SHUTDOWN,
	    U32(16, HM_SHUTDOWN_META_IO_ERROR | HM_SHUTDOWN_CORRUPT_ONDISK), 0);
	rec(stream[i++], HM_DOMAIN_DATADEV, HM_TYPE_MEDIA_ERROR, U64(16, 2048), U64(24, 16), 0);
	rec(stream[i++], HM_DOMAIN_LOGDEV, HM_TYPE_MEDIA_ERROR, U64(16, 8), U64(24, 1), 0);
	for (uint32_t t = HM_TYPE_BUFREAD; t <= HM_TYPE_DATALOST; t++)
		rec(stream[i++], HM_DOMAIN_FILERANGE, t, U64(16, 4096 * t), U64(24, 4096),
		    U64(32, 131), U32(40, 5), U32(44, t == HM_TYPE_DATALOST ? EIO : ENOSPC), 0);
	assert_int_equal(i, 13);
	rec(stream[i++], HM_DOMAIN_MOUNT, HM_TYPE_UNMOUNT, 0);

	open_pipe(&p);
	put(&p, stream, sizeof(stream));
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 0);
	assert_int_equal(s.nr, 14);
	assert_int_equal(r.events, 14);
	assert_int_equal(r.unknown, 0);
	assert_int_equal(r.have, 0);

	assert_int_equal(s.ev[0].type, HM_TYPE_RUNNING);
	assert_int_equal(s.ev[0].time_ns, 1767225600000000000ULL);
	assert_int_equal(s.ev[1].domain, HM_DOMAIN_FS);
	assert_int_equal(s.ev[1].mask, 0x41);
	assert_int_equal(s.ev[2].type, HM_TYPE_CORRUPT);
	assert_int_equal(s.ev[2].mask, 0x10);
	assert_int_equal(s.ev[2].group, 3);
	assert_int_equal(s.ev[3].domain, HM_DOMAIN_INODE);
	assert_int_equal(s.ev[3].ino, 0x100000083ULL);
	assert_int_equal(s.ev[3].gen, 77);
	assert_int_equal(s.ev[3].mask, 0x10);
	assert_int_equal(s.ev[4].type, HM_TYPE_HEALTHY);
	assert_int_equal(s.ev[4].group, 1);
	assert_int_equal(s.ev[5].type, HM_TYPE_SHUTDOWN);
	assert_int_equal(s.ev[5].reasons, HM_SHUTDOWN_META_IO_ERROR | HM_SHUTDOWN_CORRUPT_ONDISK);
	assert_int_equal(s.ev[6].type, HM_TYPE_MEDIA_ERROR);
	assert_int_equal(s.ev[6].domain, HM_DOMAIN_DATADEV);
	assert_int_equal(s.ev[6].daddr, 2048);
	assert_int_equal(s.ev[6].bbcount, 16);
	assert_int_equal(s.ev[7].domain, HM_DOMAIN_LOGDEV);
	for (int k = 8; k <= 12; k++) {
		uint32_t t = HM_TYPE_BUFREAD + (uint32_t)(k - 8);

		assert_int_equal(s.ev[k].type, t);
		assert_int_equal(s.ev[k].domain, HM_DOMAIN_FILERANGE);
		assert_int_equal(s.ev[k].pos, 4096 * t);
		assert_int_equal(s.ev[k].len, 4096);
		assert_int_equal(s.ev[k].ino, 131);
		assert_int_equal(s.ev[k].gen, 5);
		assert_int_equal(s.ev[k].error, t == HM_TYPE_DATALOST ? EIO : ENOSPC);
		assert_int_equal(s.ev[k].mask, 0);
	}
	assert_int_equal(s.ev[13].type, HM_TYPE_UNMOUNT);

	/* after the unmount the monitor reads as end of file */
	close(p.w);
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 1);
	assert_int_equal(s.nr, 14);
	close(p.r);
}

/* A record split across reads (and one read shorter than a record). */
static void test_short_reads(void **state)
{
	unsigned char two[2][HEALTHMON_RECORD_SIZE];
	struct healthmon_reader r = { 0 };
	struct seen s = { 0 };
	struct pipe_fd p;

	(void)state;
	rec(two[0], HM_DOMAIN_INODE, HM_TYPE_SICK, U32(16, 1), U32(20, 9), U64(24, 128), 0);
	rec(two[1], HM_DOMAIN_DATADEV, HM_TYPE_MEDIA_ERROR, U64(16, 100), U64(24, 8), 0);
	open_pipe(&p);
	put(&p, two, 40);				/* 40 bytes of the first */
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 0);
	assert_int_equal(s.nr, 0);
	assert_int_equal(r.have, 40);
	put(&p, (unsigned char *)two + 40, 10);		/* 50: still not whole */
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 0);
	assert_int_equal(s.nr, 0);
	put(&p, (unsigned char *)two + 50, 50);	/* the first, 36 of the second */
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 0);
	assert_int_equal(s.nr, 1);
	assert_int_equal(s.ev[0].ino, 128);
	assert_int_equal(s.ev[0].gen, 9);
	assert_int_equal(r.have, 100 - HEALTHMON_RECORD_SIZE);
	put(&p, (unsigned char *)two + 100, sizeof(two) - 100);
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 0);
	assert_int_equal(s.nr, 2);
	assert_int_equal(s.ev[1].daddr, 100);
	assert_int_equal(s.ev[1].bbcount, 8);
	assert_int_equal(r.have, 0);
	/* the writer gone: end of file, nothing more is called */
	close(p.w);
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 1);
	close(p.r);
}

/* Unknown types and domains are skipped and counted; the stream goes on. */
static void test_unknown_skipped(void **state)
{
	unsigned char stream[5][HEALTHMON_RECORD_SIZE];
	struct healthmon_reader r = { 0 };
	struct seen s = { 0 };
	struct pipe_fd p;

	(void)state;
	rec(stream[0], HM_DOMAIN_MOUNT, 99, U64(16, 0xdeadbeef), 0);		/* a later type */
	rec(stream[1], 42, HM_TYPE_SICK, U32(16, 1), 0);			/* a later domain */
	rec(stream[2], HM_DOMAIN_INODE, HM_TYPE_MEDIA_ERROR, U64(16, 1), 0);	/* no such pair */
	rec(stream[3], HM_DOMAIN_AG, HM_TYPE_BUFREAD, 0);			/* no such pair */
	rec(stream[4], HM_DOMAIN_AG, HM_TYPE_SICK, U32(16, 4), U32(20, 2), 0);
	open_pipe(&p);
	put(&p, stream, sizeof(stream));
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 0);
	assert_int_equal(r.unknown, 4);
	assert_int_equal(r.events, 1);
	assert_int_equal(s.nr, 1);
	assert_int_equal(s.ev[0].group, 2);
	assert_int_equal(s.ev[0].mask, 4);
	close(p.w);
	close(p.r);
}

/* LOST: the count is passed on and summed. */
static void test_lost_events(void **state)
{
	unsigned char stream[3][HEALTHMON_RECORD_SIZE];
	struct healthmon_reader r = { 0 };
	struct seen s = { 0 };
	struct pipe_fd p;

	(void)state;
	rec(stream[0], HM_DOMAIN_MOUNT, HM_TYPE_LOST, U64(16, 1000), 0);
	rec(stream[1], HM_DOMAIN_FS, HM_TYPE_SICK, U32(16, 1), 0);
	rec(stream[2], HM_DOMAIN_MOUNT, HM_TYPE_LOST, U64(16, 0x100000000ULL), 0);
	open_pipe(&p);
	put(&p, stream, sizeof(stream));
	assert_int_equal(healthmon_read(&r, p.r, collect, &s), 0);
	assert_int_equal(s.nr, 3);
	assert_int_equal(s.ev[0].type, HM_TYPE_LOST);
	assert_int_equal(s.ev[0].lost, 1000);
	assert_int_equal(s.ev[2].lost, 0x100000000ULL);
	assert_int_equal(r.lost, 1000 + 0x100000000ULL);
	close(p.w);
	close(p.r);
}

static void test_read_error_and_names(void **state)
{
	struct healthmon_reader r = { 0 };
	struct seen s = { 0 };

	(void)state;
	assert_int_equal(healthmon_read(&r, -1, collect, &s), -EBADF);
	assert_string_equal(healthmon_type_name(HM_TYPE_MEDIA_ERROR), "media error");
	assert_string_equal(healthmon_type_name(HM_TYPE_DATALOST), "data lost");
	assert_string_equal(healthmon_type_name((enum healthmon_type)99), "unknown");
}

/* Not an XFS root (a pipe): the ioctl fails, no descriptor comes back. */
static void test_open_not_xfs(void **state)
{
	struct pipe_fd p;
	int ret;

	(void)state;
	open_pipe(&p);
	ret = healthmon_open(p.r);
	assert_true(ret == -ENOTTY || ret == -EINVAL);
	close(p.r);
	close(p.w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_type),
		cmocka_unit_test(test_short_reads),
		cmocka_unit_test(test_unknown_skipped),
		cmocka_unit_test(test_lost_events),
		cmocka_unit_test(test_read_error_and_names),
		cmocka_unit_test(test_open_not_xfs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
