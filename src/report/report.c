/*
 * report: classify, count and print findings; compute the exit code.
 *
 * Paths are built only when something is printed, from the directory
 * node chain (report_where, which the context supplies): the walk itself
 * never holds a full path.  Every component is escaped (names.h) so a
 * hostile name cannot forge a line.
 *
 * The core's state is struct report, the context's first member
 * (report_of()): this file includes nothing above report/ and lib/.
 */
#include "report/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/advice.h"
#include "report/checks.h"
#include "lib/names.h"
#include "lib/strbuf.h"

volatile sig_atomic_t scrub_cancelled;

static const char *severity_label[] = {
	[SEV_INFO] = "Info",
	[SEV_WARNING] = "Warning",
	[SEV_ERROR] = "Error",
	[SEV_REPAIRED] = "Repaired",
};

void report_init(struct report *r, const struct report_where *where)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	r->text_out = stdout;
	r->where = where;
}

void report_release(struct report *r)
{
	pthread_mutex_destroy(&r->lock);
}

void report_configure(struct scrub_ctx *ctx, bool verbose, bool debug,
		      unsigned long long max_errors)
{
	struct report *r = report_of(ctx);

	r->verbose = verbose;
	r->debug = debug;
	r->max_errors = max_errors;
}

/* Without a report_where (a fuzzer's bare context): the name alone. */
void report_path(struct scrub_ctx *ctx, struct strbuf *out,
		 const struct dir_node *dir, const char *name)
{
	const struct report *r = report_of(ctx);

	if (r->where)
		r->where->path(ctx, out, dir, name);
	else if (name)
		names_escape(out, name, strlen(name));
}

/* "src/tree/walk.c" -> "tree/walk.c", "src/backends/generic.c" -> "backends/generic.c" */
static const char *source_name(const char *file)
{
	const char *p = strstr(file, "src/");

	return p ? p + 4 : file;
}

/* Write one line to stdout; remember a failure so the exit code shows it. */
static void emit_line(struct report *r, const struct strbuf *line)
{
	if (r->output_failed)
		return;
	if (fwrite(line->buf, 1, line->len, r->text_out) != line->len ||
	    fflush(r->text_out) != 0) {
		r->output_failed = true;
		fprintf(stderr, "fscrub: unable to write the report: %s\n", strerror(errno));
	}
}

/*
 * Errors in what files hold rather than in the filesystem's structures:
 * a repair tool cannot bring the data back, a backup can.
 */
bool check_is_content(const char *check)
{
	return check && (!strncmp(check, "ledger.", 7) || !strncmp(check, "manifest.", 9) ||
			 !strcmp(check, CHECK_DATA_READ) || !strcmp(check, CHECK_MEDIA_FILE));
}

/* Count a finding; false if it is not to be printed (an info without -v). */
static bool count_finding(struct report *r, const struct finding *f)
{
	enum severity sev = f->severity;
	const char *check = f->check;

	if (f->unconfirmed)
		atomic_fetch_add(&r->nr_unconfirmed, 1);
	atomic_fetch_or(&r->advice_actions, 1u << advice_action(check, sev));
	switch (sev) {
	case SEV_ERROR: {
		unsigned long long n = atomic_fetch_add(&r->nr_errors, 1) + 1;

		if (r->max_errors && n >= r->max_errors)
			atomic_store(&r->aborted, true);
		return true;
	}
	case SEV_WARNING:
		atomic_fetch_add(&r->nr_warnings, 1);
		return true;
	case SEV_INFO:
		atomic_fetch_add(&r->nr_infos, 1);
		return r->verbose;
	case SEV_REPAIRED:
		atomic_fetch_add(&r->nr_repaired, 1);
		return true;
	}
	return true;
}

struct advice_fs report_advice_fs(const struct scrub_ctx *ctx)
{
	const struct report *r = report_of_const(ctx);
	struct advice_fs fs = { .fstype = NULL, .root = false };

	if (r->where)
		r->where->advice_fs(ctx, &fs);
	return fs;
}

/* -v: what to do about a finding, on the line after it (nothing for an info). */
static void format_advice(struct scrub_ctx *ctx, const struct finding *f, struct strbuf *sb)
{
	struct advice_fs fs = report_advice_fs(ctx);

	if (!report_of(ctx)->verbose || advice_action(f->check, f->severity) == ADVICE_NONE)
		return;
	strbuf_addstr(sb, "    Advice: ");
	advice_text(sb, f->check, f->severity, &fs);
	strbuf_addch(sb, '\n');
}

