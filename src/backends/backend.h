/*
 * backend: the interface between fscrub's core and a filesystem backend.
 *
 * The core (walk, generic checks, reporting) knows nothing of any
 * filesystem's ioctls; a backend knows nothing of the walk's internals.
 * Besides this header, a backend includes from the core only reporting
 * (report/report.h, report/checks.h), the context (scan/context.h),
 * tree/dircache.h's reference counts (to keep a directory for a report's
 * path), cmd/owners.h for its locate hook, the subcommands' doors
 * backends/health.h and backends/watch.h for its health and watch hooks,
 * and the utilities of lib/ (strbuf.h, stx.h, inokey.h, inoset.h,
 * workqueue.h, thread.h, crc32c.h, mountpoint.h, fsmap.h, ioengine.h,
 * fserror.h, ...); never tree/walk.h, another
 * header of tree/ or data/, or a phase's header.  What the core hands a
 * backend is in the backend_* types and functions below, made for the
 * call: phase 3's extents, names for inodes found by number, whether the
 * ledger notes every file.  `tools/layout --check-backends` holds every
 * backend file to this list, in CI (test_cli.py).
 *
 * A backend is a struct scrub_ops: the registry picks the first whose
 * match() accepts the filesystem, or the one named with -t; "generic"
 * accepts everything and is last.  Every hook is optional (NULL: nothing
 * to do) and runs in the phase named over it (phases.h).  Hooks that
 * return int return 0, or a negative errno when the backend could not do
 * its job (an operational error, exit bit 8, and the run goes on);
 * findings are reported through report.h, never returned.
 *
 * One exception: scan_fs returns -EPERM or -EACCES when the backend's own
 * checks need a privilege the user does not have (what, in needs).  The
 * core then cleans the backend up, says once which checks are skipped and
 * why, and goes on with the generic backend: an unprivileged run still
 * walks and checks everything it can read.
 *
 * Threading: hooks that take only the context run on the main thread,
 * one at a time, and may change the backend's state (ctx->backend) as
 * they like.  bulk_inodes, check_dir, check_inode, data_elsewhere,
 * bulk_extents, bulk_extents_keep, data_checksummed and list_xattrs run in the walk threads, many at once: they may touch
 * only per-thread state (indexed by backend_dir.thread) or state they
 * lock or update atomically, and must not block for long (the walk
 * waits).
 */
#ifndef FSCRUB_BACKEND_H
#define FSCRUB_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/fiemap.h>

struct scrub_ctx;
struct dir_node;
struct fiemap_extent;
struct statx;
struct strbuf;
struct subvol_ino;
struct health;
struct watch_fs;
struct watch_source;

/*
 * A directory the walk is reading, as a backend sees it; valid for the
 * call only.
 */
struct backend_dir {
	struct dir_node *node;		/* where it is: report.h names it from this */
	int fd;				/* open on the directory for the call */
	const struct statx *stx;	/* the directory, stat'ed before it was read */
	unsigned thread;		/* the calling walk thread, 0 .. nr_threads - 1 */
};

/* One entry of that directory whose inode could be stat'ed. */
struct backend_entry {
	const char *name;		/* NUL-terminated, relative to backend_dir.fd */
	size_t namelen;
	/*
	 * The inode as the walk stat'ed it, or as the backend's bulk_inodes
	 * record gave it (bulk): the backend's own view then, not the VFS's.
	 */
	const struct statx *stx;
	int fd;				/* an open regular file, or -1 */
	bool bulk;			/* stx is from a bulk_inodes record */
	/*
	 * With bulk false: the bulk_inodes record the walk took the entry
	 * from before it opened the file (stx is then the open file's
	 * statx), or NULL.  The backend may compare the two instead of
	 * asking for its own view again.
	 */
	const struct backend_inode *opened_from;
	/*
	 * A regular file its bulk record says maps no data blocks: not
	 * opened, its (empty) extent map is known all the same.
	 */
	bool no_extents;
	/*
	 * A regular file mapped from the backend's bulk_extents hook: not
	 * opened, its data fork's map is map (nr_map extents) all the same.
	 */
	bool bulk_map;
	/*
	 * The data fork's whole FIEMAP map (flags 0) as phase 3 read it just
	 * now through fd, nr_map extents; NULL when it was not read whole (a
	 * long map, a problem, a second name): map it yourself if need be.
	 */
	const struct fiemap_extent *map;
	size_t nr_map;
};

