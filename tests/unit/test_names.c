/* Unit tests for names.c: classification, escaping, duplicate set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "names.h"

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

static void test_classify(void **state)
{
	(void)state;
	assert_int_equal(names_classify("ok", 2), 0);
	assert_int_equal(names_classify("caf\xc3\xa9", 5), 0);
	assert_int_equal(names_classify("", 0), NAME_EMPTY);
	assert_int_equal(names_classify("a/b", 3), NAME_SLASH);
	assert_int_equal(names_classify("a\nb", 3), NAME_CONTROL);
	assert_int_equal(names_classify("\xff", 1), NAME_BAD_UTF8);
	assert_int_equal(names_classify("\xff\x01", 2), NAME_BAD_UTF8 | NAME_CONTROL);
	assert_int_equal(names_classify("\xc2\x85", 2), NAME_CONTROL);
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
		cmocka_unit_test(test_name_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
