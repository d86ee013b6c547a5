/*
 * btrfs_readahead: the fs trees' leaves read into the kernel's cache ahead
 * of the tree check's first pass (see btrfs_readahead.h).
 *
 * Where the slices are.  The fs trees are the root tree's ROOT_ITEMs of
 * tree 5 and of the subvolume ids; an fs tree's inode numbers run from 256
 * to its highest, which a tree search cannot ask for (it reads forward
 * only): top_objectid() finds it by searches for the first item at or
 * after a number, doubling the number until none is found and then
 * halving the gap.  Each search reads one path of the tree, cold a few
 * leaves: some tens of reads a tree.  Items past the inode numbers
 * (orphan items, at objectid -5) are left to the pass.
 */
#include "backends/btrfs/btrfs_readahead.h"

#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "backends/btrfs/btrfs_trees.h"
#include "lib/thread.h"
#include "report/report.h"

/*
 * Slices of each fs tree: eight (seven threads), measured on the kernel
 * tree's, cold, on 2 CPUs shared with other work: one search reads it in
 * 0.67-0.94 s, four in 0.33-0.39 s, eight in 0.26-0.36 s; a whole fscrub
 * -n run took 0.695 s with eight against 0.773 s with four (medians of 5
 * in the same rounds), while the walk's two threads search the same tree.
 * Peak memory did not move (7 reader buffers, freed before phase 4).
 */
#define BTRFS_RA_SLICES 8
/* fs trees read ahead: snapshots share their leaves, and more are read by the pass alone. */
#define RA_TREES 16
/* The highest number is found to within 1/RA_PRECISION of it: slices need not be exact. */
#define RA_PRECISION 64
/* Items read between looks at the stop flag and at cancellation. */
#define RA_CHECK_ITEMS 4096
/* A probe's buffer: one item, at most a 64 KiB node. */
#define PROBE_BUF (64 * 1024)

/* One thread's work: its slice of every tree. */
struct ra_job {
	struct btrfs_readahead *ra;
	unsigned slice;
};

struct btrfs_readahead {
	struct scrub_ctx *ctx;
	int fd;
	uint64_t tree[RA_TREES], top[RA_TREES];
	unsigned nr_trees, started;
	pthread_t thread[BTRFS_RA_SLICES - 1];
	struct ra_job job[BTRFS_RA_SLICES - 1];
	atomic_bool stop;
};

/* The objectid of tree's first item in [x, LAST_FREE]; 0 if none or the search failed. */
static uint64_t probe(int fd, struct btrfs_ioctl_search_args_v2 *a, uint64_t tree, uint64_t x)
{
	memset(&a->key, 0, sizeof(a->key));
	a->key.tree_id = tree;
	a->key.min_objectid = x;
	a->key.max_objectid = BTRFS_LAST_FREE_OBJECTID;
	a->key.max_type = UINT8_MAX;
	a->key.max_offset = UINT64_MAX;
	a->key.max_transid = UINT64_MAX;
	a->key.nr_items = 1;
	a->buf_size = PROBE_BUF;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, a) < 0 || a->key.nr_items == 0)
		return 0;
	return ((const struct btrfs_ioctl_search_header *)a->buf)->objectid;
}

/* Twice x, at most the last inode number (a damaged tree may hold any). */
static uint64_t doubled(uint64_t x)
{
	return x < BTRFS_LAST_FREE_OBJECTID / 2 ? x * 2 : BTRFS_LAST_FREE_OBJECTID;
}

/*
 * A number at or above tree's highest inode number, within 1/RA_PRECISION
 * of it; 0 if none.  A probe finds the first number at or after the one
 * asked, so lo only grows and stays at most hi.
 */
static uint64_t top_objectid(int fd, struct btrfs_ioctl_search_args_v2 *a, uint64_t tree)
{
	uint64_t lo = probe(fd, a, tree, BTRFS_FIRST_FREE_OBJECTID), hi, f;

	if (!lo)
		return 0;
	/* doubling: lo has an item at or after it, hi none (or is the last number) */
	for (hi = doubled(lo); hi < BTRFS_LAST_FREE_OBJECTID && (f = probe(fd, a, tree, hi));
	     hi = doubled(f))
		lo = f;
	while (hi - lo > lo / RA_PRECISION + 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if ((f = probe(fd, a, tree, mid)))
			lo = f;
		else
			hi = mid;
	}
	return hi;
}

