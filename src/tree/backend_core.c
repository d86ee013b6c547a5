/*
 * backend_core: what the core offers the backends (backends/backend.h):
 * the walk's results and a second walk, in the backends' own types, so
 * that no backend needs the walk's or the extent list's internals.  The
 * core's side of the hooks that take those types is here too.
 */
#include "tree/backend_core.h"

#include <stdlib.h>

#include "data/ledger.h"
#include "lib/sorted.h"
#include "lib/stx.h"
#include "scan/context.h"
#include "tree/relook.h"
#include "tree/crosslink.h"
#include "lib/inoset.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

struct backend_dir backend_dir_of(const struct walk_thread *t, const struct walk_dir *d)
{
	return (struct backend_dir){ .node = d->node, .fd = d->fd, .stx = &d->before,
				     .thread = t->index };
}

struct backend_entry backend_entry_of(const struct walk_entry *e, int fd)
{
	return (struct backend_entry){ .name = e->name, .namelen = e->namelen,
				       .stx = &e->stx, .fd = fd, .bulk = e->bulk != NULL };
}

bool backend_reached(const struct scrub_ctx *ctx, uint64_t dev, uint64_t ino)
{
	return ctx->reached && inoset_test(ctx->reached, dev, ino);
}

size_t backend_extents_by_phys(struct scrub_ctx *ctx)
{
	if (!ctx->xlinks || ctx->xlinks->overflow)
		return 0;
	crosslink_sort(ctx);
	return ctx->xlinks->n;
}

size_t backend_extents_count(const struct scrub_ctx *ctx)
{
	return backend_extents_whole(ctx) ? ctx->xlinks->n : 0;
}

bool backend_extents_whole(const struct scrub_ctx *ctx)
{
	return ctx->xlinks && !ctx->xlinks->overflow;
}

uint64_t *backend_unmapped_inodes(const struct scrub_ctx *ctx, size_t *n)
{
	const struct xlink_list *l = ctx->xlinks;
	uint64_t *v = xmalloc(((l ? l->nr_unmapped : 0) + 1) * sizeof(*v));

	*n = 0;
	for (size_t i = 0; l && i < l->nr_unmapped; i++)
		if (l->unmapped[i].dev == l->dev)
			v[(*n)++] = l->unmapped[i].ino;
	sort_items(v, *n, sizeof(*v), u64_cmp);
	return v;
}

void backend_collect_extents(struct scrub_ctx *ctx, uint64_t ino,
			     const struct fiemap_extent *x, size_t n)
{
	struct ino_key id = { ctx->xlinks->dev, ino };

	if (!crosslink_collect(ctx->xlinks, id, false, x, n))
		crosslink_unmapped(ctx->xlinks, id);
}

struct backend_extent backend_extent_at(const struct scrub_ctx *ctx, size_t i)
{
	const struct xlink_extent *x = &ctx->xlinks->v[i];

	return (struct backend_extent){ x->ino, xlink_logical(x), xlink_phys(x), xlink_len(x),
					x->recent };
}

/* A second walk's visitor: the backend's functions in its own types. */
struct second_walk {
	const struct backend_walk *w;
	void *arg;
};

static void second_entry(struct walk_thread *t, struct walk_dir *d, const struct walk_entry *e)
{
	struct second_walk *sw = t->varg;
	struct backend_dir bd;
	struct backend_entry be;

	if (e->stat_err || !sw->w->entry)
		return;
	bd = backend_dir_of(t, d);
	be = backend_entry_of(e, -1);
	sw->w->entry(t->ctx, sw->arg, &bd, &be);
}

static void second_dir_end(struct walk_thread *t, struct walk_dir *d)
{
	struct second_walk *sw = t->varg;
	struct backend_dir bd;

	if (!sw->w->dir_end)
		return;
	bd = backend_dir_of(t, d);
	sw->w->dir_end(t->ctx, sw->arg, &bd);
}

static const struct walk_visitor second_visitor = {
	.name = "backend's second look",
	.entry = second_entry,
	.dir_end = second_dir_end,
};

int backend_walk_tree(struct scrub_ctx *ctx, const struct backend_walk *w, void *arg)
{
	struct second_walk sw = { w, arg };
	struct scrub_stats stats = { 0 };

	return walk_tree(ctx, &second_visitor, &sw, &stats, NULL);
}

/* ---- names for inodes found by number --------------------------------- */

struct backend_names {
	struct relook rl;
	uint64_t dev;
};

struct backend_names *backend_names_new(struct scrub_ctx *ctx, const char *why)
{
	struct backend_names *bn = xcalloc(1, sizeof(*bn));

	bn->rl = (struct relook){ .ctx = ctx, .name = why, .names_only = true };
	bn->dev = stx_devno(&ctx->root_stx);
	return bn;
}

void backend_names_add(struct backend_names *bn, uint64_t ino)
{
	relook_add(&bn->rl, (struct ino_key){ bn->dev, ino });
}

int backend_names_walk(struct backend_names *bn, size_t *asked)
{
	int named = 0, ret;

	*asked = bn->rl.nr_files;
	if (!bn->rl.nr_files)
		return 0;
	ret = relook_walk(&bn->rl);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < bn->rl.nr_files; i++)
		named += bn->rl.files[i].dir != NULL;
	return named;
}

bool backend_names_get(struct backend_names *bn, uint64_t ino, const struct dir_node **dir,
		       const char **name)
{
	struct relook_file *f = bn->rl.nr_files ?
				relook_find(&bn->rl, (struct ino_key){ bn->dev, ino }) : NULL;

	*dir = f ? f->dir : NULL;
	*name = f && f->dir ? f->name : NULL;
	return *dir != NULL;
}

void backend_names_free(struct backend_names *bn)
{
	if (!bn)
		return;
	relook_release(&bn->rl);
	free(bn);
}

bool backend_ledger_notes_all(const struct scrub_ctx *ctx)
{
	return ledger_will_note_all(&ctx->opt);
}
