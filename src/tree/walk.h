/*
 * walk: the parallel walk of the directory tree from the mount root.
 *
 * The walk owns traversal and nothing else: it reads each directory with
 * getdents64 through a descriptor from the dircache, statx()es every entry
 * relative to that descriptor (AT_SYMLINK_NOFOLLOW, never following a
 * link), queues subdirectories that are on the same mount, and hands every
 * entry to a visitor.  Phase 3 (inode_check.c) and phase 5 (dataverify.c)
 * are visitors; a backend adds its own per-inode checks through its ops.
 *
 * Bulk records: when the visitor asks for them and the backend has a
 * bulk_inodes hook (backend.h), each getdents buffer's inode numbers are
 * handed to the backend first, and a non-directory entry whose record
 * agrees with its directory entry (type, a single link) gets its statx
 * made from the record instead of asked for (walk_entry.bulk).  Every
 * other entry -- directories, whose mount id the walk needs, hard links,
 * entries without a record -- is stat'ed as before.
 *
 * Never crossing into another mount: an entry whose statx mount id differs
 * from the root's (or, on kernels without STATX_MNT_ID, that is a mount
 * root) is reported as a skipped submount and not entered.  btrfs
 * subvolumes have their own st_dev but the same mount id, so they are part
 * of the walk.
 */
#ifndef FSCRUB_WALK_H
#define FSCRUB_WALK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "scan/context.h"
#include "lib/stx.h"

struct backend_inode;

struct walk_entry {
	const char *name;
	size_t namelen;
	uint64_t d_ino;
	unsigned char d_type;		/* DT_* from getdents64 */
	int stat_err;			/* positive errno if statx failed */
	bool submount;			/* a mount point of another mount */
	/*
	 * For directories and single-link inodes: this (st_dev, st_ino) was
	 * already reached by another name in this walk.
	 */
	bool seen_before;
	/*
	 * stx was made from this bulk record, not by statx (NULL: stat'ed).
	 * Nothing may be reported from it alone: a finding is looked at
	 * again through the VFS first, as every finding is.
	 */
	const struct backend_inode *bulk;
	struct statx stx;
};

struct walk_dir {
	struct dir_node *node;
	int fd;				/* pinned for the visit */
	struct statx before;		/* the directory before it was read */
	bool seen_dot, seen_dotdot;
	uint64_t dot_ino, dotdot_ino;	/* d_ino of "." and ".." */
	unsigned long long nr_entries;	/* excluding "." and ".." */
	unsigned long long nr_subdirs;	/* entries that are directories */
	int read_err;			/* positive errno if getdents failed */
	/*
	 * fscrypt: the directory is encrypted and its key is not loaded (a
	 * v2 policy whose key the kernel says is absent), or files in it
	 * failed to open with ENOKEY (nr_locked of them).
	 */
	bool locked;
	bool key_absent;		/* known before the read: the v2 key is absent */
	unsigned long long nr_locked;
};

struct walk_thread {
	struct scrub_ctx *ctx;
	unsigned index;
	struct scrub_stats stats;
	char *dents;			/* getdents64 buffer */
	size_t dents_size;
	void *vstate;			/* the visitor's per-thread state */
	void *varg;			/* walk_tree()'s arg */
	unsigned long long nr_locked;	/* ENOKEY opens so far (walk_dir.nr_locked) */
	/* Bulk records of the current getdents buffer, sorted by inode. */
	uint64_t *bulk_inos;
	struct backend_inode *bulk;
	size_t nr_bulk;
};

struct walk_visitor {
	const char *name;
	void *(*thread_init)(struct scrub_ctx *ctx, unsigned index);
	void (*thread_free)(void *vstate);
	void (*dir_begin)(struct walk_thread *t, struct walk_dir *d);
	void (*entry)(struct walk_thread *t, struct walk_dir *d,
		      const struct walk_entry *e);
	void (*dir_end)(struct walk_thread *t, struct walk_dir *d);
	/* Keep the set of inodes reached in ctx->reached (phase 3's walk). */
	bool keep_reached;
	/* Take inodes from the backend's bulk records where it has them. */
	bool bulk;
};

/*
 * Walk the whole tree with ctx->opt.nr_threads threads; arg is handed to
 * the visitor as walk_thread.varg.  Per-thread counters are added to
 * *stats; *items gets the number of directories processed.  A directory
 * already reached by another name is not entered twice: if it changed
 * since the scan began it moved (an info), else it has two names (an
 * error, dir.multiply_linked).  Returns 0 or a negative errno if the walk
 * could not start.
 */
int walk_tree(struct scrub_ctx *ctx, const struct walk_visitor *v, void *arg,
	      struct scrub_stats *stats, unsigned long long *items);


/*
 * Iterate over the entries of an open directory from its start, "." and
 * ".." included, calling fn for each; a non-zero return from fn stops the
 * iteration and is returned.  Returns 0, fn's value, or a negative errno.
 */
/*
 * What dirent_iterate() returns (negated) when the kernel hands back entries
 * it already gave: the directory's reading would never end (damage).
 * getdents64 itself never fails with ELOOP.
 */
#define DIRENT_LOOPS ELOOP
typedef int (*dirent_fn)(void *arg, const char *name, size_t namelen,
			 uint64_t d_ino, unsigned char d_type);
int dirent_iterate(int fd, char *buf, size_t bufsize, dirent_fn fn, void *arg);

/*
 * Open a regular file found by the walk: read-only, no atime update, never
 * following a symlink, not waiting for a lease, with extra_flags added
 * (O_DIRECT).  Returns the fd; -EINVAL if extra_flags had O_DIRECT and the
 * filesystem refuses it; -ENOKEY, not reported, if the file is encrypted
 * and its key is not loaded (counted in the directory's nr_locked, for one
 * info per directory); -EOPNOTSUPP, not reported, if it is an fs-verity
 * file and the kernel has no fs-verity; or -1 when the file cannot be checked (a race is
 * ignored, damage and operational failures are already reported).
 */
int walk_open_file(struct walk_thread *t, const struct walk_dir *d,
		   const struct walk_entry *e, int extra_flags);
/* The same, and the open file's statx in *now when it returns an fd. */
int walk_open_file_stx(struct walk_thread *t, const struct walk_dir *d,
		       const struct walk_entry *e, int extra_flags, struct statx *now);

#endif
