/*
 * watch_blk: the kernel log's block-layer errors, walked to the watched
 * filesystems' devices; see watch_blk.h.
 */
#include "cmd/watch_blk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/*
 * A request line names the failed request's first sector, not its length:
 * one block of 4 KiB from there (the page, and the block of the
 * filesystems here) is taken as the range that failed.  A bad sector
 * further into a longer request is found when the kernel retries the
 * pages one by one, and logs each.
 */
#define REQUEST_BYTES 4096
/* Records read per call: the watcher returns to poll() between batches (a stop signal). */
#define BATCH 256
/* A stack deeper than this is a loop of loop devices, not a real one. */
#define MAX_DEPTH 16
/* The kernel's records are at most 1 KiB of text and their dictionary: room for both. */
#define RECORD_MAX 8192

int blk_follow_open(struct blk_follow *f)
{
	f->bs.sysfs = "/sys";
	f->fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (f->fd < 0)
		return -errno;
	/* from now on: the errors before the watcher started are not its events */
	if (lseek(f->fd, 0, SEEK_END) < 0) {
		int err = -errno;

		close(f->fd);
		f->fd = -1;
		return err;
	}
	return 0;
}

void blk_follow_close(struct blk_follow *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The block size of device name (BLKBSZGET), for a "logical block": 0 if not known. */
static uint64_t block_size(const char *name)
{
	char path[KMSG_NAME_MAX + 8];
	int fd, bs = 0;

	snprintf(path, sizeof(path), "/dev/%s", name);
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (ioctl(fd, BLKBSZGET, &bs) < 0)
		bs = 0;
	close(fd);
	return bs > 0 ? (uint64_t)bs : 0;
}

void blk_follow_walk(struct blk_follow *f, const struct blk_hooks *h, const char *name,
		     uint64_t off, uint64_t len, const struct kmsg_error *e, int depth)
{
	struct bstack_hops hops = { 0 };
	struct strbuf unsupported = STRBUF_INIT;
	dev_t devno;

	if (depth > MAX_DEPTH || bstack_devno_of(&f->bs, name, &devno))
		return;		/* gone since the line was logged, or no block device */
	if (h->ours(devno, h->arg) && !kmsg_recent_seen(&f->hits, name, off, len, mono_now()))
		h->hit(devno, name, off, len, e, depth, h->arg);
	if (!bstack_partitions(&f->bs, name, off, len, &hops))
		bstack_holders(&f->bs, name, devno, off, len, &hops, &unsupported);
	if (unsupported.len)
		fprintf(stderr, "fscrub watch: kernel log: %s sector %llu: not followed: %s",
			e->dev, (unsigned long long)e->first, unsupported.buf);
	for (size_t i = 0; i < hops.n; i++) {
		/* md parity holds no byte of the array: its row is not where the error is. */
		if (hops.v[i].parity)
			continue;
		blk_follow_walk(f, h, hops.v[i].name, hops.v[i].off, hops.v[i].len, e,
				depth + 1);
	}
	bstack_hops_release(&hops);
	strbuf_release(&unsupported);
}

/*
 * dm-integrity names the device under it (the bio was remapped there) and
 * its own sector: the one device that holds dev (its sysfs holders), into
 * out; false if there is not exactly one.
 */
static bool only_holder(const struct blk_follow *f, const char *dev, char *out, size_t len)
{
	char path[KMSG_NAME_MAX + 64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/block/%s/holders", f->bs.sysfs, dev);
	if (!(d = opendir(path)))
		return false;
	out[0] = 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && n++ == 0 && strlen(de->d_name) < len)
			memcpy(out, de->d_name, strlen(de->d_name) + 1);
	closedir(d);
	return n == 1 && out[0];
}

/* One error line: its bytes, once per KMSG_QUIET_S, walked. */
static void on_error(struct blk_follow *f, const struct blk_hooks *h, const struct kmsg_error *e)
{
	uint64_t unit = e->unit == KMSG_BLOCK ? block_size(e->dev) : 512;
	uint64_t len = e->unit == KMSG_BLOCK ? unit : REQUEST_BYTES;
	char dev[KMSG_NAME_MAX];

	memcpy(dev, e->dev, sizeof(dev));
	if (e->unit == KMSG_INTEGRITY_SECTOR && !only_holder(f, e->dev, dev, sizeof(dev)))
		return;		/* the integrity device is gone, or not known */
	if (!unit || e->first > (UINT64_MAX - len) / unit)
		return;		/* the device is gone, or the line is not a real one */
	if (kmsg_recent_seen(&f->recent, dev, e->first * unit, len, mono_now()))
		return;
	blk_follow_walk(f, h, dev, e->first * unit, len, e, 0);
}

/* A gap in the sequence numbers: records the ring buffer overwrote before they were read. */
static void say_missed(struct blk_follow *f, uint64_t seq)
{
	uint64_t missed = kmsg_seq_read(&f->seq, seq);

	if (missed)
		fprintf(stderr, "fscrub watch: kernel log: %llu record%s overwritten before "
			"fscrub read %s: block-layer errors among them were missed\n",
			(unsigned long long)missed, missed == 1 ? "" : "s", missed == 1 ? "it" : "them");
}

void blk_follow_read(struct blk_follow *f, const struct blk_hooks *h)
{
	static char rec[RECORD_MAX];

	for (int i = 0; f->fd >= 0 && i < BATCH; i++) {
		ssize_t n = read(f->fd, rec, sizeof(rec) - 1);
		struct kmsg_error e;
		int ret;

		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten: the next record's number says how many */
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			fprintf(stderr, "fscrub watch: cannot read the kernel log: %s: its "
				"block-layer errors are no longer followed\n",
				n < 0 ? strerror(errno) : "end of file");
			blk_follow_close(f);
			return;
		}
		rec[n] = 0;
		if ((ret = kmsg_parse(rec, (size_t)n, &e)) < 0)
			continue;
		say_missed(f, e.seq);
		if (ret == 1)
			on_error(f, h, &e);
	}
}
