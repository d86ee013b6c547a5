/*
 * Unit tests for outfile: what a --json/--metrics name is decides how it
 * is written, and nothing but a regular file is ever replaced.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/outfile.h"
#include "lib/strbuf.h"

static char dir[] = "/tmp/fscrub-outfile-XXXXXX";

static const char *in_dir(const char *name)
{
	static char buf[4][256];
	static int next;
	char *p = buf[next++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", dir, name);
	return p;
}

static char *slurp(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static int check(const char *name, const char *why_part)
{
	struct strbuf why = STRBUF_INIT;
	int err = outfile_check(name, &why);

	if (why_part)
		assert_non_null(strstr(why.buf, why_part));
	strbuf_release(&why);
	return err;
}

static void test_check(void **state)
{
	(void)state;
	assert_int_equal(check(in_dir("new"), NULL), 0);
	assert_int_equal(check("/dev/null", NULL), 0);
	assert_int_equal(check("-", NULL), 0);
	assert_int_equal(check(dir, "it is a directory"), -EISDIR);
	assert_int_equal(check(in_dir("new/"), "it names a directory"), -EISDIR);
	assert_int_equal(check(in_dir("missing/x"), "No such file or directory"), -ENOENT);
	assert_int_equal(check("", "an empty name"), -ENOENT);
	assert_int_equal(symlink("loop", in_dir("loop")), 0);
	assert_int_equal(check(in_dir("loop"), "Too many levels"), -ELOOP);
	assert_int_equal(mkfifo(in_dir("fifo"), 0600), 0);
	assert_int_equal(check(in_dir("fifo"), NULL), 0);
}

static void write_all(const char *name, const char *text, int err)
{
	struct outfile o;

	assert_int_equal(outfile_open(&o, name), 0);
	fputs(text, o.f);
	assert_int_equal(outfile_close(&o, err), err);
}

static void test_replace_through_links(void **state)
{
	struct stat st;

	(void)state;
	assert_int_equal(mkdir(in_dir("sub"), 0700), 0);
	assert_int_equal(symlink("sub/target", in_dir("rel")), 0);
	assert_int_equal(symlink(in_dir("rel"), in_dir("abs")), 0);
	write_all(in_dir("abs"), "one\n", 0);		/* a dangling link: created */
	assert_string_equal(slurp(in_dir("sub/target")), "one\n");
	write_all(in_dir("abs"), "two\n", 0);		/* replaced */
	assert_string_equal(slurp(in_dir("sub/target")), "two\n");
	assert_int_equal(lstat(in_dir("abs"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(lstat(in_dir("rel"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	/* an error: the file stays as it was, no temporary file is left */
	write_all(in_dir("abs"), "three\n", -EIO);
	assert_string_equal(slurp(in_dir("sub/target")), "two\n");
	assert_int_equal(rmdir(in_dir("sub")), -1);	/* not empty: target only */
	assert_int_equal(unlink(in_dir("sub/target")), 0);
	assert_int_equal(rmdir(in_dir("sub")), 0);
}

static void test_in_place(void **state)
{
	struct outfile o;
	struct stat st;
	char buf[16] = { 0 };
	int rd;

	(void)state;
	write_all("/dev/null", "nothing\n", 0);
	assert_int_equal(stat("/dev/null", &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	/* a FIFO with a reader already there: written in place */
	rd = open(in_dir("fifo"), O_RDONLY | O_NONBLOCK);
	assert_true(rd >= 0);
	write_all(in_dir("fifo"), "piped\n", 0);
	assert_int_equal(read(rd, buf, sizeof(buf) - 1), 6);
	assert_string_equal(buf, "piped\n");
	close(rd);
	assert_int_equal(lstat(in_dir("fifo"), &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
	/* "-" and /dev/stdout are standard output */
	assert_int_equal(outfile_open(&o, "-"), 0);
	assert_true(outfile_is_stdout(&o));
	assert_int_equal(outfile_close(&o, 0), 0);
	assert_int_equal(outfile_open(&o, "/dev/stdout"), 0);
	assert_true(outfile_is_stdout(&o));
	assert_int_equal(outfile_close(&o, 0), 0);
}

static void test_same(void **state)
{
	(void)state;
	assert_true(outfile_same("-", "/dev/stdout"));
	assert_true(outfile_same("-", "/proc/self/fd/1"));
	assert_true(outfile_same(in_dir("x"), in_dir("x")));
	assert_true(outfile_same(in_dir("fifo"), in_dir("fifo")));
	assert_false(outfile_same(in_dir("x"), in_dir("y")));
	assert_false(outfile_same("/dev/null", "/dev/null"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_replace_through_links),
		cmocka_unit_test(test_in_place),
		cmocka_unit_test(test_same),
	};
	int ret;

	if (!mkdtemp(dir))
		return 1;
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(in_dir("loop"));
	unlink(in_dir("fifo"));
	unlink(in_dir("rel"));
	unlink(in_dir("abs"));
	rmdir(dir);
	return ret;
}
