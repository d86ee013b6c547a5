/*
 * btrfs_datasum: does btrfs checksum a file's data?  The btrfs backend's
 * data_checksummed hook (backend.h).  See btrfs_datasum.c.
 */
#ifndef FSCRUB_BTRFS_DATASUM_H
#define FSCRUB_BTRFS_DATASUM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backend_dir;
struct backend_entry;
struct scrub_ctx;
struct subvol_ino;

/*
 * What phase 5 (-x) has left to read when the kernel's scrub verified the
 * rest (the data_left hook):
 *  - the regular files btrfs keeps no data checksums for (NODATASUM), with
 *    a size, from the tree check's first pass (v; known: the pass ran);
 *  - the regular files changed at or after recent_ns, as the walk saw
 *    them (recent): the scrub read what the last commit before it had
 *    written, and data written later (still in the page cache, its
 *    extents not yet in the trees) it did not see.
 */
struct btrfs_unsummed {
	struct subvol_ino *v;		/* by subvol_ino_cmp, distinct */
	size_t nr;
	bool known;
	int64_t recent_ns;		/* 0: not asked for (no -x) */
	pthread_mutex_t lock;		/* recent */
	struct subvol_ino *recent;	/* in the walk's order, repeats possible */
	size_t nr_recent, alloc_recent;
	bool recent_lost;		/* a file's subvolume unknown, or no memory */
};

void btrfs_unsummed_init(struct btrfs_unsummed *u);

/*
 * Phase 3, walk threads: note the entry e of directory d if it is a
 * regular file changed at or after u->recent_ns.
 */
void btrfs_unsummed_note_recent(struct btrfs_unsummed *u, const struct backend_dir *d,
				const struct backend_entry *e);

/*
 * Phase 5: every file left, both lists together (sorted by
 * subvol_ino_cmp, distinct; malloc'ed, NULL when none) in *out and *nr;
 * false (nothing set) when they are not known.
 */
bool btrfs_unsummed_take(struct btrfs_unsummed *u, struct subvol_ino **out, size_t *nr);

/* The backend state's list (btrfs.c). */
struct btrfs_unsummed *btrfs_unsummed_of(struct scrub_ctx *ctx);

/*
 * Phase 3, main thread: keep a copy of the nr files v (subvolume, inode)
 * as the list u (any earlier one replaced) and mark it known; on no memory
 * it stays unknown (then phase 5 reads every file).
 */
void btrfs_unsummed_keep(struct btrfs_unsummed *u, const struct subvol_ino *v, size_t nr);

/* Free both lists and the lock. */
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
