/*
 * regions: rotating media scans; see regions.h.
 */
#include "regions.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "context.h"
#include "crosslink.h"
#include "report.h"
#include "state.h"
#include "strbuf.h"

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
		uint64_t s = x->phys > covered ? x->phys : covered;
		uint64_t e = x->phys + x->len;

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

/*
 * --portion: the least recently read regions until their data is closest
 * to P % of all: a region is taken while that brings the sum nearer.
 */
static uint64_t choose(struct region_plan *p, const double *verified, unsigned percent,
		       uint64_t total)
{
	struct age *v = xmalloc((p->nr + 1) * sizeof(*v));
	size_t n = 0;
	double target = (double)total * percent / 100.0;
	uint64_t sum = 0;

	for (size_t i = 0; i < p->nr; i++)
		if (p->allocated[i])
			v[n++] = (struct age){ .verified = verified[i], .i = i };
	qsort(v, n, sizeof(*v), age_cmp);
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
	size_t with_data = 0;

	for (size_t i = 0; i < p->nr; i++) {
		with_data += p->allocated[i] != 0;
		if (p->chosen[i])
			strbuf_addf(&sb, "%s%zu", sb.len ? "," : "", i);
	}
	report_verbose(ctx, "Phase 5: --portion %u%%: regions %s of %zu with file data "
		       "(%llu MiB each): %llu of %llu bytes of file data", ctx->opt.portion,
		       sb.buf, with_data, (unsigned long long)(p->size >> 20),
		       (unsigned long long)sum, (unsigned long long)total);
	strbuf_release(&sb);
}

int regions_plan(struct scrub_ctx *ctx, const char **why)
{
	struct region_plan *p;
	double *verified;
	uint64_t total = 0, size;

	if (!ctx->state || !ctx->fs_uuid || !(size = region_size(ctx))) {
		*why = "--portion needs the run history, which cannot be used";
		return ctx->opt.portion ? -ENOENT : 0;
	}
	p = xcalloc(1, sizeof(*p));
	p->size = size;
	p->nr = (size_t)((ctx->dev_size + size - 1) / size);
	p->allocated = xcalloc(p->nr + 1, sizeof(*p->allocated));
	p->chosen = xcalloc(p->nr + 1, sizeof(*p->chosen));
	crosslink_sort(ctx);
	count_allocated(ctx, p);
	for (size_t i = 0; i < p->nr; i++) {
		total += p->allocated[i];
		p->chosen[i] = p->allocated[i] != 0;
	}
	ctx->regions = p;
	if (!ctx->opt.portion)
		return 0;
	verified = xcalloc(p->nr + 1, sizeof(*verified));
	if (state_region_times(ctx->state, ctx->fs_uuid, size, p->nr, verified)) {
		free(verified);
		*why = "--portion cannot read the regions from the run history";
		return -EIO;
	}
	memset(p->chosen, 0, p->nr * sizeof(*p->chosen));
	say_chosen(ctx, p, choose(p, verified, ctx->opt.portion, total), total);
	free(verified);
	return 0;
}

bool regions_chosen(const struct region_plan *p, uint64_t off)
{
	return !p || (off / p->size < p->nr && p->chosen[off / p->size]);
}

int regions_record(struct scrub_ctx *ctx, struct strbuf *err)
{
	struct region_plan *p = ctx->regions;

	if (!p || !p->read || !ctx->state || scrub_cancelled || atomic_load(&ctx->aborted))
		return 0;
	return state_regions_write(ctx->state, ctx->fs_uuid, p->size, p->nr, p->allocated,
				   p->chosen, (double)time(NULL), ctx->run_id, err);
}

void region_plan_free(struct region_plan *p)
{
	if (!p)
		return;
	free(p->allocated);
	free(p->chosen);
	free(p);
}
