/*
 * btrfs_xattrs: the attribute names of an inode that listxattr() refuses,
 * from the inode's XATTR_ITEMs.  The btrfs backend's list_xattrs hook
 * (backend.h).  See btrfs_xattrs.c.
 */
#ifndef FSCRUB_BTRFS_XATTRS_H
#define FSCRUB_BTRFS_XATTRS_H

#include <stddef.h>
#include <stdint.h>

struct scrub_ctx;
struct backend_dir;
struct backend_entry;
struct strbuf;

/*
 * Phase 3, walk threads: append the names of inode e of d (d itself when
 * e is NULL) to names, as backend.h's list_xattrs says.  Needs
 * CAP_SYS_ADMIN (-EPERM otherwise).  Thread-safe: no state.
 */
int btrfs_list_xattrs(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const struct backend_entry *e, struct strbuf *names);

/*
 * The names of one XATTR_ITEM's bytes (item_len of them: one or more
 * struct btrfs_dir_item, each followed by its name and value; names whose
 * hashes collide share an item), appended to names.  0, or -EUCLEAN if an
 * entry runs past the item.
 */
int btrfs_xattr_item_names(const unsigned char *item, size_t item_len, struct strbuf *names);

#endif
