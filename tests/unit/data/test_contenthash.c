/*
 * Unit tests for contenthash (the ledger's block-sum digest) and the
 * ledger record format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include <cmocka.h>

#include "data/contenthash.h"
#include "data/ledger_store.h"

#define NCHUNKS 8

struct sums {
	struct chash128 c[NCHUNKS];
};

static void add_emit(void *arg, uint64_t chunk, struct chash128 sum)
{
	struct sums *s = arg;

	assert_true(chunk < NCHUNKS);
	chash_add(&s->c[chunk], sum);
}

static unsigned char *random_buf(size_t n, unsigned seed)
{
	unsigned char *b = malloc(n);

	srand(seed);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)rand();
	return b;
}

static bool sums_equal(const struct sums *a, const struct sums *b)
{
	for (int i = 0; i < NCHUNKS; i++)
		if (!chash_equal(a->c[i], b->c[i]))
			return false;
	return true;
}

/* Blocks in any order, in pieces of any whole number of blocks: one digest. */
static void test_order_does_not_matter(void **state)
{
	struct chash_params p;
	size_t size = 3 * (1 << 20) + 100;
	unsigned char *b = random_buf(size + 4096, 1);
	char scratch[4096];
	struct sums whole = { 0 }, pieces = { 0 };

	(void)state;
	chash_params_init(&p, 4096);
	chash_range(&p, 0, b, size, size, scratch, add_emit, &whole);
	/* Backwards, 3 blocks at a time, the last piece running to the end. */
	for (int64_t off = (int64_t)(size / (3 * 4096)) * 3 * 4096; off >= 0; off -= 3 * 4096) {
		uint64_t len = size - (uint64_t)off < 3 * 4096 ? size - (uint64_t)off : 3 * 4096;

		chash_range(&p, (uint64_t)off, b + off, len, size, scratch, add_emit, &pieces);
	}
	assert_true(sums_equal(&whole, &pieces));
	free(b);
}

/* Zero blocks count nothing: a hole and written zeros are alike. */
static void test_zero_blocks_count_nothing(void **state)
{
	struct chash_params p;
	unsigned char *z = calloc(1, 2 << 20);
	char scratch[4096];
	struct sums s = { 0 }, none = { 0 };

	(void)state;
	chash_params_init(&p, 4096);
	chash_range(&p, 0, z, 2 << 20, 2 << 20, scratch, add_emit, &s);
	assert_true(sums_equal(&s, &none));
	free(z);
}

/* Bytes past the end of the file are not the file's. */
static void test_tail_past_eof_ignored(void **state)
{
	struct chash_params p;
	unsigned char *a = random_buf(8192, 2), *b = malloc(8192);
	char scratch[4096];
	struct sums sa = { 0 }, sb = { 0 };

	(void)state;
	memcpy(b, a, 8192);
	memset(b + 5000, 0xEE, 8192 - 5000);
	chash_params_init(&p, 4096);
	chash_range(&p, 0, a, 8192, 5000, scratch, add_emit, &sa);
	chash_range(&p, 0, b, 8192, 5000, scratch, add_emit, &sb);
	assert_true(sums_equal(&sa, &sb));
	/* ... but a byte before it is. */
	b[4999] ^= 1;
	memset(&sb, 0, sizeof(sb));
	chash_range(&p, 0, b, 8192, 5000, scratch, add_emit, &sb);
	assert_false(sums_equal(&sa, &sb));
	free(a);
	free(b);
}

/* Two blocks swapped: same bytes, other places, another digest. */
static void test_swapped_blocks_differ(void **state)
{
	struct chash_params p;
	unsigned char *a = random_buf(8192, 3), *b = malloc(8192);
	char scratch[4096];
	struct sums sa = { 0 }, sb = { 0 };

	(void)state;
	memcpy(b, a + 4096, 4096);
	memcpy(b + 4096, a, 4096);
	chash_params_init(&p, 4096);
	chash_range(&p, 0, a, 8192, 8192, scratch, add_emit, &sa);
	chash_range(&p, 0, b, 8192, 8192, scratch, add_emit, &sb);
	assert_false(sums_equal(&sa, &sb));
	free(a);
	free(b);
}

/* 1 KiB blocks: the filesystem's block size is the unit. */
static void test_small_blocks(void **state)
{
	struct chash_params p;
	unsigned char *a = random_buf(3 << 20, 4);
	char scratch[1024];
	struct sums one = { 0 }, two = { 0 };

	(void)state;
	chash_params_init(&p, 1024);
	assert_int_equal(p.block_size, 1024);
	chash_range(&p, 0, a, 3 << 20, 3 << 20, scratch, add_emit, &one);
	chash_range(&p, 1024, a + 1024, (3 << 20) - 1024, 3 << 20, scratch, add_emit, &two);
	chash_range(&p, 0, a, 1024, 3 << 20, scratch, add_emit, &two);
	assert_true(sums_equal(&one, &two));
	chash_params_init(&p, 3000);		/* not a power of two */
	assert_int_equal(p.block_size, 4096);
	free(a);
}

static void test_whole_depends_on_size(void **state)
{
	struct chash128 c[2] = { { 1, 2 }, { 3, 4 } };

	(void)state;
	assert_false(chash_equal(chash_whole(10, c, 2), chash_whole(11, c, 2)));
	assert_true(chash_equal(chash_whole(10, c, 2), chash_whole(10, c, 2)));
	assert_false(chash_equal(chash_whole(10, c, 2), chash_whole(10, c, 1)));
}

static void test_record_round_trip(void **state)
{
	struct ledger_record r = {
		.block_shift = 12, .chunk_shift = 21, .ino = 131, .gen = 0xdeadbeef,
		.size = 5 << 20, .mtime_ns = 1700000000123456789, .ctime_ns = -5,
		.written_ns = 1700000001000000000, .nr_chunks = 3, .whole = { 7, 8 },
		.chunk = { 11, 12, 13 },
	}, back;
	unsigned char buf[LEDGER_REC_MAX];
	size_t n = ledger_record_encode(&r, buf);

	(void)state;
	assert_int_equal(n, LEDGER_REC_HEADER + 3 * 8);
	assert_int_equal(ledger_record_decode(buf, n, &back), 0);
	assert_int_equal(back.ino, 131);
	assert_int_equal(back.gen, 0xdeadbeef);
	assert_int_equal(back.chunk_shift, 21);
	assert_true(back.ctime_ns == -5);
	assert_int_equal(back.chunk[2], 13);
	assert_true(chash_equal(back.whole, r.whole));
	/* Truncated, or not ours: refused. */
	assert_int_equal(ledger_record_decode(buf, n - 1, &back), -EINVAL);
	buf[0] = 'X';
	assert_int_equal(ledger_record_decode(buf, n, &back), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_does_not_matter),
		cmocka_unit_test(test_zero_blocks_count_nothing),
		cmocka_unit_test(test_tail_past_eof_ignored),
		cmocka_unit_test(test_swapped_blocks_differ),
		cmocka_unit_test(test_small_blocks),
		cmocka_unit_test(test_whole_depends_on_size),
		cmocka_unit_test(test_record_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
