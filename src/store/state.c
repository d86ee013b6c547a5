/*
 * state: the run history database; see state.h.
 *
 * Opened like the ledger's database (ledger_store.c): sqlite3_open_v2(),
 * a busy timeout, every failure turned into a message and -EIO.  Unlike
 * the ledger it never holds a transaction open: WAL mode lets status read
 * while runs write, and runs on other filesystems write between our two.
 */
#include "store/state.h"

#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "report/checks.h"
#include "lib/inokey.h"
#include "report/report.h"
#include "lib/strbuf.h"

/*
 * How long a write waits for another run's: the longest write is the end
 * of a run with STATE_MAX_FINDINGS findings, well under a second.
 */
#define STATE_BUSY_MS 30000
/* The pause between tries of a switch to WAL that found the database locked. */
#define WAL_RETRY_MS 10

struct kept_finding {
	enum severity severity;
	bool content, has_range, has_subvol;
	uint64_t subvol;
	char *check, *path, *message;
	uint64_t ino, offset, length;
};

struct kept_phase {
	int phase;
	char *title;
	double wall, user, sys;
	unsigned long long items;
};

struct state {
	sqlite3 *db;
	char *path;
	struct kept_finding *findings;
	size_t nr_findings, alloc_findings;
	unsigned long long dropped;
	struct kept_phase phases[16];	/* more than there are phases */
	size_t nr_phases;
	struct subvol_ino *rescanned;	/* state_set_rescanned() */
	size_t nr_rescanned;
	int version;			/* the database's user_version */
};

static const char *severity_name[] = {
	[SEV_INFO] = "info", [SEV_WARNING] = "warning", [SEV_ERROR] = "error",
	[SEV_REPAIRED] = "repaired",
};

static const char schema_v1[] =
	"CREATE TABLE runs (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL, fsroot TEXT NOT NULL, "
	"mountpoint TEXT, "
	"source TEXT, fstype TEXT, backend TEXT, options TEXT, version TEXT, "
	"started REAL NOT NULL, ended REAL, status TEXT NOT NULL, exit_code INTEGER, "
	"verify_data INTEGER NOT NULL, rescan INTEGER NOT NULL DEFAULT 0, errors INTEGER, warnings INTEGER, infos INTEGER, "
	"repaired INTEGER, operational INTEGER, inodes INTEGER, bytes_verified INTEGER, "
	"findings_dropped INTEGER);"
	"CREATE INDEX runs_by_fs ON runs (uuid, fsroot, id);"
	"CREATE TABLE phases (run INTEGER NOT NULL REFERENCES runs (id), phase INTEGER NOT NULL, "
	"title TEXT, wall REAL, user REAL, sys REAL, items INTEGER, PRIMARY KEY (run, phase));"
	"CREATE TABLE findings (run INTEGER NOT NULL REFERENCES runs (id), seq INTEGER NOT NULL, "
	"severity TEXT NOT NULL, check_id TEXT NOT NULL, content INTEGER NOT NULL, path TEXT, "
	"ino INTEGER, offset INTEGER, length INTEGER, message TEXT, PRIMARY KEY (run, seq));"
	"CREATE TABLE rescanned (run INTEGER NOT NULL REFERENCES runs (id), ino INTEGER NOT NULL, "
	"PRIMARY KEY (run, ino));"
	"PRAGMA user_version = 1;";

/* Version 2: fscrub watch's events (state_add_event()), beside the runs. */
static const char schema_v2[] =
	"CREATE TABLE events (uuid TEXT NOT NULL, fsroot TEXT NOT NULL, time REAL NOT NULL, "
	"kind TEXT NOT NULL, errno INTEGER, error_count INTEGER, ino INTEGER, path TEXT);"
	"CREATE INDEX events_by_fs ON events (uuid, fsroot, time);"
	"PRAGMA user_version = 2;";

/*
 * Version 3: the device regions of rotating media scans (--portion), by
 * filesystem UUID alone (a device, not a mount root): the region size
 * chosen on first use, and each region's file data and last read.
 */
static const char schema_v3[] =
	"CREATE TABLE region_sizes (uuid TEXT PRIMARY KEY, size INTEGER NOT NULL);"
	"CREATE TABLE regions (uuid TEXT NOT NULL, start INTEGER NOT NULL, "
	"length INTEGER NOT NULL, allocated INTEGER NOT NULL, verified REAL, run INTEGER, "
	"PRIMARY KEY (uuid, start));"
	"PRAGMA user_version = 3;";

/*
 * Version 4: the subvolume of each finding and of each file a rescan read
 * (inode numbers repeat across btrfs subvolumes).  The rows of before had
 * none: they were taken for the mount's own subvolume, which 0 says now.
 * rescanned gets the subvolume in its primary key: made anew.
 */
static const char schema_v4[] =
	"ALTER TABLE findings ADD COLUMN subvol INTEGER;"
	"UPDATE findings SET subvol = 0;"
	"CREATE TABLE rescanned_v4 (run INTEGER NOT NULL REFERENCES runs (id), "
	"subvol INTEGER NOT NULL, ino INTEGER NOT NULL, PRIMARY KEY (run, subvol, ino));"
	"INSERT INTO rescanned_v4 (run, subvol, ino) SELECT run, 0, ino FROM rescanned;"
	"DROP TABLE rescanned;"
	"ALTER TABLE rescanned_v4 RENAME TO rescanned;"
	"PRAGMA user_version = 4;";

/*
 * Version 5: the checkpoint of a stopped run (--resume), one per
 * filesystem and mount root; cursor is checkpoint.c's JSON, opaque here.
 */
