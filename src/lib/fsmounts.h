/*
 * fsmounts: the filesystems a subcommand (fscrub watch, fscrub health)
 * works on: the mount points named on its command line, or every mounted
 * filesystem of the types it knows, one mount per filesystem.
 *
 * A utility: it calls only mountpoint.h and libmount, never the core.
 */
#ifndef FSCRUB_FSMOUNTS_H
#define FSCRUB_FSMOUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct fsmount {
	char *target;		/* the mount point */
	char *source;		/* the device (or "none") */
	char *fstype;
	dev_t devno;		/* st_dev of the filesystem, from the table */
};

struct fsmount_list {
	struct fsmount *v;
	size_t nr;
};

/*
 * Fill list.  nr_args > 0: each of args through mount_resolve() (a mount
 * point or a mounted device); a filesystem named twice is listed once.
 * nr_args == 0: every mount in the kernel's table whose type want() accepts,
 * one per device number (the first mount that shows the filesystem's root
 * and is not covered).  Returns 0, or the exit code (16 usage, 8
 * operational) after one "fscrub PROG: ..." line on stderr.
 */
int fsmounts_collect(const char *prog, char **args, int nr_args,
		     bool (*want)(const char *fstype), struct fsmount_list *list);
void fsmounts_release(struct fsmount_list *list);

#endif
