/*
 * btrfs_chunkmap: chunk items, stripes and tree block headers (see
 * btrfs_chunkmap.h).
 */
#include "backends/btrfs/btrfs_chunkmap.h"

#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>
#include <string.h>

#include "lib/crc32c.h"

/*
 * btrfs_chunk: length, owner, stripe_len, type (24), ..., num_stripes (44),
 * sub_stripes (46), stripes (48, 32 bytes each: devid, offset, dev_uuid).
 */
#define CHUNK_STRIPE_LEN 16
#define CHUNK_TYPE 24
#define CHUNK_NUM_STRIPES 44
#define CHUNK_SUB_STRIPES 46
#define CHUNK_STRIPES 48
#define CHUNK_STRIPE_SIZE 32


int btrfs_cmap_parse(const struct btrfs_tree_item *it, struct btrfs_cmap_chunk *c)
{
	uint16_t n;

	if (it->len < CHUNK_STRIPES)
		return 0;
	n = btrfs_get16(it->data + CHUNK_NUM_STRIPES);
	if (!n || it->len < CHUNK_STRIPES + (size_t)n * CHUNK_STRIPE_SIZE)
		return 0;	/* the kernel's tree checker rejects such an item */
	*c = (struct btrfs_cmap_chunk){
		.start = it->key.offset, .len = btrfs_get64(it->data),
		.type = btrfs_get64(it->data + CHUNK_TYPE), .n = n,
		.stripe_len = btrfs_get64(it->data + CHUNK_STRIPE_LEN),
		.sub = btrfs_get16(it->data + CHUNK_SUB_STRIPES),
	};
	if (!(c->st = calloc(n, sizeof(*c->st))))
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *s = it->data + CHUNK_STRIPES + (size_t)i * CHUNK_STRIPE_SIZE;

		c->st[i] = (struct btrfs_cmap_stripe){ btrfs_get64(s), btrfs_get64(s + 8) };
	}
	return 1;
}

bool btrfs_cmap_is_meta(uint64_t type)
{
	return type & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM);
}

bool btrfs_cmap_readable(const struct btrfs_cmap_chunk *c)
{
	if (c->type & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
		return false;
	if (c->type & BTRFS_BLOCK_GROUP_RAID10)
		return c->sub && c->sub <= BTRFS_CMAP_MAX_COPIES && c->n % c->sub == 0;
	return c->n && c->n <= BTRFS_CMAP_MAX_COPIES;
}

uint64_t btrfs_cmap_stripe_bytes(const struct btrfs_cmap_chunk *c)
{
	if (c->type & BTRFS_BLOCK_GROUP_RAID0)
		return c->len / c->n;
	if (c->type & BTRFS_BLOCK_GROUP_RAID10)
		return c->len / (c->n / c->sub);
	if (c->type & BTRFS_BLOCK_GROUP_RAID5)
		return c->len / (c->n - 1u);
	if (c->type & BTRFS_BLOCK_GROUP_RAID6)
		return c->len / (c->n - 2u);
	return c->len;
}

bool btrfs_cmap_on_stripe(const struct btrfs_cmap_chunk *c, unsigned i, uint64_t logical,
			  uint64_t *phys, unsigned *copy)
{
	uint64_t off = logical - c->start, nr = off / BTRFS_CMAP_STRIPE_LEN;
	unsigned groups;

	*copy = 0;
	if (c->type & BTRFS_BLOCK_GROUP_RAID0) {
		if (nr % c->n != i)
			return false;
		*phys = c->st[i].offset + nr / c->n * BTRFS_CMAP_STRIPE_LEN + off % BTRFS_CMAP_STRIPE_LEN;
		return true;
	}
	if (c->type & BTRFS_BLOCK_GROUP_RAID10) {
		groups = c->n / c->sub;
		if (nr % groups != i / c->sub)
			return false;
		*phys = c->st[i].offset + nr / groups * BTRFS_CMAP_STRIPE_LEN + off % BTRFS_CMAP_STRIPE_LEN;
		*copy = i % c->sub;
		return true;
	}
	*phys = c->st[i].offset + off;	/* single, DUP, RAID1*: every stripe a whole copy */
	*copy = i;
	return true;
}

enum btrfs_block_why btrfs_block_header(const unsigned char *b, uint32_t nodesize,
					uint64_t logical, const uint8_t *fsid)
{
	if (~crc32c(0xffffffff, b + BTRFS_H_CSUM_END, nodesize - BTRFS_H_CSUM_END) !=
	    btrfs_get32(b))
		return BTRFS_BLOCK_CSUM;
	if (btrfs_get64(b + BTRFS_H_BYTENR) != logical)
		return BTRFS_BLOCK_BYTENR;
	if (memcmp(b + BTRFS_H_FSID, fsid, BTRFS_FSID_SIZE))
		return BTRFS_BLOCK_FSID;
	return BTRFS_BLOCK_OK;
}
