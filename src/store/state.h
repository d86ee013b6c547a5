/*
 * state: the run history, one SQLite database shared by every run on
 * every filesystem (DIR/state.sqlite; DIR is /var/lib/fscrub, or
 * --state-dir).  Runs are keyed by the filesystem's UUID (fs_identity()
 * in ledger_store.h), not by the mount point, so a filesystem mounted
 * elsewhere keeps its history -- and by the root of the mount within it
 * (mountinfo's root: "/", a btrfs subvolume such as "/@home", or the
 * subdirectory a bind mount shows), since a run sees only that part: the
 * subvolumes of one btrfs mounted at / and /home are two histories.
 * `fscrub status` and the metrics read it.
 *
 * Schema (PRAGMA user_version 7):
 *
 *   runs      one row per run: id, uuid, fsroot, mountpoint, source, fstype,
 *             backend, options (a JSON object), version, started and
 *             ended (Unix time, seconds), status, exit_code, verify_data,
 *             rescan (1: --rescan-errors, 2: --since, 3: --portion or
 *             --time-budget; each
 *             way only some data was read: not a full -x), the counts (errors, warnings, infos, repaired, operational,
 *             inodes), bytes_verified, findings_dropped and (version 7)
 *             unconfirmed, the findings that changed while being checked
 *   phases    (run, phase, title, wall, user, sys, items): -T's figures
 *   findings  (run, seq, severity, check_id, content, path, ino, offset,
 *             length, message, subvol); content is 1 for checks of what files
 *             hold (report.h, check_is_content()), which only -x covers;
 *             subvol (version 4) the subvolume of ino (report.h,
 *             finding.subvol; 0 for the mount's own where the kernel gives
 *             no id, and for the rows of before; NULL: not known)
 *   rescanned (run, subvol, ino): the files a --rescan-errors run read back
 *   events    (uuid, fsroot, time, kind, errno, error_count, ino, path):
 *             what fscrub watch heard from the kernel (version 2); kind is
 *             "fs_error" (FAN_FS_ERROR) or "btrfs_dev_stats" (a device
 *             error counter rose), ino 0 and path NULL when not known;
 *             range_off and range_len (version 8) the bytes a block-layer
 *             error names (blk_file: the file's; else the device's)
 *   region_sizes (uuid, size): the device region size of a filesystem,
 *             chosen on its first -x run with the store and kept (version 3)
 *   regions   (uuid, start, length, allocated, verified, run, read_to,
 *             partial): each device region with file data (bytes of it at
 *             the last -x run) and when a run last read it all (NULL:
 *             never), for --portion; how far from its start a run read it
 *             in part since (0: not) and when that part was first read
 *             (version 6); or, with length 0, a bucket of files numbered
 *             start, where phase 5 reads file by file (regions.h)
 *   checkpoints (uuid, fsroot, run, saved, options, phase, cursor): the
 *             checkpoint of a stopped run (version 5; checkpoint.h), one per
 *             filesystem and mount root: the run that saved it, when
 *             (Unix time), the options it depends on, the phase it was in,
 *             and the data scan's cursor (checkpoint.c's JSON, opaque here)
 *
 * status is 'running' from the row's insertion, after phase 1, then one of
 * 'complete' (every phase ran to its end), 'incomplete' (every phase ran to
 * its end, with operational errors: something could not be checked),
 * 'cancelled' (SIGINT/SIGTERM), 'stopped' (-a) or 'failed' (a phase could
 * not go on); a run that died stays 'running'.  A complete run covered all
 * of the metadata, a complete -x run all of the data too.
 *
 * Durability and concurrency: WAL mode and a busy timeout, and no write
 * transaction is held during the scan: the run's row is inserted at the
 * start, and its end, phases and findings are written in one transaction
 * at the end.  So runs on different filesystems do not wait for each
 * other beyond those two short writes, and a crash loses at most the run
 * in progress.  Findings wait in memory meanwhile, at most
 * STATE_MAX_FINDINGS of them (the rest are counted in findings_dropped).
 *
 * Later schema versions add tables beside these and raise user_version,
 * upgrading an older database in setup_schema() when it is opened for
 * writing (version 2 added events to version 1, version 3 the regions,
 * version 4 the subvolume of findings and rescanned files, version 5 the
 * checkpoints, version 6 the regions' parts read, version 7 the runs'
 * unconfirmed findings, version 8 the byte range of events); a database
 * opened read-only is not upgraded, and reads of a
 * table it lacks find nothing.  A database newer than this code knows is
 * refused for writing.
 *
 * Library code: it reports nothing itself; errors come back as negative
 * errno with a message in err.  Not thread-safe: the caller serialises
 * (the history, a sink of report.c, calls state_add_finding() under the
 * report lock).
 */
