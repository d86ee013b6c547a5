/*
 * btrfs_devtree: one btrfs tree read from the devices, item by item in key
 * order, for a tree the kernel has not loaded.
 *
 * A rescue= mount (ignorebadroots) leaves a tree unloaded when the kernel
 * could not read it -- its tree checker refused a block -- and
 * rescue=ignoredatacsums leaves the csum tree unloaded; a tree search of
 * one then fails with ENOENT.  The damage that made the kernel refuse is
 * what the user needs to know, so the tree is read here instead: its root
 * from its ROOT_ITEM in the root tree (which every mount loads), its blocks
 * through the chunk map (btrfs_chunkmap.h) from the devices, O_DIRECT.
 *
 * Only on a read-only mount (a rescue= mount always is): on a read-write
 * one the kernel rewrites the tree while it is walked, and a walk from the
 * devices would meet freed and reused blocks -- the tree search is the
 * only consistent view there.
 *
 * Each block is checked as the kernel's read of it checks it: checksum
 * (crc32c), bytenr, fsid, level (the parent's minus one, the root's from
 * its ROOT_ITEM), generation (the parent's pointer's, the root's from its
 * ROOT_ITEM), owner (the tree, for the trees below 256 that are never
 * shared), its item count bounded by what fits in the block, its items
 * inside the block, its keys in order and its first key the parent's
 * pointer's.  Every copy is tried; a block no copy of which passes is read
 * again (a read-only mount is not in flux: what reads bad twice is
 * damage), then recorded in a log and its subtree skipped.  The walk goes
 * down only (level rule), so a cycle is impossible; depth is at most
 * BTRFS_MAX_LEVEL; memory is one path of blocks.
 *
 * The reader of btrfs_trees.h switches to this module by itself when given
 * a log (btrfs_tree_fallback()); this module only reads, never reports.
 */
#ifndef FSCRUB_BTRFS_DEVTREE_H
#define FSCRUB_BTRFS_DEVTREE_H

#include <stdint.h>

#include "backends/btrfs/btrfs_chunkmap.h"
#include "backends/btrfs/btrfs_trees.h"

/* Bad blocks kept per log; more are counted (each skips a subtree and is said once). */
#define BTRFS_DEVTREE_BAD_MAX 16

struct btrfs_devtree_bad {
	uint64_t tree, logical;
	uint64_t parent;		/* the node that points at it; 0: the root */
	uint8_t level;			/* the level it should have */
	enum btrfs_block_why why;	/* the first copy's verdict */
};

/* What the walks of trees read from the devices met (for the caller to report). */
struct btrfs_devtree_log {
	struct btrfs_devtree_bad bad[BTRFS_DEVTREE_BAD_MAX];
	unsigned nr;
	unsigned long long more;	/* bad blocks past the array */
	unsigned long long blocks;	/* blocks read */
	uint64_t trees[8];		/* the trees read so (the first eight) */
	unsigned nr_trees;
	int err;			/* why a tree could not be read so (negative errno) */
};

struct btrfs_devtree;

/*
 * Start walking tree from the devices of the filesystem fd is on, from key
 * min to key max: 0 and *out, or a negative errno (-ENOENT: no ROOT_ITEM;
 * -EOPNOTSUPP: a checksum other than crc32c).
 */
int btrfs_devtree_open(struct btrfs_devtree **out, int fd, uint64_t tree, struct btrfs_tkey min,
		       struct btrfs_tkey max, struct btrfs_devtree_log *log);
/* The next item: 1 and *it (valid until the next call), 0 at the end, or -ENOMEM. */
int btrfs_devtree_next(struct btrfs_devtree *t, struct btrfs_tree_item *it);
void btrfs_devtree_close(struct btrfs_devtree *t);

/* What a block's verdict means, for people ("bad checksum"). */
const char *btrfs_devtree_why(enum btrfs_block_why why);

#endif
