/*
 * btrfs_locate: the owners of a range of one btrfs device, for fscrub
 * locate (cmd/owners.h).
 *
 * A byte of a device is a superblock copy (64 KiB, 64 MiB, 256 GiB), the
 * unused first MiB, unallocated space, or part of a device extent: a
 * stripe of a chunk (the device tree's DEV_EXTENT items say which, the
 * chunk tree's CHUNK_ITEM how it is laid out).  In a SINGLE, DUP or RAID1*
 * chunk every stripe is a whole copy, so the byte's logical address is the
 * chunk's plus its offset in the stripe.  The striped profiles cut the
 * chunk into stripe_len pieces (64 KiB) dealt round the stripes: the
 * device's f-th piece of stripe i holds, in RAID0, logical piece
 * f * num_stripes + i; in RAID10 (sub_stripes copies of each piece side
 * by side) f * (num_stripes / sub_stripes) + i / sub_stripes; in RAID5/6
 * the f-th full stripe, whose data pieces start at stripe f mod
 * num_stripes and are followed by its parity (P, and Q for RAID6), as the
 * kernel's btrfs_map_block() deals them: piece p of the full stripe on
 * stripe (f + p) mod num_stripes, so stripe i holds data piece
 * (i - f) mod num_stripes if that is below the data stripes, else parity,
 * which belongs to no file.  A data chunk's logical address is
 * named by LOGICAL_INO_V2 (subvolume, inode and the file's offset of that
 * byte; one call per sector) and the scan's own naming (btrfs_path_in():
 * INO_PATHS, and INO_LOOKUP for the subvolumes below the mounted one); a metadata chunk's by the
 * extent tree: the tree block that covers it and the tree that owns it.
 */
#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "backends/btrfs/btrfs_check.h"
#include "backends/btrfs/btrfs_chunkmap.h"
#include "backends/btrfs/btrfs_trees.h"
#include "cmd/owners.h"

/* Where btrfs keeps its superblock copies on every device, and their size. */
static const uint64_t sb_copies[] = { 64ULL << 10, 64ULL << 20, 256ULL << 30 };
#define SB_SIZE 4096ULL
/* btrfs allocates nothing in a device's first MiB (room for a boot loader). */
#define RESERVED_START (1ULL << 20)
/* LOGICAL_INO_V2's answer: 64 KiB of (inode, offset, root) triples, thousands of files. */
#define LOGICAL_BUF (64 * 1024)
/* At most this many sectors are asked of LOGICAL_INO_V2 per range (4 GiB of 4 KiB). */
#define MAX_DATA_SECTORS (1u << 20)
/* Profiles whose every stripe is a whole copy of the chunk. */
#define WHOLE_COPY (BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 | \
		    BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4)

struct dev_extent {
	uint64_t phys, len, chunk;	/* its bytes on the device; the chunk's logical start */
};

struct bloc {
	const struct loc_fs *lfs;
	uint64_t devid, total;		/* the device and its size */
	uint32_t nodesize, sectorsize;
	uint64_t mnt_root;		/* the subvolume mounted */
	struct dev_extent *de;
	size_t nr_de;
	struct loc_owners *out;
	unsigned char *buf;		/* LOGICAL_BUF */
};

int locate_btrfs_device(int fd, dev_t devno, uint64_t *devid, uint64_t *size)
{
	struct btrfs_ioctl_fs_info_args fi = { 0 };

	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return -errno;
	for (uint64_t id = 1; id <= fi.max_id; id++) {
		struct btrfs_ioctl_dev_info_args di = { .devid = id };
		struct stat st;

		if (ioctl(fd, BTRFS_IOC_DEV_INFO, &di) < 0 ||
		    stat((const char *)di.path, &st) < 0 || st.st_rdev != devno)
			continue;
		*devid = id;
		*size = di.total_bytes;
		return 0;
	}
	return -ENODEV;
}

