/*
 * btrfs_roots: subvolume references in the root tree (btrfs.root_ref).
 *
 * ROOT_REF (parent, child) and ROOT_BACKREF (child, parent) items are kept
 * as the root tree streams by (a few per subvolume); at the end each must
 * have its twin with the same directory, index and name, the parent's
 * DIR_INDEX must name the subvolume by that name (one small TREE_SEARCH
 * per subvolume), and every live subvolume must have a ROOT_BACKREF.
 */
#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>
#include <string.h>

#include "backends/btrfs/btrfs_check_int.h"

int btrfs_root_ref_item(struct pass *p, const struct btrfs_tree_item *it)
{
	bool back = it->key.type == BTRFS_ROOT_BACKREF_KEY;
	struct root_ref *r;
	uint16_t n;

	if (it->len < sizeof(struct btrfs_root_ref))
		return 0;
	n = (uint16_t)(it->data[16] | it->data[17] << 8);
	if (sizeof(struct btrfs_root_ref) + n > it->len)
		n = (uint16_t)(it->len - sizeof(struct btrfs_root_ref));
	if (btrfs_grow((void **)&p->rrefs, &p->alloc_rrefs, p->nr_rrefs + 1, sizeof(*r)) < 0)
		return -ENOMEM;
	r = &p->rrefs[p->nr_rrefs];
	*r = (struct root_ref){
		.back = back, .transid = it->transid,
		.parent = back ? it->key.offset : it->key.objectid,
		.child = back ? it->key.objectid : it->key.offset,
		.dirid = btrfs_get64(it->data), .seq = btrfs_get64(it->data + 8),
		.name = strndup((const char *)it->data + sizeof(struct btrfs_root_ref), n),
	};
	if (!r->name)
		return -ENOMEM;
	p->nr_rrefs++;
	return 0;
}

static bool same_ref(const struct root_ref *a, const struct root_ref *b)
{
	return a->parent == b->parent && a->child == b->child && a->dirid == b->dirid &&
	       a->seq == b->seq && !strcmp(a->name, b->name);
}

/*
 * The parent's DIR_INDEX (dirid, seq) must name the child subvolume
 * (location: its ROOT_ITEM) by the ref's name.  True if so; *transid gets
 * the leaf's generation.
 */
static bool dir_entry_ok(struct pass *p, const struct root_ref *r, uint64_t *transid)
{
	struct btrfs_tkey k = { r->dirid, BTRFS_DIR_INDEX_KEY, r->seq };
	struct btrfs_tree_reader rd;
	struct btrfs_tree_item it;
	bool ok = false;

	if (btrfs_tree_open(&rd, p->fd, r->parent, k, k) < 0)
		return true;	/* no memory: no finding */
	if (btrfs_tree_next(&rd, &it) > 0 && it.len >= sizeof(struct btrfs_dir_item)) {
		size_t n = (size_t)(it.data[27] | it.data[28] << 8);

		*transid = it.transid;
		ok = btrfs_get64(it.data) == r->child && it.data[8] == BTRFS_ROOT_ITEM_KEY &&
		     sizeof(struct btrfs_dir_item) + n <= it.len && n == strlen(r->name) &&
		     !memcmp(it.data + sizeof(struct btrfs_dir_item), r->name, n);
	}
	p->calls += rd.calls;
	btrfs_tree_close(&rd);
	return ok;
}

void btrfs_check_root_refs(struct pass *p)
{
	for (size_t i = 0; i < p->nr_rrefs; i++) {
		const struct root_ref *r = &p->rrefs[i];
		uint64_t transid = r->transid;
		bool paired = false;

		for (size_t j = 0; j < p->nr_rrefs && !paired; j++)
			paired = p->rrefs[j].back != r->back && same_ref(r, &p->rrefs[j]);
		if (!paired)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_ROOT_REF_ALONE, .root = r->parent, .ino = r->dirid,
				.logical = r->child, .a = r->back, .b = r->seq, .name = r->name,
				.transid = r->transid,
			});
		if (!r->back && !dir_entry_ok(p, r, &transid))
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_ROOT_REF_DIR, .root = r->parent, .ino = r->dirid,
				.logical = r->child, .b = r->seq, .name = r->name,
				.transid = transid > r->transid ? transid : r->transid,
			});
	}
	for (size_t i = 0; i < p->nr_roots; i++) {
		const struct fs_root *fr = &p->roots[i];
		bool named = false;

		if (fr->dead || fr->id < BTRFS_FIRST_FREE_OBJECTID ||
		    fr->id > BTRFS_LAST_FREE_OBJECTID)
			continue;
		for (size_t j = 0; j < p->nr_rrefs && !named; j++)
			named = p->rrefs[j].back && p->rrefs[j].child == fr->id;
		if (!named)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_ROOT_UNREFERENCED, .logical = fr->id, .transid = fr->transid,
			});
	}
}
