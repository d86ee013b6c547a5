/*
 * fserror: fanotify FAN_FS_ERROR events; see fserror.h.
 */
#include "lib/fserror.h"

#include <errno.h>
#include <linux/fanotify.h>
#include <stdio.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "lib/strbuf.h"

/* File handle types of include/linux/exportfs.h that start with the inode number. */
#define FILEID_INO32_GEN	1	/* u32 ino, u32 generation: ext2/3/4 */
#define FILEID_INO32_GEN_PARENT	2
#define FILEID_INO64_GEN	0x81	/* u64 ino, u32 generation: XFS inodes above 2^32 */
#define FILEID_INO64_GEN_PARENT	0x82
#define FILEID_INVALID		0xff	/* an event about no inode */

int fserror_open(void)
{
	int fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_CLOEXEC | FAN_NONBLOCK,
			       O_RDONLY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int fserror_mark(int fan_fd, const char *path)
{
	if (fanotify_mark(fan_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, FAN_FS_ERROR,
			  AT_FDCWD, path) < 0)
		return -errno;
	return 0;
}

/* Which kernel started reporting errors of a filesystem type. */
static const struct {
	const char *fstype;
	unsigned major, minor;
} reporters[] = {
	{ "ext4", 5, 16 },	/* fsnotify_sb_error() in ext4's error paths */
	{ "xfs", 7, 0 },	/* xfs_healthmon and fsnotify_sb_error() */
};

static void kernel_version(unsigned *major, unsigned *minor)
{
	struct utsname u;

	*major = *minor = 0;
	if (uname(&u) == 0 && sscanf(u.release, "%u.%u", major, minor) < 2)
		*minor = 0;
}

bool fserror_supported(const char *fstype, struct strbuf *why)
{
	unsigned major, minor;

	kernel_version(&major, &minor);
	for (size_t i = 0; i < sizeof(reporters) / sizeof(reporters[0]); i++) {
		if (strcmp(fstype, reporters[i].fstype))
			continue;
		if (major > reporters[i].major ||
		    (major == reporters[i].major && minor >= reporters[i].minor))
			return true;
		strbuf_addf(why, "%s reports errors to fanotify from Linux %u.%u, this is %u.%u",
			    fstype, reporters[i].major, reporters[i].minor, major, minor);
		return false;
	}
	strbuf_addf(why, "%s does not report errors to fanotify", fstype);
	return false;
}

static void handle_ino(struct fserror_event *ev)
{
	uint32_t ino32;
	uint64_t ino64;

	if ((ev->handle_type == FILEID_INO32_GEN || ev->handle_type == FILEID_INO32_GEN_PARENT) &&
	    ev->handle_bytes >= sizeof(ino32)) {
		memcpy(&ino32, ev->handle, sizeof(ino32));
		ev->ino = ino32;
	} else if ((ev->handle_type == FILEID_INO64_GEN ||
		    ev->handle_type == FILEID_INO64_GEN_PARENT) &&
		   ev->handle_bytes >= sizeof(ino64)) {
		memcpy(&ino64, ev->handle, sizeof(ino64));
		ev->ino = ino64;
	}
}

/* A FAN_EVENT_INFO_TYPE_FID record of len bytes into ev. */
static int parse_fid(const unsigned char *rec, size_t len, struct fserror_event *ev)
{
	struct fanotify_event_info_fid fid;
	struct file_handle fh;
	size_t off = sizeof(fid);

	if (len < sizeof(fid) + sizeof(fh))
		return -EINVAL;
	memcpy(&fid, rec, sizeof(fid));
	memcpy(&fh, rec + off, sizeof(fh));
	memcpy(ev->fsid, &fid.fsid, sizeof(ev->fsid));
	if (fh.handle_bytes > len - off - sizeof(fh))
		return -EINVAL;
	ev->handle_type = fh.handle_type;
	ev->has_handle = fh.handle_type != FILEID_INVALID && fh.handle_bytes > 0 &&
			 fh.handle_bytes <= FSERROR_HANDLE_MAX;
	if (ev->has_handle) {
		ev->handle_bytes = fh.handle_bytes;
		memcpy(ev->handle, rec + off + sizeof(fh), fh.handle_bytes);
		handle_ino(ev);
	}
	return 0;
}

/* The info records after the metadata of one event. */
static int parse_records(const unsigned char *p, size_t len, struct fserror_event *ev)
{
	while (len > 0) {
		struct fanotify_event_info_header hdr;
		struct fanotify_event_info_error err;

		if (len < sizeof(hdr))
			return -EINVAL;
		memcpy(&hdr, p, sizeof(hdr));
		if (hdr.len < sizeof(hdr) || hdr.len > len)
			return -EINVAL;
		if (hdr.info_type == FAN_EVENT_INFO_TYPE_ERROR) {
			if (hdr.len < sizeof(err))
				return -EINVAL;
			memcpy(&err, p, sizeof(err));
			ev->error = err.error;
			ev->error_count = err.error_count;
		} else if (hdr.info_type == FAN_EVENT_INFO_TYPE_FID) {
			int ret = parse_fid(p, hdr.len, ev);

			if (ret)
				return ret;
		}
		p += hdr.len;
		len -= hdr.len;
	}
	return 0;
}

int fserror_parse(const void *buf, size_t len,
		  void (*fn)(const struct fserror_event *ev, void *arg), void *arg)
{
	const unsigned char *p = buf;
	int nr = 0;

	while (len > 0) {
		struct fanotify_event_metadata md;
		struct fserror_event ev;

		if (len < sizeof(md))
			return -EINVAL;
		memcpy(&md, p, sizeof(md));
		if (md.event_len < md.metadata_len || md.metadata_len < sizeof(md) ||
		    md.event_len > len || md.vers != FANOTIFY_METADATA_VERSION)
			return -EINVAL;
		if (md.mask & FAN_FS_ERROR) {
			memset(&ev, 0, sizeof(ev));
			if (parse_records(p + md.metadata_len, md.event_len - md.metadata_len, &ev))
				return -EINVAL;
			fn(&ev, arg);
			nr++;
		}
		if (md.fd >= 0)		/* never with FAN_REPORT_FID, but do not leak one */
			close(md.fd);
		p += md.event_len;
		len -= md.event_len;
	}
	return nr;
}

void fserror_xfs_handle(struct fserror_event *ev, uint64_t ino, uint32_t gen)
{
	ev->has_handle = true;
	ev->handle_type = FILEID_INO64_GEN;
	ev->handle_bytes = sizeof(ino) + sizeof(gen);	/* packed: u64 ino, u32 gen */
	memcpy(ev->handle, &ino, sizeof(ino));
	memcpy(ev->handle + sizeof(ino), &gen, sizeof(gen));
	ev->ino = ino;
}

int fserror_resolve(int mount_fd, const struct fserror_event *ev, struct strbuf *path,
		    uint64_t *ino)
{
	union {
		struct file_handle fh;
		unsigned char bytes[sizeof(struct file_handle) + FSERROR_HANDLE_MAX];
	} h;
	char link[64], target[4096];
	struct stat st;
	ssize_t n;
	int fd;

	if (!ev->has_handle)
		return -ENOENT;
	h.fh.handle_bytes = ev->handle_bytes;
	h.fh.handle_type = ev->handle_type;
	memcpy(h.fh.f_handle, ev->handle, ev->handle_bytes);
	fd = open_by_handle_at(mount_fd, &h.fh, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target));
	if (n < 0 || (size_t)n >= sizeof(target) || fstat(fd, &st) < 0) {
		int err = n < 0 || (size_t)n < sizeof(target) ? -errno : -ENAMETOOLONG;

		close(fd);
		return err;
	}
	strbuf_add(path, target, (size_t)n);
	*ino = st.st_ino;
	return fd;
}
