/*
 * phases: the scrub as the user sees it, one phase after another.
 *
 *   Phase 1: Find the filesystem (mount, type, backend, limits).  phase1.c
 *   Phase 2: Check filesystem metadata (the backend's own checks). phase2.c
 *   Phase 3: Scan all inodes and the directory tree.               phase3.c
 *   Phase 4: Check link counts, back pointers and cross-linked     phase4.c
 *            blocks.
 *   Phase 5: Verify file data (only with -x).                      phase5.c
 *   Phase 6: Check summary counters.                               phase6.c
 *
 * Each phase is timed for -T (wall clock, user and system CPU, peak RSS
 * and items done).  A phase that cannot go on returns an exit code that
 * ends the run; findings never do (they are counted by report.c).
 */
#ifndef FSCRUB_PHASES_H
#define FSCRUB_PHASES_H

struct scrub_ctx;

/*
 * Run every phase, then phases_release(); returns 0, or the exit code
 * (8, 16) of a fatal failure.  Afterwards ctx holds only what the report
 * needs: the options, the mount's names and the counters.
 */
int phases_run(struct scrub_ctx *ctx);

/*
 * Release what the phases made for each other (context.h, "Products")
 * and the backend's state (its cleanup hook; ctx->ops stays, for the
 * reports).  Safe after any phase, and twice.
 */
void phases_release(struct scrub_ctx *ctx);

/*
 * After report_run_end(): release what the run's outputs kept to the end
 * -- the run history's store, the region plan, the checkpoint (the
 * history's end records both).  Here, not in scrub_ctx_release(), so that
 * the context knows none of their modules (each reads the context).
 */
void run_outputs_release(struct scrub_ctx *ctx);

#endif
