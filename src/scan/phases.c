/*
 * phases: the phase table, the runner, -T accounting and the release of
 * what the phases made; see phases.h.  Each phase is a file of its own,
 * phase1.c to phase6.c, which says what the phase reads and leaves.
 */
#include "scan/phases.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>

#include "backends/backend.h"
#include "data/checkpoint.h"
#include "scan/confine.h"
#include "scan/context.h"
#include "tree/crosslink.h"
#include "data/devverify.h"
#include "tree/dircache.h"
#include "scan/history.h"
#include "lib/inoset.h"
#include "data/ledger.h"
#include "data/regions.h"
#include "tree/linktable.h"
#include "lib/mountpoint.h"
#include "scan/phase.h"
#include "store/state.h"
#include "scan/progress.h"
#include "report/report.h"

/* A backend hook's failure is operational; the run goes on. */
void phase_run_hook(struct scrub_ctx *ctx, int (*hook)(struct scrub_ctx *), const char *what)
{
	int ret;

	if (!hook)
		return;
	ret = hook(ctx);
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "%s backend: %s", ctx->ops->name, what);
}

struct phase {
	const char *title;
	const char *unit;	/* what the -T item count counts */
	const char *progress_unit;	/* what -C counts (totals from statfs) */
	int (*run)(struct scrub_ctx *ctx, unsigned long long *items);
	bool data_only;		/* only with -x */
};

static const struct phase phases[] = {
	{ "Find the filesystem", "", "steps", phase1_find_fs, false },
	{ "Check filesystem metadata", "", "steps", phase2_metadata, false },
	{ "Scan all inodes and the directory tree", "entries", "inodes", phase3_inodes, false },
	{ "Check link counts, back pointers and cross-linked blocks", "multiply-linked inodes", "steps",
	  phase4_links, false },
	{ "Verify file data", "bytes", "bytes", phase5_data, true },
	{ "Check summary counters", "", "steps", phase6_summary, false },
};

struct phase_clock {
	struct timespec wall;
	struct rusage ru;
};

/*
 * This program's peak RSS: VmHWM, the high-water mark of its own memory.
 * Not ru_maxrss: Linux keeps that across execve(), so it starts at the
 * RSS of the process that forked us (a test runner of 2 GiB made a run of
 * 26 MiB report 2 172 MiB).
 */
static double peak_rss_mib(const struct rusage *ru)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	unsigned long kib = 0;
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "VmHWM: %lu kB", &kib) == 1;
	if (f)
		fclose(f);
	return (double)(found ? (long)kib : ru->ru_maxrss) / 1024.0;
}

static void clock_now(struct phase_clock *c)
{
	clock_gettime(CLOCK_MONOTONIC, &c->wall);
	getrusage(RUSAGE_SELF, &c->ru);
}

static double tv_sec(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_usec - a->tv_usec) / 1e6;
}

