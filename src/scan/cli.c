/*
 * cli: option parsing and validation; see cli.h.  Every bad value is a
 * usage error (exit 16) with a one-line reason, never a silent default.
 */
#include "scan/cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "scan/context.h"
#include "lib/outfile.h"
#include "data/ratelimit.h"
#include "report/report.h"
#include "lib/strbuf.h"

/* Long options without a short form. */
enum {
	OPT_JSON = 256, OPT_METRICS, OPT_LIMIT, OPT_RECORD, OPT_LEDGER, OPT_MANIFEST,
	OPT_STATE_DIR, OPT_NO_STATE, OPT_RESCAN_ERRORS, OPT_SINCE, OPT_PORTION,
	OPT_TIME_BUDGET, OPT_RESUME,
};

/* More threads than this only add contention on two queues and a cache. */
#define MAX_THREADS 1024

static const struct option long_options[] = {
	{ "max-errors",	 required_argument, NULL, 'a' },
	{ "background",	 no_argument,	    NULL, 'b' },
	{ "progress-fd", required_argument, NULL, 'C' },
	{ "debug",	 no_argument,	    NULL, 'd' },
	{ "help",	 no_argument,	    NULL, 'h' },
	{ "threads",	 required_argument, NULL, 'j' },
	{ "mtab",	 required_argument, NULL, 'm' },
	{ "no-modify",	 no_argument,	    NULL, 'n' },
	{ "type",	 required_argument, NULL, 't' },
	{ "times",	 no_argument,	    NULL, 'T' },
	{ "verbose",	 no_argument,	    NULL, 'v' },
	{ "version",	 no_argument,	    NULL, 'V' },
	{ "verify-data", no_argument,	    NULL, 'x' },
	{ "json",	 required_argument, NULL, OPT_JSON },
	{ "metrics",	 required_argument, NULL, OPT_METRICS },
	{ "limit",	 required_argument, NULL, OPT_LIMIT },
	{ "record",	 no_argument,	    NULL, OPT_RECORD },
	{ "ledger",	 required_argument, NULL, OPT_LEDGER },
	{ "manifest",	 required_argument, NULL, OPT_MANIFEST },
	{ "state-dir",	 required_argument, NULL, OPT_STATE_DIR },
	{ "no-state",	 no_argument,	    NULL, OPT_NO_STATE },
	{ "rescan-errors", no_argument,   NULL, OPT_RESCAN_ERRORS },
	{ "since",	 required_argument, NULL, OPT_SINCE },
	{ "portion",	 required_argument, NULL, OPT_PORTION },
	{ "time-budget", required_argument, NULL, OPT_TIME_BUDGET },
	{ "resume",	 no_argument,	    NULL, OPT_RESUME },
	{ NULL, 0, NULL, 0 },
};

