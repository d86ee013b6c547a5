/*
 * btrfs_v1cache: the free space cache (space_cache=v1) against the used
 * extents (btrfs.space_cache).
 *
 * A filesystem without a free space tree may keep a v1 cache: for each
 * block group a FREE_SPACE header item in the root tree (key objectid
 * BTRFS_FREE_SPACE_OBJECTID, offset the block group's start) naming a
 * root-tree inode (its location key), the cache's generation and its
 * entry and bitmap counts.  The cache is that inode's data, pages of 4 KiB
 * (the kernel's page size on the architectures btrfs writes it from here):
 * page 0 starts with a crc32c per page (of the page after the crc array on
 * page 0, of the whole page elsewhere) and the generation (u64), then come
 * the entries, 17 bytes each (offset, bytes, type 1 extent / 2 bitmap),
 * packed into pages and never across one, then each bitmap's page (a bit
 * per sector from its entry's offset) from the page after the last entry.
 * The bytes are read from the device through the chunk map (O_DIRECT:
 * the kernel writes them past the block device's page cache).
 *
 * The kernel ignores a cache whose inode generation, page generation or
 * header generation disagree, whose crc fails, or all caches when the
 * superblock's cache_generation is not its generation (the filesystem was
 * last mounted without v1 caching): such a cache is counted for -v and
 * nothing else.  A cache it would load must not call free any byte of an
 * extent item: btrfs_check.c hands the used extents over in logical
 * order, the cache of the block group they enter is loaded then and kept
 * until the next.  A cache rewritten between the passes has another
 * generation: its finding is not the same one (the live rule, "changed").
 *
 * Only block groups of one copy per device range are read (single, DUP,
 * RAID1*): a cache in a striped chunk (RAID0/10/5/6) is counted as not
 * read.  Memory: the headers (48 bytes per block group) and the root
 * tree's few cache inodes and extents, and one loaded cache (its file,
 * 64 KiB per 256 MiB of block group, and its ranges).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "lib/crc32c.h"
#include "lib/sorted.h"

/* The kernel's page size, the cache's unit (x86, arm64 with 4 KiB pages). */
#define CACHE_PAGE 4096
/* btrfs_free_space_header: location key (17), generation, num_entries, num_bitmaps. */
#define HDR_INO 0
#define HDR_GENERATION 17
#define HDR_ENTRIES 25
#define HDR_BITMAPS 33
#define HDR_SIZE 41
/* btrfs_free_space_entry: offset, bytes, type (packed). */
#define ENTRY_SIZE 17
#define ENTRY_EXTENT 1
#define ENTRY_BITMAP 2
/*
 * A cache bigger than this is not read.  The kernel sizes a cache at 16
 * pages per 256 MiB of block group (a 10 GiB data chunk: 2.5 MiB), and
 * its crc array must fit page 0 (1022 pages): 64 MiB is far above both.
 */
#define MAX_CACHE_BYTES (64u << 20)
/* btrfs_inode_item: generation, transid, size. */
#define INODE_GENERATION 0
#define INODE_SIZE 16
/* btrfs_chunk: length, ..., type at 24, num_stripes at 44, stripes at 48. */
#define CHUNK_TYPE 24
#define CHUNK_NUM_STRIPES 44
#define CHUNK_STRIPES 48
/* Striped profiles: a device range does not hold the chunk's bytes in order. */
#define STRIPED (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10 | \
		 BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6)
/* File extent item: type at 20, disk_bytenr 21, disk_num_bytes 29, offset 37, num_bytes 45. */
#define FE_TYPE 20
#define FE_DISK_BYTENR 21
#define FE_OFFSET 37
#define FE_NUM_BYTES 45
#define FE_REG_SIZE 53
#define FE_COMPRESSION 16

struct v1_header {
	uint64_t bg, ino, generation, entries, bitmaps, transid;
};

struct v1_inode {
	uint64_t ino, generation, size;
};

