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
 * check (btrfs_check.c), which reads every inode item and file extent
 * item of every subvolume anyway, hands over the NODATASUM inodes with
 * extents on the disk (btrfs_unsummed_keep()).  Inline data sits in tree
 * leaves, which the scrub verifies as metadata; preallocated extents hold
 * no data.
 */
#include "backends/btrfs/btrfs_datasum.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fs.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "backends/btrfs/btrfs_check_int.h"
#include "inokey.h"

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

void btrfs_unsummed_keep(struct btrfs_unsummed *u, const struct fe_rec *fe, size_t nr)
{
	size_t n = 0, w = 0;

	btrfs_unsummed_release(u);
	for (size_t i = 0; i < nr; i++)
		n += fe[i].want_csum < 0;
	if (n && !(u->v = malloc(n * sizeof(*u->v))))
		return;
	for (size_t i = 0; i < nr; i++)
		if (fe[i].want_csum < 0)
			u->v[u->nr++] = (struct subvol_ino){ .subvol = fe[i].root, .ino = fe[i].ino };
	if (u->nr)
		qsort(u->v, u->nr, sizeof(*u->v), subvol_ino_cmp);
	for (size_t i = 0; i < u->nr; i++)
		if (!w || subvol_ino_cmp(&u->v[w - 1], &u->v[i]))
			u->v[w++] = u->v[i];
	u->nr = w;
	u->known = true;
}

void btrfs_unsummed_release(struct btrfs_unsummed *u)
{
	free(u->v);
	*u = (struct btrfs_unsummed){ 0 };
}
