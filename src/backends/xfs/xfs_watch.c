/*
 * xfs_watch: fscrub watch's source of events on XFS, the kernel's health
 * monitor (xfs_healthmon.h, Linux 7.0); the backend's watch hooks
 * (backend.h, backends/watch.h).
 *
 * watch_open opens the monitor on the mount root; where the kernel has
 * none (ENOTTY, EINVAL) or another program holds it (EEXIST), it answers
 * WATCH_FS_ERROR and the watcher follows FAN_FS_ERROR instead.  Each
 * event is said on stderr as the kernel gave it, with the path of the
 * inode it names (XFS's file handle of the inode and generation);
 * metadata sick or corrupt, a shutdown, failed file I/O and lost events
 * are events for the watcher (history, metrics, the inode checked, the
 * scrub started); running, unmount and healthy only logged.  A media
 * error names only sectors of a device: those of the data device are
 * mapped to their owners (xfs_media.h, GETFSMAP), each file among them
 * recorded with its path and checked (its data read again directly, an
 * attribute fork or extent map by a statx()).
 */
#include "backends/xfs/xfs_health.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/watch.h"
#include "backends/xfs/xfs_healthmon.h"
#include "backends/xfs/xfs_media.h"
#include "lib/fserror.h"
#include "lib/fsmounts.h"
#include "lib/strbuf.h"

/*
 * At most this many parts of one media error are listed, recorded and
 * checked: a whole failed device is one event, and the scrub it starts
 * reads everything anyway.
 */
#define MEDIA_PARTS_MAX 64

/* The monitor's reader (watch_source.state); watch_source.fd is its descriptor. */
struct hm_state {
	struct healthmon_reader r;
};

static const char *target(const struct watch_fs *wf)
{
	return watch_fs_mount(wf)->target;
}

/* The path of XFS inode (ino, gen) of wf, by its handle: an O_PATH descriptor or -errno. */
static int xfs_inode_path(const struct watch_fs *wf, uint64_t ino, uint32_t gen,
			  struct strbuf *path)
{
	struct fserror_event ev = { 0 };
	uint64_t got = ino;
	int root = watch_fs_root(wf), fd;

	if (root < 0)
		return root;
	fserror_xfs_handle(&ev, ino, gen);
	fd = fserror_resolve(root, &ev, path, &got);
	close(root);
	return fd;
}

/* "AG 3: inobt finobt": the object of a metadata event and its sick flags. */
static void hm_object(struct strbuf *sb, const struct healthmon_event *ev)
{
	struct strbuf flags = STRBUF_INIT;

	switch (ev->domain) {
	case HM_DOMAIN_FS:
		strbuf_addstr(sb, "filesystem");
		xfs_health_flag_text(XFS_HEALTH_FS, ev->mask, &flags);
		break;
	case HM_DOMAIN_AG:
		strbuf_addf(sb, "AG %u", ev->group);
		xfs_health_flag_text(XFS_HEALTH_AG, ev->mask, &flags);
		break;
	case HM_DOMAIN_RTGROUP:
		strbuf_addf(sb, "rtgroup %u", ev->group);
		xfs_health_flag_text(XFS_HEALTH_RTGROUP, ev->mask, &flags);
		break;
	default:
		strbuf_addf(sb, "inode %llu", (unsigned long long)ev->ino);
		xfs_health_flag_text(XFS_HEALTH_INODE, ev->mask, &flags);
		break;
	}
	strbuf_addf(sb, ": %s", flags.buf);
	strbuf_release(&flags);
}

static void hm_shutdown(struct strbuf *sb, uint32_t reasons)
{
	static const char *const names[] = {
		"metadata I/O error", "log I/O error", "forced unmount", "in-memory corruption",
		"on-disk corruption", "device removed",
	};

	strbuf_addstr(sb, "shut down:");
	for (unsigned b = 0; b < 32; b++) {
		if (!(reasons & (1U << b)))
			continue;
		if (b < sizeof(names) / sizeof(names[0]))
			strbuf_addf(sb, " %s,", names[b]);
		else
			strbuf_addf(sb, " reason bit %u,", b);
	}
	if (reasons)
		sb->buf[--sb->len] = '\0';	/* the last comma */
	else
		strbuf_addstr(sb, " no reason given");
}

