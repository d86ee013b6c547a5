/*
 * regions: rotating media scans; see regions.h.
 */
#include "data/regions.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scan/context.h"
#include "tree/crosslink.h"
#include "lib/inokey.h"
#include "lib/ioengine.h"
#include "report/report.h"
#include "store/state.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

bool regions_mode(const struct scrub_options *opt)
{
	return opt->portion || opt->time_budget;
}

uint64_t regions_default_size(uint64_t dev_size)
{
	uint64_t size = REGION_MIN;

	while (dev_size / size >= REGION_MAX_COUNT)
		size *= 2;
	return size;
}

/* The size kept for this filesystem, or FSCRUB_DEBUG_REGION_MB's; 0 on failure. */
static uint64_t region_size(struct scrub_ctx *ctx)
{
	const char *env = getenv("FSCRUB_DEBUG_REGION_MB");
	uint64_t want = regions_default_size(ctx->dev_size), size = 0;
	bool force = false;

	if (env && *env) {
		char *end;
		unsigned long long mb = strtoull(env, &end, 10);

		if (!*end && mb > 0 && mb < (1ULL << 30))
			want = mb << 20, force = true;
	}
	if (state_region_size(ctx->state, ctx->fs_uuid, want, force, &size))
		return 0;
	return size;
}

/* Each region's file data: the extents (sorted by offset), overlaps once. */
static void count_allocated(struct scrub_ctx *ctx, struct region_plan *p)
{
	const struct xlink_list *l = ctx->xlinks;
	uint64_t covered = 0;

	for (size_t i = 0; i < l->n; i++) {
		const struct xlink_extent *x = &l->v[i];
		uint64_t s = xlink_phys(x) > covered ? xlink_phys(x) : covered;
		uint64_t e = xlink_end(x);

		if (x->unwritten)
			continue;
		if (e > ctx->dev_size)
			e = ctx->dev_size;
		for (; s < e; s = (s / p->size + 1) * p->size) {
			uint64_t end = (s / p->size + 1) * p->size;

			p->allocated[s / p->size] += (e < end ? e : end) - s;
		}
		if (e > covered)
			covered = e;
	}
}

struct age {
	double verified;
	size_t i;
};