static const char schema_v5[] =
	"CREATE TABLE checkpoints (uuid TEXT NOT NULL, fsroot TEXT NOT NULL, run INTEGER, "
	"saved REAL NOT NULL, options TEXT NOT NULL, phase INTEGER NOT NULL, cursor TEXT, "
	"PRIMARY KEY (uuid, fsroot));"
	"PRAGMA user_version = 5;";

/*
 * Version 6: how far a region read in part was read (bytes from its start,
 * every byte of file data below that read) and when that part was first
 * read: the next run goes on from there, and the region's last read, when
 * it ends, is that of its oldest part.
 */
static const char schema_v6[] =
	"ALTER TABLE regions ADD COLUMN read_to INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE regions ADD COLUMN partial REAL;"
	"PRAGMA user_version = 6;";

/*
 * Version 7: how many of a run's findings could not be confirmed (infos
 * "changed while being checked"), for status; NULL for the runs of before.
 */
static const char schema_v7[] =
	"ALTER TABLE runs ADD COLUMN unconfirmed INTEGER;"
	"PRAGMA user_version = 7;";

/*
 * Version 8: the bytes an event names (a block-layer error's file bytes,
 * or device bytes for metadata and free space); NULL for events without.
 */
static const char schema_v8[] =
	"ALTER TABLE events ADD COLUMN range_off INTEGER;"
	"ALTER TABLE events ADD COLUMN range_len INTEGER;"
	"PRAGMA user_version = 8;";

static int fail(struct state *s, struct strbuf *err, const char *what)
{
	if (err)
		strbuf_addf(err, "%s '%s': %s", what, s->path, sqlite3_errmsg(s->db));
	return -EIO;
}

static int exec(struct state *s, const char *sql)
{
	return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/*
 * PRAGMA journal_mode = WAL.  Turning a database into WAL takes an
 * exclusive lock without SQLite's busy handler, so two runs that create
 * the database at once (the timer units of two filesystems started
 * together) got "database is locked" at once, and one went unrecorded.
 * Tried again for as long as the busy timeout.
 */
static int set_wal(struct state *s)
{
	const struct timespec pause = { 0, WAL_RETRY_MS * 1000000L };

	for (unsigned waited = 0;; waited += WAL_RETRY_MS) {
		int rc = sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);

		if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited >= STATE_BUSY_MS)
			return rc == SQLITE_OK ? 0 : -EIO;
		nanosleep(&pause, NULL);
	}
}

static int user_version(struct state *s)
{
	sqlite3_stmt *st;
	int v = -1;

	if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/*
 * Create the tables of a new database, or add those of the later versions
 * to an older one, in one transaction; refuse a newer one.
 */
static int setup_schema(struct state *s, struct strbuf *err)
{
	int v;

	if (exec(s, "BEGIN IMMEDIATE"))
		return fail(s, err, "cannot write the state database");
	v = user_version(s);
	if ((v == 0 && exec(s, schema_v1)) || (v >= 0 && v < 2 && exec(s, schema_v2)) ||
	    (v >= 0 && v < 3 && exec(s, schema_v3)) || (v >= 0 && v < 4 && exec(s, schema_v4)) ||
	    (v >= 0 && v < 5 && exec(s, schema_v5)) || (v >= 0 && v < 6 && exec(s, schema_v6)) ||
	    (v >= 0 && v < 7 && exec(s, schema_v7)) || (v >= 0 && v < 8 && exec(s, schema_v8))) {
		fail(s, err, "cannot create the tables of the state database");
		exec(s, "ROLLBACK");
		return -EIO;
	}
	exec(s, "COMMIT");
	if (v > STATE_SCHEMA_VERSION) {
		strbuf_addf(err, "the state database '%s' is of a newer fscrub (schema %d)",
			    s->path, v);
		return -EPROTO;
	}
	s->version = STATE_SCHEMA_VERSION;
	return v < 0 ? fail(s, err, "cannot read the state database") : 0;
}

/*
 * SQLite, run as root, fchown()s the -wal and -shm files it creates to the
 * owner of the database.  The store is root's own (/var/lib/fscrub), and
 * fscrub@.service denies fchown (~@privileged; its test suite checks the
 * system calls fscrub makes against the unit's filter): a no-op instead.
 * Both files are removed when the last connection closes.
 */
static int no_fchown(int fd, uid_t uid, gid_t gid)
{
	(void)fd;
	(void)uid;
	(void)gid;
	return 0;
}

static void no_chown_once(void)
{
	sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);

	if (vfs && vfs->iVersion >= 3 && vfs->xSetSystemCall)
		vfs->xSetSystemCall(vfs, "fchown", (sqlite3_syscall_ptr)no_fchown);
}

const char *state_default_dir(void)
{
	static char first[4096];
	const char *env = getenv("STATE_DIRECTORY");
	size_t n;

	if (!env || !*env)
		return STATE_DEFAULT_DIR;
	/* systemd gives several directories colon-separated: ours is the first. */
	n = strcspn(env, ":");
	if (n == 0 || n >= sizeof(first))
		return STATE_DEFAULT_DIR;
	memcpy(first, env, n);
	first[n] = '\0';
	return first;
}

