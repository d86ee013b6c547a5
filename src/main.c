/*
 * fscrub: check a mounted, live filesystem for corruption and media errors.
 *
 * main() runs a subcommand (cmd/) when argv[1] names one; otherwise it
 * parses the command line, sets up signals and the background priority,
 * runs the phases (scan/phases.c) and leaves with the fsck(8) exit code
 * that report/report.c computed from what was found.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "scan/cli.h"
#include "scan/context.h"
#include "scan/history.h"
#include "scan/json_report.h"
#include "scan/metrics.h"
#include "scan/phases.h"
#include "scan/summary.h"
#include "report/report.h"
#include "cmd/subcmd.h"

/* From linux/ioprio.h, which older userspace headers lack. */
#define IOPRIO_CLASS_IDLE 3
#define IOPRIO_CLASS_SHIFT 13
#define IOPRIO_WHO_PROCESS 1

static void on_signal(int sig)
{
	(void)sig;
	scrub_cancelled = 1;
}

static void setup_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* A closed pipe on stdout is an output error (exit 8), not a kill. */
	signal(SIGPIPE, SIG_IGN);
}

/* -b: stay out of the way of the real workload. */
static void go_background(void)
{
	if (syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0,
		    IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT) < 0)
		fprintf(stderr, "fscrub: cannot set the idle I/O class: %s\n", strerror(errno));
	if (setpriority(PRIO_PROCESS, 0, 19) < 0)
		fprintf(stderr, "fscrub: cannot set nice 19: %s\n", strerror(errno));
}

/*
 * The subcommands, each its own small program with its own options
 * (cmd/subcmd.h), run when argv[1] names one; anything else is a scan.
 */
static const struct subcmd {
	const char *name;
	int (*run)(int argc, char **argv);
} subcmds[] = {
	{ "status", cmd_status },
	{ "watch", cmd_watch },
	{ "health", cmd_health },
	{ "locate", cmd_locate },
};

static const struct subcmd *find_subcmd(const char *name)
{
	for (size_t i = 0; i < sizeof(subcmds) / sizeof(subcmds[0]); i++)
		if (!strcmp(subcmds[i].name, name))
			return &subcmds[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct subcmd *cmd;
	struct scrub_ctx ctx;
	struct timespec start;
	int ret, err;

	/* A subcommand's name: a directory named so is ./status. */
	if (argc > 1 && (cmd = find_subcmd(argv[1])))
		return cmd->run(argc - 1, argv + 1);
	/*
	 * Arrays of 128 KiB and more (the per-inode and per-extent lists) in
	 * mappings of their own, always: glibc otherwise raises the threshold
	 * to the largest such array freed, and the next ones grow on the heap,
	 * where a realloc copies (old and new live at once) and what is freed
	 * is not given back.  A mapping grows with mremap and goes back whole.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	clock_gettime(CLOCK_MONOTONIC, &start);
	scrub_ctx_init(&ctx);
	ret = cli_parse(argc, argv, &ctx.opt);
	if (ret >= 0)
		return ret;
	report_configure(&ctx, ctx.opt.verbose, ctx.opt.debug, ctx.opt.max_errors);
	if (ctx.opt.json_path && (err = json_report_open(&ctx))) {
		fprintf(stderr, "fscrub: cannot write the JSON report '%s': %s\n",
			ctx.opt.json_path, strerror(err));
		return EXIT_USAGE;
	}
	if (ctx.opt.metrics_path)
		metrics_register(&ctx, &start);
	setup_signals();
	/* --time-budget counts from here: the run's wall time, metadata phases included. */
	if (ctx.opt.time_budget)
		ctx.budget_end_ns = (uint64_t)start.tv_sec * 1000000000ULL +
				    (uint64_t)start.tv_nsec + ctx.opt.time_budget * 1000000000ULL;
	history_open(&ctx);
	if (ctx.opt.background)
		go_background();

	ret = phases_run(&ctx);
	report_run_stop(&ctx);
	/* Failing to find the filesystem needs no summary: the message said it. */
	if (!(ret == EXIT_USAGE || (ret && ctx.mnt_fd < 0)))
		summary_print(&ctx);
	/* The history, the metrics, the JSON report (report.h); a failure adds bit 8. */
	ret = report_run_end(&ctx, ret, ret != 0);
	run_outputs_release(&ctx);
	scrub_ctx_release(&ctx);
	return ret;
}
