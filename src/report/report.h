/*
 * report: the one place where findings are classified, counted and printed.
 *
 * Every check calls str_error(), str_warn() or str_info() once, where it
 * decides; nothing else prints findings and nothing else computes the exit
 * code.  The text form is
 *
 *     Error: PATH (inode N): message [check.id]
 *
 * on standard output (with " [file.c:line]" appended under -d; under -v
 * followed by "    Advice: ..." for an error or a warning, advice.h).  Errors and
 * warnings are always printed, infos only with -v (they are always counted).
 * Operational problems (fscrub could not do part of its job) go to standard
 * error as "fscrub: ..." and make the exit code include 8.
 *
 * Thread-safe: output is serialised and the counters are atomic.
 */
#ifndef FSCRUB_REPORT_H
#define FSCRUB_REPORT_H

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/exitcode.h"

struct scrub_ctx;
struct dir_node;

enum severity {
	SEV_INFO,
	SEV_WARNING,
	SEV_ERROR,
	/*
	 * Something was wrong and fscrub corrected it (never under -n): it is
	 * printed like an error but counted apart, and makes the exit code 1
	 * unless an error remains.
	 */
	SEV_REPAIRED,
};

/* One finding, as the sinks (text, JSON) receive it. */
struct finding {
	enum severity severity;
	const char *check;
	const char *path;		/* escaped, as printed */
	uint64_t ino;			/* 0: none */
	/*
	 * Which subvolume ino is in (inokey.h): the kernel's subvolume id of
	 * the directory the finding is in (STATX_SUBVOL), else 0 if that is
	 * on the mount root's st_dev (a filesystem without subvolume ids);
	 * !has_subvol: not known (btrfs before Linux 6.10, off the mount's
	 * own subvolume).  For a name that is a subvolume's root, the
	 * directory's is not the inode's: only content findings (files) use it.
	 */
	bool has_subvol;
	uint64_t subvol;
	bool has_range;			/* offset and length mean something */
	uint64_t offset, length;	/* bytes, in the file (or device) */
	const char *message;
	/*
	 * An info about something that changed while it was being checked:
	 * neither confirmed nor cleared (str_changed()).  Counted apart, so
	 * that the summary, the JSON report and the run history say how many
	 * findings a run could not confirm.
	 */
	bool unconfirmed;
	const char *file;		/* source of the check, for -d */
	int line;
};

/*
 * Report a finding about the object at dir/name (name NULL: dir itself; dir
 * NULL: the filesystem).  ino 0 omits the inode.  Use the macros below so
 * that -d can print where the finding was made.
 */
void report_at(struct scrub_ctx *ctx, enum severity sev, const char *check,
	       const struct dir_node *dir, const char *name, uint64_t ino,
	       const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 9, 10)));
/* The same, about the byte range [offset, offset + length) of the object. */
void report_range_at(struct scrub_ctx *ctx, enum severity sev, const char *check,
		     const struct dir_node *dir, const char *name, uint64_t ino,
		     uint64_t offset, uint64_t length, const char *file, int line,
		     const char *fmt, ...)
	__attribute__((format(printf, 11, 12)));

#define str_error_range(ctx, check, dir, name, ino, off, len, ...) \
	report_range_at(ctx, SEV_ERROR, check, dir, name, ino, off, len, \
			__FILE__, __LINE__, __VA_ARGS__)

#define str_error(ctx, check, dir, name, ino, ...) \
	report_at(ctx, SEV_ERROR, check, dir, name, ino, __FILE__, __LINE__, __VA_ARGS__)
#define str_warn(ctx, check, dir, name, ino, ...) \
	report_at(ctx, SEV_WARNING, check, dir, name, ino, __FILE__, __LINE__, __VA_ARGS__)
#define str_info(ctx, check, dir, name, ino, ...) \
	report_at(ctx, SEV_INFO, check, dir, name, ino, __FILE__, __LINE__, __VA_ARGS__)

#define str_repaired(ctx, check, dir, name, ino, ...) \
	report_at(ctx, SEV_REPAIRED, check, dir, name, ino, __FILE__, __LINE__, __VA_ARGS__)

