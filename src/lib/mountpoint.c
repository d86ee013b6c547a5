/*
 * mountpoint: argument resolution with libmount; see mountpoint.h.
 */
#include "lib/mountpoint.h"

#include <blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <stdio.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <xxhash.h>

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
	mi->devno = mnt_fs_get_devno(fs);
}

int mount_shown_id(const char *path)
{
	struct statx stx;

	if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, STATX_MNT_ID, &stx) < 0)
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	return (int)stx.stx_mnt_id;
}

/*
 * Does fs's mount point show fs?  Not when it shows another mount, or does
 * not exist (a mount covers a directory above it); true when it cannot be
 * told.
 */
static bool fs_shown(struct libmnt_fs *fs)
{
	int id = mnt_fs_get_id(fs);
	int shown = id > 0 && mnt_fs_get_target(fs) ? mount_shown_id(mnt_fs_get_target(fs)) :
		    -EINVAL;

	if (shown == -ENOENT || shown == -ENOTDIR)
		return false;
	return shown < 0 || shown == id;
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

	unsigned n = 0;

	/* Backward: the last mount on a path is the one the path shows. */
	while (it && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *t = mnt_fs_get_target(fs);

		if (t && !strcmp(t, path) && !n++)
			found = fs;
	}
	mnt_free_iter(it);
	if (!found)
		return -ENOENT;
	fill(mi, found);
	mi->nr_stacked = n;
	return 0;
}

/* Does this table entry mount the block device devno? */
static bool fs_is_device(struct libmnt_fs *fs, dev_t devno)
{
	const char *src = mnt_fs_get_srcpath(fs);
	struct stat st;

	if (mnt_fs_get_devno(fs) == devno && src)
		return true;
	/*
	 * fstab-style tables carry no device numbers, and btrfs shows an
	 * anonymous one (0:N): look at the source.
	 */
	return src && stat(src, &st) == 0 && S_ISBLK(st.st_mode) && st.st_rdev == devno;
}

/*
 * Rank of a mount of the device, best first: the whole filesystem before a
 * bind mount of part of it, and (live tables only) a mount whose path
 * shows it before one another mount covers.
 */
static int devno_rank(struct libmnt_fs *fs, bool live, bool *covered)
{
	const char *root = mnt_fs_get_root(fs);
	bool whole = !root || !strcmp(root, "/");

	*covered = live && !fs_shown(fs);
	return (whole ? 0 : 2) + (*covered ? 1 : 0);
}

bool mount_sb_readonly_in(struct libmnt_table *tb, dev_t devno)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	bool ro = false;

	while (it && !ro && mnt_table_next_fs(tb, it, &fs) == 0)
		ro = mnt_fs_get_devno(fs) == devno &&
		     mnt_optstr_get_option(mnt_fs_get_fs_options(fs), "ro", NULL, NULL) == 0;
	mnt_free_iter(it);
	return ro;
}

bool mount_sb_readonly(dev_t devno)
{
	int err = 0;
	struct libmnt_table *tb = mount_table_load(NULL, &err);
	bool ro = tb && mount_sb_readonly_in(tb, devno);

	mount_table_free(tb);
	return ro;
}

unsigned mount_find_by_devno(struct libmnt_table *tb, dev_t devno, struct mount_info *mi,
			     bool live)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs, *best = NULL;
	int best_rank = 4;
	bool covered, best_covered = false;
	unsigned n = 0;

	while (it && mnt_table_next_fs(tb, it, &fs) == 0) {
		if (!fs_is_device(fs, devno))
			continue;
		n++;
		int rank = devno_rank(fs, live, &covered);

		if (rank < best_rank) {
			best = fs;
			best_rank = rank;
			best_covered = covered;
		}
	}
	if (n) {
		fill(mi, best);
		mi->covered = best_covered;
	}
	mi->nr_mounts = n;
	mnt_free_iter(it);
	return n;
}

static bool same_str(const char *a, const char *b)
{
	return a && b ? !strcmp(a, b) : a == b;
}

int mount_find_same(struct libmnt_table *tb, const struct mount_info *mi)
{
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	int id = -ENOENT;

	while (it && id < 0 && mnt_table_next_fs(tb, it, &fs) == 0)
		if (same_str(mnt_fs_get_target(fs), mi->target) &&
		    mnt_fs_get_devno(fs) == mi->devno &&
		    same_str(mnt_fs_get_root(fs), mi->fsroot) &&
		    same_str(mnt_fs_get_fstype(fs), mi->fstype) &&
		    same_str(mnt_fs_get_source(fs), mi->source))
			id = mnt_fs_get_id(fs);
	mnt_free_iter(it);
	return id;
}

