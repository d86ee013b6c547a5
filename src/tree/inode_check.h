/*
 * inode_check: phase 3, the walk visitor that checks every directory entry,
 * every inode reached through it and every directory as a whole.
 *
 * Per entry: the name (names.h) and whether it deceives (name_check.h:
 * look-alikes in the directory, bidi, invisible, mixed scripts), statx of
 * the inode, d_ino and d_type against it, nlink 0, symlink length, extent
 * maps (extents.h), extended attributes (xattrs.h), and the link-count
 * bookkeeping (linktable.h).  Per directory, once it has been read: its
 * look-alike pairs (a second read if a key collided), its own attributes,
 * ".", the number of subdirectories against its nlink, and ".." (handed to
 * phase 4, phase4.c).
 *
 * The live-filesystem rule: a directory-level finding is a suspect until
 * the directory has been read again.  The directory is statx()ed before and
 * after; if it changed, every suspect becomes an info "changed while being
 * checked".  If not, the suspects' entries are read again (one more pass
 * over the directory) and statx()ed again, and only a finding that is the
 * same the second time is reported as an error.
 */
#ifndef FSCRUB_INODE_CHECK_H
#define FSCRUB_INODE_CHECK_H

#include "tree/walk.h"

extern const struct walk_visitor inode_check_visitor;


#endif
