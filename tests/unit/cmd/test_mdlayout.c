/*
 * Unit tests for mdlayout.c: an md member's bytes placed in the array.
 * Neither this machine's kernel nor the test VM's has md, so the layouts
 * are checked two ways: rows drawn by hand from md's documented layouts
 * (raid5.c's comments "Q D D D P", "D D P Q D"; mdadm's left-symmetric
 * picture), and every chunk of the first rows of every followed geometry
 * placed forward by a model of raid5_compute_sector() and raid10's near
 * copies written here, then found back through md_map().
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cmd/mdlayout.h"

#define CHUNK 65536ULL
#define DATA_OFF (2048ULL * 512)

struct one {
	int n;
	struct md_piece p;
};

static void keep(const struct md_piece *p, void *arg)
{
	struct one *o = arg;

	o->p = *p;
	o->n++;
}

/* What member slot holds in row row: "D<k>" (array chunk k), "P", "Q" or "-". */
static void cell(struct md_geom g, unsigned slot, uint64_t row, char *out, size_t len)
{
	struct one o = { 0 };

	g.slot = slot;
	assert_int_equal(md_map(&g, DATA_OFF + row * CHUNK, CHUNK, keep, &o), 0);
	if (!o.n)
		snprintf(out, len, "-");
	else if (o.p.parity)
		snprintf(out, len, "%c", o.p.which);
	else
		snprintf(out, len, "D%llu", (unsigned long long)(o.p.array_off / CHUNK));
}

/* Row row of g as "D0 D1 P". */
static void row_of(struct md_geom g, uint64_t row, char *out, size_t len)
{
	size_t at = 0;

	out[0] = 0;
	for (unsigned s = 0; s < g.disks; s++) {
		char c[24];

		cell(g, s, row, c, sizeof(c));
		at += (size_t)snprintf(out + at, len - at, "%s%s", s ? " " : "", c);
	}
}

static struct md_geom geom(int level, unsigned layout, unsigned disks)
{
	return (struct md_geom){ .level = level, .layout = layout, .chunk = CHUNK,
				 .disks = disks, .data_off = DATA_OFF, .size = 1ULL << 40 };
}

static void assert_rows(struct md_geom g, const char *const *want, unsigned rows)
{
	char got[256];

	for (unsigned r = 0; r < rows; r++) {
		row_of(g, r, got, sizeof(got));
		assert_string_equal(got, want[r]);
	}
}

static void test_drawn_rows(void **state)
{
	static const char *const r5_ls3[] = { "D0 D1 P", "D3 P D2", "P D4 D5", "D6 D7 P" };
	static const char *const r5_la4[] = { "D0 D1 D2 P", "D3 D4 P D5", "D6 P D7 D8",
					      "P D9 D10 D11" };
	static const char *const r5_ra3[] = { "P D0 D1", "D2 P D3", "D4 D5 P" };
	static const char *const r5_rs3[] = { "P D0 D1", "D3 P D2", "D4 D5 P" };
	static const char *const r5_p0[] = { "P D0 D1", "P D2 D3" };
	static const char *const r4[] = { "D0 D1 P", "D2 D3 P" };
	static const char *const r6_la5[] = { "Q D0 D1 D2 P", "D3 D4 D5 P Q", "D6 D7 P Q D8" };
	static const char *const r6_ls4[] = { "Q D0 D1 P", "D2 D3 P Q", "D5 P Q D4" };
	static const char *const r6_pn4[] = { "D0 D1 P Q" };
	static const char *const r10_n2_3[] = { "D0 D0 D1", "D1 D2 D2", "D3 D3 D4" };
	static const char *const r10_n2_4[] = { "D0 D0 D1 D1", "D2 D2 D3 D3" };
	static const char *const r0_3[] = { "D0 D1 D2", "D3 D4 D5" };

	(void)state;
	assert_rows(geom(5, 2, 3), r5_ls3, 4);
	assert_rows(geom(5, 0, 4), r5_la4, 4);
	assert_rows(geom(5, 1, 3), r5_ra3, 3);
	assert_rows(geom(5, 3, 3), r5_rs3, 3);
	assert_rows(geom(5, 4, 3), r5_p0, 2);
	assert_rows(geom(4, 0, 3), r4, 2);
	assert_rows(geom(6, 0, 5), r6_la5, 3);
	assert_rows(geom(6, 2, 4), r6_ls4, 3);
	assert_rows(geom(6, 5, 4), r6_pn4, 1);
	assert_rows(geom(10, 0x102, 3), r10_n2_3, 3);
	assert_rows(geom(10, 0x102, 4), r10_n2_4, 2);
	assert_rows(geom(0, 0, 3), r0_3, 2);
}

/*
 * The model: array chunk c of g is on member *disk in row *row (RAID10:
 * its first copy), written the way raid5_compute_sector() picks pd_idx,
 * qd_idx and dd_idx for each algorithm.
 */
