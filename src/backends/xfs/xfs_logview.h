/*
 * xfs_logview: which blocks of the data device the on-disk log of a
 * mounted XFS may still hold newer copies of -- what log recovery would
 * replay if the machine stopped now.
 *
 * Why: a mounted XFS writes metadata back lazily.  After syncfs() every
 * change is either written back or in the log between its tail and its
 * head (write-ahead logging: a block is written back only after the
 * change is in the log, and the tail moves past a change only once every
 * block it logged is written back).  So a block of an AG that no log item
 * between the tail and the head names is on the disk as the kernel has it,
 * and a problem between such blocks that reads the same twice is damage,
 * however busy the rest of the filesystem is.  xfs_ondisk.c asks this of
 * every AG whose looks disagree between blocks.
 *
 * What is collected: the blocks of buffer items (XFS_LI_BUF, cancelled
 * ones too), the inode cluster buffers of inode items (XFS_LI_INODE) and
 * the inode chunks of inode-create items (XFS_LI_ICREATE), from every
 * record between the tail (the h_tail_lsn of the newest whole record) and
 * the head, each record whole and its CRC right.  Only an internal v2 log
 * written in this machine's byte order.
 */
#ifndef FSCRUB_BACKEND_XFS_LOGVIEW_H
#define FSCRUB_BACKEND_XFS_LOGVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 512-byte basic blocks [daddr, daddr + bbs) of the data device. */
struct logspan {
	uint64_t daddr;
	uint32_t bbs;
	uint16_t type;		/* the item's: XFS_LI_BUF, XFS_LI_INODE, XFS_LI_ICREATE */
};

struct logview {
	struct logspan *v;
	size_t n, alloc;
	uint64_t tail_lsn, head_lsn;	/* cycle << 32 | block */
	unsigned records;		/* read between the tail and the head */
};

/*
 * Where the log's blocks come from: read(arg, buf, bb, n) reads the log's
 * basic blocks [bb, bb + n) (never past nbb) into buf, 0 or a negative
 * errno.  agblocks and bb_per_block place inode-create items.
 */
struct logsrc {
	int (*read)(void *arg, uint8_t *buf, uint64_t bb, uint32_t n);
	void *arg;
	uint64_t nbb;			/* the log's length in basic blocks */
	uint32_t agblocks, bb_per_block;
};

/* Bounds: a bigger active log is not read (-E2BIG), nor more items kept. */
#define LOGVIEW_MAX_BBS (128u * 1024 * 2)	/* 128 MiB */
#define LOGVIEW_MAX_SPANS (1u << 18)

/*
 * Read the log through src into *lv (logview_release() it, whatever the
 * result).  0; -ENOTSUP for a log this reader does not know (v1, another
 * byte order); -EUCLEAN when the log does not make sense (no head, a
 * record whose neighbours are wrong, a bad CRC between the tail and the
 * newest whole record: on a live log also what a wrap under the reader
 * looks like); -E2BIG past the bounds above; or the read's errno.
 */
int logview_read(const struct logsrc *src, struct logview *lv);

/* Does an item of lv name a block of [daddr, daddr + bbs)? */
bool logview_hits(const struct logview *lv, uint64_t daddr, uint64_t bbs);

void logview_release(struct logview *lv);

#endif
