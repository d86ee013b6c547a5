/*
 * history: the scan's side of the state store; see history.h.
 */
#include "scan/history.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "data/checkpoint.h"
#include "scan/context.h"
#include "lib/inokey.h"
#include "data/ledger_store.h"
#include "lib/jsonfmt.h"
#include "data/regions.h"
#include "report/report.h"
#include "store/state.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

const char *history_dir(const struct scrub_ctx *ctx)
{
	if (ctx->opt.no_state)
		return NULL;
	if (ctx->opt.state_dir)
		return ctx->opt.state_dir;
	return geteuid() == 0 ? state_default_dir() : NULL;
}

/* The report core's handle on the run history (report.h), defined below. */
static const struct report_sink history_sink;

static void history_failed(struct scrub_ctx *ctx, const struct strbuf *why)
{
	fprintf(stderr, "fscrub: cannot record the run: %s; the scan goes on unrecorded "
		"(--no-state: do not record)\n", why->buf);
	ctx->report.record_failed = true;
	report_remove_sink(ctx, &history_sink);
	state_close(ctx->state);
	ctx->state = NULL;
}

static double unix_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* When history_open() was called (Unix time): the run's start, in its row. */
static double run_started;

void history_open(struct scrub_ctx *ctx)
{
	const char *dir = history_dir(ctx);
	struct strbuf err = STRBUF_INIT;

	run_started = unix_now();
	if (!dir)
		return;
	if (!state_open_write(&ctx->state, dir, !ctx->opt.state_dir, &err)) {
		report_add_sink(ctx, &history_sink, NULL);
		return;
	}
	history_failed(ctx, &err);
	strbuf_release(&err);
}

/* The options that change what a run covers, as a JSON object. */
static char *options_json(const struct scrub_ctx *ctx)
{
	const struct scrub_options *o = &ctx->opt;
	json_object *j = json_object_new_object();
	char *s;

	json_object_object_add(j, "target", json_escaped_string(o->target));
	json_object_object_add(j, "check_only", json_object_new_boolean(o->check_only));
	json_object_object_add(j, "verify_data", json_object_new_boolean(o->verify_data));
	json_object_object_add(j, "record", json_object_new_boolean(o->record));
	json_object_object_add(j, "ledger", json_escaped_string(o->ledger_dir));
	json_object_object_add(j, "manifest", json_escaped_string(o->manifest_path));
	json_object_object_add(j, "since", json_escaped_string(o->since));
	json_object_object_add(j, "portion", json_object_new_int((int)o->portion));
	json_object_object_add(j, "time_budget", json_object_new_int64((int64_t)o->time_budget));
	json_object_object_add(j, "resume", json_object_new_boolean(o->resume));
	json_object_object_add(j, "max_errors", json_object_new_int64((int64_t)o->max_errors));
	json_object_object_add(j, "limit", json_object_new_int64((int64_t)o->limit_rate));
	json_object_object_add(j, "background", json_object_new_boolean(o->background));
	json_object_object_add(j, "threads", json_object_new_int((int)o->nr_threads));
	s = xstrdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
	json_object_put(j);
	return s;
}

/* Sort v (n of size sz) and drop repeats; the number left. */
static size_t sort_unique(void *v, size_t n, size_t sz, int (*cmp)(const void *, const void *))
{
	char *b = v;
	size_t w = 0;

	sort_items(v, n, sz, cmp);
	for (size_t i = 0; i < n; i++)
		if (!w || cmp(b + (w - 1) * sz, b + i * sz))
			memmove(b + w++ * sz, b + i * sz, sz);
	return w;
}

/*
 * --rescan-errors: the files phase 5 is to read, those with open content
 * findings (state.h).  A finding keeps its file's subvolume (report.h,
 * finding.subvol), not the st_dev, which btrfs hands out anew on each
 * mount: the mount's own subvolume (its id, or 0) is read by the mount's
 * st_dev (ctx->rescan), the others by their subvolume id, which the
 * per-file reader compares with each file's (ctx->rescan_sv).  Findings
 * whose subvolume is not known are not read again: they stay open until a
 * full -x.
 */
