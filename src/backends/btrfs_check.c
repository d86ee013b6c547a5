/*
 * btrfs_check: the logical cross-checks of `btrfs check`, on a mounted btrfs.
 *
 * Runs in phase 3 after the walk (the backend's scan_inodes hook), so that
 * the kernel scrub of phase 2 has vouched for the tree blocks' checksums
 * before their contents are compared.  One pass reads, with the streaming
 * reader of btrfs_trees.h (BTRFS_IOC_TREE_SEARCH_V2):
 *
 *  1. the root tree: every fs tree (5, each subvolume and snapshot, the
 *     data relocation tree), and whether it shares leaves with another
 *     (a snapshot: its ROOT_ITEM's offset or parent_uuid is set);
 *  2. each fs tree in key order: an inode's INODE_ITEM comes before its
 *     EXTENT_DATA items, so nbytes is compared with the sum of the inode's
 *     regular/prealloc extents' num_bytes (disk_bytenr != 0) plus its
 *     inline extents' ram_bytes when the next inode starts, for regular
 *     files and symlinks as `btrfs check` does (btrfs.nbytes; inodes with
 *     no links are being deleted: skipped).
 *     Each file extent item with disk_bytenr != 0 is kept as a 48-byte
 *     record (disk_bytenr, tree, inode, back reference offset);
 *  3. the block groups (the block group tree if the filesystem has one,
 *     else the extent tree's BLOCK_GROUP_ITEMs);
 *  4. the extent tree in key order, merged with the sorted records: each
 *     data extent's refs must equal the sum of its back references (inline
 *     and keyed EXTENT_DATA_REF / SHARED_DATA_REF); each back reference
 *     (tree, inode, offset, count) must be matched by that many file extent
 *     items of that tree (exactly when the tree shares no leaves and the
 *     extent has no shared reference, at most otherwise: a snapshot's file
 *     extent items in leaves it still shares are counted by the reference
 *     of the leaves' owner or by a SHARED_DATA_REF to the leaf, which a
 *     mounted reader cannot see); each file extent item must have a back
 *     reference naming its inode and offset, or the extent a shared one
 *     (btrfs.extent_refs; btrfs.crosslink when the extent's references name
 *     only other files).  Reflinks are references of their own and
 *     snapshots share through the rules above: neither is ever reported.
 *     Extent and metadata items are summed per block group
 *     (btrfs.bg_used), and the block groups' used bytes are summed and
 *     compared with the superblock's bytes_used read from the first device
 *     (btrfs.bytes_used);
 *  5. the subvolume references of the root tree: every ROOT_REF has its
 *     ROOT_BACKREF (same directory, index and name) and the other way
 *     round, the parent's DIR_INDEX names the subvolume by that name, and
 *     every live subvolume has a ROOT_BACKREF (btrfs.root_ref);
 *  6. the csum tree, read alongside the extent tree with a second reader:
 *     the data a checksummed file's regular extent uses (all of a
 *     compressed extent) is covered by csum items, and a nodatasum file's
 *     is not (btrfs.csum);
 *  7. the namespace of each fs tree as it streams by (btrfs_names.c:
 *     btrfs.dir_item, btrfs.inode_ref, btrfs.orphan);
 *  8. the free space tree (when the filesystem has one), read alongside
 *     the extent tree with a third reader: no free extent or bitmap bit
 *     covers a used extent, and each FREE_SPACE_INFO's extent count is
 *     the number of free ranges after it (btrfs.free_space_tree).
 *
 * The live-filesystem rule: btrfs applies extent reference changes at
 * transaction commit (delayed refs), and updates block group items and the
 * superblock only then, so a filesystem in use disagrees with itself in
 * between.  A pass that finds nothing is the end.  Otherwise fscrub forces
 * a commit (BTRFS_IOC_SYNC), reads the superblock's generation T, and runs
 * the pass again.  A finding is an error only if the second pass finds it
 * again with the same numbers and every item involved is in a leaf no newer
 * than T (the search header's transid); anything else is an info "changed
 * while being checked".  On a read-only mount nothing moves: the first
 * pass is the answer.
 *
 * Memory: three readers' 256 KiB buffers, the free ranges that reach
 * the extent being looked at, 72 bytes per file extent item with
 * a disk extent (72 MiB per million; sorted in place), the csum items that
 * reach the data extent being looked at, 40 bytes per block
 * group, the back references of one data extent at a time, and at most
 * MAX_FINDINGS findings per pass.
 */
#include "backends/btrfs_check.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "backends/btrfs_check_int.h"
#include "backends/btrfs_names.h"
#include "backends/btrfs_trees.h"
#include "checks.h"
#include "context.h"
#include "report.h"
#include "strbuf.h"

/* Findings kept per pass; more are counted and treated as found twice. */
#define MAX_FINDINGS 4096
/* The primary superblock: 64 KiB into the device, 4 KiB long. */
#define SUPER_OFFSET (64 * 1024)
#define SUPER_SIZE 4096
#define SUPER_MAGIC_OFF 0x40
#define SUPER_GENERATION_OFF 0x48
#define SUPER_BYTES_USED_OFF 0x78
/* Inline reference sizes: a type byte and its payload. */
#define IREF_DATA_SIZE (1 + sizeof(struct btrfs_extent_data_ref))
#define IREF_SHARED_DATA_SIZE (1 + 8 + 4)
#define IREF_OFFSET_SIZE (1 + 8)	/* tree block refs, owner refs */
/* Simple-quota owner reference (not in older uapi headers). */
#define EXTENT_OWNER_REF_KEY 172
/* Where the regular/prealloc fields start in a file extent item. */
#define FE_DISK_BYTENR 21
#define FE_OFFSET 37
#define FE_NUM_BYTES 45
#define FE_REG_SIZE 53
#define FE_COMPRESSION 16
#define FE_DISK_NUM_BYTES 29
/* btrfs_inode_item.flags: BTRFS_INODE_NODATASUM (not in the uapi headers). */
#define INODE_NODATASUM (1ULL << 0)

