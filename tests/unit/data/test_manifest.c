/*
 * Unit tests for manifest: parsing coreutils checksum listings (and refusing
 * what is not one), the digests against known vectors, holes, and resolving
 * names beneath a root without leaving it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "data/manifest.h"

/* The digests of "abc" (FIPS 180 and RFC 1321 test vectors), and sha256 of "". */
#define MD5_ABC "900150983cd24fb0d6963f7d28e17f72"
#define SHA1_ABC "a9993e364706816aba3e25717850c26c9cd0d89d"
#define SHA256_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA512_ABC "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee6" \
	"4b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
#define SHA256_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	strcpy(tmpdir, "/tmp/fscrub-manifest-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	(void)state;
	return nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* tmpdir/name, in one of two static buffers (a test needs at most two at once). */
static const char *tmp_path(const char *name)
{
	static char buf[2][256];
	static int which;

	which ^= 1;
	snprintf(buf[which], sizeof(buf[which]), "%s/%s", tmpdir, name);
	return buf[which];
}

static const char *write_manifest(const char *text)
{
	const char *path = tmp_path("m");
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	return path;
}

/* Load text as a manifest; the test fails unless it parses. */
static struct manifest *load_ok(const char *text)
{
	struct manifest *m = NULL;
	char err[256] = "";
	int rc = manifest_load(write_manifest(text), &m, err, sizeof(err));

	if (rc)
		print_error("manifest_load: %d %s\n", rc, err);
	assert_int_equal(rc, 0);
	assert_non_null(m);
	return m;
}

/* Load text expecting rc; err must contain want (and *out stay untouched). */
static void load_fails(const char *text, int rc, const char *want)
{
	static struct manifest untouched;
	struct manifest *m = &untouched;
	char err[256] = "";

	assert_int_equal(manifest_load(write_manifest(text), &m, err, sizeof(err)), rc);
	assert_ptr_equal(m, &untouched);
	if (!strstr(err, want))
		print_error("err '%s' lacks '%s'\n", err, want);
	assert_non_null(strstr(err, want));
}

static void assert_hex(const struct manifest_entry *e, const char *hex)
{
	char out[MANIFEST_HEX_MAX];

	manifest_entry_hex(e, out);
	assert_string_equal(out, hex);
}

static void test_load_sha256(void **state)
{
	struct manifest *m;
	struct stat st;

	(void)state;
	m = load_ok(SHA256_ABC "  ./x\n" SHA256_EMPTY " *bin/y\n");
	assert_int_equal(m->n, 2);
	assert_string_equal(m->source, tmp_path("m"));
	assert_int_equal(stat(m->source, &st), 0);
	assert_int_equal(m->mtime.tv_sec, st.st_mtim.tv_sec);
	assert_int_equal(m->mtime.tv_nsec, st.st_mtim.tv_nsec);

	assert_string_equal(m->v[0].path, "x");
	assert_int_equal(m->v[0].alg, MANIFEST_SHA256);
	assert_int_equal(m->v[0].line, 1);
	assert_int_equal(m->v[0].id.ino, 0);
	assert_int_equal(m->v[0].digest[0], 0xba);
	assert_int_equal(m->v[0].digest[31], 0xad);
	assert_hex(&m->v[0], SHA256_ABC);

	assert_string_equal(m->v[1].path, "bin/y");	/* the '*' is the mode, not the name */
	assert_int_equal(m->v[1].alg, MANIFEST_SHA256);
	assert_int_equal(m->v[1].line, 2);
	assert_hex(&m->v[1], SHA256_EMPTY);
	manifest_free(m);
	manifest_free(NULL);
}

/* dpkg's md5sums, upper-case hex, blank and comment lines, CRLF, every algorithm. */
static void test_load_md5_and_others(void **state)
{
	struct manifest *m;

	(void)state;
	m = load_ok("\n"
		    "900150983CD24FB0D6963F7D28E17F72  usr/bin/a\n"
		    "   \n"
		    "# a comment\n"
		    "  d41d8cd98f00b204e9800998ecf8427e  /usr/share/doc/b\r\n"
		    SHA1_ABC "  .//./c d\n"
		    SHA512_ABC " *e\\f");	/* no final newline; a backslash, unescaped */
	assert_int_equal(m->n, 4);
	assert_string_equal(m->v[0].path, "usr/bin/a");
	assert_int_equal(m->v[0].alg, MANIFEST_MD5);
	assert_int_equal(m->v[0].line, 2);
	assert_hex(&m->v[0], MD5_ABC);
	assert_string_equal(m->v[1].path, "usr/share/doc/b");
	assert_int_equal(m->v[1].alg, MANIFEST_MD5);
	assert_int_equal(m->v[1].line, 5);
	assert_hex(&m->v[1], "d41d8cd98f00b204e9800998ecf8427e");
	assert_string_equal(m->v[2].path, "c d");
	assert_int_equal(m->v[2].alg, MANIFEST_SHA1);
	assert_int_equal(m->v[2].line, 6);
	assert_hex(&m->v[2], SHA1_ABC);
	assert_string_equal(m->v[3].path, "e\\f");
	assert_int_equal(m->v[3].alg, MANIFEST_SHA512);
	assert_int_equal(m->v[3].line, 7);
	assert_hex(&m->v[3], SHA512_ABC);
	assert_string_equal(manifest_alg_name(m->v[3].alg), "sha512");
	assert_int_equal(manifest_alg_size(m->v[3].alg), 64);
	manifest_free(m);
}

