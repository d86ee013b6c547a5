/*
 * btrfs_devtree: a tree walked from the devices (see btrfs_devtree.h).
 *
 * The walk keeps one block per level (lv[0] the leaf) and a slot in each:
 * the next item is the leaf's next slot; past the leaf's end, the lowest
 * node with a slot left moves on and the blocks below it are read again
 * down to a leaf.  The first descent goes to the last pointer whose key is
 * at most min, so a range read starts where it should.
 */
#include "backends/btrfs/btrfs_devtree.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The deepest tree btrfs builds (MAX_LEVEL, not in the uapi headers). */
#define MAX_LEVEL 8

/* O_DIRECT alignment: every block device's logical block divides 4 KiB. */
#define DT_ALIGN 4096
/* A leaf's item: key (17 bytes), data offset, data size. */
#define ITEM_SIZE 25
#define ITEM_OFF 17
#define ITEM_LEN 21
/* A node's pointer: key (17 bytes), blockptr, generation. */
#define PTR_SIZE 33
#define PTR_BLOCK 17
#define PTR_GEN 25

struct dt_dev {
	uint64_t devid;
	int fd;
	uint8_t fsid[BTRFS_FSID_SIZE];	/* a seed device's blocks carry the seed's */
};

struct dt_level {
	unsigned char *buf;		/* nodesize bytes, DT_ALIGN aligned */
	uint64_t logical;
	uint32_t nritems, slot;
	bool valid;
};

struct btrfs_devtree {
	uint64_t tree;
	uint32_t nodesize;
	uint8_t fsid[BTRFS_FSID_SIZE];	/* the metadata UUID */
	struct btrfs_cmap_chunk *c;
	size_t nr_c, alloc_c;
	struct dt_dev *devs;
	size_t nr_devs, alloc_devs;
	struct dt_level lv[MAX_LEVEL];
	unsigned top;			/* the root's level */
	bool done;
	struct btrfs_tkey min, max, last;
	bool have_last;
	struct btrfs_devtree_log *log;
};

static const char *const why_text[] = {
	[BTRFS_BLOCK_OK] = "good", [BTRFS_BLOCK_READ_ERR] = "read error",
	[BTRFS_BLOCK_CSUM] = "bad checksum",
	[BTRFS_BLOCK_BYTENR] = "another block's address in its header",
	[BTRFS_BLOCK_FSID] = "another filesystem's fsid in its header",
	[BTRFS_BLOCK_GEN] = "another generation than its parent's pointer (or ROOT_ITEM) says",
	[BTRFS_BLOCK_LEVEL] = "another level than its parent's minus one (or its ROOT_ITEM's)",
	[BTRFS_BLOCK_OWNER] = "another tree as its owner",
	[BTRFS_BLOCK_ITEMS] = "more items than fit, or items outside the block",
	[BTRFS_BLOCK_KEY] = "keys out of order, or a first key other than its parent's pointer's",
};

const char *btrfs_devtree_why(enum btrfs_block_why why)
{
	return why_text[why];
}

/* ---- what the tree is on: devices, chunks, the root ---- */

static int add_dev(struct btrfs_devtree *t, int fd, uint64_t devid)
{
	struct btrfs_ioctl_dev_info_args d = { .devid = devid };
	struct dt_dev *v;

	if (ioctl(fd, BTRFS_IOC_DEV_INFO, &d) < 0 || !d.path[0])
		return 0;	/* no such devid, or missing: its copies are not read */
	if (btrfs_grow((void **)&t->devs, &t->alloc_devs, t->nr_devs + 1, sizeof(*t->devs)) < 0)
		return -ENOMEM;
	v = &t->devs[t->nr_devs];
	v->devid = devid;
	/* Linux 6.3 and later: the device's fsid in the 16 bytes after the path (else zero) */
	memcpy(v->fsid, d.unused, sizeof(v->fsid));
	/* O_DIRECT: the blocks as on the disk, not as a page cache once held them. */
	if ((v->fd = open((const char *)d.path, O_RDONLY | O_DIRECT | O_CLOEXEC)) < 0)
		return -errno;
	t->nr_devs++;
	return 0;
}

