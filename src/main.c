/*
 * fscrub: check a mounted, live filesystem for corruption and media errors.
 *
 * main() parses the command line, sets up signals and the background
 * priority, runs the phases (phases.c) and leaves with the fsck(8) exit
 * code that report.c computed from what was found.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"
#include "context.h"
#include "phases.h"
#include "report.h"

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

int main(int argc, char **argv)
{
	struct scrub_ctx ctx;
	int ret;

	scrub_ctx_init(&ctx);
	ret = cli_parse(argc, argv, &ctx.opt);
	if (ret >= 0)
		return ret;
	setup_signals();
	if (ctx.opt.background)
		go_background();

	ret = phases_run(&ctx);
	/* Failing to find the filesystem needs no summary: the message said it. */
	if (ret == EXIT_USAGE || (ret && ctx.mnt_fd < 0)) {
		scrub_ctx_release(&ctx);
		return ret;
	}
	report_summary(&ctx);
	ret |= report_exit_code(&ctx);
	scrub_ctx_release(&ctx);
	return ret;
}