/* The fs trees (tree 5 and the subvolumes) and their highest numbers, into ra. */
static void find_trees(struct btrfs_readahead *ra)
{
	struct btrfs_tkey min = { BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_tkey max = { BTRFS_LAST_FREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, UINT64_MAX };
	struct btrfs_ioctl_search_args_v2 *a = malloc(sizeof(*a) + PROBE_BUF);
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;

	if (!a || btrfs_tree_open(&r, ra->fd, BTRFS_ROOT_TREE_OBJECTID, min, max) < 0) {
		free(a);
		return;
	}
	while (ra->nr_trees < RA_TREES && btrfs_tree_next(&r, &it) > 0) {
		uint64_t id = it.key.objectid, top;

		if (it.key.type != BTRFS_ROOT_ITEM_KEY ||
		    (id != BTRFS_FS_TREE_OBJECTID && id < BTRFS_FIRST_FREE_OBJECTID))
			continue;
		if ((top = top_objectid(ra->fd, a, id))) {
			ra->tree[ra->nr_trees] = id;
			ra->top[ra->nr_trees++] = top;
		}
	}
	btrfs_tree_close(&r);
	free(a);
}

/* Read tree from min to max, discarding the items, until the end or a stop. */
static void read_range(struct btrfs_readahead *ra, uint64_t tree, struct btrfs_tkey min,
		       struct btrfs_tkey max)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;

	if (btrfs_tree_open(&r, ra->fd, tree, min, max) < 0)
		return;
	while (btrfs_tree_next(&r, &it) > 0)
		if (r.items % RA_CHECK_ITEMS == 0 &&
		    (atomic_load(&ra->stop) || scrub_should_stop(ra->ctx)))
			break;
	btrfs_tree_close(&r);
}

/* Slice s of fs tree t. */
static void read_slice(struct btrfs_readahead *ra, unsigned t, unsigned s)
{
	uint64_t top = ra->top[t];
	struct btrfs_tkey min = { top / BTRFS_RA_SLICES * s, 0, 0 };
	struct btrfs_tkey max = { s + 1 == BTRFS_RA_SLICES ? top : top / BTRFS_RA_SLICES * (s + 1),
				  0, 0 };

	read_range(ra, ra->tree[t], min, max);
}

/*
 * The trees the pass reads after the fs trees, one to a thread once its
 * slices are read: the extent tree (with the data extents' back
 * references: the largest), the csum tree and the free space tree.
 */
static const uint64_t after_fs[] = {
	BTRFS_EXTENT_TREE_OBJECTID, BTRFS_CSUM_TREE_OBJECTID, BTRFS_FREE_SPACE_TREE_OBJECTID,
};

static void *slice_thread(void *arg)
{
	const struct ra_job *job = arg;
	struct btrfs_tkey min = { 0, 0, 0 }, max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };

	for (unsigned t = 0; t < job->ra->nr_trees && !atomic_load(&job->ra->stop); t++)
		read_slice(job->ra, t, job->slice);
	for (size_t i = job->slice - 1; i < sizeof(after_fs) / sizeof(after_fs[0]) &&
	     !atomic_load(&job->ra->stop); i += BTRFS_RA_SLICES - 1)
		read_range(job->ra, after_fs[i], min, max);
	return NULL;
}

struct btrfs_readahead *btrfs_readahead_start(struct scrub_ctx *ctx, int fd)
{
	struct btrfs_readahead *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return NULL;
	ra->ctx = ctx;
	ra->fd = fd;
	find_trees(ra);
	for (unsigned i = 0; ra->nr_trees && i < BTRFS_RA_SLICES - 1; i++) {
		ra->job[i] = (struct ra_job){ ra, i + 1 };	/* slice 0 is the pass's own */
		if (thread_start(&ra->thread[i], slice_thread, &ra->job[i]) != 0)
			break;
		ra->started++;
	}
	if (!ra->started) {
		free(ra);
		return NULL;
	}
	return ra;
}

void btrfs_readahead_stop(struct btrfs_readahead *ra)
{
	if (!ra)
		return;
	atomic_store(&ra->stop, true);
	for (unsigned i = 0; i < ra->started; i++)
		pthread_join(ra->thread[i], NULL);
	free(ra);
}
