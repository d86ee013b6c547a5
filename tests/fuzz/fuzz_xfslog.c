/*
 * libFuzzer target: the XFS log reader (xfs_logview.c) on an arbitrary
 * log -- the head found by bisection of cycle numbers, the newest whole
 * record found backwards from it, the records from its tail walked, their
 * operations put back into transactions and items.
 *
 * Input: a flags byte; the log's length in 512-byte blocks (u32,
 * little-endian, at least 2, at most MAX_LOG_BBS); then records as
 * fuzz_xfs takes them -- the block a record starts at (u32, little-endian),
 * its length in blocks (u8, 0: 1), that many bytes (the last may be
 * short).  The log is a sparse memfd: what no record places reads as
 * zeros.  Unless bit 0 of the flags is set, every log record header a
 * record places gets its CRC made right over what its lengths say (where
 * that lies inside the record), so that the fuzzer's changes get past it.
 *
 * Invariants: no crash, no undefined behaviour, no leak, no hang.
 */
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/xfs/xfs.h"	/* <xfs/xfs.h>, which xfs_log_format.h needs first */
#include "backends/xfs/xfs_logview.h"
#include "lib/crc32c.h"
#include "fuzz_dev.h"

#include <xfs/xfs_log_format.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BB 512u
#define HEAD 5
#define RECORD_HEAD 5
/* 2 GiB of log (the largest XFS makes), sparse. */
#define MAX_LOG_BBS (1u << 22)
#define FLAG_KEEP_CRC 1

static struct fuzz_dev dev = { -1, "" };

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The CRC of the log record whose header is at p (len bytes placed), if it lies there. */
static void fix_record_crc(uint8_t *p, size_t len)
{
	xlog_rec_header_t *rh = (void *)p;
	uint32_t size = be32toh(rh->h_size), dlen = be32toh(rh->h_len), hbbs, crc;
	size_t crc_off = offsetof(xlog_rec_header_t, h_crc);

	if (size > XLOG_MAX_RECORD_BSIZE || dlen > XLOG_MAX_RECORD_BSIZE)
		return;
	hbbs = size > XLOG_HEADER_CYCLE_SIZE ? (size + XLOG_HEADER_CYCLE_SIZE - 1) /
					       XLOG_HEADER_CYCLE_SIZE : 1;
	if ((size_t)hbbs * BB + dlen > len)
		return;
	memset(p + crc_off, 0, 4);
	crc = crc32c(0xffffffff, p, sizeof(xlog_rec_header_t));
	for (uint32_t i = 1; i < hbbs; i++)
		crc = crc32c(crc, p + (size_t)i * BB, sizeof(xlog_rec_ext_header_t));
	crc = htole32(~crc32c(crc, p + (size_t)hbbs * BB, dlen));
	memcpy(p + crc_off, &crc, 4);
}

static bool place(const uint8_t *data, size_t size, uint64_t nbb, bool fix)
{
	while (size > RECORD_HEAD) {
		uint64_t bb = get_le32(data);
		size_t len = (size_t)(data[4] ? data[4] : 1) * BB;
		uint8_t *rec;

		data += RECORD_HEAD;
		size -= RECORD_HEAD;
		if (len > size)
			len = size;
		if (bb >= nbb)
			return false;
		if (len > (nbb - bb) * BB)
			len = (nbb - bb) * BB;
		rec = malloc(len);
		if (!rec)
			return false;
		memcpy(rec, data, len);
		for (size_t at = 0; fix && at + BB <= len; at += BB)
			if (be32toh(*(const uint32_t *)(rec + at)) == XLOG_HEADER_MAGIC_NUM)
				fix_record_crc(rec + at, len - at);
		if (pwrite(dev.fd, rec, len, (off_t)(bb * BB)) != (ssize_t)len) {
			free(rec);
			return false;
		}
		free(rec);
		data += len;
		size -= len;
	}
	return true;
}

static int log_read(void *arg, uint8_t *buf, uint64_t bb, uint32_t n)
{
	(void)arg;
	return pread(dev.fd, buf, (size_t)n * BB, (off_t)(bb * BB)) == (ssize_t)n * BB ? 0 : -5;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct logsrc src = { .read = log_read, .agblocks = 16384, .bb_per_block = 8 };
	struct logview lv;
	int ret;

	if (size < HEAD)
		return 0;
	src.nbb = get_le32(data + 1);
	if (src.nbb < 2 || src.nbb > MAX_LOG_BBS)
		return 0;
	if (dev.fd < 0)
		fuzz_dev_open(&dev, "fuzz_xfslog");
	fuzz_dev_reset(&dev, src.nbb * BB);
	if (!place(data + HEAD, size - HEAD, src.nbb, !(data[0] & FLAG_KEEP_CRC)))
		return 0;
	ret = logview_read(&src, &lv);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "logview_read: %d, %zu items, %u records\n", ret, lv.n, lv.records);
	for (size_t i = 0; i < lv.n; i++)	/* every span whole, for the sanitizers */
		(void)logview_hits(&lv, lv.v[i].daddr, 1);
	logview_release(&lv);
	return 0;
}
