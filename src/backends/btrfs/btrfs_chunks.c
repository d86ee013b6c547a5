/*
 * btrfs_chunks: chunks, device extents, block groups and devices agree
 * (btrfs.chunk).
 *
 * The chunk tree maps each logical range (a CHUNK_ITEM) to stripes on the
 * devices, and holds a DEV_ITEM per device with its bytes_used; the device
 * tree holds the other side of each stripe, a DEV_EXTENT (device, physical
 * offset) naming its chunk; the block group items (read by btrfs_check.c
 * into p->bg) describe the same logical ranges.  What `btrfs check` checks:
 *
 *  - every chunk has a block group item of the same start, length and
 *    type and profile bits, and every block group a chunk;
 *  - every stripe of a chunk has a DEV_EXTENT on its device at its offset,
 *    naming the chunk, of the chunk's per-device length (the length
 *    divided among the data stripes: see stripe_size()); every DEV_EXTENT
 *    is such a stripe, and ends inside its device (the DEV_ITEM's total_bytes);
 *  - each DEV_ITEM's bytes_used is the sum of its device's extents.
 *
 * The kernel verifies dev extents against chunks at mount
 * (btrfs_verify_dev_extents) and refuses a filesystem where they
 * disagree; online these findings catch what changed since, and the
 * DEV_ITEM counters, which the mount does not verify.
 *
 * Memory: about 48 bytes per chunk and 24 per stripe (one chunk per GiB
 * of data or 256 MiB of metadata, times the copies), 16 per device; the
 * device tree streams.  Reads no other tree; never reports (findings go
 * to the pass).
 */
#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>

#include "backends/btrfs/btrfs_check_int.h"

/* btrfs_chunk: length, owner, stripe_len, type, io_align, io_width, sector_size, num_stripes. */
#define CHUNK_TYPE 24
#define CHUNK_NUM_STRIPES 44
#define CHUNK_SUB_STRIPES 46
#define CHUNK_STRIPES 48
#define CHUNK_STRIPE_SIZE 32	/* devid, offset, dev_uuid[16] */
/* btrfs_dev_extent: chunk_tree, chunk_objectid, chunk_offset, length. */
#define DEV_EXTENT_CHUNK_OFFSET 16
#define DEV_EXTENT_LENGTH 24
#define DEV_EXTENT_SIZE 32
/* btrfs_dev_item: devid, total_bytes, bytes_used. */
#define DEV_ITEM_TOTAL_BYTES 8
#define DEV_ITEM_BYTES_USED 16
#define DEV_ITEM_SIZE 24
/* The bits a block group item and its chunk must share. */
#define BG_KIND_MASK (BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK)

struct chunk_rec {
	uint64_t start, len, type, stripe_size, transid;
	size_t first, n;	/* its stripes in the stripe array */
};

struct stripe_rec {
	uint64_t devid, offset;
	bool found;		/* a matching DEV_EXTENT was read */
};

struct dev_rec {
	uint64_t devid, total_bytes, bytes_used, sum, transid;
};

struct chunk_state {
	struct chunk_rec *c;
	size_t nr_c, alloc_c;
	struct stripe_rec *s;
	size_t nr_s, alloc_s;
	struct dev_rec *d;
	size_t nr_d, alloc_d;
};

/*
 * The bytes each stripe of a chunk holds on its device: the chunk's length
 * divided among the stripes that hold distinct data (parity stripes and
 * mirror copies hold none of their own), as the kernel's
 * btrfs_calc_stripe_length() does.
 */
static uint64_t stripe_size(uint64_t len, uint64_t type, uint32_t n, uint32_t sub)
{
	uint32_t data = n;

	if (type & BTRFS_BLOCK_GROUP_RAID5)
		data = n - 1;
	else if (type & BTRFS_BLOCK_GROUP_RAID6)
		data = n - 2;
	else if (type & (BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1))
		data = n / 2;
	else if (type & BTRFS_BLOCK_GROUP_RAID1C3)
		data = n / 3;
	else if (type & BTRFS_BLOCK_GROUP_RAID1C4)
		data = n / 4;
	else if (type & BTRFS_BLOCK_GROUP_RAID10)
		data = n / (sub ? sub : 2);
	return data ? len / data : 0;
}

