/*
 * btrfs_health: btrfs device error counters (BTRFS_IOC_GET_DEV_STATS), the
 * numbers `btrfs device stats` prints, for fscrub health (backends/health.h)
 * and fscrub watch (backends/watch.h); see btrfs_health.h.  A counter is
 * persistent (kept in the device tree) until reset with
 * `btrfs device stats -z`, so any nonzero counter is a problem, and one
 * that rose between two polls an event.
 */
#include "backends/btrfs/btrfs_health.h"

#include <errno.h>
#include <linux/btrfs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backends/health.h"
#include "backends/watch.h"
#include "lib/fsmounts.h"
#include "lib/strbuf.h"

/* The counters the kernel keeps per device: BTRFS_DEV_STAT_VALUES_MAX of them. */
#define NR_DEV_STATS 5

/* One btrfs device's error counters (BTRFS_DEV_STAT_* order). */
struct btrfs_devstat {
	uint64_t devid;
	bool missing;			/* mounted degraded without it: no path, counters 0 */
	char path[1024];
	uint64_t v[NR_DEV_STATS];
};

/* The counters a watched filesystem had at its last poll (watch_source.state). */
struct devstats {
	struct btrfs_devstat *v;
	size_t nr;
};

/* The counter names, as btrfs device stats prints them. */
static const char *const stat_names[NR_DEV_STATS] = {
	[BTRFS_DEV_STAT_WRITE_ERRS] = "write_io_errs",
	[BTRFS_DEV_STAT_READ_ERRS] = "read_io_errs",
	[BTRFS_DEV_STAT_FLUSH_ERRS] = "flush_io_errs",
	[BTRFS_DEV_STAT_CORRUPTION_ERRS] = "corruption_errs",
	[BTRFS_DEV_STAT_GENERATION_ERRS] = "generation_errs",
};

static int one_device(int fd, uint64_t devid, struct btrfs_devstat *d)
{
	struct btrfs_ioctl_dev_info_args info = { .devid = devid };
	struct btrfs_ioctl_get_dev_stats s = { .devid = devid, .nr_items = NR_DEV_STATS };

	if (ioctl(fd, BTRFS_IOC_DEV_INFO, &info) < 0)
		return -errno;
	memset(d, 0, sizeof(*d));
	d->devid = devid;
	/*
	 * A device the filesystem was mounted without (-o degraded) has no
	 * path, or "<missing disk>" where it had been scanned before.
	 */
	if (!info.path[0] || !strcmp((const char *)info.path, "<missing disk>")) {
		d->missing = true;
		return 0;
	}
	if (ioctl(fd, BTRFS_IOC_GET_DEV_STATS, &s) < 0)
		return -errno;
	memcpy(d->path, info.path, sizeof(d->path) - 1);
	for (unsigned k = 0; k < NR_DEV_STATS && k < s.nr_items; k++)
		d->v[k] = s.values[k];
	return 0;
}

/*
 * Every device of the btrfs filesystem fd is on: *devs (malloc'ed, the
 * caller frees) and *nr, or a negative errno (*devs untouched).
 */
static int devstats_read(int fd, struct btrfs_devstat **devs, size_t *nr)
{
	struct btrfs_ioctl_fs_info_args fs = { 0 };
	struct btrfs_devstat *v;
	size_t n = 0;

	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fs) < 0)
		return -errno;
	v = xcalloc(fs.max_id ? fs.max_id : 1, sizeof(*v));
	/*
	 * Device ids run from 1 to max_id with holes where devices were
	 * removed; num_devices does not count seed devices, whose ids come
	 * first, so every id is asked.
	 */
	for (uint64_t id = 1; id <= fs.max_id; id++) {
		int ret = one_device(fd, id, &v[n]);

		if (ret == -ENODEV)
			continue;
		if (ret) {
			free(v);
			return ret;
		}
		n++;
	}
	*devs = v;
	*nr = n;
	return 0;
}