struct fs_root {
	uint64_t id;
	bool shared;		/* a snapshot: may hold leaves owned by another tree */
	bool dead;		/* deleted, being dropped (refs 0) */
	uint64_t transid;	/* of the leaf holding its ROOT_ITEM */
};

/* A ROOT_REF (parent -> child) or ROOT_BACKREF (child -> parent). */
struct root_ref {
	bool back;
	uint64_t parent, child, dirid, seq, transid;
	char *name;
};

/* A file extent item with a disk extent: what its back reference must say. */
struct fe_rec {
	uint64_t bytenr, root, ino, ref_off, file_off, transid;
	uint64_t cs_start, cs_len;	/* the disk bytes its checksums cover */
	int want_csum;			/* 1: must have csums, -1: must not, 0: either */
};

/* A free range of the free space tree: an extent, or a bitmap's range. */
struct fst_range {
	uint64_t start, end, transid;
	unsigned char *bitmap;		/* NULL: all free; else a bit per sector */
};

/* The logical range [start, end) one csum item covers. */
struct csum_iv {
	uint64_t start, end, transid;
};

/* A data back reference of the extent being looked at. */
struct data_ref {
	bool shared;
	uint64_t root, ino, off;	/* shared: root is the parent leaf */
	uint32_t count;
	uint64_t transid;
};

/* The inode being summed in the fs tree being read. */
struct inode_sum {
	uint64_t ino, nbytes, found, transid;
	uint32_t nlink, mode;
	uint64_t flags;
	bool active;
};

struct bgroup {
	uint64_t start, len, used, found, transid;
};

struct pass {
	struct scrub_ctx *ctx;
	int fd;
	uint32_t nodesize;
	struct fs_root *roots;
	size_t nr_roots, alloc_roots;
	struct root_ref *rrefs;
	size_t nr_rrefs, alloc_rrefs;
	struct fe_rec *fe;
	size_t nr_fe, alloc_fe, fe_pos;
	struct bgroup *bg;
	size_t nr_bg, alloc_bg;
	bool bg_tree;
	struct inode_sum cur_inode;	/* the inode being summed */
	struct btrfs_names names;	/* the namespace of the fs tree being read */
	/* the csum tree, read alongside the extent tree */
	struct btrfs_tree_reader csr;
	bool csr_end;
	int csr_err;
	struct csum_iv *cs;
	size_t nr_cs, alloc_cs;
	uint32_t csum_size, sectorsize;
	unsigned long long csum_items;
	/* the free space tree, read alongside the extent tree */
	bool fst;
	struct btrfs_tree_reader fsr;
	bool fsr_end;
	int fsr_err;
	uint64_t fsr_last;		/* objectid of the last item read */
	struct fst_range *fq;
	size_t nr_fq, alloc_fq;
	bool in_info;
	uint64_t info_start, info_len, info_transid, run_end;
	uint32_t info_count, counted;
	unsigned long long fst_items;
	uint64_t pending_at, pending_sum;	/* extents at a bg start before its item */
	/* the data extent being read */
	bool in_data;
	uint64_t d_bytenr, d_len, d_refs, d_transid;
	struct data_ref *refs;
	size_t nr_refs, alloc_refs;
	/* findings */
	struct tfinding *f;
	size_t nr_f;
	unsigned long long dropped;
	/* counters for -v */
	unsigned long long root_items, fs_items, extent_items, bg_items, calls;
	unsigned long long data_extents, tree_blocks, file_extents, inodes;
	uint64_t sb_bytes_used, sb_generation;
	bool sb_ok;
};

static const struct btrfs_tkey KEY_MIN = { 0, 0, 0 };
static const struct btrfs_tkey KEY_MAX = { UINT64_MAX, UINT8_MAX, UINT64_MAX };

void btrfs_add_finding(struct pass *p, const struct tfinding *f)
{
	if (p->nr_f >= MAX_FINDINGS) {
		p->dropped++;
		return;
	}
	p->f[p->nr_f++] = *f;
}

static int grow(void **v, size_t *alloc, size_t need, size_t size)
{
	size_t n = *alloc ? *alloc : 64;
	void *nv;

	if (need <= *alloc)
		return 0;
	while (n < need)
		n *= 2;
	nv = realloc(*v, n * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*alloc = n;
	return 0;
}

/* Read a whole key range, calling fn on every item; counts items read. */
static int read_tree(struct pass *p, uint64_t tree, struct btrfs_tkey min, struct btrfs_tkey max,
		     int (*fn)(struct pass *, uint64_t, const struct btrfs_tree_item *),
		     unsigned long long *count)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, p->fd, tree, min, max);

	while (ret == 0 && (ret = btrfs_tree_next(&r, &it)) > 0)
		ret = fn(p, tree, &it);
	*count += r.items;
	p->calls += r.calls;
	btrfs_tree_close(&r);
	return ret;
}

/* ---- 1. the root tree ---- */

static bool is_fs_tree(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID || id == BTRFS_DATA_RELOC_TREE_OBJECTID ||
	       (id >= BTRFS_FIRST_FREE_OBJECTID && id <= BTRFS_LAST_FREE_OBJECTID);
}

