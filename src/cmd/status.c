/*
 * status: the status subcommand; see subcmd.h.  Filesystems are named as
 * for a scan (a mount point or a mounted device) and found in the store
 * by their UUID and the mount's root in them, as the scan recorded them;
 * without one, every filesystem in the store is shown, most recently
 * scrubbed first.
 */
#include "cmd/subcmd.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report/advice.h"
#include "data/ledger_store.h"
#include "lib/mountpoint.h"
#include "lib/jsonfmt.h"
#include "lib/names.h"
#include "report/report.h"
#include "store/state.h"
#include "lib/strbuf.h"

/* Overdue after this many days without a complete run (-x run for data). */
#define DEFAULT_OVERDUE_META_DAYS 7
#define DEFAULT_OVERDUE_DATA_DAYS 30
/* Far enough to mean "never" and still fit a 32-bit day count. */
#define MAX_DAYS 100000
#define DAY 86400.0

enum { OPT_JSON = 256, OPT_HISTORY, OPT_OVERDUE, OPT_STATE_DIR };

static const struct option long_options[] = {
	{ "help",	no_argument,	   NULL, 'h' },
	{ "json",	no_argument,	   NULL, OPT_JSON },
	{ "history",	required_argument, NULL, OPT_HISTORY },
	{ "overdue",	required_argument, NULL, OPT_OVERDUE },
	{ "state-dir",	required_argument, NULL, OPT_STATE_DIR },
	{ NULL, 0, NULL, 0 },
};

struct status {
	struct state *state;
	bool json;
	unsigned history;
	unsigned meta_days, data_days;
	double now;
	json_object *list;		/* --json: the "filesystems" array */
	int code;
};

static void usage(FILE *f)
{
	fputs("Usage: fscrub status [OPTIONS] [MOUNTPOINT...]\n"
	      "\n"
	      "Show what the recorded runs say about each filesystem (all recorded ones\n"
	      "without MOUNTPOINT): the last run, the findings still open and the files\n"
	      "to restore from a backup, when the data was last verified (-x) and what\n"
	      "is overdue.  Nothing is checked.\n"
	      "\n"
	      "Options:\n"
	      "  -h, --help             show this help and exit\n"
	      "      --json             print JSON (schema: fscrub(8), STATUS)\n"
	      "      --history N        list the last N runs too\n"
	      "      --overdue M[,D]    overdue after M days without a complete run,\n"
	      "                         D without a complete -x run (default 7,30;\n"
	      "                         one number sets both)\n"
	      "      --state-dir DIR    read DIR/state.sqlite (default /var/lib/fscrub)\n"
	      "\n"
	      "Exit status: 0 no open errors, 4 open errors or watch events,\n"
	      "8 operational error,\n"
	      "16 usage error.  See fscrub(8).\n", f);
}

static int usage_error(const char *fmt, const char *arg)
{
	fputs("fscrub status: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'fscrub status --help' for more information.\n", stderr);
	return EXIT_USAGE;
}

static bool parse_days(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || (*end && *end != ',') || v == 0 || v > MAX_DAYS)
		return false;
	*out = (unsigned)v;
	return true;
}

static bool parse_overdue(const char *s, struct status *st)
{
	const char *comma = strchr(s, ',');

	if (!parse_days(s, &st->meta_days))
		return false;
	if (!comma) {
		st->data_days = st->meta_days;
		return true;
	}
	return parse_days(comma + 1, &st->data_days) && !strchr(comma + 1, ',');
}

json_object *status_json_time(double t)
{
	char buf[32];

	if (t <= 0)
		return NULL;
	iso8601_utc((time_t)t, buf, sizeof(buf));
	return json_object_new_string(buf);
}

static json_object *json_u64(unsigned long long v)
{
	return json_object_new_int64((int64_t)v);
}

