/*
 * owners: who owns a device range; see owners.h.  The XFS case and what
 * every filesystem shares (the owner list, paths from file handles); ext4
 * and btrfs have their own files in their backends' folders.
 */
#include "cmd/owners.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <fts.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/fsmap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xfs/xfs.h>

#include "lib/fserror.h"
#include "lib/fsmap.h"
#include "backends/xfs/xfs_media.h"

struct loc_owner *loc_owner_add(struct loc_owners *o, enum loc_kind kind, uint64_t off,
				uint64_t len, const char *what, char *path)
{
	struct loc_owner *p;

	o->v = xrealloc(o->v, (o->n + 1) * sizeof(*o->v));
	p = &o->v[o->n++];
	*p = (struct loc_owner){ .kind = kind, .off = off, .len = len, .path = path,
				 .what = what ? xstrdup(what) : NULL };
	return p;
}

bool loc_mount_has_device(const struct fsmount *m, dev_t devno)
{
	struct stat st;
	uint64_t devid, size;
	bool yes;
	int fd;

	if (m->devno == devno ||
	    (m->source[0] == '/' && stat(m->source, &st) == 0 && S_ISBLK(st.st_mode) &&
	     st.st_rdev == devno))
		return true;
	if (strcmp(m->fstype, "btrfs") ||
	    (fd = open(m->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return false;
	yes = locate_btrfs_device(fd, devno, &devid, &size) == 0;
	close(fd);
	return yes;
}

const char *loc_devpath(const struct fsmount *m, dev_t devno, const char *name, char *buf,
			size_t len)
{
	struct stat st;

	if (m->source[0] == '/' && stat(m->source, &st) == 0 && S_ISBLK(st.st_mode) &&
	    st.st_rdev == devno)
		return m->source;
	snprintf(buf, len, "/dev/%s", name);
	return buf;
}

int loc_owners_of(struct loc_fs *fs, uint64_t off, uint64_t len, struct loc_owners *out)
{
	int ret;

	fs->fd = open(fs->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->fd < 0)
		return -errno;
	if (!strcmp(fs->fstype, "xfs"))
		ret = locate_xfs(fs, off, len, out);
	else if (!strcmp(fs->fstype, "btrfs"))
		ret = locate_btrfs(fs, off, len, out);
	else
		ret = locate_ext4(fs, off, len, out);
	if (!ret && !strcmp(fs->fstype, "xfs"))
		loc_fiemap_walk(fs, out);
	close(fs->fd);
	fs->fd = -1;
	return ret;
}

void loc_owners_release(struct loc_owners *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->v[i].path);
		free(o->v[i].what);
	}
	free(o->v);
	o->v = NULL;
	o->n = 0;
}

char *loc_handle_path(const struct loc_fs *fs, int type, const void *handle, size_t len)
{
	struct fserror_event ev = { .has_handle = true, .handle_type = type };
	struct strbuf path = STRBUF_INIT;
	uint64_t ino = 0;
	int fd;

	if (len > sizeof(ev.handle))
		return NULL;
	ev.handle_bytes = (unsigned)len;
	memcpy(ev.handle, handle, len);
	fd = fserror_resolve(fs->fd, &ev, &path, &ino);
	if (fd < 0) {
		strbuf_release(&path);
		return NULL;
	}
	close(fd);
	return strbuf_detach(&path);
}

/* An XFS GETFSMAP owner as a locate owner. */
static void xfs_owner(const struct loc_fs *fs, const struct media_owner *m,
		      struct loc_owners *out)
{
	struct strbuf what = STRBUF_INIT;
	struct loc_owner *o;
	enum loc_kind kind = LOC_META;
	char *path = NULL;

	if (media_owner_is_inode(m) && !(m->flags & FMR_OF_EXTENT_MAP))
		strbuf_addstr(&what, m->flags & FMR_OF_ATTR_FORK ? "attribute fork" : "data");
	else if (m->owner == FMR_OWN_UNKNOWN)
		strbuf_addstr(&what, "allocated, but no file maps it: metadata, whose kind an "
			      "XFS without the reverse-mapping btree (mkfs.xfs -m rmapbt=1) "
			      "does not say");
	else if (fsmap_xfs_owner_name(m->owner))
		strbuf_addstr(&what, fsmap_xfs_owner_name(m->owner));
	else
		media_owner_describe(m, &what);
	if (media_owner_is_inode(m) && !(m->flags & FMR_OF_EXTENT_MAP)) {
		struct fserror_event ev = { 0 };

		kind = LOC_FILE;
		fserror_xfs_handle(&ev, m->owner, m->gen);
		path = loc_handle_path(fs, ev.handle_type, ev.handle, ev.handle_bytes);
	} else if (m->owner == FMR_OWN_FREE) {
		kind = LOC_FREE;
	} else if (m->owner == FMR_OWN_UNKNOWN) {
		kind = LOC_UNKNOWN;
	}
	o = loc_owner_add(out, kind, m->dev_off, m->len, what.buf, path);
	if (media_owner_is_inode(m)) {
		o->ino = m->owner;
		o->file_off = m->file_off;
	}
	strbuf_release(&what);
}

int locate_xfs(const struct loc_fs *fs, uint64_t off, uint64_t len, struct loc_owners *out)
{
	struct media_owners m = { 0 };
	int ret = xfs_media_owners(fs->fd, fs->devno, off, len, &m);

	for (size_t i = 0; !ret && i < m.n; i++)
		xfs_owner(fs, &m.v[i], out);
	media_owners_release(&m);
	return ret;
}

bool loc_needs_name(const struct loc_fs *fs, const struct loc_owner *o)
{
	struct stat st;

	if (o->kind != LOC_FILE || !o->ino)
		return false;
	return !o->path || strncmp(o->path, fs->target, strlen(fs->target)) ||
	       lstat(o->path, &st) < 0 || st.st_dev != fs->devno || st.st_ino != o->ino;
}

/* Directories deeper than this are not walked for names (a loop of bind mounts). */
#define NAME_WALK_DEPTH 256

/* The owners still to be named, by inode number, and the path being walked. */
struct namewalk {
	const struct loc_fs *fs;
	struct loc_owners *o;
	size_t *by_ino;		/* indexes into o->v, sorted by inode */
	size_t n, left;
	struct strbuf path;
};

static int by_ino_cmp(const void *a, const void *b, void *owners)
{
	const struct loc_owners *o = owners;
	uint64_t x = o->v[*(const size_t *)a].ino, y = o->v[*(const size_t *)b].ino;

	return x < y ? -1 : x > y;
}

/* The directory entry d_ino at nw->path: every unnamed owner of that inode named. */
static void name_entry(struct namewalk *nw, uint64_t ino)
{
	size_t lo = 0, hi = nw->n;

	while (lo < hi) {	/* the first owner of inode >= ino */
		size_t mid = (lo + hi) / 2;

		if (nw->o->v[nw->by_ino[mid]].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < nw->n && nw->o->v[nw->by_ino[lo]].ino == ino; lo++) {
		struct loc_owner *ow = &nw->o->v[nw->by_ino[lo]];

		if (ow->path)
			continue;
		ow->path = xstrdup(nw->path.buf);
		nw->left--;
	}
}

/* A subdirectory of the same filesystem, opened without touching its atime; or -1. */
static int open_subdir(const struct namewalk *nw, int dfd, const char *name)
{
	int fl = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	int fd = openat(dfd, name, fl | O_NOATIME);
	struct stat st;

	if (fd < 0 && errno == EPERM)
		fd = openat(dfd, name, fl);
	if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_dev != nw->fs->devno)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * The entries of directory dfd (closed here): their inode numbers from
 * readdir, with no stat of each file; subdirectories walked in turn.
 */
static void walk_names(struct namewalk *nw, int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while (nw->left && (de = readdir(d))) {
		size_t len = nw->path.len;
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		strbuf_addf(&nw->path, "%s%s", len && nw->path.buf[len - 1] == '/' ? "" : "/",
			    de->d_name);
		name_entry(nw, de->d_ino);
		if ((de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) && depth < NAME_WALK_DEPTH &&
		    (sub = open_subdir(nw, dirfd(d), de->d_name)) >= 0)
			walk_names(nw, sub, depth + 1);
		nw->path.buf[nw->path.len = len] = 0;
	}
	closedir(d);
}

void loc_name_by_walk(const struct loc_fs *fs, struct loc_owners *o)
{
	struct namewalk nw = { .fs = fs, .o = o, .path = STRBUF_INIT };
	int root;

	nw.by_ino = xcalloc(o->n ? o->n : 1, sizeof(*nw.by_ino));
	for (size_t i = 0; i < o->n; i++) {
		if (!loc_needs_name(fs, &o->v[i]))
			continue;
		free(o->v[i].path);
		o->v[i].path = NULL;
		nw.by_ino[nw.n++] = i;
	}
	nw.left = nw.n;
	if (nw.n)
		qsort_r(nw.by_ino, nw.n, sizeof(*nw.by_ino), by_ino_cmp, o);
	strbuf_addstr(&nw.path, fs->target);
	root = open(fs->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (nw.left && root >= 0)
		walk_names(&nw, root, 0);
	else if (root >= 0)
		close(root);
	strbuf_release(&nw.path);
	free(nw.by_ino);
}

/* FIEMAP extents asked per call: 256 of 56 bytes. */
#define FIEMAP_BATCH 256

/* Is [a, a + n) part of an unknown owner of o (those of the first nr_unknown)? */
static bool meets_unknown(const struct loc_owners *o, size_t nr, uint64_t a, uint64_t n)
{
	for (size_t i = 0; i < nr; i++)
		if (o->v[i].kind == LOC_UNKNOWN && a < o->v[i].off + o->v[i].len &&
		    o->v[i].off < a + n)
			return true;
	return false;
}

/* One extent of the file at path: a file owner for each unknown piece it meets. */
static void take_extent(struct loc_owners *o, size_t nr, const struct fiemap_extent *e,
			const char *path, ino_t ino)
{
	if (e->fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
			   FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_INLINE))
		return;
	for (size_t i = 0; i < nr; i++) {
		const struct loc_owner *u = &o->v[i];
		uint64_t a = e->fe_physical > u->off ? e->fe_physical : u->off;
		uint64_t b = e->fe_physical + e->fe_length < u->off + u->len ?
			     e->fe_physical + e->fe_length : u->off + u->len;
		struct loc_owner *f;

		if (u->kind != LOC_UNKNOWN || b <= a)
			continue;
		f = loc_owner_add(o, LOC_FILE, a, b - a, "data", xstrdup(path));
		f->ino = ino;
		f->file_off = e->fe_logical + (a - e->fe_physical);
	}
}

/* The extents of the file at path (no FIEMAP_FLAG_SYNC: nothing is written). */
static void map_file(struct loc_owners *o, size_t nr, const char *path, ino_t ino,
		     struct fiemap *fm)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOATIME | O_CLOEXEC);
	uint64_t start = 0;

	if (fd < 0)
		return;
	for (;;) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_extent_count = FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0 || !fm->fm_mapped_extents)
			break;
		for (uint32_t i = 0; i < fm->fm_mapped_extents; i++)
			if (meets_unknown(o, nr, fm->fm_extents[i].fe_physical,
					  fm->fm_extents[i].fe_length))
				take_extent(o, nr, &fm->fm_extents[i], path, ino);
		if (fm->fm_extents[fm->fm_mapped_extents - 1].fe_flags & FIEMAP_EXTENT_LAST)
			break;
		start = fm->fm_extents[fm->fm_mapped_extents - 1].fe_logical +
			fm->fm_extents[fm->fm_mapped_extents - 1].fe_length;
	}
	close(fd);
}

