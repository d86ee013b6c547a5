/*
 * btrfs_readahead: the fs trees' leaves read into the kernel's cache by
 * several tree searches at once, ahead of the tree check's first pass.
 *
 * The first pass (btrfs_check.c) reads each fs tree in key order, one
 * TREE_SEARCH_V2 after another: cold, the kernel reads the leaves one at
 * a time, and that wait is most of the pass (the kernel tree's fs tree:
 * 0.67-0.94 s read so, 0.26-0.36 s by eight searches of an eighth each).
 * btrfs_readahead_start() cuts each fs tree's inode numbers into
 * BTRFS_RA_SLICES slices and reads all but the first (which the pass
 * itself reads at once) in threads of their own, discarding the items:
 * when the pass reaches a slice, its leaves are in memory.  Each thread
 * then reads one of the trees the pass reads next (extent, csum, free
 * space).  It checks nothing and reports nothing; a failed search (a tree
 * a rescue= mount left unloaded) ends its range.  Memory: a reader's
 * buffer (BTRFS_TREES_BUF) per thread, while the first pass runs.
 */
#ifndef FSCRUB_BTRFS_READAHEAD_H
#define FSCRUB_BTRFS_READAHEAD_H

struct scrub_ctx;
struct btrfs_readahead;

/* Start reading ahead through fd (the mount); NULL if nothing was started. */
struct btrfs_readahead *btrfs_readahead_start(struct scrub_ctx *ctx, int fd);

/* Stop the threads where they are, wait for them and free ra (may be NULL). */
void btrfs_readahead_stop(struct btrfs_readahead *ra);

#endif
