/*
 * xfslogview IMAGE: what xfs_logview.c reads from the internal log of an
 * XFS image or device -- the tail and head LSNs, the records read, then
 * each block range a log item names ("TYPE daddr bbs": buf, inode or
 * icreate, 512-byte units, one a line) -- for the tests to hold against xfs_logprint -t.  Exit 0, or 1
 * with logview_read()'s error.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backends/xfs/xfs_logview.h"
#include "backends/xfs/xfs_ondisk.h"

#include <xfs/xfs_log_format.h>

struct image {
	int fd;
	uint64_t log_off;
};

static int image_read(void *arg, uint8_t *buf, uint64_t bb, uint32_t n)
{
	const struct image *im = arg;
	ssize_t got = pread(im->fd, buf, (size_t)n * 512, (off_t)(im->log_off + bb * 512));

	if (got < 0)
		return -errno;
	return got == (ssize_t)n * 512 ? 0 : -EIO;
}

static const char *type_name(uint16_t type)
{
	switch (type) {
	case XFS_LI_BUF:	return "buf";
	case XFS_LI_INODE:	return "inode";
	case XFS_LI_ICREATE:	return "icreate";
	}
	return "?";
}

int main(int argc, char **argv)
{
	struct xfs_dsb sb;
	struct image im;
	struct logsrc src = { .read = image_read, .arg = &im };
	struct logview lv;
	uint64_t logstart, agno, agbno;
	uint32_t bsize;
	int ret;

	if (argc != 2) {
		fprintf(stderr, "usage: xfslogview IMAGE\n");
		return 2;
	}
	im.fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (im.fd < 0 || pread(im.fd, &sb, sizeof(sb), 0) != (ssize_t)sizeof(sb) ||
	    be32toh(sb.sb_magicnum) != XFS_SB_MAGIC || !sb.sb_logstart || sb.sb_agblklog > 31) {
		fprintf(stderr, "xfslogview: '%s' is not an XFS with an internal log\n", argv[1]);
		return 2;
	}
	bsize = be32toh(sb.sb_blocksize);
	logstart = be64toh(sb.sb_logstart);
	agno = logstart >> sb.sb_agblklog;
	agbno = logstart & ((1ULL << sb.sb_agblklog) - 1);
	im.log_off = (agno * be32toh(sb.sb_agblocks) + agbno) * bsize;
	src.nbb = (uint64_t)be32toh(sb.sb_logblocks) * bsize / 512;
	src.agblocks = be32toh(sb.sb_agblocks);
	src.bb_per_block = bsize / 512;
	ret = logview_read(&src, &lv);
	if (ret < 0) {
		fprintf(stderr, "xfslogview: %s\n", strerror(-ret));
		logview_release(&lv);
		return 1;
	}
	printf("tail %u/%u head %u/%u records %u\n", (unsigned)(lv.tail_lsn >> 32),
	       (unsigned)lv.tail_lsn, (unsigned)(lv.head_lsn >> 32), (unsigned)lv.head_lsn,
	       lv.records);
	for (size_t i = 0; i < lv.n; i++)
		printf("%s %llu %u\n", type_name(lv.v[i].type), (unsigned long long)lv.v[i].daddr,
		       lv.v[i].bbs);
	logview_release(&lv);
	close(im.fd);
	return 0;
}
