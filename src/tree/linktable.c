/*
 * linktable: see linktable.h.  Entries live in a shardhash keyed by
 * (st_dev, st_ino).
 */
#include "tree/linktable.h"

#include <stdlib.h>

#include "tree/dircache.h"
#include "lib/shardhash.h"
#include "lib/strbuf.h"

struct linktable {
	struct shardhash h;
};

/* The shard_link is the entry's first member. */
static struct link_entry *entry_of(struct shard_link *l)
{
	return (struct link_entry *)l;
}

static uint64_t key_hash(uint64_t dev, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ULL ^ dev * 0xc2b2ae3d27d4eb4fULL;

	return h ^ (h >> 29);
}

struct linktable *linktable_new(void)
{
	struct linktable *lt = xcalloc(1, sizeof(*lt));

	shardhash_init(&lt->h);
	return lt;
}

bool linktable_add(struct linktable *lt, uint64_t dev, uint64_t ino,
		   uint32_t nlink, uint64_t ctime_ns, struct dir_node *dir,
		   const char *name, size_t namelen, unsigned names)
{
	uint64_t h = key_hash(dev, ino);
	struct shard *s = shardhash_lock(&lt->h, h);
	struct link_entry *e;

	for (struct shard_link *l = shard_bucket(s, h); l; l = l->next) {
		e = entry_of(l);
		if (e->dev == dev && e->ino == ino) {
			e->found++;
			if (e->nlink != nlink || e->ctime_ns != ctime_ns)
				e->changed = true;
			shardhash_unlock(s);
			return false;
		}
	}
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
	shard_insert(s, &e->link, h);
	shardhash_unlock(s);
	return true;
}

size_t linktable_count(const struct linktable *lt)
{
	return shardhash_count(&lt->h);
}

struct mismatch_walk {
	void (*fn)(struct link_entry *e, void *arg);
	void *arg;
};

static void visit_mismatch(struct shard_link *l, void *arg)
{
	struct mismatch_walk *w = arg;
	struct link_entry *e = entry_of(l);

	if (e->found != e->nlink)
		w->fn(e, w->arg);
}

void linktable_for_each_mismatch(struct linktable *lt,
				 void (*fn)(struct link_entry *e, void *arg), void *arg)
{
	struct mismatch_walk w = { fn, arg };

	shardhash_for_each(&lt->h, visit_mismatch, &w);
}

struct free_walk {
	void (*put_dir)(struct dir_node *, void *);
	void *arg;
};

static void free_entry(struct shard_link *l, void *arg)
{
	struct free_walk *w = arg;
	struct link_entry *e = entry_of(l);

	if (e->dir && w->put_dir)
		w->put_dir(e->dir, w->arg);
	free(e->name);
	free(e);
}

void linktable_free(struct linktable *lt, void (*put_dir)(struct dir_node *, void *),
		    void *arg)
{
	struct free_walk w = { put_dir, arg };

	if (!lt)
		return;
	shardhash_release(&lt->h, free_entry, &w);
	free(lt);
}
