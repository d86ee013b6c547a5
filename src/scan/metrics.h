/*
 * metrics: --metrics FILE, the result of the run in Prometheus text format
 * for node_exporter's textfile collector.
 *
 * One sample per metric, labelled with the mount point, the filesystem
 * type and the backend, so one file per filesystem (or one directory of
 * them) feeds a dashboard and an alert on fscrub_last_run_exit_code.  A
 * regular file is written to FILE.tmp.PID and renamed over FILE, so the
 * collector never reads half of it; a FIFO, a character device or "-"
 * (standard output) is written in place (outfile.h).
 */
#ifndef FSCRUB_METRICS_H
#define FSCRUB_METRICS_H

struct scrub_ctx;

#include <stdbool.h>

struct strbuf;

/*
 * key="value" into sb (then a comma if comma): value made printable by
 * names_escape(), then \ and " escaped as the text format wants.  Also
 * for fscrub watch's --metrics.
 */
void metrics_add_label(struct strbuf *sb, const char *key, const char *value, bool comma);
/*
 * Register the metrics with the report core (report.h): the end of the
 * run writes them, with its duration from start (CLOCK_MONOTONIC, which
 * must outlive the run), and adds EXIT_OPERATIONAL if that fails.
 */
struct timespec;
void metrics_register(struct scrub_ctx *ctx, struct timespec *start);

#endif