static int fs_facts(struct btrfs_devtree *t, int fd)
{
	struct btrfs_ioctl_fs_info_args fs = {
		.flags = BTRFS_FS_INFO_FLAG_CSUM_INFO | BTRFS_FS_INFO_FLAG_METADATA_UUID,
	};
	int ret = 0;

	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fs) < 0)
		return -errno;
	/* Kernels before 5.5 do not say: crc32c was the only checksum then. */
	if ((fs.flags & BTRFS_FS_INFO_FLAG_CSUM_INFO) && fs.csum_type != BTRFS_CSUM_TYPE_CRC32)
		return -EOPNOTSUPP;
	t->nodesize = fs.nodesize;
	memcpy(t->fsid, fs.flags & BTRFS_FS_INFO_FLAG_METADATA_UUID ? fs.metadata_uuid : fs.fsid,
	       sizeof(t->fsid));
	for (uint64_t id = 1; id <= fs.max_id && ret == 0; id++)
		ret = add_dev(t, fd, id);
	return ret;
}

static int read_chunks(struct btrfs_devtree *t, int fd)
{
	const struct btrfs_tkey min = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0 };
	const struct btrfs_tkey max = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
					UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, fd, BTRFS_CHUNK_TREE_OBJECTID, min, max);

	while (ret == 0 && (ret = btrfs_tree_next(&r, &it)) > 0) {
		if (btrfs_grow((void **)&t->c, &t->alloc_c, t->nr_c + 1, sizeof(*t->c)) < 0) {
			ret = -ENOMEM;
			break;
		}
		if ((ret = btrfs_cmap_parse(&it, &t->c[t->nr_c])) < 0)
			break;
		if (ret > 0 && btrfs_cmap_is_meta(t->c[t->nr_c].type))
			t->nr_c++;
		else if (ret > 0)
			free(t->c[t->nr_c].st);
		ret = 0;
	}
	btrfs_tree_close(&r);
	return ret;
}

/* The tree's ROOT_ITEM in the root tree: its root block, generation, level. */
static int find_root(int fd, uint64_t tree, uint64_t *bytenr, uint64_t *gen, uint8_t *level)
{
	const struct btrfs_tkey min = { tree, BTRFS_ROOT_ITEM_KEY, 0 };
	const struct btrfs_tkey max = { tree, BTRFS_ROOT_ITEM_KEY, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, fd, BTRFS_ROOT_TREE_OBJECTID, min, max);

	if (ret == 0 && (ret = btrfs_tree_next(&r, &it)) == 0)
		ret = -ENOENT;
	if (ret > 0 && it.len < offsetof(struct btrfs_root_item, level) + 1)
		ret = -ENOENT;	/* the kernel's tree checker refuses a short one */
	if (ret > 0) {
		*bytenr = btrfs_get64(it.data + offsetof(struct btrfs_root_item, bytenr));
		*gen = btrfs_get64(it.data + offsetof(struct btrfs_root_item, generation));
		*level = it.data[offsetof(struct btrfs_root_item, level)];
		ret = 0;
	}
	btrfs_tree_close(&r);
	return ret;
}

/* ---- reading and checking a block ---- */

static const struct btrfs_cmap_chunk *chunk_of(const struct btrfs_devtree *t, uint64_t logical)
{
	for (size_t i = 0; i < t->nr_c; i++)
		if (logical >= t->c[i].start && logical - t->c[i].start < t->c[i].len)
			return &t->c[i];
	return NULL;
}

static const struct dt_dev *dev_of(const struct btrfs_devtree *t, uint64_t devid)
{
	for (size_t i = 0; i < t->nr_devs; i++)
		if (t->devs[i].devid == devid)
			return &t->devs[i];
	return NULL;
}

