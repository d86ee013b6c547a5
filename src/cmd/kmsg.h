/*
 * kmsg: the block layer's error lines in the kernel log, for fscrub watch.
 *
 * /dev/kmsg gives one record per read(): "PRI,SEQ,USEC,FLAGS;TEXT\n",
 * then continuation lines (" KEY=VALUE") that are not read here.  PRI is
 * facility * 8 + level; anyone may write to /dev/kmsg, but the kernel
 * gives what userspace writes facility 1 (LOG_USER) at least: only
 * facility 0 is the kernel's own, and only it is parsed.
 *
 * The lines that name a sector of a device (Linux 6.1 to 6.18):
 *   - blk_print_req_error() (block/blk-mq.c), a request that failed:
 *     "I/O error, dev loop3, sector 2048 op 0x0:(READ) flags 0x800
 *     phys_seg 1 prio class 2", the first word the block status ("I/O",
 *     "critical medium", "critical target", "protection", "timeout", ...);
 *     READ and WRITE requests only (a failed DISCARD or FLUSH is no bad
 *     sector).  The sector is the request's first, in 512-byte units; its
 *     length is not said;
 *   - buffer_io_error() (fs/buffer.c): "Buffer I/O error on dev sda1,
 *     logical block 1234, async page read": a block of the device's
 *     block size (BLKBSZGET), which the line does not say;
 *   - md RAID1's read errors (drivers/md/raid1.c): "md/raid1:md0: sda1:
 *     unrecoverable I/O read error for block 2048" and "md/raid1:md0:
 *     redirecting sector 2048 to other mirror: sda1", a sector of the
 *     array md0;
 *   - dm-integrity's "device-mapper: integrity: sdb1: Checksum failed at
 *     sector 0x1f00" (drivers/md/dm-integrity.c): the device named is the
 *     one under the integrity target (the bio was remapped to it), the
 *     sector, in hexadecimal, is the integrity device's own.
 * Other lines are none of these and are skipped.
 *
 * Library code: nothing printed; the watcher says what was found.
 */
#ifndef FSCRUB_KMSG_H
#define FSCRUB_KMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A kernel block device name ("sda2", "dm-3", "loop7") is at most this long. */
#define KMSG_NAME_MAX 64

enum kmsg_unit {
	KMSG_SECTOR,		/* first is a 512-byte sector */
	KMSG_BLOCK,		/* first is a block of the device's block size */
	KMSG_INTEGRITY_SECTOR,	/* a 512-byte sector of the device that holds dev */
};

/* A block-layer error line: the device and where. */
struct kmsg_error {
	uint64_t seq;		/* the record's sequence number */
	char dev[KMSG_NAME_MAX];
	uint64_t first;		/* in unit */
	enum kmsg_unit unit;
	const char *format;	/* "request", "buffer", "md raid1", "dm-integrity" */
};

/*
 * The record rec of len bytes (as one read() of /dev/kmsg gives it):
 * 1 and *out filled if it is the kernel's own (facility 0) and one of the
 * lines above; 0 if it is another line, or one written by userspace;
 * -EINVAL if it is no record.  out->seq is set whenever the header parses.
 */
int kmsg_parse(const char *rec, size_t len, struct kmsg_error *out);

/* The sequence numbers read: a gap is records the ring buffer overwrote before they were read. */
struct kmsg_seq {
	uint64_t next;		/* the number expected next ... */
	bool started;		/* ... once a record was read */
};

/* The record numbered seq was read: how many before it were missed (0 for the first). */
uint64_t kmsg_seq_read(struct kmsg_seq *s, uint64_t seq);

/*
 * The errors already acted on, so that a storm (a failing disk logs the
 * same range for every retry, and the watcher's own re-read logs it again)
 * is acted on once per KMSG_QUIET_S: the last KMSG_RECENT ranges.
 */
#define KMSG_RECENT 64
#define KMSG_QUIET_S 60

struct kmsg_recent {
	struct {
		char dev[KMSG_NAME_MAX];
		uint64_t off, len;	/* bytes of dev */
		double when;		/* CLOCK_MONOTONIC seconds; 0: a free slot */
		unsigned long long folded;	/* lines folded into it since */
	} v[KMSG_RECENT];
	unsigned next;
};

/*
 * Was [off, off + len) of dev met (overlapped) less than KMSG_QUIET_S
 * before now?  Then it is folded in (counted in that range's folded)
 * and true; else it is remembered from now, in the oldest slot, and false.
 */
bool kmsg_recent_seen(struct kmsg_recent *r, const char *dev, uint64_t off, uint64_t len,
		      double now);

#endif