static int root_ref_item(struct pass *p, const struct btrfs_tree_item *it)
{
	bool back = it->key.type == BTRFS_ROOT_BACKREF_KEY;
	struct root_ref *r;
	uint16_t n;

	if (it->len < sizeof(struct btrfs_root_ref))
		return 0;
	n = (uint16_t)(it->data[16] | it->data[17] << 8);
	if (sizeof(struct btrfs_root_ref) + n > it->len)
		n = (uint16_t)(it->len - sizeof(struct btrfs_root_ref));
	if (grow((void **)&p->rrefs, &p->alloc_rrefs, p->nr_rrefs + 1, sizeof(*r)) < 0)
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

static int root_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	static const unsigned char zero_uuid[BTRFS_UUID_SIZE];
	struct fs_root *r;

	(void)tree;
	if (it->key.type == BTRFS_ROOT_REF_KEY || it->key.type == BTRFS_ROOT_BACKREF_KEY)
		return root_ref_item(p, it);
	if (it->key.type != BTRFS_ROOT_ITEM_KEY)
		return 0;
	if (it->key.objectid == BTRFS_BLOCK_GROUP_TREE_OBJECTID)
		p->bg_tree = true;
	if (it->key.objectid == BTRFS_FREE_SPACE_TREE_OBJECTID)
		p->fst = true;
	if (!is_fs_tree(it->key.objectid) ||
	    it->len < offsetof(struct btrfs_root_item, drop_progress))
		return 0;
	if (grow((void **)&p->roots, &p->alloc_roots, p->nr_roots + 1, sizeof(*r)) < 0)
		return -ENOMEM;
	r = &p->roots[p->nr_roots++];
	r->id = it->key.objectid;
	r->transid = it->transid;
	r->dead = btrfs_get32(it->data + offsetof(struct btrfs_root_item, refs)) == 0;
	r->shared = it->key.offset != 0;
	if (it->len >= offsetof(struct btrfs_root_item, parent_uuid) + BTRFS_UUID_SIZE &&
	    memcmp(it->data + offsetof(struct btrfs_root_item, parent_uuid), zero_uuid,
		   BTRFS_UUID_SIZE))
		r->shared = true;
	return 0;
}

static const struct fs_root *find_root(const struct pass *p, uint64_t id)
{
	for (size_t i = 0; i < p->nr_roots; i++)
		if (p->roots[i].id == id)
			return &p->roots[i];
	return NULL;
}

/* ---- 2. the fs trees ---- */


static void inode_done(struct pass *p, uint64_t root)
{
	struct inode_sum *s = &p->cur_inode;

	/* btrfs check's rule: files and symlinks (a subvolume's root directory has nbytes). */
	if (s->active && s->nlink && (S_ISREG(s->mode) || S_ISLNK(s->mode)) &&
	    s->nbytes != s->found)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_NBYTES, .root = root, .ino = s->ino,
			.a = s->nbytes, .b = s->found, .transid = s->transid,
		});
	s->active = false;
}

/*
 * Which disk bytes of a written (regular) extent carry checksums: all of a
 * compressed extent, else the part the file uses; a prealloc extent has
 * none, the data relocation tree's inodes are not looked at.
 */
static void want_csum(struct pass *p, uint64_t root, struct fe_rec *e, uint8_t type,
		      const struct btrfs_tree_item *it)
{
	const struct inode_sum *s = &p->cur_inode;

	if (type != BTRFS_FILE_EXTENT_REG || root == BTRFS_DATA_RELOC_TREE_OBJECTID ||
	    !s->active || s->ino != it->key.objectid)
		return;
	if (it->data[FE_COMPRESSION]) {
		e->cs_start = e->bytenr;
		e->cs_len = btrfs_get64(it->data + FE_DISK_NUM_BYTES);
	} else {
		e->cs_start = e->bytenr + btrfs_get64(it->data + FE_OFFSET);
		e->cs_len = btrfs_get64(it->data + FE_NUM_BYTES);
	}
	e->want_csum = s->flags & INODE_NODATASUM ? -1 : 1;
}

static int file_extent(struct pass *p, uint64_t root, const struct btrfs_tree_item *it)
{
	struct inode_sum *s = &p->cur_inode;
	uint8_t type;
	uint64_t bytenr;

	if (it->len < FE_DISK_BYTENR)
		return 0;
	type = it->data[20];
	if (s->active && s->ino == it->key.objectid && it->transid > s->transid)
		s->transid = it->transid;
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		if (s->active && s->ino == it->key.objectid)
			s->found += btrfs_get64(it->data + 8);
		return 0;
	}
	if (it->len < FE_REG_SIZE || !(bytenr = btrfs_get64(it->data + FE_DISK_BYTENR)))
		return 0;
	if (s->active && s->ino == it->key.objectid)
		s->found += btrfs_get64(it->data + FE_NUM_BYTES);
	if (grow((void **)&p->fe, &p->alloc_fe, p->nr_fe + 1, sizeof(*p->fe)) < 0)
		return -ENOMEM;
	p->fe[p->nr_fe++] = (struct fe_rec){
		.bytenr = bytenr, .root = root, .ino = it->key.objectid,
		.ref_off = it->key.offset - btrfs_get64(it->data + FE_OFFSET),
		.file_off = it->key.offset, .transid = it->transid,
	};
	want_csum(p, root, &p->fe[p->nr_fe - 1], type, it);
	p->file_extents++;
	return 0;
}

static int fs_item(struct pass *p, uint64_t root, const struct btrfs_tree_item *it)
{
	struct inode_sum *s = &p->cur_inode;
	int ret = names_item(&p->names, p, it);

	if (ret < 0)
		return ret;
	if (it->key.type == BTRFS_INODE_ITEM_KEY) {
		inode_done(p, root);
		if (it->len < sizeof(struct btrfs_inode_item))
			return 0;
		*s = (struct inode_sum){
			.ino = it->key.objectid, .active = true, .transid = it->transid,
			.nbytes = btrfs_get64(it->data + offsetof(struct btrfs_inode_item, nbytes)),
			.nlink = btrfs_get32(it->data + offsetof(struct btrfs_inode_item, nlink)),
			.mode = btrfs_get32(it->data + offsetof(struct btrfs_inode_item, mode)),
			.flags = btrfs_get64(it->data + offsetof(struct btrfs_inode_item, flags)),
		};
		p->inodes++;
		return 0;
	}
	if (it->key.type == BTRFS_EXTENT_DATA_KEY)
		return file_extent(p, root, it);
	return 0;
}

static int read_fs_trees(struct pass *p)
{
	for (size_t i = 0; i < p->nr_roots; i++) {
		int ret;

		if (p->roots[i].dead)
			continue;
		p->cur_inode.active = false;
		names_begin(&p->names, p->roots[i].id);
		ret = read_tree(p, p->roots[i].id, KEY_MIN, KEY_MAX, fs_item, &p->fs_items);
		inode_done(p, p->roots[i].id);
		if (ret == 0)
			ret = names_end(&p->names, p, p->fd);
		/* ENOENT: deleted since the root tree was read. */
		if (ret < 0 && ret != -ENOENT)
			return ret;
	}
	return 0;
}

