/*
 * outfile: the files fscrub writes its results to; see outfile.h.
 *
 * The name is resolved here link by link (lstat, readlink) rather than by
 * realpath(), for two reasons: a link may point to a file that does not
 * exist yet (it is then created there), and a link in /proc is not a path
 * to follow but a descriptor (/dev/stdout's target is /proc/self/fd/1,
 * whose readlink text is "pipe:[1234]" or the name of a file fscrub's
 * standard output was opened on).
 */
#include "lib/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "lib/strbuf.h"

/* The kernel follows at most 40 links in one lookup (MAXSYMLINKS); so do we. */
#define MAX_LINKS 40

/* What a name resolves to. */
struct target {
	enum outfile_kind kind;
	int fd;			/* OUTFILE_FD */
	struct strbuf final;	/* the name with its links followed */
	bool exists;		/* dev and ino are those of what final names */
	bool chr;		/* ... and it is a character device */
	dev_t dev;
	ino_t ino;
};

static void note_identity(struct target *t, const struct stat *st)
{
	t->exists = true;
	t->chr = S_ISCHR(st->st_mode);
	t->dev = st->st_dev;
	t->ino = st->st_ino;
}

/* The directory part of path: "." for a bare name, "/" for "/name". */
static void dir_of(struct strbuf *out, const char *path)
{
	const char *slash = strrchr(path, '/');

	strbuf_reset(out);
	if (!slash)
		strbuf_addch(out, '.');
	else
		strbuf_add(out, path, slash == path ? 1 : (size_t)(slash - path));
}

/* Is the directory entry path in procfs (a /proc/PID/fd/N magic link)? */
static bool in_proc(const char *path)
{
	struct strbuf dir = STRBUF_INIT;
	struct statfs sfs;
	bool yes;

	dir_of(&dir, path);
	yes = statfs(dir.buf, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC;
	strbuf_release(&dir);
	return yes;
}

/*
 * The kernel's rule for sticky world-writable directories such as /tmp
 * (fs.protected_symlinks, fs.protected_fifos): a link there is followed,
 * and a FIFO there opened by a shell's redirection, only if it belongs to
 * the user or to the directory's owner.  Links resolved here by hand must
 * not get around it (a link planted in /tmp would have root replace what
 * it points to), nor may a FIFO planted under the name receive the report.
 */
static bool trusted_in_dir(const char *path, const struct stat *st)
{
	struct strbuf dir = STRBUF_INIT;
	struct stat dst;
	bool ok;

	if (st->st_uid == geteuid())
		return true;
	dir_of(&dir, path);
	ok = stat(dir.buf, &dst) == 0 &&
	     ((dst.st_mode & (S_ISVTX | S_IWOTH)) != (S_ISVTX | S_IWOTH) ||
	      dst.st_uid == st->st_uid);
	strbuf_release(&dir);
	return ok;
}

static int untrusted(const char *what, struct strbuf *why)
{
	strbuf_addf(why, "it is a %s in a sticky world-writable directory, owned by "
		    "neither this user nor the directory's owner", what);
	return -EACCES;
}

/* Replace the link named by cur with the name it points to. */
static int follow(struct strbuf *cur)
{
	struct strbuf next = STRBUF_INIT;
	size_t size = 128;
	char *buf = NULL;
	ssize_t n;

	do {
		size *= 2;
		buf = xrealloc(buf, size);
		n = readlink(cur->buf, buf, size);
	} while (n >= 0 && (size_t)n == size);
	if (n < 0) {
		int err = -errno;

		free(buf);
		return err;
	}
	if (n == 0 || buf[0] != '/') {
		dir_of(&next, cur->buf);
		strbuf_addch(&next, '/');
	}
	strbuf_add(&next, buf, (size_t)n);
	free(buf);
	strbuf_release(cur);
	*cur = next;
	return 0;
}

/* A link in /proc: fscrub's own descriptor, or a FIFO or character device. */
static int proc_link(struct target *t, struct strbuf *why)
{
	const char *slash = strrchr(t->final.buf, '/');
	const char *base = slash ? slash + 1 : t->final.buf;
	struct stat st, mine;
	char *end;
	long n;

	if (stat(t->final.buf, &st) < 0)
		return -errno;
	note_identity(t, &st);
	errno = 0;
	n = strtol(base, &end, 10);
	if (*base >= '0' && *base <= '9' && !*end && !errno && n <= INT_MAX &&
	    fstat((int)n, &mine) == 0 && mine.st_dev == st.st_dev && mine.st_ino == st.st_ino) {
		t->kind = OUTFILE_FD;
		t->fd = (int)n;
		return 0;
	}
	if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
		t->kind = OUTFILE_DEVICE;
		return 0;
	}
	strbuf_addstr(why, "it is a link in /proc to neither a descriptor of fscrub's, "
		      "a FIFO nor a character device");
	return -EINVAL;
}

