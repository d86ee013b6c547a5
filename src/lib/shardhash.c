/*
 * shardhash: see shardhash.h.
 */
#include "lib/shardhash.h"

#include <stdlib.h>

#include "lib/strbuf.h"

/* The shard is chosen by the low bits, the bucket by the bits above them. */
static size_t bucket_of(uint64_t hash, size_t mask)
{
	return (size_t)(hash / SHARDHASH_SHARDS) & mask;
}

void shardhash_init(struct shardhash *h)
{
	for (int i = 0; i < SHARDHASH_SHARDS; i++) {
		struct shard *s = &h->shards[i];

		pthread_mutex_init(&s->lock, NULL);
		s->mask = 15;
		s->buckets = xcalloc(s->mask + 1, sizeof(*s->buckets));
		s->count = 0;
	}
}

void shardhash_for_each(struct shardhash *h, void (*fn)(struct shard_link *, void *), void *arg)
{
	for (int i = 0; i < SHARDHASH_SHARDS; i++) {
		struct shard *s = &h->shards[i];

		for (size_t j = 0; j <= s->mask; j++) {
			struct shard_link *l = s->buckets[j], *next;

			for (; l; l = next) {
				next = l->next;		/* fn may free l */
				fn(l, arg);
			}
		}
	}
}

void shardhash_release(struct shardhash *h, void (*free_entry)(struct shard_link *, void *),
		       void *arg)
{
	if (free_entry)
		shardhash_for_each(h, free_entry, arg);
	for (int i = 0; i < SHARDHASH_SHARDS; i++) {
		free(h->shards[i].buckets);
		h->shards[i].buckets = NULL;
		pthread_mutex_destroy(&h->shards[i].lock);
	}
}

struct shard *shardhash_lock(struct shardhash *h, uint64_t hash)
{
	struct shard *s = &h->shards[hash % SHARDHASH_SHARDS];

	pthread_mutex_lock(&s->lock);
	return s;
}

void shardhash_unlock(struct shard *s)
{
	pthread_mutex_unlock(&s->lock);
}

struct shard_link *shard_bucket(const struct shard *s, uint64_t hash)
{
	return s->buckets[bucket_of(hash, s->mask)];
}

static void shard_grow(struct shard *s)
{
	size_t mask = s->mask * 2 + 1;
	struct shard_link **b = xcalloc(mask + 1, sizeof(*b));

	for (size_t i = 0; i <= s->mask; i++) {
		struct shard_link *l = s->buckets[i], *next;

		for (; l; l = next) {
			size_t j = bucket_of(l->hash, mask);

			next = l->next;
			l->next = b[j];
			b[j] = l;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->mask = mask;
}

void shard_insert(struct shard *s, struct shard_link *link, uint64_t hash)
{
	/* Two entries per bucket on average at most. */
	if (s->count + 1 > (s->mask + 1) * 2)
		shard_grow(s);
	size_t j = bucket_of(hash, s->mask);

	link->hash = hash;
	link->next = s->buckets[j];
	s->buckets[j] = link;
	s->count++;
}

size_t shardhash_count(const struct shardhash *h)
{
	size_t n = 0;

	for (int i = 0; i < SHARDHASH_SHARDS; i++)
		n += h->shards[i].count;
	return n;
}

size_t shardhash_bucket_bytes(const struct shardhash *h)
{
	size_t n = 0;

	for (int i = 0; i < SHARDHASH_SHARDS; i++)
		n += (h->shards[i].mask + 1) * sizeof(struct shard_link *);
	return n;
}
