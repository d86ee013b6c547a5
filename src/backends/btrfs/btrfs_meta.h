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

/* What phase 2 leaves reading beside phase 3 and judged after its walk. */
struct btrfs_meta;

/*
 * Phase 2 without -x: read every copy of every tree block the extent tree
 * lists, check it, compare the mirrors, confirm a bad copy by reading it
 * again, report btrfs.tree (and repair a bad copy that has a good one with
 * the kernel's scrub of that block group's stripe, unless readonly).
 * Block groups fscrub cannot check itself (RAID5/6, a checksum other than
 * crc32c) get the kernel's scrub of their device ranges (btrfs.scrub).
 * The second copies of DUP blocks whose first copy read good are read in
 * a thread beside phase 3 (btrfs_meta.c says why that is safe): *later is
 * then set, to be handed to btrfs_meta_finish() after the walk (or to
 * btrfs_meta_stop()).  0, or a negative errno when the trees or devices
 * cannot be read at all (*later NULL).
 */
int btrfs_meta_verify(struct scrub_ctx *ctx, const struct btrfs_meta_dev *devs, unsigned nr,
		      bool readonly, struct btrfs_meta **later);

/*
 * Phase 3, after the walk, before the tree check's findings: wait for the
 * later copies, confirm, repair and report those that read bad, say what
 * phase 2 read (-v), free m.  NULL: nothing.
 */
void btrfs_meta_finish(struct btrfs_meta *m);

/* Cleanup when btrfs_meta_finish() was not reached: wait and free, nothing reported. */
void btrfs_meta_stop(struct btrfs_meta *m);

#endif
