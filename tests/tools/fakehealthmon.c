/*
 * fakehealthmon: an LD_PRELOAD stand-in for the XFS health monitor of
 * Linux 7.0, so that fscrub watch's health monitor path runs end to end on
 * a real XFS under an older kernel.
 *
 * ioctl(fd, XFS_IOC_HEALTH_MONITOR, arg) -- _IOW('X', 68, 32 bytes) -- on
 * the root directory of an XFS filesystem returns the read end of a pipe
 * that holds the bytes of the file $FAKE_HEALTHMON_EVENTS (V0 records the
 * test laid out); the write end is closed, so the reader then sees the end
 * of the file, as after an unmount.  With $FAKE_HEALTHMON_ERRNO=N the
 * ioctl fails with errno N instead (EEXIST: another program has the
 * monitor).  On anything but an XFS root it fails with ENOTTY, as a kernel
 * before 7.0 does.  Every other ioctl goes to the C library's.
 *
 *     LD_PRELOAD=./libfakehealthmon.so FAKE_HEALTHMON_EVENTS=ev.bin fscrub watch ...
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define XFS_SUPER_MAGIC 0x58465342
#define HEALTH_MONITOR _IOW('X', 68, char[32])
/* The XFS root directory's inode number with mkfs.xfs's defaults. */
#define XFS_ROOT_INO 128

int ioctl(int fd, unsigned long req, ...);

static int fake_monitor(int fd)
{
	const char *events = getenv("FAKE_HEALTHMON_EVENTS");
	const char *err = getenv("FAKE_HEALTHMON_ERRNO");
	char buf[65536];	/* a pipe's default capacity: written before anyone reads */
	struct statfs sfs;
	struct stat st;
	int p[2], in;
	ssize_t n;

	if (fstatfs(fd, &sfs) < 0 || sfs.f_type != XFS_SUPER_MAGIC || fstat(fd, &st) < 0 ||
	    st.st_ino != XFS_ROOT_INO) {
		errno = ENOTTY;
		return -1;
	}
	if (err) {
		errno = atoi(err);
		return -1;
	}
	if ((in = open(events, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(in, buf, sizeof(buf));
	close(in);
	if (n < 0 || pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (write(p[1], buf, (size_t)n) != n) {
		close(p[0]);
		close(p[1]);
		errno = EIO;
		return -1;
	}
	close(p[1]);
	return p[0];
}

int ioctl(int fd, unsigned long req, ...)
{
	static int (*real)(int, unsigned long, ...);
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (req == HEALTH_MONITOR && getenv("FAKE_HEALTHMON_EVENTS"))
		return fake_monitor(fd);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	return real(fd, req, arg);
}