/*
 * One inode as a backend reads it in bulk (bulk_inodes): what phase 3
 * would otherwise ask statx for, plus what tells it which per-file
 * calls it may leave out.  Times are nanoseconds since the epoch;
 * blocks are 512-byte units, as st_blocks.
 */
struct backend_inode {
	uint64_t ino;			/* 0: no record for this number */
	uint64_t size, blocks;
	int64_t atime_ns, mtime_ns, ctime_ns, btime_ns;
	uint32_t nlink, uid, gid, gen;
	uint32_t nextents;		/* data extents (UINT32_MAX: more, or unknown) */
	uint16_t mode;
	uint16_t flags;			/* BACKEND_INODE_* */
};

enum {
	/* The inode may have extended attributes (else it has none). */
	BACKEND_INODE_XATTRS = 1 << 0,
};

/*
 * Where ino is in inos[0 .. n-1], bulk_inodes's sorted numbers: its index,
 * or n if it is not there.  The walk and the backends that keep a
 * request's records look their entries up by it.
 */
static inline size_t bulk_index_of(const uint64_t *inos, size_t n, uint64_t ino)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (inos[mid] < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && inos[lo] == ino ? lo : n;
}

struct scrub_ops {
	const char *name;
	/* What scan_fs's -EPERM/-EACCES means the backend needs (NULL: never). */
	const char *needs;

