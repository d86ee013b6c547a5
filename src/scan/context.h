/*
 * context: struct scrub_ctx, the one object every phase and check takes
 * first.  It carries what the phases share: the options, what phase 1
 * found out about the mount, the run history, the state the threads of a
 * phase share, what one phase makes for the next, and the report core's
 * state.  Its fields are grouped, as xfs_scrub's are, by who may write
 * them when: immutable after phase 1; mutable (atomic, or under the lock
 * named); set by a phase before its threads start.  State only one module
 * uses lives in that module, not here.
 */
#ifndef FSCRUB_CONTEXT_H
#define FSCRUB_CONTEXT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <time.h>

#include "report/report.h"
#include "tree/dircache.h"

struct scrub_ops;
struct linktable;
struct inoset;
struct progress;
struct ledger;
struct xlink_list;
struct state;
struct ino_key;
struct subvol_ino;
struct checkpoint;
struct devread;

/* What a filesystem does not promise, so the checks that rely on it are off. */
enum fs_quirks {
	/*
	 * getdents d_ino is not the st_ino of the same inode: overlayfs
	 * passes through its layers' numbers for some directories (".." of
	 * non-merged ones), FUSE reports what the daemon says unless
	 * use_ino.  dirent.ino, dir.dot and dir.dotdot are not checked.
	 */
	QUIRK_DINO_UNRELATED	= (1 << 0),
	/*
	 * Directory link counts are whatever a daemon or a server says (FUSE,
	 * CIFS, 9p): dir.nlink is not checked.
	 */
	QUIRK_DIR_NLINK_ANY	= (1 << 1),
	/*
	 * A file's link count need not be the number of its names:
	 * overlayfs with index=off breaks hard links on copy-up (the copied
	 * name becomes a new inode with one link, the other names keep the
	 * lower inode and its count; the kernel's overlayfs.rst says so).
	 * nlink.count mismatches are infos.
	 */
	QUIRK_NLINK_NAMES_ANY	= (1 << 2),
	/*
	 * Inode numbers may be per name, not per inode: a FUSE daemon
	 * without use_ino (squashfuse) gives each name its own st_ino, so a
	 * hard-linked file is seen as several inodes with one name each.
	 * Link counts are checked only if the walk reached some
	 * multiply-linked inode by two of its names (links_share_ino).
	 */
	QUIRK_INO_MAYBE_PER_NAME = (1 << 3),
	/*
	 * statfs counters come from a daemon (FUSE): inconsistent ones are
	 * not evidence of damage on the disk; statfs.counters is an info.
	 */
	QUIRK_STATFS_ANY	= (1 << 4),
	/*
	 * A directory's inode number may change while the scan runs, with
	 * nothing moved: overlayfs with its layers on different filesystems
	 * and xino off numbers directories itself, anew each time an evicted
	 * inode is looked up again.  The walk identifies directories by their
	 * file handle too (dir_node.fid).
	 */
	QUIRK_DIR_INO_UNSTABLE	= (1 << 5),
	/*
	 * Any inode number may change while the scan runs, with nothing
	 * moved, and the file handle with it: a FUSE daemon without use_ino
	 * (squashfuse) numbers inodes as they are looked up and forgets them
	 * when the kernel evicts them.  A directory met again under another
	 * number is the same if its type, owner and times are (dir_node.fid),
	 * a file opened under another number if its type, size, link count
	 * and times are (walk_open_file()).
	 */
	QUIRK_INO_UNSTABLE	= (1 << 6),
	/*
	 * Attribute names and values come from a daemon (FUSE): squashfuse
	 * 0.1.105 lists an attribute whose value is empty, then getxattr
	 * gives ENODATA.  Not evidence of damage on the disk: xattr.missing
	 * is a warning.
	 */
	QUIRK_XATTR_ANY		= (1 << 7),
	/*
	 * Files may share blocks without FIEMAP flagging them shared: ext4's
	 * shared_blocks feature (a read-only image deduplicated offline, as
	 * e2fsck -E unshare_blocks undoes).  extent.crosslinked is not
	 * looked for.
	 */
	QUIRK_BLOCKS_SHARED	= (1 << 8),
	/*
	 * Errors come from a daemon or a server (FUSE, network filesystems):
	 * EINVAL, ENODATA or EPERM from a stat or an open is what it chose
	 * to say, not a refused inode; only EIO, EUCLEAN and EBADMSG are
	 * damage (errno_is_inode_damage()).
	 */
	QUIRK_ERRORS_RELAYED	= (1 << 9),
};