/* Key i of a block (an item's or a pointer's: both start with the key). */
static struct btrfs_tkey key_at(const unsigned char *b, uint32_t i, bool leaf)
{
	const unsigned char *k = b + BTRFS_H_SIZE + (size_t)i * (leaf ? ITEM_SIZE : PTR_SIZE);

	return (struct btrfs_tkey){ btrfs_get64(k), k[8], btrfs_get64(k + 9) };
}

/* Items inside the block, keys strictly increasing; nritems already bounded. */
static enum btrfs_block_why check_items(const struct btrfs_devtree *t, const unsigned char *b,
					uint32_t n, bool leaf)
{
	uint32_t room = t->nodesize - BTRFS_H_SIZE;

	for (uint32_t i = 0; i < n; i++) {
		struct btrfs_tkey a = key_at(b, i, leaf), z = key_at(b, i + 1 < n ? i + 1 : i, leaf);
		const unsigned char *item = b + BTRFS_H_SIZE + (size_t)i * ITEM_SIZE;

		if (leaf && ((uint64_t)btrfs_get32(item + ITEM_OFF) + btrfs_get32(item + ITEM_LEN) >
			     room || btrfs_get32(item + ITEM_OFF) < (uint64_t)n * ITEM_SIZE))
			return BTRFS_BLOCK_ITEMS;
		if (i + 1 < n && btrfs_key_cmp(&a, &z) >= 0)
			return BTRFS_BLOCK_KEY;
	}
	return BTRFS_BLOCK_OK;
}

/*
 * One copy of the block at logical against what its parent (or ROOT_ITEM)
 * says: level, generation and first key (first: NULL for the root).
 */
static enum btrfs_block_why check_copy(const struct btrfs_devtree *t, const unsigned char *b,
				       uint64_t logical, const struct dt_dev *d, unsigned level,
				       uint64_t gen, const struct btrfs_tkey *first)
{
	enum btrfs_block_why why = btrfs_block_header(b, t->nodesize, logical, t->fsid);
	uint32_t n = btrfs_get32(b + BTRFS_H_NRITEMS);
	bool leaf = level == 0;
	struct btrfs_tkey k = key_at(b, 0, leaf);

	if (why == BTRFS_BLOCK_FSID && d)
		why = btrfs_block_header(b, t->nodesize, logical, d->fsid);
	if (why != BTRFS_BLOCK_OK)
		return why;
	if (b[BTRFS_H_LEVEL] != level)
		return BTRFS_BLOCK_LEVEL;
	if (btrfs_get64(b + BTRFS_H_GENERATION) != gen)
		return BTRFS_BLOCK_GEN;
	if (t->tree < BTRFS_FIRST_FREE_OBJECTID && btrfs_get64(b + BTRFS_H_OWNER) != t->tree)
		return BTRFS_BLOCK_OWNER;
	if ((uint64_t)n * (leaf ? ITEM_SIZE : PTR_SIZE) > t->nodesize - BTRFS_H_SIZE ||
	    (!leaf && !n))
		return BTRFS_BLOCK_ITEMS;
	if ((why = check_items(t, b, n, leaf)) != BTRFS_BLOCK_OK)
		return why;
	if (first && n && btrfs_key_cmp(first, &k))
		return BTRFS_BLOCK_KEY;
	return BTRFS_BLOCK_OK;
}

