/*
 * xattrs: extended attribute checks; see xattrs.h.
 */
#include "tree/xattrs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "tree/backend_core.h"
#include "report/checks.h"
#include "data/ledger_store.h"
#include "tree/name_check.h"
#include "lib/names.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

/* Where to read attributes: an open descriptor, or a path not to follow. */
struct xattr_src {
	int fd;			/* >= 0: read through it */
	const char *longpath;	/* else: "/proc/self/fd/DIRFD/NAME" */
};

static ssize_t src_list(const struct xattr_src *s, char *buf, size_t size)
{
	return s->fd >= 0 ? flistxattr(s->fd, buf, size) : llistxattr(s->longpath, buf, size);
}

static ssize_t src_get(const struct xattr_src *s, const char *name, void *buf, size_t size)
{
	return s->fd >= 0 ? fgetxattr(s->fd, name, buf, size)
			  : lgetxattr(s->longpath, name, buf, size);
}

void xattr_buf_init(struct xattr_buf *xb)
{
	xb->names_size = 4096;
	xb->names = xmalloc(xb->names_size);
	xb->value_size = 4096;
	xb->value = xmalloc(xb->value_size);
}

void xattr_buf_release(struct xattr_buf *xb)
{
	free(xb->names);
	free(xb->value);
}

static bool xattr_unsupported(int err)
{
	return err == ENOTSUP || err == EOPNOTSUPP || err == ENOSYS;
}

/* Grow-and-retry listxattr; returns the list length or a negative errno. */
static ssize_t list_names(const struct xattr_src *s, struct xattr_buf *xb)
{
	/* Attributes can be added between the probe and the read: retry a few times. */
	for (int tries = 0; tries < 8; tries++) {
		ssize_t n = src_list(s, xb->names, xb->names_size);

		if (n >= 0)
			return n;
		if (errno != ERANGE)
			return -errno;
		n = src_list(s, NULL, 0);
		if (n < 0)
			return -errno;
		xb->names_size = (size_t)n + 256;
		xb->names = xrealloc(xb->names, xb->names_size);
	}
	return -ERANGE;
}

enum value_result { VALUE_OK, VALUE_GONE, VALUE_SIZE, VALUE_ERROR };

/* Size one value, then read it; *err gets the errno for VALUE_ERROR. */
static enum value_result read_value(const struct xattr_src *s, struct xattr_buf *xb,
				    const char *name, int *err, ssize_t *probe, ssize_t *got)
{
	*probe = src_get(s, name, NULL, 0);
	if (*probe < 0) {
		*err = errno;
		return errno == ENODATA ? VALUE_GONE : VALUE_ERROR;
	}
	if ((size_t)*probe > xb->value_size) {
		xb->value_size = (size_t)*probe;
		xb->value = xrealloc(xb->value, xb->value_size);
	}
	*got = src_get(s, name, xb->value, (size_t)*probe);
	if (*got < 0) {
		*err = errno;
		if (errno == ENODATA)
			return VALUE_GONE;
		if (errno == ERANGE)
			return VALUE_SIZE;	/* grew since the probe */
		return VALUE_ERROR;
	}
	return *got == *probe ? VALUE_OK : VALUE_SIZE;
}

struct xattr_target {
	struct walk_thread *t;
	const struct dir_node *dir;
	const char *name;		/* NULL: dir itself */
	uint64_t ino;
	int inode_fd;			/* to tell whether the inode changed; -1: use dirfd+name */
	int dirfd;
	const struct statx *stx;	/* the inode as the walk saw it */
	const struct walk_dir *wd;	/* for the backend's own listing */
	const struct walk_entry *we;	/* NULL: the directory itself */
};

/*
 * The names of an inode listxattr() refused (E2BIG), from the backend's
 * own listing into names: 0, or a negative errno (-EOPNOTSUPP: none).
 */
static int list_big(const struct xattr_target *tg, int fd, struct strbuf *names)
{
	struct scrub_ctx *ctx = tg->t->ctx;
	struct backend_dir bd;
	struct backend_entry be;

	if (!ctx->ops->list_xattrs)
		return -EOPNOTSUPP;
	bd = backend_dir_of(tg->t, tg->wd);
	if (!tg->we)
		return ctx->ops->list_xattrs(ctx, &bd, NULL, names);
	be = backend_entry_of(tg->we, fd);
	return ctx->ops->list_xattrs(ctx, &bd, &be, names);
}

static bool list_has(const char *list, size_t n, const char *name)
{
	for (size_t off = 0; off < n; off += strlen(list + off) + 1)
		if (!strcmp(list + off, name))
			return true;
	return false;
}