/* What sha256sum prints for the name "a<newline>b\c<CR>": a '\' line. */
static void test_load_escaped(void **state)
{
	struct manifest *m;

	(void)state;
	m = load_ok("\\" SHA256_ABC "  ./a\\nb\\\\c\\r\n");
	assert_int_equal(m->n, 1);
	assert_string_equal(m->v[0].path, "a\nb\\c\r");
	assert_hex(&m->v[0], SHA256_ABC);
	manifest_free(m);

	load_fails("\\" SHA256_ABC "  a\\tb\n", -EINVAL, "/m:1: bad escape");
	load_fails("\\" SHA256_ABC "  ab\\\n", -EINVAL, "/m:1: bad escape");
}

static void test_bad_lines(void **state)
{
	const char *bad[] = {
		"hello world\n",
		SHA256_ABC "\n",		/* no name */
		SHA256_ABC "  \n",		/* an empty name */
		SHA256_ABC " x\n",		/* one space: BSD "reversed", not sha256sum's */
		SHA256_ABC "\tx\n",
		SHA256_ABC "x  y\n",		/* not hex up to the space */
		"SHA256 (x) = " SHA256_ABC "\n",	/* --tag */
		"  *x\n",
	};

	(void)state;
	/* Two good lines and a blank one first: the message names line 4. */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[512];

		snprintf(text, sizeof(text), "%s  a\n\n%s  b\n%s%s  c\n", MD5_ABC, MD5_ABC, bad[i],
			 MD5_ABC);
		load_fails(text, -EINVAL, "/m:4: not a checksum line");
	}
	/* A NUL byte in a line: the name would be cut short. */
	const char *path = tmp_path("nul");
	FILE *f = fopen(path, "w");
	struct manifest *m = NULL;
	char err[256] = "";

	assert_non_null(f);
	fwrite(MD5_ABC "  a\0b\n", 1, 32 + 6, f);
	fclose(f);
	assert_int_equal(manifest_load(path, &m, err, sizeof(err)), -EINVAL);
	assert_null(m);
	assert_non_null(strstr(err, ":1: not a checksum line"));
	unlink(path);
}

static void test_unknown_length(void **state)
{
	(void)state;
	load_fails(MD5_ABC "  a\nabcdef  x\n", -EINVAL, "/m:2: unknown digest length (6 hex");
	load_fails(SHA256_ABC "0  x\n", -EINVAL, "/m:1: odd digest length (65 hex");
	load_fails(MD5_ABC MD5_ABC MD5_ABC "  x\n", -EINVAL, "/m:1: unknown digest length (96");
}

static void test_empty(void **state)
{
	(void)state;
	load_fails("", -EINVAL, "/m: no checksum lines");
	load_fails("\n\n  \n# only a comment\n", -EINVAL, "/m: no checksum lines");
}

static void test_unreadable(void **state)
{
	struct manifest *m = NULL;
	char err[256] = "";

	(void)state;
	assert_int_equal(manifest_load(tmp_path("nothing"), &m, err, sizeof(err)), -ENOENT);
	assert_null(m);
	assert_true(strncmp(err, "cannot read ", 12) == 0);
	assert_non_null(strstr(err, "/nothing: No such file or directory"));
	/* A directory opens, and fails at the first read. */
	assert_int_equal(manifest_load(tmpdir, &m, err, sizeof(err)), -EISDIR);
	assert_null(m);
	assert_non_null(strstr(err, "cannot read "));
	/* No message wanted. */
	assert_int_equal(manifest_load(tmp_path("nothing"), &m, NULL, 0), -ENOENT);
}