struct v1_extent {
	uint64_t ino, file_off, disk, len;	/* disk 0: a hole or prealloc (zeros) */
};

struct v1_chunk {
	uint64_t start, len, type, devid, physical;
};

struct v1_dev {
	uint64_t devid;
	int fd;
};

struct v1cache {
	struct v1_header *h;
	size_t nr_h, alloc_h, cur;	/* cur: the loaded header + 1 (0: none) */
	struct v1_inode *in;
	size_t nr_in, alloc_in;
	struct v1_extent *ex;
	size_t nr_ex, alloc_ex;
	struct v1_chunk *c;
	size_t nr_c, alloc_c;
	struct v1_dev *d;
	size_t nr_d, alloc_d;
	bool stale_all;			/* cache_generation != generation */
	struct fst_range *r;		/* the loaded cache's free ranges, sorted */
	size_t nr_r, alloc_r, pos;
	uint64_t gen, transid;		/* of the loaded cache */
};

static struct v1cache *v1_of(struct pass *p)
{
	if (!p->v1)
		p->v1 = calloc(1, sizeof(*p->v1));
	return p->v1;
}

int btrfs_v1_root_item(struct pass *p, const struct btrfs_tree_item *it)
{
	const struct btrfs_tkey *k = &it->key;
	struct v1cache *v;

	if (k->objectid == BTRFS_FREE_SPACE_OBJECTID && k->type == 0 && it->len >= HDR_SIZE) {
		if (!(v = v1_of(p)) ||
		    btrfs_grow((void **)&v->h, &v->alloc_h, v->nr_h + 1, sizeof(*v->h)) < 0)
			return -ENOMEM;
		v->h[v->nr_h++] = (struct v1_header){
			.bg = k->offset, .ino = btrfs_get64(it->data + HDR_INO),
			.generation = btrfs_get64(it->data + HDR_GENERATION),
			.entries = btrfs_get64(it->data + HDR_ENTRIES),
			.bitmaps = btrfs_get64(it->data + HDR_BITMAPS), .transid = it->transid,
		};
		return 0;
	}
	/* Root-tree inodes: the caches (and the old inode cache, never read). */
	if (k->objectid < BTRFS_FIRST_FREE_OBJECTID || k->objectid > BTRFS_LAST_FREE_OBJECTID)
		return 0;
	if (k->type == BTRFS_INODE_ITEM_KEY && it->len >= INODE_SIZE + 8) {
		if (!(v = v1_of(p)) ||
		    btrfs_grow((void **)&v->in, &v->alloc_in, v->nr_in + 1, sizeof(*v->in)) < 0)
			return -ENOMEM;
		v->in[v->nr_in++] = (struct v1_inode){
			.ino = k->objectid, .generation = btrfs_get64(it->data + INODE_GENERATION),
			.size = btrfs_get64(it->data + INODE_SIZE),
		};
	} else if (k->type == BTRFS_EXTENT_DATA_KEY && it->len >= FE_REG_SIZE &&
		   it->data[FE_TYPE] != BTRFS_FILE_EXTENT_INLINE && !it->data[FE_COMPRESSION]) {
		uint64_t disk = btrfs_get64(it->data + FE_DISK_BYTENR);

		if (!(v = v1_of(p)) ||
		    btrfs_grow((void **)&v->ex, &v->alloc_ex, v->nr_ex + 1, sizeof(*v->ex)) < 0)
			return -ENOMEM;
		v->ex[v->nr_ex++] = (struct v1_extent){
			.ino = k->objectid, .file_off = k->offset,
			.disk = disk && it->data[FE_TYPE] == BTRFS_FILE_EXTENT_REG ?
				disk + btrfs_get64(it->data + FE_OFFSET) : 0,
			.len = btrfs_get64(it->data + FE_NUM_BYTES),
		};
	}
	return 0;
}

static int hdr_cmp(const void *a, const void *b)
{
	const struct v1_header *x = a, *y = b;

	return x->bg < y->bg ? -1 : x->bg > y->bg;
}

