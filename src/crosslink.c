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
#include "walk.h"

/* Past this many suspicious pairs something is badly wrong: say so, stop. */
#define MAX_PAIRS 1000

/* Extents whose physical offset is no place on the device of their own. */
#define NO_LOCATION (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | \
		     FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED)

void xlink_list_release(struct xlink_list *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static void push(struct xlink_list *l, const struct xlink_extent *x)
{
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? l->alloc * 2 : 1024;
		l->v = xrealloc(l->v, l->alloc * sizeof(*l->v));
	}
	l->v[l->n++] = *x;
}

void crosslink_collect(struct xlink_list *l, uint64_t ino, bool recent,
		       const struct fiemap_extent *x, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (x[i].fe_flags & NO_LOCATION || !x[i].fe_length)
			continue;
		struct xlink_extent e = {
			.phys = x[i].fe_physical, .len = x[i].fe_length,
			.logical = x[i].fe_logical, .ino = ino,
			.shared = !!(x[i].fe_flags & FIEMAP_EXTENT_SHARED), .recent = recent,
		};
		push(l, &e);
	}
}

void crosslink_merge(struct scrub_ctx *ctx, struct xlink_list *l)
{
	struct xlink_list *all = &ctx->xlinks;

	if (!all->n) {
		*all = *l;
		memset(l, 0, sizeof(*l));
		return;
	}
	for (size_t i = 0; i < l->n; i++)
		push(all, &l->v[i]);
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

/* A file named in some pair: where the second walk found it. */
struct suspect_file {
	uint64_t ino;
	struct dir_node *dir;		/* reference, or NULL if not found */
	char *name;
	bool changed;
};

struct xlink_state {
	struct scrub_ctx *ctx;
	struct pair *pairs;
	size_t nr_pairs;
	struct suspect_file *files;	/* sorted by inode */
	size_t nr_files;
	pthread_mutex_t lock;
};

static bool extents_overlap(const struct xlink_extent *a, const struct xlink_extent *b)
{
	return a->phys < b->phys + b->len && b->phys < a->phys + a->len;
}

/* Sweep the sorted extents; each overlap with the furthest-reaching one. */
static size_t find_pairs(struct scrub_ctx *ctx, struct pair **out)
{
	struct xlink_list *l = &ctx->xlinks;
	struct pair *pairs = NULL;
	size_t n = 0, reach = 0;

	for (size_t i = 1; i < l->n && n < MAX_PAIRS; i++) {
		const struct xlink_extent *x = &l->v[i], *r = &l->v[reach];

		if (extents_overlap(x, r) && !(x->shared && r->shared) &&
		    !(x->ino == r->ino && x->logical == r->logical)) {
			if (x->recent || r->recent) {
				str_changed(ctx, CHECK_EXTENT_CROSSLINKED, NULL, NULL, x->ino,
					    "device bytes %llu-%llu of inodes %llu and %llu",
					    (unsigned long long)x->phys,
					    (unsigned long long)(x->phys + x->len - 1),
					    (unsigned long long)x->ino, (unsigned long long)r->ino);
			} else {
				pairs = xrealloc(pairs, (n + 1) * sizeof(*pairs));
				pairs[n] = (struct pair){ .a = *r, .b = *x, .start = x->phys };
				pairs[n].end = x->phys + x->len < r->phys + r->len ?
					       x->phys + x->len : r->phys + r->len;
				n++;
			}
		}
		if (x->phys + x->len > r->phys + r->len)
			reach = i;
	}
	if (n == MAX_PAIRS)
		str_info(ctx, CHECK_EXTENT_CROSSLINKED, NULL, NULL, 0,
			 "more than %d cross-linked extents: only the first are examined",
			 MAX_PAIRS);
	*out = pairs;
	return n;
}

static int by_ino(const void *a, const void *b)
{
	const struct suspect_file *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static struct suspect_file *find_file(struct xlink_state *st, uint64_t ino)
{
	struct suspect_file key = { .ino = ino };

	return bsearch(&key, st->files, st->nr_files, sizeof(key), by_ino);
}

/* Does fd still map [p->start, p->end) at the logical offset of side x? */
static bool still_mapped(int fd, const struct xlink_extent *x, uint64_t start, uint64_t end)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext[1];
	} m;

	memset(&m, 0, sizeof(m));
	m.fm.fm_start = x->logical + (start - x->phys);
	m.fm.fm_length = end - start;
	m.fm.fm_extent_count = 1;
	if (ioctl(fd, FS_IOC_FIEMAP, &m.fm) < 0 || m.fm.fm_mapped_extents != 1)
		return false;
	const struct fiemap_extent *e = &m.ext[0];
	uint64_t want = e->fe_physical + (m.fm.fm_start - e->fe_logical);

	return !(e->fe_flags & NO_LOCATION) && m.fm.fm_start >= e->fe_logical &&
	       want == start;
}

