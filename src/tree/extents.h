/*
 * extents: the extent map of a regular file (FIEMAP, with a FIBMAP
 * fallback) checked for internal consistency.
 *
 * Checks, per fork (data, and the xattr fork where FIEMAP_FLAG_XATTR is
 * supported and st_blocks leaves blocks the data fork does not map): no
 * zero-length extent; logical ranges strictly increasing and not
 * overlapping; FIEMAP_EXTENT_LAST only on the final extent; no
 * extent that ends past the end of the device (only where FIEMAP physical
 * offsets are offsets on the mount's block device: ctx->dev_size != 0).
 * Extents whose physical location is unknown (delalloc, unknown) are not
 * checked against the device.  Of an encoded (compressed) extent only the
 * start is: FIEMAP gives its uncompressed length, not the bytes it takes
 * on the device.  Encoded are the extents flagged FIEMAP_EXTENT_ENCODED
 * (btrfs) and every extent of a file statx flags STATX_ATTR_COMPRESSED
 * (erofs sets no FIEMAP flag on its compressed extents); their bytes are
 * not placed on the device for the cross-link check or the device reader,
 * which read such a file through the file instead.  A filesystem without
 * FIEMAP is said so once.
 */
#ifndef FSCRUB_EXTENTS_H
#define FSCRUB_EXTENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/fiemap.h>

#include "tree/crosslink.h"

struct walk_thread;
struct walk_dir;
struct walk_entry;

/* The result of validating extents: what is wrong first, if anything. */
enum extent_problem {
	EXTENT_OK = 0,
	EXTENT_ZERO_LENGTH,
	EXTENT_OVERLAP,
	EXTENT_PAST_DEVICE,
	EXTENT_LAST_FLAG,
	EXTENT_TOO_MANY,
};

/* Validation state carried across FIEMAP batches of one fork. */
struct extent_cursor {
	uint64_t next_logical;		/* end of the previous extent */
	bool have_prev;
	bool saw_last;			/* an extent with FIEMAP_EXTENT_LAST was seen */
	uint64_t dev_size;		/* 0: do not check physical offsets */
	bool encoded;			/* every extent is encoded (a compressed file) */
	unsigned long long nr_extents;
	uint64_t mapped_bytes;		/* sum of the extents' lengths */
	unsigned long long max_extents;	/* more is EXTENT_TOO_MANY; 0: no bound */
	/* Where the problem is, for the report. */
	uint64_t bad_logical, bad_physical, bad_length;
};

void extent_cursor_init(struct extent_cursor *cur, uint64_t dev_size);
/* Validate a batch in logical order; stops at the first problem. */
enum extent_problem extent_validate(struct extent_cursor *cur,
				    const struct fiemap_extent *ext, size_t n);

/* Per-thread FIEMAP buffer, and the data extents kept for phase 4. */
struct extent_buf {
	struct fiemap *fm;
	unsigned max_extents;
	struct xlink_list *collect;	/* NULL: not collecting */
	bool collected;			/* the last data fork went in whole */
	bool unlocated;			/* ... but some of it has no place yet */
	bool elsewhere;			/* the data fork is on another device (XFS realtime) */
	bool compressed;		/* STATX_ATTR_COMPRESSED: every extent is encoded */
	uint64_t data_bytes;		/* bytes the last data fork mapped */
	/*
	 * The last data fork's whole map, when one FIEMAP call returned all
	 * of it and it checked out: nr_whole extents in whole (whole_ok);
	 * handed to the backend's check_inode (backend_entry.map).
	 */
	struct fiemap_extent *whole;
	unsigned nr_whole;
	bool whole_ok;
};

void extent_buf_init(struct extent_buf *eb);
void extent_buf_release(struct extent_buf *eb);

/*
 * A regular file from a bulk record (e->bulk), mapped without opening it:
 * the backend's bulk_extents map, checked as a FIEMAP map and collected
 * for the cross-link check and the device reader.  True if that is done
 * (the whole map is then in eb->whole); false if the backend has no map
 * for it, or the map does not check out -- the caller then opens the
 * file and maps it with extents_check_file(), which looks again through
 * the VFS before anything is reported: nothing is reported here.
 */
bool extents_check_bulk(struct walk_thread *t, struct extent_buf *eb,
			const struct walk_entry *e);
/* Check the extent maps of the open regular file fd (phase 3). */
void extents_check_file(struct walk_thread *t, struct extent_buf *eb,
			const struct walk_dir *d, const struct walk_entry *e, int fd);

#endif
