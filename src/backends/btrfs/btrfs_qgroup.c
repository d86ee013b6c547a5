/*
 * btrfs_qgroup: each qgroup's referenced and exclusive bytes against what
 * the extent tree says (btrfs.qgroup), as `btrfs check --qgroup-report`
 * and the kernel count them, at every level.
 *
 * Only when quotas are on (the quota tree's QGROUP_STATUS has the ON flag)
 * and the kernel trusts its numbers: no rescan running (RESCAN), not
 * marked inconsistent (INCONSISTENT: the kernel says so itself and wants a
 * rescan), not simple quotas (SIMPLE_MODE: owner references, another
 * accounting), and no subvolume being dropped (the kernel's accounting of
 * a half-dropped tree is not the extents').
 *
 * Alongside the extent tree, every extent (data, and tree blocks) is kept
 * with its back references: a tree or data reference names its subvolume,
 * a shared one the parent tree block, whose own references lead on up.
 * After the extent tree, each extent's set of subvolumes (fs trees only:
 * relocation trees do not count) is resolved, tree blocks' sets memoized.
 *
 * The quota tree's QGROUP_RELATION items (member, RELATION, parent), and
 * the reverse, make the qgroups above level 0 (a qgroup of qgroups, 1/100
 * over 0/257 and 0/258, 2/1 over 1/100): each level-0 qgroup's ancestors
 * (itself, its parents, theirs...) are gathered once.  An extent adds its
 * bytes (a tree block: the node size) to the referenced bytes of every
 * qgroup some subvolume of its set reaches, once whatever the number of
 * ways, and to the exclusive bytes of those that every subvolume of the
 * set reaches.  A qgroup that is its own ancestor is reported, its
 * figures not compared: read as the kernel reads relation items (the
 * lower id the member), only an item relating a qgroup to itself makes
 * one, which the kernel never writes; the walk enters each qgroup once
 * whatever the items say.  Not checked: the compressed counters, limits.
 *
 * Memory: 32 bytes per extent and 16 per back reference, for the whole
 * extent tree, plus the memoized sets of tree blocks; 72 bytes per qgroup,
 * 16 per relation and 8 per (level-0 qgroup, ancestor) pair -- only when
 * quotas are checked.
 */
#include <errno.h>
#include <stddef.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>
#include <string.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "lib/sorted.h"

/* btrfs_qgroup_status_item: version, generation, flags, rescan. */
#define QSTATUS_FLAGS 16
#define QSTATUS_SIZE 32
/* Simple quotas (6.7): not in older uapi headers. */
#define QSTATUS_SIMPLE_MODE (1ULL << 3)
/* btrfs_qgroup_info_item: generation, rfer, rfer_cmpr, excl, excl_cmpr. */
#define QINFO_RFER 8
#define QINFO_EXCL 24
#define QINFO_SIZE 40
/* A chain of shared tree block references no longer than a tree is high (BTRFS_MAX_LEVEL 8). */
#define MAX_REF_DEPTH 9
/* Inline reference sizes: a type byte and its payload. */
#define IREF_DATA_SIZE (1 + sizeof(struct btrfs_extent_data_ref))
#define IREF_SHARED_DATA_SIZE (1 + 8 + 4)
#define IREF_OFFSET_SIZE (1 + 8)
/* A tree block's EXTENT_ITEM (non-skinny) holds a btrfs_tree_block_info first. */
#define TREE_BLOCK_INFO_SIZE 18

struct qg_ref {
	uint64_t id;		/* a subvolume, or (parent) a tree block */
	bool parent;
};

struct qg_ext {
	uint64_t bytenr, bytes;
	size_t first_ref, nr_refs;
	bool tree;
	int state;		/* tree blocks: 0 not resolved, 1 resolving, 2 done */
	size_t first_root, nr_roots;	/* state 2: its set in the root pool */
};

struct qg_info {
	uint64_t id, rfer, excl, transid;
	uint64_t found_rfer, found_excl;
	size_t first_anc, nr_anc;	/* level 0: its ancestors in the pool, itself first */
	uint64_t mark;			/* the extent being counted (account_one()) */
	size_t nr_reach;		/* how many of its subvolumes reach it */
	bool cycle;			/* its own ancestor */
};

/* A QGROUP_RELATION item as (member, parent): the member's id is the lower. */
struct qg_rel {
	uint64_t child, parent;
};

