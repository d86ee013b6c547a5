/*
 * ledger: the checksum ledger -- silent data corruption on filesystems
 * without data checksums (XFS, ext4), and of the files btrfs keeps no
 * checksums for (NODATASUM: `chattr +C`, nodatacow/nodatasum mounts).
 * Files whose data the filesystem checksums itself (the backend's
 * data_checksummed hook: btrfs's other files) are left to it: no record,
 * no verdict; a record one has from before is ignored.
 *
 * With --record, phase 5 (-x) stores for every regular file a content
 * digest (contenthash.h) with the file's size, mtime, ctime and inode
 * generation (ledger_store.h: an xattr, or with --ledger DIR a database
 * on another filesystem).  Every -x afterwards compares: a file whose
 * size, mtime and ctime are those of its record but whose content is not
 * has changed without being written -- bit rot, a bad controller, bad RAM
 * during writeback: an error naming the first differing chunk.  A file
 * modified since its record gets a new one (not under -n).
 *
 * The hashing is done by the data scan's own reads, no second pass: the
 * device-order reader (devverify.h) hands each read buffer to
 * ledger_hash_read(), which hashes the pieces of the files whose extents
 * lie in it; the per-file reader (dataverify.h) streams a file through
 * ledger_stream_*().  A file hashed by the device reader is judged after
 * it, in a walk that opens each one (ledger_judge_walk()).
 *
 * The live-filesystem rules:
 *   - phase 5 starts with syncfs(), so the disk holds what was written
 *     (not under -n where files are read only through the filesystem:
 *     their O_DIRECT reads write back what they read);
 *   - a file is judged only if its size, mtime and ctime are still those
 *     phase 3 saw and it did not change since shortly before the scan
 *     began (timestamps are coarse: a write in the same tick as a stat
 *     would go unseen), and not while open for writing (a read lease
 *     cannot be had): such files are skipped, said with -v;
 *   - a digest that differs from its record is re-read with O_DIRECT from
 *     the file before anything is said; only a second mismatch, of a file
 *     still unchanged, is an error.
 *
 * Files are (st_dev, st_ino) keys (inokey.h) throughout: each btrfs
 * subvolume and snapshot numbers its inodes anew.
 *
 * Memory: 56 bytes per regular file noted in phase 3 (with --record or
 * --ledger every file, else those with a record), 40 bytes per 1 MiB of
 * file data hashed by the device reader, and 8 bytes per extent.
 */
#ifndef FSCRUB_LEDGER_H
#define FSCRUB_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/inokey.h"

struct ledger;
struct scrub_ctx;
struct walk_thread;
struct walk_dir;
struct walk_entry;
struct xlink_list;
struct statx;

/* What phase 3 saw of a file. */
struct ledger_file {
	struct ino_key id;
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
	uint64_t expect;		/* bytes the device reader should hash */
	uint64_t hashed;		/* ... and did (under the ledger's lock) */
};

/* A walk thread's notes, merged after phase 3. */
struct ledger_notes {
	struct ledger_file *v;
	size_t n, alloc;
	unsigned long long hidden;	/* files whose trusted.* record may be hidden */
};

/*
 * From the options, after phase 1: *out NULL when there is nothing to do
 * (no -x).  -EINVAL for a manifest that cannot be read or parsed, or a
 * --ledger directory on the filesystem itself (said on stderr: a usage
 * error).
 */
int ledger_new(struct scrub_ctx *ctx, struct ledger **out);
void ledger_free(struct ledger *lg);

/* Phase 3: does ledger_note() keep every regular file (--record, --ledger)? */
bool ledger_notes_all(const struct ledger *lg);
/* Will the ledger phase 3 makes with these options note every file (as above)? */
struct scrub_options;
bool ledger_will_note_all(const struct scrub_options *o);
/*
 * Phase 3: would ledger_note() keep or count this regular file (has_record:
 * it has a ledger xattr; counted: a record in trusted.* may be hidden from
 * this process)?  Asked before a question that costs (is it checksummed by
 * the filesystem?).
 */
bool ledger_wants(const struct ledger *lg, bool has_record);
/*
 * Phase 3: a file the filesystem checksums itself (backend.h,
 * data_checksummed): not noted, only counted for -v.  Any thread.
 */
void ledger_leave_to_fs(struct ledger *lg);
/* Phase 3: a regular file (has_record: it has a ledger xattr). */
void ledger_note(struct ledger *lg, struct ledger_notes *nt, const struct walk_entry *e,
		 bool has_record);
void ledger_merge(struct ledger *lg, struct ledger_notes *nt);
/*
 * Phase 3, any thread: has ledger_note() kept a file yet (phase 5 will
 * hash)?  The device reads that overlap the walk hash nothing, so they
 * stop at the first (devverify.h).
 */
bool ledger_noted(struct ledger *lg);

/*
 * Phase 5, before reading: sort the notes, open the store.  Returns false
 * if no file is to be hashed (then nothing else need be called).
 */
bool ledger_prepare(struct scrub_ctx *ctx, struct ledger *lg);

/*
 * The inodes the per-file reader must take, sorted by ino_key_cmp: those in
 * the manifest (--manifest), whose digests need the bytes in file order.
 */
const struct ino_key *ledger_per_file(const struct ledger *lg, size_t *n);
bool ledger_reads_per_file(const struct ledger *lg, struct ino_key id);

/*
 * --since with --ledger: after ledger_prepare(), does the database hold a
 * record of this version of the file (open on fd, statx stx: same size,
 * mtime and ctime), i.e. was it hashed since it last changed?  False
 * without a database, and for a record of another file.  Any thread.
 * (The database keeps no time of hashing: a record's written time is the
 * file's ctime there, ledger_store.h.)
 */
bool ledger_has_current_record(struct ledger *lg, int fd, const struct statx *stx);
/* Whether --since may ask ledger_hashed_since(): a --ledger database is open. */
bool ledger_has_database(const struct ledger *lg);

/*
 * After ledger_prepare(): does the device reader hash files for the ledger
 * (records to compare or to write)?  A resumed scan then starts over
 * (checkpoint.h): a digest needs all of a file's bytes.
 */
bool ledger_hashes_files(const struct ledger *lg);

/* The device reader: a sorted extent list; then each buffer read. */
void ledger_device_begin(struct ledger *lg, const struct xlink_list *l);
void ledger_hash_read(struct ledger *lg, uint64_t off, uint64_t len, const char *buf);

/*
 * After the device reader: judge the files it hashed, in a walk; files in
 * skip (sorted) were read, and judged, by the per-file reader instead.
 */
int ledger_judge_walk(struct scrub_ctx *ctx, struct ledger *lg, const struct ino_key *skip,
		      size_t nr_skip);

/* The per-file reader: NULL if the file is not hashed. */
struct ledger_stream;
struct ledger_stream *ledger_stream_begin(struct ledger *lg, const struct walk_entry *e);
void ledger_stream_feed(struct ledger_stream *s, uint64_t off, const char *buf, uint64_t len);
/* A read failed: no verdict for this file. */
void ledger_stream_fail(struct ledger_stream *s);
/* Judge the file (fd: the reader's) and free s. */
void ledger_stream_end(struct walk_thread *t, const struct walk_dir *d,
		       const struct walk_entry *e, int fd, struct ledger_stream *s);

/* The closing line for -v, and the store's close. */
void ledger_finish(struct scrub_ctx *ctx, struct ledger *lg);

#endif