	/* Phase 1: does this backend handle ctx's filesystem?  No side effects. */
	bool (*match)(const struct scrub_ctx *ctx);
	/*
	 * Phase 1: learn geometry and features, set up ctx->backend and the
	 * quirks the generic checks follow (ctx->quirks).
	 */
	int (*scan_fs)(struct scrub_ctx *ctx);
	/* Phase 2: check filesystem metadata. */
	int (*scan_metadata)(struct scrub_ctx *ctx);
	/*
	 * Phase 3, walk threads: extra checks of one directory, called once
	 * it has been read (after check_inode for each of its entries) ...
	 */
	void (*check_dir)(struct scrub_ctx *ctx, const struct backend_dir *d);
	/*
	 * Phase 3, walk threads, before the entries of each getdents buffer
	 * of directory d are visited (d->thread: the calling walk thread; d
	 * tells which subvolume the numbers are of where they repeat, btrfs):
	 * the records of the inodes inos[0 .. n-1] (sorted,
	 * distinct), in out[i] for inos[i], out[i].ino = 0 for a number it
	 * has no record of (freed, unreadable, not asked).  The walk then
	 * takes a non-directory entry's inode from its record instead of a
	 * statx, and leaves out the open, FIEMAP and xattr listing the record
	 * says are not needed; any entry without a record, or whose record
	 * disagrees with its directory entry, is stat'ed as before.  Every
	 * finding is still confirmed through the VFS before it is reported.
	 * Returns the number of records, or a negative errno (then none).
	 * NULL: the walk stats every entry (FSCRUB_DEBUG_NO_BULK=1 too).
	 */
	int (*bulk_inodes)(struct scrub_ctx *ctx, const struct backend_dir *d,
			   const uint64_t *inos, size_t n, struct backend_inode *out);
	/*
	 * Phase 3, walk threads: the whole data fork map of the regular file
	 * whose bulk record is b (from the bulk_inodes call this thread made
	 * for the getdents buffer being visited), as FIEMAP (flags 0)
	 * would give it -- device bytes, FIEMAP_EXTENT_UNWRITTEN and
	 * FIEMAP_EXTENT_LAST as it sets them -- in out[0 .. max-1], so that
	 * the walk need not open the file.  Only for a file not changed since
	 * the scan began, and only when the map accounts for every block of
	 * b->blocks (no attribute or mapping blocks: then FIEMAP would map
	 * the data fork alone too) and nothing in it would be flagged shared.
	 * The walk checks it as a FIEMAP map; whatever looks wrong in it is
	 * looked at again through the open file before anything is said.
	 * Returns the number of extents; -ENODATA when the backend cannot
	 * vouch for this file's map (the walk maps it with FIEMAP), another
	 * negative errno when it has no maps at all.  NULL: FIEMAP always.
	 */
	int (*bulk_extents)(struct scrub_ctx *ctx, unsigned thread, const struct backend_inode *b,
			    struct fiemap_extent *out, size_t max);
	/*
	 * Phase 3, walk threads: the walk took the map bulk_extents gave for
	 * b (it checked out as a FIEMAP map would) and does not copy it into
	 * the extent list: the backend keeps it and adds it with
	 * backend_collect_extents() at the start of scan_inodes (a copy of
	 * each would be held at once).  Called only for a file on the mount's
	 * own device.  NULL: the walk copies every map into the list.
	 */
	void (*bulk_extents_keep)(struct scrub_ctx *ctx, const struct backend_inode *b);
	/* ... and of each entry whose inode could be stat'ed. */
	void (*check_inode)(struct scrub_ctx *ctx, const struct backend_dir *d,
			    const struct backend_entry *e);
	/*
	 * Phase 3, walk threads: is the data of this open regular file on
	 * another device than the mount's (an XFS realtime file)?  Its
	 * extents are then not placed on the device nor cross-checked, and
	 * -x reads it file by file.  NULL: never.
	 */
	bool (*data_elsewhere)(struct scrub_ctx *ctx, int fd);
	/*
	 * Phase 3, walk threads, only when the checksum ledger would take
	 * the file (-x with --record or --ledger, or a file with a record):
	 * does the filesystem keep checksums of this open regular file's
	 * data, so that every read and its own scrub verify it (btrfs,
	 * unless the inode is NODATASUM)?  Such a file is left out of the
	 * ledger: not recorded, not judged (a manifest still checks it).
	 * Answer false when it cannot be told.  NULL: never (XFS, ext4).
	 */
	bool (*data_checksummed)(struct scrub_ctx *ctx, int fd);
	/*
	 * Phase 3, walk threads: listxattr() refused an inode's attribute
	 * names as more than the VFS can list (E2BIG: over 64 KiB).  Append
	 * each of its names, whole ("user.x", "trusted.y") and NUL-terminated,
	 * to names, from the filesystem's own listing.  The inode is e, an
	 * entry of d (e->fd open on it, or -1: d->fd and e->name, a symlink
	 * never followed), or d itself when e is NULL.  Returns 0;
	 * -EOPNOTSUPP when the filesystem has no such listing for it;
	 * -EPERM or -EACCES without the privilege it needs; another negative
	 * errno when the listing failed (names may hold part of it then).
	 * The core reads each value back by name.  NULL: -EOPNOTSUPP.
	 */
	int (*list_xattrs)(struct scrub_ctx *ctx, const struct backend_dir *d,
			   const struct backend_entry *e, struct strbuf *names);
	/*
	 * Phase 3, main thread, before the walk: start what reads alongside
	 * it and is waited for by scan_inodes (or by cleanup, when the walk
	 * fails and scan_inodes is not called).  NULL: nothing.
	 */
	void (*scan_inodes_start)(struct scrub_ctx *ctx);
	/*
	 * Phase 3, after the walk: inode-table level checks against what the
	 * walk reached (backend_reached(), backend_extents_by_phys()).
	 */
	int (*scan_inodes)(struct scrub_ctx *ctx);
	/*
	 * Phase 5, main thread: what a GETFSMAP special owner code of this
	 * filesystem is ("an inode btree"), to name the owner of a bad
	 * sector; NULL if the code is not one of this backend's.  Asked of
	 * backend_native(), even under -t generic.
	 */
	const char *(*fsmap_owner_name)(uint64_t owner);
	/*
	 * Phase 3, main thread, before the walk (-x): call fn(arg, off, len)
	 * for each device range, in bytes, that GETFSMAP calls in use by no
	 * known owner but that holds no file data, so that the device reads
	 * alongside the walk leave it out (devverify.h, spacemap.h): ext4's
	 * internal journal.  NULL: none.
	 */
	void (*space_not_data)(struct scrub_ctx *ctx,
			       void (*fn)(void *arg, uint64_t off, uint64_t len), void *arg);
	/* Phase 5: verify file data; NULL uses the core's readers. */
	int (*scan_data)(struct scrub_ctx *ctx);
	/*
	 * Phase 5 (-x, reading every file), before the core's readers: did
	 * the filesystem's own scrub (phase 2) verify, on every copy, all the
	 * data it keeps checksums of?  If so, set *left to the files it keeps
	 * none for, which only a read verifies, and those changed since its
	 * scrub could see them (*nr of them, by subvolume and
	 * inode, sorted by subvol_ino_cmp, distinct; malloc'ed, the core frees
	 * it; NULL when none) and return 0: the core reads only those (and a
	 * manifest's files).  Else return a negative errno and set *why (a
	 * static string): the core reads every file.  NULL: every file.
	 */
	int (*data_left)(struct scrub_ctx *ctx, struct subvol_ino **left, size_t *nr,
			 const char **why);
	/* Phase 6: summary counters. */
	int (*summary)(struct scrub_ctx *ctx);
	/*
	 * After the last phase (phases_release()): free ctx->backend.  Called
	 * whenever scan_fs was, even if it failed.
	 */
	void (*cleanup)(struct scrub_ctx *ctx);

