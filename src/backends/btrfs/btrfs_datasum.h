/*
 * btrfs_datasum: does btrfs checksum a file's data?  The btrfs backend's
 * data_checksummed hook (backend.h).  See btrfs_datasum.c.
 */
#ifndef FSCRUB_BTRFS_DATASUM_H
#define FSCRUB_BTRFS_DATASUM_H

#include <stdbool.h>
#include <stddef.h>

struct fe_rec;
struct scrub_ctx;
struct subvol_ino;

/*
 * The files btrfs keeps no data checksums for and that have data on the
 * disk (a regular extent), from the tree check's first pass: with -x,
 * phase 5 reads only these when the kernel's scrub verified the rest
 * (the data_left hook).  known: the list is complete (the pass ran).
 */
struct btrfs_unsummed {
	struct subvol_ino *v;		/* by subvol_ino_cmp, distinct */
	size_t nr;
	bool known;
};

/* The backend state's list (btrfs.c). */
struct btrfs_unsummed *btrfs_unsummed_of(struct scrub_ctx *ctx);

/*
 * Phase 3, main thread: keep (subvolume, inode) of each of the nr file
 * extents fe that btrfs must not checksum (want_csum < 0), as the list u
 * (any earlier one replaced) and mark it known; on no memory it stays
 * unknown (then phase 5 reads every file).
 */
void btrfs_unsummed_keep(struct btrfs_unsummed *u, const struct fe_rec *fe, size_t nr);

/* Free the list; u stays usable (empty, unknown). */
void btrfs_unsummed_release(struct btrfs_unsummed *u);

/*
 * Phase 3, walk threads: true if btrfs keeps data checksums for the open
 * regular file fd (its inode has no NODATASUM flag), so that every read
 * and the kernel scrub verify its data.  False when it has none, and when
 * that cannot be told (the checksum ledger then takes the file: a record
 * more, never a rot missed).  Thread-safe: no state.
 */
bool btrfs_data_checksummed(struct scrub_ctx *ctx, int fd);

#endif
