/*
 * btrfs_qgroup: each level-0 qgroup's referenced and exclusive bytes
 * against what the extent tree says (btrfs.qgroup), as `btrfs check
 * --qgroup-report` counts them.
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
 * relocation trees do not count) is resolved, tree blocks' sets memoized;
 * each extent adds its bytes (a tree block: the node size) to the
 * referenced bytes of every subvolume in its set, and to the exclusive
 * bytes of the one subvolume when it is alone.  Level-0 qgroups only:
 * higher levels (a qgroup of qgroups) are not checked, nor the compressed
 * counters, nor limits.
 *
 * Memory: 32 bytes per extent and 16 per back reference, for the whole
 * extent tree, plus the memoized sets of tree blocks -- only when quotas
 * are checked.
 */
#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>
#include <string.h>

#include "backends/btrfs/btrfs_check_int.h"

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
};

struct qgroups {
	struct qg_ext *ext;
	size_t nr_ext, alloc_ext;
	struct qg_ref *refs;
	size_t nr_refs, alloc_refs;
	uint64_t *pool;		/* memoized subvolume sets, sorted, one after another */
	size_t nr_pool, alloc_pool;
	struct qg_info *info;
	size_t nr_info, alloc_info;
	uint64_t status_transid;
	int err;		/* -ENOMEM: the check is dropped */
};

static bool counted_root(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID ||
	       (id >= BTRFS_FIRST_FREE_OBJECTID && id <= BTRFS_LAST_FREE_OBJECTID);
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
	if (it->key.type != BTRFS_QGROUP_INFO_KEY || it->len < QINFO_SIZE ||
	    it->key.offset >> BTRFS_QGROUP_LEVEL_SHIFT)
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

/* The tree block at bytenr among the kept extents (sorted); NULL if none. */
static struct qg_ext *tree_block(struct qgroups *q, uint64_t bytenr)
{
	size_t lo = 0, hi = q->nr_ext;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (q->ext[mid].bytenr < bytenr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < q->nr_ext && q->ext[lo].bytenr == bytenr && q->ext[lo].tree ? &q->ext[lo]
									      : NULL;
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

static struct qg_info *info_of(struct qgroups *q, uint64_t id)
{
	for (size_t i = 0; i < q->nr_info; i++)
		if (q->info[i].id == id)
			return &q->info[i];
	return NULL;
}

/* Every extent's bytes to its subvolumes' qgroups. */
static int account(struct qgroups *q)
{
	struct root_set s = { 0 };
	int ret = 0;

	for (size_t i = 0; i < q->nr_ext && ret == 0; i++) {
		const struct qg_ext *e = &q->ext[i];

		s.n = 0;
		if ((ret = collect(q, e, &s, 0)) < 0)
			break;
		for (size_t j = 0; j < s.n; j++) {
			struct qg_info *qi = info_of(q, s.v[j]);

			if (!qi)
				continue;
			qi->found_rfer += e->bytes;
			if (s.n == 1)
				qi->found_excl += e->bytes;
		}
	}
	free(s.v);
	return ret;
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
		uint64_t transid = qi->transid > q->status_transid ? qi->transid
								   : q->status_transid;

		if (qi->rfer != qi->found_rfer)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_QGROUP_RFER, .root = qi->id,
				.ino = BTRFS_FIRST_FREE_OBJECTID, .a = qi->rfer,
				.b = qi->found_rfer, .transid = transid,
			});
		if (qi->excl != qi->found_excl)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_QGROUP_EXCL, .root = qi->id,
				.ino = BTRFS_FIRST_FREE_OBJECTID, .a = qi->excl,
				.b = qi->found_excl, .transid = transid,
			});
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
	free(q);
	p->qg = NULL;
}
