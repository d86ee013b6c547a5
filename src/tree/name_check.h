/*
 * name_check: names that deceive -- look-alikes in one directory or among
 * one inode's attribute names, bidi controls, invisible characters, mixed
 * scripts, option-like names, and the filesystem label -- reported as
 * warnings; twins a casefolded directory takes for one name as errors.
 *
 * The pieces: names.h classifies one name's characters, unicrash.h (ICU)
 * computes its keys and compares two names.  Per directory the keys are
 * 64-bit hashes in a set (three a name at most, the table under half
 * full); only when one collides is the directory read again to find,
 * compare and name both entries (at most UNICRASH_MAX_MEMBERS of them).
 *
 * Phase 3 decides once whether names are checked (name_check_setup(): ICU
 * loaded, and not FSCRUB_DEBUG_NO_NAME_CHECKS) and whether every directory
 * is taken as casefolded (FSCRUB_DEBUG_CASEFOLD).  Counts every name it
 * checks in the walk thread's stats.names (-v prints the total).
 * Threading: one struct name_check per walk thread; the functions take it
 * and never share it.
 */
#ifndef FSCRUB_NAME_CHECK_H
#define FSCRUB_NAME_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "tree/unicrash.h"

struct scrub_ctx;
struct walk_thread;
struct walk_dir;
struct walk_entry;
struct dir_node;

struct name_check {
	struct unicrash_set dir;	/* the names of the directory being read */
	struct unicrash_set xattrs;	/* the attribute names of one inode */
	struct unicrash_members members;	/* the names behind collided keys */
	bool collided;			/* a key of this directory collided */
	bool skip_dir;			/* locked: its names are encoded, not the user's */
};

void name_check_init(struct name_check *nc);
void name_check_release(struct name_check *nc);

/* Phase 3, before the walk: load ICU (once), decide whether names are checked. */
void name_check_setup(struct scrub_ctx *ctx);

/* The walk's hooks: a directory's start, each entry (flags: names_classify()), its end. */
void name_check_dir_begin(struct walk_thread *t, struct name_check *nc,
			  const struct walk_dir *d);
void name_check_entry(struct walk_thread *t, struct name_check *nc, const struct walk_dir *d,
		      const struct walk_entry *e, unsigned flags);
void name_check_dir_end(struct walk_thread *t, struct name_check *nc, struct walk_dir *d);

/*
 * The attribute names of one inode: list holds n bytes of NUL-terminated
 * names (listxattr's form); the inode is dir/name (name NULL: dir), ino.
 */
void name_check_xattrs(struct walk_thread *t, struct name_check *nc,
		       const struct dir_node *dir, const char *name, uint64_t ino,
		       const char *list, size_t n);

/* The filesystem label (FS_IOC_GETFSLABEL on fd), if the filesystem has one. */
void name_check_label(struct scrub_ctx *ctx, int fd);

#endif
