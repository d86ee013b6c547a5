/*
 * crosslink: cross-linked block detection; see crosslink.h.
 */
#include "crosslink.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "checks.h"
#include "context.h"
#include "dircache.h"
#include "report.h"
#include "strbuf.h"
#include "relook.h"
#include "walk.h"

/* Past this many suspicious pairs something is badly wrong: say so, stop. */
#define MAX_PAIRS 1000


void xlink_list_release(struct xlink_list *l)
{
	uint64_t dev = l->dev;
	size_t cap = l->cap;

	free(l->v);
	free(l->unmapped);
	memset(l, 0, sizeof(*l));
	l->dev = dev;
	l->cap = cap;
}

void crosslink_unmapped(struct xlink_list *l, struct ino_key id)
{
	if (l->nr_unmapped == l->alloc_unmapped) {
		l->alloc_unmapped = l->alloc_unmapped ? l->alloc_unmapped * 2 : 64;
		l->unmapped = xrealloc(l->unmapped, l->alloc_unmapped * sizeof(*l->unmapped));
	}
	l->unmapped[l->nr_unmapped++] = id;
}

static void push(struct xlink_list *l, const struct xlink_extent *x)
{
	if (l->overflow)
		return;
	if (l->n >= (l->cap ? l->cap : XLINK_MAX_EXTENTS)) {
		l->overflow = true;
		free(l->v);
		l->v = NULL;
		l->n = l->alloc = 0;
		return;
	}
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? l->alloc * 2 : 1024;
		l->v = xrealloc(l->v, l->alloc * sizeof(*l->v));
	}
	l->v[l->n++] = *x;
}

