/*
 * watch_blk: fscrub watch follows the kernel log's block-layer errors
 * (kmsg.h) down to the devices of the filesystems it watches.
 *
 * /dev/kmsg is read from the moment the watcher starts (not the history
 * before it).  Each error line names a device and a sector: its bytes are
 * walked up the block stack (blockstack.h: partitions, md RAID1,
 * device-mapper linear) as fscrub locate walks them; where the walk meets
 * the device a watched filesystem is mounted from, the watcher's hook is
 * called with that device's bytes, and it asks the filesystem who owns
 * them (owners.h).  A file that backs a loop device is followed up
 * through the loop device by the hook, with blk_follow_walk().
 *
 * One range is acted on once per KMSG_QUIET_S (kmsg_recent_seen()): a
 * failing disk logs a line for every retry, and the watcher's own re-read
 * of a bad range logs it again.  So is one range of a watched device
 * reached by lines of two devices (a loop device's error, and the error of
 * the device under the file behind it).  Records the watcher did not read before
 * the kernel's ring buffer overwrote them are said, with their number, as
 * the gap in the sequence numbers is found.
 *
 * Reading /dev/kmsg needs CAP_SYSLOG when kernel.dmesg_restrict is 1; the
 * watcher does not confine itself, so root has it.  Without access the
 * watcher says so once and goes on with its other sources.
 */
#ifndef FSCRUB_WATCH_BLK_H
#define FSCRUB_WATCH_BLK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cmd/blockstack.h"
#include "cmd/kmsg.h"

struct blk_follow {
	int fd;				/* /dev/kmsg, O_NONBLOCK; -1: not followed */
	struct kmsg_seq seq;		/* the records read, for the ones missed */
	struct kmsg_recent recent;	/* the lines' ranges, as logged */
	struct kmsg_recent hits;	/* the ranges of our devices they reached */
	struct bstack bs;
};

/* What the watcher does with the bytes the walk reaches. */
struct blk_hooks {
	/* Is devno the device a watched filesystem is mounted from (or one of its devices)? */
	bool (*ours)(dev_t devno, void *arg);
	/* The bytes [off, off + len) of device devno (kernel name name), from the line e. */
	void (*hit)(dev_t devno, const char *name, uint64_t off, uint64_t len,
		    const struct kmsg_error *e, int depth, void *arg);
	void *arg;
};

/*
 * Open /dev/kmsg at its end: 0, or a negative errno (said by the caller:
 * -EPERM without CAP_SYSLOG under dmesg_restrict).
 */
int blk_follow_open(struct blk_follow *f);
void blk_follow_close(struct blk_follow *f);

/* The records the log has now, at most a batch; each new error range walked. */
void blk_follow_read(struct blk_follow *f, const struct blk_hooks *h);

/*
 * The bytes [off, off + len) of the device named name, reached from e at
 * depth depth: hit() where it is ours, then up the devices stacked on it.
 */
void blk_follow_walk(struct blk_follow *f, const struct blk_hooks *h, const char *name,
		     uint64_t off, uint64_t len, const struct kmsg_error *e, int depth);

#endif
