/*
 * libFuzzer target: the btrfs tree checks that decode item payloads, on
 * arbitrary items, through the same functions the scan calls.  The items
 * are served by the fake TREE_SEARCH_V2 of the unit tests
 * (tests/unit/backends/btrfs/fake_tree_search.c, linked with
 * -Wl,--wrap=ioctl), as the kernel would hand over whatever a crafted
 * image holds:
 *
 *  - the chunk tree and the device tree to btrfs_check_chunks()
 *    (CHUNK_ITEMs and their stripes, DEV_ITEMs, DEV_EXTENTs), with block
 *    groups derived from the input;
 *  - one fs tree to the namespace check (btrfs_names.c: INODE_ITEMs,
 *    INODE_REFs and INODE_EXTREFs, DIR_ITEMs and DIR_INDEXes, orphan
 *    items), item by item as btrfs_check.c feeds it, then names_end(),
 *    which reads the tree again through the fake when the sums differ.
 *
 * Input: records of a 19-byte head, tree (u8: its low 2 bits pick the
 * chunk tree, the device tree, the fs tree or a block group, whose flags
 * are the type byte), objectid (u64), type (u8), offset (u64), data
 * length (u8), then that many data bytes.  Items are sorted by key within
 * each tree and block groups by start, as the scan has them; at most
 * FAKE_TREE_MAX_ITEMS items.
 *
 * Invariants: no crash, no undefined behaviour, no leak (ASan/UBSan and
 * LeakSanitizer), and the findings kept stay within the pass's array.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "fake_tree_search.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* As btrfs_check.c allocates the pass's findings. */
#define MAX_FINDINGS 4096
#define MAX_BG 16
#define RECORD_HEAD 19
#define FS_TREE BTRFS_FS_TREE_OBJECTID

static const uint64_t trees[] = { BTRFS_CHUNK_TREE_OBJECTID, BTRFS_DEV_TREE_OBJECTID, FS_TREE };

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static int item_cmp(const void *a, const void *b)
{
	const struct fake_item *x = a, *y = b;

	if (x->tree != y->tree)
		return x->tree < y->tree ? -1 : 1;
	return btrfs_key_cmp(&x->key, &y->key);
}

static int bg_cmp(const void *a, const void *b)
{
	const struct bgroup *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The input's records: items into the fake, block groups into bgs. */
static size_t parse(const uint8_t *data, size_t size, struct bgroup *bgs)
{
	size_t nr_bg = 0;

	while (size >= RECORD_HEAD) {
		uint8_t sel = data[0] & 3, len = data[RECORD_HEAD - 1];
		struct btrfs_tkey key = { get64(data + 1), data[9], get64(data + 10) };

		data += RECORD_HEAD;
		size -= RECORD_HEAD;
		if (len > size)
			len = (uint8_t)size;
		if (sel == 3) {
			/* the type byte as the block group flags: type and profile bits */
			if (nr_bg < MAX_BG)
				bgs[nr_bg++] = (struct bgroup){ .start = key.objectid, .len = key.offset,
								.flags = key.type, .transid = 1 };
		} else if (fake_tree.nr_items < FAKE_TREE_MAX_ITEMS) {
			struct fake_item *it = fake_tree_add(trees[sel], key, len);

			memcpy(it->data, data, len);
		}
		data += len;
		size -= len;
	}
	qsort(fake_tree.items, fake_tree.nr_items, sizeof(fake_tree.items[0]), item_cmp);
	qsort(bgs, nr_bg, sizeof(*bgs), bg_cmp);
	return nr_bg;
}

/* One fs tree, item by item, through the namespace check, as btrfs_check.c feeds it. */
static void names(struct pass *p)
{
	struct btrfs_names n = { 0 };

	names_begin(&n, FS_TREE);
	for (unsigned i = 0; i < fake_tree.nr_items; i++) {
		const struct fake_item *f = &fake_tree.items[i];
		struct btrfs_tree_item it = {
			.key = f->key, .data = f->data, .len = f->len, .transid = 1,
		};

		if (f->tree == FS_TREE && names_item(&n, p, &it) < 0)
			break;
	}
	names_end(&n, p, p->fd);
	names_release(&n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bgroup bgs[MAX_BG] = { 0 };
	struct pass *p = calloc(1, sizeof(*p));

	if (!p)
		return 0;
	fake_tree_reset(3, 1);	/* 3 items a call: the reader's batching is used */
	p->fd = 3;
	p->f = calloc(MAX_FINDINGS, sizeof(*p->f));
	p->bg = bgs;
	p->nr_bg = parse(data, size, bgs);
	if (p->f) {
		btrfs_check_chunks(p);
		names(p);
		if (p->nr_f > MAX_FINDINGS)
			abort();
	}
	free(p->f);
	free(p);
	return 0;
}
