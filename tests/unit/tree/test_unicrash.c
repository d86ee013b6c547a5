/* Unit tests for unicrash.c: keys, comparison, mixed scripts, the two passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "tree/unicrash.h"

#define CYR_A "\xd0\xb0"	/* U+0430, looks like 'a' */
#define PAYPAL_CYR "p" CYR_A "yp" CYR_A "l"
#define RESUME_NFC "r\xc3\xa9sum\xc3\xa9"
#define RESUME_NFD "re\xcc\x81sume\xcc\x81"

static int setup(void **state)
{
	(void)state;
	return unicrash_setup();
}

static void keys_of(const char *s, bool casefold, uint64_t keys[UNICRASH_NR_KEYS])
{
	assert_int_equal(unicrash_keys(s, strlen(s), names_classify(s, strlen(s)), casefold,
				       keys), 0);
}

/* The ASCII path (no ICU) gives the keys ICU gives. */
static void test_ascii_path_matches_icu(void **state)
{
	static const char *samples[] = {
		"modern", "rnodern", "Makefile", "makefile", "file1", "filel", "I0l|",
		"a.b-c_d e", "WWW", "vvvv", "\"quoted\"", "`tick'", "x~y^z",
	};
	char one[2] = { 0, 0 };

	(void)state;
	for (int c = 1; c < 128; c++) {
		uint64_t fast[UNICRASH_NR_KEYS], icu[UNICRASH_NR_KEYS];

		if (c == '/')
			continue;
		one[0] = (char)c;
		assert_int_equal(unicrash_keys(one, 1, 0, true, fast), 0);
		assert_int_equal(unicrash_keys(one, 1, NAME_NON_ASCII, true, icu), 0);
		assert_memory_equal(fast, icu, sizeof(fast));
	}
	for (size_t i = 0; i < sizeof(samples) / sizeof(*samples); i++) {
		uint64_t fast[UNICRASH_NR_KEYS], icu[UNICRASH_NR_KEYS];
		size_t len = strlen(samples[i]);

		assert_int_equal(unicrash_keys(samples[i], len, 0, true, fast), 0);
		assert_int_equal(unicrash_keys(samples[i], len, NAME_NON_ASCII, true, icu), 0);
		assert_memory_equal(fast, icu, sizeof(fast));
	}
}

static void test_keys(void **state)
{
	uint64_t a[UNICRASH_NR_KEYS], b[UNICRASH_NR_KEYS];

	(void)state;
	keys_of(RESUME_NFC, false, a);
	keys_of(RESUME_NFD, false, b);
	assert_true(a[UNICRASH_KEY_NFKC] == b[UNICRASH_KEY_NFKC]);
	assert_int_equal(a[UNICRASH_KEY_FOLD], 0);
	keys_of("paypal", false, a);
	keys_of(PAYPAL_CYR, false, b);
	assert_true(a[UNICRASH_KEY_NFKC] != b[UNICRASH_KEY_NFKC]);
	assert_true(a[UNICRASH_KEY_SKELETON] == b[UNICRASH_KEY_SKELETON]);
	keys_of("Makefile", true, a);
	keys_of("makefile", true, b);
	assert_true(a[UNICRASH_KEY_FOLD] == b[UNICRASH_KEY_FOLD]);
	assert_true(a[UNICRASH_KEY_NFKC] != b[UNICRASH_KEY_NFKC]);
	/* tags keep the keys of one string apart */
	keys_of("x", false, a);
	assert_true(a[UNICRASH_KEY_NFKC] != a[UNICRASH_KEY_SKELETON]);
}

static enum unicrash_kind cmp(const char *a, const char *b, bool casefold)
{
	return unicrash_compare(a, strlen(a), b, strlen(b), casefold);
}

static void test_compare(void **state)
{
	(void)state;
	assert_int_equal(cmp("paypal", PAYPAL_CYR, false), UNICRASH_CONFUSABLE);
	assert_int_equal(cmp("cop", "\xd1\x81\xd0\xbe\xd1\x80", false), UNICRASH_CONFUSABLE);
	assert_int_equal(cmp("modern", "rnodern", false), UNICRASH_CONFUSABLE);
	assert_int_equal(cmp(RESUME_NFC, RESUME_NFD, false), UNICRASH_NFC);
	assert_int_equal(cmp("\xef\xac\x81le", "file", false), UNICRASH_NFKC);
	assert_int_equal(cmp("Makefile", "makefile", false), UNICRASH_NONE);
	assert_int_equal(cmp("Makefile", "makefile", true), UNICRASH_CASEFOLD);
	assert_int_equal(cmp(RESUME_NFC, RESUME_NFD, true), UNICRASH_CASEFOLD);
	assert_int_equal(cmp("same", "same", true), UNICRASH_NONE);
	assert_int_equal(cmp("file", "fine", false), UNICRASH_NONE);
}

static bool mixed(const char *s)
{
	return unicrash_mixed_script(s, strlen(s));
}

