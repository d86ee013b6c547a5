/*
 * summary: the summary line(s) at the end of a scan, on the text report:
 * the counts, then what to do, the most serious action first (advice.h),
 * then what the scan left out (attributes it could not list, files
 * --since did not read, --portion's regions, findings it could not
 * confirm) and its operational errors.
 */
#ifndef FSCRUB_SUMMARY_H
#define FSCRUB_SUMMARY_H

struct scrub_ctx;

void summary_print(struct scrub_ctx *ctx);

#endif