/* A regular file or a new one at t->final: its directory must take a file. */
static int replace_in_dir(struct target *t, struct strbuf *why)
{
	struct strbuf dir = STRBUF_INIT;
	int err = 0;

	t->kind = OUTFILE_REPLACE;
	if (t->final.buf[t->final.len - 1] == '/') {
		strbuf_addstr(why, "it names a directory");
		return -EISDIR;
	}
	dir_of(&dir, t->final.buf);
	if (access(dir.buf, W_OK | X_OK) < 0) {
		err = -errno;
		strbuf_addf(why, "cannot create a file in '%s': %s", dir.buf, strerror(errno));
	}
	strbuf_release(&dir);
	return err;
}

static int classify_type(struct target *t, const struct stat *st, struct strbuf *why)
{
	note_identity(t, st);
	if (S_ISREG(st->st_mode))
		return replace_in_dir(t, why);
	if (S_ISFIFO(st->st_mode) && !trusted_in_dir(t->final.buf, st))
		return untrusted("FIFO", why);
	if (S_ISFIFO(st->st_mode) || S_ISCHR(st->st_mode)) {
		t->kind = OUTFILE_DEVICE;
		return 0;
	}
	strbuf_addstr(why, S_ISDIR(st->st_mode) ? "it is a directory" :
		      S_ISBLK(st->st_mode) ? "it is a block device" :
		      S_ISSOCK(st->st_mode) ? "it is a socket" : "it is not a file");
	return S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
}

/* Decide how name is written (see outfile.h); t->final must be empty. */
static int classify(const char *name, struct target *t, struct strbuf *why)
{
	struct stat st;
	int hops = 0, err;

	if (!strcmp(name, "-")) {
		t->kind = OUTFILE_FD;
		t->fd = STDOUT_FILENO;
		if (fstat(STDOUT_FILENO, &st) == 0)
			note_identity(t, &st);
		return 0;
	}
	if (!*name) {
		strbuf_addstr(why, "an empty name");
		return -ENOENT;
	}
	strbuf_addstr(&t->final, name);
	for (;;) {
		if (lstat(t->final.buf, &st) < 0)
			return errno == ENOENT ? replace_in_dir(t, why) : -errno;
		if (!S_ISLNK(st.st_mode))
			return classify_type(t, &st, why);
		if (in_proc(t->final.buf))
			return proc_link(t, why);
		if (!trusted_in_dir(t->final.buf, &st))
			return untrusted("symlink", why);
		if (++hops > MAX_LINKS)
			return -ELOOP;
		if ((err = follow(&t->final)) < 0)
			return err;
	}
}

int outfile_check(const char *name, struct strbuf *why)
{
	struct target t = { .final = STRBUF_INIT };
	size_t len = why->len;
	int err = classify(name, &t, why);

	if (err && why->len == len)
		strbuf_addstr(why, strerror(-err));
	strbuf_release(&t.final);
	return err;
}

int outfile_target(const char *name, struct strbuf *target)
{
	struct target t = { .final = STRBUF_INIT };
	struct strbuf why = STRBUF_INIT;
	int err = classify(name, &t, &why);

	if (!err && t.kind != OUTFILE_FD)
		strbuf_addstr(target, t.final.buf);
	strbuf_release(&t.final);
	strbuf_release(&why);
	return err ? err : (int)t.kind;
}

