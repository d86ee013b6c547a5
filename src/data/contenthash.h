/*
 * contenthash: the content hash of the checksum ledger (ledger.h), built
 * so that a file's blocks can be hashed in any order -- the order the
 * device-order reader (devverify.h) meets them in -- with no buffering.
 *
 * A file is cut into blocks of the filesystem's block size (the unit
 * FIEMAP extents come in, so no block is split between two extents).
 * Block k, its bytes past the end of the file counted as zeros, gets
 *
 *     h = XXH3-128(block);   c_k = 0 if h is the hash of a zero block,
 *                            else each half of h mixed with k (fmix64)
 *
 * and a chunk's digest is the sum of its blocks' c_k modulo 2^128.  The
 * sum does not care in which order blocks arrive; mixing with k binds each
 * block to its place, so moved or swapped blocks change the digest.  Zero
 * blocks count nothing, so a hole, an unwritten extent and written zeros
 * hash alike, holes need not be read, and the digest does not depend on
 * where the filesystem put the blocks (a defragmented file keeps it).
 * Sums over 1 MiB "base" chunks (CHASH_BASE_SHIFT) add up to the sums of
 * any larger power-of-two chunk, which is what a record keeps.
 *
 * XXH3 (Debian's libxxhash) rather than BLAKE3 or SHA-256: it hashes at
 * tens of GB/s per core, so hashing does not slow a data scan that runs at
 * the device's speed, and what is detected is accidental corruption (bit
 * rot, a bad controller), not an adversary, for which a 128-bit
 * non-cryptographic hash is ample.
 */
#ifndef FSCRUB_CONTENTHASH_H
#define FSCRUB_CONTENTHASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CHASH_BASE_SHIFT 20		/* 1 MiB base chunks */

struct chash128 {
	uint64_t lo, hi;
};

/* Per-filesystem parameters: the block size and the zero block's hash. */
struct chash_params {
	unsigned block_size;		/* a power of two, 512 .. 1 MiB */
	unsigned block_shift;
	struct chash128 zero;
};

/* A base chunk's sum, for one file. */
struct chash_chunk {
	uint64_t ino;
	uint64_t chunk;			/* file offset >> CHASH_BASE_SHIFT */
	struct chash128 sum;
};

/* block_size: the filesystem's; anything not a power of two in range -> 4096. */
void chash_params_init(struct chash_params *p, unsigned block_size);

static inline void chash_add(struct chash128 *to, struct chash128 x)
{
	uint64_t lo = to->lo + x.lo;

	to->hi += x.hi + (lo < to->lo);
	to->lo = lo;
}

static inline bool chash_equal(struct chash128 a, struct chash128 b)
{
	return a.lo == b.lo && a.hi == b.hi;
}

/*
 * Hash file bytes [off, off + len) of a file of file_size bytes, given in
 * buf: off is a multiple of the block size; len a multiple of it or
 * reaching the end of the file; bytes at and past file_size are ignored.
 * emit() gets each base chunk's sum (a chunk can be emitted more than once
 * when the range is not whole chunks: sums add).  scratch: block_size
 * bytes for a block the file ends in.
 */
void chash_range(const struct chash_params *p, uint64_t off, const void *buf, uint64_t len,
		 uint64_t file_size, char *scratch,
		 void (*emit)(void *arg, uint64_t chunk, struct chash128 sum), void *arg);

/* The whole-file digest from the record chunks' sums (and the size). */
struct chash128 chash_whole(uint64_t file_size, const struct chash128 *chunks, size_t n);

#endif
