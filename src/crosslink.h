/*
 * crosslink: blocks claimed by two files (or twice by one) that FIEMAP
 * does not flag as shared -- the seed RFC's "Phase X".
 *
 * Phase 3 hands every data extent it maps to crosslink_collect(); phase 4
 * sorts them by physical offset and sweeps for overlaps.  Only where
 * FIEMAP offsets are offsets on the block device (ctx->dev_size != 0: a
 * single-device XFS or ext4), and never for extents without a physical
 * location (delalloc, unknown) or inline data.  Reflinked extents carry
 * FIEMAP_EXTENT_SHARED on both sides and are never reported.
 *
 * The live-filesystem rule: blocks freed by one file and allocated to
 * another during the scan look cross-linked, but allocating them stamps
 * the new owner's ctime after the scan began; such pairs are infos.  The
 * rest are looked at again in a second walk that maps both files anew
 * (and finds their names for the report) before anything is an error.
 *
 * The same list, sorted by physical offset, is what phase 5 reads the
 * device by (devverify.h).
 *
 * An inode is mapped once, at the first of its names the walk reaches
 * (inode_check.c), and two extents of one inode that map the same file
 * offsets to the same device bytes are one mapping, never a cross-link:
 * ext2/ext3 FIEMAP splits an indirect-block map at different places cold
 * and cached, so two maps of one file need not list the same extents.
 *
 * Every extent in a list is of an inode on the list's st_dev (l->dev, the
 * mount root's, where FIEMAP offsets are device offsets): the list keys
 * its extents by inode number alone, 8 bytes less per extent, and
 * crosslink_collect() refuses a file on another st_dev (a btrfs
 * subvolume's), which is then read file by file.  xlink_key() gives an
 * extent's whole key (inokey.h).
 *
 * Memory: 40 bytes per extent (40 MB per million extents), sorted once.
 * The list is bounded at XLINK_MAX_EXTENTS (640 MiB); past that the
 * cross-link check is not done, said so, and -x reads file by file.
 */
#ifndef FSCRUB_CROSSLINK_H
#define FSCRUB_CROSSLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/fiemap.h>

#include "inokey.h"

struct scrub_ctx;

/*
 * Extents whose physical offset is no place on the device of their own,
 * or whose length there is unknown (encoded: FIEMAP gives the length
 * uncompressed).
 */
#define XLINK_NO_LOCATION (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | \
			   FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED | \
			   FIEMAP_EXTENT_ENCODED)

#define XLINK_MAX_EXTENTS (16ULL << 20)

struct xlink_extent {
	uint64_t phys, len, logical, ino;
	uint16_t shared;	/* FIEMAP_EXTENT_SHARED */
	uint16_t unwritten;	/* FIEMAP_EXTENT_UNWRITTEN: no data to read */
	uint32_t recent;	/* the inode changed during the scan */
};

/* A growable list of extents: one per walk thread, merged after phase 3. */
struct xlink_list {
	uint64_t dev;		/* st_dev of every inode in the list */
	struct xlink_extent *v;
	size_t n, alloc;
	bool sorted;		/* by physical offset (crosslink_sort) */
	/* Files with data whose extents are not (all) in the list. */
	struct ino_key *unmapped;
	size_t nr_unmapped, alloc_unmapped;
	bool overflow;		/* the bound was reached: incomplete */
	size_t cap;		/* bound for this list; 0 = XLINK_MAX_EXTENTS */
};

/* An extent's inode: the list's st_dev and the extent's inode number. */
static inline struct ino_key xlink_key(const struct xlink_list *l, const struct xlink_extent *x)
{
	return (struct ino_key){ l->dev, x->ino };
}

/* Empty the list; its st_dev and bound stay. */
void xlink_list_release(struct xlink_list *l);
/*
 * Record a batch of a file's data extents.  Those without a location of
 * their own (delayed allocation, inline, packed tails) are skipped: returns
 * false if there were any, as the device reader cannot read those bytes,
 * and false without recording anything for a file not on l->dev.
 */
bool crosslink_collect(struct xlink_list *l, struct ino_key id, bool recent,
		       const struct fiemap_extent *x, size_t n);
/* Note a file whose extents could not all be collected. */
void crosslink_unmapped(struct xlink_list *l, struct ino_key id);
/* Move a thread's list into ctx's (single-threaded). */
void crosslink_merge(struct scrub_ctx *ctx, struct xlink_list *l);
/* Sort ctx's list by physical offset (once). */
void crosslink_sort(struct scrub_ctx *ctx);
/*
 * The sweep of phase 4, over extents sorted by physical offset
 * (crosslink_sort): fn(arg, a, b) for each extent b that overlaps a, the
 * extent before it that reaches furthest (so an extent inside several is
 * paired with one of them), unless both are shared (reflinked) or they
 * are one mapping of one inode (the same file offsets on the same device
 * bytes, see above).  Extents that only touch (one ends where the next
 * starts) do not overlap.  fn returns true to stop the sweep.  Pure: no
 * context, no reports (crosslink_check() makes them).
 */
typedef bool (*xlink_overlap_fn)(void *arg, const struct xlink_extent *a,
				 const struct xlink_extent *b);
void crosslink_sweep(const struct xlink_extent *v, size_t n, xlink_overlap_fn fn, void *arg);
/* Phase 4: find, look again at, and report cross-linked blocks. */
void crosslink_check(struct scrub_ctx *ctx);

#endif