static double ts_sec(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/*
 * -T and the JSON report's "phases".  run: when phase 1 began; began: when
 * this phase's wall time begins -- its start, or for phase 5 the start of
 * its reads alongside phases 3 and 4 (devverify.h), whose CPU time is in
 * theirs: a's CPU figures are from the phase's own start.
 */
static void account_phase(struct scrub_ctx *ctx, int n, const struct phase *p,
			  const struct timespec *run, const struct timespec *began,
			  const struct phase_clock *a, const struct phase_clock *b,
			  unsigned long long items)
{
	double wall = ts_sec(began, &b->wall);
	double user = tv_sec(&a->ru.ru_utime, &b->ru.ru_utime);
	double sys = tv_sec(&a->ru.ru_stime, &b->ru.ru_stime);
	const char *early = began != &a->wall ? " (from its first reads, during phase 3)" : "";
	double peak;

	report_phase(ctx, &(struct phase_record){
		.number = n, .title = p->title, .began = ts_sec(run, began), .wall = wall,
		.user = user, .sys = sys, .items = items, .unit = p->unit,
	});
	if (!ctx->opt.timing)
		return;
	peak = peak_rss_mib(&b->ru);	/* a high-water mark: now is the phase's end */
	if (p->unit[0])
		report_text(ctx, "Phase %d: wall %.3fs%s, user %.3fs, system %.3fs, peak RSS "
			    "%.1f MiB, %llu %s", n, wall, early, user, sys, peak, items, p->unit);
	else
		report_text(ctx, "Phase %d: wall %.3fs%s, user %.3fs, system %.3fs, peak RSS "
			    "%.1f MiB", n, wall, early, user, sys, peak);
}

/* What a phase will count to, from statfs now: inodes or bytes in use. */
static unsigned long long phase_total(const struct scrub_ctx *ctx, size_t i)
{
	struct statvfs sv;

	if (fstatvfs(ctx->mnt_fd, &sv) < 0)
		return 0;
	if (i == 2)
		return sv.f_files > sv.f_ffree ? sv.f_files - sv.f_ffree : 0;
	if (i == 4)
		return (sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	return 0;
}

/*
 * A lazy unmount (umount -l) detaches the mount while fscrub still holds
 * it: the scan could go on through the clone, but the administrator asked
 * for the filesystem to go away.  Stop with an operational error.
 */
static bool unmounted_meanwhile(struct scrub_ctx *ctx)
{
	if (!ctx->table_mnt_id || mount_id_attached(ctx->table_mnt_id))
		return false;
	report_operational(ctx, NULL, NULL, 0, "the filesystem was unmounted during the scan");
	return true;
}

static int run_phases(struct scrub_ctx *ctx)
{
	struct timespec run;

	clock_gettime(CLOCK_MONOTONIC, &run);
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		const struct phase *p = &phases[i];
		struct phase_clock start, end;
		unsigned long long items = 0;
		int ret;

		if (p->data_only && !ctx->opt.verify_data)
			continue;
		if (scrub_should_stop(ctx))
			break;
		clock_now(&start);
		report_verbose(ctx, "Phase %zu: %s.", i + 1, p->title);
		checkpoint_phase(ctx, (int)i + 1);
		if (i > 0)
			progress_phase(ctx, (int)i + 1, p->title, phase_total(ctx, i),
				       p->progress_unit);
		ret = p->run(ctx, &items);
		ctx->not_scanned = ret && i == 0;
		if (ret)
			return ret;
		progress_phase_end(ctx);
		if (i > 0 && unmounted_meanwhile(ctx))
			return EXIT_OPERATIONAL;
		if (i == 0 && (ret = progress_start(ctx)) < 0)
			report_operational(ctx, NULL, NULL, -ret, "cannot start the progress reporter");
		if (i == 0) {
			history_begin(ctx);
			/* The mount, its devices and the history are open: drop what is left. */
			confine_scan(ctx);
		}
		clock_now(&end);
		account_phase(ctx, (int)i + 1, p, &run,
			      i == 4 && ctx->data_began.tv_sec ? &ctx->data_began : &start.wall,
			      &start, &end, items);
	}
	return 0;
}

int phases_run(struct scrub_ctx *ctx)
{
	int ret = run_phases(ctx);

	phases_release(ctx);
	return ret;
}

static void put_linked_dir(struct dir_node *dir, void *arg)
{
	struct scrub_ctx *ctx = arg;

	dir_node_put(&ctx->dcache, dir);
}

void run_outputs_release(struct scrub_ctx *ctx)
{
	state_close(ctx->state);
	ctx->state = NULL;
	region_plan_free(ctx->regions);
	ctx->regions = NULL;
	checkpoint_free(ctx->checkpoint);
	ctx->checkpoint = NULL;
}

void phases_release(struct scrub_ctx *ctx)
{
	linktable_free(ctx->links, put_linked_dir, ctx);
	ctx->links = NULL;
	while (ctx->dotdot_suspects) {
		struct dotdot_suspect *s = ctx->dotdot_suspects;

		ctx->dotdot_suspects = s->next;
		dir_node_put(&ctx->dcache, s->dir);
		free(s);
	}
	inoset_free(ctx->reached);
	ctx->reached = NULL;
	inoset_free(ctx->dirs_unopened);
	ctx->dirs_unopened = NULL;
	if (ctx->xlinks) {
		xlink_list_release(ctx->xlinks);
		free(ctx->xlinks);
		ctx->xlinks = NULL;
	}
	devverify_release(ctx);
	ledger_free(ctx->ledger);
	ctx->ledger = NULL;
	/* ctx->ops stays: the reports name the backend and its repair tool. */
	if (ctx->backend && ctx->ops && ctx->ops->cleanup)
		ctx->ops->cleanup(ctx);
	ctx->backend = NULL;
}
