/*
 * crosslink: blocks claimed by two files (or twice by one) that FIEMAP
 * does not flag as shared -- the seed RFC's "Phase X".
 *
 * Phase 3 hands every data extent it maps to crosslink_collect(); phase 4
 * sorts them by physical offset and sweeps for overlaps.  Only where
 * FIEMAP offsets are offsets on the block device (ctx->dev_size != 0: a
 * single-device XFS or ext4), and never for extents without a physical
 * location (delalloc, unknown) or inline data.  Reflinked extents carry
 * FIEMAP_EXTENT_SHARED on both sides and are never reported; where files
 * may share blocks without that flag (QUIRK_BLOCKS_SHARED: ext4's
 * shared_blocks) nothing is looked for, and -v says so.
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
 * Memory: 24 bytes per extent (24 MB per million extents): byte values
 * are kept in 512-byte sectors (XLINK_SECTOR), a device or file offset of
 * at most 2^48 sectors (128 PiB) and a length below 2^29 sectors (256 GiB)
 * a piece; crosslink_collect() cuts a longer extent into pieces (which
 * touch, never overlap) and treats an extent it cannot keep so (not a
 * whole number of sectors, or past 128 PiB) as one without a location: the
 * file is read file by file and its extents are not swept.  XFS and ext4
 * give every located extent in whole blocks.  The lists of the walk
 * threads are moved into one array a slice at a time, each slice given
 * back as it is moved, and sorted in place: the list's bytes, no copy.
 * The list is bounded at XLINK_MAX_EXTENTS (384 MiB); past that the
 * cross-link check is not done, said so, and -x reads file by file.
 */
#ifndef FSCRUB_CROSSLINK_H
#define FSCRUB_CROSSLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/fiemap.h>

#include "backends/backend.h"
#include "lib/inokey.h"

struct scrub_ctx;

/*
 * Extents whose physical offset is no place on the device of their own,
 * or whose length there is unknown (encoded: FIEMAP gives the length
 * uncompressed).
 */
#define XLINK_NO_LOCATION BACKEND_NO_LOCATION

/* 384 MiB of extents (a bound on the memory a user-controlled tree can take). */
#define XLINK_MAX_EXTENTS (16ULL << 20)

/* Byte values of an extent are kept in units of this (see Memory above). */
#define XLINK_SECTOR 512ULL
#define XLINK_MAX_SECTORS (1ULL << 48)	/* offsets: 128 PiB */
#define XLINK_MAX_PIECE ((1ULL << 29) - 1)	/* a length, in sectors */

/* 24 bytes; read it through the accessors below (bytes). */
struct xlink_extent {
	uint64_t ino;
	uint64_t phys_sec : 48;		/* device offset */
	uint64_t len_lo : 16;		/* length: len_hi << 16 | len_lo */
	uint64_t logical_sec : 48;	/* file offset */
	uint64_t len_hi : 13;
	uint64_t shared : 1;		/* FIEMAP_EXTENT_SHARED */
	uint64_t unwritten : 1;		/* FIEMAP_EXTENT_UNWRITTEN: no data to read */
	uint64_t recent : 1;		/* the inode changed during the scan */
};

static inline uint64_t xlink_phys(const struct xlink_extent *x)
{
	return x->phys_sec * XLINK_SECTOR;
}

static inline uint64_t xlink_logical(const struct xlink_extent *x)
{
	return x->logical_sec * XLINK_SECTOR;
}

static inline uint64_t xlink_len(const struct xlink_extent *x)
{
	return ((uint64_t)x->len_hi << 16 | x->len_lo) * XLINK_SECTOR;
}

static inline uint64_t xlink_end(const struct xlink_extent *x)
{
	return xlink_phys(x) + xlink_len(x);
}

/*
 * Can an extent of these byte values be kept, in pieces of at most
 * XLINK_MAX_PIECE sectors (whole sectors, ending below 128 PiB)?
 */
static inline bool xlink_fits(uint64_t logical, uint64_t phys, uint64_t len)
{
	uint64_t p = phys / XLINK_SECTOR, o = logical / XLINK_SECTOR, n = len / XLINK_SECTOR;

	return !((logical | phys | len) % XLINK_SECTOR) && p <= XLINK_MAX_SECTORS &&
	       n <= XLINK_MAX_SECTORS - p && o <= XLINK_MAX_SECTORS && n <= XLINK_MAX_SECTORS - o;
}

/* A constant initialiser of the same (for tables): ino, bytes; no flags. */
#define XLINK_EXTENT_INIT(i, lg, ph, ln)                                              \
	.ino = (i), .phys_sec = (ph) / XLINK_SECTOR, .logical_sec = (lg) / XLINK_SECTOR,   \
	.len_lo = ((ln) / XLINK_SECTOR) & 0xffff, .len_hi = ((ln) / XLINK_SECTOR) >> 16

/* An extent of these byte values: xlink_fits(), len at most XLINK_MAX_PIECE sectors. */
static inline struct xlink_extent xlink_extent_make(uint64_t ino, uint64_t logical,
						    uint64_t phys, uint64_t len, bool shared,
						    bool unwritten, bool recent)
{
	uint64_t sec = len / XLINK_SECTOR;

	return (struct xlink_extent){
		.ino = ino, .phys_sec = phys / XLINK_SECTOR, .logical_sec = logical / XLINK_SECTOR,
		.len_lo = sec & 0xffff, .len_hi = sec >> 16, .shared = shared,
		.unwritten = unwritten, .recent = recent,
	};
}

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
/* Sort v by physical offset, then inode, in place (no memory). */
void crosslink_sort_extents(struct xlink_extent *v, size_t n);
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
