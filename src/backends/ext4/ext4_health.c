/*
 * ext4_health: the errors an ext4 filesystem recorded in its superblock
 * (s_error_count, s_first_error_*, s_last_error_*), which the kernel
 * updates on every ext4_error() and shows in /sys/fs/ext4/<device>/: the
 * backend's health hook, for fscrub health (backends/health.h).  The
 * count survives remounts until e2fsck clears it, so a nonzero count is a
 * problem even when the error is old.  Its watch hook has no source of
 * its own: the kernel's FAN_FS_ERROR events.
 */
#include "backends/ext4/ext4.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "backends/health.h"
#include "backends/watch.h"
#include "lib/fsmounts.h"
#include "lib/jsonfmt.h"

/* /sys/fs/ext4/<name>/, named after the block device: loop0, sda1, dm-3. */
static int sysfs_dir(const struct fsmount *m, struct strbuf *dir)
{
	char link[64], target[1024];
	ssize_t n;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(m->devno), minor(m->devno));
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	strbuf_addf(dir, "/sys/fs/ext4/%s", basename(target));
	return access(dir->buf, R_OK) == 0 ? 0 : -errno;
}

/* One attribute, without its newline: 0, or a negative errno (absent on older kernels). */
static int attr(const char *dir, const char *name, char *buf, size_t size)
{
	char path[1200];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static uint64_t attr_u64(const char *dir, const char *name, bool *present)
{
	char buf[64];

	*present = attr(dir, name, buf, sizeof(buf)) == 0;
	return *present ? strtoull(buf, NULL, 10) : 0;
}

/* first_error_* or last_error_*: into the JSON and one text line. */
static void one_error(struct health *h, const char *dir, const char *which)
{
	static const char *const nums[] = { "time", "ino", "block", "line", "errcode" };
	json_object *o = json_object_new_object();
	uint64_t v[5];
	char name[64], func[128] = "", when[40];
	bool present;

	for (unsigned i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "%s_error_%s", which, nums[i]);
		v[i] = attr_u64(dir, name, &present);
		if (present)
			json_object_object_add(o, nums[i], json_object_new_uint64(v[i]));
	}
	snprintf(name, sizeof(name), "%s_error_func", which);
	if (attr(dir, name, func, sizeof(func)) == 0)
		json_object_object_add(o, "func", json_object_new_string(func));
	json_object_object_add(h->detail, which[0] == 'f' ? "first_error" : "last_error", o);
	if (!v[0])
		return;
	iso8601_utc((time_t)v[0], when, sizeof(when));
	health_line(h, "%s error: %s in %s:%" PRIu64 ", inode %" PRIu64 ", block %" PRIu64
		    ", ext4 error code %" PRIu64, which, when, func[0] ? func : "?", v[3], v[1],
		    v[2], v[4]);
}

int ext4_health(struct health *h)
{
	struct strbuf dir = STRBUF_INIT;
	bool present;
	uint64_t count;
	int ret = sysfs_dir(h->m, &dir);

	if (ret) {
		strbuf_release(&dir);
		return ret;
	}
	count = attr_u64(dir.buf, "errors_count", &present);
	if (!present) {
		strbuf_release(&dir);
		return -ENOENT;
	}
	h->source = "ext4 sysfs";
	json_object_object_add(h->detail, "sysfs", json_object_new_string(dir.buf));
	json_object_object_add(h->detail, "errors_count", json_object_new_uint64(count));
	if (count)
		health_problem(h, "%" PRIu64 " error%s recorded in the superblock (since the "
			       "last e2fsck)", count, count == 1 ? "" : "s");
	else
		health_line(h, "no errors recorded in the superblock");
	one_error(h, dir.buf, "first");
	one_error(h, dir.buf, "last");
	strbuf_release(&dir);
	return 0;
}

int ext4_watch_open(struct watch_fs *wf, int root, struct watch_source *src)
{
	(void)wf;
	(void)root;
	(void)src;
	return WATCH_FS_ERROR;
}
