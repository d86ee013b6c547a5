/*
 * metrics: Prometheus textfile output; see metrics.h.
 */
#include "scan/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backends/backend.h"
#include "report/advice.h"
#include "scan/context.h"
#include "lib/names.h"
#include "lib/outfile.h"
#include "store/state.h"
#include "lib/strbuf.h"
#include "report/report.h"

void metrics_add_label(struct strbuf *sb, const char *key, const char *value, bool comma)
{
	struct strbuf esc = STRBUF_INIT;

	names_escape(&esc, value ? value : "", value ? strlen(value) : 0);
	strbuf_addf(sb, "%s=\"", key);
	for (size_t i = 0; i < esc.len; i++) {
		if (esc.buf[i] == '\\' || esc.buf[i] == '"')
			strbuf_addch(sb, '\\');
		strbuf_addch(sb, esc.buf[i]);
	}
	strbuf_addstr(sb, comma ? "\"," : "\"");
	strbuf_release(&esc);
}

static void add_metric(struct strbuf *sb, const char *labels, const char *name,
		       const char *help, double value)
{
	strbuf_addf(sb, "# HELP fscrub_%s %s\n# TYPE fscrub_%s gauge\n", name, help, name);
	if (isinf(value))
		strbuf_addf(sb, "fscrub_%s{%s} %sInf\n", name, labels, value > 0 ? "+" : "-");
	else
		strbuf_addf(sb, "fscrub_%s{%s} %.15g\n", name, labels, value);
}

/*
 * The share of the file data in device regions (or buckets of files,
 * regions.h) read within 7, 30 and 90 days (cumulative, as "verified in
 * the last N days" reads); none until a -x run by the device, or a
 * --portion or --time-budget run by file, recorded them.
 */
static void add_shares(struct strbuf *body, const char *labels, const struct state_summary *sum)
{
	double within = 0;

	if (!sum->nr_regions)
		return;
	strbuf_addstr(body, "# HELP fscrub_data_verified_share Share of the file data (by "
		      "device region or bucket of files) read back within the last N days.\n"
		      "# TYPE fscrub_data_verified_share gauge\n");
	for (int b = STATE_AGE_7D; b <= STATE_AGE_90D; b++) {
		within += sum->region_share[b];
		strbuf_addf(body, "fscrub_data_verified_share{%s,within=\"%s\"} %.6g\n", labels,
			    state_age_name(b), within);
	}
}

/*
 * From the run history (state.h), this run included: what a single run's
 * figures cannot say.  Timestamps as node_exporter's textfile collector
 * and the ZFS exporters give them (Unix seconds, 0 for never); the age of
 * the data's last verification is +Inf when it never was, so an alert on
 * "> 30 days" fires for a filesystem never read back.
 */
static void add_history(struct scrub_ctx *ctx, struct strbuf *body, const char *labels,
			struct timespec now)
{
	struct state_fs fs = { .uuid = ctx->fs_uuid, .fsroot = ctx->fsroot ? ctx->fsroot : "/" };
	struct state_summary sum;
	double t = (double)now.tv_sec + (double)now.tv_nsec / 1e9;

	if (!ctx->state || !ctx->fs_uuid)
		return;
	if (state_summarise(ctx->state, &fs, &sum)) {
		state_summary_release(&sum);
		return;
	}
	add_metric(body, labels, "last_success_timestamp_seconds",
		   "When the last complete scrub ended (Unix time, 0: never).", sum.last_complete);
	add_metric(body, labels, "data_last_verified_timestamp_seconds",
		   "When the last complete scrub with -x ended (Unix time, 0: never).",
		   sum.last_data_verified);
	add_metric(body, labels, "data_verified_age_seconds",
		   "Seconds since all file data was last read back, by full -x runs or "
		   "by --portion runs together (+Inf: never).",
		   state_data_coverage(&sum) > 0 ? t - state_data_coverage(&sum) : INFINITY);
	add_shares(body, labels, &sum);
	strbuf_addstr(body, "# HELP fscrub_open_findings Findings still open (status: "
		      "of the last complete scrub and later ones).\n"
		      "# TYPE fscrub_open_findings gauge\n");
	strbuf_addf(body, "fscrub_open_findings{%s,severity=\"error\"} %llu\n", labels,
		    sum.open_errors);
	strbuf_addf(body, "fscrub_open_findings{%s,severity=\"warning\"} %llu\n", labels,
		    sum.open_warnings);
	add_metric(body, labels, "open_media_errors",
		   "Open errors of unreadable file data or device blocks (data.read, media.*).",
		   (double)sum.open_media_errors);
	/*
	 * A gauge, not a counter (hence no _total): it falls to 0 when a
	 * complete run starts after the events.
	 */
	add_metric(body, labels, "watch_events",
		   "Events of fscrub watch since the last complete scrub began.",
		   (double)sum.open_events);
	state_summary_release(&sum);
}

