/*
 * contenthash: order-independent block-sum hashing; see contenthash.h.
 */
#include "data/contenthash.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "lib/strbuf.h"

void chash_params_init(struct chash_params *p, unsigned block_size)
{
	if (block_size < 512 || block_size > (1U << 20) || (block_size & (block_size - 1)))
		block_size = 4096;
	p->block_size = block_size;
	p->block_shift = (unsigned)__builtin_ctz(block_size);

	char *zero = xcalloc(1, block_size);
	XXH128_hash_t h = XXH3_128bits(zero, block_size);

	free(zero);
	p->zero = (struct chash128){ .lo = h.low64, .hi = h.high64 };
}

/* A 64-bit finaliser (MurmurHash3's fmix64): every input bit moves every output bit. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/*
 * c_k of one whole block: its XXH3-128, bound to its place k by mixing
 * each half with k (a hash of the block's hash seeded with k, at the cost
 * of a few multiplications rather than a second XXH3 call).
 */
static struct chash128 block_contribution(const struct chash_params *p, uint64_t k,
					  const void *block)
{
	XXH128_hash_t h = XXH3_128bits(block, p->block_size);

	if (h.low64 == p->zero.lo && h.high64 == p->zero.hi)
		return (struct chash128){ 0, 0 };
	return (struct chash128){
		.lo = mix64(h.low64 ^ mix64(k + 0x9e3779b97f4a7c15ULL)),
		.hi = mix64(h.high64 ^ mix64(~k)),
	};
}

void chash_range(const struct chash_params *p, uint64_t off, const void *buf, uint64_t len,
		 uint64_t file_size, char *scratch,
		 void (*emit)(void *arg, uint64_t chunk, struct chash128 sum), void *arg)
{
	const unsigned char *b = buf;
	struct chash128 sum = { 0, 0 };
	uint64_t chunk = off >> CHASH_BASE_SHIFT;
	bool any = false;

	if (off >= file_size)
		return;
	if (len > file_size - off)
		len = file_size - off;
	for (uint64_t pos = 0; pos < len; pos += p->block_size) {
		uint64_t at = off + pos;
		const void *block = b + pos;

		if (at >> CHASH_BASE_SHIFT != chunk) {
			if (any)
				emit(arg, chunk, sum);
			sum = (struct chash128){ 0, 0 };
			chunk = at >> CHASH_BASE_SHIFT;
			any = false;
		}
		if (len - pos < p->block_size) {
			/* The block the file ends in: what follows the end is zeros. */
			memset(scratch, 0, p->block_size);
			memcpy(scratch, b + pos, (size_t)(len - pos));
			block = scratch;
		}
		chash_add(&sum, block_contribution(p, at >> p->block_shift, block));
		any = true;
	}
	if (any)
		emit(arg, chunk, sum);
}

struct chash128 chash_whole(uint64_t file_size, const struct chash128 *chunks, size_t n)
{
	XXH3_state_t *st = XXH3_createState();
	unsigned char le[16];
	XXH128_hash_t h;

	if (!st)
		abort();
	XXH3_128bits_reset(st);
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(file_size >> (8 * i));
	XXH3_128bits_update(st, le, 8);
	for (size_t c = 0; c < n; c++) {
		for (int i = 0; i < 8; i++) {
			le[i] = (unsigned char)(chunks[c].lo >> (8 * i));
			le[8 + i] = (unsigned char)(chunks[c].hi >> (8 * i));
		}
		XXH3_128bits_update(st, le, 16);
	}
	h = XXH3_128bits_digest(st);
	XXH3_freeState(st);
	return (struct chash128){ .lo = h.low64, .hi = h.high64 };
}
