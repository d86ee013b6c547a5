/*
 * mountpoint: argument resolution with libmount; see mountpoint.h.
 */
#include "mountpoint.h"

#include <errno.h>
#include <libmount.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static char *dup_or(const char *s, const char *fallback)
{
	return xstrdup(s ? s : fallback);
}

static void fill(struct mount_info *mi, struct libmnt_fs *fs)
{
	mount_info_release(mi);
	mi->target = dup_or(mnt_fs_get_target(fs), "");
	mi->source = dup_or(mnt_fs_get_source(fs), "none");
	mi->fstype = dup_or(mnt_fs_get_fstype(fs), "unknown");
	mi->fsroot = dup_or(mnt_fs_get_root(fs), "/");
	mi->id = mnt_fs_get_id(fs) > 0 ? mnt_fs_get_id(fs) : 0;
}

void mount_info_release(struct mount_info *mi)
{
	free(mi->target);
	free(mi->source);
	free(mi->fstype);
	free(mi->fsroot);
	mi->target = mi->source = mi->fstype = mi->fsroot = NULL;
}

struct libmnt_table *mount_table_load(const char *mtab, int *err)
{
	struct libmnt_table *tb = mnt_new_table();
	int ret;

	if (!tb) {
		*err = ENOMEM;
		return NULL;
	}
	ret = mtab ? mnt_table_parse_file(tb, mtab) : mnt_table_parse_mtab(tb, NULL);
	if (ret != 0) {
		mnt_unref_table(tb);
		*err = ret < 0 ? -ret : EINVAL;
		return NULL;
	}
	return tb;
}

void mount_table_free(struct libmnt_table *tb)
{
	mnt_unref_table(tb);
}

int mount_find_by_target(struct libmnt_table *tb, const char *path, struct mount_info *mi)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_BACKWARD);
	struct libmnt_fs *fs, *found = NULL;

	/* Backward: the last mount on a path is the one the path shows. */
	while (it && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);

		if (t && !strcmp(t, path)) {
			found = fs;
			break;
		}
	}
	mnt_free_iter(it);
	if (!found)
		return -ENOENT;
	fill(mi, found);
	return 0;
}

/* Does this table entry mount the block device devno? */
static bool fs_is_device(struct libmnt_fs *fs, dev_t devno)
{
	const char *src;
	struct stat st;

	if (mnt_fs_get_devno(fs))
		return mnt_fs_get_devno(fs) == devno && mnt_fs_get_srcpath(fs);
	/* fstab-style tables carry no device numbers: look at the source. */
	src = mnt_fs_get_srcpath(fs);
	return src && stat(src, &st) == 0 && S_ISBLK(st.st_mode) && st.st_rdev == devno;
}

unsigned mount_find_by_devno(struct libmnt_table *tb, dev_t devno, struct mount_info *mi)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs, *first = NULL, *first_whole = NULL;
	unsigned n = 0;

	while (it && mnt_table_next_fs(tb, it, &fs) == 0) {
		if (!fs_is_device(fs, devno))
			continue;
		n++;
		if (!first)
			first = fs;
		const char *root = mnt_fs_get_root(fs);
		if (!first_whole && (!root || !strcmp(root, "/")))
			first_whole = fs;
	}
	if (n)
		fill(mi, first_whole ? first_whole : first);
	mi->nr_mounts = n;
	mnt_free_iter(it);
	return n;
}

bool mount_id_attached(int id)
{
	int err;
	struct libmnt_table *tb = mount_table_load(NULL, &err);
	bool found = false;

	if (!tb)
		return true;	/* cannot tell: do not claim it went away */
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;

	while (it && !found && mnt_table_next_fs(tb, it, &fs) == 0)
		found = mnt_fs_get_id(fs) == id;
	mnt_free_iter(it);
	mount_table_free(tb);
	return found || !it;
}

void mount_for_each_child(struct libmnt_table *tb, int id,
			  void (*fn)(const char *target, const char *fstype, void *arg),
			  void *arg)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;

	while (id > 0 && it && mnt_table_next_fs(tb, it, &fs) == 0)
		if (mnt_fs_get_parent_id(fs) == id && mnt_fs_get_id(fs) != id)
			fn(mnt_fs_get_target(fs), mnt_fs_get_fstype(fs), arg);
	mnt_free_iter(it);
}

int mount_resolve(const char *arg, const char *mtab, struct mount_info *mi,
		  struct strbuf *err)
{
	struct libmnt_table *tb;
	struct stat st;
	char *real;
	int e = 0, ret = 0;

	memset(mi, 0, sizeof(*mi));
	if (stat(arg, &st) < 0) {
		strbuf_addf(err, "cannot access '%s': %s", arg, strerror(errno));
		return 16;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISBLK(st.st_mode)) {
		strbuf_addf(err, "'%s' is not a mount point or a block device", arg);
		return 16;
	}
	tb = mount_table_load(mtab, &e);
	if (!tb) {
		strbuf_addf(err, "cannot read the mount table %s: %s",
			    mtab ? mtab : "of the kernel", strerror(e));
		return mtab ? 16 : 8;
	}
	if (S_ISBLK(st.st_mode)) {
		if (mount_find_by_devno(tb, st.st_rdev, mi) == 0) {
			strbuf_addf(err, "'%s' is not mounted", arg);
			ret = 16;
		}
		goto out;
	}
	real = realpath(arg, NULL);
	if (!real || mount_find_by_target(tb, real, mi) < 0) {
		strbuf_addf(err, "'%s' is not a mount point", arg);
		ret = 16;
	}
	free(real);
out:
	mount_table_free(tb);
	return ret;
}