/*
 * What the last run's findings ask of the user (advice.h, fscrub(8) WHAT
 * TO DO): a series per action, 1 if a finding asked for it, so that an
 * alert can page for "restore files" or "replace the disk" apart from
 * "run the offline checker".
 */
static void add_actions(struct strbuf *body, const char *labels, unsigned actions)
{
	strbuf_addstr(body, "# HELP fscrub_last_run_action Actions the last scrub's findings "
		      "ask for: 1 if a finding asked for it (fscrub(8), WHAT TO DO).\n"
		      "# TYPE fscrub_last_run_action gauge\n");
	for (int a = ADVICE_NONE + 1; a < ADVICE_ACTIONS; a++)
		strbuf_addf(body, "fscrub_last_run_action{%s,action=\"%s\"} %d\n", labels,
			    advice_action_name((enum advice_action)a), !!(actions & (1u << a)));
}

/* Returns 0 or a positive errno. */
static int metrics_write(struct scrub_ctx *ctx, int exit_code, double duration)
{
	struct strbuf labels = STRBUF_INIT, body = STRBUF_INIT;
	struct outfile out;
	const struct scrub_stats *s = &ctx->stats;
	const char *path = ctx->opt.metrics_path;
	struct timespec now;
	int err;

	metrics_add_label(&labels, "mountpoint", ctx->mntpoint ? ctx->mntpoint : ctx->opt.target,
			  true);
	metrics_add_label(&labels, "fstype", ctx->fstype ? ctx->fstype : "unknown", true);
	metrics_add_label(&labels, "backend", ctx->ops ? ctx->ops->name : "none", false);
	clock_gettime(CLOCK_REALTIME, &now);
	add_metric(&body, labels.buf, "last_run_end_time_seconds",
		   "When the last scrub ended (Unix time).",
		   (double)now.tv_sec + (double)now.tv_nsec / 1e9);
	add_metric(&body, labels.buf, "last_run_duration_seconds",
		   "How long the last scrub took.", duration);
	add_metric(&body, labels.buf, "last_run_exit_code",
		   "fsck(8) exit code of the last scrub (0 clean, 1 repaired, 4 errors, "
		   "8 operational, "
		   "32 cancelled).", exit_code);
	add_metric(&body, labels.buf, "last_run_errors", "Errors found by the last scrub.",
		   (double)ctx->report.nr_errors);
	add_metric(&body, labels.buf, "last_run_warnings", "Warnings found by the last scrub.",
		   (double)ctx->report.nr_warnings);
	add_metric(&body, labels.buf, "last_run_repaired", "Problems the last scrub repaired.",
		   (double)ctx->report.nr_repaired);
	add_metric(&body, labels.buf, "last_run_operational_errors",
		   "Things the last scrub could not check.", (double)ctx->report.nr_operational);
	add_metric(&body, labels.buf, "last_run_inodes_checked",
		   "Inodes the last scrub checked.", (double)s->inodes);
	add_metric(&body, labels.buf, "last_run_bytes_checked",
		   "File data bytes the last scrub read back (-x).", (double)s->bytes_read);
	add_actions(&body, labels.buf, atomic_load(&ctx->report.advice_actions));

	add_history(ctx, &body, labels.buf, now);

	if (!(err = outfile_open(&out, path)) &&
	    fwrite(body.buf, 1, body.len, out.f) != body.len)
		err = errno ? -errno : -EIO;
	err = outfile_close(&out, err);
	strbuf_release(&labels);
	strbuf_release(&body);
	return -err;
}

static double elapsed_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

static int metrics_end(struct scrub_ctx *ctx, void *data, int exit_code, bool fatal)
{
	int err = metrics_write(ctx, exit_code, elapsed_since(data));

	(void)fatal;
	return report_output_end(exit_code, err, "metrics file", ctx->opt.metrics_path);
}

static const struct report_sink metrics_sink = {
	.name = "metrics",
	.end = metrics_end,
};

void metrics_register(struct scrub_ctx *ctx, struct timespec *start)
{
	report_add_sink(ctx, &metrics_sink, start);
}
