/*
 * fsmap: FS_IOC_GETFSMAP, the kernel's map of who owns each range of a
 * device (XFS with the reverse-mapping btree: every file extent, extent
 * map block and piece of metadata; ext4: free space and metadata).
 *
 * A utility: the ioctl, its device encoding and XFS's special owner
 * codes, nothing of the scrub.  Used by the XFS backend (its extent maps
 * and ownership checks), the media scan's mapping of unowned bad ranges
 * (mediamap.c), fscrub watch's mapping of media error events
 * (backends/xfs/xfs_media.c) and the early reads' space map (spacemap.c).
 */
#ifndef FSCRUB_FSMAP_H
#define FSCRUB_FSMAP_H

#include <stdint.h>

struct fsmap;

/* new_encode_dev(): how GETFSMAP names the device major:minor. */
uint32_t fsmap_dev(unsigned major, unsigned minor);

/*
 * Call fn for every GETFSMAP record of device dev (fsmap_dev()) that
 * overlaps the bytes [lo, hi], in device order; a record may start
 * before lo or end after hi.  fd is any file of the filesystem.  Returns
 * 0 or the ioctl's -errno (-EOPNOTSUPP: no GETFSMAP for the filesystem).
 */
int fsmap_query(int fd, uint32_t dev, uint64_t lo, uint64_t hi,
		void (*fn)(const struct fsmap *, void *), void *arg);

/*
 * What an XFS special owner code (XFS_FMR_OWN_*) holds, "the journal";
 * NULL for an owner that is not one of XFS's.
 */
const char *fsmap_xfs_owner_name(uint64_t owner);

#endif