static const char *hm_device(enum healthmon_domain d)
{
	return d == HM_DOMAIN_RTDEV ? "realtime device" : d == HM_DOMAIN_LOGDEV ? "log device" :
	       "data device";
}

/* A file range event: its kind for the history, and the line. */
static const char *hm_filerange(struct strbuf *sb, const struct healthmon_event *ev)
{
	static const char *const kinds[] = {
		[HM_TYPE_BUFREAD] = "xfs_buffered_read", [HM_TYPE_BUFWRITE] = "xfs_buffered_write",
		[HM_TYPE_DIOREAD] = "xfs_direct_read", [HM_TYPE_DIOWRITE] = "xfs_direct_write",
		[HM_TYPE_DATALOST] = "xfs_data_lost",
	};

	strbuf_addf(sb, "%s: %s (errno %d), inode %llu, bytes %llu-%llu",
		    healthmon_type_name(ev->type), strerror(ev->error), ev->error,
		    (unsigned long long)ev->ino, (unsigned long long)ev->pos,
		    (unsigned long long)(ev->pos + ev->len - (ev->len ? 1 : 0)));
	return kinds[ev->type];
}


/*
 * What the event says, into e and what; false for the events that are
 * only logged (running, unmount, healthy).
 */
static bool hm_describe(const struct watch_fs *wf, const struct healthmon_event *ev,
			struct watch_event *e, struct strbuf *what)
{
	switch (ev->type) {
	case HM_TYPE_RUNNING:
	case HM_TYPE_UNMOUNT:
	case HM_TYPE_HEALTHY:
		if (ev->type == HM_TYPE_UNMOUNT || watch_fs_verbose(wf)) {
			strbuf_addstr(what, ev->type == HM_TYPE_RUNNING ? "health monitor running" :
				      ev->type == HM_TYPE_UNMOUNT ? "health monitor: unmounted" :
				      "metadata healthy: ");
			if (ev->type == HM_TYPE_HEALTHY)
				hm_object(what, ev);
		}
		return false;
	case HM_TYPE_LOST:
		e->kind = "xfs_lost_events";
		e->error_count = ev->lost > UINT_MAX ? UINT_MAX : (unsigned)ev->lost;
		strbuf_addf(what, "the kernel lost %llu health event%s",
			    (unsigned long long)ev->lost, ev->lost == 1 ? "" : "s");
		return true;
	case HM_TYPE_SICK:
	case HM_TYPE_CORRUPT:
		e->kind = ev->type == HM_TYPE_SICK ? "xfs_sick" : "xfs_corrupt";
		strbuf_addstr(what, ev->type == HM_TYPE_SICK ? "metadata sick: " :
			      "metadata corrupt (a scrub found it): ");
		hm_object(what, ev);
		e->ino = ev->domain == HM_DOMAIN_INODE ? ev->ino : 0;
		return true;
	case HM_TYPE_SHUTDOWN:
		e->kind = "xfs_shutdown";
		hm_shutdown(what, ev->reasons);
		return true;
	case HM_TYPE_MEDIA_ERROR:
		e->kind = "xfs_media_error";
		strbuf_addf(what, "media error on the %s: 512-byte sectors %llu-%llu (%llu)",
			    hm_device(ev->domain), (unsigned long long)ev->daddr,
			    (unsigned long long)(ev->daddr + ev->bbcount - (ev->bbcount ? 1 : 0)),
			    (unsigned long long)ev->bbcount);
		return true;
	default:
		e->kind = hm_filerange(what, ev);
		e->error = ev->error;
		e->ino = ev->ino;
		return true;
	}
}

