/* Unit tests for names.c: classification, escaping, duplicate set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lib/names.h"

static void expect_escape(const char *in, size_t len, const char *want)
{
	struct strbuf sb = STRBUF_INIT;

	names_escape(&sb, in, len);
	assert_string_equal(sb.buf, want);
	strbuf_release(&sb);
}

static void test_escape_plain_and_utf8(void **state)
{
	(void)state;
	expect_escape("hello world", 11, "hello world");
	expect_escape("caf\xc3\xa9", 5, "caf\xc3\xa9");
	expect_escape("\xe6\x97\xa5\xe6\x9c\xac", 6, "\xe6\x97\xa5\xe6\x9c\xac");
	expect_escape("\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80");
}

static void test_escape_controls(void **state)
{
	(void)state;
	expect_escape("a\nb", 3, "a\\nb");
	expect_escape("a\tb\r", 4, "a\\tb\\r");
	expect_escape("back\\slash", 10, "back\\\\slash");
	expect_escape("\x01\x1b[31m", 6, "\\x01\\x1b[31m");
	expect_escape("del\x7f", 4, "del\\x7f");
	/* C1 control U+0085 (NEL) is escaped byte by byte */
	expect_escape("\xc2\x85", 2, "\\xc2\\x85");
}

static void test_escape_invalid_utf8(void **state)
{
	(void)state;
	expect_escape("\xff", 1, "\\xff");
	expect_escape("a\xc3", 2, "a\\xc3");		/* truncated sequence */
	expect_escape("\xc0\xaf", 2, "\\xc0\\xaf");	/* overlong '/' */
	expect_escape("\xed\xa0\x80", 3, "\\xed\\xa0\\x80");	/* surrogate */
	expect_escape("\xf4\x90\x80\x80", 4, "\\xf4\\x90\\x80\\x80");	/* > U+10FFFF */
	/* an escaped name never contains a raw newline or a raw byte >= 0x80 that is invalid */
	char all[255];
	for (int i = 0; i < 255; i++)
		all[i] = (char)(i + 1);
	struct strbuf sb = STRBUF_INIT;
	names_escape(&sb, all, sizeof(all));
	assert_null(memchr(sb.buf, '\n', sb.len));
	assert_null(memchr(sb.buf, '\x1b', sb.len));
	strbuf_release(&sb);
}

/* The flags that say something; NAME_NON_ASCII is information. */
static unsigned classify(const char *name, size_t len)
{
	return names_classify(name, len) & ~(unsigned)NAME_NON_ASCII;
}

static void test_classify(void **state)
{
	(void)state;
	assert_int_equal(names_classify("ok", 2), 0);
	assert_int_equal(names_classify("caf\xc3\xa9", 5), NAME_NON_ASCII);
	assert_int_equal(names_classify("", 0), NAME_EMPTY);
	assert_int_equal(names_classify("a/b", 3), NAME_SLASH);
	assert_int_equal(names_classify("a\nb", 3), NAME_CONTROL);
	assert_int_equal(classify("\xff", 1), NAME_BAD_UTF8);
	assert_int_equal(classify("\xff\x01", 2), NAME_BAD_UTF8 | NAME_CONTROL);
	assert_int_equal(classify("\xc2\x85", 2), NAME_CONTROL);
}

