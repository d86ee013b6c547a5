/*
 * btrfs_chunkmap: where a tree block's copies are on the devices, and
 * whether a copy read is the block it should be.
 *
 * A chunk item of the chunk tree maps a logical range to stripes (device,
 * physical offset); the profile (single, DUP, RAID0, RAID1*, RAID10) says
 * which stripes hold a copy of a given block and where.  The header checks
 * are the ones the kernel's read of a tree block makes before anything
 * else (btrfs_validate_extent_buffer): checksum, bytenr, fsid.
 *
 * Shared by btrfs_meta.c (every copy of every tree block, phase 2) and
 * btrfs_devtree.c (one tree walked from its root, for a tree the kernel
 * left unloaded).  This module only computes; it never reads or reports.
 */
#ifndef FSCRUB_BTRFS_CHUNKMAP_H
#define FSCRUB_BTRFS_CHUNKMAP_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/btrfs/btrfs_trees.h"

/* The striping unit of RAID0 / RAID10 (BTRFS_STRIPE_LEN, not in the uapi headers). */
#define BTRFS_CMAP_STRIPE_LEN (64 * 1024)
/* Copies fscrub tracks per block (a bit each): RAID1C4's four and margin. */
#define BTRFS_CMAP_MAX_COPIES 8

/*
 * struct btrfs_header: csum[32], fsid[16], bytenr, flags,
 * chunk_tree_uuid[16], generation, owner, nritems, level.
 */
#define BTRFS_H_CSUM_END 32
#define BTRFS_H_FSID 32
#define BTRFS_H_BYTENR 48
#define BTRFS_H_GENERATION 80
#define BTRFS_H_OWNER 88
#define BTRFS_H_NRITEMS 96
#define BTRFS_H_LEVEL 100
#define BTRFS_H_SIZE 101

struct btrfs_cmap_stripe {
	uint64_t devid, offset;
};

struct btrfs_cmap_chunk {
	uint64_t start, len, type, stripe_len;
	uint16_t n, sub;
	struct btrfs_cmap_stripe *st;	/* n of them; the caller frees */
};

/*
 * A CHUNK_ITEM into *c (c->st allocated): 1, 0 if it is no usable chunk
 * item (too short, no stripes: the kernel's tree checker rejects it), or
 * -ENOMEM.
 */
int btrfs_cmap_parse(const struct btrfs_tree_item *it, struct btrfs_cmap_chunk *c);

/* A metadata or system block group: where tree blocks live. */
bool btrfs_cmap_is_meta(uint64_t type);

/* Profiles whose copies fscrub reads itself (not RAID5/6: parity). */
bool btrfs_cmap_readable(const struct btrfs_cmap_chunk *c);

/* The bytes each stripe of c holds on its device (the kernel's btrfs_calc_stripe_length()). */
uint64_t btrfs_cmap_stripe_bytes(const struct btrfs_cmap_chunk *c);

/*
 * Where stripe i of c holds a copy of the block at logical: its physical
 * offset and which copy it is.  False if the stripe holds none (RAID0 and
 * RAID10 spread 64 KiB units over their stripes; a tree block never
 * crosses one).
 */
bool btrfs_cmap_on_stripe(const struct btrfs_cmap_chunk *c, unsigned i, uint64_t logical,
			  uint64_t *phys, unsigned *copy);

enum btrfs_block_why { BTRFS_BLOCK_OK, BTRFS_BLOCK_READ_ERR, BTRFS_BLOCK_CSUM,
		       BTRFS_BLOCK_BYTENR, BTRFS_BLOCK_FSID, BTRFS_BLOCK_GEN, BTRFS_BLOCK_LEVEL,
		       BTRFS_BLOCK_OWNER, BTRFS_BLOCK_ITEMS, BTRFS_BLOCK_KEY };

/*
 * The header checks of a tree block of nodesize bytes at logical (crc32c):
 * checksum over the block after it, bytenr, fsid (the metadata UUID, or a
 * seed device's fsid).
 */
enum btrfs_block_why btrfs_block_header(const unsigned char *b, uint32_t nodesize,
					uint64_t logical, const uint8_t *fsid);

#endif