void cli_usage(FILE *f)
{
	fputs("Usage: fscrub [OPTIONS] MOUNTPOINT|DEVICE\n"
	      "       fscrub status [OPTIONS] [MOUNTPOINT...]\n"
	      "       fscrub watch [OPTIONS] [MOUNTPOINT|DEVICE...]\n"
	      "       fscrub health [OPTIONS] [MOUNTPOINT|DEVICE...]\n"
	      "       fscrub locate [OPTIONS] DEVICE SECTOR[+COUNT|-END]...\n"
	      "\n"
	      "Check a mounted filesystem for corruption and media errors.\n"
	      "\n"
	      "Options:\n"
	      "  -a, --max-errors N   stop after N errors\n"
	      "  -b, --background     idle I/O class, nice 19, one thread\n"
	      "  -C, --progress-fd FD write progress lines (or a bar on a terminal) to FD\n"
	      "  -d, --debug          print where each finding was made (implies -v)\n"
	      "  -h, --help           show this help and exit\n"
	      "  -j, --threads N      use N threads (default: online CPUs)\n"
	      "  -m, --mtab FILE      read mounts from FILE instead of the kernel\n"
	      "  -n, --no-modify      check only, change nothing\n"
	      "  -t, --type NAME      use backend NAME instead of choosing by type\n"
	      "  -T, --times          print time, CPU and memory used by each phase\n"
	      "  -v, --verbose        say what is being done, and print infos\n"
	      "  -V, --version        print the version and exit\n"
	      "  -x, --verify-data    read all file data back\n"
	      "      --json FILE      write a JSON report to FILE ('-': standard output)\n"
	      "      --metrics FILE   write Prometheus metrics to FILE ('-': standard output)\n"
	      "      --limit RATE     cap -x reads at RATE bytes/s (K, M, G suffixes), or\n"
	      "                       auto: yield to other I/O (default with -b), none\n"
	      "      --record         store a checksum of every file (implies -x)\n"
	      "      --ledger DIR     keep checksums in a database in DIR, not in xattrs\n"
	      "      --manifest FILE  verify files against a sha256sum/md5sum list\n"
	      "      --state-dir DIR  record the run in DIR/state.sqlite (default, as root:\n"
	      "                       /var/lib/fscrub)\n"
	      "      --no-state       do not record the run\n"
	      "      --rescan-errors  -x, reading back only the files with open findings\n"
	      "      --since DATE     -x, reading back only the files changed since DATE\n"
	      "                       (2026-12-01, 2026-12-01T10:00:00Z, @EPOCH, 7d, 12h)\n"
	      "      --portion P%     -x, reading back only the P % of the file data in the\n"
	      "                       device regions (or files) least recently read\n"
	      "      --time-budget DURATION\n"
	      "                       -x, reading the least recently read regions (or\n"
	      "                       files) first, until the run has taken DURATION (2h,\n"
	      "                       90m, 3600s)\n"
	      "      --resume         continue the stopped run's checkpoint, if there is one\n"
	      "\n"
	      "Exit status: 0 clean, 1 all repaired, 4 errors left uncorrected,\n"
	      "8 operational error, "
	      "16 usage error, 32 cancelled.  'fscrub status --help' for the run history.\n"
	      "See fscrub(8).\n", f);
}

static int usage_error(const char *fmt, const char *arg)
{
	fputs("fscrub: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'fscrub --help' for more information.\n", stderr);
	return EXIT_USAGE;
}

/* A whole positive decimal number no larger than max, or false. */
static bool parse_count(const char *s, unsigned long long max, unsigned long long *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > max)
		return false;
	*out = v;
	return true;
}

/* The rest of an ISO 8601 date-time after its seconds: "", "Z" or +HH:MM. */
static bool parse_zone(const char *s, bool *utc, long *offset)
{
	unsigned hh, mm;
	int n = 0;

	*utc = false;
	*offset = 0;
	if (!*s)
		return true;
	*utc = true;
	if (!strcmp(s, "Z"))
		return true;
	if ((*s != '+' && *s != '-') || sscanf(s + 1, "%2u:%2u%n", &hh, &mm, &n) != 2 ||
	    s[1 + n] || hh > 23 || mm > 59)
		return false;
	*offset = (*s == '-' ? -1 : 1) * (long)(hh * 3600 + mm * 60);
	return true;
}

/*
 * An ISO 8601 date (midnight) or date-time, local time unless it ends in Z
 * or +HH:MM; false for anything else, including a day the month has not.
 */
static bool parse_iso_date(const char *s, time_t *out)
{
	struct tm tm = { 0 }, want;
	const char *rest = strptime(s, "%Y-%m-%d", &tm);
	bool utc;
	long offset;
	time_t t;

	if (!rest || !isdigit((unsigned char)*s))
		return false;
	if (*rest == 'T' || *rest == ' ') {
		const char *r = strptime(rest + 1, "%H:%M:%S", &tm);

		rest = r ? r : strptime(rest + 1, "%H:%M", &tm);
		if (!rest)
			return false;
	}
	if (!parse_zone(rest, &utc, &offset))
		return false;
	want = tm;
	tm.tm_isdst = -1;
	t = utc ? timegm(&tm) : mktime(&tm);
	/* mktime and timegm normalise 2026-02-30 into March: refuse it instead. */
	if (t == (time_t)-1 || tm.tm_mday != want.tm_mday || tm.tm_mon != want.tm_mon)
		return false;
	*out = t - offset;
	return true;
}

/*
 * --since DATE: an ISO 8601 date or date-time, @EPOCH, or Nd / Nh (so many
 * days / hours ago), as nanoseconds since the epoch; false if it is none
 * of these.
 */
