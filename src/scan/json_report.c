/*
 * json_report: the streamed JSON report; see json_report.h.
 */
#include "scan/json_report.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/advice.h"
#include "backends/backend.h"
#include "data/checkpoint.h"
#include "scan/context.h"
#include "lib/jsonfmt.h"
#include "lib/outfile.h"
#include "data/regions.h"
#include "report/report.h"
#include "lib/strbuf.h"

struct json_report {
	struct outfile out;
	FILE *f;		/* out.f */
	bool began;		/* the header and "findings": [ are out */
	unsigned long long nr_findings;
	json_object *phases;
	char started[32];
	int err;		/* first write error (errno) */
};

/* The report core's handle on the JSON report (report.h), defined at the end. */
static const struct report_sink json_report_sink;

static const char *severity_name[] = {
	[SEV_INFO] = "info", [SEV_WARNING] = "warning", [SEV_ERROR] = "error",
	[SEV_REPAIRED] = "repaired",
};

static void iso8601_now(char *buf, size_t size)
{
	iso8601_utc(time(NULL), buf, size);
}

static void put(struct json_report *j, const char *s)
{
	if (!j->err && fputs(s, j->f) == EOF)
		j->err = errno ? errno : EIO;
}

/* Write "key":value, and free the value. */
static void put_member(struct json_report *j, const char *key, json_object *v, bool comma)
{
	json_object *k = json_object_new_string(key);

	put(j, json_object_to_json_string_ext(k, JSON_C_TO_STRING_PLAIN));
	put(j, ":");
	put(j, v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN) : "null");
	if (comma)
		put(j, ",");
	json_object_put(k);
	json_object_put(v);
}

int json_report_open(struct scrub_ctx *ctx)
{
	struct json_report *j = xcalloc(1, sizeof(*j));
	int err = outfile_open(&j->out, ctx->opt.json_path);

	if (err) {
		free(j);
		return -err;
	}
	j->f = j->out.f;
	if (outfile_is_stdout(&j->out))
		ctx->report.text_out = stderr;	/* standard output is the JSON's alone */
	j->phases = json_object_new_array();
	iso8601_now(j->started, sizeof(j->started));
	report_add_sink(ctx, &json_report_sink, j);
	return 0;
}

static void begin(struct scrub_ctx *ctx, struct json_report *j)
{
	json_object *fs = json_object_new_object();
	json_object *opt = json_object_new_object();

	j->began = true;
	json_object_object_add(fs, "mountpoint", json_escaped_string(ctx->mntpoint));
	json_object_object_add(fs, "source", json_escaped_string(ctx->source));
	json_object_object_add(fs, "type", json_escaped_string(ctx->fstype));
	json_object_object_add(fs, "fsroot", json_escaped_string(ctx->fsroot));
	json_object_object_add(opt, "target", json_escaped_string(ctx->opt.target));
	json_object_object_add(opt, "check_only", json_object_new_boolean(ctx->opt.check_only));
	json_object_object_add(opt, "verify_data", json_object_new_boolean(ctx->opt.verify_data));
	json_object_object_add(opt, "background", json_object_new_boolean(ctx->opt.background));
	json_object_object_add(opt, "threads", json_object_new_int((int)ctx->opt.nr_threads));
	json_object_object_add(opt, "max_errors",
			       json_object_new_int64((int64_t)ctx->opt.max_errors));
	put(j, "{");
	put_member(j, "fscrub_version", json_object_new_string(FSCRUB_VERSION), true);
	put_member(j, "started", json_object_new_string(j->started), true);
	put_member(j, "filesystem", ctx->mntpoint ? fs : NULL, true);
	if (!ctx->mntpoint)
		json_object_put(fs);
	put_member(j, "backend", ctx->ops ? json_object_new_string(ctx->ops->name) : NULL, true);
	put_member(j, "options", opt, true);
	put(j, "\"findings\":[");
}

