/*
 * inokey: which inode, within one scan: (st_dev, st_ino).
 *
 * An inode number alone does not say which file it is.  btrfs gives every
 * subvolume and snapshot its own st_dev and numbers the inodes of each
 * from 256, so the same number is a different file in each subvolume (and
 * the walk enters subvolumes: they are on the same mount).  Every table
 * of inodes that may come from anywhere in the walk is keyed by this
 * pair; on a filesystem with one st_dev it orders and compares as the
 * inode number alone.
 *
 * The pair holds for one scan only: btrfs hands out a subvolume's st_dev
 * when it first reads the subvolume, so it differs from mount to mount.
 * What is kept between runs (the --ledger database) is keyed by the
 * subvolume's id instead (ledger_store.h).
 */
#ifndef FSCRUB_INOKEY_H
#define FSCRUB_INOKEY_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

struct ino_key {
	uint64_t dev;		/* st_dev, as makedev() of the statx numbers */
	uint64_t ino;		/* st_ino; 0 is no inode */
};

static inline struct ino_key ino_key_of(const struct statx *stx)
{
	return (struct ino_key){ makedev(stx->stx_dev_major, stx->stx_dev_minor),
				 stx->stx_ino };
}

static inline bool ino_key_eq(struct ino_key a, struct ino_key b)
{
	return a.dev == b.dev && a.ino == b.ino;
}

/* By st_dev, then inode number: sort_items()/find_item() (sorted.h) of struct ino_key arrays. */
static inline int ino_key_cmp(const void *a, const void *b)
{
	const struct ino_key *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/*
 * A file named across runs and mounts, where st_dev is no name: the
 * subvolume id (below; 0 on a filesystem without them) and the inode.
 */
struct subvol_ino {
	uint64_t subvol;
	uint64_t ino;
};

/* By subvolume, then inode number: sort_items()/find_item() of struct subvol_ino arrays. */
static inline int subvol_ino_cmp(const void *a, const void *b)
{
	const struct subvol_ino *x = a, *y = b;

	if (x->subvol != y->subvol)
		return x->subvol < y->subvol ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/*
 * STATX_SUBVOL (Linux 6.10): the id of the subvolume that holds the inode,
 * stable from mount to mount (btrfs: the subvolume's root id, 5 for the
 * top level; bcachefs).  Debian 12's headers predate it: the field is the
 * u64 at offset 0xa0, a spare word in older headers, read by its offset.
 */
#ifndef STATX_SUBVOL
#define STATX_SUBVOL 0x00008000U
#endif
#define STATX_SUBVOL_OFFSET 0xa0

_Static_assert(sizeof(struct statx) >= STATX_SUBVOL_OFFSET + sizeof(uint64_t),
	       "struct statx has room for stx_subvol");

/* The subvolume id, if the kernel gave one (STATX_SUBVOL asked for). */
static inline bool stx_subvol(const struct statx *stx, uint64_t *out)
{
	if (!(stx->stx_mask & STATX_SUBVOL))
		return false;
	memcpy(out, (const char *)stx + STATX_SUBVOL_OFFSET, sizeof(*out));
	return true;
}

#endif
