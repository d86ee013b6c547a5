/*
 * fsmounts: the filesystems of fscrub watch and fscrub health; see
 * fsmounts.h.
 */
#include "lib/fsmounts.h"

#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/exitcode.h"
#include "lib/mountpoint.h"
#include "lib/strbuf.h"

static bool listed(const struct fsmount_list *list, dev_t devno)
{
	for (size_t i = 0; i < list->nr; i++)
		if (list->v[i].devno == devno)
			return true;
	return false;
}

static void add(struct fsmount_list *list, const char *target, const char *source,
		const char *fstype, dev_t devno)
{
	struct fsmount *m;

	list->v = xrealloc(list->v, (list->nr + 1) * sizeof(*list->v));
	m = &list->v[list->nr++];
	m->target = xstrdup(target);
	m->source = xstrdup(source ? source : "none");
	m->fstype = xstrdup(fstype ? fstype : "unknown");
	m->devno = devno;
}

static int from_args(const char *prog, char **args, int nr_args, struct fsmount_list *list)
{
	for (int i = 0; i < nr_args; i++) {
		struct mount_info mi = { 0 };
		struct strbuf err = STRBUF_INIT;
		int ret = mount_resolve(args[i], NULL, &mi, &err);

		if (ret) {
			fprintf(stderr, "fscrub %s: %s\n", prog, err.buf);
			strbuf_release(&err);
			mount_info_release(&mi);
			return ret;
		}
		if (!listed(list, mi.devno))
			add(list, mi.target, mi.source, mi.fstype, mi.devno);
		strbuf_release(&err);
		mount_info_release(&mi);
	}
	return 0;
}

/*
 * A mount whose path shows it (not covered by another mount) and, if
 * whole, that shows the root of its filesystem (not a bind mount of a
 * subdirectory, not a btrfs subvolume).
 */
static bool usable(struct libmnt_fs *fs, bool whole)
{
	const char *root = mnt_fs_get_root(fs);
	int id = mnt_fs_get_id(fs);

	if (whole && root && strcmp(root, "/"))
		return false;
	return id <= 0 || !mnt_fs_get_target(fs) || mount_shown_id(mnt_fs_get_target(fs)) == id;
}

static int from_table(const char *prog, bool (*want)(const char *), struct fsmount_list *list)
{
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	int err = 0;
	struct libmnt_table *tb = mount_table_load(NULL, &err);

	if (!tb) {
		fprintf(stderr, "fscrub %s: cannot read the mount table: %s\n", prog,
			strerror(err > 0 ? err : -err));
		return EXIT_OPERATIONAL;
	}
	it = mnt_new_iter(MNT_ITER_FORWARD);
	/* A mount of the whole filesystem first; else any (a btrfs mounted by subvolume). */
	for (int whole = 1; it && whole >= 0; whole--) {
		mnt_reset_iter(it, MNT_ITER_FORWARD);
		while (mnt_table_next_fs(tb, it, &fs) == 0) {
			const char *type = mnt_fs_get_fstype(fs);

			if (!type || !want(type) || listed(list, mnt_fs_get_devno(fs)) ||
			    !usable(fs, whole))
				continue;
			add(list, mnt_fs_get_target(fs), mnt_fs_get_source(fs), type,
			    mnt_fs_get_devno(fs));
		}
	}
	mnt_free_iter(it);
	mount_table_free(tb);
	return 0;
}

int fsmounts_collect(const char *prog, char **args, int nr_args,
		     bool (*want)(const char *fstype), struct fsmount_list *list)
{
	list->v = NULL;
	list->nr = 0;
	return nr_args > 0 ? from_args(prog, args, nr_args, list) : from_table(prog, want, list);
}

void fsmounts_release(struct fsmount_list *list)
{
	for (size_t i = 0; i < list->nr; i++) {
		free(list->v[i].target);
		free(list->v[i].source);
		free(list->v[i].fstype);
	}
	free(list->v);
	list->v = NULL;
	list->nr = 0;
}
