/*
 * xfs_healthmon: the XFS health monitor; see xfs_healthmon.h.
 *
 * The record layout (V0), offsets in bytes, every field in the machine's
 * byte order:
 *     0 u32 domain       4 u32 type       8 u64 time_ns
 *    16 a union of 32 bytes, by domain and type:
 *         lost:      16 u64 count
 *         fs:        16 u32 mask
 *         group:     16 u32 mask   20 u32 gno
 *         inode:     16 u32 mask   20 u32 gen   24 u64 ino
 *         shutdown:  16 u32 reasons
 *         media:     16 u64 daddr  24 u64 bbcount
 *         filerange: 16 u64 pos    24 u64 len   32 u64 ino  40 u32 gen
 *                    44 u32 error (positive)
 *    48 u64 pad[2], zero
 * The ioctl's argument is struct xfs_health_monitor: u64 flags, u8 format
 * (0: V0), u8 pad[23] (zero), 32 bytes, passed _IOW('X', 68).
 */
#include "backends/xfs/xfs_healthmon.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct healthmon_args {
	uint64_t flags;		/* 0: deltas only, not every health update */
	uint8_t format;		/* HEALTHMON_FMT_V0 */
	uint8_t pad[23];
};

_Static_assert(sizeof(struct healthmon_args) == 32, "struct xfs_health_monitor is 32 bytes");

#define HEALTHMON_FMT_V0 0
#define HEALTHMON_IOC _IOW('X', 68, struct healthmon_args)

/* Reads are whole pages of records: 64 of them per read(). */
#define READ_BUF 4096

int healthmon_open(int root_fd)
{
	struct healthmon_args args;
	int fd;

	memset(&args, 0, sizeof(args));
	args.format = HEALTHMON_FMT_V0;
	fd = ioctl(root_fd, HEALTHMON_IOC, &args);
	return fd < 0 ? -errno : fd;
}

static uint32_t u32_at(const unsigned char *rec, size_t off)
{
	uint32_t v;

	memcpy(&v, rec + off, sizeof(v));
	return v;
}

static uint64_t u64_at(const unsigned char *rec, size_t off)
{
	uint64_t v;

	memcpy(&v, rec + off, sizeof(v));
	return v;
}

/* The metadata events: the mask, and which object by domain. */
static int decode_metadata(const unsigned char *rec, struct healthmon_event *ev)
{
	ev->mask = u32_at(rec, 16);
	switch (ev->domain) {
	case HM_DOMAIN_FS:
		return 0;
	case HM_DOMAIN_AG:
	case HM_DOMAIN_RTGROUP:
		ev->group = u32_at(rec, 20);
		return 0;
	case HM_DOMAIN_INODE:
		ev->gen = u32_at(rec, 20);
		ev->ino = u64_at(rec, 24);
		return 0;
	default:
		ev->mask = 0;
		return -ENOMSG;
	}
}

static bool is_device(enum healthmon_domain d)
{
	return d == HM_DOMAIN_DATADEV || d == HM_DOMAIN_RTDEV || d == HM_DOMAIN_LOGDEV;
}

int healthmon_decode(const unsigned char *rec, struct healthmon_event *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->domain = (enum healthmon_domain)u32_at(rec, 0);
	ev->type = (enum healthmon_type)u32_at(rec, 4);
	ev->time_ns = u64_at(rec, 8);
	switch (ev->type) {
	case HM_TYPE_RUNNING:
	case HM_TYPE_UNMOUNT:
		return 0;
	case HM_TYPE_LOST:
		ev->lost = u64_at(rec, 16);
		return 0;
	case HM_TYPE_SHUTDOWN:
		ev->reasons = u32_at(rec, 16);
		return 0;
	case HM_TYPE_SICK:
	case HM_TYPE_CORRUPT:
	case HM_TYPE_HEALTHY:
		return decode_metadata(rec, ev);
	case HM_TYPE_MEDIA_ERROR:
		if (!is_device(ev->domain))
			return -ENOMSG;
		ev->daddr = u64_at(rec, 16);
		ev->bbcount = u64_at(rec, 24);
		return 0;
	case HM_TYPE_BUFREAD:
	case HM_TYPE_BUFWRITE:
	case HM_TYPE_DIOREAD:
	case HM_TYPE_DIOWRITE:
	case HM_TYPE_DATALOST:
		if (ev->domain != HM_DOMAIN_FILERANGE)
			return -ENOMSG;
		ev->pos = u64_at(rec, 16);
		ev->len = u64_at(rec, 24);
		ev->ino = u64_at(rec, 32);
		ev->gen = u32_at(rec, 40);
		ev->error = (int)u32_at(rec, 44);
		return 0;
	}
	return -ENOMSG;
}

static void deliver(struct healthmon_reader *r, const unsigned char *rec,
		    void (*fn)(const struct healthmon_event *ev, void *arg), void *arg)
{
	struct healthmon_event ev;

	if (healthmon_decode(rec, &ev)) {
		r->unknown++;
		return;
	}
	if (ev.type == HM_TYPE_LOST)
		r->lost += ev.lost;
	r->events++;
	fn(&ev, arg);
}

int healthmon_read(struct healthmon_reader *r, int fd,
		   void (*fn)(const struct healthmon_event *ev, void *arg), void *arg)
{
	unsigned char buf[READ_BUF];
	const unsigned char *p = buf;
	ssize_t n = read(fd, buf, sizeof(buf));
	size_t left;

	if (n < 0)
		return -errno;
	if (n == 0)
		return 1;
	left = (size_t)n;
	if (r->have) {		/* the end of the record the last read split */
		size_t take = HEALTHMON_RECORD_SIZE - r->have;

		if (take > left)
			take = left;
		memcpy(r->partial + r->have, p, take);
		r->have += take;
		p += take;
		left -= take;
		if (r->have < HEALTHMON_RECORD_SIZE)
			return 0;
		r->have = 0;
		deliver(r, r->partial, fn, arg);
	}
	for (; left >= HEALTHMON_RECORD_SIZE; p += HEALTHMON_RECORD_SIZE,
	     left -= HEALTHMON_RECORD_SIZE)
		deliver(r, p, fn, arg);
	memcpy(r->partial, p, left);
	r->have = left;
	return 0;
}

const char *healthmon_type_name(enum healthmon_type type)
{
	static const char *const names[] = {
		[HM_TYPE_RUNNING] = "running", [HM_TYPE_LOST] = "lost events",
		[HM_TYPE_UNMOUNT] = "unmount", [HM_TYPE_SICK] = "sick",
		[HM_TYPE_CORRUPT] = "corrupt", [HM_TYPE_HEALTHY] = "healthy",
		[HM_TYPE_SHUTDOWN] = "shutdown", [HM_TYPE_MEDIA_ERROR] = "media error",
		[HM_TYPE_BUFREAD] = "buffered read error",
		[HM_TYPE_BUFWRITE] = "buffered write error",
		[HM_TYPE_DIOREAD] = "direct read error",
		[HM_TYPE_DIOWRITE] = "direct write error",
		[HM_TYPE_DATALOST] = "data lost",
	};

	if ((unsigned)type < sizeof(names) / sizeof(names[0]) && names[type])
		return names[type];
	return "unknown";
}
