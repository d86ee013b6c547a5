/*
 * inoset: chunked inode bitmaps; see inoset.h.
 */
#include "inoset.h"

#include <pthread.h>
#include <stdlib.h>

#include "strbuf.h"

#define CHUNK_SHIFT 12			/* 4096 inode numbers per bitmap */
#define CHUNK_WORDS ((1U << CHUNK_SHIFT) / 64)
#define NR_SHARDS 64

struct chunk {
	struct chunk *next;
	uint64_t dev, base;		/* base = ino >> CHUNK_SHIFT */
	uint64_t bits[CHUNK_WORDS];
};

struct shard {
	pthread_mutex_t lock;
	struct chunk **buckets;
	size_t mask, count;
};

struct inoset {
	struct shard shards[NR_SHARDS];
};

static uint64_t chunk_hash(uint64_t dev, uint64_t base)
{
	uint64_t h = base * 0x9e3779b97f4a7c15ULL ^ dev * 0xff51afd7ed558ccdULL;

	return h ^ (h >> 31);
}

struct inoset *inoset_new(void)
{
	struct inoset *set = xcalloc(1, sizeof(*set));

	for (int i = 0; i < NR_SHARDS; i++) {
		pthread_mutex_init(&set->shards[i].lock, NULL);
		set->shards[i].mask = 7;
		set->shards[i].buckets = xcalloc(8, sizeof(struct chunk *));
	}
	return set;
}

void inoset_free(struct inoset *set)
{
	if (!set)
		return;
	for (int i = 0; i < NR_SHARDS; i++) {
		struct shard *s = &set->shards[i];

		for (size_t j = 0; j <= s->mask; j++) {
			struct chunk *c = s->buckets[j], *next;

			for (; c; c = next) {
				next = c->next;
				free(c);
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->lock);
	}
	free(set);
}

static void shard_grow(struct shard *s)
{
	size_t cap = (s->mask + 1) * 2;
	struct chunk **b = xcalloc(cap, sizeof(*b));

	for (size_t i = 0; i <= s->mask; i++) {
		struct chunk *c = s->buckets[i], *next;

		for (; c; c = next) {
			next = c->next;
			size_t j = chunk_hash(c->dev, c->base) / NR_SHARDS & (cap - 1);
			c->next = b[j];
			b[j] = c;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->mask = cap - 1;
}

bool inoset_test_and_set(struct inoset *set, uint64_t dev, uint64_t ino)
{
	uint64_t base = ino >> CHUNK_SHIFT;
	uint64_t h = chunk_hash(dev, base);
	struct shard *s = &set->shards[h % NR_SHARDS];
	unsigned bit = (unsigned)(ino & ((1U << CHUNK_SHIFT) - 1));
	uint64_t mask = 1ULL << (bit % 64);
	struct chunk *c;
	bool was;

	pthread_mutex_lock(&s->lock);
	for (c = s->buckets[h / NR_SHARDS & s->mask]; c; c = c->next)
		if (c->dev == dev && c->base == base)
			break;
	if (!c) {
		if (s->count + 1 > s->mask + 1)
			shard_grow(s);
		c = xcalloc(1, sizeof(*c));
		c->dev = dev;
		c->base = base;
		size_t j = h / NR_SHARDS & s->mask;
		c->next = s->buckets[j];
		s->buckets[j] = c;
		s->count++;
	}
	was = c->bits[bit / 64] & mask;
	c->bits[bit / 64] |= mask;
	pthread_mutex_unlock(&s->lock);
	return was;
}

size_t inoset_bytes(const struct inoset *set)
{
	size_t n = sizeof(*set);

	for (int i = 0; i < NR_SHARDS; i++)
		n += set->shards[i].count * sizeof(struct chunk) +
		     (set->shards[i].mask + 1) * sizeof(struct chunk *);
	return n;
}
