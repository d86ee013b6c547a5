/*
 * ledger_store: where the checksum ledger's records live, and their
 * format.
 *
 * A record is one regular file's content digest (contenthash.h) together
 * with what identifies the version of the file it was taken of: inode
 * number, generation (FS_IOC_GETVERSION, 0 where there is none), size,
 * mtime and ctime.  Its bytes (little-endian, LEDGER_REC_HEADER bytes
 * then 8 per chunk):
 *
 *   "FSL1"  version 1, algorithm 1 (XXH3 block sums), log2 block size,
 *           log2 chunk size; ino, generation, size, mtime (ns), ctime (ns),
 *           written (ns); chunk count (u32), 0 (u32); whole digest (16);
 *           per chunk the low 64 bits of its digest.
 *
 * Chunks are 1 MiB, doubled until there are at most LEDGER_MAX_CHUNKS, so
 * a record is at most about 2 KiB -- small enough for an ext4 xattr block.
 *
 * Stores:
 *   xattr   (default) the attribute trusted.fscrub.ledger of the file
 *           itself, user.fscrub.ledger where trusted.* cannot be written
 *           (not CAP_SYS_ADMIN).  Writing it changes the file's ctime, so
 *           the record keeps the ctime before the write and the time just
 *           after it: a ctime in between is the record's own.  Copies of
 *           the file that keep xattrs carry another inode number and are
 *           taken as having no record.
 *   sqlite  (--ledger DIR) DIR/fscrub-ledger.sqlite, on another
 *           filesystem, a table keyed by filesystem UUID, subvolume,
 *           inode and generation; the file is not written at all.  One
 *           connection behind a mutex; writes go in one transaction per
 *           run.  The subvolume is the kernel's id for it (btrfs: the
 *           subvolume's root id, 5 for the top level), 0 on filesystems
 *           without subvolumes: inode numbers, and on btrfs snapshots
 *           generations too, repeat from subvolume to subvolume.
 *           A database of the first schema (key: UUID, inode, generation)
 *           is converted when it is first opened for writing, its records
 *           given subvolume 0: they still serve filesystems without
 *           subvolumes, and are not used for btrfs files, which --record
 *           records again.  Opened read-only (-n) it is read as it is,
 *           for subvolume 0 only.
 */
#ifndef FSCRUB_LEDGER_STORE_H
#define FSCRUB_LEDGER_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/contenthash.h"

#define LEDGER_XATTR_TRUSTED	"trusted.fscrub.ledger"
#define LEDGER_XATTR_USER	"user.fscrub.ledger"
#define LEDGER_DB_NAME		"fscrub-ledger.sqlite"
#define LEDGER_MAX_CHUNKS	256
#define LEDGER_REC_HEADER	80
#define LEDGER_REC_MAX		(LEDGER_REC_HEADER + 8 * LEDGER_MAX_CHUNKS)

/*
 * The filesystem's UUID as 32 hex digits (FS_IOC_GETFSUUID), or
 * "fsid-" and its f_fsid where it has none, or where that is 0 (FUSE) a
 * key made from its mount (mount_key()), or "unknown"; fd is any file
 * on it.  The key of the ledger's database and of the run history (state.h).
 * len: at least 40.
 */
void fs_identity(int fd, char *out, size_t len);

struct ledger_record {
	unsigned block_shift, chunk_shift;
	uint64_t ino, gen, size;
	int64_t mtime_ns, ctime_ns, written_ns;
	uint32_t nr_chunks;
	struct chash128 whole;
	uint64_t chunk[LEDGER_MAX_CHUNKS];
};

/* Bytes of r encoded into buf (LEDGER_REC_MAX). */
size_t ledger_record_encode(const struct ledger_record *r, unsigned char *buf);
/* 0, or -EINVAL if buf is not a record of ours. */
int ledger_record_decode(const unsigned char *buf, size_t len, struct ledger_record *r);

struct sqlite3;

struct ledger_store {
	struct sqlite3 *db;		/* NULL: xattrs */
	pthread_mutex_t lock;		/* the connection, xattr_user */
	char fsid[40];			/* the filesystem's UUID in hex (sqlite key) */
	bool db_mode;			/* --ledger: the database, even if absent (-n) */
	bool xattr_user;		/* trusted.* was refused: user.* from now on */
	bool in_transaction;
	bool old_schema;		/* read-only, not converted: no subvol column */
};

/*
 * Open the store: dir NULL -> xattrs; else the database in dir, created if
 * need be (read-only if !write).  fs_fd: a descriptor on the filesystem,
 * for its UUID.  0, or a negative errno with a message in err.
 */
int ledger_store_open(struct ledger_store *s, const char *dir, bool write, int fs_fd,
		      char *err, size_t errlen);
void ledger_store_close(struct ledger_store *s);
/*
 * The record of the open file fd (subvolume subvol, inode ino, generation
 * gen; the xattr store uses fd alone): 0, -ENODATA, or an errno.
 */
int ledger_store_get(struct ledger_store *s, int fd, uint64_t subvol, uint64_t ino,
		     uint64_t gen, struct ledger_record *r);
/*
 * Store r for fd (in subvolume subvol).  0, or a negative errno (-ENOSPC /
 * -E2BIG: too big for an xattr).
 */
int ledger_store_put(struct ledger_store *s, int fd, uint64_t subvol,
		     const struct ledger_record *r);

#endif
