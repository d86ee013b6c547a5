/*
 * stx: fscrub's statx() and the rules built on it; see stx.h.
 */
#include "lib/stx.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "lib/inokey.h"

#ifndef EFSCORRUPTED
#define EFSCORRUPTED EUCLEAN
#endif
#ifndef EFSBADCRC
#define EFSBADCRC EBADMSG
#endif

/* What every look at an inode asks for: all the checks and the rules use. */
#define STX_MASK (STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_INO | \
			 STATX_SIZE | STATX_BLOCKS | STATX_ATIME | STATX_MTIME | \
			 STATX_CTIME | STATX_MNT_ID | STATX_SUBVOL)

bool errno_is_corruption(int err)
{
	return err == EIO || err == EFSCORRUPTED || err == EFSBADCRC;
}

int stx_get(int dirfd, const char *name, struct statx *stx)
{
	int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_SYNC_AS_STAT;

	if (!name || !*name)
		flags |= AT_EMPTY_PATH;
	if (statx(dirfd, name ? name : "", flags, STX_MASK, stx) < 0)
		return -errno;
	return 0;
}

bool stx_unchanged(const struct statx *a, const struct statx *b)
{
	return a->stx_ino == b->stx_ino && a->stx_nlink == b->stx_nlink &&
	       a->stx_size == b->stx_size && a->stx_mode == b->stx_mode &&
	       stx_ns(&a->stx_ctime) == stx_ns(&b->stx_ctime) &&
	       stx_ns(&a->stx_mtime) == stx_ns(&b->stx_mtime);
}

const char *inode_mode_name(unsigned mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "regular file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	case S_IFCHR: return "character device";
	case S_IFBLK: return "block device";
	case S_IFIFO: return "FIFO";
	case S_IFSOCK: return "socket";
	default: return "inode of unknown type";
	}
}
