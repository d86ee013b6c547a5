/*
 * readplan: the device reader's list of reads (devverify.h).
 *
 * Byte ranges are added in order of their start; they become large reads
 * aligned to READPLAN_ALIGN: a range inside the current read is dropped,
 * one that starts within DEVREAD_MERGE_GAP of its end extends it (reading
 * through a small gap costs less than a seek), and each read is at most
 * DEVREAD_MAX bytes.  The ranges come from the walk's extent list
 * (devverify.c) or, before the walk, from FS_IOC_GETFSMAP: every range of
 * the device that holds data or an unknown owner's blocks, so that the
 * device can be read while the tree is walked.
 */
#ifndef FSCRUB_READPLAN_H
#define FSCRUB_READPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ioengine.h"

struct scrub_ctx;

#define READPLAN_ALIGN 4096U

struct readplan {
	struct io_range *v;
	size_t n, alloc;
	uint64_t limit;		/* the device's size: nothing is read past it */
	uint64_t start, end;	/* the read being built */
	bool open;
};

void readplan_init(struct readplan *p, uint64_t dev_size);
/* Add [start, end); start must not be below any start added before. */
void readplan_add(struct readplan *p, uint64_t start, uint64_t end);
/*
 * Add what of [start, end) no range of done (sorted, disjoint: an earlier
 * plan, already read) covers.  *cursor: 0 before the first call; the
 * starts of successive calls must not decrease.
 */
void readplan_add_uncovered(struct readplan *p, uint64_t start, uint64_t end,
			    const struct io_range *done, size_t nr_done, size_t *cursor);
/* Close the last read; p->v and p->n are the list (free p->v). */
void readplan_end(struct readplan *p);

uint64_t readplan_round_down(uint64_t x);
uint64_t readplan_round_up(uint64_t x);

/*
 * Plan reads of everything GETFSMAP says the device holds as file data
 * (an inode's data fork, written) or as in-use blocks of no known owner
 * (XFS without a reverse-mapping btree), and of every range between its
 * records (ext4 reports most file data so: not at all); *bytes: their
 * total.  Free space and named metadata are not read.  0, or a negative errno (-ENOTTY,
 * -EOPNOTSUPP: the filesystem has no GETFSMAP).
 */
int readplan_from_fsmap(const struct scrub_ctx *ctx, struct readplan *p, uint64_t *bytes);

#endif
