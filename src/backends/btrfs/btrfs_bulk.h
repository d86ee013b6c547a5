/*
 * btrfs_bulk: phase 3's bulk records on btrfs, the bulk_inodes and
 * bulk_extents hooks (backend.h): a file's inode and its extent map from
 * the INODE_ITEM, XATTR_ITEMs and EXTENT_DATA items of its subvolume's
 * tree (TREE_SEARCH_V2, btrfs_trees.h) instead of a statx, an open, a
 * FIEMAP and an xattr listing.  See btrfs_bulk.c.
 */
#ifndef FSCRUB_BTRFS_BULK_H
#define FSCRUB_BTRFS_BULK_H

#include <stddef.h>
#include <stdint.h>

struct scrub_ctx;
struct backend_dir;
struct backend_inode;
struct fiemap_extent;
struct btrfs_bulk;

/*
 * Phase 1, main thread: the per-thread readers of the walk's bulk records
 * for ctx's filesystem of this sector size, or NULL (no memory: the walk
 * stats every entry).  Freed with btrfs_bulk_free().
 */
struct btrfs_bulk *btrfs_bulk_new(struct scrub_ctx *ctx, uint32_t sectorsize);
void btrfs_bulk_free(struct btrfs_bulk *b);
/* After the walk, under -v: what the hooks served (nothing if never asked). */
void btrfs_bulk_report(struct scrub_ctx *ctx, const struct btrfs_bulk *b);

/* The btrfs backend's state's bulk readers (btrfs.c), or NULL. */
struct btrfs_bulk *btrfs_bulk_of(struct scrub_ctx *ctx);

/* The bulk_inodes and bulk_extents hooks (backend.h), walk threads. */
int btrfs_bulk_inodes(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const uint64_t *inos, size_t n, struct backend_inode *out);
int btrfs_bulk_extents(struct scrub_ctx *ctx, unsigned thread, const struct backend_inode *r,
		       struct fiemap_extent *out, size_t max);

#endif
