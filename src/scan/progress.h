/*
 * progress: how far the scan is, for people and for programs.
 *
 * -C FD writes the line e2fsck -C and xfs_scrub -C write, about every half
 * second: "PHASE DONE TOTAL MOUNTPOINT".  When FD is a terminal it draws a
 * one-line bar instead (phase, percent, rate, ETA), at most four times a
 * second, erased at the end.  -v prints a status line every 10 seconds.
 *
 * Totals come from statfs before each phase: inodes in use for phase 3,
 * bytes in use for phase 5, so the percentage is honest from the start.
 * On a live filesystem the count can pass the total: DONE is held just
 * below TOTAL until the phase ends, when one line says DONE == TOTAL.
 * Where statfs has no inode count (btrfs), TOTAL is DONE + 1 until the end.
 *
 * A resumed run (checkpoint.h) starts phase 5 with what the stopped runs
 * verified (ctx->progress_base) counted as done; the rate is this run's
 * bytes over this run's time, so the ETA leaves out the time it was
 * stopped and the work it need not do again.
 *
 * A background thread does the writing; the scan only adds to one atomic
 * counter (progress_add(), context.h), so the walk never waits for a slow
 * terminal.
 */
#ifndef FSCRUB_PROGRESS_H
#define FSCRUB_PROGRESS_H

struct scrub_ctx;

/*
 * Start the reporter if -C or -v asks for one (after phase 1), and
 * register it with the report core (report.h): it clears its bar before
 * each line of the text report, and stops (erasing the bar) when the scan
 * is over, before the summary.
 */
int progress_start(struct scrub_ctx *ctx);
/* A phase begins: its number, title, total (0: unknown) and unit. */
void progress_phase(struct scrub_ctx *ctx, int phase, const char *title,
		    unsigned long long total, const char *unit);
/* The phase is over: a last line with DONE == TOTAL (how far it got if it was stopped). */
void progress_phase_end(struct scrub_ctx *ctx);

/* What the line shows of a phase: percent of total, items/s, seconds left (< 0: unknown). */
struct progress_figures {
	double percent, rate, eta;
};

/*
 * Pure arithmetic: base items done by earlier runs (a resume), done by this
 * one in elapsed seconds, of total (0: unknown).
 */
void progress_estimate(unsigned long long base, unsigned long long done,
		       unsigned long long total, double elapsed, struct progress_figures *out);

#endif
