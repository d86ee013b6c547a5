/*
 * shardhash: a hash table for intrusive entries, split into shards with a
 * mutex each, for tables that every walk thread updates (linktable.c,
 * inoset.c).
 *
 * An entry embeds a struct shard_link (anywhere; use container_of-style
 * casts, or put it first) that remembers the entry's hash, so the table can
 * grow without knowing the key.  A caller locks the shard of a hash, walks
 * its bucket comparing its own keys, inserts if needed, and unlocks.
 */
#ifndef FSCRUB_SHARDHASH_H
#define FSCRUB_SHARDHASH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* 64 shards: contention stays negligible with the thread counts we use. */
#define SHARDHASH_SHARDS 64

struct shard_link {
	struct shard_link *next;
	uint64_t hash;
};

struct shard {
	pthread_mutex_t lock;
	struct shard_link **buckets;
	size_t mask;			/* buckets - 1, a power of two minus one */
	size_t count;
};

struct shardhash {
	struct shard shards[SHARDHASH_SHARDS];
};

void shardhash_init(struct shardhash *h);
/* Free the buckets; free_entry (may be NULL) is called for every entry. */
void shardhash_release(struct shardhash *h, void (*free_entry)(struct shard_link *, void *),
		       void *arg);
/* Lock and return the shard that holds hash. */
struct shard *shardhash_lock(struct shardhash *h, uint64_t hash);
void shardhash_unlock(struct shard *s);
/* The first link of hash's bucket in a locked shard (follow ->next). */
struct shard_link *shard_bucket(const struct shard *s, uint64_t hash);
/* Insert into a locked shard, growing it to keep chains short. */
void shard_insert(struct shard *s, struct shard_link *link, uint64_t hash);
/* Entries in the table (not locked: call when no thread is adding). */
size_t shardhash_count(const struct shardhash *h);
/* Bytes of bucket arrays, for memory accounting. */
size_t shardhash_bucket_bytes(const struct shardhash *h);
/* Call fn for every entry (single-threaded). */
void shardhash_for_each(struct shardhash *h, void (*fn)(struct shard_link *, void *), void *arg);

#endif
