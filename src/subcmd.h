/*
 * subcmd: fscrub's subcommands, each its own small program with its own
 * options, run by main() when argv[1] names it (fscrub watch ...,
 * fscrub health ...).  argv[0] is the subcommand's name.  Each returns
 * the exit status.
 */
#ifndef FSCRUB_SUBCMD_H
#define FSCRUB_SUBCMD_H

/* cmd_watch.c: the error-event daemon. */
int cmd_watch(int argc, char **argv);
/* cmd_health.c: what the filesystems know of their health, now. */
int cmd_health(int argc, char **argv);

#endif