static void format_text(struct scrub_ctx *ctx, const struct finding *f, struct strbuf *sb)
{
	strbuf_addstr(sb, severity_label[f->severity]);
	strbuf_addstr(sb, ": ");
	strbuf_addstr(sb, f->path);
	if (f->ino)
		strbuf_addf(sb, " (inode %llu)", (unsigned long long)f->ino);
	strbuf_addstr(sb, ": ");
	strbuf_addstr(sb, f->message);
	strbuf_addf(sb, " [%s]", f->check);
	if (report_of(ctx)->debug)
		strbuf_addf(sb, " [%s:%d]", source_name(f->file), f->line);
	strbuf_addch(sb, '\n');
	format_advice(ctx, f, sb);
}

/* finding.subvol: the subvolume of dir (NULL: the mount root). */
static void finding_subvol(const struct scrub_ctx *ctx, const struct dir_node *dir,
			   struct finding *f)
{
	const struct report *r = report_of_const(ctx);

	if (r->where)
		r->where->subvol(ctx, dir, f);
}

void report_add_sink(struct scrub_ctx *ctx, const struct report_sink *sink, void *data)
{
	struct report *r = report_of(ctx);
	struct report_sinks *l = &r->sinks;

	if (l->nr == REPORT_MAX_SINKS) {
		fprintf(stderr, "fscrub: too many report sinks (adding '%s')\n", sink->name);
		abort();
	}
	pthread_mutex_lock(&r->lock);
	l->at[l->nr].sink = sink;
	l->at[l->nr].data = data;
	l->nr++;
	pthread_mutex_unlock(&r->lock);
}

void report_remove_sink(struct scrub_ctx *ctx, const struct report_sink *sink)
{
	struct report *r = report_of(ctx);
	struct report_sinks *l = &r->sinks;

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < l->nr; i++) {
		if (l->at[i].sink != sink)
			continue;
		memmove(&l->at[i], &l->at[i + 1], (l->nr - i - 1) * sizeof(l->at[0]));
		l->nr--;
		break;
	}
	pthread_mutex_unlock(&r->lock);
}

void *report_sink_data(struct scrub_ctx *ctx, const struct report_sink *sink)
{
	const struct report_sinks *l = &report_of(ctx)->sinks;

	for (size_t i = 0; i < l->nr; i++)
		if (l->at[i].sink == sink)
			return l->at[i].data;
	return NULL;
}

/* Some sink wants the findings the text report leaves out. */
static bool sinks_want_every_finding(const struct report_sinks *l)
{
	for (size_t i = 0; i < l->nr; i++)
		if (l->at[i].sink->every_finding)
			return true;
	return false;
}

/* A line of the text report follows (report lock held). */
static void sinks_text_line(struct scrub_ctx *ctx)
{
	const struct report_sinks *l = &report_of(ctx)->sinks;

	for (size_t i = 0; i < l->nr; i++)
		if (l->at[i].sink->text_line)
			l->at[i].sink->text_line(ctx, l->at[i].data);
}

int report_output_end(int exit_code, int err, const char *what, const char *path)
{
	if (!err)
		return exit_code;
	fprintf(stderr, "fscrub: cannot write the %s '%s': %s\n", what, path, strerror(err));
	return exit_code | EXIT_OPERATIONAL;
}

void report_phase(struct scrub_ctx *ctx, const struct phase_record *p)
{
	const struct report_sinks *l = &report_of(ctx)->sinks;

	for (size_t i = 0; i < l->nr; i++)
		if (l->at[i].sink->phase)
			l->at[i].sink->phase(ctx, l->at[i].data, p);
}

/*
 * The last registered first; a hook may remove its own sink (at i), which
 * moves only the ones already called.
 */
void report_run_stop(struct scrub_ctx *ctx)
{
	const struct report_sinks *l = &report_of(ctx)->sinks;

	for (size_t i = l->nr; i-- > 0;)
		if (l->at[i].sink->stop)
			l->at[i].sink->stop(ctx, l->at[i].data);
}

int report_run_end(struct scrub_ctx *ctx, int code, bool fatal)
{
	const struct report_sinks *l = &report_of(ctx)->sinks;

	for (size_t i = l->nr; i-- > 0;)
		if (l->at[i].sink->end)
			code = l->at[i].sink->end(ctx, l->at[i].data,
						  code | report_exit_code(ctx), fatal);
	return code | report_exit_code(ctx);
}

/* Hand a finding with its path and message made to the text report, then every sink. */
static void deliver(struct scrub_ctx *ctx, const struct finding *f, bool print)
{
	struct report *r = report_of(ctx);
	struct strbuf line = STRBUF_INIT;

	if (print)
		format_text(ctx, f, &line);
	pthread_mutex_lock(&r->lock);
	if (print) {
		sinks_text_line(ctx);
		emit_line(r, &line);
	}
	for (size_t i = 0; i < r->sinks.nr; i++)
		if (r->sinks.at[i].sink->finding)
			r->sinks.at[i].sink->finding(ctx, r->sinks.at[i].data, f);
	pthread_mutex_unlock(&r->lock);
	strbuf_release(&line);
}