/* The entry of tb with mount id id, or NULL (none, or no memory to look). */
static struct libmnt_fs *fs_of_id(struct libmnt_table *tb, int id)
{
	struct libmnt_iter *it = tb ? mnt_new_iter(MNT_ITER_FORWARD) : NULL;
	struct libmnt_fs *fs, *found = NULL;

	while (it && !found && mnt_table_next_fs(tb, it, &fs) == 0)
		if (mnt_fs_get_id(fs) == id)
			found = fs;
	mnt_free_iter(it);
	return found;
}

const char *mount_target_of(struct libmnt_table *tb, int id)
{
	struct libmnt_fs *fs = fs_of_id(tb, id);

	return fs ? mnt_fs_get_target(fs) : NULL;
}

bool mount_id_is_device(int id, dev_t devno)
{
	int err;
	struct libmnt_table *tb = mount_table_load(NULL, &err);
	struct libmnt_fs *fs = fs_of_id(tb, id);
	bool is = !fs || fs_is_device(fs, devno);

	mount_table_free(tb);
	return is;
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

bool mount_option(int id, const char *name, struct strbuf *value)
{
	int err;
	struct libmnt_table *tb = mount_table_load(NULL, &err);
	struct libmnt_fs *fs = fs_of_id(tb, id);
	char *v = NULL;
	size_t len = 0;
	bool found = fs && mnt_fs_get_option(fs, name, &v, &len) == 0;

	if (found && value && v)
		strbuf_add(value, v, len);
	mount_table_free(tb);
	return found;
}

bool mount_sb_readonly_by_id(int id)
{
	int err = 0;
	struct libmnt_table *tb = id ? mount_table_load(NULL, &err) : NULL;
	struct libmnt_fs *fs = fs_of_id(tb, id);
	bool ro = fs && mnt_optstr_get_option(mnt_fs_get_fs_options(fs), "ro", NULL, NULL) == 0;

	mount_table_free(tb);
	return ro;
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

/*
 * The mount the table has at arg's path (its parent resolved: arg itself
 * cannot be), into mi; false if none.
 */
static bool mounted_at(const char *arg, const char *mtab, struct mount_info *mi)
{
	char *copy = strdup(arg), *dir, *parent;
	const char *base;
	struct strbuf path = STRBUF_INIT;
	struct libmnt_table *tb;
	bool found = false;
	int e = 0;

	if (!copy)
		return false;
	while (strlen(copy) > 1 && copy[strlen(copy) - 1] == '/')
		copy[strlen(copy) - 1] = 0;
	base = strrchr(copy, '/') ? strrchr(copy, '/') + 1 : copy;
	/* The directory arg is in: ".", "/", or its path up to the last '/'. */
	dir = base == copy ? strdup(".") : base == copy + 1 ? strdup("/") :
	      strndup(copy, (size_t)(base - copy - 1));
	parent = dir ? realpath(dir, NULL) : NULL;
	if (parent && (tb = mount_table_load(mtab, &e))) {
		strbuf_addf(&path, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", base);
		found = mount_find_by_target(tb, *base ? path.buf : parent, mi) == 0;
		mount_table_free(tb);
	}
	free(dir);
	free(parent);
	free(copy);
	strbuf_release(&path);
	return found;
}

/*
 * stat() of the argument failed.  ENOTCONN is a FUSE mount whose daemon
 * has died (or a network mount cut off): the argument names a mount that
 * exists, which cannot be checked, an operational error (8), not a usage
 * error.  EIO (or EUCLEAN) on a mount point is a filesystem the kernel
 * has shut down because it found damage (XFS does so at mount or when a
 * metadata write fails), or whose device fails: damage that nothing online
 * can look into further, an error (4), and what to do about it.
 */
static int stat_failed(const char *arg, const char *mtab, struct strbuf *err)
{
	int saved = errno;
	struct mount_info mi = { 0 };

	if ((saved == EIO || saved == EUCLEAN) && mounted_at(arg, mtab, &mi)) {
		strbuf_addf(err, "'%s' (%s on %s) cannot be read: %s: the kernel has shut this "
			    "filesystem down (it found damage: the kernel log, dmesg, says where) "
			    "or its device fails; nothing of it can be checked online: unmount it "
			    "and run its offline checker", arg, mi.fstype ? mi.fstype : "?",
			    mi.source ? mi.source : "?", strerror(saved));
		mount_info_release(&mi);
		return 4;
	}
	errno = saved;
	if (errno == ENOTCONN) {
		strbuf_addf(err, "cannot access '%s': %s: a mount whose FUSE daemon has died "
			    "(or whose server is gone); nothing of it can be checked; unmount it "
			    "(fusermount -u) and mount it again", arg, strerror(errno));
		return 8;
	}
	strbuf_addf(err, "cannot access '%s': %s", arg, strerror(errno));
	return 16;
}

/*
 * Is the mount the argument reaches the one the table names at its real
 * path?  Not when the path goes through a mount that is no longer in the
 * table (umount -l while a process keeps its cwd there; /proc/PID/cwd):
 * its realpath() is then its path inside that detached mount ("/"), which
 * shows another filesystem.  Refused (16): scrubbing what the path shows
 * would check the wrong filesystem.  Cannot tell (no mount ids): 0.
 */
static int check_reached(const char *arg, const struct mount_info *mi, struct strbuf *err)
{
	int reached = mount_shown_id(arg);

	if (reached < 0 || !mi->id || reached == mi->id)
		return 0;
	strbuf_addf(err, "'%s' is on a mount that is not in the mount table (detached, as by "
		    "umount -l, mount id %d); its path, '%s', shows another filesystem (%s on "
		    "%s): not scrubbing that instead; name the mount point or device of a "
		    "mounted filesystem", arg, reached, mi->target, mi->fstype, mi->source);
	return 16;
}

int mount_resolve(const char *arg, const char *mtab, struct mount_info *mi,
		  struct strbuf *err)
{
	struct libmnt_table *tb;
	struct stat st;
	char *real;
	int e = 0, ret = 0;

	memset(mi, 0, sizeof(*mi));
	if (stat(arg, &st) < 0)
		return stat_failed(arg, mtab, err);
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
		mi->by_device = true;
		mi->arg_rdev = st.st_rdev;
		if (mount_find_by_devno(tb, st.st_rdev, mi, !mtab) == 0) {
			strbuf_addf(err, "'%s' is not mounted", arg);
			ret = 16;
		}
		goto out;
	}
	real = realpath(arg, NULL);
	if (!real || mount_find_by_target(tb, real, mi) < 0) {
		strbuf_addf(err, "'%s' is not a mount point", arg);
		ret = 16;
	} else if (!mtab) {
		ret = check_reached(arg, mi, err);
	}
	free(real);
out:
	mount_table_free(tb);
	return ret;
}

/* The block device's filesystem UUID as libblkid reads it; NULL if none. */
static char *device_uuid(const char *dev)
{
	blkid_probe pr = blkid_new_probe_from_filename(dev);
	const char *v = NULL;
	char *uuid = NULL;

	if (!pr)
		return NULL;
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_UUID);
	if (blkid_do_safeprobe(pr) == 0 && blkid_probe_lookup_value(pr, "UUID", &v, NULL) == 0)
		uuid = xstrdup(v);
	blkid_free_probe(pr);
	return uuid;
}

/*
 * What tells a filesystem without a UUID or fsid apart, hashed: its type,
 * and the UUID of the block device it is on (exfat's or NTFS's serial,
 * through libblkid), else its source where that is a file or device, else
 * (a FUSE daemon's name, as "squashfuse", the same for every mount of it)
 * the source, the mount point and the filesystem's mount options.
 */
static uint64_t mount_key_hash(struct libmnt_fs *fs)
{
	const char *type = mnt_fs_get_fstype(fs), *src = mnt_fs_get_source(fs);
	struct strbuf sb = STRBUF_INIT;
	struct stat st;
	bool is_path = src && src[0] == '/' && stat(src, &st) == 0;
	char *uuid = is_path && S_ISBLK(st.st_mode) ? device_uuid(src) : NULL;
	uint64_t h;

	strbuf_addf(&sb, "%s", type ? type : "");
	strbuf_addch(&sb, '\0');
	if (uuid)
		strbuf_addf(&sb, "uuid=%s", uuid);
	else if (is_path)
		strbuf_addf(&sb, "source=%s", src);
	else
		strbuf_addf(&sb, "source=%s target=%s options=%s", src ? src : "",
			    mnt_fs_get_target(fs) ? mnt_fs_get_target(fs) : "",
			    mnt_fs_get_fs_options(fs) ? mnt_fs_get_fs_options(fs) : "");
	h = XXH3_64bits(sb.buf, sb.len);
	free(uuid);
	strbuf_release(&sb);
	return h;
}

int mount_key(int fd, char *out, size_t len)
{
	struct statx stx;
	int err, ret = -ENOENT;
	struct libmnt_table *tb;
	struct libmnt_iter *it;
	struct libmnt_fs *fs;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
		return -errno;
	if (!(stx.stx_mask & STATX_MNT_ID))
		return -EOPNOTSUPP;
	tb = mount_table_load(NULL, &err);
	if (!tb)
		return -err;
	it = mnt_new_iter(MNT_ITER_FORWARD);
	while (it && ret < 0 && mnt_table_next_fs(tb, it, &fs) == 0)
		if ((uint64_t)mnt_fs_get_id(fs) == stx.stx_mnt_id) {
			snprintf(out, len, "mnt-%016llx", (unsigned long long)mount_key_hash(fs));
			ret = 0;
		}
	mnt_free_iter(it);
	mount_table_free(tb);
	return ret;
}
