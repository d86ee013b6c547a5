/*
 * manifest: parse a coreutils checksum listing, find its files beneath the
 * mount, and hash file contents with nettle; see manifest.h.
 */
#include "data/manifest.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/sorted.h"
#include "lib/strbuf.h"

static const struct {
	const char *name;
	size_t size;
} algs[] = {
	[MANIFEST_MD5] = { "md5", MD5_DIGEST_SIZE },
	[MANIFEST_SHA1] = { "sha1", SHA1_DIGEST_SIZE },
	[MANIFEST_SHA256] = { "sha256", SHA256_DIGEST_SIZE },
	[MANIFEST_SHA512] = { "sha512", SHA512_DIGEST_SIZE },
};

size_t manifest_alg_size(enum manifest_alg alg)
{
	return (unsigned)alg < sizeof(algs) / sizeof(algs[0]) ? algs[alg].size : 0;
}

const char *manifest_alg_name(enum manifest_alg alg)
{
	return (unsigned)alg < sizeof(algs) / sizeof(algs[0]) ? algs[alg].name : "?";
}

static void to_hex(const uint8_t *d, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * len] = '\0';
}

void manifest_entry_hex(const struct manifest_entry *e, char *out)
{
	to_hex(e->digest, manifest_alg_size(e->alg), out);
}

/* --- parsing --- */

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The algorithm whose digest has nhex hex digits, or -1. */
static int alg_of_length(size_t nhex)
{
	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
		if (2 * algs[i].size == nhex)
			return (int)i;
	return -1;
}

/*
 * Undo coreutils' escaping of a name (a line that starts with '\'):
 * "\\" is a backslash, "\n" a newline, "\r" a CR.  Anything else after a
 * backslash is not something sha256sum writes, so the line is refused
 * rather than guessed at.  Returns a malloc'd string, or NULL.
 */
static char *unescape(const char *s, size_t len)
{
	char *out = xmalloc(len + 1), *o = out;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '\\') {
			c = i + 1 < len ? s[++i] : '\0';
			if (c == 'n')
				c = '\n';
			else if (c == 'r')
				c = '\r';
			else if (c != '\\') {
				free(out);
				return NULL;
			}
		}
		*o++ = c;
	}
	*o = '\0';
	return out;
}

/* The name without its leading "./" and "/": dpkg lists "usr/bin/x", "find ." "./usr/bin/x". */
static const char *relative(const char *p)
{
	for (;;) {
		if (p[0] == '/')
			p++;
		else if (p[0] == '.' && p[1] == '/')
			p += 2;
		else
			return p;
	}
}

static void add_entry(struct manifest *m, size_t *alloc, const struct manifest_entry *e)
{
	if (m->n == *alloc) {
		*alloc = *alloc ? 2 * *alloc : 64;
		m->v = xrealloc(m->v, *alloc * sizeof(*m->v));
	}
	m->v[m->n++] = *e;
}

/*
 * One line (its newline removed) into e.  Returns 1 for an entry, 0 for a
 * line to skip (blank or a comment), or -EINVAL with the message in err.
 */
static int parse_line(const char *src, unsigned lineno, const char *line, size_t len,
		      struct manifest_entry *e, char *err, size_t errlen)
{
	const char *p = line, *end = line + len, *name, *rel;
	bool escaped;
	size_t nhex = 0, name_len;
	int alg;
	char *path;

	/* A CR before the newline is a manifest written on Windows; a CR in a name is escaped. */
	if (end > p && end[-1] == '\r')
		end--;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end || *p == '#')
		return 0;
	if (memchr(p, '\0', (size_t)(end - p)))
		goto not_a_line;
	escaped = *p == '\\';
	p += escaped;
	while (p + nhex < end && hex_value(p[nhex]) >= 0)
		nhex++;
	/* The digest, a space, ' ' or '*' (text or binary: the same on Linux), a name. */
	if (!nhex || end - (p + nhex) < 3 || p[nhex] != ' ' ||
	    (p[nhex + 1] != ' ' && p[nhex + 1] != '*'))
		goto not_a_line;
	name = p + nhex + 2;
	alg = alg_of_length(nhex);
	if (alg < 0)
		return fail(err, errlen, -EINVAL, "%s:%u: %s digest length (%zu hex digits)", src,
			    lineno, nhex % 2 ? "odd" : "unknown", nhex);
	name_len = (size_t)(end - name);
	path = escaped ? unescape(name, name_len) : xstrndup(name, name_len);
	if (!path)
		return fail(err, errlen, -EINVAL, "%s:%u: bad escape in the file name", src,
			    lineno);

	memset(e, 0, sizeof(*e));
	e->alg = (enum manifest_alg)alg;
	for (size_t i = 0; i < nhex / 2; i++)
		e->digest[i] = (uint8_t)(hex_value(p[2 * i]) << 4 | hex_value(p[2 * i + 1]));
	e->line = lineno;
	/* The stripped name moves to the front of its allocation, which the entry owns. */
	rel = relative(path);
	memmove(path, rel, strlen(rel) + 1);
	e->path = path;
	return 1;