int state_open(struct state **out, const char *dir, bool write, struct strbuf *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	struct state *s = xcalloc(1, sizeof(*s));
	struct strbuf path = STRBUF_INIT;
	int flags = write ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
	int rc, ret = 0;

	pthread_once(&once, no_chown_once);
	strbuf_addf(&path, "%s/%s", dir, STATE_DB_NAME);
	s->path = strbuf_detach(&path);
	rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
	if (rc == SQLITE_CANTOPEN && !write) {
		ret = -ENOENT;
	} else if (rc != SQLITE_OK) {
		ret = fail(s, err, "cannot open the state database");
	} else {
		sqlite3_busy_timeout(s->db, STATE_BUSY_MS);
		if (write && set_wal(s))
			ret = fail(s, err, "cannot use the state database");
		else if (write)
			ret = setup_schema(s, err);
		else if ((s->version = user_version(s)) < 0)
			ret = fail(s, err, "cannot read the state database");
	}
	if (ret) {
		state_close(s);
		return ret;
	}
	*out = s;
	return 0;
}

static void drop_kept(struct state *s)
{
	for (size_t i = 0; i < s->nr_findings; i++) {
		free(s->findings[i].check);
		free(s->findings[i].path);
		free(s->findings[i].message);
	}
	s->nr_findings = 0;
	for (size_t i = 0; i < s->nr_phases; i++)
		free(s->phases[i].title);
	s->nr_phases = 0;
	free(s->rescanned);
	s->rescanned = NULL;
	s->nr_rescanned = 0;
}

void state_close(struct state *s)
{
	if (!s)
		return;
	drop_kept(s);
	free(s->findings);
	sqlite3_close(s->db);
	free(s->path);
	free(s);
}

int state_open_write(struct state **out, const char *dir, bool make_dir, struct strbuf *err)
{
	if (make_dir && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int ret = -errno;

		strbuf_addf(err, "cannot create '%s': %s", dir, strerror(-ret));
		return ret;
	}
	return state_open(out, dir, true, err);
}

const char *state_path(const struct state *s)
{
	return s->path;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static void bind_u64(sqlite3_stmt *st, int i, unsigned long long v)
{
	sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* Run one prepared statement to its end; finalizes it. */
static int step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int state_run_begin(struct state *s, struct state_run *r, struct strbuf *err)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO runs (uuid, mountpoint, source, fstype, "
			       "backend, options, version, started, status, verify_data, fsroot, rescan) "
			       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'running', ?9, ?10, ?11)",
			       -1, &st, NULL) != SQLITE_OK)
		return fail(s, err, "cannot write the state database");
	bind_text(st, 1, r->uuid);
	bind_text(st, 2, r->mountpoint);
	bind_text(st, 3, r->source);
	bind_text(st, 4, r->fstype);
	bind_text(st, 5, r->backend);
	bind_text(st, 6, r->options);
	bind_text(st, 7, r->version);
	sqlite3_bind_double(st, 8, r->started);
	sqlite3_bind_int(st, 9, r->verify_data);
	bind_text(st, 10, r->fsroot ? r->fsroot : "/");
	/* 2 and 3 keep a --since and a --portion run apart from a full -x with no new column (state.h). */
	sqlite3_bind_int(st, 11, r->rescan ? 1 : r->since ? 2 : r->portion ? 3 : 0);
	if (step_done(st))
		return fail(s, err, "cannot write the state database");
	r->id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

void state_add_finding(struct state *s, const struct finding *f, bool content)
{
	struct kept_finding *k;

	if (s->nr_findings == STATE_MAX_FINDINGS) {
		s->dropped++;
		return;
	}
	if (s->nr_findings == s->alloc_findings) {
		s->alloc_findings = s->alloc_findings ? 2 * s->alloc_findings : 64;
		s->findings = xrealloc(s->findings, s->alloc_findings * sizeof(*s->findings));
	}
	k = &s->findings[s->nr_findings++];
	*k = (struct kept_finding){
		.severity = f->severity, .content = content, .has_range = f->has_range,
		.check = xstrdup(f->check), .path = xstrdup(f->path ? f->path : ""),
		.message = xstrdup(f->message ? f->message : ""),
		.ino = f->ino, .offset = f->offset, .length = f->length,
		.has_subvol = f->has_subvol, .subvol = f->subvol,
	};
}

void state_add_phase(struct state *s, int phase, const char *title, double wall,
		     double user, double sys, unsigned long long items)
{
	if (s->nr_phases == sizeof(s->phases) / sizeof(s->phases[0]))
		return;
	s->phases[s->nr_phases++] = (struct kept_phase){
		.phase = phase, .title = xstrdup(title), .wall = wall, .user = user,
		.sys = sys, .items = items,
	};
}

static int write_run_end(struct state *s, const struct state_run *r)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(s->db, "UPDATE runs SET ended = ?2, status = ?3, exit_code = ?4, "
			       "errors = ?5, warnings = ?6, infos = ?7, repaired = ?8, "
			       "operational = ?9, inodes = ?10, bytes_verified = ?11, "
			       "findings_dropped = ?12, backend = ?13, unconfirmed = ?14 "
			       "WHERE id = ?1",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_int64(st, 1, r->id);
	sqlite3_bind_double(st, 2, r->ended);
	bind_text(st, 3, r->status);
	sqlite3_bind_int(st, 4, r->exit_code);
	bind_u64(st, 5, r->errors);
	bind_u64(st, 6, r->warnings);
	bind_u64(st, 7, r->infos);
	bind_u64(st, 8, r->repaired);
	bind_u64(st, 9, r->operational);
	bind_u64(st, 10, r->inodes);
	bind_u64(st, 11, r->bytes_verified);
	bind_u64(st, 12, s->dropped);
	bind_text(st, 13, r->backend);
	bind_u64(st, 14, r->unconfirmed);
	return step_done(st);
}

