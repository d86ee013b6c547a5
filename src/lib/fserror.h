/*
 * fserror: the kernel's filesystem error events (fanotify FAN_FS_ERROR).
 *
 * ext4 (from Linux 5.16) and XFS (from Linux 7.0) report every metadata
 * error they detect to fanotify groups that marked the filesystem with
 * FAN_MARK_FILESYSTEM and FAN_FS_ERROR.  An event carries an error record
 * (the errno the filesystem reported and how many errors happened since
 * the event was queued: the kernel queues one error event per filesystem
 * and counts the errors that arrive while it waits to be read) and a file
 * id record (the filesystem's fsid and a file handle of the inode
 * concerned, or an invalid handle when there is none).
 *
 * A utility: it knows fanotify and file handles, nothing of the scrub.
 * fserror_parse() is a pure function of a read buffer (unit-tested).
 */
#ifndef FSCRUB_FSERROR_H
#define FSCRUB_FSERROR_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct strbuf;

/* The handle bytes are kept up to this size (MAX_HANDLE_SZ in the kernel). */
#define FSERROR_HANDLE_MAX 128

struct fserror_event {
	uint32_t fsid[2];	/* statfs f_fsid of the filesystem */
	int error;		/* positive errno the filesystem reported */
	uint32_t error_count;	/* errors since this event was queued, >= 1 */
	bool has_handle;	/* a valid file handle follows */
	int handle_type;
	unsigned handle_bytes;
	unsigned char handle[FSERROR_HANDLE_MAX];
	uint64_t ino;		/* from the handle where its format tells, else 0 */
};

/* A fanotify group for error events: the fd, or a negative errno. */
int fserror_open(void);

/* Mark the filesystem that path is on: 0 or a negative errno. */
int fserror_mark(int fan_fd, const char *path);

/*
 * Does the kernel report FAN_FS_ERROR for fstype?  By the kernel version
 * that added it (the mark itself succeeds on any filesystem with file
 * handles, reported errors or not).  false with the reason in why.
 */
bool fserror_supported(const char *fstype, struct strbuf *why);

/*
 * Call fn for every FAN_FS_ERROR event in buf (len bytes, as read() from
 * the group's fd).  Returns the number of events, or -EINVAL for a
 * malformed buffer (events before the bad one have been passed to fn).
 */
int fserror_parse(const void *buf, size_t len,
		  void (*fn)(const struct fserror_event *ev, void *arg), void *arg);

/*
 * Fill ev's handle with XFS's own for inode ino of generation gen (the
 * 64-bit form, FILEID_INO64_GEN: XFS decodes it for any inode number), so
 * that fserror_resolve() finds the inode an XFS health event names.
 */
void fserror_xfs_handle(struct fserror_event *ev, uint64_t ino, uint32_t gen);

/*
 * The path of the event's inode, through mount_fd (any descriptor on the
 * filesystem): open_by_handle_at() and /proc/self/fd.  Returns an O_PATH
 * descriptor of the inode (the caller closes it) with its path in path and
 * its inode number in *ino, or a negative errno (no handle: -ENOENT; the
 * inode cannot be read or is no longer linked: what the kernel said);
 * *ino and path are unchanged on failure.
 */
int fserror_resolve(int mount_fd, const struct fserror_event *ev, struct strbuf *path,
		    uint64_t *ino);

#endif
