/*
 * stx: the statx() fscrub uses everywhere, and the rules built on it that
 * the core and the backends share: has an inode changed between two
 * looks, does an errno mean media or metadata damage.
 *
 * Layering: a small utility; it calls nothing of fscrub's.  The rules
 * that depend on the scan (did an inode change during it, does an errno
 * mean damage on this filesystem) are the context's (scan/context.h).
 */
#ifndef FSCRUB_STX_H
#define FSCRUB_STX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

/*
 * statx() name relative to dirfd (name NULL or "": dirfd itself), never
 * following a symlink or triggering an automount, asking for everything
 * the checks use.  0, or a negative errno.
 */
int stx_get(int dirfd, const char *name, struct statx *stx);

/* True if the inode looks the same in both snapshots (no change seen). */
bool stx_unchanged(const struct statx *a, const struct statx *b);

/* True for the errno values that mean media or metadata damage. */
bool errno_is_corruption(int err);

/* "regular file", "directory", ... for a mode's S_IFMT bits (for messages). */
const char *inode_mode_name(unsigned mode);

/* statx timestamps as nanoseconds. */
static inline uint64_t stx_ns(const struct statx_timestamp *t)
{
	return (uint64_t)t->tv_sec * 1000000000ULL + t->tv_nsec;
}

/*
 * Seconds and nanoseconds since the epoch as signed nanoseconds, held at
 * INT64_MAX or INT64_MIN beyond 2262 or before 1677, where they overflow
 * 64 bits (XFS's bigtime reaches 2486, ext4's times 2446; a damaged inode
 * any value): such a time is after or before any scan.
 */
static inline int64_t ns_of(int64_t sec, int64_t nsec)
{
	const int64_t ns_per_s = 1000000000;

	/* nsec may be any u32 a damaged inode holds, not below one second */
	if (sec >= (INT64_MAX - UINT32_MAX) / ns_per_s)
		return INT64_MAX;
	if (sec <= (INT64_MIN + UINT32_MAX) / ns_per_s)
		return INT64_MIN;
	return sec * ns_per_s + nsec;
}

/*
 * The most extents a fork of the file can map: every extent but an inline
 * or delayed one takes at least a block of the filesystem, so no more than
 * the file has blocks (stx_blocks), nor more than the filesystem has
 * (statvfs), with 512 to spare for the others.  Past that the map is
 * damage, and reading on could take the kernel hours: an ext2/ext3 block
 * map whose indirect blocks point at themselves maps a block a billion
 * times (FIEMAP gives some 800 000 extents a second of it).  0: no bound.
 */
static inline unsigned long long stx_max_extents(const struct statx *stx,
						 const struct statvfs *sv)
{
	unsigned long bsize = sv->f_frsize ? sv->f_frsize : sv->f_bsize;
	unsigned long long own = stx->stx_blocks / (bsize >= 512 ? bsize / 512 : 1);

	if (!sv->f_blocks)
		return 0;
	return (own < sv->f_blocks ? own : sv->f_blocks) + 512;
}

/* The st_dev of a statx result. */
static inline uint64_t stx_devno(const struct statx *stx)
{
	return makedev(stx->stx_dev_major, stx->stx_dev_minor);
}

#endif
