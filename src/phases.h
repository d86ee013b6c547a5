/*
 * phases: the scrub as the user sees it, one phase after another.
 *
 *   Phase 1: Find the filesystem (mount, type, backend, limits).
 *   Phase 2: Check filesystem metadata (the backend's own checks).
 *   Phase 3: Scan all inodes and the directory tree.
 *   Phase 4: Check link counts, back pointers and cross-linked blocks.
 *   Phase 5: Verify file data (only with -x).
 *   Phase 6: Check summary counters.
 *
 * Each phase is timed for -T (wall clock, user and system CPU, peak RSS
 * and items done).  A phase that cannot go on returns an exit code that
 * ends the run; findings never do (they are counted by report.c).
 */
#ifndef FSCRUB_PHASES_H
#define FSCRUB_PHASES_H

struct scrub_ctx;

/* Run every phase; returns 0, or the exit code (8, 16) of a fatal failure. */
int phases_run(struct scrub_ctx *ctx);

#endif