static void load_rescan(struct scrub_ctx *ctx, const struct state_fs *fs)
{
	struct ino_key root = ino_key_of(&ctx->root_stx);
	uint64_t root_sv = 0;
	struct subvol_ino *files = NULL;
	size_t n = 0, unknown = 0, nr = 0, nsv = 0;

	if (state_open_content_files(ctx->state, fs, &files, &n, &unknown)) {
		report_operational(ctx, NULL, NULL, 0, "cannot read the open findings from the "
				   "state database '%s'", state_path(ctx->state));
		return;
	}
	n = sort_unique(files, n, sizeof(*files), subvol_ino_cmp);
	stx_subvol(&ctx->root_stx, &root_sv);
	ctx->rescan = xmalloc((n + 1) * sizeof(*ctx->rescan));
	ctx->rescan_sv = xmalloc((n + 1) * sizeof(*ctx->rescan_sv));
	for (size_t i = 0; i < n; i++) {
		if (files[i].subvol == 0 || files[i].subvol == root_sv)
			ctx->rescan[nr++] = (struct ino_key){ .dev = root.dev, .ino = files[i].ino };
		else
			ctx->rescan_sv[nsv++] = files[i];
	}
	ctx->nr_rescan = sort_unique(ctx->rescan, nr, sizeof(*ctx->rescan), ino_key_cmp);
	ctx->nr_rescan_sv = nsv;
	state_set_rescanned(ctx->state, files, n);
	free(files);
	report_verbose(ctx, "Phase 1: --rescan-errors: files with open findings: %zu", n);
	if (unknown)
		report_verbose(ctx, "Phase 1: --rescan-errors: %zu open findings in files of an "
			       "unknown subvolume are not read again", unknown);
}

void history_begin(struct scrub_ctx *ctx)
{
	struct strbuf err = STRBUF_INIT;
	char uuid[48];
	struct state_run r = { 0 };

	if (!ctx->state) {
		if (ctx->opt.rescan_errors)
			report_operational(ctx, NULL, NULL, 0, "--rescan-errors: no run history, "
					   "no file is read again");
		return;
	}
	fs_identity(ctx->mnt_fd, uuid, sizeof(uuid));
	r = (struct state_run){
		.uuid = uuid, .fsroot = ctx->fsroot, .mountpoint = ctx->mntpoint, .source = ctx->source,
		.fstype = ctx->fstype, .backend = ctx->ops ? (char *)ctx->ops->name : NULL,
		.options = options_json(ctx), .version = FSCRUB_VERSION,
		.started = run_started, .verify_data = ctx->opt.verify_data,
		.rescan = ctx->opt.rescan_errors, .since = ctx->opt.since != NULL,
		.portion = regions_mode(&ctx->opt),
	};
	if (state_run_begin(ctx->state, &r, &err)) {
		history_failed(ctx, &err);
	} else {
		struct state_fs fs = { .uuid = uuid, .fsroot = ctx->fsroot ? ctx->fsroot : "/" };

		ctx->run_id = r.id;
		ctx->fs_uuid = xstrdup(uuid);
		if (ctx->opt.rescan_errors)
			load_rescan(ctx, &fs);
		checkpoint_begin(ctx);
	}
	free(r.options);
	strbuf_release(&err);
}

/* Every finding, infos too, under the report lock. */
static void history_finding(struct scrub_ctx *ctx, void *data, const struct finding *f)
{
	(void)data;
	state_add_finding(ctx->state, f, check_is_content(f->check));
}

static void history_phase(struct scrub_ctx *ctx, void *data, const struct phase_record *p)
{
	(void)data;
	state_add_phase(ctx->state, p->number, p->title, p->wall, p->user, p->sys, p->items);
}

/*
 * A run that went to its end with operational errors (a directory it could
 * not open, a file it could not read: "the scan is incomplete") is
 * 'incomplete': it did not look at everything, so it neither counts as a
 * complete run (nor a data verification) nor closes what an earlier
 * complete run found.
 */
static const char *run_status(const struct scrub_ctx *ctx, bool fatal)
{
	if (scrub_cancelled)
		return "cancelled";
	if (atomic_load(&ctx->report.aborted))
		return "stopped";
	if (fatal)
		return "failed";
	return atomic_load(&ctx->report.nr_operational) ? "incomplete" : "complete";
}

/* After the summary, before the metrics (which read the store). */
static int history_end(struct scrub_ctx *ctx, void *data, int exit_code, bool fatal)
{
	struct strbuf err = STRBUF_INIT;
	struct state_run r;

	(void)data;
	if (!ctx->run_id)
		return exit_code;
	r = (struct state_run){
		.id = ctx->run_id, .ended = unix_now(), .status = (char *)run_status(ctx, fatal),
		.exit_code = exit_code, .backend = ctx->ops ? (char *)ctx->ops->name : NULL,
		.errors = atomic_load(&ctx->report.nr_errors), .warnings = atomic_load(&ctx->report.nr_warnings),
		.infos = atomic_load(&ctx->report.nr_infos), .repaired = atomic_load(&ctx->report.nr_repaired),
		.operational = atomic_load(&ctx->report.nr_operational), .inodes = ctx->stats.inodes,
		.bytes_verified = ctx->stats.bytes_read,
		.unconfirmed = atomic_load(&ctx->report.nr_unconfirmed),
	};
	if (regions_record(ctx, &err) || checkpoint_end(ctx, r.status, &err) ||
	    state_run_end(ctx->state, &r, &err))
		history_failed(ctx, &err);
	strbuf_release(&err);
	return exit_code;
}

static const struct report_sink history_sink = {
	.name = "history",
	.every_finding = true,
	.finding = history_finding,
	.phase = history_phase,
	.end = history_end,
};
