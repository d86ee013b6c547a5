/*
 * btrfs_csum: file data against the csum tree (btrfs.csum).
 *
 * A second reader streams the csum tree (EXTENT_CSUM items: the checksums
 * of the sectors from key.offset on) alongside the extent tree; for each
 * data extent the items that reach it are kept, and the disk bytes each
 * file extent of a checksummed file uses (all of a compressed extent) must
 * be covered, those of a nodatasum file must not be.
 */
#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>

#include "backends/btrfs/btrfs_check_int.h"

/* Keep the csum items that reach [start, end): drop older, read ahead. */
static void csum_advance(struct pass *p, uint64_t start, uint64_t end)
{
	size_t keep = 0;

	for (size_t i = 0; i < p->nr_cs; i++)
		if (p->cs[i].end > start)
			p->cs[keep++] = p->cs[i];
	p->nr_cs = keep;
	while (!p->csr_end && !p->csr_err && (!p->nr_cs || p->cs[p->nr_cs - 1].start < end)) {
		struct btrfs_tree_item it;
		int ret = btrfs_tree_next(&p->csr, &it);

		if (ret <= 0) {
			p->csr_end = true;
			p->csr_err = ret;
			break;
		}
		if (it.key.type != BTRFS_EXTENT_CSUM_KEY || !p->csum_size)
			continue;
		if (btrfs_grow((void **)&p->cs, &p->alloc_cs, p->nr_cs + 1, sizeof(*p->cs)) < 0) {
			p->csr_err = -ENOMEM;
			break;
		}
		p->cs[p->nr_cs++] = (struct csum_iv){
			.start = it.key.offset, .transid = it.transid,
			.end = it.key.offset + (uint64_t)(it.len / p->csum_size) * p->sectorsize,
		};
	}
}

/* The first byte of [start, end) that no csum item covers (end: none). */
static uint64_t csum_gap(const struct pass *p, uint64_t start, uint64_t end, uint64_t *transid)
{
	uint64_t pos = start;

	for (size_t i = 0; i < p->nr_cs && pos < end; i++) {
		if (p->cs[i].end <= pos)
			continue;
		if (p->cs[i].start > pos)
			return pos;
		pos = p->cs[i].end;
		*transid = p->cs[i].transid > *transid ? p->cs[i].transid : *transid;
	}
	return pos < end ? pos : end;
}

/* The first csum item inside [start, end); NULL if none. */
static const struct csum_iv *csum_any(const struct pass *p, uint64_t start, uint64_t end)
{
	for (size_t i = 0; i < p->nr_cs; i++)
		if (p->cs[i].start < end && p->cs[i].end > start)
			return &p->cs[i];
	return NULL;
}

void btrfs_check_csums(struct pass *p, size_t from, size_t to)
{
	csum_advance(p, p->d_bytenr, p->d_bytenr + p->d_len);
	if (p->csr_err)
		return;
	for (size_t i = from; i < to; i++) {
		const struct fe_rec *e = &p->fe[i];
		uint64_t end = e->cs_start + e->cs_len, transid = e->transid, gap;
		const struct csum_iv *iv;

		if (e->want_csum > 0 && (gap = csum_gap(p, e->cs_start, end, &transid)) < end)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_CSUM_MISSING, .root = e->root, .ino = e->ino,
				.file_off = e->file_off, .logical = gap, .len = e->cs_len,
				.a = e->cs_start, .transid = transid,
			});
		else if (e->want_csum < 0 && (iv = csum_any(p, e->cs_start, end)))
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_CSUM_UNEXPECTED, .root = e->root, .ino = e->ino,
				.file_off = e->file_off, .logical = iv->start, .len = e->cs_len,
				.a = e->cs_start,
				.transid = iv->transid > transid ? iv->transid : transid,
			});
	}
}
