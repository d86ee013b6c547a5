/*
 * dircache: directory nodes of the tree walk and a bounded cache of their
 * open file descriptors.
 *
 * Design.  The walk never builds a path to open anything: each directory is
 * opened with openat() relative to its parent's descriptor, so depth is not
 * limited by PATH_MAX.  Keeping every parent open would need as many
 * descriptors as the tree is wide, so descriptors live in an LRU cache of a
 * fixed budget: a node whose descriptor was evicted is reopened from the
 * nearest ancestor that is still open (the root always is), one component
 * at a time.  The walk is depth-first, so the parent of the next directory
 * is almost always still cached.  Every (re)open is verified against the
 * (st_dev, st_ino) recorded when the directory was found, so a directory
 * that was renamed or replaced in the meantime is noticed (-ESTALE), never
 * silently scanned in its new place.
 *
 * A node is reference counted: the walk queue holds one reference until the
 * directory has been read, each child holds one on its parent, and the link
 * table holds one for every directory it needs to find a name in again.  So
 * memory is proportional to the frontier of the walk plus those few nodes.
 */
#ifndef FSCRUB_DIRCACHE_H
#define FSCRUB_DIRCACHE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "workqueue.h"

struct dir_node {
	struct wq_item work;		/* link in the walk queue */
	struct dir_node *parent;	/* NULL for the root */
	atomic_uint refs;
	uint64_t dev, ino;		/* identity to verify on open */
	/*
	 * The subvolume id the kernel gave with the directory's statx
	 * (STATX_SUBVOL; inokey.h), if has_subvol: that of every file in it.
	 * Set by the walk after dir_node_new*().
	 */
	uint64_t subvol;
	bool has_subvol;
	/* fields below are protected by dircache.lock */
	int fd;				/* -1 when not open */
	unsigned pins;			/* users of fd; a pinned fd is never closed */
	struct dir_node *lru_prev, *lru_next;
	uint32_t depth;
	uint16_t namelen;
	char name[];			/* NUL-terminated; "" for the root */
};

struct dircache {
	pthread_mutex_t lock;
	struct dir_node *lru;		/* list head (a sentinel): lru->lru_next is most recent */
	unsigned nr_open;		/* descriptors held in the cache */
	unsigned budget;		/* most descriptors the cache keeps */
	unsigned peak_open;
};

void dircache_init(struct dircache *dc, unsigned budget);
void dircache_release(struct dircache *dc);

/* A root node that owns fd (closed when the node is freed). */
struct dir_node *dir_node_new_root(int fd, uint64_t dev, uint64_t ino);
/* A child of parent (takes a reference on parent); refs starts at 1. */
struct dir_node *dir_node_new(struct dir_node *parent, const char *name,
			      size_t namelen, uint64_t dev, uint64_t ino);
void dir_node_get(struct dir_node *node);
void dir_node_put(struct dircache *dc, struct dir_node *node);

/*
 * Return in *fd an open O_RDONLY|O_DIRECTORY descriptor of node, pinned
 * until dircache_unpin().  Returns 0, or a negative errno: -ESTALE when the
 * directory found at that name is not the one recorded, other values from
 * openat().  *fd is untouched on failure.
 */
int dircache_pin(struct dircache *dc, struct dir_node *node, int *fd);
void dircache_unpin(struct dircache *dc, struct dir_node *node);

#endif