static void test_classify_deceptive(void **state)
{
	(void)state;
	/* bidi: U+202E RLO, U+2066 LRI; not the marks LRM/RLM (invisible) */
	assert_int_equal(classify("gnp\xe2\x80\xae.exe", 10), NAME_BIDI);
	assert_int_equal(classify("a\xe2\x81\xa6" "b", 5), NAME_BIDI);
	assert_int_equal(classify("a\xe2\x80\x8f" "b", 5), NAME_INVISIBLE);
	/* zero width space, word joiner, BOM, soft hyphen, Hangul filler */
	assert_int_equal(classify("pay\xe2\x80\x8bpal", 9), NAME_INVISIBLE);
	assert_int_equal(classify("a\xe2\x81\xa0", 4), NAME_INVISIBLE);
	assert_int_equal(classify("\xef\xbb\xbf" "a", 4), NAME_INVISIBLE);
	assert_int_equal(classify("a\xc2\xad" "b", 4), NAME_INVISIBLE);
	assert_int_equal(classify("\xe3\x85\xa4", 3), NAME_INVISIBLE);
	/* ZWJ between ASCII or at an end: invisible; in an emoji sequence: not */
	assert_int_equal(classify("pay\xe2\x80\x8dpal", 9), NAME_INVISIBLE);
	assert_int_equal(classify("\xf0\x9f\x98\x80\xe2\x80\x8d", 7), NAME_INVISIBLE);
	assert_int_equal(classify("\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9", 11), 0);
	/* ZWNJ in Persian (U+0645 U+06CC ZWNJ U+062E) */
	assert_int_equal(classify("\xd9\x85\xdb\x8c\xe2\x80\x8c\xd8\xae", 9), 0);
	/* VS16 after an emoji, after ASCII, and a keycap "1<FE0F><20E3>" */
	assert_int_equal(classify("\xe2\x9d\xa4\xef\xb8\x8f", 6), 0);
	assert_int_equal(classify("a\xef\xb8\x8f", 4), NAME_INVISIBLE);
	assert_int_equal(classify("1\xef\xb8\x8f\xe2\x83\xa3", 7), 0);
	/* a subdivision flag: black flag, tags g b s c t, cancel tag */
	assert_int_equal(classify("\xf0\x9f\x8f\xb4\xf3\xa0\x81\xa7\xf3\xa0\x81\xa2"
				  "\xf3\xa0\x81\xb3\xf3\xa0\x81\xa3\xf3\xa0\x81\xb4"
				  "\xf3\xa0\x81\xbf", 28), 0);
	assert_int_equal(classify("a\xf3\xa0\x81\xa7", 5), NAME_INVISIBLE);
	/* option-like */
	assert_int_equal(classify("-rf", 3), NAME_OPTION);
	assert_int_equal(classify("a-b", 3), 0);
	/* Japanese, Cyrillic, Arabic, emoji: nothing */
	assert_int_equal(classify("\xe6\x97\xa5\xe6\x9c\xac", 6), 0);
	assert_int_equal(classify("\xd1\x84\xd0\xb0\xd0\xb9\xd0\xbb", 8), 0);
	assert_int_equal(classify("\xd9\x85\xd9\x84\xd9\x81", 6), 0);
	assert_int_equal(classify("\xf0\x9f\x98\x80", 4), 0);
}

static void test_escape_deceptive(void **state)
{
	(void)state;
	expect_escape("gnp\xe2\x80\xae.exe", 10, "gnp\\xe2\\x80\\xae.exe");
	expect_escape("a\xe2\x80\x8b" "b", 5, "a\\xe2\\x80\\x8bb");
	expect_escape("\xef\xbb\xbf", 3, "\\xef\\xbb\\xbf");
	assert_true(names_cp_needs_escape(0x202e));
	assert_true(names_cp_needs_escape(0x200d));
	assert_false(names_cp_needs_escape(0x00e9));
	assert_false(names_cp_needs_escape(0x1f600));
}

static void test_name_set_contains(void **state)
{
	struct name_set set;

	(void)state;
	name_set_init(&set);
	for (uint64_t h = 1; h < 1000; h++)
		name_set_insert(&set, h * 0x9e3779b97f4a7c15ULL);
	for (uint64_t h = 1; h < 1000; h++)
		assert_true(name_set_contains(&set, h * 0x9e3779b97f4a7c15ULL));
	assert_false(name_set_contains(&set, 12345));
	name_set_release(&set);
}

static void test_name_set(void **state)
{
	struct name_set set;
	char name[32];

	(void)state;
	name_set_init(&set);
	/* grows past its initial capacity without losing members */
	for (int i = 0; i < 10000; i++) {
		int n = snprintf(name, sizeof(name), "file-%d", i);
		assert_false(name_set_insert(&set, name_hash(name, (size_t)n)));
	}
	for (int i = 0; i < 10000; i += 97) {
		int n = snprintf(name, sizeof(name), "file-%d", i);
		assert_true(name_set_insert(&set, name_hash(name, (size_t)n)));
	}
	name_set_reset(&set);
	assert_false(name_set_insert(&set, name_hash("file-1", 6)));
	assert_true(name_set_insert(&set, name_hash("file-1", 6)));
	name_set_release(&set);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape_plain_and_utf8),
		cmocka_unit_test(test_escape_controls),
		cmocka_unit_test(test_escape_invalid_utf8),
		cmocka_unit_test(test_classify),
		cmocka_unit_test(test_classify_deceptive),
		cmocka_unit_test(test_escape_deceptive),
		cmocka_unit_test(test_name_set_contains),
		cmocka_unit_test(test_name_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