json_object *status_run_json(const struct state_run *r)
{
	json_object *o = json_object_new_object();
	json_object *opt = r->options ? json_tokener_parse(r->options) : NULL;

	json_object_object_add(o, "id", json_object_new_int64(r->id));
	json_object_object_add(o, "started", status_json_time(r->started));
	json_object_object_add(o, "ended", status_json_time(r->ended));
	json_object_object_add(o, "duration",
			       r->ended > 0 ? json_object_new_double(r->ended - r->started) : NULL);
	json_object_object_add(o, "status", json_object_new_string(r->status ? r->status : ""));
	json_object_object_add(o, "exit_code",
			       r->exit_code >= 0 ? json_object_new_int(r->exit_code) : NULL);
	json_object_object_add(o, "verify_data", json_object_new_boolean(r->verify_data));
	json_object_object_add(o, "rescan", json_object_new_boolean(r->rescan));
	json_object_object_add(o, "since", json_object_new_boolean(r->since));
	json_object_object_add(o, "portion", json_object_new_boolean(r->portion));
	json_object_object_add(o, "backend", r->backend ? json_object_new_string(r->backend) : NULL);
	json_object_object_add(o, "mountpoint", json_escaped_string(r->mountpoint));
	json_object_object_add(o, "fscrub_version",
			       r->version ? json_object_new_string(r->version) : NULL);
	json_object_object_add(o, "options", opt);
	json_object_object_add(o, "errors", json_u64(r->errors));
	json_object_object_add(o, "warnings", json_u64(r->warnings));
	json_object_object_add(o, "infos", json_u64(r->infos));
	json_object_object_add(o, "unconfirmed", json_u64(r->unconfirmed));
	json_object_object_add(o, "repaired", json_u64(r->repaired));
	json_object_object_add(o, "operational_errors", json_u64(r->operational));
	json_object_object_add(o, "inodes", json_u64(r->inodes));
	json_object_object_add(o, "bytes_verified", json_u64(r->bytes_verified));
	json_object_object_add(o, "findings_not_recorded", json_u64(r->findings_dropped));
	return o;
}

