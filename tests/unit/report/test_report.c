/* Unit tests for report.c: line format, escaping, counters, exit codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "report/checks.h"
#include "scan/context.h"
#include "report/report.h"
#include "scan/summary.h"
#include "lib/strbuf.h"

/* Run fn with stdout redirected, and return what it printed. */
static char *capture(void (*fn)(struct scrub_ctx *), struct scrub_ctx *ctx)
{
	char path[] = "/tmp/fscrub-report-XXXXXX";
	int fd = mkstemp(path), saved = dup(1);
	static char buf[4096];
	ssize_t n;

	fflush(stdout);
	dup2(fd, 1);
	fn(ctx);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	return buf;
}

static struct dir_node *root, *sub;

static void emit_error(struct scrub_ctx *ctx)
{
	str_error(ctx, CHECK_NLINK_COUNT, sub, "bad\nname", 42, "link count is %u", 3u);
}

static void emit_info(struct scrub_ctx *ctx)
{
	str_changed(ctx, CHECK_DIRENT_INO, sub, "x", 7, "directory entry");
}

static void emit_repaired(struct scrub_ctx *ctx)
{
	str_repaired(ctx, CHECK_NLINK_COUNT, sub, "x", 7, "link count set to %u", 1u);
}

static void setup_ctx(struct scrub_ctx *ctx)
{
	scrub_ctx_init(ctx);
	ctx->mntpoint = xstrdup("/mnt");
	ctx->opt.target = "/mnt";
	root = dir_node_new_root(-1, 1, 128);
	sub = dir_node_new(root, "d\tir", 4, 1, 129);
}

/* The options changed: tell the report core, as main() does after parsing them. */
static void configure(struct scrub_ctx *ctx)
{
	report_configure(ctx, ctx->opt.verbose, ctx->opt.debug, ctx->opt.max_errors);
}

static void release_ctx(struct scrub_ctx *ctx)
{
	dircache_init(&ctx->dcache, 4);
	dir_node_put(&ctx->dcache, sub);
	dir_node_put(&ctx->dcache, root);
	scrub_ctx_release(ctx);
}

static void test_error_line(void **state)
{
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	assert_string_equal(capture(emit_error, &ctx),
			    "Error: /mnt/d\\tir/bad\\nname (inode 42): link count is 3 [nlink.count]\n");
	assert_int_equal(report_exit_code(&ctx), 4);
	ctx.opt.debug = true;
	configure(&ctx);
	char *out = capture(emit_error, &ctx);
	assert_true(strstr(out, "[nlink.count] [") && strstr(out, "test_report.c:"));
	release_ctx(&ctx);
}

static void test_info_only_verbose(void **state)
{
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	assert_string_equal(capture(emit_info, &ctx), "");
	assert_int_equal(ctx.report.nr_infos, 1);
	assert_int_equal(report_exit_code(&ctx), 0);
	ctx.opt.verbose = true;
	configure(&ctx);
	assert_string_equal(capture(emit_info, &ctx),
			    "Info: /mnt/d\\tir/x (inode 7): changed while being checked: "
			    "directory entry [dirent.ino]\n");
	release_ctx(&ctx);
}

/* Phase 1 gave up (-t xfs on ext4): no count of what was never looked at. */
static void test_summary_not_scanned(void **state)
{
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	ctx.not_scanned = true;
	atomic_store(&ctx.report.nr_operational, 1);
	assert_string_equal(capture(summary_print, &ctx),
			    "/mnt: the scan did not run: nothing was checked.\n");
	assert_int_equal(report_exit_code(&ctx), 8);
	release_ctx(&ctx);
}

static void test_summary_and_codes(void **state)
{
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	assert_string_equal(capture(summary_print, &ctx), "/mnt: 0 errors and 0 warnings found.\n");
	capture(emit_error, &ctx);
	assert_string_equal(capture(summary_print, &ctx),
			    "/mnt: 1 error and 0 warnings found. Unmount and run fsck -n, then fsck "
			    "to repair.\n");
	atomic_store(&ctx.report.nr_operational, 1);
	assert_int_equal(report_exit_code(&ctx), 4 | 8);
	scrub_cancelled = 1;
	assert_int_equal(report_exit_code(&ctx), 4 | 8 | 32);
	assert_non_null(strstr(capture(summary_print, &ctx), "scan cancelled"));
	scrub_cancelled = 0;
	release_ctx(&ctx);
}

static void test_max_errors(void **state)
{
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	ctx.opt.max_errors = 2;
	configure(&ctx);
	capture(emit_error, &ctx);
	assert_false(scrub_should_stop(&ctx));
	capture(emit_error, &ctx);
	assert_true(scrub_should_stop(&ctx));
	assert_non_null(strstr(capture(summary_print, &ctx), "stopped after 2 errors (-a)"));
	release_ctx(&ctx);
}

static void emit_unreadable_data(struct scrub_ctx *ctx)
{
	str_error_range(ctx, CHECK_DATA_READ, sub, "f", 8, 0, 4096, "cannot read: EIO");
}

static void emit_name_warning(struct scrub_ctx *ctx)
{
	str_warn(ctx, CHECK_NAME_CONTROL, sub, "x\ny", 9, "control character in name");
}

