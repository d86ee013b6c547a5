/*
 * btrfs_trees: stream the items of a btrfs tree by key range, mounted.
 *
 * BTRFS_IOC_TREE_SEARCH_V2 (root only) copies the items of one tree whose
 * keys lie in [min, max] (keys compared as a whole: objectid, type, offset)
 * into a buffer, as many as fit.  A reader owns one buffer of
 * BTRFS_TREES_BUF bytes and a key cursor: each refill asks for the items
 * after the last key returned, so memory stays that one buffer whatever the
 * tree's size, and a tree that changes between refills is read as it is at
 * each refill (items are never returned twice or out of order).
 *
 * The item's transid is the generation of the leaf that held it: the last
 * transaction that changed anything in that leaf, an upper bound of the
 * item's own age.
 *
 * This module only reads; it never reports (callers do).
 */
#ifndef FSCRUB_BTRFS_TREES_H
#define FSCRUB_BTRFS_TREES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * 256 KiB: sixteen 16 KiB leaves per ioctl, the item count per call that
 * makes the ioctl cost small next to the copy; an item is at most a node
 * (64 KiB), so one always fits.
 */
#define BTRFS_TREES_BUF (256 * 1024)

struct btrfs_tkey {
	uint64_t objectid;
	uint8_t type;
	uint64_t offset;
};

struct btrfs_tree_item {
	struct btrfs_tkey key;
	uint64_t transid;		/* generation of the leaf that held it */
	uint32_t len;
	const unsigned char *data;	/* len bytes, valid until the next call */
};

struct btrfs_tree_reader {
	int fd;
	uint64_t tree;
	struct btrfs_tkey next, max;	/* cursor: the next key wanted; the last */
	void *args;			/* struct btrfs_ioctl_search_args_v2 + buffer */
	size_t pos;			/* in the buffer */
	uint32_t left;			/* items not yet returned from the buffer */
	bool end;			/* no refill: the range is exhausted */
	unsigned long long items, calls;	/* counters, for -v */
	/* btrfs_tree_fallback(): read an unloaded tree from the devices */
	struct btrfs_devtree_log *devlog;
	struct btrfs_devtree *dev;	/* doing so (btrfs_devtree.h) */
};

struct btrfs_devtree_log;
struct btrfs_devtree;

/*
 * Start reading tree (a tree id: BTRFS_EXTENT_TREE_OBJECTID, a subvolume's
 * id, ...) through fd (any file of the filesystem) from key min to key max,
 * both included.  0, or -ENOMEM.
 */
int btrfs_tree_open(struct btrfs_tree_reader *r, int fd, uint64_t tree,
		    struct btrfs_tkey min, struct btrfs_tkey max);
/*
 * The next item: 1 and *it filled, 0 at the end of the range, or a negative
 * errno from the ioctl (-ENOENT: no such tree; -EPERM: not root).
 */
int btrfs_tree_next(struct btrfs_tree_reader *r, struct btrfs_tree_item *it);
/*
 * Read tree from key min to key max with r, an open reader, from its next
 * refill on (what its buffer holds is dropped): a new range without a new
 * buffer.  The counters go on.
 */
void btrfs_tree_seek(struct btrfs_tree_reader *r, uint64_t tree, struct btrfs_tkey min,
		     struct btrfs_tkey max);
/*
 * On a read-only mount only (btrfs_devtree.h says why): when the kernel
 * has not loaded r's tree (a rescue= mount; the search fails with ENOENT),
 * read it from the devices instead, its bad blocks kept in log.  Then
 * btrfs_tree_next() fails with -ENOENT only if the tree does not exist or
 * cannot be read so (log->err says why).
 */
void btrfs_tree_fallback(struct btrfs_tree_reader *r, struct btrfs_devtree_log *log);
/* Is r reading its tree from the devices (btrfs_tree_fallback())? */
bool btrfs_tree_from_devices(const struct btrfs_tree_reader *r);
/* Free the buffer; the counters stay readable. */
void btrfs_tree_close(struct btrfs_tree_reader *r);

/* Little-endian fields of an item's bytes (no alignment needed). */
uint64_t btrfs_get64(const unsigned char *p);
uint32_t btrfs_get32(const unsigned char *p);
uint16_t btrfs_get16(const unsigned char *p);

/*
 * A fingerprint of an INODE_ITEM's data (at least sizeof(struct
 * btrfs_inode_item) bytes): its ctime and sequence, which every change of
 * the inode moves.  Two readings with the same stamp saw the inode as no
 * change left it, whatever else rewrote the leaf.
 */
uint64_t btrfs_inode_stamp(const unsigned char *inode_item);

/*
 * Grow *v (of *alloc elements of size bytes, doubling) to hold need; 0 or
 * -ENOMEM (then *v and *alloc are as they were).  For the btrfs modules'
 * arrays of records.
 */
int btrfs_grow(void **v, size_t *alloc, size_t need, size_t size);

/* Key order: <0, 0, >0. */
int btrfs_key_cmp(const struct btrfs_tkey *a, const struct btrfs_tkey *b);

struct strbuf;

/* A tree's name for people: "extent tree", "subvolume 257" (in buf if made). */
const char *btrfs_tree_name(uint64_t root, char *buf, size_t size);

/*
 * The trees that own the tree blocks in [start, start + len): their
 * extent items' inline TREE_BLOCK_REFs (BTRFS_IOC_TREE_SEARCH on the
 * extent tree through fd), added to out as "extent tree, subvolume 256".
 * False if none is known (a shared block has only a SHARED_BLOCK_REF, to
 * its parent).
 */
bool btrfs_tree_block_owners(int fd, uint64_t start, uint64_t len, struct strbuf *out);

#endif
