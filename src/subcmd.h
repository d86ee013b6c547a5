/*
 * subcmd: fscrub's subcommands, each its own small program with its own
 * options, run by main() when argv[1] names it (fscrub status ...,
 * fscrub watch ..., fscrub health ...).  argv[0] is the subcommand's name.  Each returns
 * the exit status.
 */
#ifndef FSCRUB_SUBCMD_H
#define FSCRUB_SUBCMD_H

/*
 * status.c: what the run history (state.h) says about each filesystem --
 * the last run, the findings still open, when data was last verified,
 * what is overdue -- without checking anything; 0, 4 (open errors), 8, 16.
 * Its usage() mirrors fscrub(8), "STATUS".
 */
int cmd_status(int argc, char **argv);
/* cmd_watch.c: the error-event daemon. */
int cmd_watch(int argc, char **argv);
/* cmd_health.c: what the filesystems know of their health, now. */
int cmd_health(int argc, char **argv);

#endif
