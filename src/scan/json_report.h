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

/*
 * Open the output (before phase 1; a FIFO blocks until it has a reader)
 * and register it with the report core (report.h): it takes every
 * finding, infos too, and each phase's times; the end of the run writes
 * the rest (phases, counts, statistics, exit code) and closes it, adding
 * EXIT_OPERATIONAL if that fails.  Returns 0 or a positive errno.
 */
int json_report_open(struct scrub_ctx *ctx);

#endif