	/*
	 * The hooks below serve the subcommands, not a scan: no context, no
	 * phase.  A backend is found for them by the mount table's type
	 * (backend_of_fstype()), and a type whose backend lacks the hook is
	 * not supported by the subcommand.
	 */
	/*
	 * fscrub health (cmd/health.c): what the kernel knows of the health
	 * of the mounted filesystem h->m, into h (backends/health.h).  0, or
	 * a negative errno when it cannot be read.  NULL: no health source.
	 */
	int (*health)(struct health *h);
	/*
	 * fscrub watch (cmd/watch.c, backends/watch.h), main thread: set up
	 * the filesystem's own source of error events; root is its mount
	 * root, open for the call.  Returns 0 with src filled in (said on
	 * stderr: "watching ..."), WATCH_FS_ERROR when the kernel's
	 * FAN_FS_ERROR events are to be followed instead, or a negative errno
	 * when it cannot be watched (the reason said).  NULL: not watched
	 * unless named, and then only by FAN_FS_ERROR.
	 */
	int (*watch_open)(struct watch_fs *wf, int root, struct watch_source *src);
	/* fscrub watch: src->fd is readable (poll() said POLLIN or an error). */
	void (*watch_read)(struct watch_fs *wf, struct watch_source *src);
	/* fscrub watch: src->timed, and --poll-interval seconds have passed. */
	void (*watch_poll)(struct watch_fs *wf, struct watch_source *src);
	/* fscrub watch: the filesystem is no longer watched: free src's state, close its fd. */
	void (*watch_close)(struct watch_source *src);
};

/* Pick the backend for ctx (by -t name if given).  NULL: unknown -t name. */
const struct scrub_ops *backend_select(const struct scrub_ctx *ctx);
/*
 * The backend made for ctx's filesystem, whatever -t chose: what its
 * filesystem's own codes mean (fsmap_owner_name) does not depend on which
 * backend checks it.
 */
const struct scrub_ops *backend_native(const struct scrub_ctx *ctx);
/* Find a backend by name; NULL if none. */
const struct scrub_ops *backend_find(const char *name);
/*
 * The backend of a mount table's type ("xfs", "ext4", "btrfs"), for the
 * subcommands' hooks; NULL for any other type (generic has no type).
 */
const struct scrub_ops *backend_of_fstype(const char *fstype);
/* Has fstype's backend a health hook, a watch_open hook?  (fsmounts_collect()'s filters.) */
bool backend_has_health(const char *fstype);
bool backend_has_watch(const char *fstype);
/* "generic, ..." for messages. */
const char *backend_names(void);

extern const struct scrub_ops generic_ops;
extern const struct scrub_ops xfs_ops;
extern const struct scrub_ops btrfs_ops;
extern const struct scrub_ops ext4_ops;

/* ---- what the core offers the backends (backend_core.c) ---------------- */

/*
 * Was the inode (dev, ino) reached by a name in phase 3's walk?  For the
 * orphan checks in scan_inodes; false before the walk.
 */
