/*
 * fake_tree_search.c: the fake BTRFS_IOC_TREE_SEARCH_V2 (see the header).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/btrfs.h>

#include "fake_tree_search.h"

/*
 * A misuse of the fake is a bug of the test: abort.  No cmocka here, so
 * that the fuzz targets (built without it) link this file too.
 */
#define fake_check(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "fake_tree_search: %s failed\n", #cond); \
			abort(); \
		} \
	} while (0)

struct fake_tree fake_tree;

void fake_tree_reset(unsigned per_call, uint64_t transid)
{
	memset(&fake_tree, 0, sizeof(fake_tree));
	fake_tree.per_call = per_call;
	fake_tree.transid = transid;
}

struct fake_item *fake_tree_add(uint64_t tree, struct btrfs_tkey key, uint32_t len)
{
	struct fake_item *it;

	fake_check(fake_tree.nr_items < FAKE_TREE_MAX_ITEMS);
	fake_check(len <= sizeof(it->data));
	it = &fake_tree.items[fake_tree.nr_items++];
	memset(it, 0, sizeof(*it));
	it->tree = tree;
	it->key = key;
	it->len = len;
	return it;
}

void fake_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

void fake_put16(unsigned char *p, uint16_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static bool in_search(const struct fake_item *it, const struct btrfs_ioctl_search_key *k)
{
	struct btrfs_tkey lo = { k->min_objectid, (uint8_t)k->min_type, k->min_offset };
	struct btrfs_tkey hi = { k->max_objectid, (uint8_t)k->max_type, k->max_offset };

	return it->tree == k->tree_id && btrfs_key_cmp(&it->key, &lo) >= 0 &&
	       btrfs_key_cmp(&it->key, &hi) <= 0;
}

/* The one device of fake_tree.dev_path: FS_INFO and DEV_INFO. */
static int fake_dev(unsigned long req, void *arg)
{
	if (req == BTRFS_IOC_FS_INFO) {
		struct btrfs_ioctl_fs_info_args *fs = arg;

		fs->max_id = fs->num_devices = 1;
		memcpy(fs->fsid, fake_tree.fsid, sizeof(fs->fsid));
		return 0;
	}
	{
		struct btrfs_ioctl_dev_info_args *d = arg;

		if (d->devid != 1) {
			errno = ENODEV;
			return -1;
		}
		snprintf((char *)d->path, sizeof(d->path), "%s", fake_tree.dev_path);
		return 0;
	}
}

int __wrap_ioctl(int fd, unsigned long req, ...);

/* The fake tree's items in [min, max] of the tree asked for, as many as fit. */
int __wrap_ioctl(int fd, unsigned long req, ...)
{
	struct btrfs_ioctl_search_args_v2 *a;
	size_t pos = 0;
	unsigned n = 0;
	va_list ap;

	(void)fd;
	va_start(ap, req);
	a = va_arg(ap, struct btrfs_ioctl_search_args_v2 *);
	va_end(ap);
	if (fake_tree.dev_path && (req == BTRFS_IOC_FS_INFO || req == BTRFS_IOC_DEV_INFO))
		return fake_dev(req, a);
	fake_check(req == BTRFS_IOC_TREE_SEARCH_V2);
	fake_tree.calls++;
	if (fake_tree.err) {
		errno = fake_tree.err;
		return -1;
	}
	for (unsigned i = 0; i < fake_tree.nr_items && n < fake_tree.per_call; i++) {
		const struct fake_item *it = &fake_tree.items[i];
		struct btrfs_ioctl_search_header h = {
			.transid = fake_tree.transid, .objectid = it->key.objectid,
			.type = it->key.type, .offset = it->key.offset, .len = it->len,
		};

		if (!in_search(it, &a->key))
			continue;
		if (pos + sizeof(h) + it->len > a->buf_size)
			break;
		memcpy(a->buf + pos, &h, sizeof(h));
		memcpy(a->buf + pos + sizeof(h), it->data, it->len);
		pos += sizeof(h) + it->len;
		n++;
	}
	a->key.nr_items = n;
	return 0;
}