static int fe_cmp(const void *a, const void *b)
{
	const struct fe_rec *x = a, *y = b;

	if (x->bytenr != y->bytenr)
		return x->bytenr < y->bytenr ? -1 : 1;
	if (x->root != y->root)
		return x->root < y->root ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->ref_off != y->ref_off)
		return x->ref_off < y->ref_off ? -1 : 1;
	return 0;
}

/* ---- 3. block groups ---- */

static int bg_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	struct bgroup *g;

	(void)tree;
	if (it->key.type != BTRFS_BLOCK_GROUP_ITEM_KEY || it->len < sizeof(struct btrfs_block_group_item))
		return 0;
	if (grow((void **)&p->bg, &p->alloc_bg, p->nr_bg + 1, sizeof(*p->bg)) < 0)
		return -ENOMEM;
	g = &p->bg[p->nr_bg++];
	*g = (struct bgroup){
		.start = it->key.objectid, .len = it->key.offset,
		.used = btrfs_get64(it->data), .transid = it->transid,
	};
	/* Extent items at the group's start sort before its item (extent tree). */
	if (p->pending_at == g->start) {
		g->found += p->pending_sum;
		p->pending_sum = 0;
	}
	p->bg_items++;
	return 0;
}

/* Add an extent's bytes to the block group that holds it. */
static void bg_account(struct pass *p, uint64_t start, uint64_t len)
{
	size_t lo = 0, hi = p->nr_bg;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->bg[mid].start + p->bg[mid].len <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < p->nr_bg && p->bg[lo].start <= start) {
		p->bg[lo].found += len;
		return;
	}
	if (p->pending_at != start) {
		p->pending_at = start;
		p->pending_sum = 0;
	}
	p->pending_sum += len;
}

/* ---- 4. the extent tree ---- */

static int ref_cmp(const void *a, const void *b)
{
	const struct data_ref *x = a, *y = b;

	if (x->shared != y->shared)
		return x->shared ? 1 : -1;
	if (x->root != y->root)
		return x->root < y->root ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return 0;
}

static int add_ref(struct pass *p, const struct data_ref *r)
{
	if (grow((void **)&p->refs, &p->alloc_refs, p->nr_refs + 1, sizeof(*p->refs)) < 0)
		return -ENOMEM;
	p->refs[p->nr_refs++] = *r;
	return 0;
}

static const struct data_ref *ref_for(const struct pass *p, uint64_t root, uint64_t ino,
				      uint64_t off, bool any_root)
{
	for (size_t i = 0; i < p->nr_refs; i++) {
		const struct data_ref *r = &p->refs[i];

		if (!r->shared && r->ino == ino && r->off == off && (any_root || r->root == root))
			return r;
	}
	return NULL;
}

/* The file extent items [from, to) of one (tree, inode, offset) against the refs. */
static void check_group(struct pass *p, size_t from, size_t to, bool has_shared)
{
	const struct fe_rec *e = &p->fe[from];
	const struct fs_root *root = find_root(p, e->root);
	const struct data_ref *r = ref_for(p, e->root, e->ino, e->ref_off, false);
	uint64_t n = to - from, transid = p->d_transid;
	bool exact = root && !root->shared && !has_shared;

	for (size_t i = from; i < to; i++)
		transid = p->fe[i].transid > transid ? p->fe[i].transid : transid;
	if (!r && !has_shared && !ref_for(p, e->root, e->ino, e->ref_off, true))
		btrfs_add_finding(p, &(struct tfinding){
			.kind = p->nr_refs ? F_CROSSLINK : F_NO_BACKREF, .root = e->root,
			.ino = e->ino, .file_off = e->file_off, .logical = p->d_bytenr,
			.len = p->d_len, .transid = transid,
			.other_root = p->nr_refs ? p->refs[0].root : 0,
			.other_ino = p->nr_refs ? p->refs[0].ino : 0,
		});
	else if (r && (exact ? r->count != n : r->count > n))
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_REF_COUNT, .root = e->root, .ino = e->ino,
			.file_off = e->file_off, .logical = p->d_bytenr, .len = p->d_len,
			.a = r->count, .b = n, .ref_off = r->off, .transid = transid,
		});
}

/* A back reference that no file extent item of its tree uses. */
static void check_unused_ref(struct pass *p, const struct data_ref *r)
{
	const struct fs_root *root = find_root(p, r->root);
	struct fe_rec key = { .bytenr = p->d_bytenr, .root = r->root, .ino = r->ino,
			      .ref_off = r->off };

	if (root && root->dead)
		return;
	for (size_t i = p->fe_pos; i < p->nr_fe && p->fe[i].bytenr == p->d_bytenr; i++)
		if (!fe_cmp(&p->fe[i], &key))
			return;
	btrfs_add_finding(p, &(struct tfinding){
		.kind = root ? F_REF_COUNT : F_REF_NO_ROOT, .root = r->root, .ino = r->ino,
		.file_off = r->off, .logical = p->d_bytenr, .len = p->d_len,
		.a = r->count, .b = 0, .ref_off = r->off, .transid = p->d_transid,
	});
}

/* File extent items before the data extent at bytenr point at nothing. */
static void skip_to(struct pass *p, uint64_t bytenr)
{
	while (p->fe_pos < p->nr_fe && p->fe[p->fe_pos].bytenr < bytenr) {
		const struct fe_rec *e = &p->fe[p->fe_pos];

		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_NO_EXTENT, .root = e->root, .ino = e->ino,
			.file_off = e->file_off, .logical = e->bytenr, .transid = e->transid,
		});
		/* One finding per (extent, tree, inode): a file's many pieces. */
		while (p->fe_pos < p->nr_fe && p->fe[p->fe_pos].bytenr == e->bytenr &&
		       p->fe[p->fe_pos].root == e->root && p->fe[p->fe_pos].ino == e->ino)
			p->fe_pos++;
	}
}

