/*
 * Unit tests for ledger_store.c: the record's byte format (encode/decode
 * round trip, the layout ledger_store.h documents, truncated and
 * corrupted records rejected without touching the output), and the
 * SQLite store (--ledger DIR) in a temporary directory: a record put is
 * got back, by subvolume, inode and generation, and a corrupted row is
 * refused, not a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <unistd.h>
#include <cmocka.h>

#include "data/ledger_store.h"

static struct ledger_record sample(uint32_t nr_chunks)
{
	struct ledger_record r;

	memset(&r, 0, sizeof(r));
	r.block_shift = 12;
	r.chunk_shift = CHASH_BASE_SHIFT + 1;
	r.ino = 0x0102030405060708ULL;
	r.gen = 0xdeadbeefcafef00dULL;
	r.size = (uint64_t)nr_chunks << r.chunk_shift;
	r.mtime_ns = -1234567890123LL;		/* before 1970: signed survives */
	r.ctime_ns = 1700000000123456789LL;
	r.written_ns = INT64_MAX;
	r.nr_chunks = nr_chunks;
	r.whole = (struct chash128){ .lo = 0x1111222233334444ULL, .hi = 0x5555666677778888ULL };
	for (uint32_t i = 0; i < nr_chunks; i++)
		r.chunk[i] = 0x9e3779b97f4a7c15ULL * (i + 1);
	return r;
}

static void assert_record_equal(const struct ledger_record *a, const struct ledger_record *b)
{
	assert_int_equal(a->block_shift, b->block_shift);
	assert_int_equal(a->chunk_shift, b->chunk_shift);
	assert_true(a->ino == b->ino);
	assert_true(a->gen == b->gen);
	assert_true(a->size == b->size);
	assert_true(a->mtime_ns == b->mtime_ns);
	assert_true(a->ctime_ns == b->ctime_ns);
	assert_true(a->written_ns == b->written_ns);
	assert_int_equal(a->nr_chunks, b->nr_chunks);
	assert_true(chash_equal(a->whole, b->whole));
	assert_memory_equal(a->chunk, b->chunk, a->nr_chunks * sizeof(a->chunk[0]));
}

static void test_round_trip(void **state)
{
	static const uint32_t counts[] = { 0, 1, 3, LEDGER_MAX_CHUNKS };

	(void)state;
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		struct ledger_record r = sample(counts[i]), back;
		unsigned char buf[LEDGER_REC_MAX];
		size_t len = ledger_record_encode(&r, buf);

		assert_int_equal(len, LEDGER_REC_HEADER + 8 * (size_t)counts[i]);
		memset(&back, 0xa5, sizeof(back));
		assert_int_equal(ledger_record_decode(buf, len, &back), 0);
		assert_record_equal(&r, &back);
	}
}

/* The bytes are those ledger_store.h documents: records outlive versions. */
static void test_layout(void **state)
{
	struct ledger_record r = sample(2);
	unsigned char buf[LEDGER_REC_MAX];
	size_t len = ledger_record_encode(&r, buf);
	static const unsigned char ino_le[8] = { 8, 7, 6, 5, 4, 3, 2, 1 };

	(void)state;
	assert_int_equal(len, 96);
	assert_memory_equal(buf, "FSL1", 4);
	assert_int_equal(buf[4], 1);			/* version */
	assert_int_equal(buf[5], 1);			/* XXH3 block sums */
	assert_int_equal(buf[6], 12);
	assert_int_equal(buf[7], CHASH_BASE_SHIFT + 1);
	assert_memory_equal(buf + 8, ino_le, 8);	/* little-endian */
	assert_int_equal(buf[56], 2);			/* chunk count, u32 ... */
	for (int i = 57; i < 64; i++)			/* ... then a zero u32 */
		assert_int_equal(buf[i], 0);
	assert_int_equal(buf[64], 0x44);		/* whole digest, low half first */
	assert_int_equal(buf[72], 0x88);
	assert_int_equal(buf[80], 0x15);		/* chunk 0's low byte */
}

/* Decoding buf[0..len) fails and leaves *r as it was. */
static void assert_rejected(const unsigned char *buf, size_t len)
{
	struct ledger_record r, before;

	memset(&r, 0x5a, sizeof(r));
	before = r;
	assert_int_equal(ledger_record_decode(buf, len, &r), -EINVAL);
	assert_memory_equal(&r, &before, sizeof(r));
}

static void test_truncated_and_extended(void **state)
{
	struct ledger_record r = sample(5);
	unsigned char buf[LEDGER_REC_MAX + 8];
	size_t len = ledger_record_encode(&r, buf);

	(void)state;
	for (size_t n = 0; n < len; n++)
		assert_rejected(buf, n);
	buf[len] = 0;
	assert_rejected(buf, len + 1);
	assert_rejected(buf, len + 8);		/* one chunk more than the count says */
}

/* One byte of a valid record set to v: rejected. */
static void assert_byte_rejected(size_t at, unsigned char v)
{
	struct ledger_record r = sample(1);
	unsigned char buf[LEDGER_REC_MAX];
	size_t len = ledger_record_encode(&r, buf);

	buf[at] = v;
	assert_rejected(buf, len);
}

/* One byte of a valid record set to v: still a record, with that field. */
static void assert_byte_accepted(size_t at, unsigned char v)
{
	struct ledger_record r = sample(1), back;
	unsigned char buf[LEDGER_REC_MAX];
	size_t len = ledger_record_encode(&r, buf);

	buf[at] = v;
	assert_int_equal(ledger_record_decode(buf, len, &back), 0);
}

