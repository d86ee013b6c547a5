/*
 * Phase 2: check filesystem metadata.
 *
 * Only the backend knows its filesystem's metadata: this phase runs its
 * scan_metadata hook (XFS: the kernel's online scrub and the on-disk AG
 * headers and btrees; ext4: superblocks, group descriptors, bitmaps;
 * btrfs: the kernel's scrub of every device; generic: statfs counters).
 *
 * Reads: what phase 1 found (ctx->ops, ctx->backend and the mount).
 * Leaves: nothing for the core; a backend may keep what it read in its
 * own state for its later hooks.
 */
#include "scan/phase.h"

#include "backends/backend.h"
#include "scan/context.h"

int phase2_metadata(struct scrub_ctx *ctx, unsigned long long *items)
{
	(void)items;
	phase_run_hook(ctx, ctx->ops->scan_metadata, "metadata scan");
	return 0;
}
