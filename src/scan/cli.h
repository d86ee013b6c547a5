/*
 * cli: the command line.  Short options follow xfs_scrub(8) where both
 * have them; usage() mirrors man/fscrub.8.
 */
#ifndef FSCRUB_CLI_H
#define FSCRUB_CLI_H

#include <stdio.h>

struct scrub_options;

/*
 * Parse argv into opt.  Returns -1 to go on scrubbing, or the exit code to
 * leave with: 0 after --help or -V, 16 after a usage error (the message
 * has been printed on stderr).
 */
int cli_parse(int argc, char **argv, struct scrub_options *opt);
void cli_usage(FILE *f);

#endif
