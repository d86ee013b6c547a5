/*
 * backend: the interface between fscrub's core and a filesystem backend.
 *
 * The core (walk, generic checks, reporting) knows nothing of any
 * filesystem's ioctls; a backend knows nothing of the walk's internals.  A
 * backend is a struct scrub_ops: the registry picks the first whose match()
 * accepts the filesystem, or the one named with -t; "generic" accepts
 * everything and is last.  Every hook is optional (NULL: nothing to do) and
 * runs in the phase named beside it.  Hooks return 0, or a negative errno
 * when the backend could not do its job (an operational error, exit bit 8);
 * findings are reported through report.h, never returned.
 *
 * One exception: scan_fs returns -EPERM or -EACCES when the backend's own
 * checks need a privilege the user does not have (what, in needs).  The
 * core then cleans the backend up, says once which checks are skipped and
 * why, and goes on with the generic backend: an unprivileged run still
 * walks and checks everything it can read.
 */
#ifndef FSCRUB_BACKEND_H
#define FSCRUB_BACKEND_H

#include <stdbool.h>

struct scrub_ctx;
struct walk_thread;
struct walk_dir;
struct walk_entry;

struct scrub_ops {
	const char *name;
	/* The tool named in "Unmount and run TOOL." */
	const char *repair_tool;
	/* What scan_fs's -EPERM/-EACCES means the backend needs (NULL: never). */
	const char *needs;
	/* Does this backend handle ctx's filesystem?  (phase 1) */
	bool (*match)(const struct scrub_ctx *ctx);
	/* Phase 1: learn geometry and features, set up private state. */
	int (*scan_fs)(struct scrub_ctx *ctx);
	/* Phase 2: check filesystem metadata. */
	int (*scan_metadata)(struct scrub_ctx *ctx);
	/* Phase 3, after the walk: inode-table level checks. */
	int (*scan_inodes)(struct scrub_ctx *ctx);
	/* Phase 3, in the walk threads: extra checks of one directory ... */
	void (*check_dir)(struct walk_thread *t, const struct walk_dir *d);
	/* ... and of one entry (fd is an open regular file or -1). */
	void (*check_inode)(struct walk_thread *t, const struct walk_dir *d,
			    const struct walk_entry *e, int fd);
	/* Phase 5: verify file data; NULL uses the core's per-file reader. */
	int (*scan_data)(struct scrub_ctx *ctx);
	/* Phase 6: summary counters. */
	int (*summary)(struct scrub_ctx *ctx);
	/* Free private state (always called if scan_fs was). */
	void (*cleanup)(struct scrub_ctx *ctx);
};

/* Pick the backend for ctx (by -t name if given).  NULL: unknown -t name. */
const struct scrub_ops *backend_select(const struct scrub_ctx *ctx);
/* Find a backend by name; NULL if none. */
const struct scrub_ops *backend_find(const char *name);
/* "generic, ..." for messages. */
const char *backend_names(void);

extern const struct scrub_ops generic_ops;
extern const struct scrub_ops xfs_ops;
extern const struct scrub_ops btrfs_ops;
extern const struct scrub_ops ext4_ops;		/* ext4.c */

/*
 * Generic statfs sanity (phase 2 of the generic backend): free counts may
 * not exceed totals.  Returns NULL if sane, else what is wrong.
 */
struct statvfs;
const char *statvfs_insane(const struct statvfs *sv);
/* The statfs counters of ctx's mount, checked twice before an error. */
void generic_check_statfs(struct scrub_ctx *ctx);

#endif
