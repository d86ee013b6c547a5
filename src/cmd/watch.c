/*
 * watch: fscrub watch [OPTIONS] [MOUNTPOINT...], the daemon that turns
 * the kernel's error signals into checks between scheduled scrubs.
 *
 * Sources, per filesystem (those named, or every mounted one whose
 * backend has a watch_open hook: ext4, XFS and btrfs), as that hook
 * chooses (backend.h, backends/watch.h):
 *   - the backend's own: XFS's health monitor (backends/xfs/xfs_watch.c,
 *     Linux 7.0): metadata sick or corrupt (filesystem, group, inode),
 *     shutdowns, media errors, failed file I/O, lost events, the unmount;
 *     btrfs's device error counters (backends/btrfs/btrfs_health.c),
 *     polled every --poll-interval seconds, a counter that rose an event;
 *   - fanotify FAN_FS_ERROR (lib/fserror.h) where the backend asks for it
 *     (ext4; XFS where the kernel has no monitor or another program holds
 *     it) and the kernel reports it for the type: ext4 from Linux 5.16,
 *     XFS from 7.0; the filesystem is marked with FAN_MARK_FILESYSTEM in
 *     one notification group;
 *   - every type: the kernel log's block-layer error lines (watch_blk.h,
 *     kmsg.h) for a device under the filesystem: the sectors are mapped
 *     to their owners as fscrub locate maps them (owners.h), an event
 *     recorded for each, a file's bytes read again directly, metadata's
 *     and free space's from the device.
 * The others are listed as not watched, with the reason.
 *
 * On an event: one line on stderr (the journal under systemd) with what the
 * kernel said -- errno, error count, inode, and the path where the file
 * handle resolves (open_by_handle_at on the mount, /proc/self/fd); a row in
 * the run history's events table (state.h; --state-dir), under the key
 * status uses (status_fs_key()), so that status, health and the metrics
 * count it until a complete scrub starts after it; with --metrics, the
 * counter fscrub_watch_events_total of each filesystem, rewritten at start
 * and on each event; a targeted check of that inode
 * (watch_probe: a directory is read whole and every entry statx()ed, other
 * inodes statx()ed), whose findings are printed on stdout in the report's
 * format and check ids; an XFS media error names only sectors: the
 * backend maps them to the files and metadata that hold them, each file
 * recorded with its path and its bad bytes read again directly
 * (watch_read_range); then the full scrub is started: --on-error CMD, by
 * default `systemctl start --no-block fscrub@<escaped mount>.service`, at
 * most once per filesystem per --min-interval seconds (3600).
 *
 * Filesystems come and go: /proc/self/mountinfo is polled (POLLPRI says the
 * mount table changed) and the list made again -- every watchable mount,
 * or, with mount points named, those of them that are mounted.  No
 * descriptor of a watched filesystem is kept open between events (the
 * mount root is opened for each event and each poll, and checked to
 * be the same filesystem), so the watcher never holds a filesystem busy:
 * neither the fanotify mark nor the health monitor pins the mount, and an
 * unmounted filesystem is dropped from the list.  Nothing watchable at
 * start (systemd starts the watcher before the filesystems are mounted) is
 * no error unless mount points were named: it says so and waits.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/watch.h"
#include "report/checks.h"
#include "lib/fserror.h"
#include "lib/fsmounts.h"
#include "scan/metrics.h"
#include "lib/mountpoint.h"
#include "lib/names.h"
#include "lib/outfile.h"
#include "report/report.h"
#include "store/state.h"
#include "lib/strbuf.h"
#include "cmd/subcmd.h"
#include "cmd/owners.h"
#include "cmd/watch_blk.h"

/* One scrub per filesystem per hour at most: a failing disk sends many events. */
#define DEFAULT_MIN_INTERVAL 3600
/* btrfs counters every minute: a cheap ioctl, and a scrub is not urgent to the second. */
#define DEFAULT_POLL_INTERVAL 60
/*
 * The targeted check reads the damaged inode, and the kernel reports that
 * read as a new error: an inode checked less than this long ago is not
 * checked again (its events are still logged).  Remembered per filesystem
 * for the last PROBED_MAX inodes checked.
 */
#define PROBE_QUIET_S 60
#define PROBED_MAX 16
/* Longest --min-interval / --poll-interval: a year, so that sums cannot overflow. */
#define MAX_INTERVAL (366 * 86400ULL)

struct watch_opts {
	const char *on_error;		/* NULL: systemctl start fscrub@... */
	unsigned long long min_interval;	/* seconds between two starts per fs */
	unsigned long long poll_interval;	/* seconds between btrfs polls */
	const char *state_dir;		/* the run history's directory */
	const char *metrics_path;	/* --metrics, or NULL */
	bool verbose;
};

/* How a filesystem is watched: not (but perhaps blk), FAN_FS_ERROR, its backend's own source. */
enum watch_how { WATCH_NONE, WATCH_FANOTIFY, WATCH_OWN };

struct watched {
	struct fsmount m;		/* owned: a copy of the mount table's entry */
	enum watch_how how;
	uint32_t fsid[2];		/* statfs f_fsid: the same filesystem? */
	const struct scrub_ops *ops;	/* its type's backend, or NULL */
	struct watch_source src;	/* WATCH_OWN: the backend's source; else fd -1 */
	struct { uint64_t ino; double when; } probed[PROBED_MAX];	/* a ring */
	unsigned next_probed;
	bool started;			/* the scrub was started once ... */
	double last_start;		/* ... at this CLOCK_MONOTONIC time */
	char uuid[48];			/* the run history's key (status_fs_key()) ... */
	char *fsroot;			/* ... NULL: not known, events not recorded */
	bool blk;			/* its devices' errors followed in the kernel log */
	unsigned long long nr_events;	/* since the watcher started */
};

struct watch {
	struct watch_opts opt;
	struct watched *w;
	size_t nr;
	int fan_fd;
	int mi_fd;			/* /proc/self/mountinfo, or -1 */
	char **named;			/* the mount points named, or NULL: all */
	size_t nr_named;
	struct blk_follow blk;		/* the kernel log; blk.fd -1: not followed */
	struct blk_hooks hooks;		/* what its errors do, for blk_follow_walk() */
};

/* One watched filesystem, as a backend's watch hook sees it (backends/watch.h). */
struct watch_fs {
	struct watch *wt;
	struct watched *w;
};

static volatile sig_atomic_t watch_stop;

static void on_stop(int sig)
{
	(void)sig;
	watch_stop = 1;
}

