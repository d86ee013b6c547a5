/*
 * btrfs_meta: every copy of every tree block read from the devices and
 * checked as the kernel checks a block it reads, without reading any file
 * data (phase 2 without -x).  See btrfs_meta.c.
 *
 * Layering: btrfs.c owns the device list and calls btrfs_meta_verify();
 * this module reads the chunk and extent trees through btrfs_trees.h, the
 * devices with O_DIRECT through ioengine.h, and names a block's trees
 * through btrfs_tree_block_owners() (btrfs_trees.h).
 */
#ifndef FSCRUB_BTRFS_META_H
#define FSCRUB_BTRFS_META_H

#include <stdbool.h>
#include <stdint.h>

struct scrub_ctx;
struct strbuf;

/* A device of the filesystem, as btrfs.c lists them. */
struct btrfs_meta_dev {
	uint64_t devid;
	const char *path;		/* the block device ("": missing) */
	bool missing;			/* mounted degraded without it: its copies are not read */
	bool seed;			/* its blocks carry the seed's fsid, fsid below */
	uint8_t fsid[16];		/* a seed's fsid (DEV_INFO) */
	uint64_t total_bytes;		/* its size (DEV_INFO) */
};

/*
 * Phase 2 without -x: read every copy of every tree block the extent tree
 * lists, check it, compare the mirrors, confirm a bad copy by reading it
 * again, report btrfs.tree (and repair a bad copy that has a good one with
 * the kernel's scrub of that block group's stripe, unless readonly).
 * Block groups fscrub cannot check itself (RAID5/6, a checksum other than
 * crc32c) get the kernel's scrub of their device ranges (btrfs.scrub).
 * 0, or a negative errno when the trees or devices cannot be read at all.
 */
int btrfs_meta_verify(struct scrub_ctx *ctx, const struct btrfs_meta_dev *devs, unsigned nr,
		      bool readonly);

#endif
