/*
 * relook: the second look at a few inodes, by walking the tree again.
 *
 * Checks that work from a list of inode numbers (cross-linked extents,
 * media errors mapped to files) must look at those files again before
 * anything is an error, and need a name to report them by.  A relook walk
 * finds every name of the inodes on its list, opens each regular file and
 * hands it to visit() (serialised under one lock: the lists are small), and
 * remembers the first name found and whether the file changed during the
 * scan.  Files are (st_dev, st_ino) keys (inokey.h): an inode number is
 * another file in each btrfs subvolume.
 */
#ifndef FSCRUB_RELOOK_H
#define FSCRUB_RELOOK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/inokey.h"

struct scrub_ctx;
struct dir_node;
struct walk_entry;

struct relook_file {
	struct ino_key id;
	struct dir_node *dir;		/* reference, or NULL if not found */
	char *name;
	bool changed;			/* changed since the scan began */
	void *data;			/* the caller's */
};

struct relook {
	struct scrub_ctx *ctx;
	const char *name;		/* of the walk, for messages */
	struct relook_file *files;	/* sorted by key once walked */
	size_t nr_files;
	/* Called for each name of each file on the list, with an open fd. */
	void (*visit)(struct relook *rl, struct relook_file *f, int fd,
		      const struct walk_entry *e);
	/*
	 * Only the first name of each inode on the list, of any type, and
	 * nothing opened (visit is not called): to name findings about
	 * inodes that were found by number, not by name.
	 */
	bool names_only;
	void *arg;
	pthread_mutex_t lock;
};

/* Add an inode to look at (duplicates are merged). */
void relook_add(struct relook *rl, struct ino_key id);
/* Walk; 0, or a negative errno if the walk could not start (reported). */
int relook_walk(struct relook *rl);
struct relook_file *relook_find(struct relook *rl, struct ino_key id);
void relook_release(struct relook *rl);

/*
 * Does fd map file offset logical to device offset phys, for all of len
 * bytes, as data with a location of its own?
 */
bool relook_still_mapped(int fd, uint64_t logical, uint64_t phys, uint64_t len);

#endif
