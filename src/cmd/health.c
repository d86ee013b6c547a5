/*
 * health: fscrub health [--json] [-v] [MOUNTPOINT...]
 *
 * For each filesystem (those named, or every mounted one whose backend has
 * a health hook: ext4, XFS and btrfs), read what the kernel already knows
 * of its health through that hook (backends/health.h: ext4's superblock
 * error record, XFS's sick flags, btrfs's device error counters) and
 * print it, as text or as one JSON object, with what the
 * run history (state.h) says of the filesystem's last scan: read-only, by
 * the key status uses (status_fs_key()).  Nothing is scanned: the answer
 * takes well under a second.  Exit status: 0 all healthy (or no health
 * source), 4 something sick -- the kernel's flags, or open errors or watch
 * events in the history, as fscrub status counts them -- 8 a source or the
 * history could not be read, 16 usage; added together like fsck(8)'s.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "backends/health.h"
#include "lib/fsmounts.h"
#include "lib/mountpoint.h"
#include "report/report.h"
#include "store/state.h"
#include "cmd/subcmd.h"

struct health_opts {
	bool json;
	bool verbose;
	const char *state_dir;
	struct state *state;		/* NULL: no database yet */
};

static json_object *last_scan_json(const struct state_fs *fs, const struct state_summary *sum)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "uuid", json_object_new_string(fs->uuid));
	json_object_object_add(o, "fsroot", json_object_new_string(fs->fsroot));
	json_object_object_add(o, "run", sum->last.id ? status_run_json(&sum->last) : NULL);
	json_object_object_add(o, "last_complete", status_json_time(sum->last_complete));
	json_object_object_add(o, "last_data_verified",
			       status_json_time(sum->last_data_verified));
	json_object_object_add(o, "open_errors", json_object_new_int64((int64_t)sum->open_errors));
	json_object_object_add(o, "open_warnings",
			       json_object_new_int64((int64_t)sum->open_warnings));
	json_object_object_add(o, "open_events", json_object_new_int64((int64_t)sum->open_events));
	return o;
}

static void last_scan_text(struct health *h, const struct state_summary *sum)
{
	struct strbuf sb = STRBUF_INIT;
	const struct state_run *r = &sum->last;
	char when[32];
	time_t t = (time_t)r->started;
	struct tm tm;

	if (r->id) {
		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		strbuf_addf(&sb, "%s, %s", when, r->status ? r->status : "?");
		if (r->ended > 0)
			strbuf_addf(&sb, ", exit %d", r->exit_code);
	} else {
		strbuf_addstr(&sb, "none recorded");
	}
	health_line(h, "last scan: %s; open: %llu errors, %llu warnings, %llu watch events",
		    sb.buf, sum->open_errors, sum->open_warnings, sum->open_events);
	if (sum->open_errors || sum->open_events)
		health_problem(h, "the run history has %llu open errors and %llu watch events "
			       "(fscrub status)", sum->open_errors, sum->open_events);
	strbuf_release(&sb);
}

/*
 * The run history's record of m: its last scan and what is open, as
 * status says it; into the text (and h->sick when errors are open) and
 * *out (NULL: no run and no event recorded).  0, or an exit code.
 */
static int health_last_scan(struct health *h, const struct health_opts *o, json_object **out)
{
	struct mount_info mi = { 0 };
	struct strbuf err = STRBUF_INIT;
	struct state_summary sum = { 0 };
	char uuid[48];
	int ret = status_fs_key(h->m->target, &mi, uuid, sizeof(uuid), &err);
	struct state_fs fs = { .uuid = uuid, .fsroot = mi.fsroot };

	*out = NULL;
	if (ret)
		fprintf(stderr, "fscrub health: %s: no last scan: %s\n", h->m->target, err.buf);
	else if (o->state && state_summarise(o->state, &fs, &sum))
		ret = EXIT_OPERATIONAL;
	if (ret == EXIT_OPERATIONAL && !err.len)
		fprintf(stderr, "fscrub health: cannot read the state database '%s'\n",
			state_path(o->state));
	if (!ret) {
		last_scan_text(h, &sum);
		if (sum.last.id || sum.open_events)
			*out = last_scan_json(&fs, &sum);
	}
	state_summary_release(&sum);
	mount_info_release(&mi);
	strbuf_release(&err);
	return ret ? EXIT_OPERATIONAL : 0;
}

/* Read h->m's source through its backend's health hook: 0, or a negative errno. */
static int read_source(struct health *h)
{
	const struct scrub_ops *b = backend_of_fstype(h->m->fstype);

	return b && b->health ? b->health(h) : 0;
}

static const char *status_of(const struct health *h, int err)
{
	if (err)
		return "unknown";
	if (!h->source)
		return "no health source";
	return h->sick ? "sick" : "healthy";
}

static void print_text(const struct health *h, int err)
{
	printf("%s: %s on %s: %s", h->m->target, h->m->fstype, h->m->source, status_of(h, err));
	if (h->source)
		printf(" (%s)", h->source);
	putchar('\n');
	fputs(h->text.buf, stdout);
}