static int age_cmp(const void *a, const void *b)
{
	const struct age *x = a, *y = b;

	if (x->verified != y->verified)
		return x->verified < y->verified ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The regions with file data, least recently read first (never: 0). */
static struct age *by_age(const struct region_plan *p, const double *verified, size_t *n)
{
	struct age *v = xmalloc((p->nr + 1) * sizeof(*v));

	*n = 0;
	for (size_t i = 0; i < p->nr; i++)
		if (p->allocated[i])
			v[(*n)++] = (struct age){ .verified = verified[i], .i = i };
	sort_items(v, *n, sizeof(*v), age_cmp);
	return v;
}

/* --time-budget: read the oldest first; ranks after them for the rest. */
static void rank_by_age(struct region_plan *p, const double *verified)
{
	size_t n;
	struct age *v = by_age(p, verified, &n);

	for (size_t i = 0; i < p->nr; i++)
		p->rank[i] = n + i;
	for (size_t k = 0; k < n; k++)
		p->rank[v[k].i] = k;
	free(v);
}

/*
 * --portion: the least recently read regions until their data is closest
 * to P % of all: a region is taken while that brings the sum nearer.
 */
static uint64_t choose(struct region_plan *p, const double *verified, unsigned percent,
		       uint64_t total)
{
	size_t n;
	struct age *v = by_age(p, verified, &n);
	double target = (double)total * percent / 100.0;
	uint64_t sum = 0;

	for (size_t k = 0; k < n; k++) {
		double a = (double)p->allocated[v[k].i];

		if (sum && (double)sum + a - target > target - (double)sum)
			break;
		p->chosen[v[k].i] = true;
		sum += p->allocated[v[k].i];
	}
	free(v);
	return sum;
}

/* -v: which regions this run reads, for the record and the tests. */
static void say_chosen(struct scrub_ctx *ctx, const struct region_plan *p, uint64_t sum,
		       uint64_t total)
{
	struct strbuf sb = STRBUF_INIT;
	size_t with_data = 0, chosen = 0;

	for (size_t i = 0; i < p->nr; i++) {
		with_data += p->allocated[i] != 0;
		if (p->chosen[i])
			strbuf_addf(&sb, "%s%zu", chosen++ ? "," : "", i);
	}
	/* Region numbers, then how many of how many: "regions 7 of 7" read as a count. */
	if (ctx->opt.portion)
		report_verbose(ctx, "Phase 5: --portion %u%%: regions %s (%zu of the %zu with file "
			       "data, %llu MiB each): %llu of %llu bytes of file data",
			       ctx->opt.portion, sb.buf, chosen, with_data,
			       (unsigned long long)(p->size >> 20), (unsigned long long)sum,
			       (unsigned long long)total);
	else
		report_verbose(ctx, "Phase 5: --time-budget: regions %s (%zu of the %zu with file "
			       "data, %llu MiB each), least recently read first", sb.buf, chosen,
			       with_data, (unsigned long long)(p->size >> 20));
	strbuf_release(&sb);
}

/* A plan of every region with file data, all chosen, read in device order. */
static struct region_plan *plan_new(struct scrub_ctx *ctx, uint64_t size, uint64_t *total)
{
	struct region_plan *p = xcalloc(1, sizeof(*p));
	size_t n;

	p->size = size;
	p->nr = n = (size_t)((ctx->dev_size + size - 1) / size);
	p->allocated = xcalloc(n + 1, sizeof(*p->allocated));
	p->chosen = xcalloc(n + 1, sizeof(*p->chosen));
	p->rank = xcalloc(n + 1, sizeof(*p->rank));
	p->planned = xcalloc(n + 1, sizeof(*p->planned));
	p->pending = xcalloc(n + 1, sizeof(*p->pending));
	p->failed = xcalloc(n + 1, sizeof(*p->failed));
	p->done = xcalloc(n + 1, sizeof(*p->done));
	p->skip = xcalloc(n + 1, sizeof(*p->skip));
	p->read_to = xcalloc(n + 1, sizeof(*p->read_to));
	p->first = xcalloc(n + 1, sizeof(*p->first));
	crosslink_sort(ctx);
	count_allocated(ctx, p);
	*total = 0;
	for (size_t i = 0; i < n; i++) {
		*total += p->allocated[i];
		p->chosen[i] = p->allocated[i] != 0;
		p->rank[i] = i;
	}
	return p;
}

int regions_plan(struct scrub_ctx *ctx, const char **why)
{
	struct region_plan *p;
	double *verified;
	uint64_t total, size, sum;

	if (!ctx->state || !ctx->fs_uuid || !(size = region_size(ctx))) {
		*why = "--portion and --time-budget need the run history, which cannot be used";
		return regions_mode(&ctx->opt) ? -ENOENT : 0;
	}
	ctx->regions = p = plan_new(ctx, size, &total);
	if (!regions_mode(&ctx->opt))
		return 0;
	verified = xcalloc(p->nr + 1, sizeof(*verified));
	if (state_region_times(ctx->state, ctx->fs_uuid, size, p->nr, verified, p->skip)) {
		free(verified);
		*why = "--portion and --time-budget cannot read the regions from the run history";
		return -EIO;
	}
	sum = total;
	if (ctx->opt.portion) {
		memset(p->chosen, 0, p->nr * sizeof(*p->chosen));
		sum = choose(p, verified, ctx->opt.portion, total);
	}
	if (ctx->opt.time_budget)
		rank_by_age(p, verified);
	say_chosen(ctx, p, sum, total);
	free(verified);
	return 0;
}

/* --portion by file: the ceil(P %) of the buckets least recently read. */
static void choose_buckets(struct region_plan *p, const double *verified, unsigned percent)
{
	size_t n, take = (FILE_BUCKETS * (size_t)percent + 99) / 100;
	struct age *v = by_age(p, verified, &n);

	memset(p->chosen, 0, p->nr * sizeof(*p->chosen));
	for (size_t k = 0; k < n && k < take; k++)
		p->chosen[v[k].i] = true;
	free(v);
}

int regions_plan_files(struct scrub_ctx *ctx, const char **why)
{
	struct region_plan *p;
	double *verified;
	size_t n = FILE_BUCKETS, nr_chosen = 0;

	if (!ctx->state || !ctx->fs_uuid) {
		*why = "--portion and --time-budget need the run history, which cannot be used";
		return -ENOENT;
	}
	verified = xcalloc(n, sizeof(*verified));
	if (state_region_times(ctx->state, ctx->fs_uuid, 0, n, verified, NULL)) {
		free(verified);
		*why = "--portion and --time-budget cannot read the buckets from the run history";
		return -EIO;
	}
	region_plan_free(ctx->regions);	/* the device's, if its plan failed half way */
	ctx->regions = p = xcalloc(1, sizeof(*p));
	p->nr = n;
	p->allocated = xcalloc(n, sizeof(*p->allocated));
	p->chosen = xcalloc(n, sizeof(*p->chosen));
	p->rank = xcalloc(n, sizeof(*p->rank));
	p->done = xcalloc(n, sizeof(*p->done));
	/* by_age() takes the entries with data: every bucket, empty or not, here */
	for (size_t i = 0; i < n; i++) {
		p->allocated[i] = 1;
		p->chosen[i] = true;
	}
	if (ctx->opt.portion)
		choose_buckets(p, verified, ctx->opt.portion);
	rank_by_age(p, verified);
	memset(p->allocated, 0, n * sizeof(*p->allocated));
	for (size_t i = 0; i < n; i++)
		nr_chosen += p->chosen[i];
	report_verbose(ctx, "Phase 5: %s: %zu of %d buckets of files (by subvolume and inode), "
		       "least recently read first", ctx->opt.portion ? "--portion" : "--time-budget",
		       nr_chosen, FILE_BUCKETS);
	free(verified);
	return 0;
}

size_t regions_bucket_of(const struct statx *stx)
{
	uint64_t sv = 0, x;

	stx_subvol(stx, &sv);
	/* splitmix64's finaliser: every input bit moves every output bit */
	x = sv * 0x9e3779b97f4a7c15ULL ^ stx->stx_ino;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return (size_t)(x % FILE_BUCKETS);
}

bool regions_chosen(const struct region_plan *p, uint64_t off)
{
	return !p || (off / p->size < p->nr && p->chosen[off / p->size]);
}

uint64_t regions_read_from(const struct region_plan *p, uint64_t off)
{
	size_t i;

	if (!p || !p->size || (i = (size_t)(off / p->size)) >= p->nr)
		return 0;
	return (uint64_t)i * p->size + p->skip[i];
}

struct ranked_read {
	size_t rank;
	struct io_range r;
};

static int ranked_cmp(const void *a, const void *b)
{
	const struct ranked_read *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->r.off < y->r.off ? -1 : x->r.off > y->r.off;
}

void regions_order_reads(struct region_plan *p, struct io_range *v, size_t n)
{
	struct ranked_read *w = xmalloc((n + 1) * sizeof(*w));

	for (size_t k = 0; k < n; k++) {
		size_t i = (size_t)(v[k].off / p->size);

		w[k] = (struct ranked_read){ .rank = p->rank[i], .r = v[k] };
		p->planned[i]++;
	}
	sort_items(w, n, sizeof(*w), ranked_cmp);
	for (size_t k = 0; k < n; k++)
		v[k] = w[k].r;
	for (size_t i = 0; i < p->nr; i++)
		atomic_store(&p->pending[i], p->planned[i]);
	free(w);
	/* each region's reads are together now, in device order: where they start */
	for (size_t k = n; k-- > 0;)
		p->first[v[k].off / p->size] = k;
	p->reads = v;
	p->nr_reads = n;
	free(p->ok);
	p->ok = xcalloc(n + 1, sizeof(*p->ok));
}

/* The read of region i at device offset off: its index in p->reads, or SIZE_MAX. */
static size_t read_index(const struct region_plan *p, size_t i, uint64_t off)
{
	size_t lo, hi;

	if (!p->reads)
		return SIZE_MAX;
	lo = p->first[i];
	hi = lo + p->planned[i];
	while (lo < hi) {		/* the last read starting at or before off */
		size_t mid = lo + (hi - lo) / 2;

		if (p->reads[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > p->first[i] ? lo - 1 : SIZE_MAX;
}

void regions_read_done(struct region_plan *p, uint64_t off, bool ok)
{
	size_t i, k;

	if (!p || (i = (size_t)(off / p->size)) >= p->nr)
		return;
	if (ok && (k = read_index(p, i, off)) != SIZE_MAX)
		atomic_store(&p->ok[k], true);
	if (ok)
		atomic_fetch_sub(&p->pending[i], 1);
	else
		atomic_store(&p->failed[i], true);
}

/*
 * Region i, not read to its end: how far from its start everything was
 * read, by this run (its reads completed in order from the first) and the
 * runs before (skip); 0 if no further than before.
 */
static uint64_t read_in_part(const struct region_plan *p, size_t i)
{
	uint64_t start = (uint64_t)i * p->size, to;
	size_t k, end = p->first[i] + p->planned[i];

	if (!p->reads || !p->planned[i])
		return 0;
	for (k = p->first[i]; k < end && atomic_load(&p->ok[k]); k++)
		;
	if (k == p->first[i])
		return 0;
	/* up to the first read not completed, or the last one's end */
	to = k < end ? p->reads[k].off - start : p->reads[k - 1].off + p->reads[k - 1].len - start;
	return to > p->skip[i] ? to : 0;
}

void regions_finish(struct region_plan *p, bool listed_all)
{
	for (size_t i = 0; p && i < p->nr; i++) {
		p->done[i] = p->chosen[i] && !atomic_load(&p->failed[i]) &&
			     atomic_load(&p->pending[i]) == 0 && (p->planned[i] || listed_all);
		if (!p->done[i] && p->chosen[i] && p->read_to)
			p->read_to[i] = read_in_part(p, i);
	}
	if (p)
		p->reads = NULL;	/* the device reader's, freed after this */
}

void regions_coverage(const struct region_plan *p, struct region_coverage *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; p && i < p->nr; i++) {
		if (!p->allocated[i])
			continue;
		c->regions++;
		c->bytes += p->allocated[i];
		c->partial += p->read_to && p->read_to[i];
		if (p->done[i]) {
			c->done++;
			c->done_bytes += p->allocated[i];
		}
	}
}

bool regions_budget_spent(struct scrub_ctx *ctx)
{
	struct timespec t;

	if (!ctx->budget_end_ns)
		return false;
	if (atomic_load(&ctx->budget_spent))
		return true;
	clock_gettime(CLOCK_MONOTONIC, &t);
	if ((uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec < ctx->budget_end_ns)
		return false;
	if (!atomic_exchange(&ctx->budget_spent, true))
		report_verbose(ctx, "Phase 5: --time-budget: %llu s spent, no further reads",
			       (unsigned long long)ctx->opt.time_budget);
	return true;
}

int regions_record(struct scrub_ctx *ctx, struct strbuf *err)
{
	struct region_plan *p = ctx->regions;
	struct timespec now;
	bool any = false;

	if (!p || !ctx->state || atomic_load(&ctx->report.aborted))
		return 0;
	for (size_t i = 0; i < p->nr && !any; i++)
		any = p->done[i] || (p->read_to && p->read_to[i]);
	if (!any)
		return 0;
	/* To the nanosecond: runs a second apart keep their order of age. */
	clock_gettime(CLOCK_REALTIME, &now);
	return state_regions_write(ctx->state, ctx->fs_uuid, p->size, p->nr, p->allocated,
				   p->done, p->read_to, (double)now.tv_sec + (double)now.tv_nsec / 1e9,
				   ctx->run_id, err);
}

void region_plan_free(struct region_plan *p)
{
	if (!p)
		return;
	free(p->allocated);
	free(p->chosen);
	free(p->rank);
	free(p->planned);
	free(p->pending);
	free(p->failed);
	free(p->done);
	free(p->skip);
	free(p->read_to);
	free(p->first);
	free(p->ok);
	free(p);
}
