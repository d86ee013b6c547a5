/*
 * btrfs_names: directory entries, inode references and link counts of one
 * fs tree, checked in one streaming read (see btrfs_names.h).
 *
 * An fs tree holds every item of an inode under its number, the
 * INODE_ITEM first, then its INODE_REFs / INODE_EXTREFs (its names: parent
 * directory, index, name) and, for a directory, its DIR_ITEMs (by name
 * hash) and DIR_INDEXes (by index).  So, per object, as it goes by:
 *
 *  - a directory's DIR_ITEM and DIR_INDEX entries must be the same
 *    (target, name) pairs, compared as a count and a sum of 64-bit hashes;
 *    its i_size must be the bytes of its names counted in both
 *    (btrfs.dir_item);
 *  - an inode with links has as many names as links (btrfs.inode_ref), and
 *    at least one (btrfs.orphan: no directory reaches it);
 *  - an inode with no links must be on the orphan list, whose items come
 *    last in the tree (btrfs.orphan: its space would never be freed).
 *
 * Across the tree, every DIR_INDEX naming an inode (not a subvolume) must
 * be matched by that inode's name with the same (directory, index, name),
 * and the other way round.  That is a global join; it is done as a count
 * and a hash sum of each side, which cost nothing, and only when they
 * differ is the tree read again, keeping both sides' entries, sorted and
 * compared, so that each entry without its counterpart is named
 * (btrfs.dir_item).
 */
#include "backends/btrfs/btrfs_names.h"

#include <errno.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "backends/btrfs/btrfs_trees.h"
#include "lib/sorted.h"

/* Layout of a dir item entry: location key, transid, data_len, name_len, type. */
#define DI_LOC_TYPE 8
#define DI_DATA_LEN 25
#define DI_NAME_LEN 27
#define DI_SIZE 30
/* INODE_REF entry: index u64, name_len u16; INODE_EXTREF: parent, index, name_len. */
#define IREF_SIZE 10
#define IEXTREF_SIZE 18
/* Entries named per tree when the sums differ; more are only counted. */
#define MAX_NAMED 256