bool crosslink_collect(struct xlink_list *l, struct ino_key id, bool recent,
		       const struct fiemap_extent *x, size_t n)
{
	bool all_located = true;

	if (id.dev != l->dev)
		return false;	/* keyed by inode number: one st_dev per list */
	for (size_t i = 0; i < n; i++) {
		if (x[i].fe_flags & XLINK_NO_LOCATION) {
			all_located = false;
			continue;
		}
		if (!x[i].fe_length)
			continue;
		struct xlink_extent e = {
			.phys = x[i].fe_physical, .len = x[i].fe_length,
			.logical = x[i].fe_logical, .ino = id.ino,
			.shared = !!(x[i].fe_flags & FIEMAP_EXTENT_SHARED),
			.unwritten = !!(x[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN),
			.recent = recent,
		};
		push(l, &e);
	}
	return all_located;
}

void crosslink_merge(struct scrub_ctx *ctx, struct xlink_list *l)
{
	struct xlink_list *all = ctx->xlinks;

	for (size_t i = 0; i < l->nr_unmapped; i++)
		crosslink_unmapped(all, l->unmapped[i]);
	if (l->overflow && !all->overflow) {
		free(all->v);
		*all = (struct xlink_list){ .dev = all->dev, .overflow = true,
					    .unmapped = all->unmapped,
					    .nr_unmapped = all->nr_unmapped,
					    .alloc_unmapped = all->alloc_unmapped };
	}
	if (!all->n && !all->overflow) {
		free(all->v);
		all->v = l->v;
		all->n = l->n;
		all->alloc = l->alloc;
		l->v = NULL;
	} else {
		for (size_t i = 0; i < l->n; i++)
			push(all, &l->v[i]);
	}
	xlink_list_release(l);
}

static int by_phys(const void *a, const void *b)
{
	const struct xlink_extent *x = a, *y = b;

	if (x->phys != y->phys)
		return x->phys < y->phys ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* Two extents that claim the same device bytes. */
struct pair {
	struct xlink_extent a, b;
	uint64_t start, end;		/* the bytes both claim */
	bool seen_a, seen_b;		/* still mapped so on the second look */
};

struct xlink_state {
	struct scrub_ctx *ctx;
	struct pair *pairs;
	size_t nr_pairs;
	struct relook rl;		/* the files named in some pair */
};

void crosslink_sort(struct scrub_ctx *ctx)
{
	/* qsort(NULL, 0, ...) is undefined: an empty list has no array. */
	if (!ctx->xlinks->sorted && ctx->xlinks->n)
		qsort(ctx->xlinks->v, ctx->xlinks->n, sizeof(*ctx->xlinks->v), by_phys);
	ctx->xlinks->sorted = true;
}

static bool extents_overlap(const struct xlink_extent *a, const struct xlink_extent *b)
{
	return a->phys < b->phys + b->len && b->phys < a->phys + a->len;
}

/*
 * Do x and r map the same file offsets of one inode to the same device
 * bytes?  Then they are two listings of one mapping (the same file mapped
 * twice, or an ext2/ext3 map split differently by two FIEMAPs), not two
 * owners of the bytes.
 */
static bool same_mapping(const struct xlink_extent *x, const struct xlink_extent *r)
{
	return x->ino == r->ino && x->phys - x->logical == r->phys - r->logical;
}

void crosslink_sweep(const struct xlink_extent *v, size_t n, xlink_overlap_fn fn, void *arg)
{
	size_t reach = 0;

	for (size_t i = 1; i < n; i++) {
		const struct xlink_extent *x = &v[i], *r = &v[reach];

		if (extents_overlap(x, r) && !(x->shared && r->shared) && !same_mapping(x, r) &&
		    fn(arg, r, x))
			return;
		if (x->phys + x->len > r->phys + r->len)
			reach = i;
	}
}

struct find_state {
	struct scrub_ctx *ctx;
	struct pair *pairs;
	size_t n;
};

/* An overlap: an info if either inode changed during the scan, else a pair. */
static bool note_pair(void *arg, const struct xlink_extent *r, const struct xlink_extent *x)
{
	struct find_state *fs = arg;

	if (x->recent || r->recent) {
		str_changed(fs->ctx, CHECK_EXTENT_CROSSLINKED, NULL, NULL, x->ino,
			    "device bytes %llu-%llu of inodes %llu and %llu",
			    (unsigned long long)x->phys,
			    (unsigned long long)(x->phys + x->len - 1),
			    (unsigned long long)x->ino, (unsigned long long)r->ino);
		return false;
	}
	fs->pairs = xrealloc(fs->pairs, (fs->n + 1) * sizeof(*fs->pairs));
	fs->pairs[fs->n] = (struct pair){ .a = *r, .b = *x, .start = x->phys };
	fs->pairs[fs->n].end = x->phys + x->len < r->phys + r->len ?
			       x->phys + x->len : r->phys + r->len;
	return ++fs->n >= MAX_PAIRS;
}

/* Sweep the sorted extents; each overlap with the furthest-reaching one. */
static size_t find_pairs(struct scrub_ctx *ctx, struct pair **out)
{
	struct find_state fs = { .ctx = ctx };

	crosslink_sweep(ctx->xlinks->v, ctx->xlinks->n, note_pair, &fs);
	if (fs.n == MAX_PAIRS)
		str_info(ctx, CHECK_EXTENT_CROSSLINKED, NULL, NULL, 0,
			 "more than %d cross-linked extents: only the first are examined",
			 MAX_PAIRS);
	*out = fs.pairs;
	return fs.n;
}

/* The second look: is each side of each pair still mapped so? */
static void relook_pairs(struct relook *rl, struct relook_file *f, int fd,
			 const struct walk_entry *e)
{
	struct xlink_state *st = rl->arg;
	const struct xlink_list *l = st->ctx->xlinks;

	(void)e;
	for (size_t i = 0; i < st->nr_pairs; i++) {
		struct pair *p = &st->pairs[i];
		uint64_t len = p->end - p->start;

		if (ino_key_eq(xlink_key(l, &p->a), f->id) &&
		    relook_still_mapped(fd, p->a.logical + (p->start - p->a.phys), p->start, len))
			p->seen_a = true;
		if (ino_key_eq(xlink_key(l, &p->b), f->id) &&
		    relook_still_mapped(fd, p->b.logical + (p->start - p->b.phys), p->start, len))
			p->seen_b = true;
	}
}

static void report_pair(struct xlink_state *st, const struct pair *p)
{
	struct scrub_ctx *ctx = st->ctx;
	struct relook_file *fa = relook_find(&st->rl, xlink_key(ctx->xlinks, &p->a));
	struct relook_file *fb = relook_find(&st->rl, xlink_key(ctx->xlinks, &p->b));
	struct strbuf other = STRBUF_INIT;
	uint64_t off_a = p->a.logical + (p->start - p->a.phys);
	uint64_t off_b = p->b.logical + (p->start - p->b.phys);

	/* Not found again, no longer mapped so, or changed: a race. */
	if (!fa->dir || !fb->dir || !p->seen_a || !p->seen_b || fa->changed || fb->changed) {
		str_changed(ctx, CHECK_EXTENT_CROSSLINKED, fa->dir, fa->name, p->a.ino,
			    "device bytes %llu-%llu", (unsigned long long)p->start,
			    (unsigned long long)(p->end - 1));
		return;
	}
	report_path(ctx, &other, fb->dir, fb->name);
	if (p->a.ino == p->b.ino)
		str_error_range(ctx, CHECK_EXTENT_CROSSLINKED, fa->dir, fa->name, p->a.ino,
				off_a, p->end - p->start,
				"device bytes %llu-%llu are mapped twice, at file offsets %llu "
				"and %llu", (unsigned long long)p->start,
				(unsigned long long)(p->end - 1), (unsigned long long)off_a,
				(unsigned long long)off_b);
	else
		str_error_range(ctx, CHECK_EXTENT_CROSSLINKED, fa->dir, fa->name, p->a.ino,
				off_a, p->end - p->start,
				"device bytes %llu-%llu at file offset %llu are also mapped by "
				"%s (inode %llu) at its offset %llu, and not as shared extents",
				(unsigned long long)p->start, (unsigned long long)(p->end - 1),
				(unsigned long long)off_a, other.buf,
				(unsigned long long)p->b.ino, (unsigned long long)off_b);
	strbuf_release(&other);
}

void crosslink_check(struct scrub_ctx *ctx)
{
	struct xlink_state st = { .ctx = ctx };

	if (ctx->xlinks->overflow) {
		str_info(ctx, CHECK_EXTENT_CROSSLINKED, NULL, NULL, 0,
			 "more than %llu data extents: cross-linked blocks are not looked for",
			 XLINK_MAX_EXTENTS);
		return;
	}
	if (!ctx->xlinks->n)
		return;
	crosslink_sort(ctx);
	st.nr_pairs = find_pairs(ctx, &st.pairs);
	if (!ctx->opt.verify_data)
		xlink_list_release(ctx->xlinks);	/* else phase 5 reads by it */
	if (!st.nr_pairs || scrub_should_stop(ctx)) {
		free(st.pairs);
		return;
	}
	st.rl = (struct relook){ .ctx = ctx, .name = "cross-link second look",
				 .visit = relook_pairs, .arg = &st };
	for (size_t i = 0; i < st.nr_pairs; i++) {
		relook_add(&st.rl, xlink_key(ctx->xlinks, &st.pairs[i].a));
		relook_add(&st.rl, xlink_key(ctx->xlinks, &st.pairs[i].b));
	}
	report_verbose(ctx, "Phase 4: %zu cross-linked %s to look at again", st.nr_pairs,
		       st.nr_pairs == 1 ? "extent" : "extents");
	if (relook_walk(&st.rl) == 0)
		for (size_t i = 0; i < st.nr_pairs && !scrub_should_stop(ctx); i++)
			report_pair(&st, &st.pairs[i]);
	relook_release(&st.rl);
	free(st.pairs);
}