bool backend_reached(const struct scrub_ctx *ctx, uint64_t dev, uint64_t ino);

/* A data extent of a file, as phase 3 mapped it with FIEMAP. */
struct backend_extent {
	uint64_t ino, logical, phys, len;	/* bytes; phys on the mount's device */
	bool recent;				/* the inode changed during the scan */
};

/*
 * Phase 3's data extents with a place on the mount's own device, sorted
 * by (device offset, inode) in place, for a sweep in device order with no
 * copy (the list is 24 bytes an extent; phases 4 and 5 want this order
 * too).  Returns their number: backend_extent_at(ctx, i) for i below it
 * gives each.  0 when phase 3 kept none, or more than it may keep.
 */
size_t backend_extents_by_phys(struct scrub_ctx *ctx);
/*
 * scan_inodes of a backend with bulk_extents_keep, before anything else:
 * add n extents of inode ino (of the mount's own device), which the walk
 * took from bulk_extents, to phase 3's extent list.
 */
void backend_collect_extents(struct scrub_ctx *ctx, uint64_t ino,
			     const struct fiemap_extent *x, size_t n);
struct backend_extent backend_extent_at(const struct scrub_ctx *ctx, size_t i);
/*
 * The same extents in the order the walk left them (no sort): their
 * number, each by backend_extent_at().  backend_extents_whole(): phase 3
 * kept the extents of every file it mapped (false: it kept none, or went
 * past its bound); backend_unmapped_inodes(): the inodes of the mount's
 * device whose maps it could not keep whole, sorted, malloc'ed (*n).
 */
size_t backend_extents_count(const struct scrub_ctx *ctx);
bool backend_extents_whole(const struct scrub_ctx *ctx);
uint64_t *backend_unmapped_inodes(const struct scrub_ctx *ctx, size_t *n);
/*
 * FIEMAP flags of an extent with no place on the device of its own, or
 * no known length there (FIEMAP gives encoded extents' lengths
 * uncompressed): phase 3 keeps none of these.
 */
#define BACKEND_NO_LOCATION (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | \
			     FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED | \
			     FIEMAP_EXTENT_ENCODED)

/*
 * Names for inodes a backend found by number (phase 3's walk is over): a
 * second walk that stops at the first name of each inode of the mount's
 * device added, and opens nothing.  backend_names_walk() returns how many
 * it named, or a negative errno if it could not start (reported);
 * backend_names_get() gives an inode's directory and name (false: no name
 * found, or under a directory the walk could not read).
 */
struct backend_names;
struct backend_names *backend_names_new(struct scrub_ctx *ctx, const char *why);
void backend_names_add(struct backend_names *bn, uint64_t ino);
int backend_names_walk(struct backend_names *bn, size_t *asked);
bool backend_names_get(struct backend_names *bn, uint64_t ino, const struct dir_node **dir,
		       const char **name);
void backend_names_free(struct backend_names *bn);

/* Will phase 3's checksum ledger note every file (--record or --ledger with -x)? */
bool backend_ledger_notes_all(const struct scrub_ctx *ctx);

/* What backend_walk_tree() calls; either may be NULL. */
struct backend_walk {
	/* Each entry whose inode could be stat'ed (walk threads). */
	void (*entry)(struct scrub_ctx *ctx, void *arg, const struct backend_dir *d,
		      const struct backend_entry *e);
	/* Each directory, after it was read (walk threads). */
	void (*dir_end)(struct scrub_ctx *ctx, void *arg, const struct backend_dir *d);
};

/*
 * Walk the whole tree again with the walk threads (a second look, in
 * scan_inodes or later), calling w's functions with arg.  0, or a
 * negative errno if the walk could not start.
 */
int backend_walk_tree(struct scrub_ctx *ctx, const struct backend_walk *w, void *arg);

/*
 * Generic statfs sanity (phase 2 of the generic backend): free counts may
 * not exceed totals.  Returns NULL if sane, else what is wrong.
 */
struct statvfs;
const char *statvfs_insane(const struct statvfs *sv);
/* The statfs counters of ctx's mount, checked twice before an error. */
void generic_check_statfs(struct scrub_ctx *ctx);

#endif
