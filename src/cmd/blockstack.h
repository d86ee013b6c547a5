/*
 * blockstack: a byte of one block device, followed up the devices stacked
 * on it, to the devices a filesystem may be mounted from.
 *
 * A bad sector is reported for the disk the kernel or the drive talked
 * to; the filesystem sees it through partitions, device-mapper targets,
 * md mirrors and loop devices.  Each layer is read from sysfs (its root
 * injectable, so that the unit tests give one of their own):
 *
 *   - a partition: <sysfs>/class/block/DISK/PART/start and size, in
 *     512-byte sectors;
 *   - md: <sysfs>/class/block/MD/md/ level, layout, chunk_size,
 *     raid_disks, and dev-LOWER/slot and offset (the member's place and
 *     data offset): RAID1 maps each mirror 1:1, the striped levels as
 *     mdlayout.h deals their chunks (a piece of RAID4/5/6 parity is a hop
 *     that ends there); layouts not followed are said so;
 *   - device-mapper: the table's "linear" segments (DM_TABLE_STATUS gives
 *     the table; bstack_dm_map() reads its text); a lower device used by
 *     another target type is refused with -EOPNOTSUPP;
 *   - a loop device: <sysfs>/class/block/LOOP/loop/backing_file, offset
 *     and sizelimit: the backing file's byte maps to the loop device's,
 *     once the caller has found that byte in the file (cmd/locate.c, through
 *     the filesystem that holds the file).
 *
 * Offsets and lengths are bytes.  Library code: nothing is printed; each
 * function returns 0 or a negative errno and leaves its outputs alone on
 * failure.
 */
#ifndef FSCRUB_BLOCKSTACK_H
#define FSCRUB_BLOCKSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/strbuf.h"

/* A kernel block device name ("sda2", "dm-3", "loop7") is at most this long. */
#define BSTACK_NAME_MAX 64

struct bstack {
	const char *sysfs;	/* "/sys", or a test's directory */
};

/* A range of bytes of one device, reached from the range asked about. */
struct bstack_hop {
	char name[BSTACK_NAME_MAX];
	uint64_t off, len;
	const char *how;	/* "partition", "md raid1", "dm linear", "loop" */
	/*
	 * Parity of an md row ('P' or 'Q', else 0): the lower range holds
	 * none of the device above; off and len are the row's bytes there.
	 */
	char parity;
};

struct bstack_hops {
	struct bstack_hop *v;
	size_t n;
};

void bstack_hops_release(struct bstack_hops *h);

/* The kernel name of the block device devno ("loop3p2"). */
int bstack_name_of(const struct bstack *b, dev_t devno, char *name, size_t len);
/* The device number of the block device named name. */
int bstack_devno_of(const struct bstack *b, const char *name, dev_t *out);
/* Its size in bytes (sysfs "size", 512-byte sectors). */
int bstack_size_of(const struct bstack *b, const char *name, uint64_t *out);

/*
 * The partitions of disk name that hold part of [off, off + len), each
 * clipped to the partition and appended to out with the partition's own
 * offset.  0 (also when there are none).
 */
int bstack_partitions(const struct bstack *b, const char *name, uint64_t off, uint64_t len,
		      struct bstack_hops *out);

/*
 * The devices that hold name (its sysfs holders: md arrays, device-mapper
 * targets), with the range each sees, appended to out.  A holder whose
 * layout is not followed is appended to unsupported as a line ("md0:
 * raid5 is not supported").  0, or a negative errno of sysfs.
 */
int bstack_holders(const struct bstack *b, const char *name, dev_t devno, uint64_t off,
		   uint64_t len, struct bstack_hops *out, struct strbuf *unsupported);


/*
 * A device-mapper table as DM_TABLE_STATUS or "dmsetup table" gives it
 * (lines "START LEN TARGET ARGS", 512-byte sectors; a linear target's args
 * "MAJOR:MINOR OFFSET"): the ranges of the mapped device that show the
 * lower device's [off, off + len), appended to out as hops named name.
 * -EOPNOTSUPP if the lower device is used by a target other than linear
 * (*what: the target's type); -EINVAL: a line that does not parse.
 */
int bstack_dm_map(const char *table, const char *name, dev_t lower, uint64_t off,
		  uint64_t len, struct bstack_hops *out, char *what, size_t what_len);

/* The table of device-mapper device devno, read with DM_TABLE_STATUS. */
int bstack_dm_table(dev_t devno, struct strbuf *out);

/* A loop device and the file behind it. */
struct bstack_loop {
	char name[BSTACK_NAME_MAX];
	char *backing;		/* the backing file's path as the kernel keeps it */
	uint64_t offset;	/* where the device starts in the file */
	uint64_t sizelimit;	/* 0: to the end of the file */
	uint64_t size;		/* the device's size */
};

struct bstack_loops {
	struct bstack_loop *v;
	size_t n;
};

/* Every bound loop device (one with a backing file), into out. */
int bstack_loops(const struct bstack *b, struct bstack_loops *out);
void bstack_loops_release(struct bstack_loops *l);

/*
 * The range of loop device l that shows the backing file's bytes
 * [foff, foff + len), clipped: false if none of it is shown.
 */
bool bstack_loop_map(const struct bstack_loop *l, uint64_t foff, uint64_t len, uint64_t *uoff,
		     uint64_t *ulen);

#endif
