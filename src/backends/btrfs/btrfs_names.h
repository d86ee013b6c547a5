/*
 * btrfs_names: the namespace of one fs tree, checked while it streams by
 * (btrfs.dir_item, btrfs.inode_ref, btrfs.orphan).  See btrfs_names.c.
 *
 * Fed every item of one fs tree in key order by btrfs_check.c; reports
 * through btrfs_add_finding().  Memory: a few counters per tree, 8 bytes
 * per inode with no links; only when the directory entries and the inode
 * references of a tree disagree, a second read keeps 40 bytes and the name
 * of every entry of that tree to name the ones that differ.
 */
#ifndef FSCRUB_BTRFS_NAMES_H
#define FSCRUB_BTRFS_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pass;
struct btrfs_tree_item;

struct btrfs_names {
	uint64_t root;
	/* the object (inode) being read */
	uint64_t ino, transid, stamp, isize, name_bytes;
	uint32_t nlink, mode, nrefs;
	bool active;
	uint64_t di_sum, dx_sum, di_cnt, dx_cnt;	/* DIR_ITEM vs DIR_INDEX */
	/* the whole tree: DIR_INDEX entries vs INODE_REF / INODE_EXTREF names */
	uint64_t ent_sum, ref_sum, ent_cnt, ref_cnt;
	/* inodes with no links, and whether the orphan list has them */
	struct nolink { uint64_t ino, transid, stamp; bool listed; } *nolink;
	size_t nr_nolink, alloc_nolink;
	/* names kept for findings, released with the pass */
	char **kept;
	size_t nr_kept, alloc_kept;
};

/* Start a tree. */
void names_begin(struct btrfs_names *n, uint64_t root);
/* One item of it; 0 or -ENOMEM. */
int names_item(struct btrfs_names *n, struct pass *p, const struct btrfs_tree_item *it);
/*
 * The tree has been read: report what disagrees, reading the tree again
 * through fd to name the entries when the tree's sums differ.  0, or a
 * negative errno.
 */
int names_end(struct btrfs_names *n, struct pass *p, int fd);
/* Free everything, the kept names too (after the findings are reported). */
void names_release(struct btrfs_names *n);

#endif