/*
 * A finding whose object changed while it was being checked: never an
 * error, an info that says so (the live-filesystem rule), counted as not
 * confirmed (finding.unconfirmed).  report_changed_at() takes the whole
 * message; str_changed() starts it with "changed while being checked: ".
 */
void report_changed_at(struct scrub_ctx *ctx, const char *check,
		       const struct dir_node *dir, const char *name, uint64_t ino,
		       const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));

#define str_changed(ctx, check, dir, name, ino, ...) \
	report_changed_at(ctx, check, dir, name, ino, __FILE__, __LINE__, \
			  "changed while being checked: " __VA_ARGS__)

/*
 * fscrub could not check something (err is a positive errno, 0 for none):
 * "fscrub: PATH: what: strerror" on stderr; the exit code gets bit 8.
 */
void report_operational(struct scrub_ctx *ctx, const struct dir_node *dir,
			const char *name, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* A line of the text report (e.g. -T), serialised with findings. */
void report_text(struct scrub_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The same, only with -v. */
void report_verbose(struct scrub_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* report_verbose() of a ready line of phase 5, as ratelimit.h's report callback (ctx). */
void report_limit(void *ctx, const char *line);

/*
 * A finding made by an earlier run, path and message as it printed them
 * (a resumed run's, checkpoint.h): counted and printed like a new one.
 */
void report_replay(struct scrub_ctx *ctx, const struct finding *f);

/*
 * Sinks: the outputs besides the text report (the JSON report, the metrics,
 * the run history, the checkpoint, the progress reporter).  Each registers
 * itself where the run sets it up; the report core knows none of them by
 * name and hands each event to every sink in the order they registered:
 * deliver() is still the one place a finding goes out, and the run history
 * sees a finding before the checkpoint does (history_open() registers
 * before checkpoint_begin()).  The end of a run goes the other way round,
 * the last registered first, as the resources a later one uses are torn
 * down first: the history is recorded before the metrics read it, and the
 * JSON report, opened first, is written last.
 *
 * Sinks are added and removed only by the thread that runs the phases,
 * before phase 1, between phases or after the last (never while a walk
 * runs); deliver() reads the list under the report lock.
 */
struct phase_record {
	int number;
	const char *title;
	double began;			/* seconds from the start of phase 1 */
	double wall, user, sys;		/* seconds */
	unsigned long long items;
	const char *unit;
};

struct report_sink {
	const char *name;
	/*
	 * Gets the infos the text report leaves out (without -v) too; with
	 * no such sink, an info is only counted.
	 */
	bool every_finding;
	/* Each hook may be NULL.  data: what the sink registered with. */
	/* A finding, with the report lock held. */
	void (*finding)(struct scrub_ctx *ctx, void *data, const struct finding *f);
	/* A line of the text report is about to be written (report lock held). */
	void (*text_line)(struct scrub_ctx *ctx, void *data);
	/* A phase is over: its times (-T, the JSON report's "phases"). */
	void (*phase)(struct scrub_ctx *ctx, void *data, const struct phase_record *p);
	/* The scan is over, before its summary line: stop drawing. */
	void (*stop)(struct scrub_ctx *ctx, void *data);
	/*
	 * The run is over, after the summary: write out.  exit_code is the
	 * run's so far (report_exit_code() included), fatal whether the phases
	 * stopped short (not by a finding).  Returns exit_code, with
	 * EXIT_OPERATIONAL added if the output could not be written.
	 */
	int (*end)(struct scrub_ctx *ctx, void *data, int exit_code, bool fatal);
};

/* There are five outputs besides the text report; room for a few more. */
#define REPORT_MAX_SINKS 8

struct report_sinks {
	size_t nr;
	struct {
		const struct report_sink *sink;
		void *data;
	} at[REPORT_MAX_SINKS];
};

struct strbuf;
struct advice_fs;

/*
 * Where a finding is: the report core knows neither the walk's directory
 * nodes nor the mount; the context tells it (scrub_ctx_init() sets these,
 * scan/context.c).
 */
struct report_where {
	/* The printable (escaped) path of dir/name, appended to out. */
	void (*path)(const struct scrub_ctx *ctx, struct strbuf *out,
		     const struct dir_node *dir, const char *name);
	/* f->has_subvol and f->subvol for a finding in dir (NULL: the mount root). */
	void (*subvol)(const struct scrub_ctx *ctx, const struct dir_node *dir,
		       struct finding *f);
	/* The filesystem the advice is about (advice.h): its type, whether it is /. */
	void (*advice_fs)(const struct scrub_ctx *ctx, struct advice_fs *fs);
};

/*
 * The report core's state: struct scrub_ctx's first member (context.h), so
 * that the core reaches it from the context it is handed and includes
 * nothing of the scan.  Counters are atomic (every thread makes findings);
 * output and the sinks' list are under lock.
 */
struct report {
	pthread_mutex_t lock;
	struct report_sinks sinks;	/* the outputs besides the text report */
	FILE *text_out;			/* the text report: stdout, or stderr with --json - */
	const struct report_where *where;
	/* From the options, before phase 1 (report_configure()). */
	bool verbose;			/* -v: infos and advice are printed */
	bool debug;			/* -d: file:line after each finding */
	unsigned long long max_errors;	/* -a: stop after so many errors; 0 never */

	atomic_ullong nr_errors, nr_warnings, nr_infos, nr_operational, nr_repaired;
	atomic_uint advice_actions;	/* 1u << each advice_action of a finding (advice.h) */
	atomic_ullong nr_unconfirmed;	/* of nr_infos: changed while being checked */
	atomic_bool aborted;		/* -a reached */
	bool output_failed;		/* the text report could not be written */
	bool record_failed;		/* the run could not be recorded (history.h) */
};

/* Set by the SIGINT/SIGTERM handler. */
extern volatile sig_atomic_t scrub_cancelled;

/* The context's report (its first member). */
static inline struct report *report_of(struct scrub_ctx *ctx)
{
	return (struct report *)(void *)ctx;
}

static inline const struct report *report_of_const(const struct scrub_ctx *ctx)
{
	return (const struct report *)(const void *)ctx;
}

/* Before any finding: text on stdout, where from where, nothing counted. */
void report_init(struct report *r, const struct report_where *where);
void report_release(struct report *r);
/* The options that change what is printed, once parsed. */
void report_configure(struct scrub_ctx *ctx, bool verbose, bool debug,
		      unsigned long long max_errors);

/* Register sink with data (aborts past REPORT_MAX_SINKS: a programming error). */
void report_add_sink(struct scrub_ctx *ctx, const struct report_sink *sink, void *data);
/* What sink registered with, NULL if it is not registered (between phases). */
void *report_sink_data(struct scrub_ctx *ctx, const struct report_sink *sink);
/* Unregister sink (nothing if it is not registered). */
void report_remove_sink(struct scrub_ctx *ctx, const struct report_sink *sink);
/*
 * For a sink's end: exit_code as it is if err (a positive errno) is 0;
 * else "fscrub: cannot write the WHAT 'PATH': ..." on stderr, and
 * EXIT_OPERATIONAL added.
 */
int report_output_end(int exit_code, int err, const char *what, const char *path);
/* Hand a finished phase's figures to every sink. */
void report_phase(struct scrub_ctx *ctx, const struct phase_record *p);
/* The scan is over: every sink's stop, the last registered first. */
void report_run_stop(struct scrub_ctx *ctx);
/*
 * The run is over: every sink's end, the last registered first.  Returns
 * the exit code: code | report_exit_code(), with what the sinks added.
 */
int report_run_end(struct scrub_ctx *ctx, int code, bool fatal);

/* Build the printable (escaped) path of dir/name into out. */
void report_path(struct scrub_ctx *ctx, struct strbuf *out,
		 const struct dir_node *dir, const char *name);

/* The filesystem the advice is about (advice.h): its type, whether it is /. */
struct advice_fs report_advice_fs(const struct scrub_ctx *ctx);

/*
 * Errors in what files hold rather than in the filesystem's structures
 * (ledger.*, manifest.*, data.read, media.file): a repair tool cannot bring
 * the data back, a backup can; only -x looks for them.
 */
bool check_is_content(const char *check);

/* The fsck(8) exit code for what has been reported so far. */
int report_exit_code(const struct scrub_ctx *ctx);

/* True once the scan must stop: cancelled by a signal or -a reached. */
bool scrub_should_stop(const struct scrub_ctx *ctx);

#endif
