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
 * Where directory inode numbers are not stable (overlayfs with its layers
 * on different filesystems and xino off gives a directory a new number
 * each time the kernel evicts its inode and looks it up again: after
 * drop_caches or under memory pressure; a FUSE daemon without use_ino
 * does so for every inode), a number that differs is not proof of a move:
 * the node also holds a hash of the directory's file handle (dir_fid()),
 * which stays the same, or where the handle is the number (FUSE) of its
 * type, owner and times, and a reopened directory whose identity hashes
 * the same is the one recorded; the node then takes its new number.
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

#include "lib/workqueue.h"

/* What identifies a directory whose inode number changed (dir_fid()). */
enum dir_id {
	DIR_ID_HANDLE,		/* its file handle (overlayfs) */
	/*
	 * Its type, owner, mtime and ctime: where the handle is made of the
	 * number (FUSE).  A directory changed in between is taken for another.
	 */
	DIR_ID_ATTRS,
};

struct dir_node {
	struct wq_item work;		/* link in the walk queue */
	struct dir_node *parent;	/* NULL for the root */
	atomic_uint refs;
	uint64_t dev;			/* identity to verify on open ... */
	/*
	 * ... with ino, the number the directory had when last opened (or
	 * found): atomic, since dircache_pin() may renumber it (see fid)
	 * while another thread reads it.
	 */
	_Atomic uint64_t ino;
	/*
	 * dir_fid() of the directory when it was found, where its number may
	 * change (QUIRK_DIR_INO_UNSTABLE, QUIRK_INO_UNSTABLE), made the way
	 * fid_how says; fid 0: the number alone identifies it.  Set by the
	 * walk after dir_node_new().
	 */
	uint64_t fid;
	enum dir_id fid_how;
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
	unsigned long long opened_ahead;	/* by dircache_open_ahead() */
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
 * A hash of the identity (how) of name in dirfd (of dirfd itself if name
 * is ""), never 0: one that survives the inode being evicted and looked
 * up again.  The handle is asked for with AT_HANDLE_FID (Linux 6.5), which
 * overlayfs gives even without nfs_export: it names the inode of the layer
 * below (the lower origin once copied up).  Returns 0 if the filesystem
 * gives no handle, or name cannot be stat'ed.
 */
uint64_t dir_fid(int dirfd, const char *name, enum dir_id how);

/*
 * Return in *fd an open O_RDONLY|O_DIRECTORY descriptor of node, pinned
 * until dircache_unpin().  Returns 0, or a negative errno: -ESTALE when the
 * directory found at that name is not the one recorded (another st_dev, or
 * another inode number and, where node->fid is set, another handle), other
 * values from openat().  *fd is untouched on failure.  A directory that is
 * the recorded one under a new number (node->fid matched) gives node that
 * number.
 */
int dircache_pin(struct dircache *dc, struct dir_node *node, int *fd);
void dircache_unpin(struct dircache *dc, struct dir_node *node);

/*
 * Open node (its parent open), unpinned, while at most half the budget is
 * in use, so that the filesystem may start reading the directory before
 * the walk comes to it: XFS reads ahead a directory's first block when it
 * is opened (xfs_dir_open()), and the walk's own open came right before
 * its read.  A failure is not kept: dircache_pin() tries again and says.
 */
void dircache_open_ahead(struct dircache *dc, struct dir_node *node);

#endif