static void on_child(int sig)
{
	(void)sig;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the unit name ---- */

/* `systemd-escape --path`: "/" is "-", "/srv/data-1" is "srv-data\x2d1". */
static void escape_unit_path(struct strbuf *out, const char *path)
{
	const char *p = path;
	bool first = true;

	while (*p == '/')
		p++;
	if (!*p) {
		strbuf_addch(out, '-');
		return;
	}
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '/') {
			while (p[1] == '/')
				p++;
			if (p[1])
				strbuf_addch(out, '-');
		} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			   (c >= '0' && c <= '9') || c == ':' || c == '_' ||
			   (c == '.' && !first)) {
			strbuf_addch(out, (char)c);
		} else {
			strbuf_addf(out, "\\x%02x", c);
		}
		first = false;
	}
}

static void unit_name(struct strbuf *out, const char *mountpoint)
{
	strbuf_addstr(out, "fscrub@");
	escape_unit_path(out, mountpoint);
	strbuf_addstr(out, ".service");
}

/* ---- starting the scrub ---- */

static void set_env(const struct watched *w, const struct watch_event *e, const char *unit)
{
	char num[32];

	setenv("FSCRUB_MOUNTPOINT", w->m.target, 1);
	setenv("FSCRUB_FSTYPE", w->m.fstype, 1);
	setenv("FSCRUB_DEVICE", w->m.source, 1);
	setenv("FSCRUB_UNIT", unit, 1);
	setenv("FSCRUB_EVENT", e->kind, 1);
	snprintf(num, sizeof(num), "%d", e->error);
	setenv("FSCRUB_ERRNO", num, 1);
	snprintf(num, sizeof(num), "%llu", (unsigned long long)e->ino);
	setenv("FSCRUB_INODE", num, 1);
	setenv("FSCRUB_PATH", e->path ? e->path : "", 1);
}

static void run_on_error(struct watch *wt, const struct watched *w, const struct watch_event *e)
{
	struct strbuf unit = STRBUF_INIT;
	pid_t pid;

	unit_name(&unit, w->m.target);
	fprintf(stderr, "fscrub watch: %s: starting the scrub: %s\n", w->m.target,
		wt->opt.on_error ? wt->opt.on_error : unit.buf);
	pid = fork();
	if (pid == 0) {
		set_env(w, e, unit.buf);
		if (wt->opt.on_error)
			execl("/bin/sh", "sh", "-c", wt->opt.on_error, (char *)NULL);
		else
			execlp("systemctl", "systemctl", "start", "--no-block", unit.buf,
			       (char *)NULL);
		fprintf(stderr, "fscrub watch: cannot run the scrub command: %s\n",
			strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		fprintf(stderr, "fscrub watch: %s: cannot start the scrub: %s\n", w->m.target,
			strerror(errno));
	strbuf_release(&unit);
}

/* The full scrub, unless one was started less than --min-interval ago. */
static void trigger(struct watch *wt, struct watched *w, const struct watch_event *e)
{
	double now = now_s();

	if (w->started && now - w->last_start < (double)wt->opt.min_interval) {
		fprintf(stderr, "fscrub watch: %s: not starting the scrub again: started %.0f s "
			"ago (--min-interval %llu)\n", w->m.target, now - w->last_start,
			wt->opt.min_interval);
		return;
	}
	w->started = true;
	w->last_start = now;
	run_on_error(wt, w, e);
}

static void reap_children(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		if (WIFEXITED(status))
			fprintf(stderr, "fscrub watch: the scrub command (pid %d) exited with %d\n",
				(int)pid, WEXITSTATUS(status));
		else
			fprintf(stderr, "fscrub watch: the scrub command (pid %d) was killed by "
				"signal %d\n", (int)pid, WTERMSIG(status));
	}
}

/* ---- the run history ---- */

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Record the event in the run history.  The database is opened for each
 * event and closed at once: events are rare, and no connection or lock is
 * kept by a daemon that runs for months.  A failure is logged; the check
 * and the scrub go on.
 */
static void watch_record_event(const struct watch *wt, const struct watched *w,
			       const struct watch_event *e)
{
	struct state_fs fs = { .uuid = w->uuid, .fsroot = w->fsroot };
	struct state_event ev = {
		.time = wall_now(), .kind = e->kind, .error = e->error,
		.error_count = e->error_count, .ino = e->ino, .path = e->path,
		.range_off = e->range_off, .range_len = e->range_len,
	};
	struct strbuf err = STRBUF_INIT;
	struct state *s;
	int ret;

	if (!w->fsroot)
		return;
	ret = state_open_write(&s, wt->opt.state_dir,
			       !strcmp(wt->opt.state_dir, state_default_dir()), &err);
	if (!ret) {
		ret = state_add_event(s, &fs, &ev, &err);
		state_close(s);
	}
	if (ret)
		fprintf(stderr, "fscrub watch: %s: cannot record the event: %s\n", w->m.target,
			err.buf);
	else if (wt->opt.verbose)
		fprintf(stderr, "fscrub watch: %s: %s event recorded in %s/%s\n", w->m.target,
			e->kind, wt->opt.state_dir, STATE_DB_NAME);
	strbuf_release(&err);
}

/*
 * --metrics: a counter per watched filesystem, the events since fscrub
 * watch started (an alert takes increase() over it: a restart is a reset).
 * Its own name, not the scans' fscrub_watch_events, and no backend label:
 * node_exporter refuses one name with different labels in two files.
 */
static void watch_write_metrics(const struct watch *wt)
{
	struct strbuf sb = STRBUF_INIT;
	struct outfile out;
	int err;

	if (!wt->opt.metrics_path)
		return;
	strbuf_addstr(&sb, "# HELP fscrub_watch_events_total Filesystem error events fscrub "
		      "watch heard since it started.\n# TYPE fscrub_watch_events_total counter\n");
	for (size_t i = 0; i < wt->nr; i++) {
		const struct watched *w = &wt->w[i];

		if (w->how == WATCH_NONE && !w->blk)
			continue;
		strbuf_addstr(&sb, "fscrub_watch_events_total{");
		metrics_add_label(&sb, "mountpoint", w->m.target, true);
		metrics_add_label(&sb, "fstype", w->m.fstype, false);
		strbuf_addf(&sb, "} %llu\n", w->nr_events);
	}
	if (!(err = outfile_open(&out, wt->opt.metrics_path)) &&
	    fwrite(sb.buf, 1, sb.len, out.f) != sb.len)
		err = errno ? -errno : -EIO;
	err = outfile_close(&out, err);
	if (err)
		fprintf(stderr, "fscrub watch: cannot write the metrics file '%s': %s\n",
			wt->opt.metrics_path, strerror(-err));
	strbuf_release(&sb);
}

/* An event: into the history and the metrics. */
static void watch_count_event(struct watch *wt, struct watched *w, const struct watch_event *e)
{
	w->nr_events++;
	watch_record_event(wt, w, e);
	watch_write_metrics(wt);
}

/* The key of m's history, for its events; without one they are only logged. */
static void history_key(struct watched *w)
{
	struct mount_info mi = { 0 };
	struct strbuf err = STRBUF_INIT;

	if (status_fs_key(w->m.target, &mi, w->uuid, sizeof(w->uuid), &err))
		fprintf(stderr, "fscrub watch: %s: its events will not be recorded: %s\n",
			w->m.target, err.buf);
	else
		w->fsroot = xstrdup(mi.fsroot);
	mount_info_release(&mi);
	strbuf_release(&err);
}

/* ---- the targeted check ---- */

/* An errno that means the filesystem failed, not that the object went away. */
static bool is_corruption(int err)
{
	return err == EIO || err == EUCLEAN || err == EBADMSG || err == ENODATA ||
	       err == ESTALE;
}

/* A finding on stdout in the report's format: "Error: PATH (inode N): WHAT[: errno] [check]". */
static void say_finding(const char *sev, const char *check, const char *path, const char *name,
			uint64_t ino, const char *what, int err)
{
	struct strbuf sb = STRBUF_INIT;

	names_escape(&sb, path, strlen(path));
	if (name) {
		strbuf_addch(&sb, '/');
		names_escape(&sb, name, strlen(name));
	}
	printf("%s: %s", sev, sb.buf);
	if (ino)
		printf(" (inode %llu)", (unsigned long long)ino);
	printf(": %s%s%s [%s]\n", what, err ? ": " : "", err ? strerror(err) : "", check);
	strbuf_release(&sb);
}

static void finding(const char *check, const char *path, const char *name, uint64_t ino,
		    const char *what, int err)
{
	say_finding("Error", check, path, name, ino, what, err);
}

/* Every entry of the directory dfd: statx()ed; returns the errors found. */
static unsigned probe_entries(int dfd, const char *path, unsigned *nr_entries)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	unsigned errors = 0;

	if (!d) {
		close(dfd);
		return 0;
	}
	errno = 0;
	while ((de = readdir(d))) {
		struct statx stx;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		++*nr_entries;
		if (statx(dirfd(d), de->d_name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
			  STATX_BASIC_STATS, &stx) < 0 && is_corruption(errno)) {
			finding(CHECK_INODE_UNREADABLE, path, de->d_name, de->d_ino,
				"cannot stat", errno);
			errors++;
		}
		errno = 0;
	}
	if (errno && is_corruption(errno)) {
		finding(CHECK_DIR_UNREADABLE, path, NULL, 0, "cannot read the directory", errno);
		errors++;
	}
	closedir(d);
	return errors;
}