static bool parse_since(const char *s, time_t now, int64_t *out)
{
	size_t len = strlen(s);
	unsigned long long v;
	time_t t;

	/* Up to what nanoseconds in an int64_t can hold (the year 2262). */
	if (*s == '@' && parse_count(s + 1, (unsigned long long)INT64_MAX / 1000000000, &v)) {
		t = (time_t)v;
	} else if (len > 1 && (s[len - 1] == 'd' || s[len - 1] == 'h')) {
		char num[24];
		/* Days or hours in seconds; at most 100 years back. */
		unsigned long long unit = s[len - 1] == 'd' ? 86400 : 3600;

		if (len - 1 >= sizeof(num))
			return false;
		memcpy(num, s, len - 1);
		num[len - 1] = 0;
		if (!parse_count(num, 36500ULL * 86400 / unit, &v))
			return false;
		t = now - (time_t)(v * unit);
	} else if (!parse_iso_date(s, &t)) {
		return false;
	}
	/* Past what nanoseconds since the epoch can hold (year 2262): as far as it goes. */
	*out = t > INT64_MAX / 1000000000 ? INT64_MAX : (int64_t)t * 1000000000;
	return true;
}

/* --json, --metrics: a name that cannot be written is refused before the scan. */
static int check_output(const char *what, const char *path)
{
	struct strbuf why = STRBUF_INIT;

	if (outfile_check(path, &why) == 0) {
		strbuf_release(&why);
		return -1;
	}
	fprintf(stderr, "fscrub: cannot write the %s '%s': %s\n", what, path, why.buf);
	strbuf_release(&why);
	return EXIT_USAGE;
}

static int check_outputs(const struct scrub_options *opt)
{
	int ret;

	if (opt->json_path && (ret = check_output("JSON report", opt->json_path)) >= 0)
		return ret;
	if (opt->metrics_path && (ret = check_output("metrics file", opt->metrics_path)) >= 0)
		return ret;
	if (opt->json_path && opt->metrics_path && outfile_same(opt->json_path, opt->metrics_path))
		return usage_error("--json and --metrics would both write to '%s'",
				   opt->metrics_path);
	return -1;
}

static unsigned online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (unsigned)(n > MAX_THREADS ? MAX_THREADS : n) : 1;
}

