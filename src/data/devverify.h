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
 * The overlap (issue 22).  The walk maps files in directory order, so the
 * extent list is complete only when phase 3 ends; but which device ranges
 * hold file data the space map says at once (spacemap.h: XFS's GETFSMAP
 * with the rmapbt, ext4's).  With -x, devverify_start() reads those ranges
 * in device order in a thread of its own from the start of phase 3, while
 * the walk and phase 4 run.  Phase 5 then joins it and reads what the
 * sequential reader would have read from the walk's extents and the early
 * pass did not read whole (data written since the space map was taken, a
 * read that failed otherwise than by the media); media errors are kept
 * only inside that list -- the early pass reads directories and extent
 * trees too, which a run without the overlap does not -- and go through
 * mediamap after the walk, as before.  The early pass hashes nothing and
 * reports nothing: the ledger, the regions, the progress line and every
 * report line are phase 5's, in the same order as without the overlap.
 * The reads do not overlap (phase 5 reads as before, and -v says why) with
 * --portion or --time-budget (the regions are chosen by the files' data),
 * --record, --ledger or --manifest (every file is hashed as it is read),
 * --rescan-errors and --since (some files only), --limit auto (its
 * controller would take the walk's reads for a foreground job's) and
 * --limit RATE (a scan told to go easy adds no reads to the walk's), where
 * the space map does not tell file data from metadata (XFS without the
 * rmapbt) and where the device reader is not used at all (below).  A file
 * with a checksum record that the walk meets stops the early pass: phase 5
 * reads everything again, hashing (FSCRUB_DEBUG_NO_OVERLAP=1 turns the
 * overlap off, for comparisons).
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

/*
 * Phase 3, before the walk (-x): start reading the device alongside
 * phases 3 and 4, if the run can (see above); sets ctx->devread and
 * ctx->data_began.  Returns 0, or -EOPNOTSUPP, and keeps why (phase 5
 * then reads as it always did, and says why under -v).
 */
int devverify_start(struct scrub_ctx *ctx);
/* The walk ended: the reads alongside it may take their full depth. */
void devverify_walk_done(struct scrub_ctx *ctx);
/* Wait for the reads alongside the walk to end (FSCRUB_DEBUG_OVERLAP_WAIT). */
void devverify_wait(struct scrub_ctx *ctx);
/* Stop the reads alongside the walk and free them; safe without (phases_release()). */
void devverify_release(struct scrub_ctx *ctx);

#endif