static int chunk_item(struct chunk_state *st, const struct btrfs_tree_item *it)
{
	uint32_t n, sub;
	struct chunk_rec *c;

	if (it->len < CHUNK_STRIPES)
		return 0;
	n = it->data[CHUNK_NUM_STRIPES] | (uint32_t)it->data[CHUNK_NUM_STRIPES + 1] << 8;
	sub = it->data[CHUNK_SUB_STRIPES] | (uint32_t)it->data[CHUNK_SUB_STRIPES + 1] << 8;
	if (it->len < CHUNK_STRIPES + (size_t)n * CHUNK_STRIPE_SIZE)
		return 0;	/* the kernel's tree checker rejects such an item */
	if (btrfs_grow((void **)&st->c, &st->alloc_c, st->nr_c + 1, sizeof(*st->c)) < 0 ||
	    btrfs_grow((void **)&st->s, &st->alloc_s, st->nr_s + n, sizeof(*st->s)) < 0)
		return -ENOMEM;
	c = &st->c[st->nr_c++];
	*c = (struct chunk_rec){
		.start = it->key.offset, .len = btrfs_get64(it->data),
		.type = btrfs_get64(it->data + CHUNK_TYPE), .transid = it->transid,
		.first = st->nr_s, .n = n,
	};
	c->stripe_size = stripe_size(c->len, c->type, n, sub);
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *q = it->data + CHUNK_STRIPES + (size_t)i * CHUNK_STRIPE_SIZE;

		st->s[st->nr_s++] = (struct stripe_rec){
			.devid = btrfs_get64(q), .offset = btrfs_get64(q + 8),
		};
	}
	return 0;
}

static int dev_item(struct chunk_state *st, const struct btrfs_tree_item *it)
{
	if (it->len < DEV_ITEM_SIZE)
		return 0;
	if (btrfs_grow((void **)&st->d, &st->alloc_d, st->nr_d + 1, sizeof(*st->d)) < 0)
		return -ENOMEM;
	st->d[st->nr_d++] = (struct dev_rec){
		.devid = it->key.offset, .transid = it->transid,
		.total_bytes = btrfs_get64(it->data + DEV_ITEM_TOTAL_BYTES),
		.bytes_used = btrfs_get64(it->data + DEV_ITEM_BYTES_USED),
	};
	return 0;
}

static int read_chunk_tree(struct pass *p, struct chunk_state *st)
{
	static const struct btrfs_tkey lo = { 0, 0, 0 };
	static const struct btrfs_tkey hi = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, p->fd, BTRFS_CHUNK_TREE_OBJECTID, lo, hi);

	while (ret == 0 && (ret = btrfs_tree_next(&r, &it)) > 0) {
		if (it.key.type == BTRFS_CHUNK_ITEM_KEY)
			ret = chunk_item(st, &it);
		else if (it.key.type == BTRFS_DEV_ITEM_KEY &&
			 it.key.objectid == BTRFS_DEV_ITEMS_OBJECTID)
			ret = dev_item(st, &it);
		else
			ret = 0;
	}
	p->chunk_items += r.items;
	p->calls += r.calls;
	btrfs_tree_close(&r);
	return ret;
}

/* The chunk starting at logical (chunks come sorted); NULL if none. */
static struct chunk_rec *chunk_at(const struct chunk_state *st, uint64_t logical)
{
	size_t lo = 0, hi = st->nr_c;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st->c[mid].start < logical)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < st->nr_c && st->c[lo].start == logical ? &st->c[lo] : NULL;
}

static struct dev_rec *dev_of(const struct chunk_state *st, uint64_t devid)
{
	for (size_t i = 0; i < st->nr_d; i++)
		if (st->d[i].devid == devid)
			return &st->d[i];
	return NULL;
}

/* A DEV_EXTENT: a stripe of the chunk it names, of that chunk's stripe size. */
static void dev_extent(struct pass *p, struct chunk_state *st, const struct btrfs_tree_item *it)
{
	uint64_t devid = it->key.objectid, phys = it->key.offset;
	uint64_t logical = btrfs_get64(it->data + DEV_EXTENT_CHUNK_OFFSET);
	uint64_t len = btrfs_get64(it->data + DEV_EXTENT_LENGTH);
	struct chunk_rec *c = chunk_at(st, logical);
	struct dev_rec *d = dev_of(st, devid);
	struct stripe_rec *s = NULL;

	if (d) {
		d->sum += len;
		d->transid = it->transid > d->transid ? it->transid : d->transid;
		if (phys > d->total_bytes || len > d->total_bytes - phys)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_DEV_EXTENT_PAST_END, .logical = logical, .devid = devid,
				.physical = phys, .a = len, .b = d->total_bytes,
				.transid = it->transid > d->transid ? it->transid : d->transid,
			});
	}
	for (size_t i = 0; c && i < c->n && !s; i++)
		if (st->s[c->first + i].devid == devid && st->s[c->first + i].offset == phys)
			s = &st->s[c->first + i];
	if (s)
		s->found = true;
	if (!s || len != c->stripe_size)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = s ? F_DEV_EXTENT_LEN : F_DEV_EXTENT_ORPHAN, .logical = logical,
			.len = c ? c->len : 0, .devid = devid, .physical = phys, .a = len,
			.b = c ? c->stripe_size : 0,
			.transid = c && c->transid > it->transid ? c->transid : it->transid,
		});
}