/* One inode that owns part of a media error: resolved, recorded, checked. */
static void hm_media_inode(struct watch_fs *wf, const struct media_owner *o,
			   struct watch_event *e)
{
	struct strbuf path = STRBUF_INIT;
	int fd = xfs_inode_path(wf, o->owner, o->gen, &path);

	e->ino = o->owner;
	e->path = fd >= 0 ? path.buf : NULL;
	if (fd >= 0)
		fprintf(stderr, ", path %s\n", path.buf);
	else
		fprintf(stderr, ", path not resolved: %s\n", strerror(-fd));
	watch_fs_record(wf, e);
	if (fd >= 0 && media_owner_is_data(o)) {
		watch_fs_quiet(wf, o->dev_off, o->len);
		watch_fs_read_range(wf, fd, path.buf, o->owner, o->file_off, o->len);
	} else if (fd >= 0) {
		watch_fs_probe(wf, fd, path.buf, o->owner);
	}
	if (fd >= 0)
		close(fd);
	strbuf_release(&path);
}

/* The owners of the bad sectors of a data device media error, or -errno. */
static int hm_media_owners(const struct watch_fs *wf, const struct healthmon_event *ev,
			   struct media_owners *o)
{
	/* daddr and bbcount count 512-byte sectors whatever the device's sector size */
	uint64_t off = ev->daddr * 512, len = ev->bbcount * 512;
	int root, ret;

	if (ev->domain != HM_DOMAIN_DATADEV)
		return -ENODEV;
	if (ev->bbcount > UINT64_MAX / 512 || ev->daddr > (UINT64_MAX - len) / 512)
		return -ERANGE;
	if ((ret = root = watch_fs_root(wf)) >= 0) {
		ret = xfs_media_owners(root, watch_fs_mount(wf)->devno, off, len, o);
		close(root);
	}
	return ret;
}

/*
 * A media error: what its sectors hold (GETFSMAP), a line for each part;
 * each file among the owners recorded as an event with its path and
 * checked.  Without a file among the owners the event is recorded as the
 * kernel gave it.  One event for the counters and the scrub.
 */
static void hm_media_error(struct watch_fs *wf, const struct healthmon_event *ev,
			   struct watch_event *e)
{
	struct media_owners o = { 0 };
	size_t files = 0;
	int ret = hm_media_owners(wf, ev, &o);

	if (ret)
		fprintf(stderr, "fscrub watch: %s: XFS media error: the sectors are not mapped "
			"to files: %s\n", target(wf), ret == -ENODEV ?
			"they are not on the data device" : strerror(-ret));
	for (size_t i = 0; i < o.n && i < MEDIA_PARTS_MAX; i++) {
		struct strbuf what = STRBUF_INIT;

		media_owner_describe(&o.v[i], &what);
		fprintf(stderr, "fscrub watch: %s: XFS media error: device bytes %llu-%llu: %s",
			target(wf), (unsigned long long)o.v[i].dev_off,
			(unsigned long long)(o.v[i].dev_off + o.v[i].len - 1), what.buf);
		strbuf_release(&what);
		if (!media_owner_is_inode(&o.v[i])) {
			fputc('\n', stderr);
			continue;
		}
		hm_media_inode(wf, &o.v[i], e);
		files++;
	}
	if (o.n > MEDIA_PARTS_MAX)
		fprintf(stderr, "fscrub watch: %s: XFS media error: %zu more parts not listed\n",
			target(wf), o.n - MEDIA_PARTS_MAX);
	e->ino = 0;
	e->path = NULL;
	if (!files)
		watch_fs_record(wf, e);
	watch_fs_counted(wf);
	watch_fs_trigger(wf, e);
	media_owners_release(&o);
}

