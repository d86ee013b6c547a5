/*
 * btrfs_xattrs: the attribute names of an inode that listxattr() refuses.
 *
 * The VFS lists at most 64 KiB of names (E2BIG beyond); btrfs keeps each
 * attribute in an item of its own, as many as the inode has.  The items
 * are in the inode's subvolume tree (BTRFS_IOC_INO_LOOKUP with tree 0
 * names it, for any inode of the subvolume: the open one, or the
 * directory of a symlink, which is in the same subvolume), under the key
 * (inode, XATTR_ITEM, hash of the name): every key in that range, read
 * with btrfs_trees.h's reader (BTRFS_IOC_TREE_SEARCH_V2, root only).  An
 * item holds the attributes whose names share the hash, each a struct
 * btrfs_dir_item followed by its whole name ("user.x") and its value.
 */
#include "backends/btrfs/btrfs_xattrs.h"

#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "backends/btrfs/btrfs_trees.h"
#include "scan/context.h"
#include "lib/strbuf.h"

/* Layout of a dir item entry: location key (17), transid (8), data_len, name_len, type. */
#define DI_DATA_LEN 25
#define DI_NAME_LEN 27
#define DI_SIZE 30

static uint16_t get16(const unsigned char *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

int btrfs_xattr_item_names(const unsigned char *item, size_t item_len, struct strbuf *names)
{
	size_t off = 0;

	while (off < item_len) {
		size_t name_len, data_len;

		if (item_len - off < DI_SIZE)
			return -EUCLEAN;
		name_len = get16(item + off + DI_NAME_LEN);
		data_len = get16(item + off + DI_DATA_LEN);
		if (item_len - off - DI_SIZE < name_len + data_len || !name_len)
			return -EUCLEAN;
		strbuf_add(names, item + off + DI_SIZE, name_len);
		strbuf_addch(names, '\0');
		off += DI_SIZE + name_len + data_len;
	}
	return 0;
}

int btrfs_list_xattrs(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const struct backend_entry *e, struct strbuf *names)
{
	struct btrfs_ioctl_ino_lookup_args lk = { .objectid = BTRFS_FIRST_FREE_OBJECTID };
	int fd = e && e->fd >= 0 ? e->fd : d->fd;
	uint64_t ino = e ? e->stx->stx_ino : d->stx->stx_ino;
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret;

	(void)ctx;
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &lk) < 0)
		return errno == ENOTTY ? -EOPNOTSUPP : -errno;
	ret = btrfs_tree_open(&r, fd, lk.treeid,
			      (struct btrfs_tkey){ ino, BTRFS_XATTR_ITEM_KEY, 0 },
			      (struct btrfs_tkey){ ino, BTRFS_XATTR_ITEM_KEY, UINT64_MAX });
	if (ret < 0)
		return ret;
	while ((ret = btrfs_tree_next(&r, &it)) > 0) {
		ret = btrfs_xattr_item_names(it.data, it.len, names);
		if (ret < 0)
			break;
	}
	btrfs_tree_close(&r);
	return ret;
}
