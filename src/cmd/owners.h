/*
 * owners: who owns a range of bytes of a mounted filesystem's device, for
 * fscrub locate (cmd/locate.c).
 *
 * One function per filesystem fills a list of owners, each a piece of the
 * range: a file's data (its inode, its offset in the file, its path when
 * one can be found), metadata (what it is; the inode it belongs to, if
 * one), free space, or allocated space whose owner is not known.  The
 * pieces the filesystem does not cover (past its end, a btrfs device's
 * unallocated space is free, not uncovered) are left out; the caller says
 * they are not part of it.
 *
 *   XFS    GETFSMAP (backends/xfs/xfs_media.h): the reverse-mapping btree names
 *          every owner; paths by XFS's file handles.
 *   ext4   GETFSMAP names metadata and free space and leaves file blocks
 *          "unknown"; those are looked up in the inode tables and extent
 *          trees read from the device (backends/ext4/ext4_locate.c),
 *          starting with the flex group that holds them, and named by
 *          ext4's file handles.
 *   btrfs  the device extent and the chunk that hold the byte give its
 *          logical address; LOGICAL_INO_V2 names the files of data, the
 *          extent tree the tree of metadata (backends/btrfs/btrfs_locate.c).
 *
 * Library code: nothing printed; functions return 0 or a negative errno.
 */
#ifndef FSCRUB_LOCATE_H
#define FSCRUB_LOCATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/fsmounts.h"
#include "lib/strbuf.h"

enum loc_kind {
	LOC_FILE,	/* a file's data (or attribute fork: what says so) */
	LOC_META,	/* filesystem metadata; ino set if it is one inode's */
	LOC_FREE,	/* free space */
	LOC_UNKNOWN,	/* allocated, owner not found */
};

struct loc_owner {
	enum loc_kind kind;
	uint64_t off, len;	/* bytes of the filesystem's device */
	uint64_t ino;		/* the inode (LOC_FILE, an inode's metadata), else 0 */
	uint64_t root;		/* btrfs: the subvolume of ino; else 0 */
	uint64_t file_off;	/* LOC_FILE: the file's byte at off */
	char *path;		/* LOC_FILE: its path, NULL if none was found */
	char *what;		/* what it is, for people: "data", "the journal", ... */
};

struct loc_owners {
	struct loc_owner *v;
	size_t n;
};

/* The mounted filesystem asked about. */
struct loc_fs {
	const char *target;	/* its mount point */
	const char *fstype;
	const char *devpath;	/* the device, as /dev/NAME */
	dev_t devno;		/* the device */
	int fd;			/* its root directory, O_RDONLY */
};

/* Append an owner; what is copied (NULL: none); path is taken (may be NULL). */
struct loc_owner *loc_owner_add(struct loc_owners *o, enum loc_kind kind, uint64_t off,
				uint64_t len, const char *what, char *path);
void loc_owners_release(struct loc_owners *o);

/*
 * The path of a file by its handle (type and bytes as name_to_handle_at()
 * gives them) on fs: malloc'ed, NULL if the inode cannot be opened (freed,
 * another generation, no permission).
 */
char *loc_handle_path(const struct loc_fs *fs, int type, const void *handle, size_t len);

/*
 * Paths for the files among o that have none, or one that shows another
 * inode (a file opened by its handle on a fresh mount is not connected to
 * its directory: /proc/self/fd says "/"): the mounted tree below
 * fs->target is walked (not across mounts) until each is found, by the
 * inode numbers readdir gives (no stat of each file: a million-file tree
 * costs the reading of its directories).  A file no name reaches keeps
 * path NULL.
 */
void loc_name_by_walk(const struct loc_fs *fs, struct loc_owners *o);
/*
 * Is o a file whose path is missing, or shows another inode than its own
 * (a file opened by handle on a fresh mount: "/")?
 */
bool loc_needs_name(const struct loc_fs *fs, const struct loc_owner *o);

/*
 * For the LOC_UNKNOWN owners of o (an XFS without the reverse-mapping
 * btree does not say whose its allocated space is): every file and
 * directory below fs->target (not across mounts) is mapped with FIEMAP
 * (without FIEMAP_FLAG_SYNC: nothing is written), and the parts of those
 * owners a file maps become file owners.  What no file maps stays
 * unknown.  A whole walk: slow on a big filesystem, the price of having no
 * reverse map.
 */
void loc_fiemap_walk(const struct loc_fs *fs, struct loc_owners *o);

/*
 * Is devno the device the filesystem of m is mounted from: its device
 * number, its source's node, or (btrfs) one of its devices?
 */
bool loc_mount_has_device(const struct fsmount *m, dev_t devno);

/*
 * The device path of fs for the mount m: m's source where it is devno's
 * node, else /dev/name, written to buf of len bytes.
 */
const char *loc_devpath(const struct fsmount *m, dev_t devno, const char *name, char *buf,
			size_t len);

/*
 * The owners of [off, off + len) of fs's device by its type (locate_xfs(),
 * locate_btrfs(), else locate_ext4()), an XFS's unknown owners looked for
 * by loc_fiemap_walk(); fs->fd is opened and closed here.
 */
int loc_owners_of(struct loc_fs *fs, uint64_t off, uint64_t len, struct loc_owners *out);

/* The owners of [off, off + len) of fs's device, appended to out in device order. */
int locate_xfs(const struct loc_fs *fs, uint64_t off, uint64_t len, struct loc_owners *out);
int locate_ext4(const struct loc_fs *fs, uint64_t off, uint64_t len, struct loc_owners *out);
/* Close the ext4 filesystem locate_ext4() keeps open between ranges, and its index. */
void locate_ext4_release(void);
int locate_btrfs(const struct loc_fs *fs, uint64_t off, uint64_t len, struct loc_owners *out);
/*
 * Is block device devno one of the devices of the btrfs filesystem of fd
 * (BTRFS_IOC_DEV_INFO: a filesystem of several devices is mounted from
 * one of them)?  0 with its devid and size, -ENODEV, or another -errno.
 */
int locate_btrfs_device(int fd, dev_t devno, uint64_t *devid, uint64_t *size);

#endif