static json_object *to_json(struct health *h, int err, json_object *last_scan)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "mountpoint", json_object_new_string(h->m->target));
	json_object_object_add(o, "source", json_object_new_string(h->m->source));
	json_object_object_add(o, "type", json_object_new_string(h->m->fstype));
	json_object_object_add(o, "status", json_object_new_string(status_of(h, err)));
	json_object_object_add(o, "health_source",
			       h->source ? json_object_new_string(h->source) : NULL);
	json_object_object_add(o, "error", err ? json_object_new_string(strerror(-err)) : NULL);
	json_object_object_add(o, "problems", json_object_get(h->problems));
	json_object_object_add(o, "detail", json_object_get(h->detail));
	json_object_object_add(o, "last_scan", last_scan);
	return o;
}

/* One filesystem: its exit status bits. */
static int one(const struct fsmount *m, const struct health_opts *o, json_object *arr)
{
	struct health h;
	json_object *last;
	int err, code;

	health_init(&h, m);
	err = read_source(&h);
	code = health_last_scan(&h, o, &last);
	if (err && !o->json)
		fprintf(stderr, "fscrub health: %s: cannot read its health: %s\n", m->target,
			strerror(-err));
	if (o->json) {
		json_object_array_add(arr, to_json(&h, err, last));
	} else {
		print_text(&h, err);
		json_object_put(last);	/* only the JSON holds it (the text has its own line) */
	}
	code |= (err ? EXIT_OPERATIONAL : 0) | (h.sick ? EXIT_UNCORRECTED : 0);
	health_release(&h);
	return code;
}

static void usage(FILE *f)
{
	fputs("Usage: fscrub health [--json] [-v] [--state-dir DIR] [MOUNTPOINT|DEVICE...]\n"
	      "\n"
	      "Print what the kernel knows of each filesystem's health, and the last\n"
	      "scan's result from the run history, without scanning (default: every\n"
	      "mounted ext4, XFS and btrfs filesystem).\n"
	      "\n"
	      "  -h, --help             show this help and exit\n"
	      "  -v, --verbose          say which run history is read\n"
	      "      --json             one JSON object on standard output\n"
	      "      --state-dir DIR    read DIR/state.sqlite (default /var/lib/fscrub)\n"
	      "\n"
	      "Exit status: 0 healthy, 4 sick (or open errors or watch events in the\n"
	      "run history), 8 health or history unreadable, 16 usage error.\n", f);
}

static int parse(int argc, char **argv, struct health_opts *o)
{
	static const struct option longs[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'J' },
		{ "state-dir", required_argument, NULL, 'S' },
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
		case 'J':
			o->json = true;
			break;
		case 'S':
			o->state_dir = optarg;
			break;
		default:
			fprintf(stderr, "fscrub health: %s '%s'\n"
				"Try 'fscrub health --help' for more information.\n",
				optopt == 'S' ? "option needs an argument:" : "unknown option",
				argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	return -1;
}

/* Read-only; a database not made yet is no run recorded.  0, or an exit code. */
static int open_store(struct health_opts *o)
{
	struct strbuf err = STRBUF_INIT;
	int ret = state_open(&o->state, o->state_dir, false, &err);

	if (ret == -ENOENT) {
		o->state = NULL;
		ret = 0;
	} else if (ret) {
		fprintf(stderr, "fscrub health: %s\n", err.buf);
	}
	if (o->verbose && !ret)
		fprintf(stderr, "fscrub health: run history: %s/%s%s\n", o->state_dir,
			STATE_DB_NAME, o->state ? "" : " (none yet: no scan recorded)");
	strbuf_release(&err);
	return ret ? EXIT_OPERATIONAL : 0;
}

int cmd_health(int argc, char **argv)
{
	struct health_opts o = { .state_dir = state_default_dir() };
	struct fsmount_list list;
	json_object *top, *arr = NULL;
	int code = 0, ret;

	if ((ret = parse(argc, argv, &o)) >= 0)
		return ret;
	if ((ret = fsmounts_collect("health", argv + optind, argc - optind, backend_has_health,
				    &list)))
		return ret;
	code = open_store(&o);
	if (o.json)
		arr = json_object_new_array();
	for (size_t i = 0; i < list.nr; i++)
		code |= one(&list.v[i], &o, arr);
	if (o.json) {
		top = json_object_new_object();
		json_object_object_add(top, "fscrub_version", json_object_new_string(FSCRUB_VERSION));
		json_object_object_add(top, "filesystems", arr);
		json_object_object_add(top, "exit_code", json_object_new_int(code));
		puts(json_object_to_json_string_ext(top, JSON_C_TO_STRING_PRETTY |
						    JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(top);
	}
	fsmounts_release(&list);
	state_close(o.state);
	if (fflush(stdout) != 0)
		code |= EXIT_OPERATIONAL;
	return code;
}
