/*
 * devverify: phase 5 (-x) by the block device, in physical order.
 *
 * Phase 3 collected every file's data extents (crosslink.h); phase 4
 * sorted them by device offset.  Here they become a list of large aligned
 * reads -- neighbours merged, reading through gaps of up to
 * DEVREAD_MERGE_GAP, at most DEVREAD_MAX bytes each -- issued with
 * O_DIRECT on the mount's block device, several in flight (ioengine.h),
 * under --limit's token bucket.  Reading a disk front to back instead of
 * file by file in directory order is what makes a data scan run at the
 * device's sequential speed.
 *
 * A read that fails is bisected down to the failing 4 KiB blocks and the
 * scan goes on; the bad ranges are mapped back to the files that own them
 * (mediamap.h).  Files whose extents could not all be collected are read
 * afterwards by the per-file reader (dataverify.h).
 *
 * Where the device cannot be read -- FIEMAP offsets are not device offsets
 * (btrfs, network and FUSE filesystems, overlayfs, tmpfs), the device
 * cannot be opened (not root), or the extent list reached its bound --
 * devverify_run() says why and phase 5 reads file by file.
 */
#ifndef FSCRUB_DEVVERIFY_H
#define FSCRUB_DEVVERIFY_H

struct scrub_ctx;

#define DEVREAD_MAX	(8U << 20)	/* bytes per read */
#define DEVREAD_MERGE_GAP (256U << 10)	/* read through holes up to this */
#define DEVREAD_DEPTH	4		/* reads in flight; 1 with -b; --limit auto
					 * lowers it to 1 while it backs off and
					 * splits the reads (ratelimit_size) */

/*
 * Verify the data by the device.  Returns 0 when done (findings reported),
 * or a negative errno with *why set when the device cannot be used and the
 * caller must read file by file.  *bytes: device bytes read.
 */
int devverify_run(struct scrub_ctx *ctx, unsigned long long *bytes, const char **why);

#endif