/* ---- the free space tree, merged with the used extents ---- */

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
	if (grow((void **)&p->fq, &p->alloc_fq, p->nr_fq + 1, sizeof(*p->fq)) < 0) {
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
static void fst_used(struct pass *p, uint64_t a, uint64_t b, uint64_t transid)
{
	size_t keep = 0;

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
static void fst_finish(struct pass *p)
{
	if (!p->fst || p->fsr_err)
		return;
	fst_read_to(p, UINT64_MAX);
	fst_info_done(p);
	for (size_t i = 0; i < p->nr_fq; i++)
		free(p->fq[i].bitmap);
	p->nr_fq = 0;
}

/* ---- the csum tree, merged with the data extents ---- */

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
		if (grow((void **)&p->cs, &p->alloc_cs, p->nr_cs + 1, sizeof(*p->cs)) < 0) {
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

static void check_csums(struct pass *p, size_t from, size_t to)
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

static void data_extent_done(struct pass *p)
{
	uint64_t sum = 0;
	bool has_shared = false;
	size_t end;

	if (!p->in_data)
		return;
	p->in_data = false;
	p->data_extents++;
	skip_to(p, p->d_bytenr);
	qsort(p->refs, p->nr_refs, sizeof(*p->refs), ref_cmp);
	for (size_t i = 0; i < p->nr_refs; i++) {
		sum += p->refs[i].count;
		has_shared |= p->refs[i].shared;
	}
	end = p->fe_pos;
	while (end < p->nr_fe && p->fe[end].bytenr == p->d_bytenr)
		end++;
	if (sum != p->d_refs) {
		const struct data_ref *r = p->nr_refs && !p->refs[0].shared ? &p->refs[0] : NULL;

		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_REFS_SUM, .logical = p->d_bytenr, .len = p->d_len,
			.root = r ? r->root : end > p->fe_pos ? p->fe[p->fe_pos].root : 0,
			.ino = r ? r->ino : end > p->fe_pos ? p->fe[p->fe_pos].ino : 0,
			.a = p->d_refs, .b = sum, .transid = p->d_transid,
		});
	}
	for (size_t i = p->fe_pos; i < end;) {
		size_t j = i + 1;

		while (j < end && !fe_cmp(&p->fe[i], &p->fe[j]))
			j++;
		check_group(p, i, j, has_shared);
		i = j;
	}
	for (size_t i = 0; i < p->nr_refs; i++)
		if (!p->refs[i].shared)
			check_unused_ref(p, &p->refs[i]);
	check_csums(p, p->fe_pos, end);
	p->fe_pos = end;
}

/* The inline references after an EXTENT_ITEM's fixed part. */
static int inline_refs(struct pass *p, const struct btrfs_tree_item *it)
{
	size_t off = sizeof(struct btrfs_extent_item);

	while (off < it->len) {
		const unsigned char *q = it->data + off;
		int ret = 0;

		if (q[0] == BTRFS_EXTENT_DATA_REF_KEY && off + IREF_DATA_SIZE <= it->len) {
			ret = add_ref(p, &(struct data_ref){
				.root = btrfs_get64(q + 1), .ino = btrfs_get64(q + 9),
				.off = btrfs_get64(q + 17), .count = btrfs_get32(q + 25),
			});
			off += IREF_DATA_SIZE;
		} else if (q[0] == BTRFS_SHARED_DATA_REF_KEY && off + IREF_SHARED_DATA_SIZE <= it->len) {
			ret = add_ref(p, &(struct data_ref){
				.shared = true, .root = btrfs_get64(q + 1), .count = btrfs_get32(q + 9),
			});
			off += IREF_SHARED_DATA_SIZE;
		} else if (q[0] == EXTENT_OWNER_REF_KEY || q[0] == BTRFS_TREE_BLOCK_REF_KEY ||
			   q[0] == BTRFS_SHARED_BLOCK_REF_KEY) {
			off += IREF_OFFSET_SIZE;
		} else {
			break;	/* unknown: the scrub and the kernel's tree checker say more */
		}
		if (ret < 0)
			return ret;
	}
	return 0;
}

static int extent_item(struct pass *p, uint64_t tree, const struct btrfs_tree_item *it)
{
	const struct btrfs_tkey *k = &it->key;

	(void)tree;
	if (p->in_data && k->objectid != p->d_bytenr)
		data_extent_done(p);
	switch (k->type) {
	case BTRFS_METADATA_ITEM_KEY:
		p->tree_blocks++;
		bg_account(p, k->objectid, p->nodesize);
		fst_used(p, k->objectid, k->objectid + p->nodesize, it->transid);
		return 0;
	case BTRFS_EXTENT_ITEM_KEY:
		if (it->len < sizeof(struct btrfs_extent_item))
			return 0;
		bg_account(p, k->objectid, k->offset);
		fst_used(p, k->objectid, k->objectid + k->offset, it->transid);
		if (btrfs_get64(it->data + offsetof(struct btrfs_extent_item, flags)) &
		    BTRFS_EXTENT_FLAG_TREE_BLOCK) {
			p->tree_blocks++;
			return 0;
		}
		p->in_data = true;
		p->d_bytenr = k->objectid;
		p->d_len = k->offset;
		p->d_refs = btrfs_get64(it->data);
		p->d_transid = it->transid;
		p->nr_refs = 0;
		return inline_refs(p, it);
	case BTRFS_EXTENT_DATA_REF_KEY:
		if (!p->in_data || it->len < sizeof(struct btrfs_extent_data_ref))
			return 0;
		if (it->transid > p->d_transid)
			p->d_transid = it->transid;
		return add_ref(p, &(struct data_ref){
			.root = btrfs_get64(it->data), .ino = btrfs_get64(it->data + 8),
			.off = btrfs_get64(it->data + 16), .count = btrfs_get32(it->data + 24),
		});
	case BTRFS_SHARED_DATA_REF_KEY:
		if (!p->in_data || it->len < sizeof(struct btrfs_shared_data_ref))
			return 0;
		if (it->transid > p->d_transid)
			p->d_transid = it->transid;
		return add_ref(p, &(struct data_ref){
			.shared = true, .root = k->offset, .count = btrfs_get32(it->data),
		});
	case BTRFS_BLOCK_GROUP_ITEM_KEY:
		return p->bg_tree ? 0 : bg_item(p, tree, it);
	}
	return 0;
}

/* ---- 5. subvolume references ---- */

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

static void check_root_refs(struct pass *p)
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

static void check_block_groups(struct pass *p)
{
	uint64_t sum = 0, transid = 0;

	for (size_t i = 0; i < p->nr_bg; i++) {
		const struct bgroup *g = &p->bg[i];

		sum += g->used;
		transid = g->transid > transid ? g->transid : transid;
		if (g->used != g->found)
			btrfs_add_finding(p, &(struct tfinding){
				.kind = F_BG_USED, .logical = g->start, .len = g->len,
				.a = g->used, .b = g->found, .transid = g->transid,
			});
	}
	if (p->sb_ok && p->nr_bg && sum != p->sb_bytes_used)
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_BYTES_USED, .a = p->sb_bytes_used, .b = sum, .transid = transid,
		});
}

