/*
 * blockstack: a byte of a block device followed up the stack; see
 * blockstack.h.  Everything but bstack_dm_table() reads sysfs under
 * b->sysfs, so the unit tests can describe a stack that this machine's
 * kernel cannot build (md, device-mapper).
 */
#include "cmd/blockstack.h"
#include "cmd/mdlayout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/dm-ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* sysfs counts block device sizes and offsets in 512-byte sectors, whatever the device's. */
#define SYSFS_SECTOR 512ULL
/* DM_TABLE_STATUS's buffer: a table of a few hundred segments. */
#define DM_BUF (64 * 1024)

void bstack_hops_release(struct bstack_hops *h)
{
	free(h->v);
	h->v = NULL;
	h->n = 0;
}

static void hop_add(struct bstack_hops *h, const char *name, uint64_t off, uint64_t len,
		    const char *how)
{
	struct bstack_hop *p;

	h->v = xrealloc(h->v, (h->n + 1) * sizeof(*h->v));
	p = &h->v[h->n++];
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->off = off;
	p->len = len;
	p->how = how;
	p->parity = 0;
}

/* The first line of sysfs file <sysfs>/<path>, without its newline. */
static int read_line(const struct bstack *b, const char *path, char *buf, size_t len)
{
	struct strbuf full = STRBUF_INIT;
	FILE *f;
	int ret = 0;

	strbuf_addf(&full, "%s/%s", b->sysfs, path);
	f = fopen(full.buf, "re");
	strbuf_release(&full);
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		ret = -EIO;
	else
		buf[strcspn(buf, "\n")] = 0;
	fclose(f);
	return ret;
}

static int read_u64(const struct bstack *b, const char *path, uint64_t *out)
{
	char buf[64], *end;
	unsigned long long v;
	int ret = read_line(b, path, buf, sizeof(buf));

	if (ret)
		return ret;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* read_u64() of a path made from fmt. */
static int read_u64f(const struct bstack *b, uint64_t *out, const char *fmt, const char *a,
		     const char *c)
{
	char path[3 * BSTACK_NAME_MAX + 64];

	snprintf(path, sizeof(path), fmt, a, c);
	return read_u64(b, path, out);
}

int bstack_name_of(const struct bstack *b, dev_t devno, char *name, size_t len)
{
	char path[4096], target[4096];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u", b->sysfs, major(devno), minor(devno));
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = 0;
	base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target;
	if (strlen(base) >= len)
		return -ENAMETOOLONG;
	strcpy(name, base);
	return 0;
}

int bstack_devno_of(const struct bstack *b, const char *name, dev_t *out)
{
	char path[BSTACK_NAME_MAX + 32], buf[32];
	unsigned ma, mi;
	int ret;

	snprintf(path, sizeof(path), "class/block/%s/dev", name);
	ret = read_line(b, path, buf, sizeof(buf));
	if (ret)
		return ret;
	if (sscanf(buf, "%u:%u", &ma, &mi) != 2)
		return -EINVAL;
	*out = makedev(ma, mi);
	return 0;
}

int bstack_size_of(const struct bstack *b, const char *name, uint64_t *out)
{
	uint64_t sectors;
	int ret = read_u64f(b, &sectors, "class/block/%s/size%s", name, "");

	if (!ret)
		*out = sectors * SYSFS_SECTOR;
	return ret;
}

/* [off, off + len) clipped to [lo, lo + size): false if they do not meet. */
static bool clip(uint64_t off, uint64_t len, uint64_t lo, uint64_t size, uint64_t *coff,
		 uint64_t *clen)
{
	uint64_t a = off > lo ? off : lo;
	uint64_t e = off + len < lo + size ? off + len : lo + size;

	if (e <= a)
		return false;
	*coff = a;
	*clen = e - a;
	return true;
}

/* A subdirectory of the disk's that is a partition (has "partition"): its range. */
static bool partition_range(const struct bstack *b, const char *disk, const char *part,
			    uint64_t *start, uint64_t *size)
{
	uint64_t nr;

	if (read_u64f(b, &nr, "class/block/%s/%s/partition", disk, part) ||
	    read_u64f(b, start, "class/block/%s/%s/start", disk, part) ||
	    read_u64f(b, size, "class/block/%s/%s/size", disk, part))
		return false;
	*start *= SYSFS_SECTOR;
	*size *= SYSFS_SECTOR;
	return true;
}

int bstack_partitions(const struct bstack *b, const char *name, uint64_t off, uint64_t len,
		      struct bstack_hops *out)
{
	struct strbuf dir = STRBUF_INIT;
	struct dirent *de;
	DIR *d;

	strbuf_addf(&dir, "%s/class/block/%s", b->sysfs, name);
	d = opendir(dir.buf);
	strbuf_release(&dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		uint64_t start, size, a, n;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= BSTACK_NAME_MAX ||
		    !partition_range(b, name, de->d_name, &start, &size))
			continue;
		if (clip(off, len, start, size, &a, &n))
			hop_add(out, de->d_name, a - start, n, "partition");
	}
	closedir(d);
	return 0;
}

