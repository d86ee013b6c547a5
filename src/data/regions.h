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
 * them are read (devverify.h clips its read list; no read crosses a region
 * boundary).  A full -x by the device reads every region.
 *
 * --time-budget: the regions are read least recently read first (not in
 * device order: what the budget leaves unread is what was read last), with
 * or without --portion's choice, and phase 5 stops submitting reads when
 * the run has taken the budget (regions_budget_spent(); counted from the
 * start of the run, the metadata phases included, which always run in
 * full).  It is a planned partial scan, not a cancellation.
 *
 * Each region's reads are counted down as they complete: a region is read
 * to its end when all of them completed (a media error, found by
 * bisection, still counts: the region was read and its bad blocks
 * reported) and none failed otherwise.  The end of the run records those
 * regions as read now (history_end()) -- also when the budget, SIGINT or
 * SIGTERM stopped it part way -- but none for a run stopped by -a (the
 * next run reads them again).  A region read only in part (the budget or
 * a stop came in it) keeps the part: how far from its start every read
 * completed (read_to), recorded with the time of its first part; the next
 * run reads it from there (regions_read_from()), and when it ends its last
 * read is that first part's.  So a budget shorter than one region still
 * goes on from run to run.
 *
 * Where phase 5 reads file by file (btrfs, FUSE, tmpfs, network
 * filesystems, not root: devverify.h), --portion and --time-budget rotate
 * over files instead: each regular file falls in one of FILE_BUCKETS
 * buckets by a stable hash of its subvolume id and inode number
 * (regions_bucket_of(); neither changes from mount to mount, unlike
 * st_dev), and the buckets take the place of the regions in the same
 * table (state.h: length 0, start the bucket's number; allocated the
 * bytes of its files at the last such run).  --portion takes the
 * ceil(P % of FILE_BUCKETS) least recently read, so that runs of 25 %
 * read every file once in four runs; --time-budget reads them oldest
 * first in up to BUCKET_WALKS walks of the tree (files come in tree order,
 * so a bucket is read to its end only when a walk over all the files has
 * ended: more walks keep more of a budget's work, at the cost of reading
 * the directories again).  A bucket is recorded when the walk that read it
 * ended without an operational error.
 *
 * Layering: called by the device reader, phase 5 and the history; reads
 * ctx->xlinks and ctx->state, reports only through report_verbose().
 */
#ifndef FSCRUB_REGIONS_H
#define FSCRUB_REGIONS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct io_range;
struct scrub_ctx;
struct statx;
struct scrub_options;
struct strbuf;

#define REGION_MIN		(64ULL << 20)	/* the smallest region, bytes */
#define REGION_MAX_COUNT	1024		/* regions per device, at most */
/* Buckets of files: 25 % is 256 of them, so four runs take each once. */
#define FILE_BUCKETS		1024
/*
 * --time-budget by file: the tree is walked at most this many times, each
 * walk reading an eighth of the chosen buckets, oldest first.
 */
#define BUCKET_WALKS		8

struct region_plan {
	uint64_t size;		/* bytes per region; 0: FILE_BUCKETS buckets of files */
	size_t nr;		/* regions on the device */
	uint64_t *allocated;	/* file data bytes in each (shared extents: once each) */
	bool *chosen;		/* read by this run */
	size_t *rank;		/* reading order: by age with --time-budget, else by offset */
	unsigned *planned;	/* reads in the read list, per region */
	atomic_uint *pending;	/* ... not yet completed */
	atomic_bool *failed;	/* a read of it failed (not the media) or was cut short */
	bool *done;		/* read to its end by this run (regions_finish()) */
	uint64_t *skip;		/* bytes from its start read in part by a run before */
	uint64_t *read_to;	/* ... and by this one, further: > skip, else 0 */
	const struct io_range *reads;	/* the device reader's read list, in reading
					 * order, until regions_finish(); ... */
	size_t nr_reads;
	size_t *first;		/* ... region i's reads from first[i], planned[i] of them */
	atomic_bool *ok;	/* ... each read completed */
};

/* What phase 5 covered of the regions, for the summary and the JSON report. */
struct region_coverage {
	size_t regions, done;		/* regions with file data; of them read to their end */
	size_t partial;			/* ... read further in part, kept for the next run */
	uint64_t bytes, done_bytes;	/* their file data */
};

/* --portion or --time-budget: phase 5 reads by regions, a planned partial -x. */
bool regions_mode(const struct scrub_options *opt);

/* The region size for a device of dev_size bytes, before one is kept. */
uint64_t regions_default_size(uint64_t dev_size);

/*
 * Plan the regions phase 5 reads by the device: every region with file
 * data, or with --portion the least recently read (see above); sets
 * ctx->regions.  Without the run history it plans nothing and returns 0,
 * or with --portion -ENOENT and *why.
 */
int regions_plan(struct scrub_ctx *ctx, const char **why);

/*
 * Plan the buckets of files phase 5 reads file by file (see above); sets
 * ctx->regions.  Without the run history: -ENOENT and *why.
 */
int regions_plan_files(struct scrub_ctx *ctx, const char **why);
/*
 * The bucket of a regular file: splitmix64's finaliser of its subvolume
 * id (inokey.h; 0 without one) times the golden ratio, xor its inode
 * number, modulo FILE_BUCKETS.
 */
size_t regions_bucket_of(const struct statx *stx);

/* Is the device offset off in a chosen region?  True without a plan. */
bool regions_chosen(const struct region_plan *p, uint64_t off);
/*
 * Where the reads of off's region start: past the part a run before read
 * of it (its start if none); 0 without a plan.
 */
uint64_t regions_read_from(const struct region_plan *p, uint64_t off);

/*
 * The read list v (no read crosses a region boundary) is final: put it in
 * reading order (by rank, then offset) and count each region's reads.  v
 * is looked at again, to the regions read in part, until regions_finish().
 */
void regions_order_reads(struct region_plan *p, struct io_range *v, size_t n);
/* The read at device offset off completed (ok), or failed / was cut short. */
void regions_read_done(struct region_plan *p, uint64_t off, bool ok);
/*
 * The device reader is done; listed_all: it went through its whole read
 * list (regions without reads count as read only then).  Sets p->done, and
 * p->read_to for the regions read further in part.
 */
void regions_finish(struct region_plan *p, bool listed_all);
/* What the run covered: every region with file data, and those done. */
void regions_coverage(const struct region_plan *p, struct region_coverage *c);

/*
 * --time-budget: has the run taken its budget?  The first call that finds
 * so sets ctx->budget_spent and says so under -v.  False without a budget.
 * Thread-safe.
 */
bool regions_budget_spent(struct scrub_ctx *ctx);

/*
 * Record the regions read to their end as read now (0 if there is nothing
 * to record, or the run was stopped by -a); a message in err on failure.
 */
int regions_record(struct scrub_ctx *ctx, struct strbuf *err);

void region_plan_free(struct region_plan *p);

#endif