/* The devid of the filesystem's device fs->devno, its size, the geometry. */
static int find_device(struct bloc *b)
{
	struct btrfs_ioctl_fs_info_args fi = { 0 };
	struct btrfs_ioctl_ino_lookup_args lk = { .objectid = BTRFS_FIRST_FREE_OBJECTID };

	if (ioctl(b->lfs->fd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return -errno;
	b->nodesize = fi.nodesize;
	b->sectorsize = fi.sectorsize;
	if (ioctl(b->lfs->fd, BTRFS_IOC_INO_LOOKUP, &lk) == 0)
		b->mnt_root = lk.treeid;
	return locate_btrfs_device(b->lfs->fd, b->lfs->devno, &b->devid, &b->total);
}

/* The device's DEV_EXTENTs that end after off and start before end. */
static int read_dev_extents(struct bloc *b, uint64_t off, uint64_t end)
{
	struct btrfs_tkey min = { b->devid, BTRFS_DEV_EXTENT_KEY, 0 };
	struct btrfs_tkey max = { b->devid, BTRFS_DEV_EXTENT_KEY, end - 1 };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int got;

	if (btrfs_tree_open(&r, b->lfs->fd, BTRFS_DEV_TREE_OBJECTID, min, max) < 0)
		return -ENOMEM;
	while ((got = btrfs_tree_next(&r, &it)) > 0) {
		uint64_t len, chunk;

		if (it.key.type != BTRFS_DEV_EXTENT_KEY || it.len < sizeof(struct btrfs_dev_extent))
			continue;
		len = btrfs_get64(it.data + offsetof(struct btrfs_dev_extent, length));
		chunk = btrfs_get64(it.data + offsetof(struct btrfs_dev_extent, chunk_offset));
		if (it.key.offset + len <= off)
			continue;
		b->de = xrealloc(b->de, (b->nr_de + 1) * sizeof(*b->de));
		b->de[b->nr_de++] = (struct dev_extent){ it.key.offset, len, chunk };
	}
	btrfs_tree_close(&r);
	return got;
}

/* How the chunk a device extent belongs to is laid out. */
struct chunk_layout {
	uint64_t type;		/* BTRFS_BLOCK_GROUP_*, 0: not found */
	uint64_t stripe_len;
	uint32_t nr, sub;	/* stripes, and copies side by side (RAID10) */
	uint32_t index;		/* the stripe that is this device extent; nr if none */
};

/* The layout of the chunk of device extent d (type 0 if it cannot be read). */
static struct chunk_layout chunk_layout(struct bloc *b, const struct dev_extent *d)
{
	struct btrfs_tkey k = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, d->chunk };
	struct chunk_layout l = { 0 };
	struct btrfs_cmap_chunk c;
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;

	if (btrfs_tree_open(&r, b->lfs->fd, BTRFS_CHUNK_TREE_OBJECTID, k, k) < 0)
		return l;
	/* A stripe_len to divide by, besides the stripes the parse asks for. */
	if (btrfs_tree_next(&r, &it) > 0 && btrfs_cmap_parse(&it, &c) > 0) {
		if (c.stripe_len)
			l = (struct chunk_layout){ .type = c.type, .stripe_len = c.stripe_len,
						   .nr = c.n, .sub = c.sub, .index = c.n };
		for (uint32_t i = 0; l.type && i < c.n; i++)
			if (c.st[i].devid == b->devid && c.st[i].offset == d->phys) {
				l.index = i;
				break;
			}
		free(c.st);
	}
	btrfs_tree_close(&r);
	return l;
}

/* The path of (root, inode), in any subvolume below the mounted one: malloc'ed or NULL. */
static char *file_path(struct bloc *b, uint64_t root, uint64_t inode)
{
	struct strbuf rel = STRBUF_INIT, sb = STRBUF_INIT;

	if (btrfs_path_in(b->lfs->fd, b->mnt_root, root, inode, &rel))
		strbuf_addf(&sb, "%s/%s", strcmp(b->lfs->target, "/") ? b->lfs->target : "",
			    rel.buf);
	strbuf_release(&rel);
	return sb.len ? strbuf_detach(&sb) : (strbuf_release(&sb), NULL);
}

/* Extend the owner that ends at off with the same file and offset, or add one. */
static void add_file(struct bloc *b, uint64_t off, uint64_t len, uint64_t root, uint64_t ino,
		     uint64_t file_off)
{
	struct loc_owner *o;

	for (size_t i = b->out->n; i-- > 0;) {
		o = &b->out->v[i];
		if (o->kind == LOC_FILE && o->root == root && o->ino == ino &&
		    o->off + o->len == off && o->file_off + o->len == file_off) {
			o->len += len;
			return;
		}
	}
	o = loc_owner_add(b->out, LOC_FILE, off, len, "data", file_path(b, root, ino));
	o->root = root;
	o->ino = ino;
	o->file_off = file_off;
}

/* Extend the last owner if it is of this kind and ends at off, or add one. */
static void add_piece(struct bloc *b, enum loc_kind kind, uint64_t off, uint64_t len,
		      const char *what)
{
	struct loc_owner *o = b->out->n ? &b->out->v[b->out->n - 1] : NULL;

	if (o && o->kind == kind && o->off + o->len == off && !strcmp(o->what, what))
		o->len += len;
	else
		loc_owner_add(b->out, kind, off, len, what, NULL);
}

/* The device's bytes [a, e), in one sector whose logical address is lg (sector-aligned). */
static void data_sector(struct bloc *b, uint64_t a, uint64_t e, uint64_t lg, uint64_t in_sector)
{
	struct btrfs_data_container *c = (void *)b->buf;
	struct btrfs_ioctl_logical_ino_args args = {
		.logical = lg, .size = LOGICAL_BUF, .inodes = (uintptr_t)b->buf,
	};
	int ret;

	memset(b->buf, 0, LOGICAL_BUF);
	ret = ioctl(b->lfs->fd, BTRFS_IOC_LOGICAL_INO_V2, &args);
	if (ret < 0 && errno == ENOENT) {
		/* The extent tree is the committed one: newer data shows after the next commit. */
		add_piece(b, LOC_FREE, a, e - a,
			  "free space (in a data chunk), as of the last transaction commit");
		return;
	}
	if (ret < 0 || !c->elem_cnt) {
		add_piece(b, LOC_UNKNOWN, a, e - a, ret < 0 ? "data (LOGICAL_INO_V2 failed)" :
			  "allocated data no file refers to (an extent partly overwritten)");
		return;
	}
	for (uint32_t i = 0; i + 2 < c->elem_cnt; i += 3)
		add_file(b, a, e - a, c->val[i + 2], c->val[i], c->val[i + 1] + in_sector);
}

/* [pos, pos + n) of a data stripe that starts at logical lg. */
static void data_piece(struct bloc *b, uint64_t pos, uint64_t n, uint64_t lg)
{
	uint64_t ss = b->sectorsize, end = pos + n, steps = 0;

	for (uint64_t a = pos; a < end && steps < MAX_DATA_SECTORS; steps++) {
		uint64_t l = lg + (a - pos), in = l % ss;
		uint64_t e = a + (ss - in) < end ? a + (ss - in) : end;

		data_sector(b, a, e, l - in, in);
		a = e;
	}
}

/* The tree blocks (start, length) of logical [lo, hi), in order; the count. */
static size_t tree_blocks(struct bloc *b, uint64_t lo, uint64_t hi, uint64_t (*v)[2],
			  size_t max)
{
	struct btrfs_tkey min = { lo > b->nodesize ? lo - b->nodesize + 1 : 0,
				  BTRFS_EXTENT_ITEM_KEY, 0 };
	struct btrfs_tkey mx = { hi - 1, BTRFS_METADATA_ITEM_KEY, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	size_t n = 0;

	if (btrfs_tree_open(&r, b->lfs->fd, BTRFS_EXTENT_TREE_OBJECTID, min, mx) < 0)
		return 0;
	while (n < max && btrfs_tree_next(&r, &it) > 0) {
		uint64_t len = it.key.type == BTRFS_METADATA_ITEM_KEY ? b->nodesize : it.key.offset;

		if ((it.key.type != BTRFS_METADATA_ITEM_KEY && it.key.type != BTRFS_EXTENT_ITEM_KEY) ||
		    it.key.objectid + len <= lo)
			continue;
		v[n][0] = it.key.objectid;
		v[n++][1] = len;
	}
	btrfs_tree_close(&r);
	return n;
}

/* A tree block's piece [a, e): "a tree block of the extent tree". */
static void tree_piece(struct bloc *b, uint64_t a, uint64_t e, uint64_t start)
{
	struct strbuf owners = STRBUF_INIT, what = STRBUF_INIT;

	if (btrfs_tree_block_owners(b->lfs->fd, start, 1, &owners))
		strbuf_addf(&what, "a tree block of the %s (logical %llu)", owners.buf,
			    (unsigned long long)start);
	else
		strbuf_addf(&what, "a tree block (logical %llu, owner not recorded in place)",
			    (unsigned long long)start);
	loc_owner_add(b->out, LOC_META, a, e - a, what.buf, NULL);
	strbuf_release(&owners);
	strbuf_release(&what);
}

/* Tree blocks looked up per metadata piece: a piece of 64 nodes of 16 KiB, 1 MiB. */
#define MAX_TREE_BLOCKS 64

/* [pos, pos + n) of a metadata or system stripe that starts at logical lg. */
static void meta_piece(struct bloc *b, uint64_t pos, uint64_t n, uint64_t lg)
{
	uint64_t v[MAX_TREE_BLOCKS][2];
	size_t nr = tree_blocks(b, lg, lg + n, v, MAX_TREE_BLOCKS);
	uint64_t at = lg;

	for (size_t i = 0; i < nr && at < lg + n; i++) {
		uint64_t s = v[i][0] > at ? v[i][0] : at;
		uint64_t e = v[i][0] + v[i][1] < lg + n ? v[i][0] + v[i][1] : lg + n;

		if (e <= s)
			continue;
		if (s > at)
			add_piece(b, LOC_FREE, pos + (at - lg), s - at,
				  "free space (in a metadata chunk)");
		tree_piece(b, pos + (s - lg), pos + (e - lg), v[i][0]);
		at = e;
	}
	if (at < lg + n)
		add_piece(b, at - lg >= MAX_TREE_BLOCKS * (uint64_t)b->nodesize ? LOC_UNKNOWN :
			  LOC_FREE, pos + (at - lg), lg + n - at,
			  at - lg >= MAX_TREE_BLOCKS * (uint64_t)b->nodesize ?
			  "metadata (not looked up: too long a range)" :
			  "free space (in a metadata chunk)");
}

/* [pos, pos + n) of a chunk of this type, at logical lg. */
static void logical_piece(struct bloc *b, uint64_t type, uint64_t pos, uint64_t n, uint64_t lg)
{
	if (type & BTRFS_BLOCK_GROUP_DATA)
		data_piece(b, pos, n, lg);
	else if (type & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM))
		meta_piece(b, pos, n, lg);
	else
		add_piece(b, LOC_UNKNOWN, pos, n, "a chunk of unknown type");
}

/*
 * The logical address of the device's f-th stripe_len piece of stripe
 * l->index, of the chunk at logical chunk; false for RAID5/6 parity, which
 * *parity then names (0: P, 1: Q) with the full stripe's logical start in *lg.
 */
static bool striped_logical(const struct chunk_layout *l, uint64_t chunk, uint64_t f,
			    uint64_t *lg, int *parity)
{
	uint64_t piece;

	if (l->type & BTRFS_BLOCK_GROUP_RAID0) {
		piece = f * l->nr + l->index;
	} else if (l->type & BTRFS_BLOCK_GROUP_RAID10) {
		uint32_t sub = l->sub ? l->sub : 2;	/* RAID10's copies of a piece */

		piece = f * (l->nr / sub) + l->index / sub;
	} else {
		uint32_t data = l->nr - ((l->type & BTRFS_BLOCK_GROUP_RAID6) ? 2 : 1);
		uint32_t p = (uint32_t)((l->index + l->nr - f % l->nr) % l->nr);

		if (p >= data) {
			*parity = (int)(p - data);
			*lg = chunk + f * data * l->stripe_len;
			return false;
		}
		piece = f * data + p;
	}
	*lg = chunk + piece * l->stripe_len;
	return true;
}

/* [pos, pos + n) of device extent d, a stripe of a striped chunk laid out as l. */
static void striped_piece(struct bloc *b, const struct dev_extent *d,
			  const struct chunk_layout *l, uint64_t pos, uint64_t n)
{
	static const char *const parity_name[] = { "P", "Q" };
	uint64_t end = pos + n;

	for (uint64_t a = pos; a < end;) {
		uint64_t f = (a - d->phys) / l->stripe_len, in = (a - d->phys) % l->stripe_len;
		uint64_t e = a + (l->stripe_len - in) < end ? a + (l->stripe_len - in) : end;
		uint64_t lg;
		int parity;

		if (striped_logical(l, d->chunk, f, &lg, &parity)) {
			logical_piece(b, l->type, a, e - a, lg + in);
		} else {
			struct strbuf what = STRBUF_INIT;

			strbuf_addf(&what, "RAID%s parity (%s) of logical %llu",
				    (l->type & BTRFS_BLOCK_GROUP_RAID6) ? "6" : "5",
				    parity_name[parity & 1], (unsigned long long)lg);
			add_piece(b, LOC_META, a, e - a, what.buf);
			strbuf_release(&what);
		}
		a = e;
	}
}

/* Striped profiles this file follows (see the header). */
#define STRIPED (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10 | \
		 BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)

