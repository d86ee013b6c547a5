/*
 * btrfs_datasum: which files btrfs keeps data checksums for.
 *
 * btrfs writes no data checksums for an inode whose inode item has the
 * NODATASUM flag: files made NOCOW with `chattr +C` (NODATACOW implies
 * NODATASUM), and files created under the nodatacow or nodatasum mount
 * options, whatever the options are later.  Their data is verified by
 * nothing: not by a read, not by the kernel scrub.  Userspace sees the
 * first kind through FS_IOC_GETFLAGS (FS_NOCOW_FL), which costs one ioctl
 * and needs no privilege; the second kind only in the inode item, read
 * with BTRFS_IOC_TREE_SEARCH (root) from the tree of the file's subvolume,
 * which BTRFS_IOC_INO_LOOKUP with tree 0 names (unprivileged).
 *
 * One item is wanted, so the small fixed-size search (v1, 4 KiB of
 * arguments on the stack) is used, not btrfs_trees.h's 256 KiB reader.
 *
 * With -x the kernel's scrub verifies every checksummed byte on every
 * copy (phase 2), so phase 5 has only these files left to read: the tree
 * check (btrfs_check.c), which reads every inode item of every subvolume
 * anyway, hands over the regular NODATASUM inodes with a size
 * (btrfs_unsummed_keep()); and files changed since the scrub could see
 * their data on the disk, which the walk notes (btrfs_unsummed_note_recent()).
 */
#include "backends/btrfs/btrfs_datasum.h"

#include <endian.h>
#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "backends/backend.h"
#include "backends/btrfs/btrfs_check_int.h"
#include "lib/inokey.h"
#include "lib/sorted.h"
#include "lib/stx.h"

/*
 * The inode item's flag for "no data checksums": bit 0 of its on-disk
 * flags (the kernel's BTRFS_INODE_NODATASUM, fs/btrfs/btrfs_inode.h; not in
 * the uapi headers, an on-disk format constant that does not change).
 */
#define INODE_NODATASUM (1ULL << 0)

/* The inode item's flags (BTRFS_INODE_*), or a negative errno. */
static int64_t inode_item_flags(int fd)
{
	struct btrfs_ioctl_ino_lookup_args lk = { .objectid = BTRFS_FIRST_FREE_OBJECTID };
	struct btrfs_ioctl_search_args sa;
	struct btrfs_ioctl_search_key *k = &sa.key;
	struct btrfs_ioctl_search_header h;
	uint64_t flags;
	struct stat st;

	if (fstat(fd, &st) < 0 || ioctl(fd, BTRFS_IOC_INO_LOOKUP, &lk) < 0)
		return -errno;
	memset(k, 0, sizeof(*k));
	k->tree_id = lk.treeid;
	k->min_objectid = k->max_objectid = st.st_ino;
	k->min_type = k->max_type = BTRFS_INODE_ITEM_KEY;
	k->max_offset = UINT64_MAX;
	k->max_transid = UINT64_MAX;
	k->nr_items = 1;
	if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &sa) < 0)
		return -errno;
	if (k->nr_items < 1)
		return -ENOENT;
	memcpy(&h, sa.buf, sizeof(h));
	if (h.type != BTRFS_INODE_ITEM_KEY || h.objectid != st.st_ino ||
	    h.len < sizeof(struct btrfs_inode_item))
		return -EIO;
	memcpy(&flags, sa.buf + sizeof(h) + offsetof(struct btrfs_inode_item, flags),
	       sizeof(flags));
	return (int64_t)(le64toh(flags) & INT64_MAX);
}

bool btrfs_data_checksummed(struct scrub_ctx *ctx, int fd)
{
	int fsflags = 0;	/* FS_IOC_GETFLAGS copies an int, whatever its type says */
	int64_t flags;

	(void)ctx;
	if (ioctl(fd, FS_IOC_GETFLAGS, &fsflags) == 0 && (fsflags & FS_NOCOW_FL))
		return false;
	flags = inode_item_flags(fd);
	return flags >= 0 && !(flags & INODE_NODATASUM);
}

void btrfs_unsummed_init(struct btrfs_unsummed *u)
{
	*u = (struct btrfs_unsummed){ 0 };
	pthread_mutex_init(&u->lock, NULL);
}

void btrfs_unsummed_keep(struct btrfs_unsummed *u, const struct subvol_ino *v, size_t nr)
{
	free(u->v);
	u->v = NULL;
	u->nr = 0;
	u->known = false;
	if (nr && !(u->v = malloc(nr * sizeof(*u->v))))
		return;
	if (nr)	/* memcpy from NULL is undefined, even of 0 bytes */
		memcpy(u->v, v, nr * sizeof(*v));
	u->nr = nr;
	u->known = true;
}

void btrfs_unsummed_note_recent(struct btrfs_unsummed *u, const struct backend_dir *d,
				const struct backend_entry *e)
{
	const struct statx *stx = e->stx;
	struct subvol_ino id = { .ino = stx->stx_ino };

	if (!u->recent_ns || !S_ISREG(stx->stx_mode) ||
	    ((int64_t)stx_ns(&stx->stx_mtime) < u->recent_ns &&
	     (int64_t)stx_ns(&stx->stx_ctime) < u->recent_ns))
		return;
	/* a file lives in its directory's subvolume (bulk records give none) */
	bool known = stx_subvol(stx, &id.subvol) || (d->stx && stx_subvol(d->stx, &id.subvol));

	pthread_mutex_lock(&u->lock);
	if (!known || btrfs_grow((void **)&u->recent, &u->alloc_recent, u->nr_recent + 1,
				 sizeof(*u->recent)) < 0)
		u->recent_lost = true;
	else
		u->recent[u->nr_recent++] = id;
	pthread_mutex_unlock(&u->lock);
}

bool btrfs_unsummed_take(struct btrfs_unsummed *u, struct subvol_ino **out, size_t *nr)
{
	size_t n = u->nr + u->nr_recent, w = 0;
	struct subvol_ino *v;

	if (!u->known || u->recent_lost)
		return false;
	if (!n) {
		*out = NULL;
		*nr = 0;
		return true;
	}
	if (!(v = malloc(n * sizeof(*v))))
		return false;
	if (u->nr)	/* memcpy from NULL is undefined, even of 0 bytes */
		memcpy(v, u->v, u->nr * sizeof(*v));
	if (u->nr_recent)
		memcpy(v + u->nr, u->recent, u->nr_recent * sizeof(*v));
	sort_items(v, n, sizeof(*v), subvol_ino_cmp);
	for (size_t i = 0; i < n; i++)
		if (!w || subvol_ino_cmp(&v[w - 1], &v[i]))
			v[w++] = v[i];
	*out = v;
	*nr = w;
	return true;
}

void btrfs_unsummed_release(struct btrfs_unsummed *u)
{
	free(u->v);
	free(u->recent);
	pthread_mutex_destroy(&u->lock);
	*u = (struct btrfs_unsummed){ 0 };
}