not_a_line:
	return fail(err, errlen, -EINVAL, "%s:%u: not a checksum line", src, lineno);
}

static int read_lines(FILE *f, struct manifest *m, char *err, size_t errlen)
{
	struct manifest_entry e;
	size_t alloc = 0, cap = 0;
	unsigned lineno = 0;
	char *line = NULL;
	ssize_t len;
	int rc = 0;

	for (;;) {
		errno = 0;
		len = getline(&line, &cap, f);
		if (len < 0)
			break;
		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		rc = parse_line(m->source, lineno, line, (size_t)len, &e, err, errlen);
		if (rc < 0)
			break;
		if (rc)
			add_entry(m, &alloc, &e);
		rc = 0;
	}
	if (!rc && ferror(f)) {
		rc = errno ? -errno : -EIO;
		fail(err, errlen, rc, "cannot read %s: %s", m->source, strerror(-rc));
	} else if (!rc && !m->n) {
		rc = fail(err, errlen, -EINVAL, "%s: no checksum lines", m->source);
	}
	free(line);
	return rc;
}

int manifest_load(const char *path, struct manifest **out, char *err, size_t errlen)
{
	struct manifest *m;
	struct stat st;
	FILE *f;
	int rc;

	f = fopen(path, "re");
	if (!f || fstat(fileno(f), &st) < 0) {
		rc = -errno;
		if (f)
			fclose(f);
		return fail(err, errlen, rc, "cannot read %s: %s", path, strerror(-rc));
	}
	m = xcalloc(1, sizeof(*m));
	m->source = xstrdup(path);
	m->mtime = st.st_mtim;
	rc = read_lines(f, m, err, errlen);
	fclose(f);
	if (rc < 0) {
		manifest_free(m);
		return rc;
	}
	/* Give back the doubling's slack: a big manifest is kept for the whole scan. */
	m->v = xrealloc(m->v, m->n * sizeof(*m->v));
	*out = m;
	return 0;
}

void manifest_free(struct manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	free(m->by_ino);
	free(m->source);
	free(m);
}

/* --- resolving names to inodes --- */

static bool has_dotdot(const char *path)
{
	for (const char *p = path; *p; p++) {
		if ((p == path || p[-1] == '/') && p[0] == '.' && p[1] == '.' &&
		    (p[2] == '/' || p[2] == '\0'))
			return true;
	}
	return false;
}

/*
 * An O_PATH fd for path beneath root_fd, or -1 with errno.  *no_openat2 is
 * set on the first ENOSYS, so a kernel without openat2 costs one failed
 * call per manifest, not one per entry.
 */
static int open_beneath(int root_fd, const char *path, bool *no_openat2)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS,
	};
	long fd = -1;

	if (!*no_openat2) {
		/*
		 * EAGAIN: a rename during the walk kept the kernel from proving
		 * that a ".." stayed beneath root_fd.  A retry normally succeeds;
		 * four bound the time spent on a tree renamed all the time.
		 */
		for (int tries = 0; tries < 4; tries++) {
			fd = syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
			if (fd >= 0 || errno != EAGAIN)
				break;
		}
		if (fd >= 0 || errno != ENOSYS)
			return (int)fd;
		*no_openat2 = true;
	}
	/* openat alone would follow "..": out of the mount, or through a bind mount's root. */
	if (has_dotdot(path)) {
		errno = EXDEV;
		return -1;
	}
	return openat(root_fd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

/* Where a file is: its key, and the mount it is on (0 where the kernel does not say). */
struct place {
	struct ino_key id;
	uint64_t mnt_id;
	bool is_reg;
};

static int place_of(int fd, struct place *p)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO |
		  STATX_MNT_ID, &stx) < 0)
		return -errno;
	p->id = ino_key_of(&stx);
	p->mnt_id = stx.stx_mask & STATX_MNT_ID ? stx.stx_mnt_id : 0;
	p->is_reg = S_ISREG(stx.stx_mode);
	return 0;
}

/* The key of path if it is a regular file on root's mount, else ino 0. */
static struct ino_key lookup(int root_fd, const struct place *root, const char *path,
			     bool *no_openat2)
{
	int fd = open_beneath(root_fd, path, no_openat2);
	struct place p;
	struct ino_key id = { 0, 0 };

	if (fd < 0)
		return id;
	if (place_of(fd, &p) == 0 && p.is_reg &&
	    (root->mnt_id ? p.mnt_id == root->mnt_id : p.id.dev == root->id.dev))
		id = p.id;
	close(fd);
	return id;
}

