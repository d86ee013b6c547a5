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
 * Memory: 40 bytes per extent (40 MB per million extents), sorted once.
 */
#ifndef FSCRUB_CROSSLINK_H
#define FSCRUB_CROSSLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/fiemap.h>

struct scrub_ctx;

struct xlink_extent {
	uint64_t phys, len, logical, ino;
	uint32_t shared;	/* FIEMAP_EXTENT_SHARED */
	uint32_t recent;	/* the inode changed during the scan */
};

/* A growable list of extents: one per walk thread, merged after phase 3. */
struct xlink_list {
	struct xlink_extent *v;
	size_t n, alloc;
};

void xlink_list_release(struct xlink_list *l);
/* Record a batch of a file's data extents (skips those without a location). */
void crosslink_collect(struct xlink_list *l, uint64_t ino, bool recent,
		       const struct fiemap_extent *x, size_t n);
/* Move a thread's list into ctx's (single-threaded). */
void crosslink_merge(struct scrub_ctx *ctx, struct xlink_list *l);
/* Phase 4: find, look again at, and report cross-linked blocks. */
void crosslink_check(struct scrub_ctx *ctx);

#endif
