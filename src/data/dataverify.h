/*
 * dataverify: phase 5 (-x), read back every allocated byte of every
 * regular file to prove it is readable.
 *
 * Only allocated data is read (SEEK_DATA/SEEK_HOLE), in reads of 4 MiB,
 * with O_DIRECT where the filesystem allows it (so the device is read,
 * not the page cache, and the cache is not flooded), else buffered with
 * POSIX_FADV_SEQUENTIAL and POSIX_FADV_DONTNEED behind the reader.  A read
 * that fails with EIO, EUCLEAN or EBADMSG is read again block by block to
 * find exactly which ranges fail; each is reported with its byte offset and
 * the scan goes on.  Where the device itself can be read, phase 5 reads it
 * in physical order instead (devverify.h) and this reader only takes the
 * files whose extents it could not map.
 */
#ifndef FSCRUB_DATAVERIFY_H
#define FSCRUB_DATAVERIFY_H

#include <stdatomic.h>
#include <stdint.h>

#include "lib/inokey.h"
#include "tree/walk.h"

struct inoset;
struct ledger;
struct ratelimit;

/*
 * --since: read only the files whose mtime or ctime is at or after ns, and
 * with a --ledger database (ledger non-NULL) those too that have no record
 * of their current version there.  The others are counted, not read.
 */
struct dataverify_since {
	int64_t ns;
	struct ledger *ledger;		/* NULL: no --ledger database */
	atomic_ullong skipped;		/* files left unread as unchanged */
	atomic_ullong skipped_bytes;	/* ... their allocated bytes */
};

/* The walk_tree() arg of dataverify_visitor. */
struct dataverify_args {
	struct inoset *linked;		/* the multiply-linked files read so far */
	const struct ino_key *only;	/* by ino_key_cmp; if not NULL, read only these */
	size_t nr_only;
	/*
	 * ... and these, by subvolume id and inode (subvol_ino_cmp; the
	 * file's statx subvolume, inokey.h), which need not be on the mount's
	 * st_dev: --rescan-errors in other btrfs subvolumes.
	 */
	const struct subvol_ino *only_sv;
	size_t nr_only_sv;
	/*
	 * --portion, --time-budget by file (regions.h): read only the files
	 * of these FILE_BUCKETS buckets (regions_bucket_of()); if bucket_bytes
	 * is set, add every regular file's allocated bytes to its bucket's;
	 * budget: stop reading when regions_budget_spent().
	 */
	const bool *buckets;
	atomic_ullong *bucket_bytes;
	bool budget;
	struct ratelimit *limit;	/* --limit, or NULL */
	struct dataverify_since *since;	/* --since, or NULL */
};

extern const struct walk_visitor dataverify_visitor;

#endif