/* The unknown owners of o[0, nr), less what the file owners after them cover. */
static void trim_unknown(struct loc_owners *o, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		struct loc_owner *u = &o->v[i];

		for (size_t j = nr; j < o->n && u->kind == LOC_UNKNOWN && u->len; j++) {
			const struct loc_owner *f = &o->v[j];

			if (f->off <= u->off && f->off + f->len > u->off) {
				uint64_t e = f->off + f->len < u->off + u->len ?
					     f->off + f->len : u->off + u->len;

				u->len -= e - u->off;
				u->off = e;
				j = nr - 1;	/* from the first file again: they are unordered */
			}
		}
	}
	for (size_t i = 0; i < o->n;) {
		if (o->v[i].kind == LOC_UNKNOWN && !o->v[i].len) {
			free(o->v[i].what);
			memmove(&o->v[i], &o->v[i + 1], (o->n - i - 1) * sizeof(*o->v));
			o->n--;
		} else {
			i++;
		}
	}
}

void loc_fiemap_walk(const struct loc_fs *fs, struct loc_owners *o)
{
	char *roots[] = { (char *)fs->target, NULL };
	size_t nr = o->n;
	struct fiemap *fm;
	FTSENT *e;
	FTS *fts;

	if (!meets_unknown(o, nr, 0, UINT64_MAX) ||
	    !(fts = fts_open(roots, FTS_PHYSICAL | FTS_XDEV | FTS_NOCHDIR, NULL)))
		return;
	fm = xcalloc(1, sizeof(*fm) + FIEMAP_BATCH * sizeof(struct fiemap_extent));
	while ((e = fts_read(fts))) {
		if ((e->fts_info == FTS_F || e->fts_info == FTS_D) && e->fts_statp->st_blocks)
			map_file(o, nr, e->fts_path, e->fts_statp->st_ino, fm);
	}
	free(fm);
	fts_close(fts);
	trim_unknown(o, nr);
}

