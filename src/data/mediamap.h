/*
 * mediamap: which files lost data to a media error.
 *
 * Each bad device range is looked up in the sorted extent list (an
 * interval lookup); the parts owned by file data are looked at again
 * through the file itself -- still mapped there, and a direct read of that
 * file range still fails -- before being reported as an error with the
 * file's path and offset.  The parts no extent owns are classified with
 * FS_IOC_GETFSMAP where the filesystem has it (free space, a kind of
 * metadata, or an inode's data written since the walk) and reported as
 * such.
 */
#ifndef FSCRUB_MEDIAMAP_H
#define FSCRUB_MEDIAMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scrub_ctx;
struct xlink_list;

struct bad_range {
	uint64_t off, len;	/* device bytes */
	int err;		/* positive errno of the failed read */
};

/* One bad range, or the part of it that one extent owns. */
struct media_piece {
	uint64_t dev_off, len;
	uint64_t ino;			/* on dev; 0: no extent of the walk owns it */
	uint64_t file_off;
	int err;
	bool still_mapped, still_bad;	/* the second look, through the file */
};

struct media_pieces {
	struct media_piece *v;
	size_t n;
	uint64_t dev;			/* the st_dev of every inode in the extent list */
};

/*
 * The extent list (sorted by physical offset) indexed for lookups by
 * device offset: end_max[i] is the furthest end of v[0..i], so the first
 * extent that may reach an offset is found by a binary search even where
 * extents overlap (a cross-link: a small extent inside a large one).
 * 8 bytes per extent, made only when there are bad ranges.
 */
struct media_index {
	const struct xlink_list *l;
	uint64_t *end_max;		/* NULL for an empty list */
};

void media_index_init(struct media_index *ix, const struct xlink_list *l);
void media_index_release(struct media_index *ix);

/*
 * Split bad range b over the extents of ix, appending to out, in device
 * order: a piece for each part an extent owns (its inode and file offset),
 * a piece with ino 0 for each gap no extent owns.  Unwritten extents own
 * nothing (they have no data to lose).  Pure: no context, no I/O; out->v
 * is grown with xrealloc.
 */
void mediamap_split(const struct media_index *ix, const struct bad_range *b,
		    struct media_pieces *out);

/* Report every bad range; dev_fd is the device, open O_DIRECT. */
void mediamap_report(struct scrub_ctx *ctx, int dev_fd, const struct bad_range *bad,
		     size_t nr_bad);

#endif
