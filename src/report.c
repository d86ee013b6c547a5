/*
 * report: classify, count and print findings; compute the exit code.
 *
 * Paths are built only here, only when something is printed, from the
 * directory node chain: the walk itself never holds a full path.  Every
 * component is escaped (names.h) so a hostile name cannot forge a line.
 */
#include "report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "context.h"
#include "dircache.h"
#include "names.h"
#include "strbuf.h"

static const char *severity_label[] = {
	[SEV_INFO] = "Info",
	[SEV_WARNING] = "Warning",
	[SEV_ERROR] = "Error",
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

/* "src/walk.c" -> "walk.c", "src/backends/generic.c" -> "backends/generic.c" */
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
	if (fwrite(line->buf, 1, line->len, stdout) != line->len || fflush(stdout) != 0) {
		ctx->output_failed = true;
		fprintf(stderr, "fscrub: unable to write the report: %s\n", strerror(errno));
	}
}

void report_at(struct scrub_ctx *ctx, enum severity sev, const char *check,
	       const struct dir_node *dir, const char *name, uint64_t ino,
	       const char *file, int line, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	switch (sev) {
	case SEV_ERROR: {
		unsigned long long n = atomic_fetch_add(&ctx->nr_errors, 1) + 1;

		if (ctx->opt.max_errors && n >= ctx->opt.max_errors)
			atomic_store(&ctx->aborted, true);
		break;
	}
	case SEV_WARNING:
		atomic_fetch_add(&ctx->nr_warnings, 1);
		break;
	case SEV_INFO:
		atomic_fetch_add(&ctx->nr_infos, 1);
		if (!ctx->opt.verbose)
			return;
		break;
	}

	strbuf_addstr(&sb, severity_label[sev]);
	strbuf_addstr(&sb, ": ");
	report_path(ctx, &sb, dir, name);
	if (ino)
		strbuf_addf(&sb, " (inode %llu)", (unsigned long long)ino);
	strbuf_addstr(&sb, ": ");
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strbuf_addf(&sb, " [%s]", check);
	if (ctx->opt.debug)
		strbuf_addf(&sb, " [%s:%d]", source_name(file), line);
	strbuf_addch(&sb, '\n');

	pthread_mutex_lock(&ctx->report_lock);
	emit_line(ctx, &sb);
	pthread_mutex_unlock(&ctx->report_lock);
	strbuf_release(&sb);
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

void report_verbose(struct scrub_ctx *ctx, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	if (!ctx->opt.verbose)
		return;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	strbuf_addch(&sb, '\n');
	pthread_mutex_lock(&ctx->report_lock);
	emit_line(ctx, &sb);
	pthread_mutex_unlock(&ctx->report_lock);
	strbuf_release(&sb);
}

static const char *plural(unsigned long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

void report_summary(struct scrub_ctx *ctx)
{
	struct strbuf sb = STRBUF_INIT;
	unsigned long long errors = atomic_load(&ctx->nr_errors);
	unsigned long long warnings = atomic_load(&ctx->nr_warnings);
	unsigned long long operr = atomic_load(&ctx->nr_operational);
	const char *tool = ctx->ops && ctx->ops->repair_tool ? ctx->ops->repair_tool : "fsck";

	names_escape(&sb, ctx->mntpoint ? ctx->mntpoint : ctx->opt.target,
		     strlen(ctx->mntpoint ? ctx->mntpoint : ctx->opt.target));
	strbuf_addstr(&sb, ": ");
	if (scrub_cancelled)
		strbuf_addstr(&sb, "scan cancelled; so far ");
	else if (atomic_load(&ctx->aborted))
		strbuf_addf(&sb, "stopped after %llu %s (-a); so far ",
			    ctx->opt.max_errors, plural(ctx->opt.max_errors, "error", "errors"));
	strbuf_addf(&sb, "%llu %s and %llu %s found.", errors,
		    plural(errors, "error", "errors"), warnings,
		    plural(warnings, "warning", "warnings"));
	if (errors)
		strbuf_addf(&sb, " Unmount and run %s.", tool);
	if (ctx->opt.verbose)
		strbuf_addf(&sb, " (%llu %s)", atomic_load(&ctx->nr_infos),
			    plural(atomic_load(&ctx->nr_infos), "info", "infos"));
	if (operr)
		strbuf_addf(&sb, " %llu operational %s: the scan is incomplete.",
			    operr, plural(operr, "error", "errors"));
	strbuf_addch(&sb, '\n');
	pthread_mutex_lock(&ctx->report_lock);
	emit_line(ctx, &sb);
	pthread_mutex_unlock(&ctx->report_lock);
	strbuf_release(&sb);
}

int report_exit_code(const struct scrub_ctx *ctx)
{
	int code = EXIT_CLEAN;

	if (atomic_load(&ctx->nr_errors))
		code |= EXIT_UNCORRECTED;
	if (atomic_load(&ctx->nr_operational) || ctx->output_failed)
		code |= EXIT_OPERATIONAL;
	if (scrub_cancelled)
		code |= EXIT_CANCELLED;
	return code;
}

bool scrub_should_stop(const struct scrub_ctx *ctx)
{
	return scrub_cancelled || atomic_load(&ctx->aborted);
}