#ifndef FSCRUB_STATE_H
#define FSCRUB_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct finding;
struct strbuf;
struct state;
struct subvol_ino;

#define STATE_DEFAULT_DIR	"/var/lib/fscrub"
#define STATE_DB_NAME		"state.sqlite"
/*
 * Findings kept for the database per run: about 300 bytes each in memory,
 * so at most some 30 MiB however broken the filesystem.
 */
#define STATE_MAX_FINDINGS	100000
#define STATE_SCHEMA_VERSION	8

/* What the history is kept by: the filesystem's UUID and the mount's root in it. */
struct state_fs {
	const char *uuid;
	const char *fsroot;	/* "/" for a whole filesystem */
};

/* A run as written by the scan and read back by status.  Strings may be NULL. */
struct state_run {
	int64_t id;
	char *uuid, *fsroot, *mountpoint, *source, *fstype, *backend, *options, *version;
	double started, ended;		/* Unix time; ended 0 while running */
	char *status;
	int exit_code;
	bool verify_data;
	bool rescan;			/* --rescan-errors */
	bool since;			/* --since: -x of the files changed since a date */
	bool portion;			/* --portion: -x of some device regions */
	unsigned long long errors, warnings, infos, repaired, operational;
	unsigned long long inodes, bytes_verified, findings_dropped;
	unsigned long long unconfirmed;	/* infos changed while being checked (report.h) */
};

/* A finding as read back. */
struct state_finding {
	int64_t run;
	const char *severity, *check, *path, *message;
	bool content;			/* check_is_content() */
	uint64_t ino;
	bool has_subvol;		/* subvol is known (report.h, finding.subvol) */
	uint64_t subvol;		/* 0: the mount's own (and rows before version 4) */
	bool has_range;
	uint64_t offset, length;
};

/* The age buckets of the regions' last reads: < 7, 30, 90 days, older, never. */
enum { STATE_AGE_7D, STATE_AGE_30D, STATE_AGE_90D, STATE_AGE_OLDER, STATE_AGE_NEVER,
       STATE_AGE_BUCKETS };

/* What status says about one filesystem. */
struct state_summary {
	struct state_run last;		/* id 0: no run recorded */
	double last_complete;		/* end of the last complete run, 0: none */
	double last_data_verified;	/* ... of the last complete -x run */
	unsigned long long open_errors, open_warnings;
	unsigned long long open_events;	/* state_each_event() */
	unsigned long long open_media_errors;	/* open errors of data.read and media.* */
	/* The device regions with file data (region_ages()); nr_regions 0: none known. */
	size_t nr_regions;
	uint64_t region_size;
	double region_share[STATE_AGE_BUCKETS];	/* share of the file data, 0..1 */
	double oldest_region;		/* its last read: full coverage; 0 if one never was */
};

/* One of fscrub watch's events.  Strings may be NULL. */
struct state_event {
	double time;			/* Unix time */
	const char *kind;		/* "fs_error", "btrfs_dev_stats" */
	int error;			/* positive errno, 0: none */
	unsigned long long error_count;	/* errors the kernel folded into it */
	uint64_t ino;			/* 0: none */
	const char *path;
	/* the bytes it names: a file's (with ino), else the device's; range_len 0: none */
	uint64_t range_off, range_len;
};

/*
 * The directory of the system's store: $STATE_DIRECTORY (its first path),
 * which systemd sets for a unit with StateDirectory=, else
 * STATE_DEFAULT_DIR.  The environment variable lets a service manager (and
 * the test suite) place the store without an option on every command.
 */
const char *state_default_dir(void);

/*
 * Open DIR/state.sqlite, created (with its tables) when write; read-only
 * otherwise, when it returns -ENOENT if there is no database yet.
 */
int state_open(struct state **out, const char *dir, bool write, struct strbuf *err);
void state_close(struct state *s);
/*
 * state_open() for writing; the system's default directory (make_dir) is
 * made first, mode 0700, on first use (systemd's StateDirectory= makes it
 * too), as a scan and fscrub watch need; a --state-dir must exist.
 */
int state_open_write(struct state **out, const char *dir, bool make_dir, struct strbuf *err);
/* The database's path, for messages. */
const char *state_path(const struct state *s);

/* Insert the run's row (status 'running'); r->id is set. */
int state_run_begin(struct state *s, struct state_run *r, struct strbuf *err);
/* Keep a finding of the run begun (copied) for state_run_end(). */
void state_add_finding(struct state *s, const struct finding *f, bool content);
/* Keep a phase's times for state_run_end(). */
void state_add_phase(struct state *s, int phase, const char *title, double wall,
		     double user, double sys, unsigned long long items);
/*
 * --rescan-errors: the files this run reads back, by subvolume and inode
 * (kept for state_run_end(), which records them: a complete rescan closes
 * their content findings, those of the same subvolume).
 */
