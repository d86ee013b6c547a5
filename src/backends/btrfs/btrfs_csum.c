/*
 * btrfs_csum: file data against the csum tree (btrfs.csum).
 *
 * A second reader streams the csum tree (EXTENT_CSUM items: the checksums
 * of the sectors from key.offset on) alongside the extent tree; for each
 * data extent the items that reach it are kept, and the disk bytes each
 * file extent of a checksummed file uses (all of a compressed extent) must
 * be covered, those of a nodatasum file must not be -- but for a compressed
 * extent: compressed data is always checksummed, and a compressed extent
 * without checksums in a nodatasum file is damage (`btrfs check`: the
 * kernel cannot tell its bad bytes from good ones before decompressing
 * them; kernels before 5.3 could write one).
 *
 * The other way round, checksums must belong to data: csum bytes between
 * one data extent's end and the next one's start cover no extent at all
 * (`btrfs check`: "there are no extents for csum range").  Data extents
 * come in logical order, so the gap before each one is known when it
 * arrives; csum items wholly inside a gap are judged as they are read and
 * not kept, so memory stays the items that reach the current extent.
 * Adjacent orphan pieces are reported as one range.  Items that overlap
 * the one before are reported as they are read.
 */
#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>

#include "backends/btrfs/btrfs_check_int.h"

/* Report the orphan csum range kept so far, if any. */
static void orphan_flush(struct pass *p)
{
	if (p->orphan_end > p->orphan_start)
		/*
		 * The stamp is the csum leaves' generation: a write puts its csum
		 * items in before its extent item (a delayed ref, run later), and
		 * under churn the same range is freed and written again, so the
		 * range alone repeats while the items are new ones.
		 */
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_CSUM_ORPHAN, .logical = p->orphan_start,
			.len = p->orphan_end - p->orphan_start, .transid = p->orphan_transid,
			.stamp = p->orphan_transid,
		});
	p->orphan_start = p->orphan_end = 0;
}

/* The part of a csum item in the gap [p->cs_done, before) covers no data extent. */
static void orphan_piece(struct pass *p, const struct csum_iv *c, uint64_t before)
{
	uint64_t a = c->start > p->cs_done ? c->start : p->cs_done;
	uint64_t b = c->end < before ? c->end : before;

	if (a >= b)
		return;
	if (p->orphan_end != a)
		orphan_flush(p);
	if (p->orphan_end <= p->orphan_start) {
		p->orphan_start = a;
		p->orphan_transid = 0;
	}
	p->orphan_end = b;
	if (c->transid > p->orphan_transid)
		p->orphan_transid = c->transid;
}

/*
 * A csum item that begins before the one before it ends: two checksums of
 * the same sectors (`btrfs check`: "csum overlap"; the kernel merges and
 * splits csum items so that never happens).
 */
static void csum_overlap(struct pass *p, const struct csum_iv *c)
{
	if (c->start < p->cs_last_end)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_CSUM_OVERLAP, .logical = c->start, .len = c->end - c->start,
			.a = p->cs_last_end, .transid = c->transid, .stamp = c->transid,
		});
	if (c->end > p->cs_last_end)
		p->cs_last_end = c->end;
}

/*
 * Keep the csum items that reach [start, end): drop older, read ahead.
 * Bytes of csum items below start and above p->cs_done (the end of the
 * previous data extent) are orphans.
 */
static void csum_advance(struct pass *p, uint64_t start, uint64_t end)
{
	size_t keep = 0;

	for (size_t i = 0; i < p->nr_cs; i++) {
		orphan_piece(p, &p->cs[i], start);
		if (p->cs[i].end > start)
			p->cs[keep++] = p->cs[i];
	}
	p->nr_cs = keep;
	while (!p->csr_end && !p->csr_err && (!p->nr_cs || p->cs[p->nr_cs - 1].start < end)) {
		struct btrfs_tree_item it;
		struct csum_iv c;
		int ret = btrfs_tree_next(&p->csr, &it);

		if (ret <= 0) {
			p->csr_end = true;
			p->csr_err = ret;
			break;
		}
		if (it.key.type != BTRFS_EXTENT_CSUM_KEY || !p->csum_size)
			continue;
		c = (struct csum_iv){
			.start = it.key.offset, .transid = it.transid,
			.end = it.key.offset + (uint64_t)(it.len / p->csum_size) * p->sectorsize,
		};
		csum_overlap(p, &c);
		orphan_piece(p, &c, start);
		if (c.end <= start)
			continue;	/* wholly before the extent: judged, not kept */
		if (btrfs_grow((void **)&p->cs, &p->alloc_cs, p->nr_cs + 1, sizeof(*p->cs)) < 0) {
			p->csr_err = -ENOMEM;
			break;
		}
		p->cs[p->nr_cs++] = c;
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
	if (p->d_bytenr + p->d_len > p->cs_done)
		p->cs_done = p->d_bytenr + p->d_len;
	if (p->csr_err)
		return;
	for (size_t i = from; i < to; i++) {
		const struct fe_rec *e = &p->fe[i];
		uint64_t end = e->cs_start + e->cs_len, transid = e->transid, gap;
		const struct csum_iv *iv;

		if (e->want_csum > 0 && (gap = csum_gap(p, e->cs_start, end, &transid)) < end)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = e->want_csum == WANT_CSUM_COMPRESSED ? F_CSUM_COMPRESSED
									     : F_CSUM_MISSING,
				.root = e->root, .ino = e->ino,
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

void btrfs_csum_finish(struct pass *p)
{
	csum_advance(p, UINT64_MAX, UINT64_MAX);
	orphan_flush(p);
}
