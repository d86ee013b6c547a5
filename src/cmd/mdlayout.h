/*
 * mdlayout: where a byte of an md array's member lies in the array, for
 * every level whose layout is fixed by its geometry: RAID0 (one zone:
 * members of one size), RAID1, RAID4, RAID5 and RAID6 (the algorithms of
 * md's raid5_compute_sector() that rotate or fix the parity on the
 * members: left/right asymmetric/symmetric, parity first, parity last),
 * RAID10 in its near layouts (n2, n3: each chunk on that many members
 * side by side).  RAID10's far and offset layouts, RAID0 with zones of
 * members of other sizes and RAID6's DDF and "_6" layouts are refused.
 *
 * The member's data is cut into chunks: its c-th chunk after the data
 * offset is in row c of the array.  Each piece of a member's range is
 * either array data (its offset in the array) or parity (P, or Q for
 * RAID6) of the row's data, which belongs to no filesystem byte.
 *
 * Library code: nothing is read or printed; bytes everywhere.
 */
#ifndef FSCRUB_MDLAYOUT_H
#define FSCRUB_MDLAYOUT_H

#include <stdbool.h>
#include <stdint.h>

/* An array as sysfs describes it (md/level, layout, chunk_size, raid_disks). */
struct md_geom {
	int level;		/* 0, 1, 4, 5, 6, 10 */
	unsigned layout;	/* md/layout: the RAID5/6 algorithm, RAID10's copies */
	uint64_t chunk;		/* md/chunk_size, bytes */
	unsigned disks;		/* md/raid_disks */
	unsigned slot;		/* the member's place (md/dev-X/slot) */
	uint64_t data_off;	/* where its data starts on it (md/dev-X/offset) */
	uint64_t size;		/* the array's size */
	bool uneven;		/* RAID0 members of other sizes: zones, not followed */
};

/* A piece of the member's range: array bytes, or parity of a row. */
struct md_piece {
	uint64_t off, len;	/* the member's bytes */
	bool parity;
	char which;		/* parity: 'P' or 'Q' */
	uint64_t array_off;	/* data: the array's byte at off; parity: the row's first */
	uint64_t row_len;	/* parity: the array bytes the row holds */
};

/*
 * "raid5" and the like into g->level: 0, or -EOPNOTSUPP for a level that
 * holds no array data at a fixed place (linear, multipath, faulty, ...).
 */
int md_level(const char *name, struct md_geom *g);

/*
 * The pieces of the member's [off, off + len) inside the array's data,
 * each handed to fn in order: 0; -EOPNOTSUPP for a layout not followed;
 * -EINVAL for a geometry that makes no sense (no chunk, a slot past the
 * disks, too few disks for the level).
 */
int md_map(const struct md_geom *g, uint64_t off, uint64_t len,
	   void (*fn)(const struct md_piece *p, void *arg), void *arg);

#endif
