/*
 * health_btrfs: btrfs device error counters (BTRFS_IOC_GET_DEV_STATS), the
 * numbers `btrfs device stats` prints; see health.h.  A counter is
 * persistent (kept in the device tree) until reset with
 * `btrfs device stats -z`, so any nonzero counter is a problem.
 */
#include "cmd/health.h"

#include <errno.h>
#include <linux/btrfs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "lib/fsmounts.h"

const char *const health_btrfs_stat_names[HEALTH_BTRFS_STATS] = {
	[BTRFS_DEV_STAT_WRITE_ERRS] = "write_io_errs",
	[BTRFS_DEV_STAT_READ_ERRS] = "read_io_errs",
	[BTRFS_DEV_STAT_FLUSH_ERRS] = "flush_io_errs",
	[BTRFS_DEV_STAT_CORRUPTION_ERRS] = "corruption_errs",
	[BTRFS_DEV_STAT_GENERATION_ERRS] = "generation_errs",
};

static int one_device(int fd, uint64_t devid, struct btrfs_devstat *d)
{
	struct btrfs_ioctl_dev_info_args info = { .devid = devid };
	struct btrfs_ioctl_get_dev_stats s = { .devid = devid, .nr_items = HEALTH_BTRFS_STATS };

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
	for (unsigned k = 0; k < HEALTH_BTRFS_STATS && k < s.nr_items; k++)
		d->v[k] = s.values[k];
	return 0;
}

int health_btrfs_devstats(int fd, struct btrfs_devstat **devs, size_t *nr)
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
	for (unsigned k = 0; k < HEALTH_BTRFS_STATS; k++) {
		json_object_object_add(o, health_btrfs_stat_names[k],
				       json_object_new_uint64(d->v[k]));
		strbuf_addf(&sb, "%s%s %llu", k ? ", " : "", health_btrfs_stat_names[k],
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

int health_btrfs(struct health *h, int fd)
{
	struct btrfs_devstat *devs;
	json_object *arr;
	size_t nr;
	int ret = health_btrfs_devstats(fd, &devs, &nr);

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
