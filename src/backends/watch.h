/*
 * watch: the door between fscrub watch (cmd/watch.c) and a backend's
 * watch hooks (backend.h: watch_open, watch_read, watch_poll,
 * watch_close), in both directions.
 *
 * A backend with a source of error events of its own -- the XFS health
 * monitor (backends/xfs/xfs_watch.c), btrfs's device error counters
 * (backends/btrfs/btrfs_health.c) -- sets it up in watch_open as a struct
 * watch_source: a descriptor the watcher poll()s, or a poll every
 * --poll-interval seconds, and its own state.  When the source has
 * something, the backend says on stderr what the kernel said and asks
 * the watcher, through the watch_fs_*() functions below, to do what every
 * event gets: a row in the run history, the metrics' counter, a targeted
 * check of the inode or bytes it names, the full scrub started.  A
 * backend without a source of its own (ext4) answers WATCH_FS_ERROR: the
 * watcher follows the kernel's FAN_FS_ERROR events (lib/fserror.h).
 *
 * Everything runs on the watcher's one thread.  A struct watch_fs is
 * valid for the hook's call only; no descriptor of the filesystem is kept
 * between calls but the source's own (watch_fs_root() opens the root
 * again, checked to be the same filesystem).
 */
#ifndef FSCRUB_WATCH_H
#define FSCRUB_WATCH_H

#include <stdbool.h>
#include <stdint.h>

struct fsmount;
struct watch_fs;

/* watch_open: "follow the kernel's FAN_FS_ERROR events for this filesystem instead". */
#define WATCH_FS_ERROR 1

/* A filesystem's own source of events, as watch_open sets it up. */
struct watch_source {
	int fd;			/* poll()ed for POLLIN, then watch_read; -1: none (or ended) */
	bool timed;		/* watch_poll every --poll-interval seconds */
	void *state;		/* the backend's, freed by watch_close */
};

/* What an event says, for the log, the run history and the scrub's environment. */
struct watch_event {
	const char *kind;		/* "fs_error", "btrfs_dev_stats", "xfs_sick", ... */
	int error;			/* positive errno, or 0 */
	unsigned error_count;		/* errors the kernel folded into the event */
	uint64_t ino;			/* 0: none */
	const char *path;		/* NULL: not resolved */
	uint64_t range_off, range_len;	/* the bytes it names; range_len 0: none */
};

/* The mount watched (target, source, fstype, devno). */
const struct fsmount *watch_fs_mount(const struct watch_fs *wf);
/* -v: say the events that are only logged too. */
bool watch_fs_verbose(const struct watch_fs *wf);
/* --poll-interval, in seconds. */
unsigned long long watch_fs_poll_interval(const struct watch_fs *wf);
/*
 * The mount root, opened for one event or poll (O_RDONLY, the caller
 * closes it): a descriptor, or a negative errno (-ESTALE: another
 * filesystem is mounted there now).
 */
int watch_fs_root(const struct watch_fs *wf);

/* An event: into the run history and the metrics' counter. */
void watch_fs_event(struct watch_fs *wf, const struct watch_event *e);
/*
 * One part of an event (a file among the owners of a media error): into
 * the run history only; watch_fs_counted() then counts the event once.
 */
void watch_fs_record(struct watch_fs *wf, const struct watch_event *e);
void watch_fs_counted(struct watch_fs *wf);
/* The full scrub, unless one was started less than --min-interval ago. */
void watch_fs_trigger(struct watch_fs *wf, const struct watch_event *e);

/*
 * The targeted checks, of the inode behind the O_PATH descriptor fd at
 * path: a directory read whole and every entry statx()ed, another inode
 * statx()ed; or its bytes [off, off + len) read again directly.  Findings
 * go to stdout in the report's format; an inode checked less than a
 * minute ago is not checked again.
 */
void watch_fs_probe(struct watch_fs *wf, int fd, const char *path, uint64_t ino);
void watch_fs_read_range(struct watch_fs *wf, int fd, const char *path, uint64_t ino,
			 uint64_t off, uint64_t len);
/*
 * The device bytes [off, off + len) of the filesystem's own device are
 * about to be read again for an event of the backend's source: the kernel
 * log's lines for that read are not new events.
 */
void watch_fs_quiet(struct watch_fs *wf, uint64_t off, uint64_t len);

#endif