/* [pos, pos + n) inside device extent d. */
static void chunk_piece(struct bloc *b, const struct dev_extent *d, uint64_t pos, uint64_t n)
{
	struct chunk_layout l = chunk_layout(b, d);
	uint64_t profile = l.type & BTRFS_BLOCK_GROUP_PROFILE_MASK;

	if (!l.type || (profile & ~(WHOLE_COPY | STRIPED)))
		add_piece(b, LOC_UNKNOWN, pos, n, l.type ? "a chunk of an unknown profile" :
			  "a chunk whose item cannot be read");
	else if (!(profile & STRIPED))
		logical_piece(b, l.type, pos, n, d->chunk + (pos - d->phys));
	else if (l.index == l.nr || ((profile & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)) &&
				     l.nr < ((profile & BTRFS_BLOCK_GROUP_RAID6) ? 3u : 2u)))
		add_piece(b, LOC_UNKNOWN, pos, n, "a stripe its chunk item does not list");
	else
		striped_piece(b, d, &l, pos, n);
}

/* The superblock copy at pos, or -1; *next: the first copy after pos. */
static int sb_copy_at(uint64_t pos, uint64_t *next)
{
	*next = UINT64_MAX;
	for (int i = 0; i < (int)(sizeof(sb_copies) / sizeof(*sb_copies)); i++) {
		if (pos >= sb_copies[i] && pos < sb_copies[i] + SB_SIZE)
			return i;
		if (sb_copies[i] > pos && sb_copies[i] < *next)
			*next = sb_copies[i];
	}
	return -1;
}

