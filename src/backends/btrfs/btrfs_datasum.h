/*
 * btrfs_datasum: does btrfs checksum a file's data?  The btrfs backend's
 * data_checksummed hook (backend.h).  See btrfs_datasum.c.
 */
#ifndef FSCRUB_BTRFS_DATASUM_H
#define FSCRUB_BTRFS_DATASUM_H

#include <stdbool.h>

struct scrub_ctx;

/*
 * Phase 3, walk threads: true if btrfs keeps data checksums for the open
 * regular file fd (its inode has no NODATASUM flag), so that every read
 * and the kernel scrub verify its data.  False when it has none, and when
 * that cannot be told (the checksum ledger then takes the file: a record
 * more, never a rot missed).  Thread-safe: no state.
 */
bool btrfs_data_checksummed(struct scrub_ctx *ctx, int fd);

#endif