/* What to do about f (advice.h): "action" and "advice". */
static void finding_advice(const struct scrub_ctx *ctx, const struct finding *f, json_object *o)
{
	struct advice_fs fs = report_advice_fs(ctx);
	struct strbuf sb = STRBUF_INIT;

	advice_text(&sb, f->check, f->severity, &fs);
	json_object_object_add(o, "action", json_object_new_string(
				       advice_action_name(advice_action(f->check, f->severity))));
	json_object_object_add(o, "advice", json_object_new_string(sb.buf));
	strbuf_release(&sb);
}

static void json_report_finding(struct scrub_ctx *ctx, void *data, const struct finding *f)
{
	struct json_report *j = data;
	json_object *o = json_object_new_object();

	if (!j->began)
		begin(ctx, j);
	json_object_object_add(o, "severity", json_object_new_string(severity_name[f->severity]));
	json_object_object_add(o, "check", json_object_new_string(f->check));
	json_object_object_add(o, "path", json_object_new_string(f->path));
	json_object_object_add(o, "inode", f->ino ? json_object_new_int64((int64_t)f->ino) : NULL);
	json_object_object_add(o, "offset",
			       f->has_range ? json_object_new_int64((int64_t)f->offset) : NULL);
	json_object_object_add(o, "length",
			       f->has_range ? json_object_new_int64((int64_t)f->length) : NULL);
	json_object_object_add(o, "message", json_object_new_string(f->message));
	/* changed while being checked: neither an error nor cleared (report.h) */
	json_object_object_add(o, "unconfirmed", json_object_new_boolean(f->unconfirmed));
	finding_advice(ctx, f, o);
	if (j->nr_findings++)
		put(j, ",");
	put(j, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

static void json_report_phase(struct scrub_ctx *ctx, void *data, const struct phase_record *p)
{
	struct json_report *j = data;
	json_object *o = json_object_new_object();

	(void)ctx;
	json_object_object_add(o, "number", json_object_new_int(p->number));
	json_object_object_add(o, "title", json_object_new_string(p->title));
	json_object_object_add(o, "began_seconds", json_object_new_double(p->began));
	json_object_object_add(o, "wall_seconds", json_object_new_double(p->wall));
	json_object_object_add(o, "user_seconds", json_object_new_double(p->user));
	json_object_object_add(o, "system_seconds", json_object_new_double(p->sys));
	json_object_object_add(o, "items", json_object_new_int64((int64_t)p->items));
	json_object_object_add(o, "unit", json_object_new_string(p->unit));
	json_object_array_add(j->phases, o);
}

static json_object *counts_object(const struct scrub_ctx *ctx)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "errors", json_object_new_int64((int64_t)ctx->report.nr_errors));
	json_object_object_add(o, "warnings", json_object_new_int64((int64_t)ctx->report.nr_warnings));
	json_object_object_add(o, "infos", json_object_new_int64((int64_t)ctx->report.nr_infos));
	json_object_object_add(o, "unconfirmed",
			       json_object_new_int64((int64_t)ctx->report.nr_unconfirmed));
	json_object_object_add(o, "operational",
			       json_object_new_int64((int64_t)ctx->report.nr_operational));
	json_object_object_add(o, "repaired", json_object_new_int64((int64_t)ctx->report.nr_repaired));
	return o;
}

static json_object *stats_object(const struct scrub_stats *s)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "directories", json_object_new_int64((int64_t)s->dirs));
	json_object_object_add(o, "files", json_object_new_int64((int64_t)s->files));
	json_object_object_add(o, "symlinks", json_object_new_int64((int64_t)s->symlinks));
	json_object_object_add(o, "special_files", json_object_new_int64((int64_t)s->specials));
	json_object_object_add(o, "inodes", json_object_new_int64((int64_t)s->inodes));
	json_object_object_add(o, "extents", json_object_new_int64((int64_t)s->extents));
	json_object_object_add(o, "xattrs", json_object_new_int64((int64_t)s->xattrs));
	json_object_object_add(o, "xattr_values", json_object_new_int64((int64_t)s->xattr_values));
	json_object_object_add(o, "xattrs_unlisted",
			       json_object_new_int64((int64_t)s->xattr_unlisted));
	json_object_object_add(o, "names", json_object_new_int64((int64_t)s->names));
	json_object_object_add(o, "bytes_read", json_object_new_int64((int64_t)s->bytes_read));
	json_object_object_add(o, "files_unchanged_not_read",
			       json_object_new_int64((int64_t)s->since_skipped));
	return o;
}

