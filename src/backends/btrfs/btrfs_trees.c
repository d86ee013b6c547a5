/*
 * btrfs_trees: a TREE_SEARCH_V2 streaming reader (see btrfs_trees.h).
 *
 * Each refill asks the kernel for every key in [cursor, max]; the kernel
 * fills the buffer with whole items and says how many (nr_items).  The
 * cursor then moves to the key just after the last item copied: offset + 1,
 * carrying into type and objectid.  An empty answer ends the range.
 */
#include "backends/btrfs/btrfs_trees.h"

#include "backends/btrfs/btrfs_devtree.h"

#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/ioctl.h>

#include "lib/strbuf.h"

uint64_t btrfs_inode_stamp(const unsigned char *inode_item)
{
	const unsigned char *ctime = inode_item + offsetof(struct btrfs_inode_item, ctime);
	/* a large odd multiplier: the sequence spreads over the time's bits */
	uint64_t seq = btrfs_get64(inode_item + offsetof(struct btrfs_inode_item, sequence));

	return seq * 0x9E3779B97F4A7C15ULL ^ (btrfs_get64(ctime) * 1000000000ULL +
					      btrfs_get32(ctime + 8));
}

int btrfs_grow(void **v, size_t *alloc, size_t need, size_t size)
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

uint64_t btrfs_get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

uint32_t btrfs_get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

uint16_t btrfs_get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

int btrfs_key_cmp(const struct btrfs_tkey *a, const struct btrfs_tkey *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return 0;
}

int btrfs_tree_open(struct btrfs_tree_reader *r, int fd, uint64_t tree,
		    struct btrfs_tkey min, struct btrfs_tkey max)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->tree = tree;
	r->next = min;
	r->max = max;
	r->args = malloc(sizeof(struct btrfs_ioctl_search_args_v2) + BTRFS_TREES_BUF);
	if (!r->args)
		return -ENOMEM;
	r->end = btrfs_key_cmp(&min, &max) > 0;
	return 0;
}

/* The key after k; false if k is the last key there is. */
static bool key_inc(struct btrfs_tkey *k)
{
	if (++k->offset)
		return true;
	if (k->type++ != UINT8_MAX)
		return true;
	k->type = 0;
	return ++k->objectid != 0;
}

static int refill(struct btrfs_tree_reader *r)
{
	struct btrfs_ioctl_search_args_v2 *a = r->args;
	struct btrfs_ioctl_search_key *k = &a->key;

	memset(k, 0, sizeof(*k));
	k->tree_id = r->tree;
	k->min_objectid = r->next.objectid;
	k->min_type = r->next.type;
	k->min_offset = r->next.offset;
	k->max_objectid = r->max.objectid;
	k->max_type = r->max.type;
	k->max_offset = r->max.offset;
	k->max_transid = UINT64_MAX;
	k->nr_items = UINT32_MAX;
	a->buf_size = BTRFS_TREES_BUF;
	if (ioctl(r->fd, BTRFS_IOC_TREE_SEARCH_V2, a) < 0)
		return -errno;
	r->calls++;
	r->pos = 0;
	r->left = k->nr_items;
	if (!r->left)
		r->end = true;
	return 0;
}

void btrfs_tree_fallback(struct btrfs_tree_reader *r, struct btrfs_devtree_log *log)
{
	r->devlog = log;
}

bool btrfs_tree_from_devices(const struct btrfs_tree_reader *r)
{
	return r->dev != NULL;
}

/* The tree is not loaded: read it from the devices from the cursor on. */
static int from_devices(struct btrfs_tree_reader *r)
{
	int ret = btrfs_devtree_open(&r->dev, r->fd, r->tree, r->next, r->max, r->devlog);

	if (ret < 0) {
		if (ret != -ENOENT)	/* ENOENT: no ROOT_ITEM, no such tree */
			r->devlog->err = ret;
		return -ENOENT;		/* as unloaded as before */
	}
	return 0;
}

static int next_from_devices(struct btrfs_tree_reader *r, struct btrfs_tree_item *it)
{
	int ret = btrfs_devtree_next(r->dev, it);

	if (ret > 0)
		r->items++;
	return ret;
}

int btrfs_tree_next(struct btrfs_tree_reader *r, struct btrfs_tree_item *it)
{
	struct btrfs_ioctl_search_args_v2 *a = r->args;
	struct btrfs_ioctl_search_header h;
	int ret;

	if (r->dev)
		return next_from_devices(r, it);
	if (!r->left) {
		if (r->end)
			return 0;
		ret = refill(r);
		if (ret == -ENOENT && r->devlog && (ret = from_devices(r)) == 0)
			return next_from_devices(r, it);
		if (ret < 0)
			return ret;
		if (!r->left)
			return 0;
	}
	if (r->pos + sizeof(h) > BTRFS_TREES_BUF)
		return -EIO;
	memcpy(&h, a->buf + r->pos, sizeof(h));
	if (r->pos + sizeof(h) + h.len > BTRFS_TREES_BUF)
		return -EIO;
	it->key.objectid = h.objectid;
	it->key.type = (uint8_t)h.type;
	it->key.offset = h.offset;
	it->transid = h.transid;
	it->len = h.len;
	it->data = a->buf + r->pos + sizeof(h);
	r->pos += sizeof(h) + h.len;
	r->left--;
	r->items++;
	r->next = it->key;
	if (!key_inc(&r->next) || btrfs_key_cmp(&r->next, &r->max) > 0)
		r->end = true;
	return 1;
}

