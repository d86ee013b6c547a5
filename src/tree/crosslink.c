/*
 * crosslink: cross-linked block detection; see crosslink.h.
 */
#include "tree/crosslink.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "report/checks.h"
#include "scan/context.h"
#include "tree/dircache.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "tree/relook.h"
#include "tree/walk.h"

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

/* Push one located extent, cut into pieces of at most XLINK_MAX_PIECE sectors. */
static void push_pieces(struct xlink_list *l, uint64_t ino, bool recent,
			const struct fiemap_extent *x)
{
	uint64_t max = XLINK_MAX_PIECE * XLINK_SECTOR;

	for (uint64_t done = 0; done < x->fe_length;) {
		uint64_t len = x->fe_length - done < max ? x->fe_length - done : max;
		struct xlink_extent e = xlink_extent_make(
			ino, x->fe_logical + done, x->fe_physical + done, len,
			x->fe_flags & FIEMAP_EXTENT_SHARED, x->fe_flags & FIEMAP_EXTENT_UNWRITTEN,
			recent);

		push(l, &e);
		done += len;
	}
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
		/* An extent the list cannot keep (see crosslink.h) has no location either. */
		if (!xlink_fits(x[i].fe_logical, x[i].fe_physical, x[i].fe_length)) {
			all_located = false;
			continue;
		}
		push_pieces(l, id.ino, recent, &x[i]);
	}
	return all_located;
}

/*
 * The entries of l, appended to all a slice at a time from the end; each
 * slice is given back as soon as it is copied (realloc shrinks a mapping
 * in place), so the two lists never hold much more than their extents.
 */
#define MERGE_SLICE 65536	/* 1.5 MiB of extents */

static void move_entries(struct xlink_list *all, struct xlink_list *l)
{
	while (l->n && !all->overflow) {
		size_t k = l->n > MERGE_SLICE ? MERGE_SLICE : l->n;

		for (size_t i = l->n - k; i < l->n; i++)
			push(all, &l->v[i]);
		l->n -= k;
		if (l->n) {
			l->v = xrealloc(l->v, l->n * sizeof(*l->v));
			l->alloc = l->n;
		}
	}
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
		move_entries(all, l);
	}
	xlink_list_release(l);
}

/* The sort order of the list: physical offset, then inode. */
static bool before(const struct xlink_extent *x, const struct xlink_extent *y)
{
	if (x->phys_sec != y->phys_sec)
		return x->phys_sec < y->phys_sec;
	return x->ino < y->ino;
}

static void swap_ext(struct xlink_extent *a, struct xlink_extent *b)
{
	struct xlink_extent t = *a;

	*a = *b;
	*b = t;
}

static void sift_down(struct xlink_extent *v, size_t root, size_t n)
{
	for (size_t child; (child = 2 * root + 1) < n; root = child) {
		if (child + 1 < n && before(&v[child], &v[child + 1]))
			child++;
		if (!before(&v[root], &v[child]))
			return;
		swap_ext(&v[root], &v[child]);
	}
}

static void heap_sort(struct xlink_extent *v, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		sift_down(v, i, n);
	for (size_t i = n; i-- > 1;) {
		swap_ext(&v[0], &v[i]);
		sift_down(v, 0, i);
	}
}

/* Below this many extents, insertion sort (quicksort's usual cut-off). */
#define SMALL_SORT 16

/*
 * Introsort in place: glibc's qsort() (2.36) sorts a copy made with
 * malloc() -- 24 more bytes per extent at the peak -- so the list sorts
 * itself: quicksort with a median of three, heap sort past 2 log2(n)
 * levels, insertion sort of the short runs.
 */
static void intro_sort(struct xlink_extent *v, size_t n, unsigned depth)
{
	while (n > SMALL_SORT) {
		size_t mid = n / 2, i = 0, j = n - 1;

		if (!depth--) {
			heap_sort(v, n);
			return;
		}
		if (before(&v[mid], &v[0]))
			swap_ext(&v[mid], &v[0]);
		if (before(&v[n - 1], &v[0]))
			swap_ext(&v[n - 1], &v[0]);
		if (before(&v[n - 1], &v[mid]))
			swap_ext(&v[n - 1], &v[mid]);
		struct xlink_extent pivot = v[mid];

		/* Hoare's partition: v[0..j] <= pivot <= v[j+1..n-1]. */
		for (;;) {
			while (before(&v[i], &pivot))
				i++;
			while (before(&pivot, &v[j]))
				j--;
			if (i >= j)
				break;
			swap_ext(&v[i++], &v[j--]);
		}
		/* Recurse into the smaller side, loop on the larger: log2(n) stack. */
		if (j + 1 < n - j - 1) {
			intro_sort(v, j + 1, depth);
			v += j + 1;
			n -= j + 1;
		} else {
			intro_sort(v + j + 1, n - j - 1, depth);
			n = j + 1;
		}
	}
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && before(&v[k], &v[k - 1]); k--)
			swap_ext(&v[k], &v[k - 1]);
}

void crosslink_sort_extents(struct xlink_extent *v, size_t n)
{
	unsigned depth = 0;

	for (size_t m = n; m > 1; m >>= 1)
		depth += 2;
	intro_sort(v, n, depth);
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
	if (!ctx->xlinks->sorted)
		crosslink_sort_extents(ctx->xlinks->v, ctx->xlinks->n);
	ctx->xlinks->sorted = true;
}

static bool extents_overlap(const struct xlink_extent *a, const struct xlink_extent *b)
{
	return a->phys_sec < b->phys_sec + (xlink_len(b) / XLINK_SECTOR) &&
	       b->phys_sec < a->phys_sec + (xlink_len(a) / XLINK_SECTOR);
}

