/*
 * linktable: names found per multiply-linked inode.
 *
 * st_nlink of a non-directory is the number of names it has.  The walk
 * counts the names it actually finds for every inode whose st_nlink is
 * above one (inodes with one link need no table entry: finding the name is
 * the whole check) and, once the walk is complete, compares.  An entry
 * keeps where its first name was found (a directory node reference and the
 * name) so that phase 4 can look at the inode again before it reports, and
 * remembers whether the inode's nlink or ctime differed between sightings:
 * a link or unlink during the scan changes ctime, so such an inode is a
 * race, never an error.
 *
 * Keyed by (st_dev, st_ino): btrfs subvolumes reuse inode numbers under
 * different st_dev values.  Sharded by hash with one mutex per shard.
 */
#ifndef FSCRUB_LINKTABLE_H
#define FSCRUB_LINKTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/shardhash.h"

struct dir_node;
struct linktable;

struct link_entry {
	struct shard_link link;	/* first: the table's hash chain */
	uint64_t dev, ino;
	uint64_t ctime_ns;	/* ctime at the first sighting */
	uint32_t nlink;		/* st_nlink at the first sighting */
	uint32_t found;		/* names found */
	bool changed;		/* nlink or ctime differed between sightings */
	struct dir_node *dir;	/* where the first name was found (a reference) */
	char *name;
};

struct linktable *linktable_new(void);
/*
 * Record a name of an inode; dir gets a reference on first sighting.  A new
 * entry starts at names found (2 for a single-link inode reached twice),
 * an existing one counts one more.  Returns true on the first sighting.
 */
bool linktable_add(struct linktable *lt, uint64_t dev, uint64_t ino,
		   uint32_t nlink, uint64_t ctime_ns, struct dir_node *dir,
		   const char *name, size_t namelen, unsigned names);
size_t linktable_count(const struct linktable *lt);
/* Call fn for every entry whose found != nlink (single-threaded, after the walk). */
void linktable_for_each_mismatch(struct linktable *lt,
				 void (*fn)(struct link_entry *e, void *arg), void *arg);
/* Free all entries; put_dir drops each directory reference. */
void linktable_free(struct linktable *lt, void (*put_dir)(struct dir_node *, void *),
		    void *arg);

#endif
