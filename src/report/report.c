/*
 * report: classify, count and print findings; compute the exit code.
 *
 * Paths are built only here, only when something is printed, from the
 * directory node chain: the walk itself never holds a full path.  Every
 * component is escaped (names.h) so a hostile name cannot forge a line.
 */
#include "report/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/advice.h"
#include "backends/backend.h"
#include "data/checkpoint.h"
#include "report/checks.h"
#include "scan/context.h"
#include "tree/dircache.h"
#include "lib/inokey.h"
#include "report/json_report.h"
#include "lib/names.h"
#include "report/progress.h"
#include "data/regions.h"
#include "store/state.h"
#include "lib/strbuf.h"

static const char *severity_label[] = {
	[SEV_INFO] = "Info",
	[SEV_WARNING] = "Warning",
	[SEV_ERROR] = "Error",
	[SEV_REPAIRED] = "Repaired",
};

void report_path(struct scrub_ctx *ctx, struct strbuf *out,
		 const struct dir_node *dir, const char *name)
{
	const char *mnt = ctx->mntpoint ? ctx->mntpoint : "";
	size_t depth = 0;

	names_escape(out, mnt, strlen(mnt));
	for (const struct dir_node *n = dir; n && n->parent; n = n->parent)
		depth++;
	if (depth) {
		const struct dir_node **chain = xmalloc(depth * sizeof(*chain));
		size_t i = depth;

		for (const struct dir_node *n = dir; n && n->parent; n = n->parent)
			chain[--i] = n;
		for (i = 0; i < depth; i++) {
			if (out->len == 0 || out->buf[out->len - 1] != '/')
				strbuf_addch(out, '/');
			names_escape(out, chain[i]->name, chain[i]->namelen);
		}
		free(chain);
	}
	if (name) {
		if (out->len == 0 || out->buf[out->len - 1] != '/')
			strbuf_addch(out, '/');
		names_escape(out, name, strlen(name));
	}
}

/* "src/tree/walk.c" -> "tree/walk.c", "src/backends/generic.c" -> "backends/generic.c" */
static const char *source_name(const char *file)
{
	const char *p = strstr(file, "src/");

	return p ? p + 4 : file;
}

