/*
 * xfs_healthmon: the XFS health monitor (XFS_IOC_HEALTH_MONITOR, Linux 7.0).
 *
 * The ioctl, issued on the root directory of a mounted XFS filesystem by
 * a CAP_SYS_ADMIN process of the initial user namespace, returns a new
 * file descriptor; read() on it returns fixed-size binary event records
 * (format V0, 64 bytes each, in the machine's byte order): metadata found
 * sick or corrupt, or healthy again, for the filesystem, an allocation or
 * realtime group or an inode; a shutdown and its reasons; a media error on
 * a device as a range of 512-byte sectors; a failed buffered or direct
 * read or write, or data lost, for a byte range of a file; events the
 * kernel could not queue ("lost"); and the unmount, after which read()
 * returns 0.  poll() says POLLIN when there is something to read.  One
 * monitor per filesystem: a second open fails with EEXIST (xfs_healer may
 * hold it).  A kernel without the ioctl fails with ENOTTY (EINVAL from a
 * kernel that knows the ioctl number but not the format).
 *
 * The definitions here are our own, written from the interface as
 * released in Linux 7.0: fs/xfs/libxfs/xfs_fs.h and fs/xfs/xfs_healthmon.c
 * as merged in torvalds/linux 04a65666a695 ("Merge tag
 * 'health-monitoring-7.0_2026-01-20'", pulled into XFS's 7.0 merge).
 *
 * It knows the ioctl and the record format, nothing of the watcher
 * (xfs_watch.c reads it for fscrub watch).  healthmon_decode() is a pure
 * function of one record and healthmon_read() of what read() returns
 * (both unit-tested).
 */
#ifndef FSCRUB_XFS_HEALTHMON_H
#define FSCRUB_XFS_HEALTHMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The size of one V0 record (struct xfs_health_monitor_event). */
#define HEALTHMON_RECORD_SIZE 64

/* What an event is about: XFS_HEALTH_MONITOR_DOMAIN_*. */
enum healthmon_domain {
	HM_DOMAIN_MOUNT = 0,		/* the whole filesystem (its state) */
	HM_DOMAIN_FS = 1,		/* filesystem-wide metadata */
	HM_DOMAIN_AG = 2,		/* an allocation group's metadata */
	HM_DOMAIN_INODE = 3,		/* an inode's metadata */
	HM_DOMAIN_RTGROUP = 4,		/* a realtime group's metadata */
	HM_DOMAIN_DATADEV = 5,		/* media errors of the data device, */
	HM_DOMAIN_RTDEV = 6,		/* ... of the realtime device, */
	HM_DOMAIN_LOGDEV = 7,		/* ... of the external log device */
	HM_DOMAIN_FILERANGE = 8,	/* a byte range of a file */
};

/* What happened: XFS_HEALTH_MONITOR_TYPE_*. */
enum healthmon_type {
	HM_TYPE_RUNNING = 0,		/* the first event: the monitor works */
	HM_TYPE_LOST = 1,		/* events were dropped (count) */
	HM_TYPE_UNMOUNT = 2,		/* the last event */
	HM_TYPE_SICK = 3,		/* corruption seen at run time */
	HM_TYPE_CORRUPT = 4,		/* corruption found by a scrub */
	HM_TYPE_HEALTHY = 5,		/* metadata checked or repaired good */
	HM_TYPE_SHUTDOWN = 6,		/* the filesystem shut down (reasons) */
	HM_TYPE_MEDIA_ERROR = 7,	/* unreadable sectors (daddr, bbcount) */
	HM_TYPE_BUFREAD = 8,		/* page cache read of a file range failed */
	HM_TYPE_BUFWRITE = 9,		/* page cache writeback failed */
	HM_TYPE_DIOREAD = 10,		/* direct I/O read failed */
	HM_TYPE_DIOWRITE = 11,		/* direct I/O write failed */
	HM_TYPE_DATALOST = 12,		/* media error reported for a file range */
};

/* Shutdown reasons: XFS_HEALTH_SHUTDOWN_*. */
#define HM_SHUTDOWN_META_IO_ERROR	(1u << 0)
#define HM_SHUTDOWN_LOG_IO_ERROR	(1u << 1)
#define HM_SHUTDOWN_FORCE_UMOUNT	(1u << 2)
#define HM_SHUTDOWN_CORRUPT_INCORE	(1u << 3)
#define HM_SHUTDOWN_CORRUPT_ONDISK	(1u << 4)
#define HM_SHUTDOWN_DEVICE_REMOVED	(1u << 5)

/* One decoded record; the fields its domain and type do not use are 0. */
struct healthmon_event {
	enum healthmon_domain domain;
	enum healthmon_type type;
	uint64_t time_ns;	/* when the kernel queued it, ns since the epoch */
	uint32_t mask;		/* FS, AG, RTGROUP, INODE: the sick flags as
				 * FSGEOMETRY, AG_GEOMETRY, BULKSTAT give them */
	uint32_t group;		/* AG, RTGROUP: its number */
	uint64_t ino;		/* INODE, FILERANGE */
	uint32_t gen;		/* INODE, FILERANGE: the inode's generation */
	uint64_t lost;		/* LOST: how many events were dropped */
	uint32_t reasons;	/* SHUTDOWN: HM_SHUTDOWN_* */
	uint64_t daddr;		/* MEDIA_ERROR: first 512-byte sector, */
	uint64_t bbcount;	/* ... and how many */
	uint64_t pos, len;	/* FILERANGE: the bytes of the file */
	int error;		/* FILERANGE: positive errno */
};

/*
 * Open the health monitor of the XFS filesystem whose root directory is
 * root_fd.  Returns the monitor's descriptor (close-on-exec, blocking
 * reads: poll it) or a negative errno: -ENOTTY or -EINVAL when the kernel
 * has no monitor (before Linux 7.0), -EEXIST when another program holds
 * it, -EPERM without CAP_SYS_ADMIN or when root_fd is not the root.
 */
int healthmon_open(int root_fd);

/*
 * Decode one record of HEALTHMON_RECORD_SIZE bytes into ev.  Returns 0,
 * or -ENOMSG for a type or domain this code does not know (a later
 * kernel's), with domain and type filled in and nothing else.
 */
int healthmon_decode(const unsigned char *rec, struct healthmon_event *ev);

/*
 * The stream of one monitor: a record split between two reads is kept
 * until its end comes.  Zero-initialise.
 */
struct healthmon_reader {
	unsigned char partial[HEALTHMON_RECORD_SIZE];
	size_t have;			/* bytes of partial */
	unsigned long long events;	/* records passed to fn */
	unsigned long long unknown;	/* records skipped: -ENOMSG */
	unsigned long long lost;	/* the sum of the LOST events' counts */
};

/*
 * One read() of fd; fn is called for every whole record, in order (not
 * for unknown ones: those are counted in r->unknown).  Returns 1 at end of
 * file (the monitor is detached: unmounted), 0 after a read, or a negative
 * errno from read() (-EAGAIN, -EINTR included).
 */
int healthmon_read(struct healthmon_reader *r, int fd,
		   void (*fn)(const struct healthmon_event *ev, void *arg), void *arg);

/* "sick", "media error", ...: the type for a log line; "unknown" if none. */
const char *healthmon_type_name(enum healthmon_type type);

#endif
