/*
 * cmd_health: fscrub health [--json] [-v] [MOUNTPOINT...]
 *
 * For each filesystem (those named, or every mounted ext4, XFS and btrfs),
 * read what the kernel already knows of its health (health.h: ext4's
 * superblock error record, XFS's sick flags, btrfs's device error
 * counters) and print it, as text or as one JSON object.  Nothing is
 * scanned: the answer takes well under a second.  Exit status: 0 all
 * healthy (or no health source), 4 something sick, 8 a source could not
 * be read, 16 usage; added together like fsck(8)'s.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fsmounts.h"
#include "health.h"
#include "report.h"
#include "subcmd.h"

struct health_opts {
	bool json;
	bool verbose;
};

void health_init(struct health *h, const struct fsmount *m)
{
	memset(h, 0, sizeof(*h));
	h->m = m;
	strbuf_init(&h->text);
	h->problems = json_object_new_array();
	h->detail = json_object_new_object();
}

void health_release(struct health *h)
{
	strbuf_release(&h->text);
	json_object_put(h->problems);
	json_object_put(h->detail);
}

static void add_line(struct health *h, const char *prefix, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_vaddf(&sb, fmt, ap);
	strbuf_addf(&h->text, "  %s%s\n", prefix, sb.buf);
	if (*prefix)
		json_object_array_add(h->problems, json_object_new_string(sb.buf));
	strbuf_release(&sb);
}

void health_problem(struct health *h, const char *fmt, ...)
{
	va_list ap;

	h->sick = true;
	va_start(ap, fmt);
	add_line(h, "problem: ", fmt, ap);
	va_end(ap);
}

void health_line(struct health *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_line(h, "", fmt, ap);
	va_end(ap);
}

/*
 * The state store's record of the last scan of m (issue 23), once it
 * exists: for now nothing is known, and -v says so.
 */
static json_object *health_last_scan(const struct fsmount *m, const struct health_opts *o)
{
	if (o->verbose && !o->json)
		fprintf(stderr, "fscrub health: %s: last scan: not known (no state store yet)\n",
			m->target);
	return NULL;
}

static bool has_source(const char *fstype)
{
	return !strcmp(fstype, "ext4") || !strcmp(fstype, "xfs") || !strcmp(fstype, "btrfs");
}

/* Read h->m's source: 0, or a negative errno. */
static int read_source(struct health *h)
{
	int fd, ret;

	if (!strcmp(h->m->fstype, "ext4"))
		return health_ext4(h);
	if (!has_source(h->m->fstype))
		return 0;
	fd = open(h->m->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = !strcmp(h->m->fstype, "xfs") ? health_xfs(h, fd) : health_btrfs(h, fd);
	close(fd);
	return ret;
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
	last = health_last_scan(m, o);
	if (err && !o->json)
		fprintf(stderr, "fscrub health: %s: cannot read its health: %s\n", m->target,
			strerror(-err));
	if (o->json)
		json_object_array_add(arr, to_json(&h, err, last));
	else
		print_text(&h, err);
	code = (err ? EXIT_OPERATIONAL : 0) | (h.sick ? EXIT_UNCORRECTED : 0);
	health_release(&h);
	return code;
}

static void usage(FILE *f)
{
	fputs("Usage: fscrub health [--json] [-v] [MOUNTPOINT|DEVICE...]\n"
	      "\n"
	      "Print what the kernel knows of each filesystem's health, without scanning\n"
	      "(default: every mounted ext4, XFS and btrfs filesystem).\n"
	      "\n"
	      "  -h, --help      show this help and exit\n"
	      "  -v, --verbose   say what is not known\n"
	      "      --json      one JSON object on standard output\n"
	      "\n"
	      "Exit status: 0 healthy, 4 sick, 8 health unreadable, 16 usage error.\n", f);
}

static int parse(int argc, char **argv, struct health_opts *o)
{
	static const struct option longs[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'J' },
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
		default:
			fprintf(stderr, "fscrub health: unknown option '%s'\n"
				"Try 'fscrub health --help' for more information.\n",
				argv[optind - 1]);
			return EXIT_USAGE;
		}
	}
	return -1;
}

int cmd_health(int argc, char **argv)
{
	struct health_opts o = { 0 };
	struct fsmount_list list;
	json_object *top, *arr = NULL;
	int code = 0, ret;

	if ((ret = parse(argc, argv, &o)) >= 0)
		return ret;
	if ((ret = fsmounts_collect("health", argv + optind, argc - optind, has_source, &list)))
		return ret;
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
	if (fflush(stdout) != 0)
		code |= EXIT_OPERATIONAL;
	return code;
}