/* Every copy of the block at logical, into buf until one passes: its verdict, or the first's. */
static enum btrfs_block_why read_copies(const struct btrfs_devtree *t, unsigned char *buf,
					uint64_t logical, unsigned level, uint64_t gen,
					const struct btrfs_tkey *first)
{
	const struct btrfs_cmap_chunk *c = chunk_of(t, logical);
	enum btrfs_block_why first_why = BTRFS_BLOCK_READ_ERR, why;

	if (!c || logical - c->start + t->nodesize > c->len || !btrfs_cmap_readable(c))
		return BTRFS_BLOCK_READ_ERR;
	for (unsigned i = 0; i < c->n; i++) {
		const struct dt_dev *d = dev_of(t, c->st[i].devid);
		uint64_t phys;
		unsigned copy;

		if (!d || !btrfs_cmap_on_stripe(c, i, logical, &phys, &copy))
			continue;
		why = pread(d->fd, buf, t->nodesize, (off_t)phys) == (ssize_t)t->nodesize ?
		      check_copy(t, buf, logical, d, level, gen, first) : BTRFS_BLOCK_READ_ERR;
		if (why == BTRFS_BLOCK_OK)
			return why;
		if (first_why == BTRFS_BLOCK_READ_ERR)
			first_why = why;
	}
	return first_why;
}

static void log_bad(struct btrfs_devtree *t, uint64_t logical, uint64_t parent, unsigned level,
		    enum btrfs_block_why why)
{
	struct btrfs_devtree_log *log = t->log;

	for (unsigned i = 0; i < log->nr; i++)
		if (log->bad[i].tree == t->tree && log->bad[i].logical == logical)
			return;		/* a range read again meets it again */
	if (log->nr == BTRFS_DEVTREE_BAD_MAX) {
		log->more++;
		return;
	}
	log->bad[log->nr++] = (struct btrfs_devtree_bad){ t->tree, logical, parent,
							  (uint8_t)level, why };
}

/*
 * Read the block at logical into level l: true if a copy passes, read
 * twice before it is called bad (what reads bad twice is damage).
 */
static bool load(struct btrfs_devtree *t, unsigned l, uint64_t logical, uint64_t gen,
		 uint64_t parent, const struct btrfs_tkey *first)
{
	struct dt_level *v = &t->lv[l];
	enum btrfs_block_why why = read_copies(t, v->buf, logical, l, gen, first);

	if (why != BTRFS_BLOCK_OK)
		why = read_copies(t, v->buf, logical, l, gen, first);
	t->log->blocks++;
	v->valid = why == BTRFS_BLOCK_OK;
	v->logical = logical;
	v->slot = 0;
	v->nritems = v->valid ? btrfs_get32(v->buf + BTRFS_H_NRITEMS) : 0;
	if (!v->valid)
		log_bad(t, logical, parent, l, why);
	return v->valid;
}

/* The last pointer of node v whose key is at most k (0 if none is). */
static uint32_t seek_slot(const struct dt_level *v, const struct btrfs_tkey *k)
{
	uint32_t s = 0;

	while (s + 1 < v->nritems) {
		struct btrfs_tkey next = key_at(v->buf, s + 1, false);

		if (btrfs_key_cmp(&next, k) > 0)
			break;
		s++;
	}
	return s;
}

/*
 * From node level l (valid, its slot set) down to a leaf, each child read
 * at its parent's slot; with seek, each slot chosen by t->min.  A child
 * that cannot be read leaves its level invalid (nothing below it is read).
 */
static void descend(struct btrfs_devtree *t, unsigned l, bool seek)
{
	for (; l > 0; l--) {
		struct dt_level *v = &t->lv[l];
		const unsigned char *p;
		struct btrfs_tkey first;

		if (seek)
			v->slot = seek_slot(v, &t->min);
		p = v->buf + BTRFS_H_SIZE + (size_t)v->slot * PTR_SIZE;
		first = key_at(v->buf, v->slot, false);
		if (!load(t, l - 1, btrfs_get64(p + PTR_BLOCK), btrfs_get64(p + PTR_GEN), v->logical,
			  &first))
			return;
	}
}

/* Move to the next leaf: false at the tree's end. */
static bool advance(struct btrfs_devtree *t)
{
	for (unsigned l = 1; l <= t->top; l++) {
		struct dt_level *v = &t->lv[l];

		if (!v->valid || v->slot + 1 >= v->nritems)
			continue;
		v->slot++;
		for (unsigned k = 0; k < l; k++)
			t->lv[k].valid = false;
		descend(t, l, false);
		return true;
	}
	return false;
}

