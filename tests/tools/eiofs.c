/*
 * eiofs: a one-file FUSE filesystem for media-error tests.
 *
 * It serves the image named by $EIOFS_IMAGE as /disk, passing reads and
 * writes through, except that a read touching a range listed in
 * $EIOFS_BAD ("OFFSET:LENGTH,OFFSET:LENGTH", bytes) fails with EIO.  A
 * loop device on /disk is then a block device with bad sectors exactly
 * where a test wants them: the host kernel needs nothing special.
 *
 * Reads bypass the kernel's page cache for /disk (direct_io) so that every
 * read of a bad range reaches this daemon and fails, as a bad sector does.
 *
 * With $EIOFS_ARMED=PATH the bad ranges fail only while PATH exists: a
 * test can mount the filesystem on top first (the kernel reads its
 * metadata at mount time) and make a metadata block go bad afterwards.
 *
 * With $EIOFS_STATFS=BLOCKS:BFREE:BAVAIL:FILES:FFREE statfs reports those
 * counters, whatever they say (as some daemons do: ntfs-3g's free inodes
 * can exceed its inodes), for the tests of how fscrub treats a daemon's
 * statfs.
 *
 * With $EIOFS_DANGLING=NAME the root also lists NAME, which cannot be
 * looked up (ENOENT): a directory entry without its inode.  With
 * $EIOFS_REFUSED=NAME:ERRNO it lists NAME, whose look-up fails with ERRNO
 * (a number): what a daemon says, not a refused inode on a disk.
 *
 *     EIOFS_IMAGE=x.img EIOFS_BAD=1048576:4096 eiofs -f MOUNTPOINT
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAX_BAD 64

static int image_fd = -1;
static struct { unsigned long long off, len; } bad[MAX_BAD];
static int nr_bad;
static const char *armed_path;	/* NULL: always armed */

static int parse_bad(const char *s)
{
	while (s && *s) {
		char *end;
		unsigned long long off = strtoull(s, &end, 0), len;

		if (*end != ':' || nr_bad == MAX_BAD)
			return -1;
		len = strtoull(end + 1, &end, 0);
		if (!len || (*end && *end != ','))
			return -1;
		bad[nr_bad].off = off;
		bad[nr_bad++].len = len;
		s = *end ? end + 1 : end;
	}
	return 0;
}

static int touches_bad(off_t off, size_t len)
{
	if (armed_path && access(armed_path, F_OK) != 0)
		return 0;
	for (int i = 0; i < nr_bad; i++)
		if ((unsigned long long)off < bad[i].off + bad[i].len &&
		    bad[i].off < (unsigned long long)off + len)
			return 1;
	return 0;
}

static const char *dangling;	/* a name readdir lists and lookup refuses */
static char refused[256];	/* ... and one it refuses with refused_err */
static int refused_err;
static struct statvfs fixed_statfs;
static int have_fixed_statfs;

static int parse_statfs(const char *s)
{
	unsigned long long v[5];

	if (!s)
		return 0;
	if (sscanf(s, "%llu:%llu:%llu:%llu:%llu", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5)
		return -1;
	fixed_statfs.f_bsize = fixed_statfs.f_frsize = 4096;
	fixed_statfs.f_namemax = 255;
	fixed_statfs.f_blocks = v[0];
	fixed_statfs.f_bfree = v[1];
	fixed_statfs.f_bavail = v[2];
	fixed_statfs.f_files = v[3];
	fixed_statfs.f_ffree = fixed_statfs.f_favail = v[4];
	have_fixed_statfs = 1;
	return 0;
}

static int e_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	if (have_fixed_statfs) {
		*sv = fixed_statfs;
		return 0;
	}
	return fstatvfs(image_fd, sv) < 0 ? -errno : 0;
}

static int e_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (refused[0] && path[0] == '/' && !strcmp(path + 1, refused))
		return -refused_err;
	if (strcmp(path, "/disk"))
		return -ENOENT;
	if (fstat(image_fd, st) < 0)
		return -errno;
	st->st_mode = S_IFREG | 0600;
	st->st_nlink = 1;
	return 0;
}

static int e_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		     struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off, (void)fi, (void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, "disk", NULL, 0, 0);
	if (dangling)
		fill(buf, dangling, NULL, 0, 0);
	if (refused[0])
		fill(buf, refused, NULL, 0, 0);
	return 0;
}

static int e_open(const char *path, struct fuse_file_info *fi)
{
	if (strcmp(path, "/disk"))
		return -ENOENT;
	fi->direct_io = 1;
	return 0;
}

static int e_read(const char *path, char *buf, size_t len, off_t off, struct fuse_file_info *fi)
{
	ssize_t n;

	(void)path, (void)fi;
	if (touches_bad(off, len))
		return -EIO;
	n = pread(image_fd, buf, len, off);
	return n < 0 ? -errno : (int)n;
}

static int e_write(const char *path, const char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	ssize_t n;

	(void)path, (void)fi;
	n = pwrite(image_fd, buf, len, off);
	return n < 0 ? -errno : (int)n;
}

static int e_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path, (void)fi;
	return (datasync ? fdatasync(image_fd) : fsync(image_fd)) < 0 ? -errno : 0;
}

static const struct fuse_operations ops = {
	.getattr = e_getattr,
	.readdir = e_readdir,
	.open = e_open,
	.read = e_read,
	.write = e_write,
	.fsync = e_fsync,
	.statfs = e_statfs,
};

int main(int argc, char **argv)
{
	const char *image = getenv("EIOFS_IMAGE");

	if (!image || parse_bad(getenv("EIOFS_BAD")) < 0 || parse_statfs(getenv("EIOFS_STATFS")) < 0) {
		fprintf(stderr, "eiofs: set EIOFS_IMAGE=FILE and EIOFS_BAD=OFF:LEN[,OFF:LEN...]; "
			"EIOFS_STATFS=BLOCKS:BFREE:BAVAIL:FILES:FFREE\n");
		return 2;
	}
	armed_path = getenv("EIOFS_ARMED");
	dangling = getenv("EIOFS_DANGLING");
	if (getenv("EIOFS_REFUSED") &&
	    sscanf(getenv("EIOFS_REFUSED"), "%255[^:]:%d", refused, &refused_err) != 2) {
		fprintf(stderr, "eiofs: EIOFS_REFUSED=NAME:ERRNO\n");
		return 2;
	}
	image_fd = open(image, O_RDWR | O_CLOEXEC);
	if (image_fd < 0) {
		perror(image);
		return 2;
	}
	return fuse_main(argc, argv, &ops, NULL);
}
