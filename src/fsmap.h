/*
 * fsmap: FS_IOC_GETFSMAP, the filesystem's reverse map of its devices
 * (XFS: every owner of every block with the reverse-mapping btree; ext4
 * and XFS without it: metadata, free space and "in use, owner unknown").
 */
#ifndef FSCRUB_FSMAP_H
#define FSCRUB_FSMAP_H

#include <stdint.h>
#include <sys/types.h>

struct fsmap;

/* How GETFSMAP names a device (the kernel's new_encode_dev()). */
uint32_t fsmap_devno(dev_t dev);

/*
 * Call fn for every record of device dev (fsmap_devno) in the byte range
 * [lo, hi], in device order, asking fd (any file of the filesystem).
 * 0, or a negative errno (-ENOTTY, -EOPNOTSUPP: no GETFSMAP here).
 */
int fsmap_query(int fd, uint32_t dev, uint64_t lo, uint64_t hi,
		void (*fn)(const struct fsmap *, void *), void *arg);

#endif