struct qgroups {
	struct qg_ext *ext;
	size_t nr_ext, alloc_ext;
	struct qg_ref *refs;
	size_t nr_refs, alloc_refs;
	uint64_t *pool;		/* memoized subvolume sets, sorted, one after another */
	size_t nr_pool, alloc_pool;
	struct qg_info *info;		/* sorted by id (the quota tree's order) */
	size_t nr_info, alloc_info;
	struct qg_rel *rel;		/* sorted by member (the quota tree's order) */
	size_t nr_rel, alloc_rel;
	size_t *anc;			/* the level-0 qgroups' ancestors, indexes into info */
	size_t nr_anc, alloc_anc;
	uint64_t marks;			/* account_one()'s counter */
	uint64_t status_transid;
	int err;		/* -ENOMEM: the check is dropped */
};

static bool counted_root(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID ||
	       (id >= BTRFS_FIRST_FREE_OBJECTID && id <= BTRFS_LAST_FREE_OBJECTID);
}

static int relation_item(struct qgroups *q, const struct btrfs_tree_item *it)
{
	/*
	 * Each relation is stored twice, (member, parent) and (parent,
	 * member); as the kernel reads them, the lower id is the member (its
	 * level is the lower), so that copy is enough.  Equal ids: a qgroup
	 * its own member, a cycle (ancestors() finds it).
	 */
	if (it->key.objectid > it->key.offset)
		return 0;
	if (btrfs_grow((void **)&q->rel, &q->alloc_rel, q->nr_rel + 1, sizeof(*q->rel)) < 0)
		return -ENOMEM;
	q->rel[q->nr_rel++] = (struct qg_rel){ it->key.objectid, it->key.offset };
	return 0;
}

static int quota_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	struct qgroups *q = p->qg;

	(void)tree;
	if (it->key.type == BTRFS_QGROUP_STATUS_KEY && it->len >= QSTATUS_SIZE) {
		uint64_t flags = btrfs_get64(it->data + QSTATUS_FLAGS);

		p->qg_flags = flags;
		q->status_transid = it->transid;
		return 0;
	}
	if (it->key.type == BTRFS_QGROUP_RELATION_KEY)
		return relation_item(q, it);
	if (it->key.type != BTRFS_QGROUP_INFO_KEY || it->len < QINFO_SIZE)
		return 0;
	if (btrfs_grow((void **)&q->info, &q->alloc_info, q->nr_info + 1, sizeof(*q->info)) < 0)
		return -ENOMEM;
	q->info[q->nr_info++] = (struct qg_info){
		.id = it->key.offset, .transid = it->transid,
		.rfer = btrfs_get64(it->data + QINFO_RFER),
		.excl = btrfs_get64(it->data + QINFO_EXCL),
	};
	return 0;
}

int btrfs_qgroup_open(struct pass *p)
{
	static const struct btrfs_tkey lo = { 0, 0, 0 };
	static const struct btrfs_tkey hi = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	uint64_t flags;
	int ret;

	if (!(p->qg = calloc(1, sizeof(*p->qg))))
		return -ENOMEM;
	ret = btrfs_read_tree(p, BTRFS_QUOTA_TREE_OBJECTID, lo, hi, quota_item);
	flags = p->qg_flags;
	p->qg_state = ret == -ENOENT || !(flags & BTRFS_QGROUP_STATUS_FLAG_ON) ? QG_OFF
		    : flags & BTRFS_QGROUP_STATUS_FLAG_RESCAN ? QG_RESCAN
		    : flags & BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT ? QG_INCONSISTENT
		    : flags & QSTATUS_SIMPLE_MODE ? QG_SIMPLE : QG_CHECKED;
	for (size_t i = 0; i < p->nr_roots && p->qg_state == QG_CHECKED; i++)
		if (p->roots[i].dead)
			p->qg_state = QG_DROPPING;
	if (ret == -ENOENT)
		ret = 0;
	if (ret < 0 || p->qg_state != QG_CHECKED)
		btrfs_qgroup_release(p);
	return ret;
}

static int add_ref(struct qgroups *q, uint64_t id, bool parent)
{
	if (btrfs_grow((void **)&q->refs, &q->alloc_refs, q->nr_refs + 1, sizeof(*q->refs)) < 0)
		return -ENOMEM;
	q->refs[q->nr_refs++] = (struct qg_ref){ id, parent };
	if (q->nr_ext)
		q->ext[q->nr_ext - 1].nr_refs++;
	return 0;
}

static int add_extent(struct qgroups *q, uint64_t bytenr, uint64_t bytes, bool tree)
{
	if (btrfs_grow((void **)&q->ext, &q->alloc_ext, q->nr_ext + 1, sizeof(*q->ext)) < 0)
		return -ENOMEM;
	q->ext[q->nr_ext++] = (struct qg_ext){
		.bytenr = bytenr, .bytes = bytes, .tree = tree, .first_ref = q->nr_refs,
	};
	return 0;
}