void state_set_rescanned(struct state *s, const struct subvol_ino *files, size_t n);
/* Write r (by r->id), the phases and the findings in one transaction. */
int state_run_end(struct state *s, const struct state_run *r, struct strbuf *err);

/*
 * Every filesystem with a run, the most recently scrubbed first, then those
 * with only events: calls fn(fs, arg).
 */
int state_each_fs(struct state *s, void (*fn)(const struct state_fs *fs, void *arg),
		  void *arg);
/*
 * Fill sum for fs (last.id 0 if it has no run); release it with
 * state_summary_release(), also after a failure.
 */
int state_summarise(struct state *s, const struct state_fs *fs, struct state_summary *sum);
void state_summary_release(struct state_summary *sum);
/*
 * When all file data was last read back: the end of the last complete -x
 * run, or the oldest last read of the regions with data if later (--portion
 * runs that together covered the device); 0 never.
 */
double state_data_coverage(const struct state_summary *sum);
/* A STATE_AGE_* bucket's name: "7d", "30d", "90d", "older", "never". */
const char *state_age_name(int bucket);
/*
 * The open findings of fs, errors then warnings: those of its last
 * complete run, and of the runs after it that did not complete (content
 * findings: of its last complete -x run and later); one per check, path,
 * inode and offset, the newest.
 */
int state_each_open(struct state *s, const struct state_fs *fs,
		    void (*fn)(const struct state_finding *f, void *arg), void *arg);
/*
 * The files of fs's open content findings (--rescan-errors) by subvolume
 * and inode, unsorted, maybe repeated; *files is malloc'd (NULL if none).
 * *unknown: those whose subvolume is not known (not in *files).
 */
int state_open_content_files(struct state *s, const struct state_fs *fs,
			     struct subvol_ino **files, size_t *n, size_t *unknown);
/* The newest n runs of fs, newest first. */
int state_each_run(struct state *s, const struct state_fs *fs, unsigned n,
		   void (*fn)(const struct state_run *r, void *arg), void *arg);
void state_run_release(struct state_run *r);

/*
 * Rotating media scans (--portion; regions.h).  The region size of the
 * filesystem uuid: the one kept, else want (kept from now on); force
 * replaces the kept one (a debug knob).
 */
int state_region_size(struct state *s, const char *uuid, uint64_t want, bool force,
		      uint64_t *size);
/*
 * verified[i]: when region i (of size bytes) was last read, 0 never;
 * read_to[i] (read_to may be NULL): the bytes from its start a run read in
 * part since, 0 none.  Size 0 is for the buckets of files (regions.h):
 * rows of length 0, start the bucket's number; so in state_regions_write().
 */
int state_region_times(struct state *s, const char *uuid, uint64_t size, size_t n,
		       double *verified, uint64_t *read_to);
/*
 * Record the n regions' file data, and for those with read[i] their read
 * at when by run, in one transaction.  A region read to its end takes as
 * its last read that of the part read before, if any.  read_to (may be
 * NULL): read_to[i] > 0 for a region not read[i] that was read from its
 * start to there (its part, first read at when unless one was before).
 */
int state_regions_write(struct state *s, const char *uuid, uint64_t size, size_t n,
			const uint64_t *allocated, const bool *read, const uint64_t *read_to,
			double when, int64_t run, struct strbuf *err);

/* A stopped run's checkpoint (checkpoint.h).  Strings may be NULL. */
struct state_checkpoint {
	int64_t run;			/* the run that saved it */
	double saved;			/* Unix time */
	char *options;			/* checkpoint.c's key of the options */
	int phase;			/* the phase it was in */
	char *cursor;			/* checkpoint.c's JSON */
};

/* Save (replace) fs's checkpoint, at once (no transaction kept open). */
int state_checkpoint_save(struct state *s, const struct state_fs *fs,
			  const struct state_checkpoint *cp, struct strbuf *err);
/*
 * fs's checkpoint into cp (release it with state_checkpoint_release());
 * -ENOENT if there is none (or the database predates version 5).
 */
int state_checkpoint_load(struct state *s, const struct state_fs *fs,
			  struct state_checkpoint *cp);
int state_checkpoint_delete(struct state *s, const struct state_fs *fs, struct strbuf *err);
void state_checkpoint_release(struct state_checkpoint *cp);

/* Record an event of fscrub watch for fs, at once (no transaction kept open). */
int state_add_event(struct state *s, const struct state_fs *fs, const struct state_event *e,
		    struct strbuf *err);
/*
 * The open events of fs, oldest first: those at or after the start of its
 * last complete run (all of them if none), since a run that was already
 * going when the event came may have passed the object it names.
 */
int state_each_event(struct state *s, const struct state_fs *fs,
		     void (*fn)(const struct state_event *e, void *arg), void *arg);

#endif