/* Was ino checked less than PROBE_QUIET_S ago?  If not, it is now. */
static bool probed_recently(struct watched *w, uint64_t ino)
{
	double now = now_s();

	for (unsigned i = 0; i < PROBED_MAX; i++)
		if (w->probed[i].ino == ino && w->probed[i].when > 0 &&
		    now - w->probed[i].when < PROBE_QUIET_S)
			return true;
	w->probed[w->next_probed].ino = ino;
	w->probed[w->next_probed].when = now;
	w->next_probed = (w->next_probed + 1) % PROBED_MAX;
	return false;
}

/* The inode behind the O_PATH descriptor fd, at path; logs what it found. */
static void watch_probe(struct watched *w, int fd, const char *path, uint64_t ino)
{
	unsigned errors = 0, entries = 0;
	struct statx stx;
	int dfd;

	if (probed_recently(w, ino)) {
		fprintf(stderr, "fscrub watch: %s: %s (inode %llu) was checked less than %d s "
			"ago: not checked again\n", w->m.target, path, (unsigned long long)ino,
			PROBE_QUIET_S);
		return;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) < 0) {
		finding(CHECK_INODE_UNREADABLE, path, NULL, ino, "cannot stat", errno);
		errors++;
	} else if (S_ISDIR(stx.stx_mode)) {
		dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_NOATIME | O_CLOEXEC);
		if (dfd < 0 && errno == EPERM)	/* O_NOATIME: not the owner, no CAP_FOWNER */
			dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			finding(CHECK_DIR_UNREADABLE, path, NULL, ino, "cannot open the directory",
				errno);
			errors++;
		} else {
			errors += probe_entries(dfd, path, &entries);
		}
	}
	fflush(stdout);
	fprintf(stderr, "fscrub watch: %s: checked %s (inode %llu): %u entries, %u error%s\n",
		w->m.target, path, (unsigned long long)ino, entries, errors,
		errors == 1 ? "" : "s");
}

/* Direct reads of 4 KiB: aligned for O_DIRECT on any sector size up to 4 KiB. */
#define READ_STEP 4096U

/*
 * The bytes [off, off+len) of the file behind the O_PATH descriptor fd,
 * read again directly (O_DIRECT: from the device, not the page cache), as
 * a media error said they are unreadable; logs what it found.  With
 * from_log (a kernel log line, which the kernel may log for an error that
 * passed), bytes that read now are said as an info.
 */
