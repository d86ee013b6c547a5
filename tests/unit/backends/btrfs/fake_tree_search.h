/*
 * fake_tree_search.h: a fake BTRFS_IOC_TREE_SEARCH_V2 (and, on demand, a
 * one-device BTRFS_IOC_FS_INFO and BTRFS_IOC_DEV_INFO) for the unit tests of
 * the btrfs tree reader and the checks built on it.  A test binary links
 * with -Wl,--wrap=ioctl and fake_tree_search.c; its ioctl() then serves the
 * items added here, per tree, in the key range asked for, at most
 * fake_tree.per_call items a call (so that the reader's batching is used).
 */
#ifndef FSCRUB_FAKE_TREE_SEARCH_H
#define FSCRUB_FAKE_TREE_SEARCH_H

#include <stdint.h>

#include "backends/btrfs/btrfs_trees.h"

#define FAKE_TREE_MAX_ITEMS 64

struct fake_item {
	uint64_t tree;
	struct btrfs_tkey key;
	unsigned char data[256];
	uint32_t len;
};

struct fake_tree {
	struct fake_item items[FAKE_TREE_MAX_ITEMS];
	unsigned nr_items;
	unsigned per_call;	/* items served per call at most */
	uint64_t transid;	/* every item's header transid */
	int err;		/* nonzero: the ioctl fails with this errno */
	unsigned calls;		/* ioctl calls since the reset */
	/*
	 * Non-NULL: BTRFS_IOC_FS_INFO answers one device (devid 1) and fsid,
	 * BTRFS_IOC_DEV_INFO its path, dev_path (a file the test made).
	 */
	const char *dev_path;
	uint8_t fsid[16];
};

extern struct fake_tree fake_tree;

/* Empty the fake; it serves per_call items a call, each of transid. */
void fake_tree_reset(unsigned per_call, uint64_t transid);

/*
 * A new zeroed item of len data bytes (at most 256) in tree at key, to be
 * filled in by the caller.  Items must be added in key order per tree, as a
 * tree holds them.
 */
struct fake_item *fake_tree_add(uint64_t tree, struct btrfs_tkey key, uint32_t len);

/* Little-endian stores, as the on-disk items hold their fields. */
void fake_put64(unsigned char *p, uint64_t v);
void fake_put16(unsigned char *p, uint16_t v);

#endif