struct scrub_options {
	bool debug;		/* -d: file:line on reports, implies verbose */
	bool verbose;		/* -v */
	bool check_only;	/* -n: never modify anything */
	bool verify_data;	/* -x */
	bool timing;		/* -T */
	bool background;	/* -b */
	bool threads_given;	/* -j was given */
	unsigned nr_threads;	/* -j, or the number of online CPUs */
	unsigned long long max_errors;	/* -a, 0 = unlimited */
	const char *mtab;	/* -m */
	int progress_fd;	/* -C, -1 if not given */
	const char *backend;	/* -t, NULL = choose by filesystem type */
	const char *target;	/* MOUNTPOINT|DEVICE as given */
	const char *json_path;	/* --json FILE, "-" for stdout */
	const char *metrics_path;	/* --metrics FILE */
	uint64_t limit_rate;	/* --limit, bytes per second; 0 = none;
				 * with limit_auto its maximum */
	bool limit_auto;	/* --limit auto[:RATE], the default with -b -x */
	bool limit_given;	/* --limit was on the command line */
	bool record;		/* --record: store checksum records (implies -x) */
	const char *ledger_dir;	/* --ledger DIR: records in DIR's database, not xattrs */
	const char *manifest_path;	/* --manifest FILE, or FSCRUB_MANIFEST with -x */
	bool manifest_from_env;	/* ... from FSCRUB_MANIFEST */
	const char *state_dir;	/* --state-dir DIR: the run history's database (state.h) */
	bool no_state;		/* --no-state: record nothing */
	bool rescan_errors;	/* --rescan-errors: -x reads only files with open findings */
	const char *since;	/* --since DATE as given: -x reads only files changed since */
	int64_t since_ns;	/* ... DATE, ns since the epoch */
	unsigned portion;	/* --portion P%: -x reads the P % least recently read; 0 none */
	uint64_t time_budget;	/* --time-budget: seconds the run may take; 0 none */
	bool resume;		/* --resume: continue from the checkpoint (checkpoint.h) */
};

/* Per-thread counters, summed after each phase; no atomics on hot paths. */
struct scrub_stats {
	unsigned long long dirs, files, symlinks, specials;
	unsigned long long symlinks_unread;	/* reading would change their atime */
	unsigned long long entries;		/* directory entries read */
	unsigned long long extents, xattrs;
	unsigned long long xattr_values;	/* of xattrs: values read back whole */
	unsigned long long xattr_unlisted;	/* inodes with too many names to list */
	unsigned long long names;		/* names checked for look-alikes (name_check.h) */
	unsigned long long bytes_read;		/* -x */
	unsigned long long since_skipped;	/* -x --since: files not read, unchanged */
	unsigned long long blocks;		/* st_blocks of inodes seen, 512 B units */
	unsigned long long inodes;		/* distinct inodes seen */
	unsigned long long bulk;		/* entries whose inode came from a bulk record */
	unsigned long long bulk_maps;		/* files mapped from bulk_extents, not opened */
};

/*
 * A ".." that did not point back, to be looked at again in phase 4.  A
 * d_ino has no st_dev: it is compared with the number of the directory the
 * walk found dir in (dir->parent, whose st_dev the walk knows), and the
 * second look checks dir's own (st_dev, inode) at its name.
 */
struct dotdot_suspect {
	struct dotdot_suspect *next;
	struct dir_node *dir;		/* reference */
	uint64_t dotdot_ino;
};

struct scrub_ctx {
	/*
	 * First, always: the report core reaches its state from the context
	 * it is handed (report_of(), report.h); context.c checks it.  Its
	 * counters are atomic, its output under its own lock.
	 */
	struct report report;

	/*
	 * Immutable after phase 1: the options (cli.c, before phase 1; phase 1
	 * may lower nr_threads) and what phase 1 finds out about the mount.
	 * Written by one thread before any other starts; read without a lock.
	 */
	struct scrub_options opt;
	char *mntpoint;		/* mount point as resolved from the table */
	char *source;		/* mount source (device) */
	char *fstype;		/* type from the mount table */
	char *fsroot;		/* root of the mount within the fs ("/" normally) */
	int table_mnt_id;	/* its id in the kernel's mount table, 0 if unknown */
	/*
	 * The filesystem is read-only as a whole (its superblock), so not in
	 * flux; not for a read-only mount of a filesystem written elsewhere
	 * (a read-only bind), nor where the mount table does not say.
	 */
	bool fs_readonly;
	int mnt_fd;		/* the visible mount root, held so umount says EBUSY */
	int walk_fd;		/* root of the tree walked: a private clone or mnt_fd */
	bool walk_is_readonly;	/* ... a clone made read-only and noatime */
	uint64_t walk_mnt_id;	/* statx mount id of walk_fd, if known */
	bool have_mnt_id;
	struct statx root_stx;
	struct statfs sfs;
	struct statvfs svfs;
	uint64_t dev_size;	/* bytes; 0 if FIEMAP offsets are not device offsets */
	const struct scrub_ops *ops;	/* stays after phases_release(): reports name it */
	void *backend;		/* the backend's private state (its own locking) */
	unsigned quirks;	/* enum fs_quirks, set by the backend in phase 1 */
	bool proc_fd_ok;	/* /proc/self/fd works: xattrs of non-files by path */
	bool no_fiemap;		/* FSCRUB_DEBUG_NO_FIEMAP: always FIBMAP */
	bool not_scanned;	/* phase 1 gave up: nothing was checked (phases.c) */
	uint64_t budget_end_ns;	/* --time-budget: CLOCK_MONOTONIC end of the run, 0 none (main) */

