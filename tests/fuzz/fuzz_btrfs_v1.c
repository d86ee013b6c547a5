/*
 * libFuzzer target: what the btrfs backend reads from the device itself
 * -- the primary superblock's fields (btrfs_read_super()) and the v1 free
 * space cache (btrfs_v1cache.c: the root tree's FREE_SPACE headers, cache
 * inodes and their extents, the chunk map, the cache pages with their
 * crc32c array, entries and bitmaps) -- through the same functions the
 * scan calls: btrfs_v1_root_item() for each root tree item,
 * btrfs_read_super() (the scan reads it before the root tree; neither
 * depends on the other), btrfs_v1_open(), btrfs_v1_used() for each used
 * extent in logical order, btrfs_v1_release().
 *
 * The device is a memfd (opened by the scan's own code, O_DIRECT, through
 * /proc/self/fd); the fake ioctl of the unit tests (fake_tree_search.c,
 * -Wl,--wrap=ioctl) serves the chunk tree, and BTRFS_IOC_FS_INFO and
 * BTRFS_IOC_DEV_INFO of one device, that memfd, with the fsid its
 * superblock holds.
 *
 * Input: a flags byte (bit 0: leave the cache pages' crc32c as they are;
 * bits 1-3: the sector size, 512 << n), the length of the records (u16,
 * little-endian), the records, then the cache pages, written to the
 * device at CACHE_AT.  Unless bit 0 is set the cache pages' crc array (on
 * page 0, one per page) is made right, as one cache file of as many whole
 * pages as there are, so that the fuzzer's changes reach the entries.
 * A record is a 19-byte head -- selector (u8), objectid (u64), type (u8),
 * offset (u64), data length (u8) -- and that many data bytes:
 *   0  a chunk tree item (the fake tree; items sorted by key);
 *   1  a root tree item, for btrfs_v1_root_item();
 *   2  a used extent [objectid, objectid + offset), transid type;
 *   3  the data bytes written to the device at byte objectid (below
 *      CACHE_AT: the superblock is at 64 KiB).
 *
 * Invariants: no crash, no undefined behaviour, no leak, no hang, and the
 * findings stay within the pass's array.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "lib/crc32c.h"
#include "fake_tree_search.h"
#include "fuzz_dev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As btrfs_check.c allocates the pass's findings. */
#define MAX_FINDINGS 4096
#define MAX_USED 256
#define RECORD_HEAD 19
#define CACHE_PAGE 4096
/* The cache pages: past the primary superblock (64 KiB + 4 KiB). */
#define CACHE_AT (1u << 20)
#define SUPER_FSID (64 * 1024 + 0x20)
#define FLAG_KEEP_CRC 1

struct used {
	uint64_t a, b, transid;
};

static struct fuzz_dev dev = { -1, "" };

static int used_cmp(const void *a, const void *b)
{
	const struct used *x = a, *y = b;

	return x->a < y->a ? -1 : x->a > y->a;
}

static int item_cmp(const void *a, const void *b)
{
	return btrfs_key_cmp(&((const struct fake_item *)a)->key,
			     &((const struct fake_item *)b)->key);
}

/* One record: kept in the fake, in p's cache or u, or written to the device. */
static void record(struct pass *p, const uint8_t *head, const uint8_t *d, uint8_t len,
		   struct used *u, size_t *nr_u)
{
	struct btrfs_tkey key = { btrfs_get64(head + 1), head[9], btrfs_get64(head + 10) };
	struct btrfs_tree_item it = { .key = key, .data = d, .len = len, .transid = 1 };

	switch (head[0] & 3) {
	case 0:
		if (fake_tree.nr_items < FAKE_TREE_MAX_ITEMS)
			memcpy(fake_tree_add(BTRFS_CHUNK_TREE_OBJECTID, key, len)->data, d, len);
		break;
	case 1:
		if (!p->v1_err)
			p->v1_err = btrfs_v1_root_item(p, &it);
		break;
	case 2:
		if (*nr_u < MAX_USED && key.objectid + key.offset > key.objectid)
			u[(*nr_u)++] = (struct used){ key.objectid, key.objectid + key.offset,
						      key.type };
		break;
	default:
		if (key.objectid < CACHE_AT && pwrite(dev.fd, d, len, (off_t)key.objectid) < 0)
			abort();
	}
}