/* ---- the superblock ---- */

/* bytes_used and generation from the first device's primary superblock. */
static void read_super(struct pass *p)
{
	struct btrfs_ioctl_fs_info_args fs = { 0 };
	void *buf = NULL;
	int fd = -1;

	p->sb_ok = false;
	if (ioctl(p->fd, BTRFS_IOC_FS_INFO, &fs) < 0)
		return;
	for (uint64_t id = 1; id <= fs.max_id && fd < 0; id++) {
		struct btrfs_ioctl_dev_info_args d = { .devid = id };

		if (ioctl(p->fd, BTRFS_IOC_DEV_INFO, &d) == 0)
			/* O_DIRECT: btrfs writes the superblock past the page cache. */
			fd = open((const char *)d.path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	}
	if (fd < 0 || posix_memalign(&buf, SUPER_SIZE, SUPER_SIZE))
		goto out;
	if (pread(fd, buf, SUPER_SIZE, SUPER_OFFSET) == SUPER_SIZE &&
	    !memcmp((char *)buf + SUPER_MAGIC_OFF, "_BHRfS_M", 8)) {
		p->sb_bytes_used = btrfs_get64((unsigned char *)buf + SUPER_BYTES_USED_OFF);
		p->sb_generation = btrfs_get64((unsigned char *)buf + SUPER_GENERATION_OFF);
		p->sb_ok = true;
	}
out:
	free(buf);
	if (fd >= 0)
		close(fd);
}

/* ---- a pass ---- */

static void pass_release(struct pass *p)
{
	for (size_t i = 0; i < p->nr_rrefs; i++)
		free(p->rrefs[i].name);
	free(p->rrefs);
	names_release(&p->names);
	if (p->csr.args)
		btrfs_tree_close(&p->csr);
	if (p->fsr.args)
		btrfs_tree_close(&p->fsr);
	for (size_t i = 0; i < p->nr_fq; i++)
		free(p->fq[i].bitmap);
	free(p->fq);
	free(p->cs);
	free(p->roots);
	free(p->fe);
	free(p->bg);
	free(p->refs);
	free(p->f);
	memset(p, 0, sizeof(*p));
}

static int run_pass(struct scrub_ctx *ctx, struct pass *p)
{
	struct btrfs_ioctl_fs_info_args fs = { .flags = BTRFS_FS_INFO_FLAG_CSUM_INFO };
	struct btrfs_tkey cmin = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 0 };
	struct btrfs_tkey cmax = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, UINT64_MAX };
	int ret;

	memset(p, 0, sizeof(*p));
	p->ctx = ctx;
	p->fd = ctx->mnt_fd;
	p->pending_at = UINT64_MAX;
	if (!(p->f = calloc(MAX_FINDINGS, sizeof(*p->f))))
		return -ENOMEM;
	if (ioctl(p->fd, BTRFS_IOC_FS_INFO, &fs) < 0)
		return -errno;
	p->nodesize = fs.nodesize;
	p->sectorsize = fs.sectorsize;
	/* Kernels before 5.5 do not fill csum_size: crc32c's 4 bytes then. */
	p->csum_size = (fs.flags & BTRFS_FS_INFO_FLAG_CSUM_INFO) && fs.csum_size ? fs.csum_size : 4;
	if (btrfs_tree_open(&p->csr, p->fd, BTRFS_CSUM_TREE_OBJECTID, cmin, cmax) < 0)
		return -ENOMEM;
	read_super(p);
	ret = read_tree(p, BTRFS_ROOT_TREE_OBJECTID, KEY_MIN, KEY_MAX, root_item, &p->root_items);
	if (ret == 0)
		ret = read_fs_trees(p);
	if (ret == 0 && p->fst)
		ret = btrfs_tree_open(&p->fsr, p->fd, BTRFS_FREE_SPACE_TREE_OBJECTID, KEY_MIN,
				      KEY_MAX);
	if (ret < 0)
		return ret;
	qsort(p->fe, p->nr_fe, sizeof(*p->fe), fe_cmp);
	if (p->bg_tree) {
		ret = read_tree(p, BTRFS_BLOCK_GROUP_TREE_OBJECTID, KEY_MIN, KEY_MAX, bg_item,
				&p->bg_items);
		if (ret < 0)
			return ret;
	}
	ret = read_tree(p, BTRFS_EXTENT_TREE_OBJECTID, KEY_MIN, KEY_MAX, extent_item,
			&p->extent_items);
	if (ret < 0)
		return ret;
	data_extent_done(p);
	skip_to(p, UINT64_MAX);
	fst_finish(p);
	p->csum_items = p->csr.items;
	p->calls += p->csr.calls + p->fsr.calls;
	if (p->fsr_err < 0)
		report_operational(ctx, NULL, NULL, -p->fsr_err,
				   "cannot read the btrfs free space tree");
	if (p->csr_err < 0)
		report_operational(ctx, NULL, NULL, -p->csr_err, "cannot read the btrfs csum tree");
	check_block_groups(p);
	check_root_refs(p);
	return 0;
}

