/*
 * checkpoint: resumable runs (--resume).
 *
 * A run that is stopped (SIGINT, SIGTERM: systemctl stop) leaves a
 * checkpoint in the state store (state.h, table checkpoints), one per
 * filesystem UUID and mount root, like the runs: the run, the phase it was
 * in, the options the work depends on, and the data scan's cursor:
 *
 *   device reader  every device offset below a watermark is verified (all
 *                  reads of the read list before it completed), and a few
 *                  reads above it completed out of order (several are in
 *                  flight); with the media errors found in them, as device
 *                  ranges, not yet reported (mediamap reports at the end)
 *   per-file reader the files read to their end, and their content
 *                  findings (data.read, ledger.*) as reported
 *
 * It is saved from the data scan's own completions, at most every
 * CHECKPOINT_INTERVAL_MS (FSCRUB_DEBUG_CHECKPOINT_MS shortens it for the
 * tests), and at the end of a stopped run; never from a signal handler.
 * A run that completes deletes it.
 *
 * --resume: a checkpoint of the same filesystem whose options key is this
 * run's, of the same device size and at most CHECKPOINT_MAX_AGE old is
 * resumed; otherwise the run starts from the beginning and says why.
 * Phases 1 to 4 always run again in full (phase 4 needs phase 3's tables,
 * which are not kept); phase 5 does not read what the cursor covers, and
 * reports what was found there before the stop as an uninterrupted run
 * would: the saved media errors go through mediamap again (the same
 * second look through the file), the per-file findings are replayed.  A
 * device scan whose files the checksum ledger judges (records to compare
 * or to write) starts over: a file's digest needs all of its bytes; so
 * does a --portion scan (the regions a stopped run read are the run
 * history's, regions.h).  As in any live scan, data written behind the
 * cursor after the stop is not read.
 *
 * Threads: checkpoint_dev_done(), checkpoint_file_done() and
 * checkpoint_tick() from any reader thread; checkpoint_note_finding()
 * under report.c's lock.  A save takes report.c's lock (the state store is
 * not thread-safe), then the checkpoint's.
 *
 * Layering: called by history.c (begin, end), phases.c (the phase) and
 * the readers; a sink of the report core (report.h), which hands it the
 * findings; uses state.h and the context, reports through report.h only.
 */
#ifndef FSCRUB_CHECKPOINT_H
#define FSCRUB_CHECKPOINT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/inokey.h"

struct scrub_ctx;
struct checkpoint;
struct finding;
struct strbuf;
struct io_range;
struct bad_range;

/* At most one save every 30 s: a save costs a transaction, the loss a 30 s re-read. */
#define CHECKPOINT_INTERVAL_MS	30000
/*
 * A checkpoint older than a week is stale: the weekly timer would have
 * started a new run by then, and a week of writes lies behind its cursor.
 */
#define CHECKPOINT_MAX_AGE	(7 * 86400.0)

/*
 * After the run's row (history_begin()): set up ctx->checkpoint when the
 * run is recorded, and with --resume load the checkpoint and say on stderr
 * (and with -v) whether it is resumed and why not.
 */
void checkpoint_begin(struct scrub_ctx *ctx);
/* A phase begins (phases.c); phase 5 of a resumed run replays its findings. */
void checkpoint_phase(struct scrub_ctx *ctx, int phase);
/* Save if the last save is CHECKPOINT_INTERVAL_MS old (any thread; cheap otherwise). */
void checkpoint_tick(struct scrub_ctx *ctx);
/*
 * The run ends (history_end()): cancelled, save; complete, delete; else
 * leave the checkpoint as it is.  0, or -EIO with a message in err.
 */
int checkpoint_end(struct scrub_ctx *ctx, const char *status, struct strbuf *err);
void checkpoint_free(struct checkpoint *cp);

/* For the JSON report: {"requested", "resumed", "run", "phase", "percent", ...}. */
json_object *checkpoint_json(const struct scrub_ctx *ctx);
/*
 * Phase 5 of a resumed run begins: say once (stderr, and -v) whether it
 * goes on from the checkpoint (restart NULL) or reads from the start, and
 * why (restart).  Nothing when no data was verified before the stop.
 */
void checkpoint_say_data(struct scrub_ctx *ctx, const char *restart);
/* Data bytes the resumed checkpoint covers (the progress line's head start). */
unsigned long long checkpoint_covered(const struct checkpoint *cp);

/* --- the device reader (devverify.c); cp may be NULL --- */

/*
 * Whether the data scan by the device resumes from the cursor: not when
 * ledger_judges (a file's digest needs all of its bytes); then the cursor
 * and the saved media errors are dropped (the scan finds them again).
 */
void checkpoint_dev_begin(struct checkpoint *cp, bool ledger_judges);
/*
 * Is off verified already?  *until: where that answer changes (the end of
 * the verified stretch, or the start of the next one; UINT64_MAX: never).
 */
bool checkpoint_dev_verified(const struct checkpoint *cp, uint64_t off, uint64_t *until);
/*
 * This run's read list (kept, not copied: valid until checkpoint_dev_end()).
 * partial: the list is not all the scan reads (the pass that overlaps the
 * walk reads the space map's ranges, and phase 5 what the walk mapped
 * besides): its reads are kept as verified ranges, the watermark stays,
 * and their bytes count as data verified only from checkpoint_dev_bound()
 * on (before phase 5 they are not known to be file data: a run stopped
 * in phase 3 or 4 resumes "at 0 %", and reads none of them again).
 */
void checkpoint_dev_plan(struct checkpoint *cp, const struct io_range *reads, size_t n,
			 bool partial);
/*
 * The partial list being read is known now to hold everything the scan
 * reads below bound (phase 5 has the walk's extents): from now on the
 * watermark moves with it, up to bound.
 */
void checkpoint_dev_bound(struct checkpoint *cp, uint64_t bound);
/* Read i of the list completed (media errors in it noted first). */
void checkpoint_dev_done(struct checkpoint *cp, size_t i);
/* A media error found (to be reported at the scan's end). */
void checkpoint_dev_bad(struct checkpoint *cp, uint64_t off, uint64_t len, int err);
/* The media errors saved by the stopped run, to report with this run's. */
const struct bad_range *checkpoint_dev_saved_bad(const struct checkpoint *cp, size_t *n);
/* The read list goes away: fold this run's progress into the cursor. */
void checkpoint_dev_end(struct checkpoint *cp);

/* --- the per-file reader (dataverify.c); cp may be NULL --- */

/* Was this file read to its end before the stop? */
bool checkpoint_file_skip(const struct checkpoint *cp, struct ino_key id);
/* This file was read to its end (bytes: its data read). */
void checkpoint_file_done(struct checkpoint *cp, struct ino_key id, uint64_t bytes);
/*
 * A finding, as the report core hands it to the checkpoint's sink
 * (report.h; registered by checkpoint_begin()), under the report lock:
 * keep a content finding of a file for the checkpoint.
 */
void checkpoint_note_finding(struct checkpoint *cp, const struct finding *f);

#endif