/* The summary names the most serious action, then the files to restore; -v says it per finding. */
static void test_summary_advice(void **state)
{
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	ctx.fstype = xstrdup("ext4");
	capture(emit_name_warning, &ctx);
	assert_string_equal(capture(summary_print, &ctx),
			    "/mnt: 0 errors and 1 warning found. Nothing is damaged: rename what the "
			    "warnings name if you want to.\n");
	capture(emit_unreadable_data, &ctx);
	assert_string_equal(capture(summary_print, &ctx),
			    "/mnt: 1 error and 1 warning found. Restore the damaged files from a "
			    "backup (fscrub status lists them).\n");
	capture(emit_error, &ctx);
	assert_string_equal(capture(summary_print, &ctx),
			    "/mnt: 2 errors and 1 warning found. Unmount and run e2fsck -fn, then "
			    "e2fsck -f to repair. Then restore the damaged files from a backup "
			    "(fscrub status lists them).\n");
	ctx.opt.verbose = true;
	configure(&ctx);
	assert_string_equal(capture(emit_unreadable_data, &ctx),
			    "Error: /mnt/d\\tir/f (inode 8): cannot read: EIO [data.read]\n"
			    "    Advice: Restore this file from a backup.\n");
	/* an info needs nothing: no advice line */
	assert_string_equal(capture(emit_info, &ctx),
			    "Info: /mnt/d\\tir/x (inode 7): changed while being checked: "
			    "directory entry [dirent.ino]\n");
	free(ctx.mntpoint);
	ctx.mntpoint = xstrdup("/");
	assert_non_null(strstr(capture(summary_print, &ctx), " Boot from rescue media (or with "
			       "fsck.mode=force) and run e2fsck -fn on the unmounted filesystem"));
	release_ctx(&ctx);
}

/* A repair alone is exit 1; with an error left it is 4 (1 not added). */
static void test_repaired(void **state)
{
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	assert_string_equal(capture(emit_repaired, &ctx),
			    "Repaired: /mnt/d\\tir/x (inode 7): link count set to 1 [nlink.count]\n");
	assert_int_equal(report_exit_code(&ctx), 1);
	assert_string_equal(capture(summary_print, &ctx),
			    "/mnt: 0 errors and 0 warnings found. 1 problem repaired.\n");
	capture(emit_error, &ctx);
	assert_int_equal(report_exit_code(&ctx), 4);
	release_ctx(&ctx);
}

/* What the sinks saw, in order: one letter per event, the sink's name first. */
static char sink_log[256];

static void log_event(void *data, char what)
{
	size_t n = strlen(sink_log);

	if (n + 3 < sizeof(sink_log)) {
		sink_log[n] = *(const char *)data;
		sink_log[n + 1] = what;
		sink_log[n + 2] = '\0';
	}
}

static void sink_finding(struct scrub_ctx *ctx, void *data, const struct finding *f)
{
	(void)ctx;
	log_event(data, f->severity == SEV_INFO ? 'i' : 'f');
}

static void sink_text_line(struct scrub_ctx *ctx, void *data)
{
	(void)ctx;
	log_event(data, 't');
}

static void sink_phase(struct scrub_ctx *ctx, void *data, const struct phase_record *p)
{
	(void)ctx;
	log_event(data, (char)('0' + p->number));
}

/* Sink "a" fails to write its output at the end. */
static int sink_end(struct scrub_ctx *ctx, void *data, int code, bool fatal)
{
	(void)ctx;
	(void)fatal;
	log_event(data, 'e');
	return *(const char *)data == 'a' ? code | EXIT_OPERATIONAL : code;
}

static const struct report_sink sink_all = {
	.name = "all", .every_finding = true, .finding = sink_finding,
	.text_line = sink_text_line, .phase = sink_phase, .end = sink_end,
};
static const struct report_sink sink_printed = {
	.name = "printed", .finding = sink_finding, .end = sink_end,
};

/*
 * Sinks see each finding in the order they registered (the history before
 * the checkpoint); an info without -v goes out only if some sink asks for
 * every finding, and then to all of them (as it did before sinks); the end
 * of the run goes the other way and gathers their exit bits.
 */
static void test_sinks(void **state)
{
	static char a[] = "a", b[] = "b";
	struct scrub_ctx ctx;

	(void)state;
	setup_ctx(&ctx);
	sink_log[0] = '\0';
	report_add_sink(&ctx, &sink_all, a);
	report_add_sink(&ctx, &sink_printed, b);
	assert_ptr_equal(report_sink_data(&ctx, &sink_printed), b);
	capture(emit_error, &ctx);
	capture(emit_info, &ctx);
	report_phase(&ctx, &(struct phase_record){ .number = 3, .title = "t", .unit = "" });
	assert_string_equal(sink_log, "atafbfaibia3");
	sink_log[0] = '\0';
	assert_int_equal(report_run_end(&ctx, 0, false), 4 | 8);
	assert_string_equal(sink_log, "beae");
	report_remove_sink(&ctx, &sink_all);
	assert_null(report_sink_data(&ctx, &sink_all));
	sink_log[0] = '\0';
	/* Without a sink that wants every finding, an info without -v goes nowhere. */
	capture(emit_info, &ctx);
	assert_string_equal(sink_log, "");
	capture(emit_error, &ctx);
	assert_string_equal(sink_log, "bf");
	release_ctx(&ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_error_line),
		cmocka_unit_test(test_info_only_verbose),
		cmocka_unit_test(test_summary_and_codes),
		cmocka_unit_test(test_summary_not_scanned),
		cmocka_unit_test(test_max_errors),
		cmocka_unit_test(test_repaired),
		cmocka_unit_test(test_summary_advice),
		cmocka_unit_test(test_sinks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
