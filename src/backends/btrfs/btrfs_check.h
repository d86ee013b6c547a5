/*
 * btrfs_check: btrfs's logical trees cross-checked on the mounted
 * filesystem (what `btrfs check` finds offline).  See btrfs_check.c.
 *
 * Layering: btrfs_check.c reads the trees through btrfs_trees.h and names
 * files through btrfs_file_path(), which lives in btrfs.c (it needs the
 * backend's state); btrfs.c calls nothing here but btrfs_check_trees_start(),
 * btrfs_check_trees() and btrfs_check_trees_stop().
 */
#ifndef FSCRUB_BTRFS_CHECK_H
#define FSCRUB_BTRFS_CHECK_H

#include <stdbool.h>
#include <stdint.h>

struct scrub_ctx;
struct strbuf;
struct btrfs_tree_check;

/*
 * Phase 3, before the walk: start the first pass of btrfs_check_trees() in
 * a thread of its own, so that it reads the trees while the walk reads
 * the directories (the walk waits on tree block reads, cold, more than it
 * runs; the pass's forward reading of each fs tree brings in the leaves
 * the walk's searches want next).  The pass reports nothing itself: what
 * it found is said by btrfs_check_trees(), after the walk, in the order
 * it always was.  NULL when the check is off or no thread could be
 * started (btrfs_check_trees() then reads the first pass itself).
 */
struct btrfs_tree_check *btrfs_check_trees_start(struct scrub_ctx *ctx);

/* Waits for and frees a first pass btrfs_check_trees() did not take (the walk failed). */
void btrfs_check_trees_stop(struct btrfs_tree_check *c);

/*
 * Phase 3, after the walk (the btrfs backend's scan_inodes hook): take the
 * first pass c read alongside the walk (frees c; NULL: read it now), read the
 * root, extent and block group trees and every subvolume's fs tree, and
 * report btrfs.extent_refs, btrfs.nbytes, btrfs.bg_used and
 * btrfs.bytes_used.  A mismatch is read again after a commit (forced, or
 * under -n the kernel's own) and is an error when it reads the same.  Returns 0, or a negative errno when the trees cannot be
 * read at all (reported as operational by the caller).
 */
int btrfs_check_trees(struct scrub_ctx *ctx, struct btrfs_tree_check *c);

/* The kernel's commit interval in seconds: the mount's commit= option, else btrfs's default. */
unsigned btrfs_commit_interval(const struct scrub_ctx *ctx);

/*
 * The path of inode in tree root relative to the mount point, for any
 * subvolume below the mounted one (btrfs.c).  False, out empty, if unknown.
 */
bool btrfs_file_path(struct scrub_ctx *ctx, uint64_t root, uint64_t inode,
		     struct strbuf *out);
/*
 * The same through fd, any file of the filesystem whose mounted subvolume
 * is mnt_root (fscrub locate has no scan context).
 */
bool btrfs_path_in(int fd, uint64_t mnt_root, uint64_t root, uint64_t inode,
		   struct strbuf *out);

#endif