/* --portion P or P%: a whole percentage from 1 to 100, or false. */
static bool parse_portion(const char *s, unsigned *out)
{
	char buf[8];
	size_t n = strlen(s);
	unsigned long long v;

	if (n && s[n - 1] == '%')
		n--;
	if (!n || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (!parse_count(buf, 100, &v))
		return false;
	*out = (unsigned)v;
	return true;
}

/*
 * --time-budget DURATION: one or more whole numbers each with a unit, s, m,
 * h or d ("90m", "1h30m"), up to a year; false for anything else (a bare
 * number too: seconds or minutes would be a guess).
 */
static bool parse_duration(const char *s, uint64_t *out)
{
	/* A year: a longer run is a mistake, and it keeps the sum far from overflow. */
	const uint64_t max = 366ULL * 86400;
	uint64_t total = 0;

	if (!*s)
		return false;
	while (*s) {
		unsigned long long v, unit;
		char *end;

		if (!isdigit((unsigned char)*s))
			return false;
		errno = 0;
		v = strtoull(s, &end, 10);
		switch (*end) {
		case 's': unit = 1; break;
		case 'm': unit = 60; break;
		case 'h': unit = 3600; break;
		case 'd': unit = 86400; break;
		default: return false;
		}
		if (errno || v > max / unit || total + v * unit > max)
			return false;
		total += v * unit;
		s = end + 1;
	}
	if (!total)
		return false;
	*out = total;
	return true;
}

/* --portion, --time-budget: what they cannot go with; -1 if all is well. */
static int check_portion(const struct scrub_options *opt)
{
	const char *name = opt->portion ? "--portion" : "--time-budget";

	if (opt->no_state || (!opt->state_dir && geteuid() != 0))
		return usage_error("%s reads when each region was last verified "
				   "from the run history: not with --no-state, and --state-dir "
				   "unless root", name);
	if (opt->rescan_errors || opt->since)
		return usage_error("%s chooses device regions, --rescan-errors and "
				   "--since choose files: use one", name);
	if (opt->record || opt->manifest_path || opt->ledger_dir)
		return usage_error("%s reads only parts of files, which cannot be "
				   "checked against whole-file checksums: not with --record, "
				   "--ledger or --manifest", name);
	return -1;
}

/* --since: its date, and what it cannot go with; -1 if all is well. */
static int check_since(struct scrub_options *opt)
{
	time_t now = time(NULL);

	if (!parse_since(opt->since, now, &opt->since_ns))
		return usage_error("--since needs a date such as 2026-12-01, "
				   "2026-12-01T10:00:00Z, @1764547200, 7d or 12h, not '%s'",
				   opt->since);
	if (opt->since_ns > (int64_t)now * 1000000000)
		return usage_error("--since '%s' is in the future: no file changed since",
				   opt->since);
	if (opt->rescan_errors)
		return usage_error("%s", "--since and --rescan-errors each choose the files to "
				   "read: use one");
	if (opt->record || opt->manifest_path)
		return usage_error("%s", "--since reads only some files: not with --record or "
				   "--manifest");
	return -1;
}

int cli_parse(int argc, char **argv, struct scrub_options *opt)
{
	unsigned long long v;
	int c, ret;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "a:bC:dhj:m:nt:TvVx", long_options, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (!parse_count(optarg, ~0ULL, &v))
				return usage_error("-a needs a positive number of errors, not '%s'",
						   optarg);
			opt->max_errors = v;
			break;
		case 'b':
			opt->background = true;
			break;
		case 'C': {
			/* fd 0 is allowed: fsck -C0 means stdout in some tools, here an fd. */
			char *end;
			long fd;

			errno = 0;
			fd = strtol(optarg, &end, 10);
			if (errno || *end || !*optarg || fd < 0 || fd > 1 << 20)
				return usage_error("-C needs a file descriptor number, not '%s'",
						   optarg);
			if (fcntl((int)fd, F_GETFD) < 0)
				return usage_error("-C: file descriptor %s is not open", optarg);
			opt->progress_fd = (int)fd;
			break;
		}
		case 'd':
			opt->debug = true;
			opt->verbose = true;
			break;
		case 'h':
			cli_usage(stdout);
			return EXIT_CLEAN;
		case 'j':
			if (!parse_count(optarg, MAX_THREADS, &v))
				return usage_error("-j needs a number of threads from 1 to 1024, "
						   "not '%s'", optarg);
			opt->nr_threads = (unsigned)v;
			opt->threads_given = true;
			break;
		case 'm':
			if (access(optarg, R_OK) < 0) {
				fprintf(stderr, "fscrub: cannot read the mount table '%s': %s\n",
					optarg, strerror(errno));
				return EXIT_USAGE;
			}
			opt->mtab = optarg;
			break;
		case 'n':
			opt->check_only = true;
			break;
		case 't':
			if (!backend_find(optarg)) {
				fprintf(stderr, "fscrub: unknown filesystem type '%s' for -t "
					"(known: %s)\n", optarg, backend_names());
				return EXIT_USAGE;
			}
			opt->backend = optarg;
			break;
		case 'T':
			opt->timing = true;
			break;
		case 'v':
			opt->verbose = true;
			break;
		case 'V':
			printf("fscrub version %s\n", FSCRUB_VERSION);
			return EXIT_CLEAN;
		case 'x':
			opt->verify_data = true;
			break;
		case OPT_JSON:
			opt->json_path = optarg;
			break;
		case OPT_METRICS:
			opt->metrics_path = optarg;
			break;
		case OPT_LIMIT:
			if (!strcmp(optarg, "none"))
				opt->limit_rate = 0, opt->limit_auto = false;
			else if (ratelimit_parse(optarg, &opt->limit_rate, &opt->limit_auto))
				return usage_error("--limit needs a positive rate such as 200M, "
						   "auto[:RATE] or none, not '%s'", optarg);
			opt->limit_given = true;
			break;
		case OPT_RECORD:
			opt->record = true;
			opt->verify_data = true;
			break;
		case OPT_LEDGER:
			opt->ledger_dir = optarg;
			break;
		case OPT_MANIFEST:
			opt->manifest_path = optarg;
			break;
		case OPT_STATE_DIR:
			opt->state_dir = optarg;
			break;
		case OPT_RESUME:
			opt->resume = true;
			break;
		case OPT_NO_STATE:
			opt->no_state = true;
			break;
		case OPT_RESCAN_ERRORS:
			opt->rescan_errors = true;
			opt->verify_data = true;
			break;
		case OPT_SINCE:
			opt->since = optarg;
			opt->verify_data = true;
			break;
		case OPT_PORTION:
			if (!parse_portion(optarg, &opt->portion))
				return usage_error("--portion needs a share of the data from 1%% to "
						   "100%%, such as 25%%, not '%s'", optarg);
			opt->verify_data = true;
			break;
		case OPT_TIME_BUDGET:
			if (!parse_duration(optarg, &opt->time_budget))
				return usage_error("--time-budget needs a duration such as 2h, 90m, "
						   "3600s or 1h30m (at most 366d), not '%s'", optarg);
			opt->verify_data = true;
			break;
		case '?':
		default:
			if (optopt && strchr("aCjmt", optopt))
				return usage_error("option -%s needs an argument",
						   (char[]){ (char)optopt, 0 });
			if (optopt == OPT_JSON || optopt == OPT_METRICS || optopt == OPT_LIMIT ||
			    optopt == OPT_LEDGER || optopt == OPT_MANIFEST || optopt == OPT_STATE_DIR ||
			    optopt == OPT_SINCE || optopt == OPT_PORTION || optopt == OPT_TIME_BUDGET)
				return usage_error("option %s needs an argument", argv[optind - 1]);
			if (optopt)
				return usage_error("unknown option -%s", (char[]){ (char)optopt, 0 });
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind == argc)
		return usage_error("%s", "missing MOUNTPOINT or DEVICE");
	if (optind + 1 < argc)
		return usage_error("too many arguments, starting at '%s'", argv[optind + 1]);
	opt->target = argv[optind];
	if ((opt->limit_rate || opt->limit_auto) && !opt->verify_data)
		return usage_error("%s", "--limit caps the data scan's reads: use it with -x");
	if (opt->record && opt->check_only)
		return usage_error("%s", "--record writes checksum records: not with -n");
	if (opt->ledger_dir && !opt->verify_data)
		return usage_error("%s", "--ledger keeps the checksums -x verifies: use it with -x "
				   "or --record");
	if (opt->manifest_path && !opt->verify_data)
		return usage_error("%s", "--manifest is verified by the data scan: use it with -x");
	if ((ret = check_outputs(opt)) >= 0)
		return ret;
	if (opt->state_dir && opt->no_state)
		return usage_error("%s", "--state-dir and --no-state contradict each other");
	if (opt->resume && (opt->no_state || (!opt->state_dir && geteuid() != 0)))
		return usage_error("%s", "--resume continues from a checkpoint in the run history: "
				   "not with --no-state, and --state-dir unless root");
	if (opt->rescan_errors && (opt->no_state || (!opt->state_dir && geteuid() != 0)))
		return usage_error("%s", "--rescan-errors reads the open findings from the run "
				   "history: not with --no-state, and --state-dir unless root");
	if (opt->rescan_errors && (opt->record || opt->manifest_path))
		return usage_error("%s", "--rescan-errors reads only some files: not with "
				   "--record or --manifest");
	if (opt->since && (ret = check_since(opt)) >= 0)
		return ret;
	if ((opt->portion || opt->time_budget) && (ret = check_portion(opt)) >= 0)
		return ret;
	if (opt->state_dir) {
		struct stat st;

		/* Unwritable is found out when it is opened: the scan goes on without it. */
		if (stat(opt->state_dir, &st) < 0 || !S_ISDIR(st.st_mode))
			return usage_error("--state-dir needs an existing directory, not '%s'",
					   opt->state_dir);
	}
	if (opt->ledger_dir) {
		struct stat st;

		if (stat(opt->ledger_dir, &st) < 0 || !S_ISDIR(st.st_mode))
			return usage_error("--ledger needs an existing directory, not '%s'",
					   opt->ledger_dir);
		if (access(opt->ledger_dir, opt->check_only ? R_OK | X_OK : R_OK | W_OK | X_OK))
			return usage_error("cannot use the ledger directory '%s'", opt->ledger_dir);
	}
	/* A default manifest for every -x, e.g. from a systemd unit's environment. */
	if (opt->verify_data && !opt->rescan_errors && !opt->since && !opt->portion &&
	    !opt->time_budget &&
	    !opt->manifest_path &&
	    getenv("FSCRUB_MANIFEST") &&
	    *getenv("FSCRUB_MANIFEST")) {
		opt->manifest_path = getenv("FSCRUB_MANIFEST");
		opt->manifest_from_env = true;
	}
	if (!opt->threads_given)
		opt->nr_threads = opt->background ? 1 : online_cpus();
	/* -b yields to other I/O: the data scan adapts unless told otherwise. */
	if (opt->background && opt->verify_data && !opt->limit_given)
		opt->limit_auto = true;
	return -1;
}
