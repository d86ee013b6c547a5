/*
 * mountpoint: turn the command-line argument into a mounted filesystem,
 * with libmount.
 *
 * The argument is a mount point (a directory that is the root of a mount;
 * the topmost mount is used, as that is what the path shows, and the
 * number of mounts stacked there is kept so that the caller can say so),
 * or a block device that is mounted (the first mount of it in the table,
 * preferring one that shows the whole filesystem over a bind mount of a
 * subdirectory, and among those one whose mount point shows it over one
 * that another mount covers; how many places it is mounted is reported).
 * A device whose chosen mount is covered is marked so: its path shows
 * another filesystem, and the caller must reach it another way
 * (mountclone.h) or refuse.  Anything else is a usage error with one line
 * that says what the argument is.
 */
#ifndef FSCRUB_MOUNTPOINT_H
#define FSCRUB_MOUNTPOINT_H

#include <stdbool.h>
#include <sys/types.h>

#include "lib/strbuf.h"

struct libmnt_table;

struct mount_info {
	char *target;		/* where it is mounted */
	char *source;		/* what is mounted */
	char *fstype;
	char *fsroot;		/* the part of the fs shown at target; "/" if unknown */
	int id;			/* mount id from mountinfo, 0 if unknown */
	dev_t devno;		/* st_dev of the mount's filesystem, from the table */
	unsigned nr_mounts;	/* for a device: how many mounts of it there are */
	unsigned nr_stacked;	/* for a mount point: how many mounts are on the path */
	bool by_device;		/* the argument was a block device ... */
	dev_t arg_rdev;		/* ... this one */
	bool covered;		/* the device's mount is covered by another mount */
};

void mount_info_release(struct mount_info *mi);

/*
 * Resolve arg.  mtab is a mount table file to read instead of the kernel's
 * (NULL: /proc/self/mountinfo).  Returns 0, or 16 (usage: arg is not a
 * mounted filesystem, or it is reached through a mount that is not in the
 * table, a detached one, whose path shows another filesystem) or 8
 * (operational: the table cannot be read, or arg is a mount whose FUSE
 * daemon died, ENOTCONN), with a one-line reason in err.
 */
int mount_resolve(const char *arg, const char *mtab, struct mount_info *mi,
		  struct strbuf *err);

/* The pieces, for the unit tests. */
struct libmnt_table *mount_table_load(const char *mtab, int *err);
void mount_table_free(struct libmnt_table *tb);
/* mount_sb_readonly() in tb. */
bool mount_sb_readonly_in(struct libmnt_table *tb, dev_t devno);
int mount_find_by_target(struct libmnt_table *tb, const char *path, struct mount_info *mi);
/*
 * Returns the number of mounts of the device (0: not mounted).  live: tb is
 * the kernel's table, so whether a mount's path shows it can be asked.
 */
unsigned mount_find_by_devno(struct libmnt_table *tb, dev_t devno, struct mount_info *mi,
			     bool live);

/*
 * Is the filesystem of device number devno read-only as a whole: its
 * superblock mounted "ro" in the kernel's mount table (a read-only bind
 * mount of a read-write filesystem is not)?  False if the table cannot be
 * read or does not show it.
 */
bool mount_sb_readonly(dev_t devno);
/*
 * Is the filesystem of the mount with this id (the kernel's mount table)
 * read-only as a whole, by its superblock's options?  A read-only mount
 * of a filesystem mounted writable elsewhere is not; an unknown id is not.
 */
bool mount_sb_readonly_by_id(int id);

/* The id of the mount that path shows now (statx), or a negative errno. */
int mount_shown_id(const char *path);

/*
 * Does the kernel's mount id mount the block device devno?  (true when
 * the table cannot be read: the caller cannot tell otherwise.)
 */
bool mount_id_is_device(int id, dev_t devno);

/*
 * In tb, the mount that is the one mi names (same target, device number,
 * root, type and source), first in table order; its id, or -ENOENT.
 */
int mount_find_same(struct libmnt_table *tb, const struct mount_info *mi);
/* In tb, the target of mount id; NULL if there is none. */
const char *mount_target_of(struct libmnt_table *tb, int id);

/*
 * A key for the filesystem fd is on where it has neither a UUID nor an
 * f_fsid (FUSE: f_fsid 0 on every mount), from its mount in the kernel's
 * table: "mnt-" and 16 hex digits of a hash of its type and its device's
 * UUID, or its source where that is a file or device, or its source, mount
 * point and options.  0, or a negative errno (not in the table: a clone).
 */
int mount_key(int fd, char *out, size_t len);

/* Is the mount with this id still in the kernel's mount table? */
bool mount_id_attached(int id);

/*
 * Does mount id have the option name (a filesystem option such as
 * "commit" or "rescue", or a VFS one)?  Its value, if it has one, is
 * added to value (may be NULL).  False too when the table cannot be read.
 */
bool mount_option(int id, const char *name, struct strbuf *value);

/* Mount points directly below mount id (for -v); fn is called per submount. */
void mount_for_each_child(struct libmnt_table *tb, int id,
			  void (*fn)(const char *target, const char *fstype, void *arg),
			  void *arg);

#endif
