/*
 * relook: a second walk for a list of inodes; see relook.h.
 */
#include "tree/relook.h"

#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "scan/context.h"
#include "tree/crosslink.h"
#include "tree/dircache.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "tree/walk.h"


static int by_key(const void *a, const void *b)
{
	const struct relook_file *x = a, *y = b;

	return ino_key_cmp(&x->id, &y->id);
}

void relook_add(struct relook *rl, struct ino_key id)
{
	if (!(rl->nr_files & (rl->nr_files + 1)))	/* 0, 1, 3, 7, ...: grow */
		rl->files = xrealloc(rl->files, (rl->nr_files * 2 + 1) * sizeof(*rl->files));
	rl->files[rl->nr_files++] = (struct relook_file){ .id = id };
}

struct relook_file *relook_find(struct relook *rl, struct ino_key id)
{
	struct relook_file key = { .id = id };

	return find_item(&key, rl->files, rl->nr_files, sizeof(key), by_key);
}

/* The first name the walk finds is the one reported (under rl->lock). */
static void name_first(struct relook_file *f, struct walk_dir *d, const struct walk_entry *e)
{
	if (f->dir)
		return;
	dir_node_get(d->node);
	f->dir = d->node;
	f->name = xstrndup(e->name, e->namelen);
}

static void relook_entry(struct walk_thread *t, struct walk_dir *d, const struct walk_entry *e)
{
	struct relook *rl = t->varg;
	struct relook_file *f;
	int fd;

	if (rl->names_only) {
		/* An inode that cannot be stat'ed (the errors are often why) by its entry's number. */
		struct ino_key id = e->stat_err ? (struct ino_key){ d->node->dev, e->d_ino } :
					      ino_key_of(&e->stx);

		if ((f = relook_find(rl, id)) != NULL) {
			pthread_mutex_lock(&rl->lock);
			name_first(f, d, e);
			pthread_mutex_unlock(&rl->lock);
		}
		return;
	}
	if (e->stat_err || !S_ISREG(e->stx.stx_mode) || !(f = relook_find(rl, ino_key_of(&e->stx))))
		return;
	fd = walk_open_file(t, d, e, 0);
	if (fd < 0)
		return;
	pthread_mutex_lock(&rl->lock);
	name_first(f, d, e);
	if (stx_changed_during_scan(t->ctx, &e->stx))
		f->changed = true;
	if (rl->visit)
		rl->visit(rl, f, fd, e);
	pthread_mutex_unlock(&rl->lock);
	close(fd);
}

static const struct walk_visitor relook_visitor = {
	.name = "second look",
	.entry = relook_entry,
};

int relook_walk(struct relook *rl)
{
	struct scrub_stats stats = { 0 };
	size_t n = 0;
	int ret;

	sort_items(rl->files, rl->nr_files, sizeof(*rl->files), by_key);
	for (size_t i = 0; i < rl->nr_files; i++)
		if (!n || !ino_key_eq(rl->files[n - 1].id, rl->files[i].id))
			rl->files[n++] = rl->files[i];
	rl->nr_files = n;
	pthread_mutex_init(&rl->lock, NULL);
	ret = walk_tree(rl->ctx, &relook_visitor, rl, &stats, NULL);
	pthread_mutex_destroy(&rl->lock);
	if (ret < 0)
		report_operational(rl->ctx, NULL, NULL, -ret, "cannot start the %s", rl->name);
	return ret;
}

void relook_release(struct relook *rl)
{
	for (size_t i = 0; i < rl->nr_files; i++) {
		if (rl->files[i].dir)
			dir_node_put(&rl->ctx->dcache, rl->files[i].dir);
		free(rl->files[i].name);
	}
	free(rl->files);
	rl->files = NULL;
	rl->nr_files = 0;
}

bool relook_still_mapped(int fd, uint64_t logical, uint64_t phys, uint64_t len)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext[1];
	} m;

	memset(&m, 0, sizeof(m));
	m.fm.fm_start = logical;
	m.fm.fm_length = len;
	m.fm.fm_extent_count = 1;
	if (ioctl(fd, FS_IOC_FIEMAP, &m.fm) < 0 || m.fm.fm_mapped_extents != 1)
		return false;
	const struct fiemap_extent *e = &m.ext[0];

	return !(e->fe_flags & XLINK_NO_LOCATION) && logical >= e->fe_logical &&
	       e->fe_physical + (logical - e->fe_logical) == phys &&
	       e->fe_logical + e->fe_length >= logical + len;
}