static void place(const struct md_geom *g, uint64_t c, unsigned *disk, uint64_t *row)
{
	unsigned n = g->disks, np = g->level == 6 ? 2 : 1, data;
	unsigned dd;
	uint64_t stripe;
	int pd = 0;

	/* Striping without parity first: one disk of RAID0 has no data = n - np. */
	if (g->level == 0 || g->level == 10) {
		uint64_t pos = g->level == 0 ? c : c * (g->layout & 0xff);

		*disk = (unsigned)(pos % n);
		*row = pos / n;
		return;
	}
	data = n - np;
	dd = (unsigned)(c % data);
	stripe = c / data;
	*row = stripe;
	if (g->level == 4) {
		*disk = dd;
		return;
	}
	switch (g->layout) {
	case 0: /* left asymmetric */
	case 1: /* right asymmetric */
		pd = g->layout == 0 ? (int)(n - 1 - stripe % n) : (int)(stripe % n);
		if (g->level == 6 && pd == (int)n - 1)
			dd++;
		else if (dd >= (unsigned)pd)
			dd += np;
		break;
	case 2: /* left symmetric */
	case 3: /* right symmetric */
		pd = g->layout == 2 ? (int)(n - 1 - stripe % n) : (int)(stripe % n);
		dd = (unsigned)(pd + (int)np + (int)dd) % n;
		break;
	case 4: /* parity first */
		dd += np;
		break;
	default: /* 5: parity last */
		break;
	}
	*disk = dd;
}

static void test_every_chunk_found_back(void **state)
{
	static const struct { int level; unsigned layout, min; } kinds[] = {
		{ 0, 0, 1 }, { 4, 0, 2 }, { 5, 0, 2 }, { 5, 1, 2 }, { 5, 2, 2 }, { 5, 3, 2 },
		{ 5, 4, 2 }, { 5, 5, 2 }, { 6, 0, 3 }, { 6, 1, 3 }, { 6, 2, 3 }, { 6, 3, 3 },
		{ 6, 4, 3 }, { 6, 5, 3 }, { 10, 0x102, 2 }, { 10, 0x103, 3 },
	};

	(void)state;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(*kinds); k++)
		for (unsigned n = kinds[k].min; n <= 8; n++) {
			struct md_geom g = geom(kinds[k].level, kinds[k].layout, n);

			for (uint64_t c = 0; c < 80; c++) {
				struct one o = { 0 };
				uint64_t row;
				unsigned disk;

				place(&g, c, &disk, &row);
				g.slot = disk;
				/* 512 bytes 4 KiB into the chunk, as a bad sector would be. */
				assert_int_equal(md_map(&g, DATA_OFF + row * CHUNK + 4096, 512,
							keep, &o), 0);
				assert_int_equal(o.n, 1);
				assert_false(o.p.parity);
				assert_true(o.p.array_off == c * CHUNK + 4096 && o.p.len == 512);
			}
		}
}

static void test_edges(void **state)
{
	struct md_geom g = geom(5, 2, 3);
	struct one o = { 0 };

	(void)state;
	/* Before the data offset: nothing. */
	g.slot = 0;
	assert_int_equal(md_map(&g, 0, DATA_OFF, keep, &o), 0);
	assert_int_equal(o.n, 0);
	/* Past the array's end (2 rows of data): nothing. */
	g.size = 4 * CHUNK;
	assert_int_equal(md_map(&g, DATA_OFF + 2 * CHUNK, CHUNK, keep, &o), 0);
	assert_int_equal(o.n, 0);
	/* RAID1: 1:1 from the data offset, clipped to the array. */
	g = geom(1, 0, 2);
	g.size = 8192;
	assert_int_equal(md_map(&g, DATA_OFF + 4096, 8192, keep, &o), 0);
	assert_true(o.n == 1 && o.p.array_off == 4096 && o.p.len == 4096);
	/* Not followed, or no sense. */
	g = geom(10, 0x201, 4);		/* far 2 */
	assert_int_equal(md_map(&g, DATA_OFF, 512, keep, &o), -EOPNOTSUPP);
	g = geom(6, 8, 4);		/* DDF rotating, zero restart */
	assert_int_equal(md_map(&g, DATA_OFF, 512, keep, &o), -EOPNOTSUPP);
	g = geom(0, 0, 3);
	g.uneven = true;		/* zones */
	assert_int_equal(md_map(&g, DATA_OFF, 512, keep, &o), -EOPNOTSUPP);
	g = geom(5, 2, 3);
	g.slot = 3;
	assert_int_equal(md_map(&g, DATA_OFF, 512, keep, &o), -EINVAL);
	g = geom(6, 2, 2);
	assert_int_equal(md_map(&g, DATA_OFF, 512, keep, &o), -EINVAL);
	g = geom(5, 2, 3);
	g.chunk = 0;
	assert_int_equal(md_map(&g, DATA_OFF, 512, keep, &o), -EINVAL);
	assert_int_equal(md_level("raid5", &g), 0);
	assert_int_equal(g.level, 5);
	assert_int_equal(md_level("linear", &g), -EOPNOTSUPP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_drawn_rows),
		cmocka_unit_test(test_every_chunk_found_back),
		cmocka_unit_test(test_edges),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