/* ---- reporting ---- */

static bool same(const struct tfinding *a, const struct tfinding *b)
{
	return a->kind == b->kind && a->root == b->root && a->ino == b->ino &&
	       a->file_off == b->file_off && a->logical == b->logical && a->a == b->a &&
	       a->b == b->b && a->ref_off == b->ref_off &&
	       !strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

static bool found_in(const struct pass *p, const struct tfinding *f)
{
	for (size_t i = 0; i < p->nr_f; i++)
		if (same(&p->f[i], f))
			return true;
	return false;
}

static const char *check_of(enum finding_kind k)
{
	switch (k) {
	case F_NBYTES: return CHECK_BTRFS_NBYTES;
	case F_BG_USED: return CHECK_BTRFS_BG_USED;
	case F_BYTES_USED: return CHECK_BTRFS_BYTES_USED;
	case F_CROSSLINK: return CHECK_BTRFS_CROSSLINK;
	case F_ROOT_REF_ALONE:
	case F_ROOT_REF_DIR:
	case F_ROOT_UNREFERENCED: return CHECK_BTRFS_ROOT_REF;
	case F_CSUM_MISSING:
	case F_CSUM_UNEXPECTED: return CHECK_BTRFS_CSUM;
	case F_FST_USED_FREE:
	case F_FST_COUNT: return CHECK_BTRFS_FREE_SPACE_TREE;
	case F_DIR_PAIR:
	case F_DIR_ISIZE:
	case F_ENTRY_NO_REF:
	case F_REF_NO_ENTRY: return CHECK_BTRFS_DIR_ITEM;
	case F_NLINK_REFS: return CHECK_BTRFS_INODE_REF;
	case F_UNNAMED:
	case F_ORPHAN_LOST: return CHECK_BTRFS_ORPHAN;
	default: return CHECK_BTRFS_EXTENT_REFS;
	}
}

static void describe(struct scrub_ctx *ctx, const struct tfinding *f, struct strbuf *m)
{
	struct strbuf other = STRBUF_INIT, rel = STRBUF_INIT;

	unsigned long long lg = f->logical, len = f->len, a = f->a, b = f->b;
	unsigned long long fo = f->file_off, root = f->root, ino = f->ino;

	switch (f->kind) {
	case F_REFS_SUM:
		strbuf_addf(m, "data extent at logical %llu (%llu bytes): its extent item counts "
			    "%llu references, its back references add up to %llu", lg, len, a, b);
		break;
	case F_REF_COUNT:
		strbuf_addf(m, "data extent at logical %llu (%llu bytes): its back reference from "
			    "tree %llu inode %llu offset %llu counts %llu file extent items, the "
			    "tree has %llu", lg, len, root, ino,
			    (unsigned long long)f->ref_off, a, b);
		break;
	case F_NO_BACKREF:
		strbuf_addf(m, "file extent at file offset %llu uses the data extent at logical "
			    "%llu (%llu bytes), which has no back reference to it", fo, lg, len);
		break;
	case F_CROSSLINK:
		if (!btrfs_file_path(ctx, f->other_root, f->other_ino, &rel))
			strbuf_addf(&rel, "<subvolume %llu>/<inode %llu>",
				    (unsigned long long)f->other_root,
				    (unsigned long long)f->other_ino);
		report_path(ctx, &other, NULL, rel.buf);
		strbuf_addf(m, "file extent at file offset %llu uses the data extent at logical "
			    "%llu (%llu bytes), whose back references name another file, %s "
			    "(inode %llu), and not this one: cross-linked", fo, lg, len, other.buf,
			    (unsigned long long)f->other_ino);
		break;
	case F_NO_EXTENT:
		strbuf_addf(m, "file extent at file offset %llu points at logical %llu, where "
			    "the extent tree has no data extent", fo, lg);
		break;
	case F_REF_NO_ROOT:
		strbuf_addf(m, "data extent at logical %llu (%llu bytes) has a back reference "
			    "from tree %llu inode %llu, a tree that does not exist", lg, len, root, ino);
		break;
	case F_ROOT_REF_ALONE:
		strbuf_addf(m, "subvolume %llu \"%s\" (directory index %llu): its %s has no "
			    "matching %s", lg, f->name, b, a ? "ROOT_BACKREF" : "ROOT_REF",
			    a ? "ROOT_REF" : "ROOT_BACKREF");
		break;
	case F_ROOT_REF_DIR:
		strbuf_addf(m, "subvolume %llu \"%s\": its ROOT_REF names directory index %llu, "
			    "which is not an entry of that name for the subvolume", lg, f->name, b);
		break;
	case F_ROOT_UNREFERENCED:
		strbuf_addf(m, "subvolume %llu has no ROOT_BACKREF: no directory names it", lg);
		break;
	case F_CSUM_MISSING:
		strbuf_addf(m, "file extent at file offset %llu: its data at logical %llu "
			    "(%llu bytes from %llu) has no checksum items from logical %llu on, and "
			    "the file is checksummed", fo, a, len, a, lg);
		break;
	case F_CSUM_UNEXPECTED:
		strbuf_addf(m, "file extent at file offset %llu: the file is nodatasum but its "
			    "data at logical %llu (%llu bytes) has checksum items (from logical "
			    "%llu)", fo, a, len, lg);
		break;
	case F_FST_USED_FREE:
		strbuf_addf(m, "the free space tree calls bytes of the extent at logical %llu "
			    "(%llu bytes) free (its free range %llu-%llu)", lg, len, a, b);
		break;
	case F_FST_COUNT:
		strbuf_addf(m, "block group at logical %llu (%llu bytes): its free space info "
			    "counts %llu free ranges, the free space tree has %llu", lg, len, a, b);
		break;
	case F_DIR_PAIR:
		strbuf_addf(m, "directory has %llu DIR_ITEM and %llu DIR_INDEX entries, and they "
			    "are not the same names", a, b);
		break;
	case F_DIR_ISIZE:
		strbuf_addf(m, "directory i_size %llu, its names add up to %llu bytes (counted "
			    "in DIR_ITEM and DIR_INDEX)", a, b);
		break;
	case F_ENTRY_NO_REF:
		strbuf_addf(m, "directory entry \"%s\" (index %llu) names inode %llu, which has "
			    "no INODE_REF back to it", f->name, b, lg);
		break;
	case F_REF_NO_ENTRY:
		strbuf_addf(m, "the inode's INODE_REF names \"%s\" in directory inode %llu "
			    "(index %llu), which has no such entry", f->name, lg, b);
		break;
	case F_NLINK_REFS:
		strbuf_addf(m, "inode nlink %llu, it has %llu names (INODE_REF, INODE_EXTREF)", a, b);
		break;
	case F_UNNAMED:
		strbuf_addf(m, "inode has %llu links and no name: no directory reaches it", a);
		break;
	case F_ORPHAN_LOST:
		strbuf_addf(m, "inode has no links and is not on the orphan list: its space is "
			    "never freed");
		break;
	case F_NBYTES:
		strbuf_addf(m, "inode item nbytes %llu, its file extents add up to %llu", a, b);
		break;
	case F_BG_USED:
		strbuf_addf(m, "block group at logical %llu (%llu bytes): used %llu, its extent "
			    "items add up to %llu", lg, len, a, b);
		break;
	case F_BYTES_USED:
		strbuf_addf(m, "superblock bytes_used %llu, the block groups' used add up to %llu",
			    a, b);
		break;
	}
	strbuf_release(&other);
	strbuf_release(&rel);
}

static void report_one(struct scrub_ctx *ctx, const struct tfinding *f, enum severity sev,
		       const char *why)
{
	struct strbuf path = STRBUF_INIT, msg = STRBUF_INIT;
	bool named = f->ino && f->kind != F_REF_NO_ROOT;

	if (named && !btrfs_file_path(ctx, f->root, f->ino, &path))
		strbuf_addf(&path, "<subvolume %llu>/<inode %llu>", (unsigned long long)f->root,
			    (unsigned long long)f->ino);
	if (why)
		strbuf_addf(&msg, "changed while being checked (%s): ", why);
	describe(ctx, f, &msg);
	/* An empty path is the mounted subvolume's top directory. */
	report_at(ctx, sev, check_of(f->kind), NULL, named && path.len ? path.buf : NULL,
		  named ? f->ino : 0, __FILE__, __LINE__, "%s", msg.buf);
	strbuf_release(&path);
	strbuf_release(&msg);
}

static void report_counts(struct scrub_ctx *ctx, const struct pass *p, const char *which)
{
	report_verbose(ctx, "Phase 3: btrfs trees (%s): root tree %llu items, %zu fs trees "
		       "%llu items (%llu inodes, %llu file extents with disk extents), extent "
		       "tree %llu items (%llu data extents, %llu tree blocks), csum tree %llu "
		       "items, free space tree %llu items, %llu block groups%s; "
		       "%llu TREE_SEARCH_V2 calls", which, p->root_items, p->nr_roots, p->fs_items,
		       p->inodes, p->file_extents, p->extent_items, p->data_extents,
		       p->tree_blocks, p->csum_items, p->fst_items, p->bg_items, p->bg_tree ? " (block group tree)" : "",
		       p->calls);
}

/* Force a commit; the committed generation, or 0 if unknown. */
static uint64_t force_commit(struct scrub_ctx *ctx, struct pass *probe)
{
	if (ioctl(ctx->mnt_fd, BTRFS_IOC_SYNC, NULL) < 0)
		return 0;
	probe->fd = ctx->mnt_fd;
	read_super(probe);
	return probe->sb_ok ? probe->sb_generation : 0;
}

/* The second pass decides: errors found twice in committed items, else infos. */
static void judge(struct scrub_ctx *ctx, const struct pass *p1, const struct pass *p2,
		  uint64_t committed)
{
	for (size_t i = 0; i < p2->nr_f; i++) {
		const struct tfinding *f = &p2->f[i];
		bool twice = found_in(p1, f) || p1->dropped;

		if (twice && committed && f->transid <= committed)
			report_one(ctx, f, SEV_ERROR, NULL);
		else
			report_one(ctx, f, SEV_INFO, twice ? "its items are newer than the "
				   "commit forced to check it" : "not found before a forced commit");
	}
	for (size_t i = 0; i < p1->nr_f; i++)
		if (!found_in(p2, &p1->f[i]))
			report_one(ctx, &p1->f[i], SEV_INFO, "not found again after a forced commit");
	if (p2->dropped)
		str_info(ctx, CHECK_BTRFS_EXTENT_REFS, NULL, NULL, 0,
			 "%llu more tree findings were not kept", p2->dropped);
}

int btrfs_check_trees(struct scrub_ctx *ctx)
{
	struct pass p1, p2, probe = { 0 };
	struct timespec t0, t1;
	uint64_t committed;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = run_pass(ctx, &p1);
	report_counts(ctx, &p1, "first pass");
	if (ret < 0 || (!p1.nr_f && !p1.dropped)) {
		pass_release(&p1);
		goto out;
	}
	if (ctx->svfs.f_flag & ST_RDONLY) {
		for (size_t i = 0; i < p1.nr_f; i++)
			report_one(ctx, &p1.f[i], SEV_ERROR, NULL);
		pass_release(&p1);
		goto out;
	}
	report_verbose(ctx, "Phase 3: btrfs trees: %zu findings; forcing a commit to read "
		       "them again", p1.nr_f);
	committed = force_commit(ctx, &probe);
	ret = run_pass(ctx, &p2);
	report_counts(ctx, &p2, "after the commit");
	if (ret == 0)
		judge(ctx, &p1, &p2, committed);
	pass_release(&p1);
	pass_release(&p2);
out:
	clock_gettime(CLOCK_MONOTONIC, &t1);
	report_verbose(ctx, "Phase 3: btrfs trees checked in %.3f s",
		       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return ret;
}