static int read_chunks(struct pass *p, struct v1cache *v)
{
	static const struct btrfs_tkey lo = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0 };
	static const struct btrfs_tkey hi = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
					      UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, p->fd, BTRFS_CHUNK_TREE_OBJECTID, lo, hi);

	while (ret == 0 && (ret = btrfs_tree_next(&r, &it)) > 0) {
		ret = 0;
		if (it.key.type != BTRFS_CHUNK_ITEM_KEY || it.len < CHUNK_STRIPES + 16 ||
		    !(it.data[CHUNK_NUM_STRIPES] | it.data[CHUNK_NUM_STRIPES + 1]))
			continue;
		if (btrfs_grow((void **)&v->c, &v->alloc_c, v->nr_c + 1, sizeof(*v->c)) < 0) {
			ret = -ENOMEM;
			break;
		}
		v->c[v->nr_c++] = (struct v1_chunk){
			.start = it.key.offset, .len = btrfs_get64(it.data),
			.type = btrfs_get64(it.data + CHUNK_TYPE),
			.devid = btrfs_get64(it.data + CHUNK_STRIPES),
			.physical = btrfs_get64(it.data + CHUNK_STRIPES + 8),
		};
	}
	p->calls += r.calls;
	btrfs_tree_close(&r);
	return ret;
}

int btrfs_v1_open(struct pass *p)
{
	struct v1cache *v = p->v1;

	if (!v || !v->nr_h)
		return 0;
	p->v1_caches = v->nr_h;
	/* The kernel drops every cache at mount when these differ (-1: v1 off). */
	if (!p->sb_ok || p->sb_cache_generation != p->sb_generation) {
		v->stale_all = true;
		p->v1_stale = v->nr_h;
		return 0;
	}
	sort_items(v->h, v->nr_h, sizeof(*v->h), hdr_cmp);
	return read_chunks(p, v);
}

