/*
 * Unit tests for checkpoint.c and the checkpoints table of state.c, in a
 * temporary directory: the store's round trip (save, replace, load,
 * delete; two mount roots apart; a version 4 database has none, and is
 * upgraded when opened for writing); and a stopped run's cursor as the
 * next --resume run sees it: the reads completed from the start of the
 * list move the watermark, one completed out of order is kept apart, a
 * read in flight at the stop is not verified, media errors only in what
 * was verified, per-file findings only of files read to their end; stale
 * checkpoints (other options, too old) are not resumed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <unistd.h>
#include <cmocka.h>

#include "data/checkpoint.h"
#include "scan/context.h"
#include "scan/phases.h"
#include "lib/ioengine.h"
#include "data/mediamap.h"
#include "report/report.h"
#include "store/state.h"
#include "lib/strbuf.h"

#define MIB (1ULL << 20)

static char dir[64];
static const struct state_fs FS1 = { .uuid = "fs1", .fsroot = "/" };
static const struct state_fs FS1_HOME = { .uuid = "fs1", .fsroot = "/@home" };

static int dir_setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fscrub-cp-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int dir_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct state *open_state(bool write)
{
	struct strbuf err = STRBUF_INIT;
	struct state *s = NULL;

	assert_int_equal(state_open(&s, dir, write, &err), 0);
	strbuf_release(&err);
	return s;
}

static void test_store_round_trip(void **unused)
{
	struct state *s = open_state(true);
	struct state_checkpoint in = { .run = 7, .saved = 1234.5, .options = "x=1",
				       .phase = 5, .cursor = "{\"bytes\":1}" }, out;

	(void)unused;
	assert_int_equal(state_checkpoint_load(s, &FS1, &out), -ENOENT);
	assert_int_equal(state_checkpoint_save(s, &FS1, &in, NULL), 0);
	in.run = 8;
	in.cursor = "{\"bytes\":2}";
	assert_int_equal(state_checkpoint_save(s, &FS1, &in, NULL), 0);	/* replaces */
	state_close(s);
	s = open_state(false);
	assert_int_equal(state_checkpoint_load(s, &FS1, &out), 0);
	assert_int_equal(out.run, 8);
	assert_true(out.saved == 1234.5);
	assert_string_equal(out.options, "x=1");
	assert_int_equal(out.phase, 5);
	assert_string_equal(out.cursor, "{\"bytes\":2}");
	state_checkpoint_release(&out);
	assert_int_equal(state_checkpoint_load(s, &FS1_HOME, &out), -ENOENT);
	state_close(s);
	s = open_state(true);
	assert_int_equal(state_checkpoint_delete(s, &FS1, NULL), 0);
	assert_int_equal(state_checkpoint_load(s, &FS1, &out), -ENOENT);
	state_close(s);
}

