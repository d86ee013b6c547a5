/*
 * history: records the run in the state store (state.h); the glue between
 * the scan's context and the database, which knows nothing of the scan.
 *
 *   main      history_open() before phase 1: opens the store and registers
 *             the history with the report core (report.h), as a sink
 *   phase 1   history_begin() once the filesystem's UUID is known: the
 *             run's row, status 'running'
 *   phase 1   checkpoint_begin() after the run's row: --resume (checkpoint.h)
 *   sink      every finding, infos too (under the report lock), each
 *             phase's times, and the end of the run: after the summary,
 *             before the metrics (which read the store)
 *
 * The end of the run also saves the checkpoint of a stopped run, or
 * deletes it after a complete one (checkpoint_end()).
 *
 * A store that cannot be opened or written is said once on standard error
 * ("fscrub: cannot record the run: ...") and sets the report's
 * record_failed, which gives the exit code bit 8 like an output that could
 * not be written; the scan goes on and reports as it would without the
 * store.
 */
#ifndef FSCRUB_HISTORY_H
#define FSCRUB_HISTORY_H

struct scrub_ctx;

/*
 * The directory of the state database for these options: --state-dir, or
 * state_default_dir() for root; NULL for --no-state and for other users
 * without --state-dir (the system's store is root's).
 */
const char *history_dir(const struct scrub_ctx *ctx);

void history_open(struct scrub_ctx *ctx);
void history_begin(struct scrub_ctx *ctx);

#endif
