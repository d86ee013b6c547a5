/*
 * spacemap: the device ranges that may hold file data, from the
 * filesystem's space map (FS_IOC_GETFSMAP), before any file is mapped.
 *
 * The device reader of -x (devverify.h) reads in device order; to start
 * before the walk has mapped every file (issue 22: the reads overlap the
 * metadata scan), it needs only which ranges are allocated to file data,
 * which the space map says in one pass over the device:
 *
 *   XFS with the rmapbt   every data fork mapping, by owner inode; the
 *                         attribute forks, bmbt blocks and unwritten
 *                         (preallocated) extents are left out;
 *   ext4                  the blocks no fixed metadata owns and that are
 *                         not free (FMR_OWN_UNKNOWN): file data, and the
 *                         directory, extent tree and xattr blocks;
 *   XFS without the rmapbt GETFSMAP knows only free space: every other
 *                         block is "unknown", the inode chunks and btree
 *                         blocks among them -- too much to read twice,
 *                         so spacemap_data() refuses (-EOPNOTSUPP).
 *
 * A stretch of the device that no record covers counts as in use too:
 * ext4's GETFSMAP (kernel 6.18) reports no record for the blocks from a
 * group's last free extent to its end, so a group filled by one big file
 * would be missing from the map (measured: 2.1 of 3 GiB of file data).
 *
 * The map should be a superset of what the walk will map, taken at one
 * moment, but nothing here relies on it:
 * the caller reads what the walk maps and the space map did not list
 * afterwards, and reports only media errors in what the walk mapped.
 *
 * Layering: a utility of the core; no context, no reports.
 */
#ifndef FSCRUB_SPACEMAP_H
#define FSCRUB_SPACEMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Call fn(arg, off, len) for each device range of dev (the block device's
 * dev_t, end bytes long) that may hold file data, in device order, bytes;
 * ranges do not touch.  mnt_fd: any descriptor on the filesystem.  0,
 * -EOPNOTSUPP where the space map does not tell file data from metadata
 * (above), or the negative errno of GETFSMAP (fn is not called then).
 */
int spacemap_data(int mnt_fd, dev_t dev, uint64_t end,
		  void (*fn)(void *arg, uint64_t off, uint64_t len), void *arg);

#endif