/* FNV-1a over bytes, then a 64-bit finaliser (splitmix64's). */
static uint64_t hbytes(uint64_t h, const void *data, size_t n)
{
	const unsigned char *b = data;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t hfinal(uint64_t h)
{
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

static uint64_t entry_hash(uint64_t dir, uint64_t index, uint64_t ino, const void *name,
			   size_t len)
{
	uint64_t v[3] = { dir, index, ino };

	return hfinal(hbytes(hbytes(0xcbf29ce484222325ULL, v, sizeof(v)), name, len));
}

void names_begin(struct btrfs_names *n, uint64_t root)
{
	n->root = root;
	n->active = false;
	n->ent_sum = n->ref_sum = n->ent_cnt = n->ref_cnt = 0;
	n->nr_nolink = 0;
}

static int grow_vec(void **v, size_t *alloc, size_t need, size_t size)
{
	size_t n = *alloc ? *alloc * 2 : 64;
	void *nv;

	if (need <= *alloc)
		return 0;
	while (n < need)
		n *= 2;
	if (!(nv = realloc(*v, n * size)))
		return -ENOMEM;
	*v = nv;
	*alloc = n;
	return 0;
}

static void object_done(struct btrfs_names *n, struct pass *p)
{
	struct tfinding f = { .root = n->root, .ino = n->ino, .transid = n->transid,
			      .stamp = n->stamp };

	if (!n->active)
		return;
	n->active = false;
	if (S_ISDIR(n->mode) && (n->di_cnt != n->dx_cnt || n->di_sum != n->dx_sum)) {
		f.kind = F_DIR_PAIR;
		f.a = n->di_cnt;
		f.b = n->dx_cnt;
		/* which names, not only how many: the hash sums of both kinds */
		f.stamp = n->stamp ^ n->di_sum ^ (n->dx_sum << 1);
		btrfs_add_finding(p, &f);
		f.stamp = n->stamp;
	}
	if (S_ISDIR(n->mode) && n->isize != n->name_bytes) {
		f.kind = F_DIR_ISIZE;
		f.a = n->isize;
		f.b = n->name_bytes;
		btrfs_add_finding(p, &f);
	}
	if (!n->nlink) {
		/* No memory: the orphan check of this inode is skipped. */
		if (grow_vec((void **)&n->nolink, &n->alloc_nolink, n->nr_nolink + 1,
			     sizeof(*n->nolink)) == 0)
			n->nolink[n->nr_nolink++] = (struct nolink){ n->ino, n->transid, n->stamp,
								    false };
		return;
	}
	if (n->nrefs != n->nlink) {
		f.kind = n->nrefs ? F_NLINK_REFS : F_UNNAMED;
		f.a = n->nlink;
		f.b = n->nrefs;
		btrfs_add_finding(p, &f);
	}
}

/* The entries of a DIR_ITEM or DIR_INDEX item. */
static void dir_entries(struct btrfs_names *n, const struct btrfs_tree_item *it)
{
	bool index = it->key.type == BTRFS_DIR_INDEX_KEY;

	for (size_t off = 0; off + DI_SIZE <= it->len;) {
		const unsigned char *e = it->data + off;
		uint16_t nl = (uint16_t)(e[DI_NAME_LEN] | e[DI_NAME_LEN + 1] << 8);
		uint16_t dl = (uint16_t)(e[DI_DATA_LEN] | e[DI_DATA_LEN + 1] << 8);
		uint64_t target = btrfs_get64(e);
		uint64_t h;

		if (off + DI_SIZE + nl + dl > it->len)
			break;
		h = entry_hash(target, e[DI_LOC_TYPE], 0, e + DI_SIZE, nl);
		n->name_bytes += nl;
		if (index) {
			n->dx_sum += h;
			n->dx_cnt++;
			/* a subvolume's entry is matched by its ROOT_REF (btrfs.root_ref) */
			if (e[DI_LOC_TYPE] == BTRFS_INODE_ITEM_KEY) {
				n->ent_sum += entry_hash(it->key.objectid, it->key.offset, target,
							 e + DI_SIZE, nl);
				n->ent_cnt++;
			}
			break;	/* one entry per index */
		}
		n->di_sum += h;
		n->di_cnt++;
		off += DI_SIZE + nl + dl;
	}
}

/*
 * Call fn for every name of an INODE_REF or INODE_EXTREF item: (parent
 * directory, index, name).  A subvolume's top directory has the name ".."
 * in itself, which no directory entry matches: skipped.
 */
static void ref_names(const struct btrfs_tree_item *it, void *arg,
		      void (*fn)(void *, uint64_t dir, uint64_t index, const unsigned char *name,
				 uint16_t len))
{
	bool ext = it->key.type == BTRFS_INODE_EXTREF_KEY;
	size_t hdr = ext ? IEXTREF_SIZE : IREF_SIZE;

	for (size_t off = 0; off + hdr <= it->len;) {
		const unsigned char *e = it->data + off;
		uint64_t dir = ext ? btrfs_get64(e) : it->key.offset;
		uint64_t index = btrfs_get64(e + (ext ? 8 : 0));
		uint16_t nl = (uint16_t)(e[hdr - 2] | e[hdr - 1] << 8);

		if (off + hdr + nl > it->len)
			break;
		if (dir != it->key.objectid)
			fn(arg, dir, index, e + hdr, nl);
		off += hdr + nl;
	}
}

struct ref_sum_arg {
	struct btrfs_names *n;
	uint64_t ino;
};

static void add_ref_name(void *arg, uint64_t dir, uint64_t index, const unsigned char *name,
			 uint16_t len)
{
	struct ref_sum_arg *a = arg;

	a->n->ref_sum += entry_hash(dir, index, a->ino, name, len);
	a->n->ref_cnt++;
	a->n->nrefs++;
}

/* An ORPHAN_ITEM (BTRFS_ORPHAN_OBJECTID, ORPHAN_ITEM, inode) lists an inode. */
static void orphan_listed(struct btrfs_names *n, uint64_t ino)
{
	size_t lo = 0, hi = n->nr_nolink;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (n->nolink[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n->nr_nolink && n->nolink[lo].ino == ino)
		n->nolink[lo].listed = true;
}

int names_item(struct btrfs_names *n, struct pass *p, const struct btrfs_tree_item *it)
{
	const struct btrfs_tkey *k = &it->key;

	if (n->active && k->objectid != n->ino)
		object_done(n, p);
	if (k->objectid == BTRFS_ORPHAN_OBJECTID && k->type == BTRFS_ORPHAN_ITEM_KEY) {
		orphan_listed(n, k->offset);
		return 0;
	}
	/*
	 * Above the last inode number are the kernel's own inodes, which no
	 * directory names: the inode cache (BTRFS_FREE_INO_OBJECTID) of the
	 * inode_cache option, removed in 5.11, is still found on old filesystems.
	 */
	if (k->type == BTRFS_INODE_ITEM_KEY && k->objectid > BTRFS_LAST_FREE_OBJECTID)
		return 0;
	if (k->type == BTRFS_INODE_ITEM_KEY && it->len >= sizeof(struct btrfs_inode_item)) {
		n->active = true;
		n->ino = k->objectid;
		n->transid = it->transid;
		n->stamp = btrfs_inode_stamp(it->data);
		n->nlink = btrfs_get32(it->data + offsetof(struct btrfs_inode_item, nlink));
		n->mode = btrfs_get32(it->data + offsetof(struct btrfs_inode_item, mode));
		n->isize = btrfs_get64(it->data + offsetof(struct btrfs_inode_item, size));
		n->nrefs = 0;
		n->name_bytes = n->di_sum = n->dx_sum = n->di_cnt = n->dx_cnt = 0;
		return 0;
	}
	if (!n->active || k->objectid != n->ino)
		return 0;
	if (it->transid > n->transid)
		n->transid = it->transid;
	switch (k->type) {
	case BTRFS_INODE_REF_KEY:
	case BTRFS_INODE_EXTREF_KEY: {
		struct ref_sum_arg a = { n, k->objectid };

		ref_names(it, &a, add_ref_name);
		/* The top directory's ".." is its one link. */
		if (k->type == BTRFS_INODE_REF_KEY && k->offset == k->objectid)
			n->nrefs++;
		break;
	}
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
		dir_entries(n, it);
		break;
	}
	return 0;
}

/* ---- naming the entries that differ: a second read ---- */

struct erec {
	uint64_t dir, index, ino, h, transid;
	bool is_ref;
	char *name;
};

/* An inode's stamp (btrfs_inode_stamp()), as its INODE_ITEM was read. */
struct istamp {
	uint64_t ino, stamp;
};

struct collect {
	struct erec *v;
	size_t nr, alloc;
	uint64_t ino, transid;	/* of the ref item being read */
	struct istamp *st;	/* every inode's stamp, in key order: sorted */
	size_t nr_st, alloc_st;
	int err;
};

static void collect_one(struct collect *c, uint64_t dir, uint64_t index, uint64_t ino,
			const unsigned char *name, uint16_t len, bool is_ref)
{
	char *copy;

	if (c->err)
		return;
	if (grow_vec((void **)&c->v, &c->alloc, c->nr + 1, sizeof(*c->v)) < 0 ||
	    !(copy = strndup((const char *)name, len))) {
		c->err = -ENOMEM;
		return;
	}
	c->v[c->nr++] = (struct erec){
		.dir = dir, .index = index, .ino = ino, .is_ref = is_ref, .name = copy,
		.h = entry_hash(dir, index, ino, name, len), .transid = c->transid,
	};
}

static void collect_ref(void *arg, uint64_t dir, uint64_t index, const unsigned char *name,
			uint16_t len)
{
	struct collect *c = arg;

	collect_one(c, dir, index, c->ino, name, len, true);
}

static void collect_stamp(struct collect *c, const struct btrfs_tree_item *it)
{
	if (c->err || it->len < sizeof(struct btrfs_inode_item))
		return;
	if (grow_vec((void **)&c->st, &c->alloc_st, c->nr_st + 1, sizeof(*c->st)) < 0) {
		c->err = -ENOMEM;
		return;
	}
	c->st[c->nr_st++] = (struct istamp){ it->key.objectid, btrfs_inode_stamp(it->data) };
}

static void collect_item(struct collect *c, const struct btrfs_tree_item *it)
{
	c->ino = it->key.objectid;
	c->transid = it->transid;
	if (it->key.type == BTRFS_INODE_ITEM_KEY) {
		collect_stamp(c, it);
	} else if (it->key.type == BTRFS_INODE_REF_KEY || it->key.type == BTRFS_INODE_EXTREF_KEY) {
		ref_names(it, c, collect_ref);
	} else if (it->key.type == BTRFS_DIR_INDEX_KEY && it->len >= DI_SIZE &&
		   it->data[DI_LOC_TYPE] == BTRFS_INODE_ITEM_KEY) {
		uint16_t nl = (uint16_t)(it->data[DI_NAME_LEN] | it->data[DI_NAME_LEN + 1] << 8);

		if (DI_SIZE + (size_t)nl <= it->len)
			collect_one(c, it->key.objectid, it->key.offset, btrfs_get64(it->data),
				    it->data + DI_SIZE, nl, false);
	}
}

static int erec_cmp(const void *a, const void *b)
{
	const struct erec *x = a, *y = b;
	uint64_t kx[4] = { x->dir, x->index, x->ino, x->h };
	uint64_t ky[4] = { y->dir, y->index, y->ino, y->h };

	for (int i = 0; i < 4; i++)
		if (kx[i] != ky[i])
			return kx[i] < ky[i] ? -1 : 1;
	return (int)x->is_ref - (int)y->is_ref;
}

static int istamp_cmp(const void *a, const void *b)
{
	const struct istamp *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static uint64_t stamp_of(const struct collect *c, uint64_t ino)
{
	struct istamp key = { .ino = ino };
	const struct istamp *s = find_item(&key, c->st, c->nr_st, sizeof(*c->st), istamp_cmp);

	return s ? s->stamp : 0;
}

/*
 * An entry or reference without its counterpart, stamped with both
 * inodes' stamps, the directory's and the named one's: a rename changes
 * them, so a finding that moved between two readings -- an INODE_REF
 * written at once, its DIR_INDEX still among btrfs's delayed items, which
 * TREE_SEARCH does not see -- is not "the same" however alike its keys.
 */
static void report_unmatched(struct btrfs_names *n, struct pass *p, const struct collect *c,
			     struct erec *e)
{
	if (grow_vec((void **)&n->kept, &n->alloc_kept, n->nr_kept + 1, sizeof(*n->kept)) < 0)
		return;
	n->kept[n->nr_kept++] = e->name;
	btrfs_add_finding(p, &(struct tfinding){
		.kind = e->is_ref ? F_REF_NO_ENTRY : F_ENTRY_NO_REF, .root = n->root,
		.ino = e->is_ref ? e->ino : e->dir, .logical = e->is_ref ? e->dir : e->ino,
		.b = e->index, .name = e->name, .transid = e->transid,
		.stamp = stamp_of(c, e->dir) * 0x9E3779B97F4A7C15ULL ^ stamp_of(c, e->ino),
	});
	e->name = NULL;		/* kept */
}

static int name_differences(struct btrfs_names *n, struct pass *p, int fd)
{
	static const struct btrfs_tkey lo = { 0, 0, 0 };
	static const struct btrfs_tkey hi = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	struct collect c = { 0 };
	size_t named = 0;
	int ret = btrfs_tree_open(&r, fd, n->root, lo, hi);

	if (ret == 0)
		while ((ret = btrfs_tree_next(&r, &it)) > 0)
			collect_item(&c, &it);
	btrfs_tree_close(&r);
	if (ret == 0)
		ret = c.err;
	if (ret == 0) {
		sort_items(c.v, c.nr, sizeof(*c.v), erec_cmp);
		for (size_t i = 0; i < c.nr; i++) {
			if (i + 1 < c.nr && !c.v[i].is_ref && c.v[i + 1].is_ref &&
			    erec_cmp(&c.v[i], &c.v[i + 1]) < 0 && c.v[i].dir == c.v[i + 1].dir &&
			    c.v[i].index == c.v[i + 1].index && c.v[i].ino == c.v[i + 1].ino &&
			    c.v[i].h == c.v[i + 1].h) {
				i++;	/* an entry and its reference */
				continue;
			}
			if (named++ < MAX_NAMED)
				report_unmatched(n, p, &c, &c.v[i]);
		}
	}
	for (size_t i = 0; i < c.nr; i++)
		free(c.v[i].name);
	free(c.v);
	free(c.st);
	return ret == -ENOENT ? 0 : ret;	/* ENOENT: the subvolume went away */
}

int names_end(struct btrfs_names *n, struct pass *p, int fd)
{
	object_done(n, p);
	for (size_t i = 0; i < n->nr_nolink; i++)
		if (!n->nolink[i].listed)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_ORPHAN_LOST, .root = n->root, .ino = n->nolink[i].ino,
				.transid = n->nolink[i].transid, .stamp = n->nolink[i].stamp,
			});
	if (n->ent_cnt == n->ref_cnt && n->ent_sum == n->ref_sum)
		return 0;
	return name_differences(n, p, fd);
}

void names_release(struct btrfs_names *n)
{
	for (size_t i = 0; i < n->nr_kept; i++)
		free(n->kept[i]);
	free(n->kept);
	free(n->nolink);
	memset(n, 0, sizeof(*n));
}