/*
 * Do x and r map the same file offsets of one inode to the same device
 * bytes?  Then they are two listings of one mapping (the same file mapped
 * twice, or an ext2/ext3 map split differently by two FIEMAPs), not two
 * owners of the bytes.
 */
static bool same_mapping(const struct xlink_extent *x, const struct xlink_extent *r)
{
	return x->ino == r->ino && xlink_phys(x) - xlink_logical(x) == xlink_phys(r) - xlink_logical(r);
}

void crosslink_sweep(const struct xlink_extent *v, size_t n, xlink_overlap_fn fn, void *arg)
{
	size_t reach = 0;

	for (size_t i = 1; i < n; i++) {
		const struct xlink_extent *x = &v[i], *r = &v[reach];

		if (extents_overlap(x, r) && !(x->shared && r->shared) && !same_mapping(x, r) &&
		    fn(arg, r, x))
			return;
		if (xlink_end(x) > xlink_end(r))
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
			    (unsigned long long)xlink_phys(x),
			    (unsigned long long)(xlink_end(x) - 1),
			    (unsigned long long)x->ino, (unsigned long long)r->ino);
		return false;
	}
	fs->pairs = xrealloc(fs->pairs, (fs->n + 1) * sizeof(*fs->pairs));
	fs->pairs[fs->n] = (struct pair){ .a = *r, .b = *x, .start = xlink_phys(x) };
	fs->pairs[fs->n].end = xlink_end(x) < xlink_end(r) ? xlink_end(x) : xlink_end(r);
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
		    relook_still_mapped(fd, xlink_logical(&p->a) + (p->start - xlink_phys(&p->a)), p->start, len))
			p->seen_a = true;
		if (ino_key_eq(xlink_key(l, &p->b), f->id) &&
		    relook_still_mapped(fd, xlink_logical(&p->b) + (p->start - xlink_phys(&p->b)), p->start, len))
			p->seen_b = true;
	}
}

static void report_pair(struct xlink_state *st, const struct pair *p)
{
	struct scrub_ctx *ctx = st->ctx;
	struct relook_file *fa = relook_find(&st->rl, xlink_key(ctx->xlinks, &p->a));
	struct relook_file *fb = relook_find(&st->rl, xlink_key(ctx->xlinks, &p->b));
	struct strbuf other = STRBUF_INIT;
	uint64_t off_a = xlink_logical(&p->a) + (p->start - xlink_phys(&p->a));
	uint64_t off_b = xlink_logical(&p->b) + (p->start - xlink_phys(&p->b));

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

/*
 * Pair i and the pairs after it that map the same device bytes of the same
 * file again, against the same extent: one block named over and over by
 * a block map that points at itself (a fuzzed ext3 image: one block 504
 * times).  How many pairs the run holds (1: none after i).
 */
static size_t self_run(const struct pair *v, size_t n, size_t i)
{
	size_t j = i + 1;

	if (v[i].a.ino != v[i].b.ino)
		return 1;
	while (j < n && v[j].a.ino == v[i].a.ino && v[j].b.ino == v[i].a.ino &&
	       v[j].start == v[i].start && v[j].end == v[i].end &&
	       xlink_logical(&v[j].a) == xlink_logical(&v[i].a) &&
	       xlink_phys(&v[j].a) == xlink_phys(&v[i].a))
		j++;
	return j - i;
}

/* Such a run, said once: an error when each of its pairs was seen again. */
static void report_self_run(struct xlink_state *st, const struct pair *p, size_t n)
{
	struct scrub_ctx *ctx = st->ctx;
	struct relook_file *f = relook_find(&st->rl, xlink_key(ctx->xlinks, &p->a));
	uint64_t off_a = xlink_logical(&p->a) + (p->start - xlink_phys(&p->a));
	uint64_t lo = UINT64_MAX, hi = 0;
	bool seen = f->dir && !f->changed;

	for (size_t k = 0; k < n; k++) {
		uint64_t off = xlink_logical(&p[k].b) + (p->start - xlink_phys(&p[k].b));

		lo = off < lo ? off : lo;
		hi = off > hi ? off : hi;
		seen = seen && p[k].seen_a && p[k].seen_b;
	}
	if (!seen) {
		str_changed(ctx, CHECK_EXTENT_CROSSLINKED, f->dir, f->name, p->a.ino,
			    "device bytes %llu-%llu", (unsigned long long)p->start,
			    (unsigned long long)(p->end - 1));
		return;
	}
	str_error_range(ctx, CHECK_EXTENT_CROSSLINKED, f->dir, f->name, p->a.ino, off_a,
			p->end - p->start, "device bytes %llu-%llu are mapped %zu times, at file "
			"offset %llu and at %zu more from %llu to %llu", (unsigned long long)p->start,
			(unsigned long long)(p->end - 1), n + 1, (unsigned long long)off_a, n,
			(unsigned long long)lo, (unsigned long long)hi);
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
	if (ctx->quirks & QUIRK_BLOCKS_SHARED) {
		/* The backend said so under -v in phase 1. */
		if (!ctx->opt.verify_data)
			xlink_list_release(ctx->xlinks);
		return;
	}
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
		for (size_t i = 0, run; i < st.nr_pairs && !scrub_should_stop(ctx); i += run) {
			run = self_run(st.pairs, st.nr_pairs, i);
			if (run > 1)
				report_self_run(&st, &st.pairs[i], run);
			else
				report_pair(&st, &st.pairs[i]);
		}
	relook_release(&st.rl);
	free(st.pairs);
}
