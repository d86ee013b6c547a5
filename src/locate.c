/*
 * locate: owners of a device range; see locate.h.  The XFS case and what
 * every filesystem shares (the owner list, paths from file handles); ext4
 * and btrfs have their own files in their backends' folders.
 */
#include "locate.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xfs/xfs.h>

#include "fserror.h"
#include "watch_media.h"

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
	int ret = watch_media_owners(fs->fd, fs->devno, off, len, &m);

	for (size_t i = 0; !ret && i < m.n; i++)
		xfs_owner(fs, &m.v[i], out);
	media_owners_release(&m);
	return ret;
}