static void test_fields_checked(void **state)
{
	(void)state;
	assert_byte_rejected(0, 'X');			/* magic */
	assert_byte_rejected(3, '2');
	assert_byte_rejected(4, 2);			/* a later version */
	assert_byte_rejected(4, 0);
	assert_byte_rejected(5, 2);			/* another algorithm */
	assert_byte_rejected(6, 8);			/* blocks below 512 bytes */
	assert_byte_rejected(6, 21);			/* ... above 1 MiB */
	assert_byte_accepted(6, 9);
	assert_byte_accepted(6, 20);
	assert_byte_rejected(7, CHASH_BASE_SHIFT - 1);	/* chunks below the base */
	assert_byte_rejected(7, 63);
	assert_byte_accepted(7, CHASH_BASE_SHIFT);
	assert_byte_accepted(7, 62);
	assert_byte_rejected(56, 2);			/* count says 2, one is there */
	assert_byte_rejected(60, 1);			/* the zero u32 is not zero */
}

/* A count past LEDGER_MAX_CHUNKS, with the bytes to match: refused. */
static void test_too_many_chunks(void **state)
{
	struct ledger_record r = sample(LEDGER_MAX_CHUNKS);
	unsigned char buf[LEDGER_REC_MAX + 8];
	size_t len = ledger_record_encode(&r, buf);
	uint32_t n = LEDGER_MAX_CHUNKS + 1;

	(void)state;
	for (int i = 0; i < 4; i++)
		buf[56 + i] = (unsigned char)(n >> (8 * i));
	memset(buf + len, 0, 8);
	assert_rejected(buf, len + 8);
}

/* A temporary directory for the database, removed afterwards. */
struct dbdir {
	char path[64];
	int fd;
};

static int dbdir_setup(void **state)
{
	struct dbdir *d = calloc(1, sizeof(*d));

	snprintf(d->path, sizeof(d->path), "/tmp/fscrub-ledger-XXXXXX");
	if (!mkdtemp(d->path))
		return -1;
	d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*state = d;
	return d->fd < 0 ? -1 : 0;
}

static int dbdir_teardown(void **state)
{
	struct dbdir *d = *state;
	char db[128];

	snprintf(db, sizeof(db), "%s/%s", d->path, LEDGER_DB_NAME);
	unlink(db);
	strcat(db, "-journal");		/* none after a clean close; no harm */
	unlink(db);
	close(d->fd);
	rmdir(d->path);
	free(d);
	return 0;
}

static void test_db_round_trip(void **state)
{
	struct dbdir *d = *state;
	struct ledger_store s;
	struct ledger_record r = sample(4), back;
	char err[256] = "";

	assert_int_equal(ledger_store_open(&s, d->path, true, d->fd, err, sizeof(err)), 0);
	assert_non_null(s.db);
	assert_int_equal(ledger_store_get(&s, -1, 0, r.ino, r.gen, &back), -ENODATA);
	assert_int_equal(ledger_store_put(&s, -1, 7, &r), 0);
	ledger_store_close(&s);

	/* Read-only (-n), as a later run: found by subvolume, inode and generation. */
	assert_int_equal(ledger_store_open(&s, d->path, false, d->fd, err, sizeof(err)), 0);
	memset(&back, 0, sizeof(back));
	assert_int_equal(ledger_store_get(&s, -1, 7, r.ino, r.gen, &back), 0);
	assert_record_equal(&r, &back);
	assert_int_equal(ledger_store_get(&s, -1, 0, r.ino, r.gen, &back), -ENODATA);
	assert_int_equal(ledger_store_get(&s, -1, 7, r.ino, r.gen + 1, &back), -ENODATA);
	assert_int_equal(ledger_store_put(&s, -1, 7, &r), -EIO);	/* read-only */
	ledger_store_close(&s);
}

/* A row whose blob is cut short (a damaged database): -EINVAL, not a crash. */
static void test_db_corrupt_row(void **state)
{
	struct dbdir *d = *state;
	struct ledger_store s;
	struct ledger_record r = sample(4), back;
	char err[256] = "";

	assert_int_equal(ledger_store_open(&s, d->path, true, d->fd, err, sizeof(err)), 0);
	assert_int_equal(ledger_store_put(&s, -1, 0, &r), 0);
	ledger_store_close(&s);

	assert_int_equal(ledger_store_open(&s, d->path, true, d->fd, err, sizeof(err)), 0);
	assert_int_equal(sqlite3_exec(s.db, "UPDATE records SET rec = substr(rec, 1, 40)",
				      NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(ledger_store_get(&s, -1, 0, r.ino, r.gen, &back), -EINVAL);
	assert_int_equal(sqlite3_exec(s.db, "UPDATE records SET rec = x''", NULL, NULL, NULL),
			 SQLITE_OK);
	assert_int_equal(ledger_store_get(&s, -1, 0, r.ino, r.gen, &back), -EINVAL);
	ledger_store_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_truncated_and_extended),
		cmocka_unit_test(test_fields_checked),
		cmocka_unit_test(test_too_many_chunks),
		cmocka_unit_test_setup_teardown(test_db_round_trip, dbdir_setup, dbdir_teardown),
		cmocka_unit_test_setup_teardown(test_db_corrupt_row, dbdir_setup, dbdir_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