/* The device extent at pos, or NULL; *next: the first one after pos. */
static const struct dev_extent *extent_at(const struct bloc *b, uint64_t pos, uint64_t *next)
{
	*next = UINT64_MAX;
	for (size_t i = 0; i < b->nr_de; i++) {
		if (pos >= b->de[i].phys && pos < b->de[i].phys + b->de[i].len)
			return &b->de[i];
		if (b->de[i].phys > pos && b->de[i].phys < *next)
			*next = b->de[i].phys;
	}
	return NULL;
}

static uint64_t min3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a < b ? a : b;

	return m < c ? m : c;
}

/* The piece from pos: what it is, added; its end. */
static uint64_t piece(struct bloc *b, uint64_t pos, uint64_t end)
{
	uint64_t next_sb, next_de, e;
	int sb = sb_copy_at(pos, &next_sb);
	const struct dev_extent *d = extent_at(b, pos, &next_de);

	if (sb >= 0) {
		e = min3(sb_copies[sb] + SB_SIZE, end, b->total);
		add_piece(b, LOC_META, pos, e - pos, "a superblock copy");
	} else if (d) {
		e = min3(d->phys + d->len, end, next_sb);
		chunk_piece(b, d, pos, e - pos);
	} else {
		e = min3(min3(next_sb, next_de, end), b->total,
			 pos < RESERVED_START ? RESERVED_START : UINT64_MAX);
		add_piece(b, LOC_FREE, pos, e - pos, pos < RESERVED_START ?
			  "the unused first MiB of a btrfs device" : "unallocated space");
	}
	return e;
}

int locate_btrfs(const struct loc_fs *fs, uint64_t off, uint64_t len, struct loc_owners *out)
{
	struct bloc b = { .lfs = fs, .out = out };
	uint64_t end = off + len;
	int ret = find_device(&b);

	if (!ret)
		ret = read_dev_extents(&b, off, end);
	if (ret < 0) {
		free(b.de);
		return ret;
	}
	b.buf = xmalloc(LOGICAL_BUF);
	for (uint64_t pos = off; pos < end && pos < b.total;)
		pos = piece(&b, pos, end);
	free(b.buf);
	free(b.de);
	return 0;
}