/* md/dev-X/size (KiB) of every member of md: false if any differs from the first. */
static bool members_even(const struct bstack *b, const char *md)
{
	struct strbuf dir = STRBUF_INIT;
	uint64_t first = 0, size;
	struct dirent *de;
	bool even = true;
	DIR *d;

	strbuf_addf(&dir, "%s/class/block/%s/md", b->sysfs, md);
	d = opendir(dir.buf);
	strbuf_release(&dir);
	if (!d)
		return false;
	while (even && (de = readdir(d))) {
		if (strncmp(de->d_name, "dev-", 4) ||
		    read_u64f(b, &size, "class/block/%s/md/%s/size", md, de->d_name))
			continue;
		even = !first || size == first;
		first = size;
	}
	closedir(d);
	return even;
}

/* An md file of md as a number; absent (RAID1 has no chunk), 0. */
static uint64_t md_number(const struct bstack *b, const char *md, const char *file)
{
	uint64_t v = 0;

	if (read_u64f(b, &v, "class/block/%s/md/%s", md, file))
		v = 0;
	return v;
}

/* The geometry of md and of its member lower; -ENOENT if lower holds no slot (a spare). */
static int md_geometry(const struct bstack *b, const char *md, const char *lower,
		       struct md_geom *g, char *level, size_t level_len)
{
	char path[BSTACK_NAME_MAX + 32], slot[32];
	uint64_t data_off;
	int ret;

	snprintf(path, sizeof(path), "class/block/%s/md/level", md);
	if ((ret = read_line(b, path, level, level_len)))
		return ret;
	if ((ret = md_level(level, g)))
		return ret;
	snprintf(path, sizeof(path), "class/block/%s/md/dev-%s/slot", md, lower);
	if ((ret = read_u64f(b, &data_off, "class/block/%s/md/dev-%s/offset", md, lower)) ||
	    (ret = bstack_size_of(b, md, &g->size)) ||
	    (ret = read_line(b, path, slot, sizeof(slot))))
		return ret;
	if (!strcmp(slot, "none"))
		return -ENOENT;
	g->slot = (unsigned)strtoul(slot, NULL, 10);
	g->data_off = data_off * SYSFS_SECTOR;
	g->layout = (unsigned)md_number(b, md, "layout");
	g->chunk = md_number(b, md, "chunk_size");
	g->disks = (unsigned)md_number(b, md, "raid_disks");
	g->uneven = g->level == 0 && !members_even(b, md);
	return 0;
}

struct md_hops {
	struct bstack_hops *out;
	const char *md;
	const char *how;
};

/* A piece of a member: the array's bytes, or the parity of a row. */
static void md_hop(const struct md_piece *p, void *arg)
{
	struct md_hops *h = arg;

	hop_add(h->out, h->md, p->array_off, p->parity ? p->row_len : p->len, h->how);
	h->out->v[h->out->n - 1].parity = p->parity ? p->which : 0;
}