/* A version 4 database: no checkpoint read-only, the table added for writing. */
static void test_store_upgrade(void **unused)
{
	struct state_checkpoint in = { .run = 1, .saved = 1, .options = "", .phase = 3 }, out;
	struct state *s = open_state(true);
	char path[128];
	sqlite3 *db;

	(void)unused;
	state_close(s);
	snprintf(path, sizeof(path), "%s/%s", dir, STATE_DB_NAME);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	/*
	 * a version 4 store: no checkpoints, regions without the parts read (6),
	 * runs without their unconfirmed findings (7), events without ranges (8)
	 */
	assert_int_equal(sqlite3_exec(db, "DROP TABLE checkpoints; ALTER TABLE regions DROP "
				      "COLUMN read_to; ALTER TABLE regions DROP COLUMN partial; "
				      "ALTER TABLE runs DROP COLUMN unconfirmed; ALTER TABLE events "
				      "DROP COLUMN range_off; ALTER TABLE events DROP COLUMN range_len; "
				      "PRAGMA user_version = 4", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	s = open_state(false);
	assert_int_equal(state_checkpoint_load(s, &FS1, &out), -ENOENT);
	state_close(s);
	s = open_state(true);
	assert_int_equal(state_checkpoint_save(s, &FS1, &in, NULL), 0);
	assert_int_equal(state_checkpoint_load(s, &FS1, &out), 0);
	assert_int_equal(out.phase, 3);
	state_checkpoint_release(&out);
	state_close(s);
}

/* A context as phase 1 leaves it, recorded in dir's store. */
static void ctx_open(struct scrub_ctx *ctx, bool resume)
{
	scrub_ctx_init(ctx);
	ctx->state = open_state(true);
	ctx->fs_uuid = strdup("fs1");
	ctx->run_id = resume ? 2 : 1;
	ctx->opt.verify_data = true;
	ctx->opt.resume = resume;
	ctx->dev_size = 1024 * MIB;
	checkpoint_begin(ctx);
	assert_non_null(ctx->checkpoint);
}

static const struct io_range reads[] = {
	{ 0, 8 * MIB }, { 8 * MIB, 8 * MIB }, { 32 * MIB, 8 * MIB }, { 40 * MIB, 8 * MIB },
	{ 64 * MIB, 8 * MIB },
};

/* The stopped run: reads 0, 1 and 3 completed, 2 was in flight, 4 not begun. */
static void stopped_run(void)
{
	struct scrub_ctx ctx;
	struct strbuf err = STRBUF_INIT;
	struct finding done = { .severity = SEV_ERROR, .check = "data.read", .path = "/m/a",
				.ino = 12, .has_range = true, .offset = 4096, .length = 4096,
				.message = "read error" };
	struct finding partial = done;
	struct finding changed = { .severity = SEV_INFO, .check = "ledger.bitrot", .path = "/m/a",
				   .ino = 12, .message = "changed while being checked: x",
				   .unconfirmed = true };

	partial.ino = 13;
	partial.path = "/m/b";
	ctx_open(&ctx, false);
	checkpoint_phase(&ctx, 5);
	checkpoint_dev_begin(ctx.checkpoint, false);
	checkpoint_dev_plan(ctx.checkpoint, reads, 5, false);
	checkpoint_dev_bad(ctx.checkpoint, 9 * MIB, 4096, 5);		/* in read 1 */
	checkpoint_dev_bad(ctx.checkpoint, 33 * MIB, 4096, 5);	/* in read 2 */
	checkpoint_dev_done(ctx.checkpoint, 0);
	checkpoint_dev_done(ctx.checkpoint, 1);
	checkpoint_dev_done(ctx.checkpoint, 3);
	checkpoint_note_finding(ctx.checkpoint, &done);
	checkpoint_note_finding(ctx.checkpoint, &partial);
	checkpoint_note_finding(ctx.checkpoint, &changed);
	checkpoint_file_done(ctx.checkpoint, (struct ino_key){ 0, 12 }, 4 * MIB);
	assert_int_equal(checkpoint_end(&ctx, "cancelled", &err), 0);
	strbuf_release(&err);
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
}

static void test_cursor_resumed(void **unused)
{
	struct scrub_ctx ctx;
	const struct bad_range *bad;
	uint64_t until;
	size_t n;

	(void)unused;
	stopped_run();
	ctx_open(&ctx, true);
	/* 0..16 MiB read in order, then the gap to read 2 (in flight): the watermark is 32 MiB */
	assert_true(checkpoint_dev_verified(ctx.checkpoint, 0, &until));
	assert_int_equal(until, 32 * MIB);
	assert_false(checkpoint_dev_verified(ctx.checkpoint, 32 * MIB, &until));
	assert_int_equal(until, 40 * MIB);
	assert_true(checkpoint_dev_verified(ctx.checkpoint, 40 * MIB, &until));	/* read 3 */
	assert_int_equal(until, 48 * MIB);
	assert_false(checkpoint_dev_verified(ctx.checkpoint, 48 * MIB, &until));
	assert_int_equal(until, UINT64_MAX);
	bad = checkpoint_dev_saved_bad(ctx.checkpoint, &n);
	assert_int_equal(n, 1);
	assert_int_equal(bad[0].off, 9 * MIB);
	assert_int_equal(checkpoint_covered(ctx.checkpoint), 24 * MIB + 4 * MIB);
	assert_true(checkpoint_file_skip(ctx.checkpoint, (struct ino_key){ 0, 12 }));
	assert_false(checkpoint_file_skip(ctx.checkpoint, (struct ino_key){ 0, 13 }));
	/*
	 * phase 5 replays the findings of the file read to its end, not the
	 * other's; one it could not confirm is counted so again
	 */
	checkpoint_phase(&ctx, 5);
	assert_int_equal(atomic_load(&ctx.report.nr_errors), 1);
	assert_int_equal(atomic_load(&ctx.report.nr_unconfirmed), 1);
	assert_int_equal(atomic_load(&ctx.progress_base), 28 * MIB);
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
}

/* The checksum ledger needs whole files: the cursor is dropped. */
static void test_cursor_dropped_for_the_ledger(void **unused)
{
	struct scrub_ctx ctx;
	uint64_t until;
	size_t n;

	(void)unused;
	stopped_run();
	ctx_open(&ctx, true);
	checkpoint_dev_begin(ctx.checkpoint, true);
	assert_false(checkpoint_dev_verified(ctx.checkpoint, 0, &until));
	assert_null(checkpoint_dev_saved_bad(ctx.checkpoint, &n));
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
}

/*
 * An early read list with nothing in it (only unwritten extents, say):
 * the plan's per-read flags were not freed at its end (a leak that the
 * sanitizer pass of test_limits' 100 000-extent file found).
 */
static void test_empty_plan(void **unused)
{
	struct scrub_ctx ctx;

	(void)unused;
	ctx_open(&ctx, false);
	checkpoint_phase(&ctx, 5);
	checkpoint_dev_plan(ctx.checkpoint, NULL, 0, true);
	checkpoint_dev_end(ctx.checkpoint);
	checkpoint_dev_plan(ctx.checkpoint, reads, 5, false);
	checkpoint_dev_done(ctx.checkpoint, 0);
	checkpoint_dev_end(ctx.checkpoint);
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
}

static void test_stale(void **unused)
{
	struct scrub_ctx ctx;
	struct state *s;
	uint64_t until;
	sqlite3 *db;
	char path[128];

	(void)unused;
	stopped_run();
	/* other options: not resumed */
	scrub_ctx_init(&ctx);
	ctx.state = open_state(true);
	ctx.fs_uuid = strdup("fs1");
	ctx.opt.verify_data = true;
	ctx.opt.check_only = true;
	ctx.opt.resume = true;
	ctx.dev_size = 1024 * MIB;
	checkpoint_begin(&ctx);
	assert_false(checkpoint_dev_verified(ctx.checkpoint, 0, &until));
	assert_int_equal(checkpoint_covered(ctx.checkpoint), 0);
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
	/* older than CHECKPOINT_MAX_AGE: not resumed */
	snprintf(path, sizeof(path), "%s/%s", dir, STATE_DB_NAME);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE checkpoints SET saved = saved - 8 * 86400",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	ctx_open(&ctx, true);
	assert_false(checkpoint_dev_verified(ctx.checkpoint, 0, &until));
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
	/* a complete run deletes it */
	ctx_open(&ctx, false);
	assert_int_equal(checkpoint_end(&ctx, "complete", NULL), 0);
	s = ctx.state;
	{
		struct state_checkpoint out;

		assert_int_equal(state_checkpoint_load(s, &FS1, &out), -ENOENT);
	}
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_round_trip, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_store_upgrade, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_cursor_resumed, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_cursor_dropped_for_the_ledger, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_stale, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_empty_plan, dir_setup, dir_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