/* One event of the monitor: logged; the others as a FAN_FS_ERROR event. */
static void on_hm_event(const struct healthmon_event *ev, void *arg)
{
	struct watch_fs *wf = arg;
	struct watch_event e = { .error_count = 1 };
	struct strbuf what = STRBUF_INIT, path = STRBUF_INIT;
	bool act = hm_describe(wf, ev, &e, &what);
	int fd = -ENOENT;

	if (e.ino)
		fd = xfs_inode_path(wf, e.ino, ev->gen, &path);
	if (fd >= 0)
		e.path = path.buf;
	if (what.len) {
		fprintf(stderr, "fscrub watch: %s: XFS %s", target(wf), what.buf);
		if (e.ino && fd >= 0)
			fprintf(stderr, ", path %s", path.buf);
		else if (e.ino)
			fprintf(stderr, ", path not resolved: %s", strerror(-fd));
		fputc('\n', stderr);
	}
	if (act && ev->type == HM_TYPE_MEDIA_ERROR) {
		hm_media_error(wf, ev, &e);
	} else if (act) {
		watch_fs_event(wf, &e);
		if (fd >= 0)
			watch_fs_probe(wf, fd, path.buf, e.ino);
		watch_fs_trigger(wf, &e);
	}
	if (fd >= 0)
		close(fd);
	strbuf_release(&what);
	strbuf_release(&path);
}

/* What the monitor has; at its end (unmounted) or on an error, it is closed. */
void xfs_watch_read(struct watch_fs *wf, struct watch_source *src)
{
	struct healthmon_reader *r = &((struct hm_state *)src->state)->r;
	unsigned long long unknown = r->unknown;
	int ret = healthmon_read(r, src->fd, on_hm_event, wf);

	if (r->unknown > unknown)
		fprintf(stderr, "fscrub watch: %s: skipped %llu XFS health event%s of a type "
			"fscrub does not know (%llu in all)\n", target(wf), r->unknown - unknown,
			r->unknown - unknown == 1 ? "" : "s", r->unknown);
	if (ret == 0 || ret == -EAGAIN || ret == -EINTR)
		return;
	if (ret < 0)
		fprintf(stderr, "fscrub watch: %s: cannot read the XFS health monitor: %s\n",
			target(wf), strerror(-ret));
	else if (watch_fs_verbose(wf))
		fprintf(stderr, "fscrub watch: %s: the XFS health monitor ended\n", target(wf));
	close(src->fd);
	src->fd = -1;
}

/*
 * The health monitor, if the kernel has one (Linux 7.0) and no other
 * program holds it; else FAN_FS_ERROR.  The reason it cannot be had is
 * said once: in -v when the kernel has none (the usual case before 7.0),
 * always otherwise.
 */
int xfs_watch_open(struct watch_fs *wf, int root, struct watch_source *src)
{
	int fd = healthmon_open(root);

	if (fd == -ENOTTY || fd == -EINVAL) {
		if (watch_fs_verbose(wf))
			fprintf(stderr, "fscrub watch: %s (xfs): this kernel has no XFS health "
				"monitor (XFS_IOC_HEALTH_MONITOR: %s; from Linux 7.0)\n",
				target(wf), strerror(-fd));
		return WATCH_FS_ERROR;
	}
	if (fd < 0) {
		fprintf(stderr, "fscrub watch: %s (xfs): cannot open the XFS health monitor: %s%s\n",
			target(wf), strerror(-fd),
			fd == -EEXIST ? " (another program, xfs_healer perhaps, has it)" : "");
		return WATCH_FS_ERROR;
	}
	/* read() returns EAGAIN instead of waiting: poll() says when to read */
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0) {
		fprintf(stderr, "fscrub watch: %s (xfs): cannot use the XFS health monitor: %s\n",
			target(wf), strerror(errno));
		close(fd);
		return WATCH_FS_ERROR;
	}
	*src = (struct watch_source){ .fd = fd, .state = xcalloc(1, sizeof(struct hm_state)) };
	fprintf(stderr, "fscrub watch: watching %s (xfs): XFS health monitor\n", target(wf));
	return 0;
}

void xfs_watch_close(struct watch_source *src)
{
	if (src->fd >= 0)
		close(src->fd);
	src->fd = -1;
	free(src->state);
	src->state = NULL;
}