/* md array md holding lower: the ranges it sees, or a line in unsupported. */
static int md_holder(const struct bstack *b, const char *md, const char *lower, uint64_t off,
		     uint64_t len, struct bstack_hops *out, struct strbuf *unsupported)
{
	static const char *const how[] = { [0] = "md raid0", [1] = "md raid1", [4] = "md raid4",
					   [5] = "md raid5", [6] = "md raid6", [10] = "md raid10" };
	struct md_geom g = { 0 };
	char level[32] = "";
	int ret = md_geometry(b, md, lower, &g, level, sizeof(level));
	struct md_hops h = { out, md, NULL };

	if (!ret) {
		h.how = how[g.level];
		ret = md_map(&g, off, len, md_hop, &h);
	}
	if (ret == -EOPNOTSUPP || ret == -EINVAL)
		strbuf_addf(unsupported, "%s: md %s%s is not supported (%s)\n", md, level,
			    g.uneven ? " over members of other sizes" : "",
			    ret == -EINVAL ? "a geometry that makes no sense" :
			    "RAID0 of one size, RAID1, RAID4/5/6 with rotating or fixed "
			    "parity and RAID10's near copies are followed");
	return ret == -ENOENT || ret == -EOPNOTSUPP || ret == -EINVAL ? 0 : ret;
}

/* Device-mapper device dm holding lower (devno): its table's linear segments. */
static int dm_holder(const struct bstack *b, const char *dm, dev_t lower, uint64_t off,
		     uint64_t len, struct bstack_hops *out, struct strbuf *unsupported)
{
	struct strbuf table = STRBUF_INIT;
	char what[32] = "";
	dev_t devno;
	int ret = bstack_devno_of(b, dm, &devno);

	if (!ret)
		ret = bstack_dm_table(devno, &table);
	if (!ret)
		ret = bstack_dm_map(table.buf, dm, lower, off, len, out, what, sizeof(what));
	if (ret == -EOPNOTSUPP) {
		strbuf_addf(unsupported, "%s: device-mapper target %s is not supported "
			    "(only linear is followed)\n", dm, what);
		ret = 0;
	}
	strbuf_release(&table);
	return ret;
}

int bstack_holders(const struct bstack *b, const char *name, dev_t devno, uint64_t off,
		   uint64_t len, struct bstack_hops *out, struct strbuf *unsupported)
{
	struct strbuf dir = STRBUF_INIT;
	struct dirent *de;
	int ret = 0;
	DIR *d;

	strbuf_addf(&dir, "%s/class/block/%s/holders", b->sysfs, name);
	d = opendir(dir.buf);
	strbuf_release(&dir);
	if (!d)
		return 0;
	while (!ret && (de = readdir(d))) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= BSTACK_NAME_MAX)
			continue;
		if (!strncmp(de->d_name, "md", 2))
			ret = md_holder(b, de->d_name, name, off, len, out, unsupported);
		else if (!strncmp(de->d_name, "dm-", 3))
			ret = dm_holder(b, de->d_name, devno, off, len, out, unsupported);
		else
			strbuf_addf(unsupported, "%s: a holder of %s that is not followed\n",
				    de->d_name, name);
	}
	closedir(d);
	return ret;
}

/* One table line: -EINVAL if it does not parse, else 0 (with hops added) or -EOPNOTSUPP. */
static int dm_line(const char *line, const char *name, dev_t lower, uint64_t off, uint64_t len,
		   struct bstack_hops *out, char *what, size_t what_len)
{
	unsigned long long start, count, loff;
	char target[32];
	unsigned ma, mi;
	int n = 0;
	uint64_t a, l;

	if (sscanf(line, "%llu %llu %31s %n", &start, &count, target, &n) != 3 || !n)
		return -EINVAL;
	if (strcmp(target, "linear")) {
		/* Another target: it matters only if it names the lower device. */
		char key[32];

		snprintf(key, sizeof(key), "%u:%u", major(lower), minor(lower));
		if (!strstr(line + n, key))
			return 0;
		snprintf(what, what_len, "%s", target);
		return -EOPNOTSUPP;
	}
	if (sscanf(line + n, "%u:%u %llu", &ma, &mi, &loff) != 3)
		return -EINVAL;
	if (makedev(ma, mi) != lower ||
	    !clip(off, len, loff * SYSFS_SECTOR, count * SYSFS_SECTOR, &a, &l))
		return 0;
	hop_add(out, name, start * SYSFS_SECTOR + (a - loff * SYSFS_SECTOR), l, "dm linear");
	return 0;
}

