/*
 * summary: the line that ends a scan's text report; see summary.h.
 *
 * It reads the whole run (the counters, the statistics, the regions of
 * phase 5, the options), so it lives with the phases rather than in the
 * report core, which only counts and prints.
 */
#include "scan/summary.h"

#include <string.h>

#include "backends/backend.h"
#include "data/regions.h"
#include "lib/names.h"
#include "lib/strbuf.h"
#include "report/advice.h"
#include "report/report.h"
#include "scan/context.h"

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
	unsigned long long n = atomic_load(&ctx->report.nr_unconfirmed);

	if (n)
		strbuf_addf(sb, " %llu %s not be confirmed: the filesystem kept changing%s.", n,
			    plural(n, "finding could", "findings could"),
			    ctx->opt.verbose ? "" : " (-v lists them)");
}

void summary_print(struct scrub_ctx *ctx)
{
	struct strbuf sb = STRBUF_INIT;
	unsigned long long errors = atomic_load(&ctx->report.nr_errors);
	unsigned long long warnings = atomic_load(&ctx->report.nr_warnings);
	unsigned long long operr = atomic_load(&ctx->report.nr_operational);
	unsigned long long repaired = atomic_load(&ctx->report.nr_repaired);
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
	else if (atomic_load(&ctx->report.aborted))
		strbuf_addf(&sb, "stopped after %llu %s (-a); so far ",
			    ctx->opt.max_errors, plural(ctx->opt.max_errors, "error", "errors"));
	strbuf_addf(&sb, "%llu %s and %llu %s found.", errors,
		    plural(errors, "error", "errors"), warnings,
		    plural(warnings, "warning", "warnings"));
	if (repaired)
		strbuf_addf(&sb, " %llu %s repaired.", repaired,
			    plural(repaired, "problem", "problems"));
	advice_summary(&sb, atomic_load(&ctx->report.advice_actions), &fs);
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
		strbuf_addf(&sb, " (%llu %s)", atomic_load(&ctx->report.nr_infos),
			    plural(atomic_load(&ctx->report.nr_infos), "info", "infos"));
	if (operr)
		strbuf_addf(&sb, " %llu operational %s: the scan is incomplete.",
			    operr, plural(operr, "error", "errors"));
emit:
	report_text(ctx, "%s", sb.buf);
	strbuf_release(&sb);
}