void btrfs_tree_seek(struct btrfs_tree_reader *r, uint64_t tree, struct btrfs_tkey min,
		     struct btrfs_tkey max)
{
	btrfs_devtree_close(r->dev);
	r->dev = NULL;
	r->tree = tree;
	r->next = min;
	r->max = max;
	r->pos = 0;
	r->left = 0;
	r->end = btrfs_key_cmp(&min, &max) > 0;
}

void btrfs_tree_close(struct btrfs_tree_reader *r)
{
	btrfs_devtree_close(r->dev);
	r->dev = NULL;
	free(r->args);
	r->args = NULL;
	r->left = 0;
	r->end = true;
}

/* Names of the trees a tree block can belong to. */
const char *btrfs_tree_name(uint64_t root, char *buf, size_t size)
{
	switch (root) {
	case BTRFS_ROOT_TREE_OBJECTID: return "root tree";
	case BTRFS_EXTENT_TREE_OBJECTID: return "extent tree";
	case BTRFS_CHUNK_TREE_OBJECTID: return "chunk tree";
	case BTRFS_DEV_TREE_OBJECTID: return "device tree";
	case BTRFS_FS_TREE_OBJECTID: return "top-level subvolume (fs tree 5)";
	case BTRFS_CSUM_TREE_OBJECTID: return "checksum tree";
	case BTRFS_QUOTA_TREE_OBJECTID: return "quota tree";
	case BTRFS_UUID_TREE_OBJECTID: return "uuid tree";
	case BTRFS_FREE_SPACE_TREE_OBJECTID: return "free space tree";
	case BTRFS_DATA_RELOC_TREE_OBJECTID: return "data relocation tree";
	}
	if (root >= BTRFS_FIRST_FREE_OBJECTID && root <= BTRFS_LAST_FREE_OBJECTID) {
		snprintf(buf, size, "subvolume %llu", (unsigned long long)root);
		return buf;
	}
	snprintf(buf, size, "tree %llu", (unsigned long long)root);
	return buf;
}

/*
 * The owners of the tree blocks in [start, start + len): their extent items'
 * inline TREE_BLOCK_REFs (BTRFS_IOC_TREE_SEARCH on the extent tree), added
 * to out as "the extent tree, subvolume 256".  False if none is known (a
 * shared block has only a SHARED_BLOCK_REF, to its parent).
 */
bool btrfs_tree_block_owners(int fd, uint64_t start, uint64_t len, struct strbuf *out)
{
	struct btrfs_ioctl_search_args sa;
	struct btrfs_ioctl_search_key *k = &sa.key;
	uint64_t seen[16];
	unsigned nr_seen = 0;
	size_t pos = 0;

	memset(&sa, 0, sizeof(sa));
	k->tree_id = BTRFS_EXTENT_TREE_OBJECTID;
	k->min_objectid = start;
	k->max_objectid = start + len - 1;
	k->min_type = BTRFS_EXTENT_ITEM_KEY;
	k->max_type = BTRFS_METADATA_ITEM_KEY;
	k->max_offset = (uint64_t)-1;
	k->max_transid = (uint64_t)-1;
	k->nr_items = 64;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &sa) < 0)
		return false;
	for (uint32_t i = 0; i < k->nr_items; i++) {
		struct btrfs_ioctl_search_header h;
		const unsigned char *item;
		size_t off;

		if (pos + sizeof(h) > sizeof(sa.buf))
			break;
		memcpy(&h, sa.buf + pos, sizeof(h));
		item = (const unsigned char *)sa.buf + pos + sizeof(h);
		pos += sizeof(h) + h.len;
		if (pos > sizeof(sa.buf))
			break;
		off = sizeof(struct btrfs_extent_item);
		if (h.type == BTRFS_EXTENT_ITEM_KEY)
			off += sizeof(struct btrfs_tree_block_info);
		else if (h.type != BTRFS_METADATA_ITEM_KEY)
			continue;
		if (h.type == BTRFS_EXTENT_ITEM_KEY && h.len >= sizeof(struct btrfs_extent_item)) {
			struct btrfs_extent_item ei;

			memcpy(&ei, item, sizeof(ei));
			if (!(ei.flags & BTRFS_EXTENT_FLAG_TREE_BLOCK))
				continue;	/* data */
		}
		/* Inline refs: a type byte and a little-endian u64 offset. */
		while (off + 9 <= h.len) {
			uint64_t v = 0;
			unsigned j;

			for (int b = 7; b >= 0; b--)
				v = (v << 8) | item[off + 1 + b];
			if (item[off] == BTRFS_TREE_BLOCK_REF_KEY) {
				for (j = 0; j < nr_seen && seen[j] != v; j++)
					;
				if (j == nr_seen && nr_seen < 16) {
					char nb[48];

					seen[nr_seen++] = v;
					strbuf_addf(out, "%s%s", nr_seen > 1 ? ", " : "",
						    btrfs_tree_name(v, nb, sizeof(nb)));
				}
			}
			off += 9;
		}
	}
	return nr_seen > 0;
}
