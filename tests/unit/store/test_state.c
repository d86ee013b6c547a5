/*
 * Unit tests for state.c, the run history database, in a temporary
 * directory: a run written and read back; which findings are open, errors first then by path
 * (state.h: those of the last complete run and of the incomplete runs
 * after it; content findings by -x runs only); two mount roots of one
 * filesystem (btrfs subvolumes) kept apart; a database of a newer
 * schema refused; reading a directory without a database is -ENOENT;
 * the device regions of --portion: a region not read keeps its last read,
 * the size is kept unless forced, and the age histogram.
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
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/inokey.h"
#include "report/report.h"
#include "store/state.h"
#include "lib/strbuf.h"

static char dir[64];
static const struct state_fs FS1 = { .uuid = "fs1", .fsroot = "/" };

static int dir_setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/fscrub-state-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int dir_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct state *open_rw(void)
{
	struct strbuf err = STRBUF_INIT;
	struct state *s = NULL;

	assert_int_equal(state_open(&s, dir, true, &err), 0);
	strbuf_release(&err);
	return s;
}

struct finding_spec {
	enum severity sev;
	const char *check, *path;
	uint64_t subvol;		/* finding.subvol */
};

/* One run of "fs1" (fsroot: "/" if NULL): begun, findings kept, ended with status. */
static int64_t run_in(struct state *s, const char *fsroot, const char *status, bool x,
		      const struct finding_spec *fs, size_t n)
{
	struct state_run r = {
		.uuid = "fs1", .fsroot = (char *)fsroot, .mountpoint = "/mnt", .fstype = "ext4",
		.started = 1000, .verify_data = x,
	};

	assert_int_equal(state_run_begin(s, &r, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		struct finding f = {
			.severity = fs[i].sev, .check = fs[i].check, .path = fs[i].path,
			.ino = 12, .message = "m", .has_subvol = true, .subvol = fs[i].subvol,
		};

		state_add_finding(s, &f, check_is_content(f.check));
	}
	state_add_phase(s, 1, "Find the filesystem", 0.5, 0.1, 0.2, 3);
	r.status = (char *)status;
	r.ended = 1010;
	r.errors = n;
	assert_int_equal(state_run_end(s, &r, NULL), 0);
	return r.id;
}

static int64_t run(struct state *s, const char *status, bool x, const struct finding_spec *fs,
		   size_t n)
{
	return run_in(s, NULL, status, x, fs, n);
}

static void collect(const struct state_finding *f, void *arg)
{
	struct strbuf *sb = arg;

	strbuf_addf(sb, "%s %s %s %lld;", f->severity, f->check, f->path, (long long)f->run);
}

static void assert_open(struct state *s, const char *want)
{
	struct strbuf sb = STRBUF_INIT;

	assert_int_equal(state_each_open(s, &FS1, collect, &sb), 0);
	assert_string_equal(sb.buf, want);
	strbuf_release(&sb);
}

static void test_round_trip(void **unused)
{
	struct state *s = open_rw();
	struct state_summary sum;
	const struct finding_spec f[] = {
		{ SEV_ERROR, "nlink.count", "/mnt/a", 0 }, { SEV_INFO, "x.y", "/mnt/b", 0 },
	};
	int64_t id = run(s, "complete", true, f, 2);

	(void)unused;
	assert_int_equal(state_summarise(s, &FS1, &sum), 0);
	assert_int_equal(sum.last.id, id);
	assert_string_equal(sum.last.status, "complete");
	assert_string_equal(sum.last.mountpoint, "/mnt");
	assert_true(sum.last.verify_data);
	assert_true(sum.last_complete == 1010 && sum.last_data_verified == 1010);
	assert_int_equal(sum.open_errors, 1);
	assert_int_equal(sum.open_warnings, 0);	/* infos are never open */
	state_summary_release(&sum);
	assert_int_equal(state_summarise(s, &(struct state_fs){ "other", "/" }, &sum), 0);
	assert_int_equal(sum.last.id, 0);
	state_summary_release(&sum);
	state_close(s);
}

static void test_open_findings(void **unused)
{
	struct state *s = open_rw();
	const struct finding_spec a = { SEV_ERROR, "nlink.count", "/mnt/a", 0 };
	const struct finding_spec b = { SEV_WARNING, "name.control", "/mnt/b", 0 };
	const struct finding_spec d = { SEV_ERROR, "data.read", "/mnt/d", 0 };
	const struct finding_spec ad[] = { a, d };

	(void)unused;
	run(s, "complete", true, ad, 2);			/* 1: a, and d (-x) */
	assert_open(s, "error nlink.count /mnt/a 1;error data.read /mnt/d 1;");
	run(s, "cancelled", false, &b, 1);			/* 2: did not see everything */
	assert_open(s, "error nlink.count /mnt/a 1;error data.read /mnt/d 1;"
		       "warning name.control /mnt/b 2;");
	run(s, "complete", false, &a, 1);			/* 3: without -x */
	/* d stays open: only a complete -x run covers file contents */
	assert_open(s, "error nlink.count /mnt/a 3;error data.read /mnt/d 1;");
	run(s, "stopped", true, &a, 1);				/* 4: -a, incomplete */
	assert_open(s, "error nlink.count /mnt/a 4;error data.read /mnt/d 1;");
	run(s, "complete", true, NULL, 0);			/* 5: all fixed */
	assert_open(s, "");
	state_close(s);
}

/*
 * Two subvolumes of one btrfs (one UUID), mounted at / and /home: a clean
 * run of one closes nothing of the other's.
 */
static void test_fsroot_separate(void **unused)
{
	struct state *s = open_rw();
	const struct finding_spec a = { SEV_ERROR, "nlink.count", "/mnt/a", 0 };
	const struct state_fs home = { .uuid = "fs1", .fsroot = "/@home" };
	struct state_summary sum;

	(void)unused;
	run(s, "complete", false, &a, 1);
	run_in(s, "/@home", "complete", false, NULL, 0);
	assert_open(s, "error nlink.count /mnt/a 1;");
	assert_int_equal(state_summarise(s, &home, &sum), 0);
	assert_int_equal(sum.last.id, 2);
	assert_string_equal(sum.last.fsroot, "/@home");
	assert_int_equal(sum.open_errors, 0);
	state_summary_release(&sum);
	state_close(s);
}

/* A rescan run that read inode ino of subvolume sv (and found nothing): state_set_rescanned(). */
static void rescan_run_sv(struct state *s, const char *status, uint64_t sv, uint64_t ino)
{
	struct state_run r = { .uuid = "fs1", .started = 1000, .verify_data = true,
			       .rescan = true };
	struct subvol_ino file = { .subvol = sv, .ino = ino };

	assert_int_equal(state_run_begin(s, &r, NULL), 0);
	state_set_rescanned(s, &file, 1);
	r.status = (char *)status;
	r.ended = 1010;
	assert_int_equal(state_run_end(s, &r, NULL), 0);
}

static void rescan_run(struct state *s, const char *status, uint64_t ino)
{
	rescan_run_sv(s, status, 0, ino);
}

/*
 * --rescan-errors: a content finding is closed by a later complete rescan
 * that read its inode; not by one that read another, nor by an incomplete
 * one; a rescan is no full data verification.
 */
static void test_rescan_closes_content_findings(void **unused)
{
	struct state *s = open_rw();
	const struct finding_spec a = { SEV_ERROR, "nlink.count", "/mnt/a", 0 };
	const struct finding_spec d = { SEV_ERROR, "data.read", "/mnt/d", 0 };
	const struct finding_spec ad[] = { a, d };
	struct state_summary sum;
	struct subvol_ino *files;
	size_t n, unknown;

	(void)unused;
	run(s, "complete", true, ad, 2);			/* 1: both ino 12 */
	assert_int_equal(state_open_content_files(s, &FS1, &files, &n, &unknown), 0);
	assert_int_equal(n, 1);
	assert_int_equal(unknown, 0);
	assert_int_equal(files[0].ino, 12);
	assert_int_equal(files[0].subvol, 0);
	free(files);
	rescan_run(s, "complete", 13);				/* 2: another file */
	/* it ran the metadata checks in full: a is closed, d not */
	assert_open(s, "error data.read /mnt/d 1;");
	rescan_run(s, "cancelled", 12);				/* 3: incomplete */
	assert_open(s, "error data.read /mnt/d 1;");
	rescan_run(s, "complete", 12);				/* 4: read again, clean */
	assert_open(s, "");
	assert_int_equal(state_summarise(s, &FS1, &sum), 0);
	assert_true(sum.last.rescan);
	assert_true(sum.last_data_verified == 1010);	/* run 1's, not a rescan's */
	state_summary_release(&sum);
	state_close(s);
}

/*
 * Inode numbers repeat across subvolumes: a rescan of inode 12 of
 * subvolume 257 closes the finding of that file, not that of inode 12 of
 * subvolume 258; state_open_content_files() names both apart.
 */
static void test_rescan_by_subvolume(void **unused)
{
	struct state *s = open_rw();
	const struct finding_spec ab[] = {
		{ SEV_ERROR, "data.read", "/mnt/a/f", 257 },
		{ SEV_ERROR, "data.read", "/mnt/b/f", 258 },
	};
	struct subvol_ino *files;
	size_t n, unknown;

	(void)unused;
	run(s, "complete", true, ab, 2);
	assert_int_equal(state_open_content_files(s, &FS1, &files, &n, &unknown), 0);
	assert_int_equal(n, 2);
	qsort(files, n, sizeof(*files), subvol_ino_cmp);
	assert_int_equal(files[0].subvol, 257);
	assert_int_equal(files[1].subvol, 258);
	assert_int_equal(files[1].ino, 12);
	free(files);
	rescan_run_sv(s, "complete", 258, 12);
	assert_open(s, "error data.read /mnt/a/f 1;");
	state_close(s);
}

static void test_read_only_and_versions(void **unused)
{
	struct strbuf err = STRBUF_INIT;
	struct state *s = NULL;
	sqlite3 *db;
	char path[128];

	(void)unused;
	assert_int_equal(state_open(&s, dir, false, &err), -ENOENT);
	s = open_rw();
	state_close(s);
	assert_int_equal(state_open(&s, dir, false, &err), 0);
	state_close(s);
	snprintf(path, sizeof(path), "%s/%s", dir, STATE_DB_NAME);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(state_open(&s, dir, true, &err), -EPROTO);
	assert_non_null(strstr(err.buf, "newer fscrub"));
	strbuf_release(&err);
}

/* Past STATE_MAX_FINDINGS the rest are counted, not kept. */
static void test_findings_bounded(void **unused)
{
	struct state *s = open_rw();
	struct state_run r = { .uuid = "fs1", .started = 1 };
	struct finding f = { .severity = SEV_INFO, .check = "x.y", .path = "/p", .message = "m" };
	struct state_summary sum;

	(void)unused;
	assert_int_equal(state_run_begin(s, &r, NULL), 0);
	for (int i = 0; i < STATE_MAX_FINDINGS + 5; i++)
		state_add_finding(s, &f, false);
	r.status = "complete";
	r.ended = 2;
	assert_int_equal(state_run_end(s, &r, NULL), 0);
	assert_int_equal(state_summarise(s, &FS1, &sum), 0);
	assert_int_equal(sum.last.findings_dropped, 5);
	state_summary_release(&sum);
	state_close(s);
}

/* --portion's regions: what a run writes, keeps and status reads back. */
static void test_regions(void **unused)
{
	struct state *s = open_rw();
	struct state_summary sum;
	uint64_t size = 0, alloc[4] = { 100, 300, 0, 600 };
	bool read1[4] = { true, false, false, false }, read2[4] = { false, true, false, true };
	double v[4], now = (double)time(NULL);

	(void)unused;
	assert_int_equal(state_region_size(s, "fs1", 64 << 20, false, &size), 0);
	assert_int_equal(size, 64 << 20);
	assert_int_equal(state_region_size(s, "fs1", 128 << 20, false, &size), 0);
	assert_int_equal(size, 64 << 20);		/* kept */
	assert_int_equal(state_region_times(s, "fs1", size, 4, v, NULL), 0);
	assert_true(v[0] == 0 && v[1] == 0 && v[3] == 0);
	assert_int_equal(state_regions_write(s, "fs1", size, 4, alloc, read1, NULL, 5000, 1, NULL), 0);
	assert_int_equal(state_regions_write(s, "fs1", size, 4, alloc, read2, NULL, now, 2, NULL), 0);
	assert_int_equal(state_region_times(s, "fs1", size, 4, v, NULL), 0);
	assert_true(v[0] == 5000 && v[1] == now && v[2] == 0 && v[3] == now);
	/* Region 0 read again, long ago: "older", a tenth of the data; the rest < 7 days. */
	assert_int_equal(state_regions_write(s, "fs1", size, 4, alloc, read1, NULL, 1, 3, NULL), 0);
	run_in(s, NULL, "complete", false, NULL, 0);
	assert_int_equal(state_summarise(s, &FS1, &sum), 0);
	assert_int_equal(sum.nr_regions, 3);
	assert_true(sum.region_share[STATE_AGE_OLDER] > 0.099 &&
		    sum.region_share[STATE_AGE_OLDER] < 0.101);
	assert_true(sum.region_share[STATE_AGE_7D] > 0.899 && sum.region_share[STATE_AGE_7D] < 0.901);
	assert_true(sum.region_share[STATE_AGE_NEVER] == 0);
	assert_true(sum.oldest_region == 1 && state_data_coverage(&sum) == 1);
	state_summary_release(&sum);
	/* Forced: another size; the old rows' reads do not count for it. */
	assert_int_equal(state_region_size(s, "fs1", 32 << 20, true, &size), 0);
	assert_int_equal(size, 32 << 20);
	assert_int_equal(state_region_times(s, "fs1", size, 4, v, NULL), 0);
	assert_true(v[0] == 0 && v[1] == 0);
	state_close(s);
}

/*
 * A region read in part: how far is kept, from the time of its first part;
 * further parts move it on; read to its end, its last read is the first
 * part's and the part is gone.
 */
static void test_regions_read_in_part(void **unused)
{
	struct state *s = open_rw();
	uint64_t size = 0, alloc[2] = { 100, 200 }, to[2] = { 0, 4096 }, got[2];
	bool none[2] = { false, false }, second[2] = { false, true };
	double v[2];

	(void)unused;
	assert_int_equal(state_region_size(s, "fs1", 64 << 20, false, &size), 0);
	assert_int_equal(state_regions_write(s, "fs1", size, 2, alloc, none, to, 1000, 1, NULL), 0);
	assert_int_equal(state_region_times(s, "fs1", size, 2, v, got), 0);
	assert_true(v[1] == 0 && got[0] == 0 && got[1] == 4096);
	to[1] = 0;				/* a run that read nothing more of it */
	assert_int_equal(state_regions_write(s, "fs1", size, 2, alloc, none, to, 1500, 2, NULL), 0);
	assert_int_equal(state_region_times(s, "fs1", size, 2, v, got), 0);
	assert_true(got[1] == 4096);
	to[1] = 8192;				/* further */
	assert_int_equal(state_regions_write(s, "fs1", size, 2, alloc, none, to, 2000, 3, NULL), 0);
	assert_int_equal(state_region_times(s, "fs1", size, 2, v, got), 0);
	assert_true(v[1] == 0 && got[1] == 8192);
	/* to its end: read when its first part was, at 1000 */
	assert_int_equal(state_regions_write(s, "fs1", size, 2, alloc, second, NULL, 3000, 4,
					     NULL), 0);
	assert_int_equal(state_region_times(s, "fs1", size, 2, v, got), 0);
	assert_true(v[1] == 1000 && got[1] == 0);
	/* read whole again: now */
	assert_int_equal(state_regions_write(s, "fs1", size, 2, alloc, second, NULL, 4000, 5,
					     NULL), 0);
	assert_int_equal(state_region_times(s, "fs1", size, 2, v, got), 0);
	assert_true(v[1] == 4000 && got[1] == 0);
	state_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_open_findings, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_fsroot_separate, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_rescan_closes_content_findings, dir_setup,
						dir_teardown),
		cmocka_unit_test_setup_teardown(test_rescan_by_subvolume, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_read_only_and_versions, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_regions_read_in_part, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_findings_bounded, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_regions, dir_setup, dir_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
