/*
 * mediamap: which files lost data to a media error.
 *
 * Each bad device range is looked up in the sorted extent list (an
 * interval lookup); the parts owned by file data are looked at again
 * through the file itself -- still mapped there, and a direct read of that
 * file range still fails -- before being reported as an error with the
 * file's path and offset.  The parts no extent owns are classified with
 * FS_IOC_GETFSMAP where the filesystem has it (free space, a kind of
 * metadata, or an inode's data written since the walk) and reported as
 * such.
 */
#ifndef FSCRUB_MEDIAMAP_H
#define FSCRUB_MEDIAMAP_H

#include <stddef.h>
#include <stdint.h>

struct scrub_ctx;

struct bad_range {
	uint64_t off, len;	/* device bytes */
	int err;		/* positive errno of the failed read */
};

/* Report every bad range; dev_fd is the device, open O_DIRECT. */
void mediamap_report(struct scrub_ctx *ctx, int dev_fd, const struct bad_range *bad,
		     size_t nr_bad);

#endif
