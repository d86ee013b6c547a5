/*
 * history: the scan's side of the state store; see history.h.
 */
#include "history.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "context.h"
#include "ledger_store.h"
#include "names.h"
#include "report.h"
#include "state.h"
#include "strbuf.h"

const char *history_dir(const struct scrub_ctx *ctx)
{
	if (ctx->opt.no_state)
		return NULL;
	if (ctx->opt.state_dir)
		return ctx->opt.state_dir;
	return geteuid() == 0 ? STATE_DEFAULT_DIR : NULL;
}

static void history_failed(struct scrub_ctx *ctx, const struct strbuf *why)
{
	fprintf(stderr, "fscrub: cannot record the run: %s; the scan goes on unrecorded "
		"(--no-state: do not record)\n", why->buf);
	ctx->state_failed = true;
	state_close(ctx->state);
	ctx->state = NULL;
}

static double unix_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void history_open(struct scrub_ctx *ctx)
{
	const char *dir = history_dir(ctx);
	struct strbuf err = STRBUF_INIT;

	ctx->run_started = unix_now();
	if (!dir)
		return;
	/* The default directory is made on first use (systemd's StateDirectory= makes it too). */
	if (!ctx->opt.state_dir && mkdir(dir, 0700) < 0 && errno != EEXIST)
		strbuf_addf(&err, "cannot create '%s': %s", dir, strerror(errno));
	else if (!state_open(&ctx->state, dir, true, &err))
		return;
	history_failed(ctx, &err);
	strbuf_release(&err);
}

/* A path from the command line, made printable (valid UTF-8 for JSON) as the reports do. */
static json_object *escaped(const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	json_object *o;

	if (!s)
		return NULL;
	names_escape(&sb, s, strlen(s));
	o = json_object_new_string(sb.buf);
	strbuf_release(&sb);
	return o;
}

/* The options that change what a run covers, as a JSON object. */
static char *options_json(const struct scrub_ctx *ctx)
{
	const struct scrub_options *o = &ctx->opt;
	json_object *j = json_object_new_object();
	char *s;

	json_object_object_add(j, "target", escaped(o->target));
	json_object_object_add(j, "check_only", json_object_new_boolean(o->check_only));
	json_object_object_add(j, "verify_data", json_object_new_boolean(o->verify_data));
	json_object_object_add(j, "record", json_object_new_boolean(o->record));
	json_object_object_add(j, "ledger", escaped(o->ledger_dir));
	json_object_object_add(j, "manifest", escaped(o->manifest_path));
	json_object_object_add(j, "max_errors", json_object_new_int64((int64_t)o->max_errors));
	json_object_object_add(j, "limit", json_object_new_int64((int64_t)o->limit_rate));
	json_object_object_add(j, "background", json_object_new_boolean(o->background));
	json_object_object_add(j, "threads", json_object_new_int((int)o->nr_threads));
	s = xstrdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
	json_object_put(j);
	return s;
}

void history_begin(struct scrub_ctx *ctx)
{
	struct strbuf err = STRBUF_INIT;
	char uuid[48];
	struct state_run r = { 0 };

	if (!ctx->state)
		return;
	fs_identity(ctx->mnt_fd, uuid, sizeof(uuid));
	r = (struct state_run){
		.uuid = uuid, .fsroot = ctx->fsroot, .mountpoint = ctx->mntpoint, .source = ctx->source,
		.fstype = ctx->fstype, .backend = ctx->ops ? (char *)ctx->ops->name : NULL,
		.options = options_json(ctx), .version = FSCRUB_VERSION,
		.started = ctx->run_started, .verify_data = ctx->opt.verify_data,
	};
	if (state_run_begin(ctx->state, &r, &err)) {
		history_failed(ctx, &err);
	} else {
		ctx->run_id = r.id;
		ctx->fs_uuid = xstrdup(uuid);
	}
	free(r.options);
	strbuf_release(&err);
}

void history_phase(struct scrub_ctx *ctx, int phase, const char *title, double wall,
		   double user, double sys, unsigned long long items)
{
	if (ctx->state)
		state_add_phase(ctx->state, phase, title, wall, user, sys, items);
}

static const char *run_status(const struct scrub_ctx *ctx, bool fatal)
{
	if (scrub_cancelled)
		return "cancelled";
	if (atomic_load(&ctx->aborted))
		return "stopped";
	return fatal ? "failed" : "complete";
}

void history_end(struct scrub_ctx *ctx, int exit_code, bool fatal)
{
	struct strbuf err = STRBUF_INIT;
	struct state_run r;

	if (!ctx->state || !ctx->run_id)
		return;
	r = (struct state_run){
		.id = ctx->run_id, .ended = unix_now(), .status = (char *)run_status(ctx, fatal),
		.exit_code = exit_code, .backend = ctx->ops ? (char *)ctx->ops->name : NULL,
		.errors = atomic_load(&ctx->nr_errors), .warnings = atomic_load(&ctx->nr_warnings),
		.infos = atomic_load(&ctx->nr_infos), .repaired = atomic_load(&ctx->nr_repaired),
		.operational = atomic_load(&ctx->nr_operational), .inodes = ctx->stats.inodes,
		.bytes_verified = ctx->stats.bytes_read,
	};
	if (state_run_end(ctx->state, &r, &err))
		history_failed(ctx, &err);
	strbuf_release(&err);
}