/* By (st_dev, inode), then by position in v: the first listed comes first. */
static int cmp_by_ino(const void *a, const void *b)
{
	const struct manifest_entry *x = *(const struct manifest_entry *const *)a;
	const struct manifest_entry *y = *(const struct manifest_entry *const *)b;
	int c = ino_key_cmp(&x->id, &y->id);

	if (c)
		return c;
	return x < y ? -1 : x > y;
}

size_t manifest_resolve(struct manifest *m, int root_fd)
{
	bool no_openat2 = false;
	struct place root = { { 0, 0 }, 0, false };

	free(m->by_ino);
	m->by_ino = NULL;
	m->n_found = 0;
	if (place_of(root_fd, &root) < 0)
		root.id.dev = root.mnt_id = 0;
	for (size_t i = 0; i < m->n; i++) {
		m->v[i].id = root.id.ino ? lookup(root_fd, &root, m->v[i].path, &no_openat2)
					 : (struct ino_key){ 0, 0 };
		m->n_found += m->v[i].id.ino != 0;
	}
	m->by_ino = xmalloc(m->n_found * sizeof(*m->by_ino));
	for (size_t i = 0, j = 0; i < m->n; i++)
		if (m->v[i].id.ino)
			m->by_ino[j++] = &m->v[i];
	sort_items(m->by_ino, m->n_found, sizeof(*m->by_ino), cmp_by_ino);
	return m->n_found;
}

const struct manifest_entry *const *manifest_find_all(const struct manifest *m,
						      struct ino_key id, size_t *n)
{
	size_t lo = 0, hi = m->n_found, end;

	/* The lowest position whose key is >= id: the first entry for it. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ino_key_cmp(&m->by_ino[mid]->id, &id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < m->n_found && ino_key_eq(m->by_ino[end]->id, id); end++)
		;
	*n = id.ino ? end - lo : 0;
	return *n ? (const struct manifest_entry *const *)m->by_ino + lo : NULL;
}

const struct manifest_entry *manifest_find(const struct manifest *m, struct ino_key id)
{
	size_t n;
	const struct manifest_entry *const *v = manifest_find_all(m, id, &n);

	return v ? v[0] : NULL;
}

struct ino_key *manifest_inodes(const struct manifest *m, size_t *n)
{
	struct ino_key *v = xmalloc(m->n_found * sizeof(*v));
	size_t k = 0;

	for (size_t i = 0; i < m->n_found; i++)
		if (!k || !ino_key_eq(v[k - 1], m->by_ino[i]->id))
			v[k++] = m->by_ino[i]->id;
	*n = k;
	return v;
}

/* --- hashing --- */

void manifest_hash_init(struct manifest_hash *h, enum manifest_alg alg)
{
	memset(h, 0, sizeof(*h));
	h->alg = alg;
	switch (alg) {
	case MANIFEST_MD5: md5_init(&h->u.md5); break;
	case MANIFEST_SHA1: sha1_init(&h->u.sha1); break;
	case MANIFEST_SHA256: sha256_init(&h->u.sha256); break;
	case MANIFEST_SHA512: sha512_init(&h->u.sha512); break;
	}
}

void manifest_hash_update(struct manifest_hash *h, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	switch (h->alg) {
	case MANIFEST_MD5: md5_update(&h->u.md5, len, p); break;
	case MANIFEST_SHA1: sha1_update(&h->u.sha1, len, p); break;
	case MANIFEST_SHA256: sha256_update(&h->u.sha256, len, p); break;
	case MANIFEST_SHA512: sha512_update(&h->u.sha512, len, p); break;
	}
}

void manifest_hash_zeros(struct manifest_hash *h, uint64_t len)
{
	/*
	 * 16 KiB: the cost of a call is lost next to hashing 16 KiB, and the
	 * block stays in cache however large the hole.
	 */
	static const uint8_t zeros[16384];

	while (len) {
		size_t chunk = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);

		manifest_hash_update(h, zeros, chunk);
		len -= chunk;
	}
}

/* nettle's *_digest() also resets the context: keep the result for the second caller. */
static void finish(struct manifest_hash *h)
{
	size_t size = manifest_alg_size(h->alg);

	if (h->finished)
		return;
	switch (h->alg) {
	case MANIFEST_MD5: md5_digest(&h->u.md5, size, h->result); break;
	case MANIFEST_SHA1: sha1_digest(&h->u.sha1, size, h->result); break;
	case MANIFEST_SHA256: sha256_digest(&h->u.sha256, size, h->result); break;
	case MANIFEST_SHA512: sha512_digest(&h->u.sha512, size, h->result); break;
	}
	h->finished = true;
}

bool manifest_hash_matches(struct manifest_hash *h, const struct manifest_entry *e)
{
	finish(h);
	return h->alg == e->alg && !memcmp(h->result, e->digest, manifest_alg_size(e->alg));
}

void manifest_hash_hex(struct manifest_hash *h, char *out)
{
	finish(h);
	to_hex(h->result, manifest_alg_size(h->alg), out);
}
