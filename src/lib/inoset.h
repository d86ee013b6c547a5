/*
 * inoset: a compact set of (st_dev, st_ino) pairs, for "have we seen this
 * inode before?" over a whole walk.
 *
 * Inode numbers are dense in practice (ext4 numbers inodes 1..N, XFS
 * allocates them in chunks of 64 within an allocation group), so the set is
 * a hash of 4096-bit bitmaps, one per (st_dev, st_ino / 4096): about one
 * bit per inode number in use plus 40 bytes per bitmap, far less than a
 * hash entry per inode.  Sharded with one mutex per shard.
 */
#ifndef FSCRUB_INOSET_H
#define FSCRUB_INOSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct inoset;

struct inoset *inoset_new(void);
void inoset_free(struct inoset *set);
/* Add (dev, ino); return true if it was already in the set. */
bool inoset_test_and_set(struct inoset *set, uint64_t dev, uint64_t ino);
/* Is (dev, ino) in the set? */
bool inoset_test(struct inoset *set, uint64_t dev, uint64_t ino);
/* Memory held by the set, for -T and the man page's bound. */
size_t inoset_bytes(const struct inoset *set);

#endif