static void vreport(struct scrub_ctx *ctx, struct finding *f, const struct dir_node *dir,
		    const char *name, const char *fmt, va_list ap)
{
	struct strbuf path = STRBUF_INIT, msg = STRBUF_INIT;
	bool print = count_finding(report_of(ctx), f);

	/* Text gets infos only with -v; some sinks (JSON, the history) get every finding. */
	if (!print && !sinks_want_every_finding(&report_of(ctx)->sinks))
		return;
	report_path(ctx, &path, dir, name);
	finding_subvol(ctx, dir, f);
	strbuf_vaddf(&msg, fmt, ap);
	f->path = path.buf;
	f->message = msg.buf;
	deliver(ctx, f, print);
	strbuf_release(&path);
	strbuf_release(&msg);
}

void report_replay(struct scrub_ctx *ctx, const struct finding *f)
{
	deliver(ctx, f, count_finding(report_of(ctx), f));
}

void report_at(struct scrub_ctx *ctx, enum severity sev, const char *check,
	       const struct dir_node *dir, const char *name, uint64_t ino,
	       const char *file, int line, const char *fmt, ...)
{
	struct finding f = {
		.severity = sev, .check = check, .ino = ino, .file = file, .line = line,
	};
	va_list ap;

	va_start(ap, fmt);
	vreport(ctx, &f, dir, name, fmt, ap);
	va_end(ap);
}

void report_changed_at(struct scrub_ctx *ctx, const char *check,
		       const struct dir_node *dir, const char *name, uint64_t ino,
		       const char *file, int line, const char *fmt, ...)
{
	struct finding f = {
		.severity = SEV_INFO, .check = check, .ino = ino, .file = file, .line = line,
		.unconfirmed = true,
	};
	va_list ap;

	va_start(ap, fmt);
	vreport(ctx, &f, dir, name, fmt, ap);
	va_end(ap);
}

void report_range_at(struct scrub_ctx *ctx, enum severity sev, const char *check,
		     const struct dir_node *dir, const char *name, uint64_t ino,
		     uint64_t offset, uint64_t length, const char *file, int line,
		     const char *fmt, ...)
{
	struct finding f = {
		.severity = sev, .check = check, .ino = ino, .file = file, .line = line,
		.has_range = true, .offset = offset, .length = length,
	};
	va_list ap;

	va_start(ap, fmt);
	vreport(ctx, &f, dir, name, fmt, ap);
	va_end(ap);
}

void report_operational(struct scrub_ctx *ctx, const struct dir_node *dir,
			const char *name, int err, const char *fmt, ...)
{
	struct report *r = report_of(ctx);
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	atomic_fetch_add(&r->nr_operational, 1);
	strbuf_addstr(&sb, "fscrub: ");
	report_path(ctx, &sb, dir, name);
	strbuf_addstr(&sb, ": ");
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	if (err)
		strbuf_addf(&sb, ": %s", strerror(err));
	strbuf_addch(&sb, '\n');
	pthread_mutex_lock(&r->lock);
	fputs(sb.buf, stderr);
	pthread_mutex_unlock(&r->lock);
	strbuf_release(&sb);
}

static void vreport_text(struct scrub_ctx *ctx, const char *fmt, va_list ap)
{
	struct report *r = report_of(ctx);
	struct strbuf sb = STRBUF_INIT;

	strbuf_vaddf(&sb, fmt, ap);
	strbuf_addch(&sb, '\n');
	pthread_mutex_lock(&r->lock);
	sinks_text_line(ctx);
	emit_line(r, &sb);
	pthread_mutex_unlock(&r->lock);
	strbuf_release(&sb);
}

void report_text(struct scrub_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport_text(ctx, fmt, ap);
	va_end(ap);
}

void report_verbose(struct scrub_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (!report_of(ctx)->verbose)
		return;
	va_start(ap, fmt);
	vreport_text(ctx, fmt, ap);
	va_end(ap);
}

void report_limit(void *ctx, const char *line)
{
	/* Only phase 5 reads at a limited rate; its -v lines all say so. */
	report_verbose(ctx, "Phase 5: %s", line);
}

int report_exit_code(const struct scrub_ctx *ctx)
{
	const struct report *r = report_of_const(ctx);
	int code = EXIT_CLEAN;

	if (atomic_load(&r->nr_errors))
		code |= EXIT_UNCORRECTED;
	else if (atomic_load(&r->nr_repaired))
		code |= EXIT_CORRECTED;
	if (atomic_load(&r->nr_operational) || r->output_failed || r->record_failed)
		code |= EXIT_OPERATIONAL;
	if (scrub_cancelled)
		code |= EXIT_CANCELLED;
	return code;
}

bool scrub_should_stop(const struct scrub_ctx *ctx)
{
	return scrub_cancelled || atomic_load(&report_of_const(ctx)->aborted);
}
