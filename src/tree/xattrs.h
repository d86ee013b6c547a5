/*
 * xattrs: list and read back every extended attribute of every inode.
 *
 * Files and directories are read through an open descriptor; symlinks,
 * device nodes, FIFOs and sockets by path without opening them (opening a
 * device node or FIFO has side effects or blocks), through
 * /proc/self/fd/DIRFD/NAME so that the path stays short however deep the
 * tree is.  Each value is sized, then read: a read that returns a
 * different length than the size probe, or a name that is listed but
 * cannot be found, is looked at again before it is reported (another
 * process may be changing the attributes).
 *
 * An inode with more names than listxattr() can return (E2BIG: the VFS
 * lists at most 64 KiB of them; XFS, btrfs and tmpfs hold more) is listed
 * by the backend's list_xattrs hook (backend.h) and its values read back
 * as any others; without one, one xattr.too_many info says its attributes
 * were not checked, counted in scrub_stats.xattr_unlisted.
 */
#ifndef FSCRUB_XATTRS_H
#define FSCRUB_XATTRS_H

#include <stdbool.h>
#include <stddef.h>

struct walk_thread;
struct walk_dir;
struct walk_entry;
struct dir_node;
struct name_check;

/* Per-thread buffers, grown on demand. */
struct xattr_buf {
	char *names;
	size_t names_size;
	char *value;
	size_t value_size;
	bool ledger_named;	/* the last list had a checksum ledger record (ledger.h) */
	struct name_check *name_check;	/* checks the attribute names (NULL: none) */
};

void xattr_buf_init(struct xattr_buf *xb);
void xattr_buf_release(struct xattr_buf *xb);

/* The attributes of an entry (fd >= 0: through it; else by path). */
void xattrs_check_entry(struct walk_thread *t, struct xattr_buf *xb,
			const struct walk_dir *d, const struct walk_entry *e, int fd);
/* The attributes of the directory being read itself. */
void xattrs_check_dir(struct walk_thread *t, struct xattr_buf *xb,
		      const struct walk_dir *d);

#endif
