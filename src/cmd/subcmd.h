/*
 * subcmd: fscrub's subcommands, each its own small program with its own
 * options in cmd/NAME.c, run by main() from its table of subcommands
 * when argv[1] names one (fscrub status ..., fscrub watch ..., fscrub
 * health ..., fscrub locate ...).  argv[0] is the subcommand's name.
 * Each returns the exit status.
 */
#ifndef FSCRUB_SUBCMD_H
#define FSCRUB_SUBCMD_H

#include <json-c/json.h>
#include <stddef.h>

struct mount_info;
struct state_run;
struct strbuf;

/*
 * status.c: what the run history (state.h) says about each filesystem --
 * the last run, the findings still open, when data was last verified,
 * what is overdue -- without checking anything; 0, 4 (open errors), 8, 16.
 * Its usage() mirrors fscrub(8), "STATUS".
 */
int cmd_status(int argc, char **argv);
/*
 * status.c: the key of the run history (state.h) for a filesystem named as
 * a scan names it (mountpoint.h: a mount point or a mounted device) -- the
 * filesystem's UUID in uuid (len at least 48) and the mount's root in
 * mi->fsroot ("/" when unknown) -- so that status, health and watch find
 * what the scan recorded.  mi is filled by mount_resolve(); release it
 * with mount_info_release() also after a failure.  Returns 0, or an exit
 * code (16 not a mounted filesystem, 8 operational) with a reason in err.
 */
int status_fs_key(const char *arg, struct mount_info *mi, char *uuid, size_t len,
		  struct strbuf *err);
/* status.c: a run as status --json shows it (fscrub(8), STATUS, JSON). */
json_object *status_run_json(const struct state_run *r);
/* status.c: Unix time t as ISO 8601 UTC; NULL (JSON null) for t <= 0. */
json_object *status_json_time(double t);
/* watch.c: the error-event daemon. */
int cmd_watch(int argc, char **argv);
/* health.c: what the filesystems know of their health, now. */
int cmd_health(int argc, char **argv);
/* locate.c: from sectors of a device to the files and metadata they hold. */
int cmd_locate(int argc, char **argv);

#endif