static void test_digests(void **state)
{
	struct manifest_hash h;
	struct manifest *m;
	char hex[MANIFEST_HEX_MAX];

	(void)state;
	m = load_ok(MD5_ABC "  a\n" SHA1_ABC "  a\n" SHA256_ABC "  a\n" SHA512_ABC "  a\n"
		    SHA256_EMPTY "  a\n");
	assert_int_equal(m->n, 5);
	for (size_t i = 0; i < 4; i++) {
		const struct manifest_entry *e = &m->v[i];
		char want[MANIFEST_HEX_MAX];

		manifest_hash_init(&h, e->alg);
		manifest_hash_update(&h, "a", 1);
		manifest_hash_update(&h, "bc", 2);
		assert_true(manifest_hash_matches(&h, e));
		/* After matches, hex reports the same digest, not a fresh one. */
		manifest_hash_hex(&h, hex);
		manifest_entry_hex(e, want);
		assert_string_equal(hex, want);
	}
	/* "abc" against sha256("") and "ab" against sha256("abc"). */
	manifest_hash_init(&h, MANIFEST_SHA256);
	manifest_hash_update(&h, "abc", 3);
	assert_false(manifest_hash_matches(&h, &m->v[4]));
	manifest_hash_init(&h, MANIFEST_SHA256);
	manifest_hash_update(&h, "ab", 2);
	manifest_hash_hex(&h, hex);
	assert_string_not_equal(hex, SHA256_ABC);
	assert_false(manifest_hash_matches(&h, &m->v[2]));
	/* md5("abc") is not matched by a sha256 entry's leading bytes. */
	manifest_hash_init(&h, MANIFEST_MD5);
	manifest_hash_update(&h, "abc", 3);
	assert_false(manifest_hash_matches(&h, &m->v[2]));
	/* Nothing hashed: sha256 of the empty string. */
	manifest_hash_init(&h, MANIFEST_SHA256);
	assert_true(manifest_hash_matches(&h, &m->v[4]));
	manifest_free(m);
}

/* A hole of 3 MiB + 5 (not a multiple of anything) between data, every algorithm. */
static void test_zeros(void **state)
{
	const size_t len = (3u << 20) + 5;
	uint8_t *zero = calloc(1, len);
	enum manifest_alg all[] = { MANIFEST_MD5, MANIFEST_SHA1, MANIFEST_SHA256, MANIFEST_SHA512 };

	(void)state;
	assert_non_null(zero);
	for (size_t i = 0; i < 4; i++) {
		struct manifest_hash a, b;
		char ha[MANIFEST_HEX_MAX], hb[MANIFEST_HEX_MAX];

		manifest_hash_init(&a, all[i]);
		manifest_hash_update(&a, "x", 1);
		manifest_hash_zeros(&a, len);
		manifest_hash_zeros(&a, 0);
		manifest_hash_update(&a, "y", 1);
		manifest_hash_init(&b, all[i]);
		manifest_hash_update(&b, "x", 1);
		manifest_hash_update(&b, zero, len);
		manifest_hash_update(&b, "y", 1);
		manifest_hash_hex(&a, ha);
		manifest_hash_hex(&b, hb);
		assert_int_equal(strlen(ha), 2 * manifest_alg_size(all[i]));
		assert_string_equal(ha, hb);
	}
	/* One byte short is another digest. */
	struct manifest_hash a, b;
	char ha[MANIFEST_HEX_MAX], hb[MANIFEST_HEX_MAX];

	manifest_hash_init(&a, MANIFEST_SHA256);
	manifest_hash_zeros(&a, len - 1);
	manifest_hash_init(&b, MANIFEST_SHA256);
	manifest_hash_update(&b, zero, len);
	manifest_hash_hex(&a, ha);
	manifest_hash_hex(&b, hb);
	assert_string_not_equal(ha, hb);
	free(zero);
}

static void make_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static uint64_t ino_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return (uint64_t)st.st_ino;
}

/* Whether this kernel (or its seccomp filter) has openat2: RESOLVE_BENEATH stops absolute links. */
static bool have_openat2(void)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH };
	long fd = syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof(how));

	if (fd >= 0)
		close((int)fd);
	return fd >= 0 || errno != ENOSYS;
}

/*
 * A tree in tmpdir/root, and a manifest of names in it: files, a hard
 * link, symlinks (final, through a directory, absolute), a directory, a
 * missing name and "../x", which exists just outside the root.
 */
