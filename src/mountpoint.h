/*
 * mountpoint: turn the command-line argument into a mounted filesystem,
 * with libmount.
 *
 * The argument is a mount point (a directory that is the root of a mount;
 * the topmost mount is used, as that is what the path shows), or a block
 * device that is mounted (the first mount of it in the table, preferring
 * one that shows the whole filesystem over a bind mount of a subdirectory;
 * how many other places it is mounted is reported).  Anything else is a
 * usage error with one line that says what the argument is.
 */
#ifndef FSCRUB_MOUNTPOINT_H
#define FSCRUB_MOUNTPOINT_H

#include <stdbool.h>
#include <sys/types.h>

#include "strbuf.h"

struct libmnt_table;

struct mount_info {
	char *target;		/* where it is mounted */
	char *source;		/* what is mounted */
	char *fstype;
	char *fsroot;		/* the part of the fs shown at target; "/" if unknown */
	int id;			/* mount id from mountinfo, 0 if unknown */
	unsigned nr_mounts;	/* for a device: how many mounts of it there are */
};

void mount_info_release(struct mount_info *mi);

/*
 * Resolve arg.  mtab is a mount table file to read instead of the kernel's
 * (NULL: /proc/self/mountinfo).  Returns 0, or 16 (usage: arg is not a
 * mounted filesystem) or 8 (operational: the table cannot be read), with a
 * one-line reason in err.
 */
int mount_resolve(const char *arg, const char *mtab, struct mount_info *mi,
		  struct strbuf *err);

/* The pieces, for the unit tests. */
struct libmnt_table *mount_table_load(const char *mtab, int *err);
void mount_table_free(struct libmnt_table *tb);
int mount_find_by_target(struct libmnt_table *tb, const char *path, struct mount_info *mi);
/* Returns the number of mounts of the device (0: not mounted). */
unsigned mount_find_by_devno(struct libmnt_table *tb, dev_t devno, struct mount_info *mi);

/* Is the mount with this id still in the kernel's mount table? */
bool mount_id_attached(int id);

/* Mount points directly below mount id (for -v); fn is called per submount. */
void mount_for_each_child(struct libmnt_table *tb, int id,
			  void (*fn)(const char *target, const char *fstype, void *arg),
			  void *arg);

#endif
