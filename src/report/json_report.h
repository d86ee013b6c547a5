/*
 * json_report: --json FILE, the machine-readable report (json-c).
 *
 * The document is one object; findings are streamed into its "findings"
 * array as they are made, so memory does not grow with their number, and
 * the rest (phases, counts, statistics, exit code) is written at the end.
 * A regular FILE is written to FILE.tmp.PID and renamed over FILE when
 * complete, so a reader never sees half a report; a FIFO or a character
 * device is written in place (outfile.h).  "-" or /dev/stdout writes to
 * standard output, and the text report then goes to standard error.  The
 * schema is in fscrub(8).
 */
#ifndef FSCRUB_JSON_REPORT_H
#define FSCRUB_JSON_REPORT_H

struct scrub_ctx;
struct finding;

/*
 * Open the output (before phase 1; a FIFO blocks until it has a reader).
 * Returns 0 or a positive errno.
 */
int json_report_open(struct scrub_ctx *ctx);
/* Add a finding (called with the report lock held). */
void json_report_finding(struct scrub_ctx *ctx, const struct finding *f);
/*
 * Record a finished phase: began, seconds from the start of phase 1 to
 * the start of its wall time (phase 5's reads may begin during phase 3:
 * devverify.h), and its wall, user and system seconds.
 */
void json_report_phase(struct scrub_ctx *ctx, int number, const char *title, double began,
		       double wall, double user, double sys, unsigned long long items,
		       const char *unit);
/* Write the rest and close.  Returns 0 or a positive errno (exit bit 8). */
int json_report_finish(struct scrub_ctx *ctx, int exit_code);

#endif