static void device(struct health *h, const struct btrfs_devstat *d, json_object *arr)
{
	json_object *o = json_object_new_object();
	struct strbuf sb = STRBUF_INIT;
	uint64_t total = 0;

	json_object_object_add(o, "devid", json_object_new_uint64(d->devid));
	json_object_object_add(o, "path", json_object_new_string(d->path));
	json_object_object_add(o, "missing", json_object_new_boolean(d->missing));
	if (d->missing) {
		json_object_array_add(arr, o);
		health_problem(h, "devid %llu is missing: the filesystem is mounted without it "
			       "(degraded)", (unsigned long long)d->devid);
		return;
	}
	for (unsigned k = 0; k < NR_DEV_STATS; k++) {
		json_object_object_add(o, stat_names[k],
				       json_object_new_uint64(d->v[k]));
		strbuf_addf(&sb, "%s%s %llu", k ? ", " : "", stat_names[k],
			    (unsigned long long)d->v[k]);
		total += d->v[k];
	}
	json_object_array_add(arr, o);
	if (total)
		health_problem(h, "devid %llu %s: %s", (unsigned long long)d->devid, d->path,
			       sb.buf);
	else
		health_line(h, "devid %llu %s: %s", (unsigned long long)d->devid, d->path,
			    sb.buf);
	strbuf_release(&sb);
}

int btrfs_health(struct health *h)
{
	struct btrfs_devstat *devs;
	json_object *arr;
	size_t nr;
	int fd = health_open_root(h), ret = fd;

	if (fd >= 0) {
		ret = devstats_read(fd, &devs, &nr);
		close(fd);
	}
	if (ret)
		return ret;
	h->source = "btrfs device stats";
	arr = json_object_new_array();
	for (size_t i = 0; i < nr; i++)
		device(h, &devs[i], arr);
	json_object_object_add(h->detail, "devices", arr);
	free(devs);
	return 0;
}

int btrfs_watch_open(struct watch_fs *wf, int root, struct watch_source *src)
{
	const struct fsmount *m = watch_fs_mount(wf);
	struct devstats *last = xcalloc(1, sizeof(*last));
	int ret = devstats_read(root, &last->v, &last->nr);

	if (ret) {
		fprintf(stderr, "fscrub watch: not watching %s (btrfs): cannot read the device "
			"error counters: %s\n", m->target, strerror(-ret));
		free(last);
		return ret;
	}
	*src = (struct watch_source){ .fd = -1, .timed = true, .state = last };
	fprintf(stderr, "fscrub watch: watching %s (btrfs): device error counters every %llu s\n",
		m->target, watch_fs_poll_interval(wf));
	return 0;
}

/* Say each counter of now that rose since last; true if one did. */
static bool rose(const struct fsmount *m, const struct devstats *last,
		 const struct btrfs_devstat *now, size_t nr)
{
	bool any = false;

	for (size_t i = 0; i < nr; i++)
		for (size_t j = 0; j < last->nr; j++) {
			if (last->v[j].devid != now[i].devid)
				continue;
			for (unsigned k = 0; k < NR_DEV_STATS; k++) {
				if (now[i].v[k] <= last->v[j].v[k])
					continue;
				fprintf(stderr, "fscrub watch: %s: devid %llu %s: %s %llu -> %llu\n",
					m->target, (unsigned long long)now[i].devid, now[i].path,
					stat_names[k], (unsigned long long)last->v[j].v[k],
					(unsigned long long)now[i].v[k]);
				any = true;
			}
		}
	return any;
}

/* A device whose counters rose since the last poll is an event. */
void btrfs_watch_poll(struct watch_fs *wf, struct watch_source *src)
{
	const struct fsmount *m = watch_fs_mount(wf);
	struct devstats *last = src->state;
	struct btrfs_devstat *now;
	size_t nr;
	bool up;
	int fd = watch_fs_root(wf), ret = fd;

	if (fd >= 0) {
		ret = devstats_read(fd, &now, &nr);
		close(fd);
	}
	if (ret) {
		fprintf(stderr, "fscrub watch: %s: cannot read the device error counters: %s\n",
			m->target, strerror(-ret));
		return;
	}
	up = rose(m, last, now, nr);
	free(last->v);
	last->v = now;
	last->nr = nr;
	if (up) {
		struct watch_event e = { .kind = "btrfs_dev_stats" };

		watch_fs_event(wf, &e);
		watch_fs_trigger(wf, &e);
	}
}

void btrfs_watch_close(struct watch_source *src)
{
	struct devstats *last = src->state;

	if (last)
		free(last->v);
	free(last);
	src->state = NULL;
}
