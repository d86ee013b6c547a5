/*
 * btrfs_fst: the free space tree against the used extents (btrfs.free_space_tree).
 *
 * A third reader streams the free space tree alongside the extent tree:
 * btrfs_check.c hands every used extent (data, tree block) over in logical
 * order, the free ranges (FREE_SPACE_EXTENT, or a FREE_SPACE_BITMAP's
 * sectors) are read up to its end and kept while they reach it, and none
 * may call its bytes free.  Each FREE_SPACE_INFO's extent count must be the
 * number of free ranges after it (a run of free sectors across two bitmaps
 * is one).  No FREE_SPACE_INFO may lie past the last block group
 * (btrfs_fst_check_groups()).  Memory: the free ranges that reach the
 * current extent, 24 bytes per FREE_SPACE_INFO (one per block group).
 */
#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>
#include <string.h>

#include "backends/btrfs/btrfs_check_int.h"

static bool bit_set(const unsigned char *bm, uint64_t i)
{
	return bm[i / 8] & (1u << (i % 8));
}

/* The free ranges counted since the last FREE_SPACE_INFO against its count. */
static void fst_info_done(struct pass *p)
{
	if (p->in_info && p->counted != p->info_count)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_FST_COUNT, .logical = p->info_start, .len = p->info_len,
			.a = p->info_count, .b = p->counted, .transid = p->info_transid,
		});
	p->in_info = false;
}

/* A bitmap's runs of free sectors; one continuing the previous bitmap is not new. */
static void fst_count_runs(struct pass *p, const struct fst_range *r)
{
	uint64_t bits = (r->end - r->start) / p->sectorsize;
	bool prev = p->run_end == r->start;

	for (uint64_t i = 0; i < bits; i++) {
		bool cur = bit_set(r->bitmap, i);

		if (cur && !prev)
			p->counted++;
		prev = cur;
	}
	p->run_end = prev ? r->end : 0;
}

static int fst_item(struct pass *p, const struct btrfs_tree_item *it)
{
	struct fst_range r = { .start = it->key.objectid, .transid = it->transid,
			       .end = it->key.objectid + it->key.offset };

	p->fsr_last = it->key.objectid;
	if (it->key.type == BTRFS_FREE_SPACE_INFO_KEY && it->len >= sizeof(struct btrfs_free_space_info)) {
		fst_info_done(p);
		if (btrfs_grow((void **)&p->fsi, &p->alloc_fsi, p->nr_fsi + 1, sizeof(*p->fsi)) < 0)
			return -ENOMEM;
		p->fsi[p->nr_fsi++] = (struct fst_info){ r.start, it->key.offset, it->transid };
		p->in_info = true;
		p->info_start = r.start;
		p->info_len = it->key.offset;
		p->info_count = btrfs_get32(it->data);
		p->info_transid = it->transid;
		p->counted = 0;
		p->run_end = 0;
		return 0;
	}
	if (it->key.type != BTRFS_FREE_SPACE_EXTENT_KEY && it->key.type != BTRFS_FREE_SPACE_BITMAP_KEY)
		return 0;
	if (p->in_info && it->transid > p->info_transid)
		p->info_transid = it->transid;
	if (it->key.type == BTRFS_FREE_SPACE_BITMAP_KEY) {
		if (it->len < (it->key.offset / p->sectorsize + 7) / 8)
			return 0;
		if (!(r.bitmap = malloc(it->len)))
			return -ENOMEM;
		memcpy(r.bitmap, it->data, it->len);
		fst_count_runs(p, &r);
	} else {
		p->counted++;
	}
	if (btrfs_grow((void **)&p->fq, &p->alloc_fq, p->nr_fq + 1, sizeof(*p->fq)) < 0) {
		free(r.bitmap);
		return -ENOMEM;
	}
	p->fq[p->nr_fq++] = r;
	return 0;
}

/* Read the free space tree up to the first item at or past logical end. */
static void fst_read_to(struct pass *p, uint64_t end)
{
	while (!p->fsr_end && !p->fsr_err && (!p->fst_items || p->fsr_last < end)) {
		struct btrfs_tree_item it;
		int ret = btrfs_tree_next(&p->fsr, &it);

		if (ret == 0) {
			p->fsr_end = true;
			break;
		}
		if (ret > 0) {
			p->fst_items++;
			ret = fst_item(p, &it);
		}
		if (ret < 0)
			p->fsr_err = ret;
	}
}

/* Does r call any byte of [a, b) free? */
static bool fst_overlaps(const struct pass *p, const struct fst_range *r, uint64_t a, uint64_t b)
{
	uint64_t lo = a > r->start ? a : r->start, hi = b < r->end ? b : r->end;

	if (lo >= hi)
		return false;
	if (!r->bitmap)
		return true;
	for (uint64_t x = lo; x < hi; x += p->sectorsize)
		if (bit_set(r->bitmap, (x - r->start) / p->sectorsize))
			return true;
	return false;
}

/* A used extent [a, b), in logical order: no free range may cover it. */
void btrfs_fst_used(struct pass *p, uint64_t a, uint64_t b, uint64_t transid)
{
	size_t keep = 0;

	if (!p->fst)
		btrfs_v1_used(p, a, b, transid);
	if (!p->fst || p->fsr_err)
		return;
	fst_read_to(p, b);
	for (size_t i = 0; i < p->nr_fq; i++) {
		if (p->fq[i].end <= a) {
			free(p->fq[i].bitmap);
			continue;
		}
		p->fq[keep++] = p->fq[i];
	}
	p->nr_fq = keep;
	for (size_t i = 0; i < p->nr_fq; i++) {
		const struct fst_range *r = &p->fq[i];

		if (!fst_overlaps(p, r, a, b))
			continue;
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_FST_USED_FREE, .logical = a, .len = b - a,
			.a = r->start, .b = r->end,
			.transid = r->transid > transid ? r->transid : transid,
		});
		break;
	}
}

/* After the extent tree: the rest of the free space tree, for its counts. */
void btrfs_fst_finish(struct pass *p)
{
	if (!p->fst || p->fsr_err)
		return;
	fst_read_to(p, UINT64_MAX);
	fst_info_done(p);
	for (size_t i = 0; i < p->nr_fq; i++)
		free(p->fq[i].bitmap);
	p->nr_fq = 0;
}

/*
 * A FREE_SPACE_INFO past the end of the last block group describes one
 * that does not exist (`btrfs check`: "a space info key for a block group
 * that doesn't exist").  One below it that matches no block group is not
 * reported: mkfs.btrfs (up to 6.2 at least) leaves the infos of the
 * temporary chunks it removes, which the kernel never reads -- every
 * filesystem it made has two.
 */
void btrfs_fst_check_groups(struct pass *p)
{
	uint64_t end = 0;

	if (!p->fst || p->fsr_err)
		return;
	for (size_t i = 0; i < p->nr_bg; i++)
		if (p->bg[i].start + p->bg[i].len > end)
			end = p->bg[i].start + p->bg[i].len;
	for (size_t i = 0; i < p->nr_fsi; i++) {
		const struct fst_info *fi = &p->fsi[i];

		if (p->nr_bg && fi->start >= end)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_FST_NO_BG, .logical = fi->start, .len = fi->len,
				.a = end, .transid = fi->transid,
			});
	}
}