bool outfile_same(const char *a, const char *b)
{
	struct target ta = { .final = STRBUF_INIT }, tb = { .final = STRBUF_INIT };
	struct strbuf why = STRBUF_INIT;
	bool same = false;

	if (classify(a, &ta, &why) == 0 && classify(b, &tb, &why) == 0) {
		if (ta.exists && tb.exists)
			same = ta.dev == tb.dev && ta.ino == tb.ino &&
			       (!ta.chr || (ta.kind == OUTFILE_FD && tb.kind == OUTFILE_FD));
		else if (ta.kind == OUTFILE_REPLACE && tb.kind == OUTFILE_REPLACE)
			same = !strcmp(ta.final.buf, tb.final.buf);
	}
	strbuf_release(&ta.final);
	strbuf_release(&tb.final);
	strbuf_release(&why);
	return same;
}

/* A FIFO or character device, still one when opened. */
static int open_device(const char *name)
{
	int fd = open(name, O_WRONLY | O_NOCTTY | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode))) {
		close(fd);
		return -EINVAL;		/* replaced since it was looked at */
	}
	return fd;
}

/* FINAL.tmp.PID, created new (a link planted there is not followed). */
static int create_tmp(const char *final, char **tmp)
{
	struct strbuf sb = STRBUF_INIT;
	int fd = -1;

	strbuf_addf(&sb, "%s.tmp.%ld", final, (long)getpid());
	for (int tries = 0; tries < 2 && fd < 0; tries++) {
		fd = open(sb.buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd < 0 && errno != EEXIST)
			break;
		if (fd < 0)
			unlink(sb.buf);		/* left by an earlier run with this PID */
	}
	if (fd < 0) {
		fd = -errno;
		strbuf_release(&sb);
		return fd;
	}
	*tmp = strbuf_detach(&sb);
	return fd;
}

static int open_target(const char *name, struct target *t, char **tmp)
{
	int fd;

	switch (t->kind) {
	case OUTFILE_FD:
		fd = fcntl(t->fd, F_DUPFD_CLOEXEC, 3);
		return fd < 0 ? -errno : fd;
	case OUTFILE_DEVICE:
		return open_device(name);
	case OUTFILE_REPLACE:
	default:
		return create_tmp(t->final.buf, tmp);
	}
}

int outfile_open(struct outfile *o, const char *name)
{
	struct target t = { .final = STRBUF_INIT };
	struct strbuf why = STRBUF_INIT;
	char *tmp = NULL;
	int fd, err;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	err = classify(name, &t, &why);
	strbuf_release(&why);
	fflush(stdout);
	fflush(stderr);
	fd = err ? err : open_target(name, &t, &tmp);
	if (fd >= 0 && !(o->f = fdopen(fd, "w"))) {
		err = -errno;
		close(fd);
		if (tmp)
			unlink(tmp);
		fd = err;
	}
	if (fd < 0) {
		free(tmp);
		strbuf_release(&t.final);
		return fd;
	}
	o->kind = t.kind;
	o->fd = t.fd;
	o->tmp = tmp;
	o->final = t.kind == OUTFILE_REPLACE ? strbuf_detach(&t.final) : NULL;
	strbuf_release(&t.final);
	return 0;
}

bool outfile_is_stdout(const struct outfile *o)
{
	return o->kind == OUTFILE_FD && o->fd == STDOUT_FILENO;
}

int outfile_close(struct outfile *o, int err)
{
	if (!o->f)
		return err;
	if (fflush(o->f) == EOF && !err)
		err = errno ? -errno : -EIO;
	if (o->kind == OUTFILE_REPLACE && !err && fsync(fileno(o->f)) < 0)
		err = -errno;
	if (fclose(o->f) == EOF && !err)
		err = errno ? -errno : -EIO;
	if (o->kind == OUTFILE_REPLACE) {
		if (!err && rename(o->tmp, o->final) < 0)
			err = -errno;
		if (err)
			unlink(o->tmp);
	}
	free(o->final);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	return err;
}