/* --portion, --time-budget: what phase 5 covered of the regions; null otherwise. */
static json_object *regions_object(struct scrub_ctx *ctx)
{
	json_object *o;
	struct region_coverage c;

	if (!regions_mode(&ctx->opt) || !ctx->regions)
		return NULL;
	regions_coverage(ctx->regions, &c);
	o = json_object_new_object();
	json_object_object_add(o, "region_size", json_object_new_int64((int64_t)ctx->regions->size));
	json_object_object_add(o, "regions", json_object_new_int64((int64_t)c.regions));
	json_object_object_add(o, "regions_verified", json_object_new_int64((int64_t)c.done));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)c.bytes));
	json_object_object_add(o, "bytes_verified", json_object_new_int64((int64_t)c.done_bytes));
	json_object_object_add(o, "time_budget", ctx->opt.time_budget ?
			       json_object_new_int64((int64_t)ctx->opt.time_budget) : NULL);
	json_object_object_add(o, "budget_spent",
			       json_object_new_boolean(atomic_load(&ctx->budget_spent)));
	return o;
}

/* The run's most serious action and the summary's advice (null: nothing to do). */
static void put_action(struct scrub_ctx *ctx, struct json_report *j)
{
	unsigned actions = atomic_load(&ctx->report.advice_actions);
	struct advice_fs fs = report_advice_fs(ctx);
	struct strbuf sb = STRBUF_INIT;

	advice_summary(&sb, actions, &fs);
	put_member(j, "action", json_object_new_string(advice_action_name(advice_worst(actions))),
		   true);
	/* advice_summary() starts each sentence with a space. */
	put_member(j, "advice", sb.len ? json_object_new_string(sb.buf + 1) : NULL, true);
	strbuf_release(&sb);
}

/* Write the rest and close.  Returns 0 or a positive errno (exit bit 8). */
static int finish(struct scrub_ctx *ctx, struct json_report *j, int exit_code)
{
	char finished[32];

	if (!j->began)
		begin(ctx, j);
	iso8601_now(finished, sizeof(finished));
	put(j, "],");
	put_member(j, "phases", j->phases, true);
	put_member(j, "counts", counts_object(ctx), true);
	put_action(ctx, j);
	put_member(j, "stats", stats_object(&ctx->stats), true);
	put_member(j, "data_regions", regions_object(ctx), true);
	put_member(j, "cancelled", json_object_new_boolean(scrub_cancelled), true);
	if (ctx->opt.resume)
		put_member(j, "resume", checkpoint_json(ctx), true);
	put_member(j, "finished", json_object_new_string(finished), true);
	put_member(j, "exit_code", json_object_new_int(exit_code), false);
	put(j, "}\n");
	return -outfile_close(&j->out, -j->err);
}

static int json_report_end(struct scrub_ctx *ctx, void *data, int exit_code, bool fatal)
{
	struct json_report *j = data;
	int err = finish(ctx, j, exit_code);

	(void)fatal;
	report_remove_sink(ctx, &json_report_sink);
	free(j);
	return report_output_end(exit_code, err, "JSON report", ctx->opt.json_path);
}

static const struct report_sink json_report_sink = {
	.name = "json",
	.every_finding = true,
	.finding = json_report_finding,
	.phase = json_report_phase,
	.end = json_report_end,
};
