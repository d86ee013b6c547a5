/*
 * linktable: see linktable.h.
 */
#include "linktable.h"

#include <pthread.h>
#include <stdlib.h>

#include "dircache.h"
#include "strbuf.h"

/* 64 shards: contention stays negligible with the thread counts we use. */
#define NR_SHARDS 64

struct shard {
	pthread_mutex_t lock;
	struct link_entry **buckets;
	size_t mask;
	size_t count;
};

struct linktable {
	struct shard shards[NR_SHARDS];
};

static uint64_t key_hash(uint64_t dev, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ULL ^ dev * 0xc2b2ae3d27d4eb4fULL;

	return h ^ (h >> 29);
}

struct linktable *linktable_new(void)
{
	struct linktable *lt = xcalloc(1, sizeof(*lt));

	for (int i = 0; i < NR_SHARDS; i++) {
		pthread_mutex_init(&lt->shards[i].lock, NULL);
		lt->shards[i].mask = 15;
		lt->shards[i].buckets = xcalloc(16, sizeof(struct link_entry *));
	}
	return lt;
}

static void shard_grow(struct shard *s)
{
	size_t cap = (s->mask + 1) * 2;
	struct link_entry **b = xcalloc(cap, sizeof(*b));

	for (size_t i = 0; i <= s->mask; i++) {
		struct link_entry *e = s->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			size_t j = key_hash(e->dev, e->ino) / NR_SHARDS & (cap - 1);
			e->next = b[j];
			b[j] = e;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->mask = cap - 1;
}

bool linktable_add(struct linktable *lt, uint64_t dev, uint64_t ino,
		   uint32_t nlink, uint64_t ctime_ns, struct dir_node *dir,
		   const char *name, size_t namelen, unsigned names)
{
	uint64_t h = key_hash(dev, ino);
	struct shard *s = &lt->shards[h % NR_SHARDS];
	struct link_entry *e;

	pthread_mutex_lock(&s->lock);
	for (e = s->buckets[h / NR_SHARDS & s->mask]; e; e = e->next) {
		if (e->dev == dev && e->ino == ino) {
			e->found++;
			if (e->nlink != nlink || e->ctime_ns != ctime_ns)
				e->changed = true;
			pthread_mutex_unlock(&s->lock);
			return false;
		}
	}
	if (s->count + 1 > (s->mask + 1) * 2)
		shard_grow(s);
	e = xcalloc(1, sizeof(*e));
	e->dev = dev;
	e->ino = ino;
	e->nlink = nlink;
	e->ctime_ns = ctime_ns;
	e->found = names;
	if (dir) {
		dir_node_get(dir);
		e->dir = dir;
	}
	e->name = xstrndup(name, namelen);
	size_t j = h / NR_SHARDS & s->mask;
	e->next = s->buckets[j];
	s->buckets[j] = e;
	s->count++;
	pthread_mutex_unlock(&s->lock);
	return true;
}

size_t linktable_count(const struct linktable *lt)
{
	size_t n = 0;

	for (int i = 0; i < NR_SHARDS; i++)
		n += lt->shards[i].count;
	return n;
}

void linktable_for_each_mismatch(struct linktable *lt,
				 void (*fn)(struct link_entry *e, void *arg), void *arg)
{
	for (int i = 0; i < NR_SHARDS; i++) {
		struct shard *s = &lt->shards[i];

		for (size_t j = 0; j <= s->mask; j++)
			for (struct link_entry *e = s->buckets[j]; e; e = e->next)
				if (e->found != e->nlink)
					fn(e, arg);
	}
}

void linktable_free(struct linktable *lt, void (*put_dir)(struct dir_node *, void *),
		    void *arg)
{
	if (!lt)
		return;
	for (int i = 0; i < NR_SHARDS; i++) {
		struct shard *s = &lt->shards[i];

		for (size_t j = 0; j <= s->mask; j++) {
			struct link_entry *e = s->buckets[j], *next;

			for (; e; e = next) {
				next = e->next;
				if (e->dir && put_dir)
					put_dir(e->dir, arg);
				free(e->name);
				free(e);
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->lock);
	}
	free(lt);
}