static void watch_read_range(struct watched *w, int fd, const char *path, uint64_t ino,
			     uint64_t off, uint64_t len, bool from_log)
{
	uint64_t bad_lo = 0, bad_hi = 0, pos;
	unsigned errors = 0;
	char proc[64];
	void *buf = NULL;
	int rfd, bad_err = 0;

	if (probed_recently(w, ino)) {
		fprintf(stderr, "fscrub watch: %s: %s (inode %llu) was checked less than %d s "
			"ago: not checked again\n", w->m.target, path, (unsigned long long)ino,
			PROBE_QUIET_S);
		return;
	}
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	rfd = open(proc, O_RDONLY | O_DIRECT | O_NOATIME | O_CLOEXEC);
	if (rfd < 0 && errno == EPERM)	/* O_NOATIME: not the owner, no CAP_FOWNER */
		rfd = open(proc, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (rfd < 0 || posix_memalign(&buf, READ_STEP, READ_STEP)) {
		fprintf(stderr, "fscrub watch: %s: cannot read %s (inode %llu): %s\n", w->m.target,
			path, (unsigned long long)ino, strerror(rfd < 0 ? errno : ENOMEM));
		if (rfd >= 0)
			close(rfd);
		return;
	}
	for (pos = off - off % READ_STEP; pos < off + len; pos += READ_STEP) {
		if (pread(rfd, buf, READ_STEP, (off_t)pos) >= 0 || !is_corruption(errno))
			continue;
		if (!errors++) {
			bad_lo = pos;
			bad_err = errno;
		}
		bad_hi = pos + READ_STEP - 1;
	}
	free(buf);
	close(rfd);
	if (errors) {
		struct strbuf what = STRBUF_INIT;

		strbuf_addf(&what, "bytes %llu-%llu cannot be read", (unsigned long long)bad_lo,
			    (unsigned long long)bad_hi);
		finding(CHECK_MEDIA_FILE, path, NULL, ino, what.buf, bad_err);
		strbuf_release(&what);
		fflush(stdout);
	} else if (from_log) {
		struct strbuf what = STRBUF_INIT;

		strbuf_addf(&what, "bytes %llu-%llu read now, after the kernel logged an I/O "
			    "error there (it passed, or lay further into the failed request)",
			    (unsigned long long)off, (unsigned long long)(off + len - 1));
		say_finding("Info", CHECK_MEDIA_RECOVERED, path, NULL, ino, what.buf, 0);
		strbuf_release(&what);
		fflush(stdout);
	}
	fprintf(stderr, "fscrub watch: %s: checked %s (inode %llu): bytes %llu-%llu read "
		"directly, %u unreadable block%s\n", w->m.target, path, (unsigned long long)ino,
		(unsigned long long)off, (unsigned long long)(off + len - 1), errors,
		errors == 1 ? "" : "s");
}

/* ---- events ---- */

/*
 * The root of w's mount, opened for one event or poll: a descriptor, or a
 * negative errno (-ESTALE: another filesystem is mounted there now).
 */
static int watched_root(const struct watched *w)
{
	int fd = open(w->m.target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct statfs sfs;

	if (fd < 0)
		return errno == ENOENT ? -ESTALE : -errno;
	if (fstatfs(fd, &sfs) < 0 || memcmp(&sfs.f_fsid, w->fsid, sizeof(w->fsid))) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

static struct watched *by_fsid(struct watch *wt, const uint32_t fsid[2])
{
	for (size_t i = 0; i < wt->nr; i++)
		if (wt->w[i].how == WATCH_FANOTIFY && !memcmp(wt->w[i].fsid, fsid,
							      sizeof(wt->w[i].fsid)))
			return &wt->w[i];
	return NULL;
}

static void on_fs_error(const struct fserror_event *ev, void *arg)
{
	struct watch *wt = arg;
	struct watched *w = by_fsid(wt, ev->fsid);
	struct strbuf path = STRBUF_INIT;
	struct watch_event e = { .kind = "fs_error", .error = ev->error,
				.error_count = ev->error_count, .ino = ev->ino };
	int fd = -ENOENT, root;

	if (!w) {
		fprintf(stderr, "fscrub watch: filesystem error %d on an unknown filesystem "
			"(fsid %08x:%08x)\n", ev->error, ev->fsid[0], ev->fsid[1]);
		return;
	}
	if (ev->has_handle && (fd = root = watched_root(w)) >= 0) {
		fd = fserror_resolve(root, ev, &path, &e.ino);
		close(root);
	}
	if (fd >= 0)
		e.path = path.buf;
	fprintf(stderr, "fscrub watch: %s: filesystem error: %s (errno %d), %u error%s, ",
		w->m.target, strerror(ev->error), ev->error, ev->error_count,
		ev->error_count == 1 ? "" : "s");
	if (!ev->has_handle)
		fprintf(stderr, "no inode\n");
	else if (fd >= 0)
		fprintf(stderr, "inode %llu, path %s\n", (unsigned long long)e.ino, path.buf);
	else
		fprintf(stderr, "inode %llu, path not resolved: %s\n", (unsigned long long)e.ino,
			strerror(-fd));
	watch_count_event(wt, w, &e);
	if (fd >= 0) {
		watch_probe(w, fd, path.buf, e.ino);
		close(fd);
	}
	trigger(wt, w, &e);
	strbuf_release(&path);
}

static void read_events(struct watch *wt)
{
	/* fanotify events are read whole: a buffer of 4 KiB holds dozens. */
	union {
		struct { long long align; } a;
		char buf[4096];
	} u;
	ssize_t n;

	/* One read per poll(): a stop signal is seen between two batches. */
	if ((n = read(wt->fan_fd, u.buf, sizeof(u.buf))) > 0 &&
	    fserror_parse(u.buf, (size_t)n, on_fs_error, wt) < 0)
		fprintf(stderr, "fscrub watch: a malformed fanotify event was skipped\n");
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		fprintf(stderr, "fscrub watch: cannot read fanotify events: %s\n", strerror(errno));
}

/* ---- the kernel log's block-layer errors ---- */

/* The watched filesystem whose devices the kernel log is followed for, on devno; or NULL. */
static struct watched *blk_watched(struct watch *wt, dev_t devno)
{
	for (size_t i = 0; i < wt->nr; i++)
		if (wt->w[i].blk && loc_mount_has_device(&wt->w[i].m, devno))
			return &wt->w[i];
	return NULL;
}

static bool blk_ours(dev_t devno, void *arg)
{
	return blk_watched(arg, devno) != NULL;
}

/*
 * How many READ_STEP blocks of the device at devpath, from off for len
 * bytes, fail to read directly (O_DIRECT: the device, not the page cache);
 * -errno if the device cannot be opened.
 */
static int blk_device_reread(const char *devpath, uint64_t off, uint64_t len)
{
	int fd = open(devpath, O_RDONLY | O_DIRECT | O_CLOEXEC), bad = 0;
	void *buf = NULL;

	if (fd < 0 || posix_memalign(&buf, READ_STEP, READ_STEP)) {
		int err = fd < 0 ? -errno : -ENOMEM;

		if (fd >= 0)
			close(fd);
		return err;
	}
	for (uint64_t pos = off - off % READ_STEP; pos < off + len; pos += READ_STEP)
		bad += pread(fd, buf, READ_STEP, (off_t)pos) < 0 && is_corruption(errno);
	free(buf);
	close(fd);
	return bad;
}

/*
 * Metadata, free space or an owner not found: the device bytes read again
 * directly.  Metadata that still fails is an error; free space or an owner
 * not found a warning; what reads now an info.
 */
static void blk_device_owner(const struct watched *w, const struct loc_fs *fs,
			     const struct loc_owner *o)
{
	struct strbuf what = STRBUF_INIT;
	int bad = blk_device_reread(fs->devpath, o->off, o->len);

	strbuf_addf(&what, "device %s bytes %llu-%llu (%s%s", fs->devpath,
		    (unsigned long long)o->off, (unsigned long long)(o->off + o->len - 1),
		    o->kind == LOC_META ? "metadata: " : o->kind == LOC_UNKNOWN ? "owner not found: " :
		    "", o->what ? o->what : "free space");
	if (o->kind == LOC_META && o->ino)
		strbuf_addf(&what, " of inode %llu", (unsigned long long)o->ino);
	strbuf_addch(&what, ')');
	if (bad < 0)
		fprintf(stderr, "fscrub watch: %s: cannot read %s again: %s\n", w->m.target,
			what.buf, strerror(-bad));
	else if (!bad)
		strbuf_addstr(&what, " read now, after the kernel logged an I/O error there");
	else
		strbuf_addstr(&what, o->kind == LOC_META ? " cannot be read" :
			      " cannot be read; no file holds them");
	if (bad >= 0)
		say_finding(!bad ? "Info" : o->kind == LOC_META ? "Error" : "Warning",
			    !bad ? CHECK_MEDIA_RECOVERED : o->kind == LOC_META ?
			    CHECK_MEDIA_METADATA : CHECK_MEDIA_UNOWNED, w->m.target, NULL, 0,
			    what.buf, bad && o->kind == LOC_META ? EIO : 0);
	fflush(stdout);
	strbuf_release(&what);
}

/* A file that backs loop devices: its bytes followed up through each (cmd/locate.c too). */
static void blk_follow_loops(struct watch *wt, const struct loc_owner *o,
			     const struct kmsg_error *e, int depth)
{
	struct bstack_loops loops = { 0 };
	struct stat a, b;

	if (!o->path || stat(o->path, &a) < 0 || bstack_loops(&wt->blk.bs, &loops))
		return;
	for (size_t i = 0; i < loops.n; i++) {
		uint64_t uoff, ulen;

		if (stat(loops.v[i].backing, &b) == 0 && a.st_dev == b.st_dev &&
		    a.st_ino == b.st_ino &&
		    bstack_loop_map(&loops.v[i], o->file_off, o->len, &uoff, &ulen))
			blk_follow_walk(&wt->blk, &wt->hooks, loops.v[i].name, uoff, ulen, e,
					depth + 1);
	}
	bstack_loops_release(&loops);
}

/* A file's data under the error: its bytes read again directly. */
static void blk_file_owner(struct watched *w, const struct loc_owner *o)
{
	struct stat st;
	int fd = o->path ? open(o->path, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;

	if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_ino != o->ino)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fprintf(stderr, "fscrub watch: %s: inode %llu is not checked: no path to it "
			"was found\n", w->m.target, (unsigned long long)o->ino);
		return;
	}
	if (!strcmp(o->what, "data"))
		watch_read_range(w, fd, o->path, o->ino, o->file_off, o->len, true);
	else
		watch_probe(w, fd, o->path, o->ino);
	close(fd);
}

static const char *const blk_kinds[] = {
	[LOC_FILE] = "blk_file", [LOC_META] = "blk_metadata", [LOC_FREE] = "blk_free",
	[LOC_UNKNOWN] = "blk_unknown",
};

/* One owner of the bytes of an error line: said, recorded, checked. */
static void blk_owner(struct watch *wt, struct watched *w, const struct loc_fs *fs,
		      const struct loc_owner *o, const struct kmsg_error *e, int depth)
{
	bool file = o->kind == LOC_FILE;
	struct watch_event ev = {
		.kind = blk_kinds[o->kind], .error = EIO, .error_count = 1, .ino = o->ino,
		.path = file ? o->path : NULL, .range_off = file ? o->file_off : o->off,
		.range_len = o->len,
	};

	fprintf(stderr, "fscrub watch: %s: kernel log: device bytes %llu-%llu: ", w->m.target,
		(unsigned long long)o->off, (unsigned long long)(o->off + o->len - 1));
	if (file)
		fprintf(stderr, "file %s (inode %llu), %s bytes %llu-%llu\n",
			o->path ? o->path : "(no path found)", (unsigned long long)o->ino, o->what,
			(unsigned long long)o->file_off,
			(unsigned long long)(o->file_off + o->len - 1));
	else
		fprintf(stderr, "%s%s\n", o->kind == LOC_META ? "metadata: " : "",
			o->what ? o->what : "free space");
	watch_record_event(wt, w, &ev);
	if (file) {
		blk_file_owner(w, o);
		blk_follow_loops(wt, o, e, depth);
	} else {
		blk_device_owner(w, fs, o);
	}
}

/* The files among o named (a walk of the filesystem, only when one has no path). */
static void blk_name_files(const struct loc_fs *fs, struct loc_owners *o)
{
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(fs->fstype, "btrfs") && loc_needs_name(fs, &o->v[i])) {
			loc_name_by_walk(fs, o);
			return;
		}
}

/* The bytes [off, off + len) of devno, a device of a watched filesystem, from the line e. */
static void blk_hit(dev_t devno, const char *name, uint64_t off, uint64_t len,
		    const struct kmsg_error *e, int depth, void *arg)
{
	struct watch *wt = arg;
	struct watched *w = blk_watched(wt, devno);
	char devpath[BSTACK_NAME_MAX + 8];
	struct loc_fs fs = { .target = w->m.target, .fstype = w->m.fstype, .devno = devno,
			     .devpath = loc_devpath(&w->m, devno, name, devpath, sizeof(devpath)) };
	struct watch_event ev = { .kind = "blk_error", .error = EIO, .error_count = 1,
				 .range_off = off, .range_len = len };
	struct loc_owners o = { 0 };
	int ret = loc_owners_of(&fs, off, len, &o);

	locate_ext4_release();	/* no filesystem is kept open between events */
	fprintf(stderr, "fscrub watch: %s: kernel log: %s error on %s (%s %llu): %s bytes "
		"%llu-%llu\n", w->m.target, e->format, e->dev,
		e->unit == KMSG_BLOCK ? "block" : "sector", (unsigned long long)e->first, name,
		(unsigned long long)off, (unsigned long long)(off + len - 1));
	if (ret) {
		fprintf(stderr, "fscrub watch: %s: kernel log: the bytes are not mapped to "
			"files: %s\n", w->m.target, strerror(-ret));
		watch_record_event(wt, w, &ev);
	}
	blk_name_files(&fs, &o);
	for (size_t i = 0; i < o.n; i++)
		blk_owner(wt, w, &fs, &o.v[i], e, depth);
	w->nr_events++;
	watch_write_metrics(wt);
	trigger(wt, w, &ev);
	loc_owners_release(&o);
}

/*
 * The kernel log, if it can be read: followed from now.  Without access
 * (CAP_SYSLOG under kernel.dmesg_restrict) it is said once, and the other
 * sources go on.
 */
static void setup_kmsg(struct watch *wt)
{
	int ret = blk_follow_open(&wt->blk);

	wt->hooks = (struct blk_hooks){ .ours = blk_ours, .hit = blk_hit, .arg = wt };
	if (ret)
		fprintf(stderr, "fscrub watch: info: cannot read the kernel log (/dev/kmsg: %s%s): "
			"block-layer errors are not followed\n", strerror(-ret),
			ret == -EPERM ? "; CAP_SYSLOG is needed under kernel.dmesg_restrict" : "");
}

/* w's device, if the kernel log is followed: its errors are w's events. */
static void setup_blk(struct watch *wt, struct watched *w)
{
	char name[BSTACK_NAME_MAX];
	struct stat st;
	dev_t devno = w->m.devno;

	if (wt->blk.fd < 0)
		return;
	if (w->m.source[0] == '/' && stat(w->m.source, &st) == 0 && S_ISBLK(st.st_mode))
		devno = st.st_rdev;	/* btrfs: st_dev is not a block device's */
	if (bstack_name_of(&wt->blk.bs, devno, name, sizeof(name)))
		return;
	w->blk = true;
	fprintf(stderr, "fscrub watch: %s%s (%s): %sblock-layer errors of %s and the devices "
		"under it in the kernel log\n", w->how == WATCH_NONE ? "watching " : "",
		w->m.target, w->m.fstype, w->how == WATCH_NONE ? "only " : "also ", name);
}

/* ---- what a backend's watch hooks ask of the watcher (backends/watch.h) ---- */

const struct fsmount *watch_fs_mount(const struct watch_fs *wf)
{
	return &wf->w->m;
}

bool watch_fs_verbose(const struct watch_fs *wf)
{
	return wf->wt->opt.verbose;
}

unsigned long long watch_fs_poll_interval(const struct watch_fs *wf)
{
	return wf->wt->opt.poll_interval;
}

int watch_fs_root(const struct watch_fs *wf)
{
	return watched_root(wf->w);
}

void watch_fs_event(struct watch_fs *wf, const struct watch_event *e)
{
	watch_count_event(wf->wt, wf->w, e);
}

void watch_fs_record(struct watch_fs *wf, const struct watch_event *e)
{
	watch_record_event(wf->wt, wf->w, e);
}

void watch_fs_counted(struct watch_fs *wf)
{
	wf->w->nr_events++;
	watch_write_metrics(wf->wt);
}

void watch_fs_trigger(struct watch_fs *wf, const struct watch_event *e)
{
	trigger(wf->wt, wf->w, e);
}

void watch_fs_probe(struct watch_fs *wf, int fd, const char *path, uint64_t ino)
{
	watch_probe(wf->w, fd, path, ino);
}

void watch_fs_read_range(struct watch_fs *wf, int fd, const char *path, uint64_t ino,
			 uint64_t off, uint64_t len)
{
	watch_read_range(wf->w, fd, path, ino, off, len, false);
}

/* The kernel log's lines for that read are folded in by kmsg_recent_seen(). */
void watch_fs_quiet(struct watch_fs *wf, uint64_t off, uint64_t len)
{
	char name[BSTACK_NAME_MAX];

	if (wf->wt->blk.fd >= 0 &&
	    !bstack_name_of(&wf->wt->blk.bs, wf->w->m.devno, name, sizeof(name)))
		kmsg_recent_seen(&wf->wt->blk.recent, name, off, len, now_s());
}

/* ---- setup ---- */

static bool any_type(const char *fstype)
{
	(void)fstype;
	return true;
}

static int setup_fanotify(struct watch *wt, struct watched *w)
{
	struct strbuf why = STRBUF_INIT;
	int ret;

	if (!fserror_supported(w->m.fstype, &why)) {
		fprintf(stderr, "fscrub watch: not watching %s (%s): %s\n", w->m.target,
			w->m.fstype, why.buf);
		strbuf_release(&why);
		return -EOPNOTSUPP;
	}
	strbuf_release(&why);
	if (wt->fan_fd < 0 && (wt->fan_fd = fserror_open()) < 0) {
		ret = wt->fan_fd;
		wt->fan_fd = -1;
		fprintf(stderr, "fscrub watch: not watching %s (%s): fanotify_init: %s\n",
			w->m.target, w->m.fstype, strerror(-ret));
		return ret;
	}
	if ((ret = fserror_mark(wt->fan_fd, w->m.target))) {
		fprintf(stderr, "fscrub watch: not watching %s (%s): fanotify_mark: %s\n",
			w->m.target, w->m.fstype, strerror(-ret));
		return ret;
	}
	w->how = WATCH_FANOTIFY;
	fprintf(stderr, "fscrub watch: watching %s (%s): FAN_FS_ERROR\n", w->m.target,
		w->m.fstype);
	return 0;
}

/*
 * w's own source, through its backend's watch_open hook, or the kernel's
 * FAN_FS_ERROR events where the backend says so or has no hook (a mount
 * named on the command line of a type fscrub does not watch: the reason is
 * said).
 */
static void setup_source(struct watch *wt, struct watched *w, int root)
{
	struct watch_fs wf = { wt, w };
	int ret = w->ops && w->ops->watch_open ? w->ops->watch_open(&wf, root, &w->src) :
		  WATCH_FS_ERROR;

	if (ret == 0)
		w->how = WATCH_OWN;
	else if (ret == WATCH_FS_ERROR)
		setup_fanotify(wt, w);
}

/* w (zeroed) for the mount m: its sources set up, or how WATCH_NONE with the reason said. */
static void setup_one(struct watch *wt, struct watched *w, const struct fsmount *m)
{
	struct statfs sfs;
	int root;

	w->m.target = xstrdup(m->target);
	w->m.source = xstrdup(m->source);
	w->m.fstype = xstrdup(m->fstype);
	w->m.devno = m->devno;
	w->ops = backend_of_fstype(m->fstype);
	w->src.fd = -1;
	root = open(m->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0 || fstatfs(root, &sfs) < 0) {
		fprintf(stderr, "fscrub watch: not watching %s: %s\n", m->target, strerror(errno));
		if (root >= 0)
			close(root);
		return;
	}
	memcpy(w->fsid, &sfs.f_fsid, sizeof(w->fsid));
	history_key(w);
	setup_source(wt, w, root);
	setup_blk(wt, w);
	close(root);
}

static void watched_release(struct watched *w)
{
	if (w->how == WATCH_OWN && w->ops->watch_close)
		w->ops->watch_close(&w->src);
	free(w->fsroot);
	free(w->m.target);
	free(w->m.source);
	free(w->m.fstype);
}

/* ---- filesystems that come and go ---- */

static bool named(const struct watch *wt, const char *target)
{
	for (size_t i = 0; i < wt->nr_named; i++)
		if (!strcmp(wt->named[i], target))
			return true;
	return false;
}

/* Is w still mounted as in now, the same filesystem? */
static bool still_there(const struct watch *wt, const struct watched *w,
			const struct fsmount_list *now)
{
	struct statfs sfs;

	for (size_t i = 0; i < now->nr; i++) {
		if (now->v[i].devno != w->m.devno || strcmp(now->v[i].target, w->m.target) ||
		    (wt->named && !named(wt, now->v[i].target)))
			continue;
		/* a loop device reused at once has the device number of the last one */
		return statfs(w->m.target, &sfs) == 0 &&
		       !memcmp(&sfs.f_fsid, w->fsid, sizeof(w->fsid));
	}
	return false;
}

static bool watched_devno(const struct watch *wt, dev_t devno)
{
	for (size_t i = 0; i < wt->nr; i++)
		if (wt->w[i].m.devno == devno)
			return true;
	return false;
}

/*
 * Nothing watched, every mount watched: started by systemd before the
 * filesystems are mounted (or with only some not watchable yet), the
 * watcher waits for them rather than exit, and says so.
 */
static void say_waiting(void)
{
	fprintf(stderr, "fscrub watch: nothing to watch now: waiting for an ext4, XFS or btrfs "
		"filesystem to be mounted\n");
}

static size_t nr_watching(const struct watch *wt)
{
	size_t n = 0;

	for (size_t i = 0; i < wt->nr; i++)
		n += wt->w[i].how != WATCH_NONE || wt->w[i].blk;
	return n;
}

/*
 * The mount table changed: drop the filesystems that are gone (the kernel
 * removed their fanotify marks when they were unmounted; a health monitor
 * is closed here), set up those that came (every watchable one, or those
 * named).
 */
static void rescan(struct watch *wt)
{
	struct fsmount_list now;
	size_t before = wt->nr, watching = nr_watching(wt);
	bool changed = false;

	if (fsmounts_collect("watch", NULL, 0, wt->named ? any_type : backend_has_watch,
			     &now))
		return;
	for (size_t i = wt->nr; i-- > 0;) {
		struct watched *w = &wt->w[i];

		if (still_there(wt, w, &now))
			continue;
		if (w->how != WATCH_NONE || w->blk)
			fprintf(stderr, "fscrub watch: no longer watching %s (%s): unmounted\n",
				w->m.target, w->m.fstype);
		changed |= w->how != WATCH_NONE || w->blk;
		watched_release(w);
		memmove(w, w + 1, (wt->nr - i - 1) * sizeof(*w));
		wt->nr--;
	}
	for (size_t i = 0; i < now.nr; i++) {
		if ((wt->named && !named(wt, now.v[i].target)) ||
		    watched_devno(wt, now.v[i].devno))
			continue;
		wt->w = xrealloc(wt->w, (wt->nr + 1) * sizeof(*wt->w));
		memset(&wt->w[wt->nr], 0, sizeof(wt->w[0]));
		setup_one(wt, &wt->w[wt->nr], &now.v[i]);
		changed |= wt->w[wt->nr].how != WATCH_NONE || wt->w[wt->nr].blk;
		wt->nr++;
	}
	fsmounts_release(&now);
	if (changed || wt->nr != before)
		watch_write_metrics(wt);
	if (watching && !nr_watching(wt) && !wt->named)
		say_waiting();
}

/* /proc/self/mountinfo: poll() says POLLPRI when the mount table changes. */
static void open_mountinfo(struct watch *wt)
{
	wt->mi_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (wt->mi_fd < 0)
		fprintf(stderr, "fscrub watch: cannot watch the mount table: %s: filesystems "
			"mounted from now on are not watched\n", strerror(errno));
}

/* ---- the loop ---- */

/* Is w's own source polled every --poll-interval seconds (btrfs's counters)? */
static bool timed(const struct watched *w)
{
	return w->how == WATCH_OWN && w->src.timed && w->ops->watch_poll;
}

static bool any_timed(const struct watch *wt)
{
	for (size_t i = 0; i < wt->nr; i++)
		if (timed(&wt->w[i]))
			return true;
	return false;
}

/* The descriptors to wait on: fanotify, the mount table, the kernel log, each backend's source. */
#define POLL_FIXED 3
static size_t poll_set(const struct watch *wt, struct pollfd **pfd)
{
	size_t n = 0;

	*pfd = xrealloc(*pfd, (wt->nr + POLL_FIXED) * sizeof(**pfd));
	(*pfd)[n++] = (struct pollfd){ .fd = wt->fan_fd, .events = POLLIN };
	(*pfd)[n++] = (struct pollfd){ .fd = wt->mi_fd, .events = POLLPRI };
	(*pfd)[n++] = (struct pollfd){ .fd = wt->blk.fd, .events = POLLIN };
	for (size_t i = 0; i < wt->nr; i++)
		(*pfd)[n++] = (struct pollfd){ .fd = wt->w[i].how == WATCH_OWN ? wt->w[i].src.fd : -1,
					       .events = POLLIN };
	return n;
}

static void poll_due(struct watch *wt, double *next_poll)
{
	if (now_s() < *next_poll)
		return;
	for (size_t i = 0; i < wt->nr; i++) {
		struct watch_fs wf = { wt, &wt->w[i] };

		if (timed(&wt->w[i]))
			wt->w[i].ops->watch_poll(&wf, &wt->w[i].src);
	}
	*next_poll = now_s() + (double)wt->opt.poll_interval;
}

/* What poll() found: events first, the mount table last (it moves wt->w). */
static void dispatch(struct watch *wt, const struct pollfd *pfd, size_t n)
{
	if (pfd[0].revents & POLLIN)
		read_events(wt);
	if (pfd[2].revents)
		blk_follow_read(&wt->blk, &wt->hooks);
	for (size_t k = POLL_FIXED; k < n; k++) {
		struct watched *w = &wt->w[k - POLL_FIXED];
		struct watch_fs wf = { wt, w };

		if (pfd[k].revents && w->how == WATCH_OWN && w->src.fd >= 0 && w->ops->watch_read)
			w->ops->watch_read(&wf, &w->src);
	}
	if (pfd[1].revents & (POLLPRI | POLLERR))
		rescan(wt);
}

static int loop(struct watch *wt)
{
	double next_poll = now_s() + (double)wt->opt.poll_interval;
	struct pollfd *pfd = NULL;

	while (!watch_stop) {
		bool polls = any_timed(wt);
		size_t n = poll_set(wt, &pfd);
		double wait = next_poll - now_s();
		int timeout = !polls ? -1 : wait <= 0 ? 0 : (int)(wait * 1000) + 1;
		int ret = poll(pfd, n, timeout);

		if (ret < 0 && errno != EINTR) {
			fprintf(stderr, "fscrub watch: poll: %s\n", strerror(errno));
			free(pfd);
			return EXIT_OPERATIONAL;
		}
		reap_children();
		if (ret > 0)
			dispatch(wt, pfd, n);
		if (polls)
			poll_due(wt, &next_poll);
	}
	free(pfd);
	fprintf(stderr, "fscrub watch: stopped\n");
	return EXIT_CLEAN;
}

static void setup_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	/* poll() is never restarted: it returns EINTR on any of these at once. */
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = on_stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_child;
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fputs("Usage: fscrub watch [OPTIONS] [MOUNTPOINT|DEVICE...]\n"
	      "\n"
	      "Watch filesystems for the errors the kernel reports (default: every mounted\n"
	      "ext4, XFS and btrfs filesystem); check what an error names at once and start\n"
	      "the full scrub.\n"
	      "\n"
	      "  -h, --help              show this help and exit\n"
	      "  -v, --verbose           say more\n"
	      "      --on-error CMD      run CMD with sh -c instead of\n"
	      "                          'systemctl start fscrub@MOUNT.service'\n"
	      "      --min-interval SECS start it at most once per SECS per filesystem\n"
	      "                          (default 3600; 0: on every event)\n"
	      "      --poll-interval SECS read btrfs device error counters every SECS\n"
	      "                          (default 60)\n"
	      "      --metrics FILE      write the event counters to FILE (Prometheus)\n"
	      "      --state-dir DIR     record the events in DIR/state.sqlite\n"
	      "                          (default /var/lib/fscrub)\n"
	      "\n"
	      "Without MOUNTPOINT it waits for filesystems to be mounted when none can be\n"
	      "watched yet.\n"
	      "\n"
	      "Exit status: 0 stopped by SIGTERM or SIGINT, 8 none of the filesystems named\n"
	      "can be watched or an operational error, 16 usage error.\n", f);
}