static int write_phases(struct state *s, int64_t run)
{
	sqlite3_stmt *st;
	int ret = 0;

	if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO phases (run, phase, title, wall, "
			       "user, sys, items) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	for (size_t i = 0; i < s->nr_phases && !ret; i++) {
		const struct kept_phase *p = &s->phases[i];

		sqlite3_bind_int64(st, 1, run);
		sqlite3_bind_int(st, 2, p->phase);
		bind_text(st, 3, p->title);
		sqlite3_bind_double(st, 4, p->wall);
		sqlite3_bind_double(st, 5, p->user);
		sqlite3_bind_double(st, 6, p->sys);
		bind_u64(st, 7, p->items);
		if (sqlite3_step(st) != SQLITE_DONE)
			ret = -EIO;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return ret;
}

void state_set_rescanned(struct state *s, const struct subvol_ino *files, size_t n)
{
	free(s->rescanned);
	s->rescanned = n ? xmalloc(n * sizeof(*files)) : NULL;
	if (n)
		memcpy(s->rescanned, files, n * sizeof(*files));
	s->nr_rescanned = n;
}

static int write_rescanned(struct state *s, int64_t run)
{
	sqlite3_stmt *st;
	int ret = 0;

	if (sqlite3_prepare_v2(s->db, "INSERT OR IGNORE INTO rescanned (run, ino, subvol) "
			       "VALUES (?1, ?2, ?3)", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	for (size_t i = 0; i < s->nr_rescanned && !ret; i++) {
		sqlite3_bind_int64(st, 1, run);
		bind_u64(st, 2, s->rescanned[i].ino);
		bind_u64(st, 3, s->rescanned[i].subvol);
		if (sqlite3_step(st) != SQLITE_DONE)
			ret = -EIO;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return ret;
}

static int write_findings(struct state *s, int64_t run)
{
	sqlite3_stmt *st;
	int ret = 0;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO findings (run, seq, severity, check_id, "
			       "content, path, ino, offset, length, message, subvol) VALUES "
			       "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	for (size_t i = 0; i < s->nr_findings && !ret; i++) {
		const struct kept_finding *f = &s->findings[i];

		sqlite3_bind_int64(st, 1, run);
		bind_u64(st, 2, i);
		bind_text(st, 3, severity_name[f->severity]);
		bind_text(st, 4, f->check);
		sqlite3_bind_int(st, 5, f->content);
		bind_text(st, 6, f->path);
		bind_u64(st, 7, f->ino);
		if (f->has_range) {
			bind_u64(st, 8, f->offset);
			bind_u64(st, 9, f->length);
		} else {
			sqlite3_bind_null(st, 8);
			sqlite3_bind_null(st, 9);
		}
		bind_text(st, 10, f->message);
		if (f->has_subvol)
			bind_u64(st, 11, f->subvol);
		else
			sqlite3_bind_null(st, 11);
		if (sqlite3_step(st) != SQLITE_DONE)
			ret = -EIO;
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return ret;
}

int state_run_end(struct state *s, const struct state_run *r, struct strbuf *err)
{
	int ret;

	if (exec(s, "BEGIN IMMEDIATE"))
		return fail(s, err, "cannot write the state database");
	ret = write_run_end(s, r);
	if (!ret)
		ret = write_phases(s, r->id);
	if (!ret)
		ret = write_findings(s, r->id);
	if (!ret)
		ret = write_rescanned(s, r->id);
	if (!ret && exec(s, "COMMIT"))
		ret = -EIO;
	if (ret) {
		fail(s, err, "cannot write the run to the state database");
		exec(s, "ROLLBACK");
	}
	drop_kept(s);
	return ret;
}

/* --- reading, for status and the metrics --- */

static char *column_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	return t ? xstrdup((const char *)t) : NULL;
}

static unsigned long long column_u64(sqlite3_stmt *st, int i)
{
	return (unsigned long long)sqlite3_column_int64(st, i);
}

#define RUN_COLUMNS "id, uuid, mountpoint, source, fstype, backend, options, version, " \
		    "started, coalesce(ended, 0), status, coalesce(exit_code, -1), verify_data, " \
		    "errors, warnings, infos, repaired, operational, inodes, bytes_verified, " \
		    "findings_dropped, fsroot, rescan, "
/* The runs' unconfirmed findings: a database before version 7 has no column. */
#define RUN_COLUMNS_V7 RUN_COLUMNS "coalesce(unconfirmed, 0)"
#define RUN_COLUMNS_V6 RUN_COLUMNS "0"

static void read_run(sqlite3_stmt *st, struct state_run *r)
{
	*r = (struct state_run){
		.id = sqlite3_column_int64(st, 0), .uuid = column_dup(st, 1),
		.mountpoint = column_dup(st, 2), .source = column_dup(st, 3),
		.fstype = column_dup(st, 4), .backend = column_dup(st, 5),
		.options = column_dup(st, 6), .version = column_dup(st, 7),
		.started = sqlite3_column_double(st, 8), .ended = sqlite3_column_double(st, 9),
		.status = column_dup(st, 10), .exit_code = sqlite3_column_int(st, 11),
		.verify_data = sqlite3_column_int(st, 12), .errors = column_u64(st, 13),
		.warnings = column_u64(st, 14), .infos = column_u64(st, 15),
		.repaired = column_u64(st, 16), .operational = column_u64(st, 17),
		.inodes = column_u64(st, 18), .bytes_verified = column_u64(st, 19),
		.findings_dropped = column_u64(st, 20), .fsroot = column_dup(st, 21),
		.rescan = sqlite3_column_int(st, 22) == 1,
		.since = sqlite3_column_int(st, 22) == 2,
		.portion = sqlite3_column_int(st, 22) == 3,
		.unconfirmed = column_u64(st, 23),
	};
}

void state_run_release(struct state_run *r)
{
	free(r->uuid);
	free(r->fsroot);
	free(r->mountpoint);
	free(r->source);
	free(r->fstype);
	free(r->backend);
	free(r->options);
	free(r->version);
	free(r->status);
	memset(r, 0, sizeof(*r));
}

int state_each_fs(struct state *s, void (*fn)(const struct state_fs *fs, void *arg),
		  void *arg)
{
	sqlite3_stmt *st;
	int rc;

	/* Then those with only events of fscrub watch (version 2), never scrubbed. */
	static const char v2[] =
		"SELECT uuid, fsroot, max(id) AS o FROM runs GROUP BY uuid, fsroot "
		"UNION ALL SELECT uuid, fsroot, 0 FROM events "
		"WHERE (uuid, fsroot) NOT IN (SELECT uuid, fsroot FROM runs) "
		"GROUP BY uuid, fsroot ORDER BY o DESC";

	if (sqlite3_prepare_v2(s->db, s->version >= 2 ? v2 :
			       "SELECT uuid, fsroot FROM runs GROUP BY uuid, fsroot "
			       "ORDER BY max(id) DESC", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct state_fs fs = {
			.uuid = (const char *)sqlite3_column_text(st, 0),
			.fsroot = (const char *)sqlite3_column_text(st, 1),
		};

		fn(&fs, arg);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

int state_each_run(struct state *s, const struct state_fs *fs, unsigned n,
		   void (*fn)(const struct state_run *r, void *arg), void *arg)
{
	sqlite3_stmt *st;
	int rc;

#define RUNS_OF_FS " FROM runs WHERE uuid = ?1 AND fsroot = ?3 ORDER BY id DESC LIMIT ?2"
	if (sqlite3_prepare_v2(s->db, s->version >= 7 ? "SELECT " RUN_COLUMNS_V7 RUNS_OF_FS :
			       "SELECT " RUN_COLUMNS_V6 RUNS_OF_FS, -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, fs->uuid);
	bind_text(st, 3, fs->fsroot);
	sqlite3_bind_int64(st, 2, n);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct state_run r;

		read_run(st, &r);
		fn(&r, arg);
		state_run_release(&r);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static void keep_last(const struct state_run *r, void *arg)
{
	struct state_run *last = arg;

	*last = *r;
	last->uuid = r->uuid ? xstrdup(r->uuid) : NULL;
	last->fsroot = r->fsroot ? xstrdup(r->fsroot) : NULL;
	last->mountpoint = r->mountpoint ? xstrdup(r->mountpoint) : NULL;
	last->source = r->source ? xstrdup(r->source) : NULL;
	last->fstype = r->fstype ? xstrdup(r->fstype) : NULL;
	last->backend = r->backend ? xstrdup(r->backend) : NULL;
	last->options = r->options ? xstrdup(r->options) : NULL;
	last->version = r->version ? xstrdup(r->version) : NULL;
	last->status = r->status ? xstrdup(r->status) : NULL;
}

/* The end of fs's last complete run (a full -x run if data), 0 if none. */
static int last_complete(struct state *s, const struct state_fs *fs, bool data, double *out)
{
	sqlite3_stmt *st;
	int rc;

	*out = 0;
	if (sqlite3_prepare_v2(s->db, "SELECT coalesce(max(ended), 0) FROM runs WHERE uuid = ?1 "
			       "AND fsroot = ?3 AND status = 'complete' AND "
			       "(?2 = 0 OR (verify_data AND NOT rescan))",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, fs->uuid);
	bind_text(st, 3, fs->fsroot);
	sqlite3_bind_int(st, 2, data);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_double(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : -EIO;
}

static void count_open(const struct state_finding *f, void *arg)
{
	struct state_summary *sum = arg;

	if (strcmp(f->severity, "error")) {
		sum->open_warnings++;
		return;
	}
	sum->open_errors++;
	/* What could not be read: the checks.h ids of read errors of data and device blocks. */
	if (!strcmp(f->check, CHECK_DATA_READ) || !strncmp(f->check, "media.", 6))
		sum->open_media_errors++;
}

static void count_event(const struct state_event *e, void *arg)
{
	struct state_summary *sum = arg;

	(void)e;
	sum->open_events++;
}

/*
 * The age of the last read of the regions with file data, as shares of
 * that data (STATE_AGE_* buckets); none before version 3.
 */
static int region_ages(struct state *s, const char *uuid, struct state_summary *sum)
{
	static const double limit[] = { 7 * 86400.0, 30 * 86400.0, 90 * 86400.0 };
	double total = 0, now = (double)time(NULL);
	sqlite3_stmt *st;
	int rc;

	if (s->version < 3)
		return 0;
	if (sqlite3_prepare_v2(s->db, "SELECT allocated, coalesce(verified, 0), length FROM "
			       "regions WHERE uuid = ?1 AND allocated > 0", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, uuid);
	sum->oldest_region = -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		double a = (double)sqlite3_column_int64(st, 0);
		double v = sqlite3_column_double(st, 1);
		int b = STATE_AGE_NEVER;

		if (v > 0)
			for (b = 0; b < STATE_AGE_OLDER && now - v >= limit[b]; b++)
				;
		sum->region_share[b] += a;
		total += a;
		sum->nr_regions++;
		sum->region_size = (uint64_t)sqlite3_column_int64(st, 2);
		if (sum->oldest_region < 0 || v < sum->oldest_region)
			sum->oldest_region = v;
	}
	sqlite3_finalize(st);
	for (int b = 0; b < STATE_AGE_BUCKETS && total > 0; b++)
		sum->region_share[b] /= total;
	if (sum->oldest_region < 0)
		sum->oldest_region = 0;
	return rc == SQLITE_DONE ? 0 : -EIO;
}

const char *state_age_name(int bucket)
{
	static const char *const name[STATE_AGE_BUCKETS] = {
		[STATE_AGE_7D] = "7d", [STATE_AGE_30D] = "30d", [STATE_AGE_90D] = "90d",
		[STATE_AGE_OLDER] = "older", [STATE_AGE_NEVER] = "never",
	};

	return name[bucket];
}

double state_data_coverage(const struct state_summary *sum)
{
	return sum->oldest_region > sum->last_data_verified ? sum->oldest_region :
	       sum->last_data_verified;
}

int state_region_size(struct state *s, const char *uuid, uint64_t want, bool force,
		      uint64_t *size)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, force ? "INSERT OR REPLACE INTO region_sizes VALUES (?1, ?2)"
			       : "INSERT OR IGNORE INTO region_sizes VALUES (?1, ?2)",
			       -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, uuid);
	bind_u64(st, 2, want);
	if (step_done(st) ||
	    sqlite3_prepare_v2(s->db, "SELECT size FROM region_sizes WHERE uuid = ?1", -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, uuid);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*size = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW && *size ? 0 : -EIO;
}

int state_region_times(struct state *s, const char *uuid, uint64_t size, size_t n,
		       double *verified, uint64_t *read_to)
{
	sqlite3_stmt *st;
	int rc;

	memset(verified, 0, n * sizeof(*verified));
	if (read_to)
		memset(read_to, 0, n * sizeof(*read_to));
	if (sqlite3_prepare_v2(s->db, "SELECT start, coalesce(verified, 0), read_to FROM regions "
			       "WHERE uuid = ?1 AND length = ?2", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, uuid);
	bind_u64(st, 2, size);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		/* size 0: buckets of files, by number (regions.h) */
		uint64_t i = (uint64_t)sqlite3_column_int64(st, 0) / (size ? size : 1);

		if (i < n)
			verified[i] = sqlite3_column_double(st, 1);
		if (i < n && read_to)
			read_to[i] = (uint64_t)sqlite3_column_int64(st, 2);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* One region's row: its file data now, its last read if read now, how far if in part. */
static int write_region(sqlite3_stmt *st, const char *uuid, uint64_t size, size_t i,
			uint64_t allocated, double when, int64_t run, uint64_t read_to,
			double now)
{
	bind_text(st, 1, uuid);
	bind_u64(st, 2, size ? (uint64_t)i * size : (uint64_t)i);
	bind_u64(st, 3, size);
	bind_u64(st, 4, allocated);
	if (when > 0)
		sqlite3_bind_double(st, 5, when);
	else
		sqlite3_bind_null(st, 5);
	sqlite3_bind_int64(st, 6, run);
	bind_u64(st, 7, read_to);
	if (read_to)
		sqlite3_bind_double(st, 8, now);
	else
		sqlite3_bind_null(st, 8);
	if (sqlite3_step(st) != SQLITE_DONE)
		return -EIO;
	sqlite3_reset(st);
	return 0;
}

int state_regions_write(struct state *s, const char *uuid, uint64_t size, size_t n,
			const uint64_t *allocated, const bool *read, const uint64_t *read_to,
			double when, int64_t run, struct strbuf *err)
{
	sqlite3_stmt *st = NULL;
	int ret = 0;

	if (exec(s, "BEGIN IMMEDIATE"))
		return fail(s, err, "cannot write the state database");
	/* Rows of another region size, or for data since freed, hold no data now. */
	if (sqlite3_prepare_v2(s->db, "UPDATE regions SET allocated = 0 WHERE uuid = ?1",
			       -1, &st, NULL) != SQLITE_OK)
		ret = -EIO;
	if (!ret) {
		bind_text(st, 1, uuid);
		ret = step_done(st);
		st = NULL;
	}
	/*
	 * A region read to its end: last read when its oldest part was (partial,
	 * of the same length), and no part any more; one read further in part:
	 * read_to, partial kept from its first part; else both as they were.
	 * (The right-hand sides all see the row as it was.)
	 */
	if (!ret && sqlite3_prepare_v2(s->db, "INSERT INTO regions (uuid, start, length, "
				       "allocated, verified, run, read_to, partial) VALUES (?1, ?2, ?3, "
				       "?4, ?5, ?6, ?7, ?8) "
				       "ON CONFLICT (uuid, start) DO UPDATE SET "
				       "allocated = excluded.allocated, "
				       "verified = CASE WHEN excluded.verified IS NOT NULL THEN "
				       "coalesce(CASE WHEN length = excluded.length THEN partial END, "
				       "excluded.verified) WHEN length = excluded.length THEN verified "
				       "END, "
				       "run = CASE WHEN excluded.verified IS NULL AND length = "
				       "excluded.length THEN run ELSE excluded.run END, "
				       "read_to = CASE WHEN excluded.verified IS NOT NULL THEN 0 "
				       "WHEN excluded.read_to > 0 THEN excluded.read_to "
				       "WHEN length = excluded.length THEN read_to ELSE 0 END, "
				       "partial = CASE WHEN excluded.verified IS NOT NULL THEN NULL "
				       "WHEN excluded.read_to > 0 THEN coalesce(CASE WHEN length = "
				       "excluded.length THEN partial END, excluded.partial) "
				       "WHEN length = excluded.length THEN partial END, "
				       "length = excluded.length", -1, &st, NULL) != SQLITE_OK)
		ret = -EIO;
	for (size_t i = 0; i < n && !ret; i++) {
		uint64_t to = read_to && !read[i] ? read_to[i] : 0;

		if (allocated[i] || read[i] || to)
			ret = write_region(st, uuid, size, i, allocated[i], read[i] ? when : 0, run,
					   to, when);
	}
	sqlite3_finalize(st);		/* a no-op on NULL */
	if (ret) {
		fail(s, err, "cannot record the regions read in the state database");
		exec(s, "ROLLBACK");
		return -EIO;
	}
	return exec(s, "COMMIT") ? fail(s, err, "cannot write the state database") : 0;
}

int state_summarise(struct state *s, const struct state_fs *fs, struct state_summary *sum)
{
	int ret;

	memset(sum, 0, sizeof(*sum));
	if ((ret = state_each_run(s, fs, 1, keep_last, &sum->last)) ||
	    (ret = last_complete(s, fs, false, &sum->last_complete)) ||
	    (ret = last_complete(s, fs, true, &sum->last_data_verified)) ||
	    (ret = state_each_event(s, fs, count_event, sum)) ||
	    (ret = region_ages(s, fs->uuid, sum)))
		return ret;
	return state_each_open(s, fs, count_open, sum);
}

void state_summary_release(struct state_summary *sum)
{
	state_run_release(&sum->last);
}

/*
 * The first complete run of the scope and every later one that ended:
 * open findings are theirs.  A later incomplete run did not look at
 * everything, so what the complete run found stays open, and what the
 * incomplete ones found is added.  A content finding is closed, too, by a
 * later complete --rescan-errors run that read its inode again (and
 * found it again if it is still there: then that run's finding is open).
 * max(f.run) picks the newest of the same finding (SQLite takes the bare
 * columns from that row).
 */
#define OPEN_SQL(SUBVOL, SAME_SUBVOL) \
	"WITH m AS (SELECT coalesce(max(id), 0) AS id FROM runs " \
	"           WHERE uuid = ?1 AND fsroot = ?2 AND status = 'complete'), " \
	"     d AS (SELECT coalesce(max(id), 0) AS id FROM runs " \
	"           WHERE uuid = ?1 AND fsroot = ?2 AND status = 'complete' AND verify_data " \
	"           AND NOT rescan) " \
	"SELECT max(f.run), f.severity, f.check_id, f.path, f.ino, f.offset, f.length, f.message, " \
	"       f.content, " SUBVOL " " \
	"FROM findings f JOIN runs r ON r.id = f.run, m, d " \
	"WHERE r.uuid = ?1 AND r.fsroot = ?2 AND r.status != 'running' AND f.severity IN ('error', 'warning') " \
	"  AND f.run >= CASE WHEN f.content THEN d.id ELSE m.id END " \
	"  AND NOT (f.content AND f.ino != 0 AND EXISTS (SELECT 1 FROM rescanned x " \
	"           JOIN runs rr ON rr.id = x.run WHERE rr.uuid = ?1 AND rr.fsroot = ?2 " \
	"           AND rr.status = 'complete' AND x.run > f.run AND x.ino = f.ino" SAME_SUBVOL ")) " \
	"GROUP BY f.severity, f.check_id, f.path, f.ino, f.offset " \
	"ORDER BY f.severity = 'warning', f.path, f.check_id, f.offset"

/* Version 4 keeps each finding's subvolume; before, there is none (NULL). */
static const char open_sql[] = OPEN_SQL("f.subvol", " AND x.subvol = f.subvol");
static const char open_sql_v3[] = OPEN_SQL("NULL", "");

struct file_list {
	struct subvol_ino *v;
	size_t n, alloc, unknown;
};

static void add_content_file(const struct state_finding *f, void *arg)
{
	struct file_list *l = arg;

	if (!f->content || !f->ino)
		return;
	if (!f->has_subvol) {
		l->unknown++;
		return;
	}
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? 2 * l->alloc : 16;
		l->v = xrealloc(l->v, l->alloc * sizeof(*l->v));
	}
	l->v[l->n++] = (struct subvol_ino){ .subvol = f->subvol, .ino = f->ino };
}

int state_open_content_files(struct state *s, const struct state_fs *fs,
			     struct subvol_ino **files, size_t *n, size_t *unknown)
{
	struct file_list l = { 0 };
	int ret = state_each_open(s, fs, add_content_file, &l);

	if (ret) {
		free(l.v);
		return ret;
	}
	*files = l.v;
	*n = l.n;
	*unknown = l.unknown;
	return 0;
}

int state_each_open(struct state *s, const struct state_fs *fs,
		    void (*fn)(const struct state_finding *f, void *arg), void *arg)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, s->version >= 4 ? open_sql : open_sql_v3, -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, fs->uuid);
	bind_text(st, 2, fs->fsroot);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct state_finding f = {
			.run = sqlite3_column_int64(st, 0),
			.severity = (const char *)sqlite3_column_text(st, 1),
			.check = (const char *)sqlite3_column_text(st, 2),
			.path = (const char *)sqlite3_column_text(st, 3),
			.ino = column_u64(st, 4),
			.has_range = sqlite3_column_type(st, 5) != SQLITE_NULL,
			.offset = column_u64(st, 5), .length = column_u64(st, 6),
			.message = (const char *)sqlite3_column_text(st, 7),
			.content = sqlite3_column_int(st, 8),
			.has_subvol = sqlite3_column_type(st, 9) != SQLITE_NULL,
			.subvol = column_u64(st, 9),
		};

		fn(&f, arg);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* --- fscrub watch's events (schema version 2) --- */

int state_add_event(struct state *s, const struct state_fs *fs, const struct state_event *e,
		    struct strbuf *err)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO events (uuid, fsroot, time, kind, errno, "
			       "error_count, ino, path, range_off, range_len) "
			       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
			       -1, &st, NULL) != SQLITE_OK)
		return fail(s, err, "cannot write the event to the state database");
	bind_text(st, 1, fs->uuid);
	bind_text(st, 2, fs->fsroot);
	sqlite3_bind_double(st, 3, e->time);
	bind_text(st, 4, e->kind);
	sqlite3_bind_int(st, 5, e->error);
	bind_u64(st, 6, e->error_count);
	bind_u64(st, 7, e->ino);
	bind_text(st, 8, e->path);
	if (e->range_len) {
		bind_u64(st, 9, e->range_off);
		bind_u64(st, 10, e->range_len);
	}
	if (step_done(st))
		return fail(s, err, "cannot write the event to the state database");
	return 0;
}

/*
 * Open: not after the start of the last complete run.  A run that began
 * before the event may have passed the damaged object already, so only a
 * complete run that started after it answers it (the one in progress when
 * the event came does not).
 */
#define EVENTS_SQL(range) \
	"SELECT time, kind, errno, error_count, ino, path" range " FROM events " \
	"WHERE uuid = ?1 AND fsroot = ?2 AND time >= (SELECT coalesce(max(started), 0) " \
	"      FROM runs WHERE uuid = ?1 AND fsroot = ?2 AND status = 'complete') " \
	"ORDER BY time"
static const char events_sql[] = EVENTS_SQL(", range_off, range_len");
/* Before version 8: no ranges. */
static const char events_sql_v7[] = EVENTS_SQL(", 0, 0");

int state_each_event(struct state *s, const struct state_fs *fs,
		     void (*fn)(const struct state_event *e, void *arg), void *arg)
{
	sqlite3_stmt *st;
	int rc;

	/* A version 1 database, read by status before any watcher wrote it: no events. */
	if (s->version < 2)
		return 0;
	if (sqlite3_prepare_v2(s->db, s->version >= 8 ? events_sql : events_sql_v7, -1, &st,
			       NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, fs->uuid);
	bind_text(st, 2, fs->fsroot);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct state_event e = {
			.time = sqlite3_column_double(st, 0),
			.kind = (const char *)sqlite3_column_text(st, 1),
			.error = sqlite3_column_int(st, 2),
			.error_count = column_u64(st, 3),
			.ino = column_u64(st, 4),
			.path = (const char *)sqlite3_column_text(st, 5),
			.range_off = column_u64(st, 6),
			.range_len = column_u64(st, 7),
		};

		fn(&e, arg);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

/* --- checkpoints of stopped runs (schema version 5) --- */

int state_checkpoint_save(struct state *s, const struct state_fs *fs,
			  const struct state_checkpoint *cp, struct strbuf *err)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO checkpoints (uuid, fsroot, run, "
			       "saved, options, phase, cursor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
			       -1, &st, NULL) != SQLITE_OK)
		return fail(s, err, "cannot write the checkpoint to the state database");
	bind_text(st, 1, fs->uuid);
	bind_text(st, 2, fs->fsroot);
	sqlite3_bind_int64(st, 3, cp->run);
	sqlite3_bind_double(st, 4, cp->saved);
	bind_text(st, 5, cp->options ? cp->options : "");
	sqlite3_bind_int(st, 6, cp->phase);
	bind_text(st, 7, cp->cursor);
	if (step_done(st))
		return fail(s, err, "cannot write the checkpoint to the state database");
	return 0;
}

int state_checkpoint_load(struct state *s, const struct state_fs *fs,
			  struct state_checkpoint *cp)
{
	sqlite3_stmt *st;
	int rc;

	memset(cp, 0, sizeof(*cp));
	if (s->version < 5)
		return -ENOENT;
	if (sqlite3_prepare_v2(s->db, "SELECT run, saved, options, phase, cursor FROM checkpoints "
			       "WHERE uuid = ?1 AND fsroot = ?2", -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	bind_text(st, 1, fs->uuid);
	bind_text(st, 2, fs->fsroot);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*cp = (struct state_checkpoint){
			.run = sqlite3_column_int64(st, 0), .saved = sqlite3_column_double(st, 1),
			.options = column_dup(st, 2), .phase = sqlite3_column_int(st, 3),
			.cursor = column_dup(st, 4),
		};
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : -EIO;
}

int state_checkpoint_delete(struct state *s, const struct state_fs *fs, struct strbuf *err)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(s->db, "DELETE FROM checkpoints WHERE uuid = ?1 AND fsroot = ?2",
			       -1, &st, NULL) != SQLITE_OK)
		return fail(s, err, "cannot delete the checkpoint from the state database");
	bind_text(st, 1, fs->uuid);
	bind_text(st, 2, fs->fsroot);
	if (step_done(st))
		return fail(s, err, "cannot delete the checkpoint from the state database");
	return 0;
}

void state_checkpoint_release(struct state_checkpoint *cp)
{
	free(cp->options);
	free(cp->cursor);
	memset(cp, 0, sizeof(*cp));
}
