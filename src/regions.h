/*
 * regions: the device regions of rotating media scans (-x --portion P%).
 *
 * The block device is cut into regions of a fixed size: the smallest
 * power-of-two multiple of REGION_MIN that makes at most REGION_MAX_COUNT
 * of them (64 MiB up to a 64 GiB device, 1 GiB for a 1 TiB one).  The
 * size is chosen on a filesystem's first -x run with the run history and
 * kept there (state.h, region_sizes) so that the regions stay the same
 * from run to run; FSCRUB_DEBUG_REGION_MB replaces it (tests).
 *
 * A --portion run reads the regions with file data least recently read
 * (never read first, then the oldest; ties by offset) until their file data
 * comes closest to P % of all of it -- at least one region -- so that runs
 * of P % cover the device in 100/P runs.  Only the data extents inside
 * them are read (devverify.h clips its read list).  A full -x by the
 * device reads every region.  When phase 5 read all it chose, the end of
 * the run records them as read now (history_end()); a run cancelled
 * (SIGINT/SIGTERM) or stopped (-a) records none, as does one whose phase 5
 * could not read them all (an operational error).
 *
 * Layering: called by the device reader and the history; reads
 * ctx->xlinks and ctx->state, reports only through report_verbose().
 */
#ifndef FSCRUB_REGIONS_H
#define FSCRUB_REGIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scrub_ctx;
struct strbuf;

#define REGION_MIN		(64ULL << 20)	/* the smallest region, bytes */
#define REGION_MAX_COUNT	1024		/* regions per device, at most */

struct region_plan {
	uint64_t size;		/* bytes per region */
	size_t nr;		/* regions on the device */
	uint64_t *allocated;	/* file data bytes in each (shared extents: once each) */
	bool *chosen;		/* read by this run */
	bool read;		/* phase 5 read every chosen region to its end */
};

/* The region size for a device of dev_size bytes, before one is kept. */
uint64_t regions_default_size(uint64_t dev_size);

/*
 * Plan the regions phase 5 reads by the device: every region with file
 * data, or with --portion the least recently read (see above); sets
 * ctx->regions.  Without the run history it plans nothing and returns 0,
 * or with --portion -ENOENT and *why.
 */
int regions_plan(struct scrub_ctx *ctx, const char **why);

/* Is the device offset off in a chosen region?  True without a plan. */
bool regions_chosen(const struct region_plan *p, uint64_t off);

/*
 * Record the chosen regions as read now, if phase 5 read them all (0 if
 * there is nothing to record); a message in err on failure.
 */
int regions_record(struct scrub_ctx *ctx, struct strbuf *err);

void region_plan_free(struct region_plan *p);

#endif
