/*
 * Phase 6: check summary counters.
 *
 * The filesystem-wide counters (free blocks and inodes, quota totals)
 * are judged last, against what the earlier phases counted; only the
 * backend knows where its counters are, so this phase runs its summary
 * hook.
 *
 * Reads: the backend's state and the totals in ctx->stats.  Leaves:
 * nothing.
 */
#include "scan/phase.h"

#include "backends/backend.h"
#include "scan/context.h"

int phase6_summary(struct scrub_ctx *ctx, unsigned long long *items)
{
	(void)items;
	phase_run_hook(ctx, ctx->ops->summary, "summary");
	return 0;
}
