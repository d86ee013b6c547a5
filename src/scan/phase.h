/*
 * phase: what each phase file offers the phase runner (phases.c), and the
 * one helper they share.  Nothing but phases.c and the phase files
 * include this; main.c sees only phases.h.
 *
 * Every phase takes the context and a counter for -T (*items: what the
 * phase counted, in the unit the phase table names), and returns 0 or the
 * exit code (8, 16) of a failure that ends the run.  Findings never end a
 * run: report.c counts them.  What a phase leaves for later ones is a
 * field of struct scrub_ctx under "Products" (context.h), made by the
 * phase that produces it and released by phases_release(), whatever
 * phase the run stopped in.
 */
#ifndef FSCRUB_PHASE_H
#define FSCRUB_PHASE_H

struct scrub_ctx;

/* Phase 1: find the filesystem (phase1.c). */
int phase1_find_fs(struct scrub_ctx *ctx, unsigned long long *items);
/* Phase 2: check filesystem metadata (phase2.c). */
int phase2_metadata(struct scrub_ctx *ctx, unsigned long long *items);
/* Phase 3: scan all inodes and the directory tree (phase3.c). */
int phase3_inodes(struct scrub_ctx *ctx, unsigned long long *items);
/* Phase 4: link counts, back pointers and cross-linked blocks (phase4.c). */
int phase4_links(struct scrub_ctx *ctx, unsigned long long *items);
/* Phase 5: verify file data, only with -x (phase5.c). */
int phase5_data(struct scrub_ctx *ctx, unsigned long long *items);
/* Phase 6: check summary counters (phase6.c). */
int phase6_summary(struct scrub_ctx *ctx, unsigned long long *items);

/*
 * Run a backend hook (NULL: nothing to do).  Its failure is an
 * operational error, "BACKEND backend: WHAT", and the run goes on.
 */
void phase_run_hook(struct scrub_ctx *ctx, int (*hook)(struct scrub_ctx *), const char *what);

#endif