	/*
	 * The run history (history.c): set by history_open() and
	 * history_begin() (end of phase 1), read-only after; state is written
	 * under the report lock (state.h), the checkpoint under its own.
	 */
	struct state *state;		/* the store, NULL if the run is not recorded */
	char *fs_uuid;			/* the filesystem's key there, fs_identity() */
	int64_t run_id;			/* this run's row in it, 0 before phase 1 ends */
	struct ino_key *rescan;		/* --rescan-errors: the files to read, sorted */
	size_t nr_rescan;
	struct subvol_ino *rescan_sv;	/* ... those of other subvolumes, by subvolume id */
	size_t nr_rescan_sv;
	struct checkpoint *checkpoint;	/* resumable runs (checkpoint.h), NULL if not recorded */

	/*
	 * Mutable, shared by the threads of a phase: atomics, or under the
	 * lock named.  A flag is only ever set, never cleared, during a phase.
	 */
	struct dircache dcache;		/* its own lock (dircache.h); made by phase 1 */
	pthread_mutex_t suspects_lock;	/* dotdot_suspects, added by walk threads */
	atomic_bool names_hidden;	/* a name may be invisible (covered mount point) */
	atomic_bool dirs_changed;	/* a directory changed during the scan */
	atomic_bool links_share_ino;	/* two names of a multiply-linked inode were found */
	atomic_bool budget_spent;	/* --time-budget reached: phase 5 stopped reading */
	atomic_ullong progress_done;	/* work done in the current phase (progress.h) */
	atomic_ullong progress_base;	/* ... by the runs a resumed one continues */

	/*
	 * Per phase: set by a phase before its threads start, read-only while
	 * they run.
	 */
	uint64_t changed_since_ns;	/* phase 3: ctime at or after this: changed during the scan */
	struct region_plan *regions;	/* phase 5: its device regions (regions.h), or NULL */

	/*
	 * Products: what one phase makes for later ones.  Each is made by the
	 * phase named (NULL before it) and released by phases_release(),
	 * never by the context; phase3.c says what each holds.
	 */
	struct linktable *links;	/* phase 3 -> 4: multiply-linked inodes */
	struct dotdot_suspect *dotdot_suspects;	/* phase 3 -> 4 (suspects_lock) */
	struct inoset *reached;		/* phase 3: every inode the walk reached (walk.h) */
	struct inoset *dirs_unopened;	/* phase 3 -> 5: directories a walk could not open */
	struct xlink_list *xlinks;	/* phase 3 -> 4 -> 5: data extents (crosslink.h) */
	struct ledger *ledger;		/* phase 3 -> 5, -x: the checksum ledger (ledger.h) */
	struct devread *devread;	/* phase 3 -> 5, -x: reads alongside the walk (devverify.h) */
	struct timespec data_began;	/* ... their start, CLOCK_MONOTONIC; 0: none */

	/* Totals, summed from the threads' own after each phase (no atomics). */
	struct scrub_stats stats;
};

/*
 * Did this inode change since shortly before the scan began (its ctime at
 * or after ctx->changed_since_ns, set by phase 3)?  Such an inode's
 * oddities are races, never errors.
 */
bool stx_changed_during_scan(const struct scrub_ctx *ctx, const struct statx *stx);
/*
 * True for what a look-up, stat or open of one inode by name returns when
 * the filesystem refuses that inode as damaged: errno_is_corruption()
 * (stx.h), and EINVAL, ENODATA and (to root, whom permissions do not stop)
 * EPERM -- ext4 for a bad or missing encryption context or one that differs
 * from its directory's -- but where a daemon or a server says so
 * (QUIRK_ERRORS_RELAYED).  Only where the call's own arguments cannot be
 * the cause (a valid name and flags); ELOOP is the caller's to judge.
 */
bool errno_is_inode_damage(const struct scrub_ctx *ctx, int err);
/*
 * The same for a statx of one name that never follows it: ELOOP too, the
 * kernel refused the inode (ext4: a directory linked again below itself).
 */
bool errno_is_stat_damage(const struct scrub_ctx *ctx, int err);

/*
 * Count work done in the current phase, ctx->progress_done (cheap;
 * callable from any thread): what the progress reporter shows (progress.h).
 */
static inline void progress_add(atomic_ullong *counter, unsigned long long n)
{
	atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

void scrub_ctx_init(struct scrub_ctx *ctx);
void scrub_ctx_release(struct scrub_ctx *ctx);
void scrub_stats_add(struct scrub_stats *to, const struct scrub_stats *from);

#endif