/* Write one line to stdout; remember a failure so the exit code shows it. */
static void emit_line(struct scrub_ctx *ctx, const struct strbuf *line)
{
	if (ctx->output_failed)
		return;
	if (fwrite(line->buf, 1, line->len, ctx->text_out) != line->len ||
	    fflush(ctx->text_out) != 0) {
		ctx->output_failed = true;
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
static bool count_finding(struct scrub_ctx *ctx, const struct finding *f)
{
	enum severity sev = f->severity;
	const char *check = f->check;

	if (f->unconfirmed)
		atomic_fetch_add(&ctx->nr_unconfirmed, 1);
	atomic_fetch_or(&ctx->advice_actions, 1u << advice_action(check, sev));
	switch (sev) {
	case SEV_ERROR: {
		unsigned long long n = atomic_fetch_add(&ctx->nr_errors, 1) + 1;

		if (ctx->opt.max_errors && n >= ctx->opt.max_errors)
			atomic_store(&ctx->aborted, true);
		return true;
	}
	case SEV_WARNING:
		atomic_fetch_add(&ctx->nr_warnings, 1);
		return true;
	case SEV_INFO:
		atomic_fetch_add(&ctx->nr_infos, 1);
		return ctx->opt.verbose;
	case SEV_REPAIRED:
		atomic_fetch_add(&ctx->nr_repaired, 1);
		return true;
	}
	return true;
}

struct advice_fs report_advice_fs(const struct scrub_ctx *ctx)
{
	return (struct advice_fs){
		.fstype = ctx->fstype, .root = ctx->mntpoint && !strcmp(ctx->mntpoint, "/"),
	};
}

/* -v: what to do about a finding, on the line after it (nothing for an info). */
static void format_advice(struct scrub_ctx *ctx, const struct finding *f, struct strbuf *sb)
{
	struct advice_fs fs = report_advice_fs(ctx);

	if (!ctx->opt.verbose || advice_action(f->check, f->severity) == ADVICE_NONE)
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
	if (ctx->opt.debug)
		strbuf_addf(sb, " [%s:%d]", source_name(f->file), f->line);
	strbuf_addch(sb, '\n');
	format_advice(ctx, f, sb);
}

/* finding.subvol: the subvolume of dir (NULL: the mount root). */
static void finding_subvol(const struct scrub_ctx *ctx, const struct dir_node *dir,
			   struct finding *f)
{
	uint64_t root_dev = makedev(ctx->root_stx.stx_dev_major, ctx->root_stx.stx_dev_minor);

	if (!dir) {
		f->has_subvol = true;
		if (!stx_subvol(&ctx->root_stx, &f->subvol))
			f->subvol = 0;
		return;
	}
	f->has_subvol = dir->has_subvol || dir->dev == root_dev;
	f->subvol = dir->has_subvol ? dir->subvol : 0;
}

/* Hand a finding with its path and message made to every sink. */
static void deliver(struct scrub_ctx *ctx, const struct finding *f, bool print)
{
	struct strbuf line = STRBUF_INIT;

	if (print)
		format_text(ctx, f, &line);
	pthread_mutex_lock(&ctx->report_lock);
	if (print) {
		progress_clear_line(ctx);
		emit_line(ctx, &line);
	}
	if (ctx->json)
		json_report_finding(ctx, f);
	if (ctx->state)
		state_add_finding(ctx->state, f, check_is_content(f->check));
	checkpoint_note_finding(ctx->checkpoint, f);
	pthread_mutex_unlock(&ctx->report_lock);
	strbuf_release(&line);
}

static void vreport(struct scrub_ctx *ctx, struct finding *f, const struct dir_node *dir,
		    const char *name, const char *fmt, va_list ap)
{
	struct strbuf path = STRBUF_INIT, msg = STRBUF_INIT;
	bool print = count_finding(ctx, f);

	/* JSON and the state get every finding, infos too; text gets infos only with -v. */
	if (!print && !ctx->json && !ctx->state)
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
	deliver(ctx, f, count_finding(ctx, f));
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
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	atomic_fetch_add(&ctx->nr_operational, 1);
	strbuf_addstr(&sb, "fscrub: ");
	report_path(ctx, &sb, dir, name);
	strbuf_addstr(&sb, ": ");
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	if (err)
		strbuf_addf(&sb, ": %s", strerror(err));
	strbuf_addch(&sb, '\n');
	pthread_mutex_lock(&ctx->report_lock);
	fputs(sb.buf, stderr);
	pthread_mutex_unlock(&ctx->report_lock);
	strbuf_release(&sb);
}

static void vreport_text(struct scrub_ctx *ctx, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_vaddf(&sb, fmt, ap);
	strbuf_addch(&sb, '\n');
	pthread_mutex_lock(&ctx->report_lock);
	progress_clear_line(ctx);
	emit_line(ctx, &sb);
	pthread_mutex_unlock(&ctx->report_lock);
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

	if (!ctx->opt.verbose)
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

static const char *plural(unsigned long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

/* --portion, --time-budget: how much of the file data phase 5 covered. */
static void summary_regions(struct scrub_ctx *ctx, struct strbuf *sb)
{
	struct region_coverage c;

	if (!ctx->regions)
		return;
	regions_coverage(ctx->regions, &c);
	strbuf_addf(sb, " %zu of %zu %s with file data verified (%llu of %llu bytes).", c.done,
		    c.regions, ctx->regions->size ? plural(c.regions, "region", "regions") :
		    plural(c.regions, "bucket of files", "buckets of files"),
		    (unsigned long long)c.done_bytes, (unsigned long long)c.bytes);
	if (atomic_load(&ctx->budget_spent))
		strbuf_addstr(sb, " The time budget ended the data scan.");
	if (c.partial)
		strbuf_addf(sb, " %zu %s read in part: the next run goes on from there.", c.partial,
			    plural(c.partial, "region", "regions"));
}

/*
 * Findings that changed while being checked, neither errors nor cleared:
 * never hidden behind a quiet "0 errors" (the infos themselves print with -v).
 */
static void summary_unconfirmed(struct scrub_ctx *ctx, struct strbuf *sb)
{
	unsigned long long n = atomic_load(&ctx->nr_unconfirmed);

	if (n)
		strbuf_addf(sb, " %llu %s not be confirmed: the filesystem kept changing%s.", n,
			    plural(n, "finding could", "findings could"),
			    ctx->opt.verbose ? "" : " (-v lists them)");
}

void report_summary(struct scrub_ctx *ctx)
{
	struct strbuf sb = STRBUF_INIT;
	unsigned long long errors = atomic_load(&ctx->nr_errors);
	unsigned long long warnings = atomic_load(&ctx->nr_warnings);
	unsigned long long operr = atomic_load(&ctx->nr_operational);
	unsigned long long repaired = atomic_load(&ctx->nr_repaired);
	struct advice_fs fs = report_advice_fs(ctx);

	names_escape(&sb, ctx->mntpoint ? ctx->mntpoint : ctx->opt.target,
		     strlen(ctx->mntpoint ? ctx->mntpoint : ctx->opt.target));
	strbuf_addstr(&sb, ": ");
	/* Phase 1 gave up (-t names another type, ...): "0 errors found" would be a lie. */
	if (ctx->not_scanned && !scrub_cancelled) {
		strbuf_addstr(&sb, "the scan did not run: nothing was checked.");
		goto emit;
	}
	if (scrub_cancelled)
		strbuf_addstr(&sb, "scan cancelled; so far ");
	else if (atomic_load(&ctx->aborted))
		strbuf_addf(&sb, "stopped after %llu %s (-a); so far ",
			    ctx->opt.max_errors, plural(ctx->opt.max_errors, "error", "errors"));
	strbuf_addf(&sb, "%llu %s and %llu %s found.", errors,
		    plural(errors, "error", "errors"), warnings,
		    plural(warnings, "warning", "warnings"));
	if (repaired)
		strbuf_addf(&sb, " %llu %s repaired.", repaired,
			    plural(repaired, "problem", "problems"));
	advice_summary(&sb, atomic_load(&ctx->advice_actions), &fs);
	if (ctx->stats.xattr_unlisted)
		strbuf_addf(&sb, " %llu %s more attribute names than the VFS can list: "
			    "not checked.", ctx->stats.xattr_unlisted,
			    plural(ctx->stats.xattr_unlisted, "inode has", "inodes have"));
	if (ctx->opt.since && !ctx->ops->scan_data)
		strbuf_addf(&sb, " --since %s: %llu bytes read, %llu unchanged %s not read.",
			    ctx->opt.since, ctx->stats.bytes_read, ctx->stats.since_skipped,
			    plural(ctx->stats.since_skipped, "file", "files"));
	if (regions_mode(&ctx->opt))
		summary_regions(ctx, &sb);
	summary_unconfirmed(ctx, &sb);
	if (ctx->opt.verbose)
		strbuf_addf(&sb, " (%llu %s)", atomic_load(&ctx->nr_infos),
			    plural(atomic_load(&ctx->nr_infos), "info", "infos"));
	if (operr)
		strbuf_addf(&sb, " %llu operational %s: the scan is incomplete.",
			    operr, plural(operr, "error", "errors"));
emit:
	strbuf_addch(&sb, '\n');
	pthread_mutex_lock(&ctx->report_lock);
	progress_clear_line(ctx);
	emit_line(ctx, &sb);
	pthread_mutex_unlock(&ctx->report_lock);
	strbuf_release(&sb);
}

int report_exit_code(const struct scrub_ctx *ctx)
{
	int code = EXIT_CLEAN;

	if (atomic_load(&ctx->nr_errors))
		code |= EXIT_UNCORRECTED;
	else if (atomic_load(&ctx->nr_repaired))
		code |= EXIT_CORRECTED;
	if (atomic_load(&ctx->nr_operational) || ctx->output_failed || ctx->state_failed)
		code |= EXIT_OPERATIONAL;
	if (scrub_cancelled)
		code |= EXIT_CANCELLED;
	return code;
}

bool scrub_should_stop(const struct scrub_ctx *ctx)
{
	return scrub_cancelled || atomic_load(&ctx->aborted);
}
