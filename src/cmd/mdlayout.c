/*
 * mdlayout: a member's bytes placed in its md array; see mdlayout.h.
 *
 * The striped levels are mapped forward as md deals the chunks (a row's
 * k-th data chunk on member data_disk(row, k), its parity on pd and qd),
 * and backwards by asking, for the member's row, which k lands on it:
 * at most a few dozen members, so the search costs nothing next to the
 * lookups of the filesystem above.
 */
#include "cmd/mdlayout.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* md's RAID5/6 algorithms (md/layout) that this file follows (raid5.h). */
enum {
	ALG_LEFT_ASYMMETRIC = 0,
	ALG_RIGHT_ASYMMETRIC = 1,
	ALG_LEFT_SYMMETRIC = 2,
	ALG_RIGHT_SYMMETRIC = 3,
	ALG_PARITY_0 = 4,
	ALG_PARITY_N = 5,
};

/* RAID10's md/layout: near copies in bits 0-7, far copies in 8-15, offset and far sets above. */
#define R10_NEAR(l) ((l) & 0xff)
#define R10_FAR(l) (((l) >> 8) & 0xff)
#define R10_MORE(l) ((l) >> 16)

int md_level(const char *name, struct md_geom *g)
{
	static const struct { const char *name; int level; } levels[] = {
		{ "raid0", 0 }, { "raid1", 1 }, { "raid4", 4 }, { "raid5", 5 },
		{ "raid6", 6 }, { "raid10", 10 },
	};

	for (size_t i = 0; i < sizeof(levels) / sizeof(*levels); i++)
		if (!strcmp(name, levels[i].name)) {
			g->level = levels[i].level;
			return 0;
		}
	return -EOPNOTSUPP;
}

static unsigned parity_count(const struct md_geom *g)
{
	return g->level == 6 ? 2 : 1;
}

/*
 * Row row's parity members (qd -1 without Q), as raid5_compute_sector()
 * places them; -EOPNOTSUPP for an algorithm not followed.
 */
static int parity_of(const struct md_geom *g, uint64_t row, int *pd, int *qd)
{
	unsigned n = g->disks, data = n - parity_count(g);
	int r = (int)(row % n);

	*qd = -1;
	if (g->level == 4) {
		*pd = (int)data;
		return 0;
	}
	switch (g->layout) {
	case ALG_LEFT_ASYMMETRIC:
	case ALG_LEFT_SYMMETRIC:
		*pd = (int)n - 1 - r;
		break;
	case ALG_RIGHT_ASYMMETRIC:
	case ALG_RIGHT_SYMMETRIC:
		*pd = r;
		break;
	case ALG_PARITY_0:
		*pd = 0;
		break;
	case ALG_PARITY_N:
		*pd = (int)data;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (g->level == 6)
		*qd = (*pd + 1) % (int)n;
	return 0;
}

/* The member that holds data chunk k of row row, whose parity is on pd. */
static unsigned data_disk(const struct md_geom *g, int pd, unsigned k)
{
	unsigned n = g->disks, np = parity_count(g);

	if (g->level == 4 || g->layout == ALG_PARITY_N)
		return k;
	if (g->layout == ALG_PARITY_0)
		return k + np;
	if (g->layout == ALG_LEFT_SYMMETRIC || g->layout == ALG_RIGHT_SYMMETRIC)
		return (unsigned)(pd + (int)np + (int)k) % n;
	/* Asymmetric: data restarts at member 0 and steps over the parity. */
	if (g->level == 6 && pd == (int)n - 1)
		return k + 1;	/* Q on member 0, P on the last */
	return k >= (unsigned)pd ? k + np : k;
}

/* The piece of row row on the member at in..in+len: data or parity. */
static void striped_piece(const struct md_geom *g, uint64_t row, uint64_t in,
			  struct md_piece *p)
{
	unsigned data = g->disks - parity_count(g);
	int pd = -1, qd = -1;

	parity_of(g, row, &pd, &qd);	/* check_geom() let only known algorithms by */
	if ((int)g->slot == pd || (int)g->slot == qd) {
		p->parity = true;
		p->which = (int)g->slot == pd ? 'P' : 'Q';
		p->array_off = row * data * g->chunk;
		p->row_len = data * g->chunk;
		return;
	}
	for (unsigned k = 0; k < data; k++)
		if (data_disk(g, pd, k) == g->slot) {
			p->array_off = (row * data + k) * g->chunk + in;
			return;
		}
}

/* Which geometries are followed, and which make sense. */
static int check_geom(const struct md_geom *g)
{
	if (g->level == 1)
		return 0;
	if (!g->chunk || !g->disks || g->slot >= g->disks)
		return -EINVAL;
	switch (g->level) {
	case 0:
		return g->uneven ? -EOPNOTSUPP : 0;
	case 10:
		if (R10_FAR(g->layout) != 1 || R10_MORE(g->layout))
			return -EOPNOTSUPP;	/* far or offset copies */
		return R10_NEAR(g->layout) && R10_NEAR(g->layout) <= g->disks ? 0 : -EINVAL;
	case 4:
	case 5:
	case 6:
		if (g->disks <= parity_count(g))
			return -EINVAL;
		return g->level == 4 || g->layout <= ALG_PARITY_N ? 0 : -EOPNOTSUPP;
	default:
		return -EOPNOTSUPP;
	}
}

/* The member's chunk-aligned piece from at (>= data_off), in p. */
static void piece_at(const struct md_geom *g, uint64_t at, uint64_t end, struct md_piece *p)
{
	uint64_t rel = at - g->data_off, row = rel / g->chunk, in = rel % g->chunk;

	*p = (struct md_piece){ .off = at, .len = g->chunk - in };
	if (p->len > end - at)
		p->len = end - at;
	if (g->level == 0)
		p->array_off = (row * g->disks + g->slot) * g->chunk + in;
	else if (g->level == 10)
		p->array_off = (row * g->disks + g->slot) / R10_NEAR(g->layout) * g->chunk + in;
	else
		striped_piece(g, row, in, p);
}

int md_map(const struct md_geom *g, uint64_t off, uint64_t len,
	   void (*fn)(const struct md_piece *p, void *arg), void *arg)
{
	uint64_t end = off + len, at = off > g->data_off ? off : g->data_off;
	int ret = check_geom(g);

	if (ret)
		return ret;
	if (g->level == 1) {
		/* Every mirror holds the array from its data offset on. */
		struct md_piece p = { .off = at, .array_off = at - g->data_off };

		if (at < end && p.array_off < g->size) {
			p.len = end - at < g->size - p.array_off ? end - at : g->size - p.array_off;
			fn(&p, arg);
		}
		return 0;
	}
	while (at < end) {
		struct md_piece p;

		piece_at(g, at, end, &p);
		if (p.array_off >= g->size)
			break;	/* past the array's end: the member's spare room */
		if (!p.parity && p.len > g->size - p.array_off)
			p.len = g->size - p.array_off;
		fn(&p, arg);
		at += p.len;
	}
	return 0;
}