static int read_dev_tree(struct pass *p, struct chunk_state *st)
{
	static const struct btrfs_tkey lo = { 0, BTRFS_DEV_EXTENT_KEY, 0 };
	static const struct btrfs_tkey hi = { UINT64_MAX, BTRFS_DEV_EXTENT_KEY, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, p->fd, BTRFS_DEV_TREE_OBJECTID, lo, hi);

	btrfs_pass_fallback(p, &r);
	while (ret == 0 && (ret = btrfs_tree_next(&r, &it)) > 0) {
		ret = 0;
		if (it.key.type == BTRFS_DEV_EXTENT_KEY && it.len >= DEV_EXTENT_SIZE)
			dev_extent(p, st, &it);
	}
	p->dev_items += r.items;
	p->calls += r.calls;
	btrfs_tree_close(&r);
	return ret;
}

/* Stripes without their DEV_EXTENT; devices whose bytes_used is not their extents'. */
static void check_stripes_and_devices(struct pass *p, const struct chunk_state *st)
{
	for (size_t i = 0; i < st->nr_c; i++) {
		const struct chunk_rec *c = &st->c[i];

		for (size_t j = 0; j < c->n; j++) {
			const struct stripe_rec *s = &st->s[c->first + j];

			if (!s->found)
				btrfs_add_finding(p, &(struct tfinding){
					.kind = F_STRIPE_NO_DEV_EXTENT, .logical = c->start,
					.len = c->len, .devid = s->devid, .physical = s->offset,
					.b = c->stripe_size, .transid = c->transid,
				});
		}
	}
	for (size_t i = 0; i < st->nr_d; i++) {
		const struct dev_rec *d = &st->d[i];

		if (d->bytes_used != d->sum)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_DEV_BYTES_USED, .devid = d->devid, .a = d->bytes_used,
				.b = d->sum, .transid = d->transid,
			});
	}
}

/* Chunks and block groups, both sorted by logical start, merged. */
static void check_block_groups(struct pass *p, const struct chunk_state *st)
{
	size_t i = 0, j = 0;

	while (i < st->nr_c || j < p->nr_bg) {
		const struct chunk_rec *c = i < st->nr_c ? &st->c[i] : NULL;
		const struct bgroup *g = j < p->nr_bg ? &p->bg[j] : NULL;

		if (c && (!g || c->start < g->start)) {
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_CHUNK_NO_BG, .logical = c->start, .len = c->len,
				.a = c->type, .transid = c->transid,
			});
			i++;
			continue;
		}
		if (!c || g->start < c->start) {
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_BG_NO_CHUNK, .logical = g->start, .len = g->len,
				.a = g->flags, .transid = g->transid,
			});
			j++;
			continue;
		}
		if (c->len != g->len || (c->type & BG_KIND_MASK) != (g->flags & BG_KIND_MASK))
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_CHUNK_BG_DIFF, .logical = c->start, .len = c->len,
				.a = c->type, .b = g->flags, .physical = g->len,
				.transid = c->transid > g->transid ? c->transid : g->transid,
			});
		i++;
		j++;
	}
}

int btrfs_check_chunks(struct pass *p)
{
	struct chunk_state st = { 0 };
	int ret = read_chunk_tree(p, &st);

	if (ret == 0)
		ret = read_dev_tree(p, &st);
	if (ret == 0) {
		check_stripes_and_devices(p, &st);
		/* a rescue= mount without the extent tree: no block groups to compare */
		if (!(p->unloaded & UNLOADED_EXTENT))
			check_block_groups(p, &st);
	}
	free(st.c);
	free(st.s);
	free(st.d);
	return ret;
}
