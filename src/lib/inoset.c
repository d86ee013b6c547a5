/*
 * inoset: chunked inode bitmaps in a shardhash; see inoset.h.
 */
#include "lib/inoset.h"

#include <stdlib.h>

#include "lib/shardhash.h"
#include "lib/strbuf.h"

#define CHUNK_SHIFT 12			/* 4096 inode numbers per bitmap */
#define CHUNK_WORDS ((1U << CHUNK_SHIFT) / 64)

struct chunk {
	struct shard_link link;		/* first: the table's hash chain */
	uint64_t dev, base;		/* base = ino >> CHUNK_SHIFT */
	uint64_t bits[CHUNK_WORDS];
};

struct inoset {
	struct shardhash h;
};

static uint64_t chunk_hash(uint64_t dev, uint64_t base)
{
	uint64_t h = base * 0x9e3779b97f4a7c15ULL ^ dev * 0xff51afd7ed558ccdULL;

	return h ^ (h >> 31);
}

struct inoset *inoset_new(void)
{
	struct inoset *set = xcalloc(1, sizeof(*set));

	shardhash_init(&set->h);
	return set;
}

static void free_chunk(struct shard_link *l, void *arg)
{
	(void)arg;
	free(l);
}

void inoset_free(struct inoset *set)
{
	if (!set)
		return;
	shardhash_release(&set->h, free_chunk, NULL);
	free(set);
}

static struct chunk *find_chunk(struct shard *s, uint64_t h, uint64_t dev, uint64_t base)
{
	for (struct shard_link *l = shard_bucket(s, h); l; l = l->next) {
		struct chunk *x = (struct chunk *)l;

		if (x->dev == dev && x->base == base)
			return x;
	}
	return NULL;
}

bool inoset_test(struct inoset *set, uint64_t dev, uint64_t ino)
{
	uint64_t base = ino >> CHUNK_SHIFT;
	uint64_t h = chunk_hash(dev, base);
	struct shard *s = shardhash_lock(&set->h, h);
	unsigned bit = (unsigned)(ino & ((1U << CHUNK_SHIFT) - 1));
	struct chunk *c = find_chunk(s, h, dev, base);
	bool was = c && (c->bits[bit / 64] & (1ULL << (bit % 64)));

	shardhash_unlock(s);
	return was;
}

bool inoset_test_and_set(struct inoset *set, uint64_t dev, uint64_t ino)
{
	uint64_t base = ino >> CHUNK_SHIFT;
	uint64_t h = chunk_hash(dev, base);
	struct shard *s = shardhash_lock(&set->h, h);
	unsigned bit = (unsigned)(ino & ((1U << CHUNK_SHIFT) - 1));
	uint64_t mask = 1ULL << (bit % 64);
	struct chunk *c = find_chunk(s, h, dev, base);
	bool was;

	if (!c) {
		c = xcalloc(1, sizeof(*c));
		c->dev = dev;
		c->base = base;
		shard_insert(s, &c->link, h);
	}
	was = c->bits[bit / 64] & mask;
	c->bits[bit / 64] |= mask;
	shardhash_unlock(s);
	return was;
}

size_t inoset_bytes(const struct inoset *set)
{
	return sizeof(*set) + shardhash_count(&set->h) * sizeof(struct chunk) +
	       shardhash_bucket_bytes(&set->h);
}
