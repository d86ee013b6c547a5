/*
 * exitcode: fsck(8)'s exit code bits, which fscrub and its subcommands
 * leave with (the report core computes a scan's, report_exit_code()).
 * Here so that a utility that ends a command (fsmounts.h) needs nothing
 * above lib/.
 */
#ifndef FSCRUB_EXITCODE_H
#define FSCRUB_EXITCODE_H

enum scrub_exit {
	EXIT_CLEAN		= 0,
	EXIT_CORRECTED		= 1,
	EXIT_UNCORRECTED	= 4,
	EXIT_OPERATIONAL	= 8,
	EXIT_USAGE		= 16,
	EXIT_CANCELLED		= 32,
};

#endif