static const char *plural(unsigned long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void run_text(const struct state_run *r, struct strbuf *sb)
{
	char when[32];

	/* "started": "last complete" below is the time a run ended. */
	iso8601_utc((time_t)r->started, when, sizeof(when));
	strbuf_addf(sb, "started %s, ", when);
	if (r->ended > 0)
		strbuf_addf(sb, "%.1f s, ", r->ended - r->started);
	bool running = r->status && !strcmp(r->status, "running");

	strbuf_addf(sb, "%s%s%s", r->status ? r->status : "?", running ? " (or interrupted)" : "",
		    r->rescan ? " (--rescan-errors)" : r->since ? " (-x --since)" :
		    r->portion ? " (-x, a share: --portion or --time-budget)" :
		    r->verify_data ? " (-x)" : "");
	if (!running)
		strbuf_addf(sb, ", exit %d: %llu %s, %llu %s", r->exit_code, r->errors,
			    plural(r->errors, "error", "errors"), r->warnings,
			    plural(r->warnings, "warning", "warnings"));
	if (!running && r->operational)
		strbuf_addf(sb, ", %llu %s", r->operational,
			    plural(r->operational, "operational error", "operational errors"));
	if (!running && r->unconfirmed)
		strbuf_addf(sb, ", %llu %s not be confirmed (the filesystem kept changing)",
			    r->unconfirmed, plural(r->unconfirmed, "finding could",
						   "findings could"));
}

struct open_out {
	json_object *list;
	struct strbuf *text;
};

static void open_finding(const struct state_finding *f, void *arg)
{
	struct open_out *o = arg;

	if (o->list) {
		json_object *j = json_object_new_object();

		json_object_object_add(j, "severity", json_object_new_string(f->severity));
		json_object_object_add(j, "check", json_object_new_string(f->check));
		json_object_object_add(j, "path", json_object_new_string(f->path ? f->path : ""));
		json_object_object_add(j, "inode", f->ino ? json_u64(f->ino) : NULL);
		json_object_object_add(j, "offset", f->has_range ? json_u64(f->offset) : NULL);
		json_object_object_add(j, "length", f->has_range ? json_u64(f->length) : NULL);
		json_object_object_add(j, "message",
				       json_object_new_string(f->message ? f->message : ""));
		json_object_object_add(j, "run", json_object_new_int64(f->run));
		json_object_array_add(o->list, j);
		return;
	}
	/* As the scan printed it (report.h), so the two can be compared. */
	strbuf_addf(o->text, "    %s: %s", !strcmp(f->severity, "error") ? "Error" : "Warning",
		    f->path ? f->path : "");
	if (f->ino)
		strbuf_addf(o->text, " (inode %llu)", (unsigned long long)f->ino);
	strbuf_addf(o->text, ": %s [%s]\n", f->message ? f->message : "", f->check);
}

/*
 * The files to restore from a backup: the open findings whose action is
 * restore (advice.h), one line or object per file.  Open findings come
 * ordered by path (state_each_open()), so a file's several findings (its
 * unreadable ranges, say) are neighbours and it is named once.
 */
struct restore_out {
	json_object *list;
	struct strbuf text;
	char *last;		/* the path last named */
	size_t n;
};

static void restore_file(const struct state_finding *f, void *arg)
{
	struct restore_out *o = arg;
	enum severity sev = !strcmp(f->severity, "error") ? SEV_ERROR : SEV_WARNING;

	if (advice_action(f->check, sev) != ADVICE_RESTORE || !f->path ||
	    (o->last && !strcmp(o->last, f->path)))
		return;
	free(o->last);
	o->last = xstrdup(f->path);
	o->n++;
	if (o->list) {
		json_object *j = json_object_new_object();

		json_object_object_add(j, "path", json_object_new_string(f->path));
		json_object_object_add(j, "inode", f->ino ? json_u64(f->ino) : NULL);
		json_object_object_add(j, "check", json_object_new_string(f->check));
		json_object_array_add(o->list, j);
		return;
	}
	strbuf_addf(&o->text, "    %s", f->path);
	if (f->ino)
		strbuf_addf(&o->text, " (inode %llu)", (unsigned long long)f->ino);
	strbuf_addf(&o->text, " [%s]\n", f->check);
}

static void restore_out_release(struct restore_out *o)
{
	strbuf_release(&o->text);
	free(o->last);
}

/* "to restore:" and the files, if any. */
static int restore_text(struct status *st, const struct state_fs *fs, struct strbuf *sb)
{
	struct restore_out o = { .text = STRBUF_INIT };
	int ret = state_each_open(st->state, fs, restore_file, &o);

	if (!ret && o.n)
		strbuf_addf(sb, "  to restore:    %zu %s from a backup:\n%s", o.n,
			    plural(o.n, "file", "files"), o.text.buf);
	restore_out_release(&o);
	return ret;
}

/* One of fscrub watch's events, as its log line says it. */
static void open_event(const struct state_event *e, void *arg)
{
	struct open_out *o = arg;
	char when[32];

	if (o->list) {
		json_object *j = json_object_new_object();

		json_object_object_add(j, "time", status_json_time(e->time));
		json_object_object_add(j, "kind", json_object_new_string(e->kind ? e->kind : ""));
		json_object_object_add(j, "errno", e->error ? json_object_new_int(e->error) : NULL);
		json_object_object_add(j, "error", e->error ?
				       json_object_new_string(strerror(e->error)) : NULL);
		json_object_object_add(j, "error_count", json_u64(e->error_count));
		json_object_object_add(j, "inode", e->ino ? json_u64(e->ino) : NULL);
		json_object_object_add(j, "path", json_escaped_string(e->path));
		json_object_object_add(j, "offset", e->range_len ? json_u64(e->range_off) : NULL);
		json_object_object_add(j, "length", e->range_len ? json_u64(e->range_len) : NULL);
		json_object_array_add(o->list, j);
		return;
	}
	iso8601_utc((time_t)e->time, when, sizeof(when));
	strbuf_addf(o->text, "    %s %s", when, e->kind ? e->kind : "?");
	if (e->error)
		strbuf_addf(o->text, ": %s (errno %d)", strerror(e->error), e->error);
	if (e->ino)
		strbuf_addf(o->text, ", inode %llu", (unsigned long long)e->ino);
	if (e->path) {
		strbuf_addstr(o->text, ", ");
		names_escape(o->text, e->path, strlen(e->path));
	}
	if (e->range_len)
		strbuf_addf(o->text, ", bytes %llu-%llu", (unsigned long long)e->range_off,
			    (unsigned long long)(e->range_off + e->range_len - 1));
	strbuf_addch(o->text, '\n');
}

static void history_run(const struct state_run *r, void *arg)
{
	struct open_out *o = arg;

	if (o->list) {
		json_object_array_add(o->list, status_run_json(r));
		return;
	}
	strbuf_addf(o->text, "    #%lld ", (long long)r->id);
	run_text(r, o->text);
	strbuf_addch(o->text, '\n');
}

static bool overdue(const struct status *st, double last, unsigned days)
{
	return last <= 0 || st->now - last > days * DAY;
}

/* what: the line's label; ended: last is the end of a run (said, as "last run" says its start). */
static void since_text(const struct status *st, struct strbuf *sb, const char *what,
		       bool ended, double last, unsigned days)
{
	char when[32];

	strbuf_addf(sb, "  %-15s", what);
	if (last > 0) {
		iso8601_utc((time_t)last, when, sizeof(when));
		strbuf_addf(sb, "%s%s (%.1f days ago)", ended ? "ended " : "", when,
			    (st->now - last) / DAY);
	} else {
		strbuf_addstr(sb, "never");
	}
	if (overdue(st, last, days))
		strbuf_addf(sb, ", overdue (every %u days)", days);
	strbuf_addch(sb, '\n');
}

/*
 * Why "open" is not the last run's count: open findings are counted once
 * per check and object (path, inode, offset), over the last complete run
 * and the runs after it (state.h), and a run keeps at most
 * STATE_MAX_FINDINGS of its findings.
 */
static void open_differs_text(const struct state_summary *sum, struct strbuf *sb)
{
	const struct state_run *r = &sum->last;

	if (!r->id || (r->status && !strcmp(r->status, "running")) ||
	    (r->errors == sum->open_errors && r->warnings == sum->open_warnings))
		return;
	strbuf_addf(sb, " (the last run reported %llu %s, %llu %s: each finding is counted once "
		    "by check and object, over the last complete run and those after it",
		    r->errors, plural(r->errors, "error", "errors"), r->warnings,
		    plural(r->warnings, "warning", "warnings"));
	if (r->findings_dropped)
		strbuf_addf(sb, "; %llu of its findings were not recorded", r->findings_dropped);
	strbuf_addch(sb, ')');
}

static void regions_text(const struct state_summary *sum, struct strbuf *sb)
{
	static const char *const what[STATE_AGE_BUCKETS] = {
		"< 7 days", "< 30 days", "< 90 days", "older", "never",
	};

	if (!sum->nr_regions)
		return;
	if (sum->region_size)
		strbuf_addf(sb, "  data regions:  %zu %s of %llu MiB, by the age of their last "
			    "read:", sum->nr_regions, plural(sum->nr_regions, "region", "regions"),
			    (unsigned long long)(sum->region_size >> 20));
	else	/* buckets of files (regions.h) */
		strbuf_addf(sb, "  data buckets:  %zu buckets of files, by the age of their last "
			    "read:", sum->nr_regions);
	for (int b = 0; b < STATE_AGE_BUCKETS; b++)
		strbuf_addf(sb, "%s %.0f%% %s", b ? "," : "", 100 * sum->region_share[b], what[b]);
	strbuf_addch(sb, '\n');
}

static int show_text(struct status *st, const struct state_fs *fs, const char *name,
		     const struct state_summary *sum)
{
	struct strbuf sb = STRBUF_INIT, esc = STRBUF_INIT;
	struct open_out o = { .text = &sb };
	int ret = 0;

	names_escape(&esc, name, strlen(name));
	strbuf_addf(&sb, "%s (%s, %s", esc.buf,
		    sum->last.fstype ? sum->last.fstype : "unknown type", fs->uuid);
	if (strcmp(fs->fsroot, "/")) {
		strbuf_addstr(&sb, ", root ");
		names_escape(&sb, fs->fsroot, strlen(fs->fsroot));
	}
	strbuf_addstr(&sb, "):\n");
	strbuf_addstr(&sb, "  last run:      ");
	if (sum->last.id)
		run_text(&sum->last, &sb);
	else
		strbuf_addstr(&sb, "none recorded");
	strbuf_addch(&sb, '\n');
	since_text(st, &sb, "last complete:", true, sum->last_complete, st->meta_days);
	since_text(st, &sb, "data verified:", false, state_data_coverage(sum), st->data_days);
	regions_text(sum, &sb);
	strbuf_addf(&sb, "  open:          %llu %s, %llu %s", sum->open_errors,
		    plural(sum->open_errors, "error", "errors"), sum->open_warnings,
		    plural(sum->open_warnings, "warning", "warnings"));
	open_differs_text(sum, &sb);
	strbuf_addch(&sb, '\n');
	if (st->state && sum->open_errors + sum->open_warnings)
		ret = state_each_open(st->state, fs, open_finding, &o);
	if (!ret && st->state && sum->open_errors + sum->open_warnings)
		ret = restore_text(st, fs, &sb);
	if (!ret && st->state && sum->open_events) {
		strbuf_addf(&sb, "  watch events:  %llu since the last complete run began\n",
			    sum->open_events);
		ret = state_each_event(st->state, fs, open_event, &o);
	}
	if (!ret && st->state && st->history) {
		strbuf_addstr(&sb, "  history:\n");
		ret = state_each_run(st->state, fs, st->history, history_run, &o);
	}
	fputs(sb.buf, stdout);
	strbuf_release(&sb);
	strbuf_release(&esc);
	return ret;
}

/* The regions' age histogram, or null when no -x run recorded them. */
static json_object *regions_json(const struct state_summary *sum)
{
	json_object *o, *share;

	if (!sum->nr_regions)
		return NULL;
	o = json_object_new_object();
	share = json_object_new_object();
	json_object_object_add(o, "count", json_u64(sum->nr_regions));
	json_object_object_add(o, "size", json_u64(sum->region_size));
	for (int b = 0; b < STATE_AGE_BUCKETS; b++)
		json_object_object_add(share, state_age_name(b),
				       json_object_new_double(sum->region_share[b]));
	json_object_object_add(o, "verified_share", share);
	json_object_object_add(o, "oldest_verified", status_json_time(sum->oldest_region));
	return o;
}

/* "restore": the files to restore from a backup ([] if none). */
static int restore_json(struct status *st, const struct state_fs *key, json_object *fs)
{
	struct restore_out o = { .list = json_object_new_array(), .text = STRBUF_INIT };
	int ret = st->state ? state_each_open(st->state, key, restore_file, &o) : 0;

	json_object_object_add(fs, "restore", o.list);
	restore_out_release(&o);
	return ret;
}

static int show_json(struct status *st, const struct state_fs *key, const char *name,
		     const struct state_summary *sum)
{
	json_object *fs = json_object_new_object(), *od = json_object_new_object();
	struct open_out o = { .list = json_object_new_array() };
	int ret;

	json_object_object_add(fs, "uuid", json_object_new_string(key->uuid));
	json_object_object_add(fs, "fsroot", json_escaped_string(key->fsroot));
	json_object_object_add(fs, "mountpoint", json_escaped_string(name));
	json_object_object_add(fs, "type", sum->last.fstype ?
			       json_object_new_string(sum->last.fstype) : NULL);
	json_object_object_add(fs, "last_run", sum->last.id ? status_run_json(&sum->last) : NULL);
	json_object_object_add(fs, "last_complete", status_json_time(sum->last_complete));
	json_object_object_add(fs, "last_data_verified", status_json_time(sum->last_data_verified));
	json_object_object_add(od, "metadata", json_object_new_boolean(
				       overdue(st, sum->last_complete, st->meta_days)));
	json_object_object_add(fs, "data_coverage", status_json_time(state_data_coverage(sum)));
	json_object_object_add(fs, "regions", regions_json(sum));
	json_object_object_add(od, "data", json_object_new_boolean(
				       overdue(st, state_data_coverage(sum), st->data_days)));
	json_object_object_add(fs, "overdue", od);
	json_object_object_add(fs, "open_errors", json_u64(sum->open_errors));
	json_object_object_add(fs, "open_warnings", json_u64(sum->open_warnings));
	ret = st->state ? state_each_open(st->state, key, open_finding, &o) : 0;
	json_object_object_add(fs, "open_findings", o.list);
	ret = ret ? ret : restore_json(st, key, fs);
	json_object_object_add(fs, "open_events", json_u64(sum->open_events));
	o.list = json_object_new_array();
	if (!ret && st->state)
		ret = state_each_event(st->state, key, open_event, &o);
	json_object_object_add(fs, "events", o.list);
	if (!ret && st->state && st->history) {
		o.list = json_object_new_array();
		ret = state_each_run(st->state, key, st->history, history_run, &o);
		json_object_object_add(fs, "history", o.list);
	}
	json_object_array_add(st->list, fs);
	return ret;
}

/* One filesystem; name is what to call it (the argument, or the last run's mount point). */
static void show(struct status *st, const struct state_fs *fs, const char *name)
{
	struct state_summary sum = { 0 };
	int ret = st->state ? state_summarise(st->state, fs, &sum) : 0;

	if (!ret && !name)
		name = sum.last.mountpoint ? sum.last.mountpoint : fs->uuid;
	if (!ret)
		ret = st->json ? show_json(st, fs, name, &sum) : show_text(st, fs, name, &sum);
	if (ret) {
		fprintf(stderr, "fscrub status: cannot read the state database '%s'\n",
			state_path(st->state));
		st->code |= EXIT_OPERATIONAL;
	}
	/* An error the kernel reported and no complete run answered yet is open too. */
	if (sum.open_errors || sum.open_events)
		st->code |= EXIT_UNCORRECTED;
	state_summary_release(&sum);
}

static void show_fs(const struct state_fs *fs, void *arg)
{
	show(arg, fs, NULL);
}

int status_fs_key(const char *arg, struct mount_info *mi, char *uuid, size_t len,
		  struct strbuf *err)
{
	int fd, ret = mount_resolve(arg, NULL, mi, err);

	if (ret)
		return ret;
	if ((fd = open(mi->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		strbuf_addf(err, "cannot open '%s': %s", mi->target, strerror(errno));
		return EXIT_OPERATIONAL;
	}
	fs_identity(fd, uuid, len);
	close(fd);
	if (!mi->fsroot)
		mi->fsroot = xstrdup("/");
	return 0;
}

/* A filesystem named as the scan names it: status_fs_key(). */
static void show_arg(struct status *st, const char *arg)
{
	struct mount_info mi = { 0 };
	struct strbuf err = STRBUF_INIT;
	char uuid[48];
	int ret = status_fs_key(arg, &mi, uuid, sizeof(uuid), &err);

	if (ret) {
		fprintf(stderr, "fscrub status: %s\n", err.buf);
		st->code |= ret;
	} else {
		struct state_fs fs = { .uuid = uuid, .fsroot = mi.fsroot };

		show(st, &fs, mi.target);
	}
	mount_info_release(&mi);
	strbuf_release(&err);
}

static int parse(int argc, char **argv, struct status *st, const char **dir)
{
	unsigned long v;
	char *end;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return EXIT_CLEAN;
		case OPT_JSON:
			st->json = true;
			break;
		case OPT_HISTORY:
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || *optarg == '-' || v == 0 || v > 1000000)
				return usage_error("--history needs a number of runs, not '%s'",
						   optarg);
			st->history = (unsigned)v;
			break;
		case OPT_OVERDUE:
			if (!parse_overdue(optarg, st))
				return usage_error("--overdue needs DAYS or METADATA_DAYS,DATA_DAYS, "
						   "not '%s'", optarg);
			break;
		case OPT_STATE_DIR:
			*dir = optarg;
			break;
		default:
			if (optopt == OPT_HISTORY || optopt == OPT_OVERDUE || optopt == OPT_STATE_DIR)
				return usage_error("option %s needs an argument", argv[optind - 1]);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	return -1;
}

static int open_store(struct status *st, const char *dir)
{
	struct strbuf err = STRBUF_INIT;
	int ret = state_open(&st->state, dir, false, &err);

	if (ret == -ENOENT) {
		/* No run recorded yet: every filesystem named is "never". */
		st->state = NULL;
		ret = 0;
	} else if (ret) {
		fprintf(stderr, "fscrub status: %s\n", err.buf);
	}
	strbuf_release(&err);
	return ret;
}

int cmd_status(int argc, char **argv)
{
	struct status st = {
		.meta_days = DEFAULT_OVERDUE_META_DAYS, .data_days = DEFAULT_OVERDUE_DATA_DAYS,
	};
	const char *dir = state_default_dir();
	struct timespec now;
	int ret = parse(argc, argv, &st, &dir);

	if (ret >= 0)
		return ret;
	if (open_store(&st, dir))
		return EXIT_OPERATIONAL;
	clock_gettime(CLOCK_REALTIME, &now);
	st.now = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
	if (st.json)
		st.list = json_object_new_array();
	if (optind < argc)
		for (int i = optind; i < argc; i++)
			show_arg(&st, argv[i]);
	else if (st.state && state_each_fs(st.state, show_fs, &st))
		st.code |= EXIT_OPERATIONAL;
	if (st.json) {
		json_object *top = json_object_new_object();

		json_object_object_add(top, "fscrub_version", json_object_new_string(FSCRUB_VERSION));
		json_object_object_add(top, "now", status_json_time(st.now));
		json_object_object_add(top, "filesystems", st.list);
		puts(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(top);
	} else if (optind == argc && !st.state) {
		printf("No run recorded in %s.\n", dir);
	}
	state_close(st.state);
	if (fflush(stdout) != 0)
		st.code |= EXIT_OPERATIONAL;
	return st.code;
}