/* An open O_DIRECT descriptor of device devid, or -1. */
static int dev_fd(struct pass *p, struct v1cache *v, uint64_t devid)
{
	struct btrfs_ioctl_dev_info_args d = { .devid = devid };
	int fd;

	for (size_t i = 0; i < v->nr_d; i++)
		if (v->d[i].devid == devid)
			return v->d[i].fd;
	if (ioctl(p->fd, BTRFS_IOC_DEV_INFO, &d) < 0)
		fd = -1;
	else
		fd = open((const char *)d.path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (btrfs_grow((void **)&v->d, &v->alloc_d, v->nr_d + 1, sizeof(*v->d)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	v->d[v->nr_d++] = (struct v1_dev){ .devid = devid, .fd = fd };
	return fd;
}

/* len bytes (page multiples) at logical into buf (page aligned): 0 or -errno. */
static int read_logical(struct pass *p, struct v1cache *v, uint64_t logical, unsigned char *buf,
			uint64_t len)
{
	const struct v1_chunk *c = NULL;
	int fd;

	for (size_t i = 0; i < v->nr_c && !c; i++)
		if (v->c[i].start <= logical && logical - v->c[i].start < v->c[i].len)
			c = &v->c[i];
	if (!c || logical + len > c->start + c->len || (c->type & STRIPED))
		return -EOPNOTSUPP;
	if ((fd = dev_fd(p, v, c->devid)) < 0)
		return -ENODEV;
	if (pread(fd, buf, len, (off_t)(c->physical + (logical - c->start))) != (ssize_t)len)
		return -EIO;
	return 0;
}

/* The cache inode's data: its size in bytes into *buf, or a negative errno. */
static int64_t read_cache_file(struct pass *p, struct v1cache *v, const struct v1_inode *in,
			       unsigned char **buf)
{
	void *b;

	if (!in->size || in->size % CACHE_PAGE || in->size > MAX_CACHE_BYTES)
		return -EINVAL;
	if (posix_memalign(&b, CACHE_PAGE, in->size))
		return -ENOMEM;
	memset(b, 0, in->size);
	for (size_t i = 0; i < v->nr_ex; i++) {
		const struct v1_extent *e = &v->ex[i];
		uint64_t len = e->len;
		int ret;

		if (e->ino != in->ino || !e->disk || e->file_off >= in->size)
			continue;
		if (len > in->size - e->file_off)
			len = in->size - e->file_off;
		if (e->file_off % CACHE_PAGE || len % CACHE_PAGE || e->disk % CACHE_PAGE)
			ret = -EINVAL;
		else
			ret = read_logical(p, v, e->disk, (unsigned char *)b + e->file_off, len);
		if (ret < 0) {
			free(b);
			return ret;
		}
	}
	*buf = b;
	return (int64_t)in->size;
}

/* Page i's crc32c (page 0's after its crc array) is the one recorded. */
static bool page_ok(const unsigned char *f, uint64_t pages, uint64_t i)
{
	uint64_t off = i ? 0 : pages * 4;

	return btrfs_get32(f + i * 4) == ~crc32c(0xffffffff, f + i * CACHE_PAGE + off, CACHE_PAGE - off);
}

static int add_range(struct v1cache *v, uint64_t start, uint64_t bytes, const unsigned char *bm)
{
	struct fst_range r = { .start = start, .end = start + bytes, .transid = v->transid };

	if (bm) {
		if (!(r.bitmap = malloc(CACHE_PAGE)))
			return -ENOMEM;
		memcpy(r.bitmap, bm, CACHE_PAGE);
	}
	if (btrfs_grow((void **)&v->r, &v->alloc_r, v->nr_r + 1, sizeof(*v->r)) < 0) {
		free(r.bitmap);
		return -ENOMEM;
	}
	v->r[v->nr_r++] = r;
	return 0;
}

/* Where entry n is: its page, and its byte in the page (head: page 0's crcs and generation). */
static void entry_at(uint64_t n, uint64_t head, uint64_t *pg, uint64_t *at)
{
	uint64_t first = (CACHE_PAGE - head) / ENTRY_SIZE, per = CACHE_PAGE / ENTRY_SIZE;

	if (n < first) {
		*pg = 0;
		*at = head + n * ENTRY_SIZE;
		return;
	}
	*pg = 1 + (n - first) / per;
	*at = (n - first) % per * ENTRY_SIZE;
}

/*
 * The entries of a cache file of pages pages, as the kernel reads them:
 * 0, 1 if the kernel would not load it (crc, generation, layout), or
 * -ENOMEM.
 */
static int parse_cache(struct pass *p, struct v1cache *v, const struct v1_header *h,
		       const unsigned char *f, uint64_t pages)
{
	uint64_t head = pages * 4 + 8, pg = 0, at, last = 0, bitmaps = 0;
	uint64_t bm_span = (uint64_t)CACHE_PAGE * 8 * p->sectorsize;

	if (head > CACHE_PAGE || h->entries > pages * (CACHE_PAGE / ENTRY_SIZE))
		return 1;
	if (h->entries)
		entry_at(h->entries - 1, head, &last, &at);
	/* the bitmaps' pages follow the last page of entries */
	if (last + 1 + h->bitmaps > pages)
		return 1;
	for (uint64_t i = 0; i <= last + h->bitmaps; i++)
		if (!page_ok(f, pages, i))
			return 1;
	if (btrfs_get64(f + pages * 4) != h->generation)
		return 1;
	for (uint64_t n = 0; n < h->entries; n++) {
		const unsigned char *e;
		int ret;

		entry_at(n, head, &pg, &at);
		e = f + pg * CACHE_PAGE + at;
		if (e[16] == ENTRY_BITMAP && bitmaps < h->bitmaps)
			ret = add_range(v, btrfs_get64(e), bm_span,
					f + (last + 1 + bitmaps++) * CACHE_PAGE);
		else if (e[16] == ENTRY_EXTENT)
			ret = add_range(v, btrfs_get64(e), btrfs_get64(e + 8), NULL);
		else
			return 1;
		if (ret < 0)
			return ret;
	}
	return bitmaps == h->bitmaps ? 0 : 1;
}

static int range_cmp(const void *a, const void *b)
{
	const struct fst_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void drop_ranges(struct v1cache *v)
{
	for (size_t i = 0; i < v->nr_r; i++)
		free(v->r[i].bitmap);
	v->nr_r = 0;
	v->pos = 0;
}

/* Load the cache of header h into v->r (nothing if the kernel would not). */
static int load(struct pass *p, struct v1cache *v, const struct v1_header *h)
{
	const struct v1_inode *in = NULL;
	unsigned char *f = NULL;
	int64_t size;
	int ret;

	drop_ranges(v);
	for (size_t i = 0; i < v->nr_in && !in; i++)
		if (v->in[i].ino == h->ino)
			in = &v->in[i];
	if (!in || in->generation != h->generation || !h->generation) {
		p->v1_stale++;
		return 0;
	}
	size = read_cache_file(p, v, in, &f);
	if (size == -ENOMEM)
		return -ENOMEM;
	if (size < 0) {
		p->v1_unread++;
		return 0;
	}
	v->gen = h->generation;
	v->transid = h->transid;
	ret = parse_cache(p, v, h, f, (uint64_t)size / CACHE_PAGE);
	free(f);
	if (ret != 0) {
		drop_ranges(v);
		if (ret > 0)
			p->v1_stale++;
		return ret < 0 ? ret : 0;
	}
	p->v1_loaded++;
	sort_items(v->r, v->nr_r, sizeof(*v->r), range_cmp);
	return 0;
}

static bool bit_set(const unsigned char *bm, uint64_t i)
{
	return bm[i / 8] & (1u << (i % 8));
}

/* Does r call any byte of [a, b) free? */
static bool overlaps(const struct pass *p, const struct fst_range *r, uint64_t a, uint64_t b)
{
	uint64_t lo = a > r->start ? a : r->start, hi = b < r->end ? b : r->end;

	if (lo >= hi)
		return false;
	if (!r->bitmap)
		return true;
	for (uint64_t x = lo - (lo - r->start) % p->sectorsize; x < hi; x += p->sectorsize)
		if (bit_set(r->bitmap, (x - r->start) / p->sectorsize))
			return true;
	return false;
}

void btrfs_v1_used(struct pass *p, uint64_t a, uint64_t b, uint64_t transid)
{
	struct v1cache *v = p->v1;
	size_t next;

	if (!v || v->stale_all || p->v1_err)
		return;
	/* the block group a is in: the last header at or before it */
	next = v->cur;
	while (next < v->nr_h && v->h[next].bg <= a)
		next++;
	if (next != v->cur) {
		v->cur = next;
		if ((p->v1_err = load(p, v, &v->h[next - 1])) < 0)
			return;
	}
	while (v->pos < v->nr_r && v->r[v->pos].end <= a)
		v->pos++;
	for (size_t i = v->pos; i < v->nr_r && v->r[i].start < b; i++) {
		const struct fst_range *r = &v->r[i];

		if (!overlaps(p, r, a, b))
			continue;
		btrfs_add_finding(p, &(struct tfinding){
			.kind = F_V1_USED_FREE, .logical = a, .len = b - a,
			.a = r->start, .b = r->end, .ref_off = v->gen,
			.transid = r->transid > transid ? r->transid : transid,
		});
		break;
	}
}

void btrfs_v1_release(struct pass *p)
{
	struct v1cache *v = p->v1;

	if (!v)
		return;
	drop_ranges(v);
	for (size_t i = 0; i < v->nr_d; i++)
		if (v->d[i].fd >= 0)
			close(v->d[i].fd);
	free(v->r);
	free(v->h);
	free(v->in);
	free(v->ex);
	free(v->c);
	free(v->d);
	free(v);
	p->v1 = NULL;
}