/* The second walk: map the suspects again and learn their names. */
static void relook_entry(struct walk_thread *t, struct walk_dir *d, const struct walk_entry *e)
{
	struct xlink_state *st = t->varg;
	struct suspect_file *f;
	int fd;

	if (e->stat_err || !S_ISREG(e->stx.stx_mode) || !(f = find_file(st, e->stx.stx_ino)))
		return;
	fd = walk_open_file(t, d, e, 0);
	if (fd < 0)
		return;
	pthread_mutex_lock(&st->lock);
	if (!f->dir) {
		dir_node_get(d->node);
		f->dir = d->node;
		f->name = xstrndup(e->name, e->namelen);
	}
	if (stx_changed_during_scan(t->ctx, &e->stx))
		f->changed = true;
	for (size_t i = 0; i < st->nr_pairs; i++) {
		struct pair *p = &st->pairs[i];

		if (p->a.ino == f->ino && still_mapped(fd, &p->a, p->start, p->end))
			p->seen_a = true;
		if (p->b.ino == f->ino && still_mapped(fd, &p->b, p->start, p->end))
			p->seen_b = true;
	}
	pthread_mutex_unlock(&st->lock);
	close(fd);
}

static const struct walk_visitor relook_visitor = {
	.name = "cross-link second look",
	.entry = relook_entry,
};

static void add_file(struct xlink_state *st, uint64_t ino)
{
	for (size_t i = 0; i < st->nr_files; i++)
		if (st->files[i].ino == ino)
			return;
	st->files = xrealloc(st->files, (st->nr_files + 1) * sizeof(*st->files));
	st->files[st->nr_files++] = (struct suspect_file){ .ino = ino };
}

static void report_pair(struct xlink_state *st, const struct pair *p)
{
	struct scrub_ctx *ctx = st->ctx;
	struct suspect_file *fa = find_file(st, p->a.ino), *fb = find_file(st, p->b.ino);
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
	struct scrub_stats stats = { 0 };

	if (!ctx->xlinks.n)
		return;
	qsort(ctx->xlinks.v, ctx->xlinks.n, sizeof(*ctx->xlinks.v), by_phys);
	st.nr_pairs = find_pairs(ctx, &st.pairs);
	xlink_list_release(&ctx->xlinks);
	if (!st.nr_pairs || scrub_should_stop(ctx)) {
		free(st.pairs);
		return;
	}
	for (size_t i = 0; i < st.nr_pairs; i++) {
		add_file(&st, st.pairs[i].a.ino);
		add_file(&st, st.pairs[i].b.ino);
	}
	qsort(st.files, st.nr_files, sizeof(*st.files), by_ino);
	pthread_mutex_init(&st.lock, NULL);
	report_verbose(ctx, "Phase 4: %zu cross-linked %s to look at again", st.nr_pairs,
		       st.nr_pairs == 1 ? "extent" : "extents");
	if (walk_tree(ctx, &relook_visitor, &st, &stats, NULL) < 0)
		report_operational(ctx, NULL, NULL, 0, "cannot start the cross-link second look");
	else
		for (size_t i = 0; i < st.nr_pairs && !scrub_should_stop(ctx); i++)
			report_pair(&st, &st.pairs[i]);
	for (size_t i = 0; i < st.nr_files; i++) {
		if (st.files[i].dir)
			dir_node_put(&ctx->dcache, st.files[i].dir);
		free(st.files[i].name);
	}
	pthread_mutex_destroy(&st.lock);
	free(st.files);
	free(st.pairs);
}