static void test_resolve(void **state)
{
	char root[256], abs_target[256], text[4096] = "";
	const char *names[] = { "a", "./d/b", "nope", "l", "../x", "dl/b", "d", "/h", "abs/x",
				"d/../a" };
	struct manifest *m;
	bool o2 = have_openat2();
	struct stat st;
	uint64_t ino_a, ino_b, ino_x;
	struct ino_key *inos, ka, kb, kx;
	const struct manifest_entry *const *all;
	size_t n;
	int root_fd;

	(void)state;
	snprintf(root, sizeof(root), "%s/root", tmpdir);
	assert_int_equal(mkdir(root, 0755), 0);
	make_file(tmp_path("x"), "outside");
	make_file(tmp_path("root/a"), "abc");
	assert_int_equal(mkdir(tmp_path("root/d"), 0755), 0);
	make_file(tmp_path("root/d/b"), "b");
	assert_int_equal(symlink("a", tmp_path("root/l")), 0);
	assert_int_equal(symlink("d", tmp_path("root/dl")), 0);
	assert_int_equal(link(tmp_path("root/a"), tmp_path("root/h")), 0);
	snprintf(abs_target, sizeof(abs_target), "%s", tmpdir);	/* holds x */
	assert_int_equal(symlink(abs_target, tmp_path("root/abs")), 0);
	ino_a = ino_of(tmp_path("root/a"));
	ino_b = ino_of(tmp_path("root/d/b"));
	ino_x = ino_of(tmp_path("x"));
	assert_int_equal(lstat(tmp_path("x"), &st), 0);
	ka = (struct ino_key){ (uint64_t)st.st_dev, ino_a };
	kb = (struct ino_key){ (uint64_t)st.st_dev, ino_b };
	kx = (struct ino_key){ (uint64_t)st.st_dev, ino_x };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		strcat(text, SHA256_ABC "  ");
		strcat(text, names[i]);
		strcat(text, "\n");
	}
	m = load_ok(text);
	assert_int_equal(m->n, 10);
	/* Before manifest_resolve nothing is found. */
	assert_null(manifest_find(m, ka));
	inos = manifest_inodes(m, &n);
	assert_non_null(inos);
	assert_int_equal(n, 0);
	free(inos);

	root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(root_fd >= 0);
	assert_int_equal(fstat(root_fd, &st), 0);
	/*
	 * a, d/b, dl/b (a symlinked directory beneath the root), h and d/../a.
	 * Without openat2 the fallback refuses every "..", and cannot tell that
	 * abs/x left the root (x is on the same filesystem).
	 */
	assert_int_equal(manifest_resolve(m, root_fd), 5);
	assert_int_equal(m->v[0].id.dev, (uint64_t)st.st_dev);
	assert_int_equal(m->v[0].id.ino, ino_a);
	assert_int_equal(m->v[1].id.ino, ino_b);
	assert_int_equal(m->v[2].id.ino, 0);	/* missing */
	assert_int_equal(m->v[3].id.ino, 0);	/* a final symlink */
	assert_int_equal(m->v[4].id.ino, 0);	/* ../x escapes the root */
	assert_int_equal(m->v[5].id.ino, ino_b);
	assert_int_equal(m->v[6].id.ino, 0);	/* a directory */
	assert_int_equal(m->v[7].id.ino, ino_a);	/* the hard link */
	assert_int_equal(m->v[8].id.ino, o2 ? 0 : ino_x);	/* an absolute symlink leads out */
	assert_int_equal(m->v[9].id.ino, o2 ? ino_a : 0);

	/* The first entry for an inode, by manifest order. */
	assert_ptr_equal(manifest_find(m, ka), &m->v[0]);
	assert_ptr_equal(manifest_find(m, kb), &m->v[1]);
	assert_null(manifest_find(m, (struct ino_key){ (uint64_t)st.st_dev, 0 }));
	/* Every line of a file, in manifest order: a, the hard link h, d/../a. */
	all = manifest_find_all(m, ka, &n);
	assert_int_equal(n, o2 ? 3 : 2);
	assert_ptr_equal(all[0], &m->v[0]);
	assert_ptr_equal(all[1], &m->v[7]);
	if (o2)
		assert_ptr_equal(all[2], &m->v[9]);
	/*
	 * The same inode number on another st_dev (a btrfs subvolume's file,
	 * or a snapshot's) is another file: none of these lines is about it.
	 */
	assert_null(manifest_find(m, (struct ino_key){ (uint64_t)st.st_dev + 1, ino_a }));
	assert_null(manifest_find_all(m, (struct ino_key){ (uint64_t)st.st_dev + 1, ino_a }, &n));
	assert_int_equal(n, 0);
	if (o2) {
		assert_null(manifest_find(m, kx));
		inos = manifest_inodes(m, &n);
		assert_int_equal(n, 2);
		assert_true(ino_key_eq(inos[0], ino_a < ino_b ? ka : kb));
		assert_true(ino_key_eq(inos[1], ino_a < ino_b ? kb : ka));
		free(inos);
	}
	close(root_fd);
	manifest_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load_sha256),
		cmocka_unit_test(test_load_md5_and_others),
		cmocka_unit_test(test_load_escaped),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test(test_unknown_length),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_unreadable),
		cmocka_unit_test(test_digests),
		cmocka_unit_test(test_zeros),
		cmocka_unit_test(test_resolve),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