/*
 * Is name still in the attribute list?  Through the backend's listing
 * when the VFS cannot list them all; true when the list cannot be had at
 * all (whether the inode changed then decides).
 */
static bool still_listed(const struct xattr_target *tg, const struct xattr_src *s,
			 struct xattr_buf *xb, const char *name)
{
	/* FSCRUB_DEBUG_RELIST_FAILS: the list cannot be had now (for the tests). */
	ssize_t n = getenv("FSCRUB_DEBUG_RELIST_FAILS") ? -EIO : list_names(s, xb);
	struct strbuf big = STRBUF_INIT;
	bool found;

	if (n >= 0)
		return list_has(xb->names, (size_t)n, name);
	if (n != -E2BIG)
		return true;
	found = list_big(tg, s->fd, &big) < 0 || list_has(big.buf, big.len, name);
	strbuf_release(&big);
	return found;
}

static bool target_changed(const struct xattr_target *tg)
{
	struct statx now;
	int ret = tg->inode_fd >= 0 ? stx_get(tg->inode_fd, NULL, &now)
				    : stx_get(tg->dirfd, tg->name, &now);

	return ret < 0 || !stx_unchanged(&now, tg->stx);
}

/*
 * Report attribute xname's value that did not read back (r) after a second
 * look; the name is printed escaped, as paths are (names.h).
 */
static void value_failed(const struct xattr_target *tg, const char *xname,
			 enum value_result r, int err, ssize_t probe, ssize_t got)
{
	struct scrub_ctx *ctx = tg->t->ctx;
	struct strbuf en = STRBUF_INIT;
	const char *name;

	names_escape(&en, xname, strlen(xname));
	name = en.buf;
	if (target_changed(tg)) {
		str_changed(ctx, CHECK_XATTR_SIZE, tg->dir, tg->name, tg->ino,
			    "attribute '%s'", name);
		strbuf_release(&en);
		return;
	}
	switch (r) {
	case VALUE_GONE: {
		bool daemon = ctx->quirks & QUIRK_XATTR_ANY;	/* its answers (context.h) */

		report_at(ctx, daemon ? SEV_WARNING : SEV_ERROR, CHECK_XATTR_MISSING, tg->dir,
			  tg->name, tg->ino, __FILE__, __LINE__,
			  "attribute '%s' is listed but cannot be read: %s%s", name, strerror(err),
			  daemon ? " (the filesystem's daemon says so, not the disk)" : "");
		break;
	}
	case VALUE_SIZE:
		str_error(ctx, CHECK_XATTR_SIZE, tg->dir, tg->name, tg->ino,
			  "attribute '%s' is %zd bytes by its size but %zd bytes were read",
			  name, probe, got);
		break;
	case VALUE_ERROR:
		if (errno_is_corruption(err))
			str_error(ctx, CHECK_XATTR_UNREADABLE, tg->dir, tg->name, tg->ino,
				  "cannot read attribute '%s': %s", name, strerror(err));
		else
			report_operational(ctx, tg->dir, tg->name, err,
					   "cannot read attribute '%s'", name);
		break;
	case VALUE_OK:
		break;
	}
	strbuf_release(&en);
}

static void check_one(const struct xattr_target *tg, const struct xattr_src *s,
		      struct xattr_buf *xb, const char *xname)
{
	ssize_t probe, got;
	int err = 0;
	enum value_result r = read_value(s, xb, xname, &err, &probe, &got);

	if (r == VALUE_OK) {
		tg->t->stats.xattr_values++;
		return;
	}
	/* Look again: another process may be changing this attribute. */
	r = read_value(s, xb, xname, &err, &probe, &got);
	if (r == VALUE_OK) {
		tg->t->stats.xattr_values++;
		return;
	}
	if (r == VALUE_GONE && !still_listed(tg, s, xb, xname))
		return;		/* removed meanwhile */
	value_failed(tg, xname, r, err, probe, got);
}

/* The list could not be had: a corruption (looked at twice) or an operational error. */
static void list_failed(const struct xattr_target *tg, int err)
{
	struct scrub_ctx *ctx = tg->t->ctx;

	if (!errno_is_corruption(err))
		report_operational(ctx, tg->dir, tg->name, err, "cannot list attributes");
	else if (target_changed(tg))
		str_changed(ctx, CHECK_XATTR_UNREADABLE, tg->dir, tg->name, tg->ino,
			    "attribute list");
	else
		str_error(ctx, CHECK_XATTR_UNREADABLE, tg->dir, tg->name, tg->ino,
			  "cannot list attributes: %s", strerror(err));
}