/* The cache pages at CACHE_AT, their crc array right unless keep_crc. */
static void cache_pages(const uint8_t *d, size_t len, bool keep_crc)
{
	size_t pages = (len + CACHE_PAGE - 1) / CACHE_PAGE;
	uint8_t *f = calloc(pages ? pages : 1, CACHE_PAGE);

	if (!f)
		abort();
	memcpy(f, d, len);
	if (!keep_crc && pages * 4 + 8 <= CACHE_PAGE)
		for (size_t i = 0; i < pages; i++) {
			size_t off = i ? 0 : pages * 4;
			uint32_t crc = ~crc32c(0xffffffff, f + i * CACHE_PAGE + off, CACHE_PAGE - off);

			memcpy(f + i * 4, &crc, 4);	/* little-endian, as btrfs_get32() reads */
		}
	if (pwrite(dev.fd, f, pages * CACHE_PAGE, CACHE_AT) < 0)
		abort();
	free(f);
}

/* The input into the device, the fake and p's cache; the used extents into u. */
static size_t parse(struct pass *p, const uint8_t *data, size_t size, struct used *u)
{
	size_t nr_u = 0, rlen;

	if (size < 3)
		return 0;
	rlen = data[1] | (size_t)data[2] << 8;
	p->sectorsize = 512u << ((data[0] >> 1) & 7);
	cache_pages(data + 3 + (rlen < size - 3 ? rlen : size - 3),
		    rlen < size - 3 ? size - 3 - rlen : 0, data[0] & FLAG_KEEP_CRC);
	size = rlen < size - 3 ? rlen : size - 3;
	data += 3;
	while (size >= RECORD_HEAD) {
		uint8_t len = data[RECORD_HEAD - 1];

		if (len > size - RECORD_HEAD)
			len = (uint8_t)(size - RECORD_HEAD);
		record(p, data, data + RECORD_HEAD, len, u, &nr_u);
		data += RECORD_HEAD + len;
		size -= RECORD_HEAD + len;
	}
	qsort(fake_tree.items, fake_tree.nr_items, sizeof(fake_tree.items[0]), item_cmp);
	if (nr_u > 1)
		qsort(u, nr_u, sizeof(*u), used_cmp);
	return nr_u;
}

/* The device emptied: the superblock's 64 KiB, the cache pages and past them. */
static void dev_reset(void)
{
	if (dev.fd < 0)
		fuzz_dev_open(&dev, "fuzz_btrfs_v1");
	fuzz_dev_reset(&dev, 2 * CACHE_AT + (64u << 20));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct used u[MAX_USED];
	struct pass *p = calloc(1, sizeof(*p));
	size_t nr_u;

	if (!p)
		return 0;
	dev_reset();
	fake_tree_reset(3, 1);	/* 3 items a call: the reader's batching is used */
	fake_tree.dev_path = dev.path;
	p->fd = 3;
	p->f = calloc(MAX_FINDINGS, sizeof(*p->f));
	nr_u = parse(p, data, size, u);
	if (pread(dev.fd, fake_tree.fsid, sizeof(fake_tree.fsid), SUPER_FSID) < 0)
		abort();
	if (p->f && p->v1_err >= 0) {
		btrfs_read_super(p);
		p->v1_err = btrfs_v1_open(p);
		for (size_t i = 0; i < nr_u && p->v1_err >= 0; i++)
			btrfs_v1_used(p, u[i].a, u[i].b, u[i].transid);
		if (p->nr_f > MAX_FINDINGS)
			abort();
	}
	if (getenv("FUZZ_VERBOSE"))	/* to read a seed */
		fprintf(stderr, "superblock %s, caches %llu: %llu loaded, %llu stale, %llu unread; "
			"%zu used extents, %zu findings, error %d\n", p->sb_ok ? "read" : "not read",
			p->v1_caches, p->v1_loaded, p->v1_stale, p->v1_unread, nr_u, p->nr_f,
			p->v1_err);
	btrfs_v1_release(p);
	free(p->f);
	free(p);
	return 0;
}