int bstack_dm_map(const char *table, const char *name, dev_t lower, uint64_t off,
		  uint64_t len, struct bstack_hops *out, char *what, size_t what_len)
{
	size_t first = out->n;
	const char *p = table;
	int ret = 0;

	while (*p && !ret) {
		size_t n = strcspn(p, "\n");
		char *line = strndup(p, n);

		if (!line)
			return -ENOMEM;
		if (line[strspn(line, " \t")])
			ret = dm_line(line, name, lower, off, len, out, what, what_len);
		free(line);
		p += n + (p[n] == '\n');
	}
	if (ret)
		out->n = first;
	return ret;
}

/* The DM_TABLE_STATUS reply's targets as "START LEN TYPE ARGS" lines. */
static void dm_reply_text(const struct dm_ioctl *io, struct strbuf *out)
{
	const char *base = (const char *)io + io->data_start;
	size_t pos = 0;

	for (uint32_t i = 0; i < io->target_count; i++) {
		const struct dm_target_spec *t = (const void *)(base + pos);

		if (io->data_start + pos + sizeof(*t) > io->data_size)
			break;
		strbuf_addf(out, "%" PRIu64 " %" PRIu64 " %.*s %s\n", (uint64_t)t->sector_start,
			    (uint64_t)t->length, (int)sizeof(t->target_type), t->target_type,
			    (const char *)(t + 1));
		if (!t->next)
			break;
		pos = t->next;
	}
}

int bstack_dm_table(dev_t devno, struct strbuf *out)
{
	struct dm_ioctl *io = xcalloc(1, DM_BUF);
	int fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC), ret = 0;

	if (fd < 0) {
		free(io);
		return -errno;
	}
	io->version[0] = DM_VERSION_MAJOR;
	io->version[1] = DM_VERSION_MINOR;
	io->version[2] = DM_VERSION_PATCHLEVEL;
	io->data_size = DM_BUF;
	io->data_start = sizeof(*io);
	io->dev = devno;
	io->flags = DM_STATUS_TABLE_FLAG;
	if (ioctl(fd, DM_TABLE_STATUS, io) < 0)
		ret = -errno;
	else if (io->flags & DM_BUFFER_FULL_FLAG)
		ret = -E2BIG;
	else
		dm_reply_text(io, out);
	close(fd);
	free(io);
	return ret;
}

/* Loop device name, bound: its backing file and window, into l. */
static bool loop_read(const struct bstack *b, const char *name, struct bstack_loop *l)
{
	char path[BSTACK_NAME_MAX + 32], file[4096];

	snprintf(path, sizeof(path), "class/block/%s/loop/backing_file", name);
	if (read_line(b, path, file, sizeof(file)) || !file[0] ||
	    read_u64f(b, &l->offset, "class/block/%s/loop/offset%s", name, "") ||
	    read_u64f(b, &l->sizelimit, "class/block/%s/loop/sizelimit%s", name, "") ||
	    bstack_size_of(b, name, &l->size))
		return false;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->backing = xstrdup(file);
	return true;
}

int bstack_loops(const struct bstack *b, struct bstack_loops *out)
{
	struct strbuf dir = STRBUF_INIT;
	struct dirent *de;
	DIR *d;

	strbuf_addf(&dir, "%s/class/block", b->sysfs);
	d = opendir(dir.buf);
	strbuf_release(&dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		struct bstack_loop l = { 0 };

		if (strncmp(de->d_name, "loop", 4) || strlen(de->d_name) >= BSTACK_NAME_MAX ||
		    !loop_read(b, de->d_name, &l))
			continue;
		out->v = xrealloc(out->v, (out->n + 1) * sizeof(*out->v));
		out->v[out->n++] = l;
	}
	closedir(d);
	return 0;
}

void bstack_loops_release(struct bstack_loops *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].backing);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

bool bstack_loop_map(const struct bstack_loop *l, uint64_t foff, uint64_t len, uint64_t *uoff,
		     uint64_t *ulen)
{
	uint64_t window = l->sizelimit && l->sizelimit < l->size ? l->sizelimit : l->size;
	uint64_t a, n;

	if (!clip(foff, len, l->offset, window, &a, &n))
		return false;
	*uoff = a - l->offset;
	*ulen = n;
	return true;
}