/* Check the names of list (n bytes of NUL-terminated names), then read back every value. */
static void check_list(const struct xattr_target *tg, const struct xattr_src *s,
		       struct xattr_buf *xb, const char *list, size_t n)
{
	if (xb->name_check)
		name_check_xattrs(tg->t, xb->name_check, tg->dir, tg->name, tg->ino, list, n);
	for (size_t off = 0; off < n; off += strlen(list + off) + 1) {
		if (list[off] == '\0')
			continue;
		tg->t->stats.xattrs++;
		if (!strcmp(list + off, LEDGER_XATTR_TRUSTED) || !strcmp(list + off, LEDGER_XATTR_USER))
			xb->ledger_named = true;
		check_one(tg, s, xb, list + off);
	}
}

/*
 * More names than listxattr() can return (E2BIG, over 64 KiB of them, which
 * XFS, btrfs and tmpfs hold legally): the backend's own listing, else one
 * info: the inode's attributes are not checked, and that is counted.
 */
static void check_big(const struct xattr_target *tg, const struct xattr_src *s,
		      struct xattr_buf *xb)
{
	struct strbuf names = STRBUF_INIT;
	int ret = list_big(tg, s->fd, &names);

	if (ret < 0 && errno_is_corruption(-ret)) {
		strbuf_reset(&names);
		ret = list_big(tg, s->fd, &names);	/* look again */
	}
	if (ret == 0) {
		check_list(tg, s, xb, names.buf, names.len);
	} else if (ret == -EOPNOTSUPP || ret == -EPERM || ret == -EACCES) {
		tg->t->stats.xattr_unlisted++;
		str_info(tg->t->ctx, CHECK_XATTR_TOO_MANY, tg->dir, tg->name, tg->ino,
			 "more attribute names than the VFS can list: not checked%s",
			 ret == -EOPNOTSUPP ? "" : " (the filesystem's own listing needs "
			 "CAP_SYS_ADMIN)");
	} else if (ret != -ENOENT && ret != -ESTALE) {	/* else: gone meanwhile */
		list_failed(tg, -ret);
	}
	strbuf_release(&names);
}

static void check_all(const struct xattr_target *tg, const struct xattr_src *s,
		      struct xattr_buf *xb)
{
	ssize_t n = list_names(s, xb);

	xb->ledger_named = false;
	if (n < 0 && xattr_unsupported(-n))
		return;
	if (n < 0 && (-n == ENOENT || -n == ELOOP))
		return;		/* the name went away; the walk reports races */
	if (n == -E2BIG) {
		check_big(tg, s, xb);
		return;
	}
	if (n < 0 && errno_is_corruption(-n))
		n = list_names(s, xb);	/* look again */
	if (n < 0) {
		list_failed(tg, (int)-n);
		return;
	}
	/* Copy the list: checking one value may re-list into xb->names. */
	char *list = xmalloc((size_t)n + 1);

	memcpy(list, xb->names, (size_t)n);
	list[n] = '\0';
	check_list(tg, s, xb, list, (size_t)n);
	free(list);
}

void xattrs_check_entry(struct walk_thread *t, struct xattr_buf *xb,
			const struct walk_dir *d, const struct walk_entry *e, int fd)
{
	struct xattr_target tg = {
		.t = t, .dir = d->node, .name = e->name, .ino = e->stx.stx_ino,
		.inode_fd = fd, .dirfd = d->fd, .stx = &e->stx, .wd = d, .we = e,
	};
	struct xattr_src s = { .fd = fd };

	if (fd < 0) {
		struct strbuf p = STRBUF_INIT;

		if (!t->ctx->proc_fd_ok)
			return;		/* said once in phase 1 */

		strbuf_addf(&p, "/proc/self/fd/%d/", d->fd);
		strbuf_add(&p, e->name, e->namelen);
		s.longpath = p.buf;
		check_all(&tg, &s, xb);
		strbuf_release(&p);
		return;
	}
	check_all(&tg, &s, xb);
}

void xattrs_check_dir(struct walk_thread *t, struct xattr_buf *xb, const struct walk_dir *d)
{
	struct xattr_target tg = {
		.t = t, .dir = d->node, .name = NULL, .ino = d->before.stx_ino,
		.inode_fd = d->fd, .dirfd = d->fd, .stx = &d->before, .wd = d,
	};
	struct xattr_src s = { .fd = d->fd };

	check_all(&tg, &s, xb);
}