/* The inline references from off on: the subvolumes and parents they name. */
static int inline_refs(struct qgroups *q, const struct btrfs_tree_item *it, size_t off)
{
	int ret = 0;

	while (off < it->len && ret == 0) {
		const unsigned char *r = it->data + off;

		if (r[0] == BTRFS_EXTENT_DATA_REF_KEY && off + IREF_DATA_SIZE <= it->len) {
			ret = add_ref(q, btrfs_get64(r + 1), false);
			off += IREF_DATA_SIZE;
		} else if (r[0] == BTRFS_SHARED_DATA_REF_KEY &&
			   off + IREF_SHARED_DATA_SIZE <= it->len) {
			ret = add_ref(q, btrfs_get64(r + 1), true);
			off += IREF_SHARED_DATA_SIZE;
		} else if ((r[0] == BTRFS_TREE_BLOCK_REF_KEY || r[0] == BTRFS_SHARED_BLOCK_REF_KEY) &&
			   off + IREF_OFFSET_SIZE <= it->len) {
			ret = add_ref(q, btrfs_get64(r + 1), r[0] == BTRFS_SHARED_BLOCK_REF_KEY);
			off += IREF_OFFSET_SIZE;
		} else {
			break;	/* unknown, or an owner reference: no subvolume named */
		}
	}
	return ret;
}

static int extent_item(struct qgroups *q, const struct btrfs_tree_item *it, uint32_t nodesize)
{
	const struct btrfs_tkey *k = &it->key;
	size_t off = sizeof(struct btrfs_extent_item);
	bool tree;
	int ret;

	if (it->len < sizeof(struct btrfs_extent_item))
		return 0;
	tree = k->type == BTRFS_METADATA_ITEM_KEY ||
	       (btrfs_get64(it->data + offsetof(struct btrfs_extent_item, flags)) &
		BTRFS_EXTENT_FLAG_TREE_BLOCK);
	if (tree && k->type == BTRFS_EXTENT_ITEM_KEY)
		off += TREE_BLOCK_INFO_SIZE;
	ret = add_extent(q, k->objectid, tree ? nodesize : k->offset, tree);
	return ret < 0 ? ret : inline_refs(q, it, off);
}

void btrfs_qgroup_extent_item(struct pass *p, const struct btrfs_tree_item *it)
{
	struct qgroups *q = p->qg;
	const struct btrfs_tkey *k = &it->key;
	bool last_is_mine;
	int ret = 0;

	if (!q || q->err)
		return;
	last_is_mine = q->nr_ext && q->ext[q->nr_ext - 1].bytenr == k->objectid;
	switch (k->type) {
	case BTRFS_EXTENT_ITEM_KEY:
	case BTRFS_METADATA_ITEM_KEY:
		ret = extent_item(q, it, p->nodesize);
		break;
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_SHARED_DATA_REF_KEY:
		if (last_is_mine)
			ret = add_ref(q, k->offset, k->type != BTRFS_TREE_BLOCK_REF_KEY);
		break;
	case BTRFS_EXTENT_DATA_REF_KEY:
		if (last_is_mine && it->len >= sizeof(struct btrfs_extent_data_ref))
			ret = add_ref(q, btrfs_get64(it->data), false);
		break;
	}
	if (ret < 0)
		q->err = ret;
}

/*
 * The first of the n elements (of size bytes, sorted by the uint64_t at
 * offset off) whose key is at least key; n if none.
 */
