/*
 * context: struct scrub_ctx, the one object every phase and check takes
 * first.  It carries the options, what phase 1 found out about the mount,
 * the shared walk state and the report counters.  Fields are written by
 * phase 1 (single-threaded) and read-only afterwards, except the atomics
 * and the structures that document their own locking.
 */
#ifndef FSCRUB_CONTEXT_H
#define FSCRUB_CONTEXT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#include "dircache.h"

struct scrub_ops;
struct linktable;

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
};

/* Per-thread counters, summed after each phase; no atomics on hot paths. */
struct scrub_stats {
	unsigned long long dirs, files, symlinks, specials;
	unsigned long long entries;		/* directory entries read */
	unsigned long long extents, xattrs;
	unsigned long long bytes_read;		/* -x */
	unsigned long long blocks;		/* st_blocks of inodes seen, 512 B units */
};

/* A ".." that did not point back, to be looked at again in phase 4. */
struct dotdot_suspect {
	struct dotdot_suspect *next;
	struct dir_node *dir;		/* reference */
	uint64_t dotdot_ino;
};

struct scrub_ctx {
	struct scrub_options opt;

	/* Phase 1: what is being scrubbed. */
	char *mntpoint;		/* mount point as resolved from the table */
	char *source;		/* mount source (device) */
	char *fstype;		/* type from the mount table */
	char *fsroot;		/* root of the mount within the fs ("/" normally) */
	int mnt_fd;		/* the visible mount root, held so umount says EBUSY */
	int walk_fd;		/* root of the tree walked: a private clone or mnt_fd */
	bool walk_is_clone;	/* walk_fd is a detached clone: no submounts in it */
	uint64_t walk_mnt_id;	/* statx mount id of walk_fd, if known */
	bool have_mnt_id;
	struct statx root_stx;
	struct statfs sfs;
	struct statvfs svfs;
	uint64_t dev_size;	/* bytes; 0 if FIEMAP offsets are not device offsets */
	const struct scrub_ops *ops;
	void *backend;		/* the backend's private state */

	/* Shared walk state. */
	struct dircache dcache;
	struct linktable *links;
	pthread_mutex_t suspects_lock;
	struct dotdot_suspect *dotdot_suspects;
	atomic_bool names_hidden;	/* a name may be invisible (covered mount point) */
	atomic_int fiemap_state;	/* 0 unknown, 1 FIEMAP, -1 FIBMAP, -2 neither */
	atomic_int fiemap_xattr_state;
	unsigned fd_budget;
	bool proc_fd_ok;	/* /proc/self/fd works: xattrs of non-files by path */

	/* Totals, summed from the threads after each phase. */
	struct scrub_stats stats;

	/* Report state (report.c). */
	pthread_mutex_t report_lock;
	atomic_ullong nr_errors, nr_warnings, nr_infos, nr_operational;
	atomic_bool aborted;		/* -a reached */
	bool output_failed;		/* stdout could not be written */
};

/* Set by the SIGINT/SIGTERM handler. */
extern volatile sig_atomic_t scrub_cancelled;

void scrub_ctx_init(struct scrub_ctx *ctx);
void scrub_ctx_release(struct scrub_ctx *ctx);
void scrub_stats_add(struct scrub_stats *to, const struct scrub_stats *from);

#endif