static int bad_value(const char *opt, const char *arg)
{
	fprintf(stderr, "fscrub watch: %s needs a number of seconds, not '%s'\n"
		"Try 'fscrub watch --help' for more information.\n", opt, arg);
	return EXIT_USAGE;
}

/* --metrics FILE that cannot be written: said, and true. */
static bool bad_output(const char *path)
{
	struct strbuf why = STRBUF_INIT;
	bool bad = outfile_check(path, &why) < 0;

	if (bad)
		fprintf(stderr, "fscrub watch: cannot write the metrics file '%s': %s\n"
			"Try 'fscrub watch --help' for more information.\n", path, why.buf);
	strbuf_release(&why);
	return bad;
}

/* A whole number of seconds from 0 (if zero_ok) to MAX_INTERVAL. */
static bool parse_seconds(const char *s, bool zero_ok, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > MAX_INTERVAL || (!v && !zero_ok))
		return false;
	*out = v;
	return true;
}

enum { OPT_ON_ERROR = 256, OPT_MIN_INTERVAL, OPT_POLL_INTERVAL, OPT_STATE_DIR, OPT_METRICS };

static int parse(int argc, char **argv, struct watch_opts *o)
{
	static const struct option longs[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "on-error", required_argument, NULL, OPT_ON_ERROR },
		{ "min-interval", required_argument, NULL, OPT_MIN_INTERVAL },
		{ "poll-interval", required_argument, NULL, OPT_POLL_INTERVAL },
		{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+hv", longs, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return EXIT_CLEAN;
		case 'v':
			o->verbose = true;
			break;
		case OPT_ON_ERROR:
			o->on_error = optarg;
			break;
		case OPT_MIN_INTERVAL:
			if (!parse_seconds(optarg, true, &o->min_interval))
				return bad_value("--min-interval", optarg);
			break;
		case OPT_POLL_INTERVAL:
			if (!parse_seconds(optarg, false, &o->poll_interval))
				return bad_value("--poll-interval", optarg);
			break;
		case OPT_STATE_DIR:
			o->state_dir = optarg;
			break;
		case OPT_METRICS:
			if (bad_output(optarg))
				return EXIT_USAGE;
			o->metrics_path = optarg;
			break;
		default:
			fprintf(stderr, "fscrub watch: %s '%s'\n"
				"Try 'fscrub watch --help' for more information.\n",
				optopt ? "option needs an argument:" : "unknown option",
				argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	return -1;
}

static void release(struct watch *wt)
{
	for (size_t i = 0; i < wt->nr; i++)
		watched_release(&wt->w[i]);
	free(wt->w);
	for (size_t i = 0; i < wt->nr_named; i++)
		free(wt->named[i]);
	free(wt->named);
	if (wt->fan_fd >= 0)
		close(wt->fan_fd);
	if (wt->mi_fd >= 0)
		close(wt->mi_fd);
	blk_follow_close(&wt->blk);
}

/* With mount points named, only they are watched when they come back. */
static void remember_named(struct watch *wt, const struct fsmount_list *list, int nr_args)
{
	if (nr_args <= 0)
		return;
	wt->named = xcalloc(list->nr ? list->nr : 1, sizeof(*wt->named));
	for (size_t i = 0; i < list->nr; i++)
		wt->named[wt->nr_named++] = xstrdup(list->v[i].target);
}

int cmd_watch(int argc, char **argv)
{
	struct watch wt = {
		.opt = { .min_interval = DEFAULT_MIN_INTERVAL,
			 .poll_interval = DEFAULT_POLL_INTERVAL, .state_dir = state_default_dir() },
		.fan_fd = -1, .mi_fd = -1, .blk = { .fd = -1 },
	};
	struct fsmount_list list;
	size_t nr_watched = 0;
	int ret;

	if ((ret = parse(argc, argv, &wt.opt)) >= 0)
		return ret;
	if ((ret = fsmounts_collect("watch", argv + optind, argc - optind, backend_has_watch,
				    &list)))
		return ret;
	setvbuf(stdout, NULL, _IOLBF, 0);
	setup_signals();
	remember_named(&wt, &list, argc - optind);
	/* before the list is made: a mount that comes meanwhile makes poll() return */
	open_mountinfo(&wt);
	setup_kmsg(&wt);
	wt.w = xcalloc(list.nr ? list.nr : 1, sizeof(*wt.w));
	wt.nr = list.nr;
	for (size_t i = 0; i < list.nr; i++)
		setup_one(&wt, &wt.w[i], &list.v[i]);
	fsmounts_release(&list);
	nr_watched = nr_watching(&wt);
	if (!nr_watched && (wt.named || wt.mi_fd < 0)) {
		/* the filesystems named cannot be watched, or none can come */
		fprintf(stderr, "fscrub watch: nothing to watch\n");
		ret = EXIT_OPERATIONAL;
	} else {
		if (!nr_watched)
			say_waiting();
		watch_write_metrics(&wt);
		ret = loop(&wt);
	}
	release(&wt);
	return ret;
}