static size_t first_at(const void *v, size_t n, size_t size, size_t off, uint64_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;

		memcpy(&k, (const char *)v + mid * size + off, sizeof(k));
		if (k < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The tree block at bytenr among the kept extents (sorted); NULL if none. */
static struct qg_ext *tree_block(struct qgroups *q, uint64_t bytenr)
{
	size_t i = first_at(q->ext, q->nr_ext, sizeof(*q->ext), offsetof(struct qg_ext, bytenr),
			    bytenr);

	return i < q->nr_ext && q->ext[i].bytenr == bytenr && q->ext[i].tree ? &q->ext[i] : NULL;
}

/* Add id to the sorted set set[0..*n) of at most cap; false without room. */
static bool set_add(uint64_t *set, size_t *n, size_t cap, uint64_t id)
{
	size_t i = 0;

	while (i < *n && set[i] < id)
		i++;
	if (i < *n && set[i] == id)
		return true;
	if (*n == cap)
		return false;
	memmove(set + i + 1, set + i, (*n - i) * sizeof(*set));
	set[i] = id;
	(*n)++;
	return true;
}

struct root_set {
	uint64_t *v;
	size_t n, alloc;
};

static int set_put(struct root_set *s, uint64_t id)
{
	if (btrfs_grow((void **)&s->v, &s->alloc, s->n + 1, sizeof(*s->v)) < 0)
		return -ENOMEM;
	set_add(s->v, &s->n, s->alloc, id);
	return 0;
}

static int resolve_tree_block(struct qgroups *q, struct qg_ext *e, unsigned depth);

/* The subvolumes of an extent's references into s (parents resolved). */
static int collect(struct qgroups *q, const struct qg_ext *e, struct root_set *s, unsigned depth)
{
	for (size_t i = 0; i < e->nr_refs; i++) {
		const struct qg_ref *r = &q->refs[e->first_ref + i];
		struct qg_ext *parent;
		int ret;

		if (!r->parent) {
			if (counted_root(r->id) && (ret = set_put(s, r->id)) < 0)
				return ret;
			continue;
		}
		/* a parent that is no tree block, or a loop: damage the other checks see */
		if (!(parent = tree_block(q, r->id)) || depth >= MAX_REF_DEPTH)
			continue;
		if ((ret = resolve_tree_block(q, parent, depth + 1)) < 0)
			return ret;
		for (size_t j = 0; j < parent->nr_roots; j++)
			if ((ret = set_put(s, q->pool[parent->first_root + j])) < 0)
				return ret;
	}
	return 0;
}

/* A tree block's set of subvolumes, memoized in the pool. */
static int resolve_tree_block(struct qgroups *q, struct qg_ext *e, unsigned depth)
{
	struct root_set s = { 0 };
	int ret;

	if (e->state)
		return 0;	/* done, or a loop being resolved: nothing more from it */
	e->state = 1;
	ret = collect(q, e, &s, depth);
	if (ret == 0 && btrfs_grow((void **)&q->pool, &q->alloc_pool, q->nr_pool + s.n,
				   sizeof(*q->pool)) < 0)
		ret = -ENOMEM;
	if (ret == 0) {
		if (s.n)
			memcpy(q->pool + q->nr_pool, s.v, s.n * sizeof(*s.v));
		e->first_root = q->nr_pool;
		e->nr_roots = s.n;
		q->nr_pool += s.n;
	}
	e->state = 2;
	free(s.v);
	return ret;
}

static int cmp_info(const void *a, const void *b)
{
	uint64_t x = ((const struct qg_info *)a)->id, y = ((const struct qg_info *)b)->id;

	return x < y ? -1 : x > y;
}

static int cmp_rel(const void *a, const void *b)
{
	const struct qg_rel *x = a, *y = b;

	if (x->child != y->child)
		return x->child < y->child ? -1 : 1;
	return x->parent < y->parent ? -1 : x->parent > y->parent;
}

/* The index of qgroup id in q->info (sorted), or SIZE_MAX. */
static size_t info_index(const struct qgroups *q, uint64_t id)
{
	const struct qg_info key = { .id = id };
	const struct qg_info *qi = find_item(&key, q->info, q->nr_info, sizeof(*q->info),
					     cmp_info);

	return qi ? (size_t)(qi - q->info) : SIZE_MAX;
}

/* The first relation whose member is id (q->rel sorted by member). */
static size_t first_rel(const struct qgroups *q, uint64_t id)
{
	return first_at(q->rel, q->nr_rel, sizeof(*q->rel), offsetof(struct qg_rel, child), id);
}

static bool in_pool(const struct qgroups *q, size_t from, size_t idx)
{
	for (size_t k = from; k < q->nr_anc; k++)
		if (q->anc[k] == idx)
			return true;
	return false;
}

/*
 * Qgroup i's ancestors appended to the pool, itself first: the pool is the
 * queue, each qgroup entered once, so a cycle ends; i met again as a
 * parent is one.  A relation naming a qgroup without an info item adds
 * nothing (the kernel drops such a relation too).
 */
static int ancestors(struct qgroups *q, size_t i)
{
	size_t from = q->nr_anc;

	if (btrfs_grow((void **)&q->anc, &q->alloc_anc, q->nr_anc + 1, sizeof(*q->anc)) < 0)
		return -ENOMEM;
	q->anc[q->nr_anc++] = i;
	for (size_t k = from; k < q->nr_anc; k++) {
		uint64_t id = q->info[q->anc[k]].id;

		for (size_t r = first_rel(q, id); r < q->nr_rel && q->rel[r].child == id; r++) {
			size_t par = info_index(q, q->rel[r].parent);

			if (par == i)
				q->info[i].cycle = true;
			if (par == SIZE_MAX || in_pool(q, from, par))
				continue;
			if (btrfs_grow((void **)&q->anc, &q->alloc_anc, q->nr_anc + 1,
				       sizeof(*q->anc)) < 0)
				return -ENOMEM;
			q->anc[q->nr_anc++] = par;
		}
	}
	q->info[i].first_anc = from;
	q->info[i].nr_anc = q->nr_anc - from;
	return 0;
}

/*
 * Every qgroup's ancestors walked (a cycle found wherever it is); kept for
 * level 0 only, where an extent's subvolumes start counting.
 */
static int build_ancestors(struct qgroups *q)
{
	int ret;

	sort_items(q->info, q->nr_info, sizeof(*q->info), cmp_info);
	sort_items(q->rel, q->nr_rel, sizeof(*q->rel), cmp_rel);
	for (size_t i = 0; i < q->nr_info; i++) {
		size_t from = q->nr_anc;

		if ((ret = ancestors(q, i)) < 0)
			return ret;
		if (q->info[i].id >> BTRFS_QGROUP_LEVEL_SHIFT)
			q->nr_anc = from;
	}
	return 0;
}

/*
 * One extent of the subvolumes s to the qgroups they reach: first each
 * reached qgroup counts the subvolumes that reach it (marked with this
 * extent's number, so nothing is cleared between extents), then each adds
 * the bytes once -- referenced always, exclusive when all of s reach it.
 */
static void account_one(struct qgroups *q, const struct root_set *s, uint64_t bytes)
{
	uint64_t counting = ++q->marks, added = ++q->marks;

	for (size_t pass = 0; pass < 2; pass++)
		for (size_t j = 0; j < s->n; j++) {
			size_t i = info_index(q, s->v[j]);

			for (size_t k = 0; i != SIZE_MAX && k < q->info[i].nr_anc; k++) {
				struct qg_info *qi = &q->info[q->anc[q->info[i].first_anc + k]];

				if (pass == 0) {
					qi->nr_reach = qi->mark == counting ? qi->nr_reach + 1 : 1;
					qi->mark = counting;
				} else if (qi->mark == counting) {
					qi->mark = added;
					qi->found_rfer += bytes;
					qi->found_excl += qi->nr_reach == s->n ? bytes : 0;
				}
			}
		}
}

/* Every extent's bytes to the qgroups its subvolumes reach. */
static int account(struct qgroups *q)
{
	struct root_set s = { 0 };
	int ret = build_ancestors(q);

	for (size_t i = 0; i < q->nr_ext && ret == 0; i++) {
		s.n = 0;
		if ((ret = collect(q, &q->ext[i], &s, 0)) == 0)
			account_one(q, &s, q->ext[i].bytes);
	}
	free(s.v);
	return ret;
}

static void qgroup_findings(struct pass *p, const struct qg_info *qi, uint64_t transid)
{
	/* A higher-level qgroup names no subvolume: no path. */
	uint64_t ino = qi->id >> BTRFS_QGROUP_LEVEL_SHIFT ? 0 : BTRFS_FIRST_FREE_OBJECTID;

	if (qi->cycle) {
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_QGROUP_CYCLE, .root = qi->id, .transid = transid,
		});
		return;
	}
	if (qi->rfer != qi->found_rfer)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_QGROUP_RFER, .root = qi->id, .ino = ino,
			.a = qi->rfer, .b = qi->found_rfer, .transid = transid,
		});
	if (qi->excl != qi->found_excl)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_QGROUP_EXCL, .root = qi->id, .ino = ino,
			.a = qi->excl, .b = qi->found_excl, .transid = transid,
		});
}

void btrfs_qgroup_finish(struct pass *p)
{
	struct qgroups *q = p->qg;

	if (!q)
		return;
	if (!q->err)
		q->err = account(q);
	for (size_t i = 0; i < q->nr_info && !q->err; i++) {
		const struct qg_info *qi = &q->info[i];

		p->qg_nr[!!(qi->id >> BTRFS_QGROUP_LEVEL_SHIFT)]++;
		qgroup_findings(p, qi, qi->transid > q->status_transid ? qi->transid
								: q->status_transid);
	}
	if (q->err)
		p->qg_state = QG_NO_MEMORY;
	btrfs_qgroup_release(p);
}

void btrfs_qgroup_release(struct pass *p)
{
	struct qgroups *q = p->qg;

	if (!q)
		return;
	free(q->ext);
	free(q->refs);
	free(q->pool);
	free(q->info);
	free(q->rel);
	free(q->anc);
	free(q);
	p->qg = NULL;
}