static void test_mixed_script(void **state)
{
	(void)state;
	assert_true(mixed(PAYPAL_CYR));
	assert_true(mixed("\xce\xb1lpha"));		/* Greek alpha + Latin */
	assert_false(mixed("paypal"));
	assert_false(mixed("\xd0\xbe\xd1\x82\xd1\x87\xd1\x91\xd1\x82.pdf"));	/* отчёт.pdf */
	assert_false(mixed("\xd0\xb4\xd0\xbe\xd0\xba"));	/* док */
	/* 日本語のファイル.txt: Han, Hiragana, Katakana, and Latin after the dot */
	assert_false(mixed("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x95"
			   "\xe3\x82\xa1\xe3\x82\xa4\xe3\x83\xab.txt"));
	assert_false(mixed("\xd9\x85\xd9\x84\xd9\x81"));	/* ملف */
	assert_false(mixed("\xf0\x9f\x98\x80\xf0\x9f\x8e\x89"));	/* 😀🎉 */
	assert_false(mixed("caf\xc3\xa9"));
}

struct seen {
	int nr;
	enum unicrash_kind kinds[8];
	char a[8][32], b[8][32];
};

static void record(void *arg, enum unicrash_kind kind, const struct unicrash_member *a,
		   const struct unicrash_member *b)
{
	struct seen *s = arg;

	assert_true(s->nr < 8);
	s->kinds[s->nr] = kind;
	snprintf(s->a[s->nr], 32, "%s", a->name);
	snprintf(s->b[s->nr], 32, "%s", b->name);
	s->nr++;
}

/* The two passes: each pair once, in the group of its strongest kind. */
static void test_two_passes(void **state)
{
	static const char *names[] = {
		"paypal", "other", RESUME_NFC, "x", RESUME_NFD, PAYPAL_CYR, "Makefile",
		"makefile",
	};
	const size_t nr = sizeof(names) / sizeof(*names);
	struct unicrash_set us;
	struct unicrash_members m = { 0 };
	struct seen seen = { 0 };
	uint64_t keys[UNICRASH_NR_KEYS];
	bool hit = false;

	(void)state;
	unicrash_set_init(&us);
	unicrash_set_reset(&us, false);
	for (size_t i = 0; i < nr; i++) {
		keys_of(names[i], us.casefold, keys);
		hit |= unicrash_set_add(&us, keys);
	}
	assert_true(hit);
	/* NFC/NFD collide under NFKC and skeleton; paypal under skeleton */
	assert_int_equal(us.nr_collided, 3);
	for (size_t i = 0; i < nr; i++) {
		keys_of(names[i], us.casefold, keys);
		unicrash_gather(&m, &us, names[i], strlen(names[i]), keys, i);
	}
	assert_int_equal(m.nr, 6);
	unicrash_report(&m, false, record, &seen);
	assert_int_equal(seen.nr, 2);
	for (int i = 0; i < seen.nr; i++) {
		if (seen.kinds[i] == UNICRASH_NFC) {
			assert_string_equal(seen.a[i], RESUME_NFC);
			assert_string_equal(seen.b[i], RESUME_NFD);
		} else {
			assert_int_equal(seen.kinds[i], UNICRASH_CONFUSABLE);
			assert_string_equal(seen.a[i], "paypal");
			assert_string_equal(seen.b[i], PAYPAL_CYR);
		}
	}
	unicrash_members_release(&m);

	/* casefolded: Makefile/makefile and the résumés are one name each */
	memset(&seen, 0, sizeof(seen));
	unicrash_set_reset(&us, true);
	for (size_t i = 0; i < nr; i++) {
		keys_of(names[i], us.casefold, keys);
		unicrash_set_add(&us, keys);
	}
	for (size_t i = 0; i < nr; i++) {
		keys_of(names[i], us.casefold, keys);
		unicrash_gather(&m, &us, names[i], strlen(names[i]), keys, i);
	}
	unicrash_report(&m, true, record, &seen);
	assert_int_equal(seen.nr, 3);
	int casefold = 0;
	for (int i = 0; i < seen.nr; i++)
		casefold += seen.kinds[i] == UNICRASH_CASEFOLD;
	assert_int_equal(casefold, 2);
	unicrash_members_release(&m);
	unicrash_set_release(&us);
}

/* A set of many distinct ASCII names: no collision. */
static void test_no_false_collision(void **state)
{
	struct unicrash_set us;
	uint64_t keys[UNICRASH_NR_KEYS];
	char name[32];

	(void)state;
	unicrash_set_init(&us);
	unicrash_set_reset(&us, false);
	for (int i = 0; i < 20000; i++) {
		int n = snprintf(name, sizeof(name), "file-%d.c", i);

		assert_int_equal(unicrash_keys(name, (size_t)n, 0, false, keys), 0);
		assert_false(unicrash_set_add(&us, keys));
	}
	unicrash_set_release(&us);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ascii_path_matches_icu),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_mixed_script),
		cmocka_unit_test(test_two_passes),
		cmocka_unit_test(test_no_false_collision),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