static void fill_item(const struct dt_level *v, uint32_t i, struct btrfs_tree_item *it)
{
	const unsigned char *item = v->buf + BTRFS_H_SIZE + (size_t)i * ITEM_SIZE;

	it->key = key_at(v->buf, i, true);
	it->transid = btrfs_get64(v->buf + BTRFS_H_GENERATION);
	it->len = btrfs_get32(item + ITEM_LEN);
	it->data = v->buf + BTRFS_H_SIZE + btrfs_get32(item + ITEM_OFF);
}

int btrfs_devtree_next(struct btrfs_devtree *t, struct btrfs_tree_item *it)
{
	while (!t->done) {
		struct dt_level *v = &t->lv[0];

		if (!v->valid || v->slot >= v->nritems) {
			t->done = !advance(t);
			continue;
		}
		fill_item(v, v->slot++, it);
		if (t->have_last && btrfs_key_cmp(&it->key, &t->last) <= 0) {
			/* a leaf out of order with the one before: not a loop, a finding */
			log_bad(t, v->logical, t->lv[1].logical, 0, BTRFS_BLOCK_KEY);
			v->slot = v->nritems;
			continue;
		}
		t->last = it->key;
		t->have_last = true;
		if (btrfs_key_cmp(&it->key, &t->min) < 0)
			continue;
		if (btrfs_key_cmp(&it->key, &t->max) > 0)
			break;
		return 1;
	}
	t->done = true;
	return 0;
}

/* ---- open and close ---- */

static void note_tree(struct btrfs_devtree_log *log, uint64_t tree)
{
	for (unsigned i = 0; i < log->nr_trees; i++)
		if (log->trees[i] == tree)
			return;
	if (log->nr_trees < sizeof(log->trees) / sizeof(log->trees[0]))
		log->trees[log->nr_trees++] = tree;
}

static int start(struct btrfs_devtree *t, int fd)
{
	uint64_t bytenr, gen;
	uint8_t level;
	int ret;

	if ((ret = fs_facts(t, fd)) < 0 || (ret = read_chunks(t, fd)) < 0 ||
	    (ret = find_root(fd, t->tree, &bytenr, &gen, &level)) < 0)
		return ret;
	note_tree(t->log, t->tree);
	if (level >= MAX_LEVEL) {
		log_bad(t, bytenr, 0, level, BTRFS_BLOCK_LEVEL);
		t->done = true;
		return 0;
	}
	t->top = level;
	for (unsigned l = 0; l <= level; l++)
		if (posix_memalign((void **)&t->lv[l].buf, DT_ALIGN, t->nodesize))
			return -ENOMEM;
	if (load(t, level, bytenr, gen, 0, NULL))
		descend(t, level, true);
	return 0;
}

int btrfs_devtree_open(struct btrfs_devtree **out, int fd, uint64_t tree, struct btrfs_tkey min,
		       struct btrfs_tkey max, struct btrfs_devtree_log *log)
{
	struct btrfs_devtree *t = calloc(1, sizeof(*t));
	int ret;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	*t = (struct btrfs_devtree){ .tree = tree, .min = min, .max = max, .log = log };
	if ((ret = start(t, fd)) < 0) {
		btrfs_devtree_close(t);
		return ret;
	}
	*out = t;
	return 0;
}

void btrfs_devtree_close(struct btrfs_devtree *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nr_devs; i++)
		close(t->devs[i].fd);
	for (size_t i = 0; i < t->nr_c; i++)
		free(t->c[i].st);
	for (unsigned l = 0; l < MAX_LEVEL; l++)
		free(t->lv[l].buf);
	free(t->devs);
	free(t->c);
	free(t);
}
