/*
 * fuzz_dev.h: the device of the fuzz targets that scan images (fuzz_xfs,
 * fuzz_ext4, fuzz_btrfs_v1): a memfd, sparse, which the scan's own code
 * opens by its /proc/self/fd path (O_DIRECT too) or reads by its fd.
 */
#ifndef FSCRUB_FUZZ_DEV_H
#define FSCRUB_FUZZ_DEV_H

#include <stdint.h>

struct fuzz_dev {
	int fd;
	char path[64];		/* /proc/self/fd/FD */
};

/* Make it (name: the memfd's); aborts where it cannot be opened with O_DIRECT. */
void fuzz_dev_open(struct fuzz_dev *d, const char *name);
/* Emptied, then size bytes that read as zeros; aborts on failure. */
void fuzz_dev_reset(const struct fuzz_dev *d, uint64_t size);

#endif
