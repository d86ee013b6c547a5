/*
 * Unit tests for fserror: parsing fanotify FAN_FS_ERROR events as read()
 * returns them (error and file id records, the inode from ext4's and XFS's
 * handle formats, events of other types skipped, malformed buffers), and
 * the kernel-version table.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <linux/fanotify.h>
#include <sys/fanotify.h>

#include "lib/fserror.h"
#include "lib/strbuf.h"

struct collected {
	int nr;
	struct fserror_event ev[4];
};

static void collect(const struct fserror_event *ev, void *arg)
{
	struct collected *c = arg;

	if (c->nr < 4)
		c->ev[c->nr] = *ev;
	c->nr++;
}

/* Append one event to buf at *len: mask, an error record, a fid record. */
static void put_event(unsigned char *buf, size_t *len, uint64_t mask, int error,
		      uint32_t count, int handle_type, const void *handle, unsigned hbytes)
{
	struct fanotify_event_metadata md = { 0 };
	struct fanotify_event_info_error err = { 0 };
	struct fanotify_event_info_fid fid = { 0 };
	struct file_handle fh = { 0 };
	size_t fid_len = sizeof(fid) + sizeof(fh) + hbytes;
	size_t start = *len;

	fid_len = (fid_len + 3) & ~(size_t)3;	/* records are 4-byte aligned */
	md.metadata_len = sizeof(md);
	md.vers = FANOTIFY_METADATA_VERSION;
	md.mask = mask;
	md.fd = FAN_NOFD;
	md.event_len = (uint32_t)(sizeof(md) + sizeof(err) + fid_len);
	err.hdr.info_type = FAN_EVENT_INFO_TYPE_ERROR;
	err.hdr.len = sizeof(err);
	err.error = error;
	err.error_count = count;
	fid.hdr.info_type = FAN_EVENT_INFO_TYPE_FID;
	fid.hdr.len = (uint16_t)fid_len;
	fid.fsid.val[0] = 0x1234;
	fid.fsid.val[1] = 0x5678;
	fh.handle_bytes = hbytes;
	fh.handle_type = handle_type;
	memset(buf + start, 0, md.event_len);
	memcpy(buf + start, &md, sizeof(md));
	memcpy(buf + start + sizeof(md), &err, sizeof(err));
	memcpy(buf + start + sizeof(md) + sizeof(err), &fid, sizeof(fid));
	memcpy(buf + start + sizeof(md) + sizeof(err) + sizeof(fid), &fh, sizeof(fh));
	memcpy(buf + start + sizeof(md) + sizeof(err) + sizeof(fid) + sizeof(fh), handle, hbytes);
	*len += md.event_len;
}

static void test_ext4_event(void **state)
{
	unsigned char buf[512];
	uint32_t h[2] = { 12, 0xabcdef };	/* FILEID_INO32_GEN: ino, generation */
	struct collected c = { 0 };
	size_t len = 0;

	(void)state;
	put_event(buf, &len, FAN_FS_ERROR, 117, 3, 1, h, sizeof(h));
	assert_int_equal(fserror_parse(buf, len, collect, &c), 1);
	assert_int_equal(c.nr, 1);
	assert_int_equal(c.ev[0].error, 117);
	assert_int_equal(c.ev[0].error_count, 3);
	assert_int_equal(c.ev[0].fsid[0], 0x1234);
	assert_int_equal(c.ev[0].fsid[1], 0x5678);
	assert_true(c.ev[0].has_handle);
	assert_int_equal(c.ev[0].handle_bytes, 8);
	assert_int_equal(c.ev[0].ino, 12);
}

static void test_xfs_ino64_and_no_inode(void **state)
{
	unsigned char buf[512];
	unsigned char h[12] = { 0 };
	uint64_t ino = 0x100000083ULL;
	struct collected c = { 0 };
	size_t len = 0;

	(void)state;
	memcpy(h, &ino, sizeof(ino));
	put_event(buf, &len, FAN_FS_ERROR, 5, 1, 0x81, h, sizeof(h));
	/* an error about no inode: FILEID_INVALID and no handle bytes */
	put_event(buf, &len, FAN_FS_ERROR, 117, 1, 0xff, "", 0);
	assert_int_equal(fserror_parse(buf, len, collect, &c), 2);
	assert_int_equal(c.ev[0].ino, ino);
	assert_true(c.ev[0].has_handle);
	assert_false(c.ev[1].has_handle);
	assert_int_equal(c.ev[1].ino, 0);
}

static void test_other_events_skipped(void **state)
{
	unsigned char buf[512];
	uint32_t h[2] = { 99, 1 };
	struct collected c = { 0 };
	size_t len = 0;

	(void)state;
	put_event(buf, &len, FAN_Q_OVERFLOW, 0, 0, 1, h, sizeof(h));
	put_event(buf, &len, FAN_FS_ERROR, 74, 1, 1, h, sizeof(h));
	assert_int_equal(fserror_parse(buf, len, collect, &c), 1);
	assert_int_equal(c.ev[0].error, 74);
	assert_int_equal(c.ev[0].ino, 99);
}

static void test_malformed(void **state)
{
	unsigned char buf[512];
	uint32_t h[2] = { 12, 1 };
	struct collected c = { 0 };
	struct fanotify_event_metadata md;
	size_t len = 0;

	(void)state;
	put_event(buf, &len, FAN_FS_ERROR, 117, 1, 1, h, sizeof(h));
	/* truncated anywhere: an error, never a read past the end */
	for (size_t cut = 1; cut < len; cut++)
		assert_int_equal(fserror_parse(buf, cut, collect, &c), -EINVAL);
	assert_int_equal(c.nr, 0);
	/* a record longer than its event */
	memcpy(&md, buf, sizeof(md));
	buf[sizeof(md) + 2] = 200;	/* the error record's hdr.len */
	assert_int_equal(fserror_parse(buf, len, collect, &c), -EINVAL);
	/* a handle longer than its record */
	len = 0;
	put_event(buf, &len, FAN_FS_ERROR, 117, 1, 1, h, sizeof(h));
	{
		struct file_handle fh;
		size_t off = sizeof(md) + sizeof(struct fanotify_event_info_error) +
			     sizeof(struct fanotify_event_info_fid);

		memcpy(&fh, buf + off, sizeof(fh));
		fh.handle_bytes = 64;
		memcpy(buf + off, &fh, sizeof(fh));
	}
	assert_int_equal(fserror_parse(buf, len, collect, &c), -EINVAL);
	/* a wrong metadata version */
	len = 0;
	put_event(buf, &len, FAN_FS_ERROR, 117, 1, 1, h, sizeof(h));
	buf[offsetof(struct fanotify_event_metadata, vers)] = 1;
	assert_int_equal(fserror_parse(buf, len, collect, &c), -EINVAL);
	assert_int_equal(c.nr, 0);
	assert_int_equal(fserror_parse(buf, 0, collect, &c), 0);
}

static void test_supported(void **state)
{
	struct strbuf why = STRBUF_INIT;

	(void)state;
	assert_false(fserror_supported("tmpfs", &why));
	assert_string_equal(why.buf, "tmpfs does not report errors to fanotify");
	strbuf_release(&why);
	/* ext4 reports from 5.16: every kernel this suite runs on */
	assert_true(fserror_supported("ext4", &why));
	assert_int_equal(why.len, 0);
	strbuf_release(&why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ext4_event),
		cmocka_unit_test(test_xfs_ino64_and_no_inode),
		cmocka_unit_test(test_other_events_skipped),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_supported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
