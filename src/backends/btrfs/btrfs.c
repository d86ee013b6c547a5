/*
 * btrfs: the tree blocks read on every device (without -x), or the kernel's
 * own scrub, per device, with file names for its errors (with -x).
 *
 * Phase 2 lists the devices (BTRFS_IOC_FS_INFO, BTRFS_IOC_DEV_INFO).
 * Without -x it reads no file data: every copy of every tree block is read
 * and checked by btrfs_meta.h, which calls the kernel's scrub only for one
 * block group's device range (a repair, RAID5/6, another checksum).  With
 * -x it runs
 * BTRFS_IOC_SCRUB on every one of them at once, a thread per device (the
 * ioctl blocks until its device is done), read-only under -n or on a
 * read-only mount.  The main thread waits, and on SIGINT/SIGTERM sends
 * BTRFS_IOC_SCRUB_CANCEL so that no kernel scrub outlives fscrub.  A scrub
 * already running (EINPROGRESS) is an operational error: fscrub does not
 * take over someone else's scrub.
 *
 * The scrub ioctl only returns counters.  The kernel names what it found in
 * its log, so a reader thread follows /dev/kmsg from just before the scrub
 * until just after it, keeps the btrfs messages of this filesystem's
 * devices ("BTRFS warning (device loop3): scrub: checksum error at logical
 * L on dev /dev/loop3, physical P root R inode I offset O length N links K
 * (path: p)", "unable to fixup (regular) error at logical L ..." or "fixed
 * up error at logical L ..."), and maps each data error to a file with
 * BTRFS_IOC_LOGICAL_INO_V2 and BTRFS_IOC_INO_PATHS (files of subvolumes
 * below the mounted one through their ROOT_BACKREFs and INO_LOOKUP).  A
 * data error whose logical address was fixed up from a mirror is
 * "Repaired", any other is an error; tree block errors name the tree.
 * The verdicts give the 64 KiB stripe, not the block: they apply to the
 * detailed messages inside the stripe, or, alone, name what LOGICAL_INO_V2
 * finds at the stripe's start (the tree blocks' owners for metadata).  The
 * detailed data messages give the stripe too: its sectors are read again
 * (btrfs_sectors.h) and each bad one is named at its own file offset.  The
 * kernel rate-limits these messages (10 per 5 s, machine-wide), so the
 * per-device counters are reported as well and are the authority for the
 * exit code, and a device whose counters show more data checksum errors
 * than the log led to has its data read to name them.  Without /dev/kmsg fscrub says
 * so: -x (the generic reader, EIO on a checksum failure) names the files.
 *
 * Phase 3 gives the walk its inodes and extent maps in bulk from the
 * subvolumes' trees (btrfs_bulk.h) instead of a statx, open and FIEMAP per
 * file; tells the checksum ledger which files btrfs keeps no data
 * checksums for (btrfs_datasum.h): only those are the ledger's; and lists
 * the attributes of inodes with more names than listxattr() can return
 * from their XATTR_ITEMs (btrfs_xattrs.h).
 *
 * Phase 5 (-x): where every device's scrub ran to its end and found
 * nothing, every checksummed byte was verified on every copy; only the
 * files btrfs keeps no checksums for (NODATASUM: btrfs_datasum.h) are
 * left for the per-file reader (the data_left hook).
 *
 * Phase 6 reports BTRFS_IOC_GET_DEV_STATS (all under -v; nonzero counters
 * are a warning: the device failed before, perhaps outside this scrub).
 */
#include "backends/backend.h"
#include "backends/btrfs/btrfs_bulk.h"
#include "backends/btrfs/btrfs_check.h"
#include "backends/btrfs/btrfs_datasum.h"
#include "backends/btrfs/btrfs_health.h"
#include "backends/btrfs/btrfs_meta.h"
#include "backends/btrfs/btrfs_sectors.h"
#include "backends/btrfs/btrfs_trees.h"
#include "backends/btrfs/btrfs_xattrs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/inokey.h"
#include "lib/mountpoint.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/thread.h"

/* How often the waiting main thread looks at signals and progress. */
#define POLL_MS 200
/* Logical addresses remembered from the kernel log; more are counted only. */
#define MAX_LOG_ERRORS 4096
/*
 * The kernel's scrub works in 64 KiB stripes (BTRFS_STRIPE_LEN, not in the
 * uapi headers), and its "fixed up" / "unable to fixup" verdicts give the
 * logical address of the stripe, not of the bad block.
 */
#define SCRUB_STRIPE_LEN (64 * 1024)
/* Paths asked of INO_PATHS per inode (hard links): enough to name it. */
#define INO_PATHS_BUF 65536

struct btrfs_dev {
	struct btrfs_ioctl_dev_info_args info;
	struct btrfs_ioctl_scrub_args scrub;
	pthread_t thread;
	bool started;
	bool seed;			/* a seed device: read-only, another fsid */
	bool missing;			/* mounted degraded without it */
	bool scrub_it;			/* phase 2 scrubs it: neither of the above */
	bool whole;			/* the scrub ioctl ran to the device's end */
	int err;			/* positive errno of the scrub ioctl */
	const char *name;		/* basename of info.path, as in kernel messages */
	struct scrub_ctx *ctx;
	int fd;
	unsigned long long named;	/* bad data sectors found and reported on it */
};

/* A message of the kernel log about one logical address. */
struct log_error {
	uint64_t logical;
	bool is_data;			/* a "checksum error ... inode" line */
	bool is_tree;			/* a metadata message */
	bool fixed, unfixable;
	bool stripe;			/* a verdict about the stripe at logical */
	bool covered;			/* ... that detailed messages in it inherit */
	uint64_t root, inode, offset, length;
	uint64_t physical;		/* on devname, with has_physical */
	bool has_physical;
	char devname[64];
	char path[256];			/* the kernel's path, relative to its subvolume */
	char tree_msg[256];
};

struct btrfs_state {
	struct btrfs_ioctl_fs_info_args fs;
	struct btrfs_dev *devs;
	unsigned nr_devs;
	bool readonly;
	struct strbuf rescue;		/* the mount's rescue= option ("": none) */
	uint64_t mnt_root;		/* the tree id of the mounted subvolume */
	struct btrfs_bulk *bulk;	/* the walk's bulk records (NULL: none) */
	struct btrfs_tree_check *tcheck;	/* the tree check's first pass, reading beside the walk */
	struct btrfs_meta *meta;	/* phase 2's DUP second copies, reading beside phase 3 */
	bool scrub_whole;		/* phase 2 scrubbed every device to its end */
	struct btrfs_unsummed unsummed;	/* phase 3: the files without data checksums */
	/* files the scrub found damaged: under -n phase 5 does not read them (read repair) */
	struct subvol_ino *damaged;
	size_t nr_damaged, alloc_damaged;

	int kmsg_fd;
	pthread_t kmsg_thread;
	bool kmsg_started;
	atomic_bool kmsg_stop;
	pthread_mutex_t lock;
	struct log_error *log;
	size_t nr_log;
	unsigned long long log_dropped;
	bool kmsg_followed;		/* the log was read for the whole scrub */

	struct btrfs_sectors sectors;	/* fscrub's own reads of bad sectors */
	uint64_t *named, nr_named, alloc_named;	/* (devid, logical) pairs reported */
};

static bool btrfs_match(const struct scrub_ctx *ctx)
{
	return ctx->sfs.f_type == BTRFS_SUPER_MAGIC;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* How a device is named in messages: its path, or that the kernel has none. */
static const char *dev_label(const struct btrfs_dev *d)
{
	return d->info.path[0] ? (const char *)d->info.path : "(missing device)";
}

/*
 * A device's fsid, from BTRFS_IOC_DEV_INFO (Linux 6.3: the 16 bytes after
 * total_bytes, zero in older kernels), differs from the filesystem's on a
 * seed device: a read-only filesystem of its own that a writable one
 * (the sprout) was added to, whose tree blocks keep the seed's fsid.
 */
static bool is_seed(const struct btrfs_state *st, const struct btrfs_ioctl_dev_info_args *di)
{
	static const uint8_t zero[BTRFS_FSID_SIZE];
	const uint8_t *fsid = (const uint8_t *)di->unused;

	return memcmp(fsid, zero, sizeof(zero)) && memcmp(fsid, st->fs.fsid, BTRFS_FSID_SIZE);
}

/*
 * A device the filesystem was mounted without (-o degraded): no path, or
 * the kernel's "<missing disk>" where the device had been scanned before.
 */
static bool is_missing(const struct btrfs_ioctl_dev_info_args *di)
{
	return !di->path[0] || !strcmp((const char *)di->path, "<missing disk>");
}

/*
 * Every device: devids 1 to max_id, sparse after a removal.  FS_INFO's
 * num_devices and max_id count only the writable filesystem's devices;
 * DEV_INFO answers for seed devices too, whose devids come first.
 */
static int list_devices(struct scrub_ctx *ctx, struct btrfs_state *st)
{
	st->devs = calloc(st->fs.max_id ? st->fs.max_id : 1, sizeof(*st->devs));
	if (!st->devs)
		return -ENOMEM;
	for (uint64_t id = 1; id <= st->fs.max_id; id++) {
		struct btrfs_dev *d = &st->devs[st->nr_devs];

		memset(&d->info, 0, sizeof(d->info));
		d->info.devid = id;
		if (ioctl(ctx->mnt_fd, BTRFS_IOC_DEV_INFO, &d->info) < 0) {
			if (errno == ENODEV)
				continue;
			return -errno;
		}
		d->name = base_name((const char *)d->info.path);
		d->ctx = ctx;
		d->fd = ctx->mnt_fd;
		d->seed = is_seed(st, &d->info);
		d->missing = is_missing(&d->info);
		st->nr_devs++;
	}
	return 0;
}

static int btrfs_scan_fs(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = calloc(1, sizeof(*st));
	int ret;
	struct btrfs_ioctl_ino_lookup_args lk = { .treeid = 0, .objectid = BTRFS_FIRST_FREE_OBJECTID };

	if (!st)
		return -ENOMEM;
	ctx->backend = st;
	st->kmsg_fd = -1;
	btrfs_unsummed_init(&st->unsummed);
	strbuf_init(&st->rescue);
	pthread_mutex_init(&st->lock, NULL);
	if (ioctl(ctx->mnt_fd, BTRFS_IOC_FS_INFO, &st->fs) < 0)
		return -errno;
	if ((ret = list_devices(ctx, st)) < 0)
		return ret;
	if (ioctl(ctx->mnt_fd, BTRFS_IOC_INO_LOOKUP, &lk) == 0)
		st->mnt_root = lk.treeid;
	/*
	 * The scrub needs CAP_SYS_ADMIN, and so does asking for its progress,
	 * which fails with ENOTCONN when no scrub runs: a probe that changes
	 * nothing.  Without the privilege, the generic checks only.
	 */
	if (st->nr_devs) {
		struct btrfs_ioctl_scrub_args probe = { .devid = st->devs[0].info.devid };

		if (ioctl(ctx->mnt_fd, BTRFS_IOC_SCRUB_PROGRESS, &probe) < 0 &&
		    (errno == EPERM || errno == EACCES))
			return -errno;
	}
	st->readonly = ctx->opt.check_only || (ctx->svfs.f_flag & ST_RDONLY);
	if (mount_option(ctx->table_mnt_id, "rescue", &st->rescue) && !st->rescue.len)
		strbuf_addstr(&st->rescue, "all");
	st->bulk = btrfs_bulk_new(ctx, st->fs.sectorsize);
	report_verbose(ctx, "Phase 1: btrfs with %u %s, node size %u, sector size %u",
		       st->nr_devs, st->nr_devs == 1 ? "device" : "devices",
		       st->fs.nodesize, st->fs.sectorsize);
	for (unsigned i = 0; i < st->nr_devs; i++)
		report_verbose(ctx, "Phase 1: devid %llu %s, %llu bytes used of %llu%s",
			       (unsigned long long)st->devs[i].info.devid, dev_label(&st->devs[i]),
			       (unsigned long long)st->devs[i].info.bytes_used,
			       (unsigned long long)st->devs[i].info.total_bytes,
			       st->devs[i].seed ? ", a seed device" : "");
	return 0;
}

/* ---- the kernel log ---- */

static struct btrfs_dev *dev_by_name(struct btrfs_state *st, const char *name, size_t len)
{
	for (unsigned i = 0; i < st->nr_devs; i++)
		if (strlen(st->devs[i].name) == len && !memcmp(st->devs[i].name, name, len))
			return &st->devs[i];
	return NULL;
}

/* The entry of a logical address (one per address: a message kind sets its fields). */
static struct log_error *log_find(struct btrfs_state *st, uint64_t logical, bool stripe)
{
	for (size_t i = 0; i < st->nr_log; i++)
		if (st->log[i].logical == logical && st->log[i].stripe == stripe)
			return &st->log[i];
	if (st->nr_log >= MAX_LOG_ERRORS) {
		st->log_dropped++;
		return NULL;
	}
	if (!st->log) {
		st->log = calloc(MAX_LOG_ERRORS, sizeof(*st->log));
		if (!st->log)
			return NULL;
	}
	struct log_error *e = &st->log[st->nr_log++];

	memset(e, 0, sizeof(*e));
	e->logical = logical;
	e->stripe = stripe;
	return e;
}

static uint64_t num_after(const char *msg, const char *key, bool *ok)
{
	const char *p = strstr(msg, key);

	if (!p) {
		*ok = false;
		return 0;
	}
	return strtoull(p + strlen(key), NULL, 10);
}

/*
 * One message.  Only "BTRFS <level> (device NAME): " with NAME one of this
 * filesystem's devices is looked at; then the scrub messages below.
 */
static void kmsg_line(struct btrfs_state *st, const char *msg)
{
	const char *p = strstr(msg, "BTRFS "), *dev, *end;
	bool ok = true;
	uint64_t logical;

	if (!p || !(dev = strstr(p, "(device ")))
		return;
	dev += strlen("(device ");
	end = strstr(dev, "): ");
	if (!end || !dev_by_name(st, dev, (size_t)(end - dev)))
		return;
	logical = num_after(end, "error at logical ", &ok);
	if (!ok) {
		/* "scrub: tree block L mirror M has bad csum, has X want Y" */
		ok = true;
		logical = num_after(end, "scrub: tree block ", &ok);
		if (!ok)
			return;
	}
	pthread_mutex_lock(&st->lock);
	bool verdict = strstr(end, "fixed up error at logical ") || strstr(end, "unable to fixup");
	struct log_error *e = log_find(st, logical, verdict);
	const char *on = strstr(end, " on dev ");

	if (!e)
		goto out;
	if (on && !e->devname[0]) {
		on += strlen(" on dev ");
		on = strncmp(on, "/dev/", 5) ? on : on + 5;
		snprintf(e->devname, sizeof(e->devname), "%.*s", (int)strcspn(on, ", \n"), on);
		e->has_physical = true;
		e->physical = num_after(on, " physical ", &e->has_physical);
	}
	if (strstr(end, "checksum error at logical ") && strstr(end, " inode ")) {
		const char *path = strstr(end, "(path: ");

		e->is_data = true;
		e->root = num_after(end, " root ", &ok);
		e->inode = num_after(end, " inode ", &ok);
		e->offset = num_after(end, " offset ", &ok);
		e->length = num_after(end, " length ", &ok);
		if (path) {
			const char *q = path + strlen("(path: ");
			size_t n = strcspn(q, "\n");

			if (n && q[n - 1] == ')')
				n--;
			snprintf(e->path, sizeof(e->path), "%.*s", (int)n, q);
		}
	} else if (strstr(end, "scrub: tree block ")) {
		e->is_tree = true;
		snprintf(e->tree_msg, sizeof(e->tree_msg), "%.*s",
			 (int)strcspn(end + 3, "\n"), end + 3);
	}
	/* The fixup verdict is about the logical address, whatever it holds. */
	if (strstr(end, "fixed up error at logical "))
		e->fixed = true;
	else if (strstr(end, "unable to fixup"))
		e->unfixable = true;
out:
	pthread_mutex_unlock(&st->lock);
}

/* /dev/kmsg records: "PRIO,SEQ,TIME,FLAGS;MESSAGE\n" and continuation lines. */
static void kmsg_drain(struct btrfs_state *st)
{
	char buf[8192];

	for (;;) {
		ssize_t n = read(st->kmsg_fd, buf, sizeof(buf) - 1);
		char *msg;

		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: go on with the next */
		if (n <= 0)
			return;
		buf[n] = 0;
		msg = strchr(buf, ';');
		if (msg)
			kmsg_line(st, msg + 1);
	}
}

static void *kmsg_main(void *arg)
{
	struct btrfs_state *st = arg;

	while (!atomic_load(&st->kmsg_stop)) {
		struct pollfd pfd = { .fd = st->kmsg_fd, .events = POLLIN };

		if (poll(&pfd, 1, POLL_MS) > 0)
			kmsg_drain(st);
	}
	kmsg_drain(st);
	return NULL;
}

static void kmsg_start(struct scrub_ctx *ctx, struct btrfs_state *st)
{
	/* FSCRUB_DEBUG_NO_KMSG: fault-injection knob for the fallback's tests. */
	st->kmsg_fd = getenv("FSCRUB_DEBUG_NO_KMSG") ? (errno = EACCES, -1) :
		      open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (st->kmsg_fd < 0) {
		str_info(ctx, CHECK_BTRFS_NO_KMSG, NULL, NULL, 0,
			 "cannot read the kernel log /dev/kmsg (%s): scrub errors are counted "
			 "per device but damaged files are not named; run with -x to find them "
			 "with the per-file data reader", strerror(errno));
		return;
	}
	lseek(st->kmsg_fd, 0, SEEK_END);	/* only what this scrub says */
	if (thread_start(&st->kmsg_thread, kmsg_main, st) == 0)
		st->kmsg_started = st->kmsg_followed = true;
}

static void kmsg_stop(struct btrfs_state *st)
{
	if (!st->kmsg_started)
		return;
	atomic_store(&st->kmsg_stop, true);
	pthread_join(st->kmsg_thread, NULL);
	st->kmsg_started = false;
}

/* ---- the scrub ---- */

static void *scrub_main(void *arg)
{
	struct btrfs_dev *d = arg;
	struct btrfs_state *st = d->ctx->backend;

	/* Signals go to the main thread (thread_start()), which cancels the scrub. */
	d->scrub.devid = d->info.devid;
	d->scrub.start = 0;
	d->scrub.end = (uint64_t)-1;
	d->scrub.flags = st->readonly ? BTRFS_SCRUB_READONLY : 0;
	if (ioctl(d->fd, BTRFS_IOC_SCRUB, &d->scrub) < 0)
		d->err = errno;
	else
		d->whole = true;
	return NULL;
}

static bool all_done(struct btrfs_state *st, struct scrub_ctx *ctx)
{
	unsigned long long bytes = 0;
	bool done = true;

	for (unsigned i = 0; i < st->nr_devs; i++) {
		struct btrfs_ioctl_scrub_args p = { .devid = st->devs[i].info.devid };

		if (st->devs[i].started && pthread_tryjoin_np(st->devs[i].thread, NULL) == 0) {
			st->devs[i].started = false;
		} else if (st->devs[i].started) {
			done = false;
			if (ioctl(ctx->mnt_fd, BTRFS_IOC_SCRUB_PROGRESS, &p) == 0)
				bytes += p.progress.data_bytes_scrubbed + p.progress.tree_bytes_scrubbed;
		}
		if (!st->devs[i].started)
			bytes += st->devs[i].scrub.progress.data_bytes_scrubbed +
				 st->devs[i].scrub.progress.tree_bytes_scrubbed;
	}
	atomic_store(&ctx->progress_done, bytes);
	return done;
}

static void wait_scrubs(struct scrub_ctx *ctx, struct btrfs_state *st)
{
	bool cancel_sent = false;

	while (!all_done(st, ctx)) {
		struct timespec ts = { 0, POLL_MS * 1000000L };

		if (scrub_cancelled && !cancel_sent) {
			/* ENOTCONN: it ended meanwhile. */
			if (ioctl(ctx->mnt_fd, BTRFS_IOC_SCRUB_CANCEL, NULL) < 0 && errno != ENOTCONN)
				report_operational(ctx, NULL, NULL, errno, "cannot cancel the scrub");
			cancel_sent = true;
		}
		nanosleep(&ts, NULL);
	}
}

/* Paths of (root, inode) through INO_PATHS where root is the mounted one. */
static bool ino_path(int fd, uint64_t mnt_root, uint64_t root, uint64_t inode,
		     struct strbuf *out)
{
	struct btrfs_ioctl_ino_path_args a = { .inum = inode, .size = INO_PATHS_BUF };
	struct btrfs_data_container *c;
	bool found = false;

	if (root != mnt_root || !(c = calloc(1, INO_PATHS_BUF)))
		return false;
	a.fspath = (uintptr_t)c;
	if (ioctl(fd, BTRFS_IOC_INO_PATHS, &a) == 0 && c->elem_cnt > 0) {
		/* val[] holds offsets of the strings from the start of val. */
		const char *base = (const char *)c->val;

		strbuf_addstr(out, base + c->val[0]);
		found = true;
	}
	free(c);
	return found;
}

/*
 * The path of subvolume root's top directory relative to the mounted
 * subvolume: up the ROOT_BACKREFs of the root tree (parent tree, directory,
 * name) with BTRFS_IOC_INO_LOOKUP for the directory's path in the parent.
 * False if the subvolume is not below the mounted one.
 */
static bool subvol_prefix(int fd, uint64_t mnt_root, uint64_t root, struct strbuf *out)
{
	/* A subvolume nested deeper than this is not worth naming. */
	for (int depth = 0; depth < 64 && root != mnt_root; depth++) {
		struct btrfs_ioctl_search_args sa;
		struct btrfs_ioctl_search_key *k = &sa.key;
		struct btrfs_ioctl_search_header h;
		struct btrfs_root_ref ref;
		struct btrfs_ioctl_ino_lookup_args lk;
		struct strbuf part = STRBUF_INIT;

		if (root == BTRFS_FS_TREE_OBJECTID)
			return false;
		memset(&sa, 0, sizeof(sa));
		k->tree_id = BTRFS_ROOT_TREE_OBJECTID;
		k->min_objectid = k->max_objectid = root;
		k->min_type = k->max_type = BTRFS_ROOT_BACKREF_KEY;
		k->max_offset = (uint64_t)-1;
		k->max_transid = (uint64_t)-1;
		k->nr_items = 1;
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &sa) < 0 || k->nr_items < 1)
			return false;
		memcpy(&h, sa.buf, sizeof(h));
		if (h.len < sizeof(ref))
			return false;
		memcpy(&ref, sa.buf + sizeof(h), sizeof(ref));
		if (sizeof(ref) + ref.name_len > h.len)
			return false;
		memset(&lk, 0, sizeof(lk));
		lk.treeid = h.offset;
		lk.objectid = ref.dirid;
		if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &lk) < 0)
			return false;
		/* lk.name: the directory's path in the parent, "" or "a/b/" */
		strbuf_addstr(&part, lk.name);
		strbuf_add(&part, sa.buf + sizeof(h) + sizeof(ref), ref.name_len);
		strbuf_addch(&part, '/');
		strbuf_addstr(&part, out->buf);
		strbuf_reset(out);
		strbuf_addstr(out, part.buf);
		strbuf_release(&part);
		root = h.offset;
	}
	return root == mnt_root;
}

bool btrfs_path_in(int fd, uint64_t mnt_root, uint64_t root, uint64_t inode, struct strbuf *out)
{
	struct btrfs_ioctl_ino_lookup_args lk = { .treeid = root, .objectid = inode };
	size_t n;

	if (inode == BTRFS_FIRST_FREE_OBJECTID) {	/* a subvolume's top directory */
		if (root != mnt_root && !subvol_prefix(fd, mnt_root, root, out)) {
			strbuf_reset(out);
			return false;
		}
		if (out->len && out->buf[out->len - 1] == '/')
			out->buf[--out->len] = 0;
		return true;
	}
	if (root == mnt_root)
		return ino_path(fd, mnt_root, root, inode, out);
	if (!subvol_prefix(fd, mnt_root, root, out) ||
	    ioctl(fd, BTRFS_IOC_INO_LOOKUP, &lk) < 0) {
		strbuf_reset(out);
		return false;
	}
	n = strlen(lk.name);
	if (n && lk.name[n - 1] == '/')
		lk.name[n - 1] = 0;	/* INO_LOOKUP ends every component with '/' */
	strbuf_addstr(out, lk.name);
	return true;
}

/* The path of (root, inode) relative to the mount, for any subvolume below it. */
static bool file_path(struct scrub_ctx *ctx, struct btrfs_state *st, uint64_t root,
		      uint64_t inode, struct strbuf *out)
{
	return btrfs_path_in(ctx->mnt_fd, st->mnt_root, root, inode, out);
}

bool btrfs_file_path(struct scrub_ctx *ctx, uint64_t root, uint64_t inode, struct strbuf *out)
{
	return file_path(ctx, ctx->backend, root, inode, out);
}

/*
 * What held an error the kernel logged without details (with a good copy
 * it says only "fixed up error at logical L", L the 64 KiB stripe):
 * LOGICAL_INO_V2 gives (inode, offset, root) triples for data at L; else
 * the tree blocks of the stripe are named by their owners.
 */
static void resolve_logical(struct scrub_ctx *ctx, struct btrfs_state *st, struct log_error *e)
{
	uint64_t buf[3 * 64 + 8];
	struct btrfs_data_container *c = (struct btrfs_data_container *)buf;
	struct btrfs_ioctl_logical_ino_args a = {
		.logical = e->logical, .size = sizeof(buf), .inodes = (uintptr_t)buf,
	};
	struct strbuf owners = STRBUF_INIT;
	int ret;

	memset(buf, 0, sizeof(buf));
	ret = ioctl(ctx->mnt_fd, BTRFS_IOC_LOGICAL_INO_V2, &a);
	if (ret < 0 && errno == ENOTTY)
		ret = ioctl(ctx->mnt_fd, BTRFS_IOC_LOGICAL_INO, &a);
	if (ret == 0 && c->elem_cnt >= 3) {
		for (uint32_t i = 0; i + 2 < c->elem_cnt; i += 3) {
			if (!e->inode || c->val[i] == e->inode) {
				e->inode = c->val[i];
				e->offset = c->val[i + 1];
				e->root = c->val[i + 2];
				break;
			}
		}
		if (!e->length)
			e->length = st->fs.sectorsize;
		e->is_data = true;
		return;
	}
	if (e->is_data)
		return;
	if (e->is_tree) {	/* a "tree block L mirror M ..." line: add its owner */
		if (btrfs_tree_block_owners(ctx->mnt_fd, e->logical, 1, &owners)) {
			size_t n = strlen(e->tree_msg);

			snprintf(e->tree_msg + n, sizeof(e->tree_msg) - n, " (in the %s)", owners.buf);
		}
	} else {
		e->is_tree = true;
		if (!btrfs_tree_block_owners(ctx->mnt_fd, e->logical, SCRUB_STRIPE_LEN, &owners))
			strbuf_addstr(&owners, "metadata (owner unknown)");
		snprintf(e->tree_msg, sizeof(e->tree_msg),
			 "a tree block in the 64 KiB stripe at logical %llu, in the %s",
			 (unsigned long long)e->logical, owners.buf);
	}
	strbuf_release(&owners);
}

/* The stripe verdicts apply to the detailed errors inside their stripe. */
static void apply_verdicts(struct btrfs_state *st)
{
	for (size_t i = 0; i < st->nr_log; i++) {
		struct log_error *v = &st->log[i];

		if (!v->stripe)
			continue;
		for (size_t j = 0; j < st->nr_log; j++) {
			struct log_error *d = &st->log[j];

			if (d->stripe || d->logical < v->logical ||
			    d->logical - v->logical >= SCRUB_STRIPE_LEN)
				continue;
			d->fixed |= v->fixed;
			if (!d->devname[0])	/* "tree block L mirror M" names none */
				memcpy(d->devname, v->devname, sizeof(d->devname));
			d->unfixable |= v->unfixable;
			v->covered = true;
		}
	}
}

/* A device by its kernel name ("loop3"), or NULL. */
static struct btrfs_dev *dev_named(struct btrfs_state *st, const char *name)
{
	return name[0] ? dev_by_name(st, name, strlen(name)) : NULL;
}

/* " on loop3", or nothing where the kernel's message named no device. */
static void on_dev(struct strbuf *sb, const char *devname)
{
	if (devname[0])
		strbuf_addf(sb, " on %s", devname);
}

/* Was this bad sector of devid reported already?  Else it is noted. */
static bool sector_named(struct btrfs_state *st, uint64_t devid, uint64_t logical)
{
	for (uint64_t i = 0; i < st->nr_named; i += 2)
		if (st->named[i] == devid && st->named[i + 1] == logical)
			return true;
	if (st->nr_named + 2 > st->alloc_named) {
		st->alloc_named = st->alloc_named ? 2 * st->alloc_named : 64;
		st->named = xrealloc(st->named, st->alloc_named * sizeof(*st->named));
	}
	st->named[st->nr_named++] = devid;
	st->named[st->nr_named++] = logical;
	return false;
}

/* What one of fscrub's own reads found bad, and how it is said. */
struct bad_run {
	struct scrub_ctx *ctx;
	struct btrfs_state *st;
	struct btrfs_dev *dev;
	enum severity sev;
	const char *what;
};

/* Keep a damaged file's (subvolume, inode); on no memory it is not kept, and may be read. */
static void note_damaged(struct btrfs_state *st, uint64_t root, uint64_t ino)
{
	if (btrfs_grow((void **)&st->damaged, &st->alloc_damaged, st->nr_damaged + 1,
		       sizeof(*st->damaged)) < 0)
		return;
	st->damaged[st->nr_damaged++] = (struct subvol_ino){ root, ino };
}

/*
 * A bad sector: the file that holds it (LOGICAL_INO_V2 gives the file
 * offset of that very sector), reported with that offset.
 */
static void report_bad_sector(uint64_t logical, void *arg)
{
	struct bad_run *b = arg;
	struct log_error e = { .logical = logical };
	struct strbuf path = STRBUF_INIT, on = STRBUF_INIT;

	if (sector_named(b->st, b->dev->info.devid, logical))
		return;
	b->dev->named++;
	resolve_logical(b->ctx, b->st, &e);
	if (!e.is_data || !e.inode) {
		report_verbose(b->ctx, "Phase 2: a bad data sector at logical %llu on %s is in no "
			       "file now", (unsigned long long)logical, dev_label(b->dev));
		return;
	}
	e.length = b->st->sectors.sectorsize;
	note_damaged(b->st, e.root, e.inode);
	if (!file_path(b->ctx, b->st, e.root, e.inode, &path))
		strbuf_addf(&path, "<subvolume %llu>/?", (unsigned long long)e.root);
	on_dev(&on, b->dev->name);
	report_range_at(b->ctx, b->sev, CHECK_BTRFS_DATA_CSUM, NULL, path.buf, e.inode, e.offset,
			e.length, __FILE__, __LINE__,
			"data checksum error at file offset %llu, length %llu, %s (logical %llu%s)",
			(unsigned long long)e.offset, (unsigned long long)e.length, b->what,
			(unsigned long long)logical, on.buf);
	strbuf_release(&path);
	strbuf_release(&on);
}

/*
 * The kernel names the 64 KiB stripe of a data error, not the sector: the
 * stripe's sectors are read again on the device the message names, and
 * each bad one is reported at its own file offset.  False if none could
 * be (a sector repaired by the scrub reads good now): the message alone.
 */
static bool report_stripe_sectors(struct scrub_ctx *ctx, struct btrfs_state *st,
				  const struct log_error *e, enum severity sev, const char *what)
{
	struct btrfs_dev *d = dev_named(st, e->devname);
	struct bad_run b = { ctx, st, d, sev, what };

	if (!d || !e->has_physical)
		return false;
	return btrfs_sectors_verify(&st->sectors, (const char *)d->info.path, e->logical,
				    e->physical, SCRUB_STRIPE_LEN, report_bad_sector, &b) > 0;
}

/* An error the kernel logged, reported from the message (and its stripe's sectors). */
static void report_log_error(struct scrub_ctx *ctx, struct btrfs_state *st, struct log_error *e)
{
	struct strbuf path = STRBUF_INIT, on = STRBUF_INIT;
	bool repaired = e->fixed && !e->unfixable && !st->readonly;
	enum severity sev = repaired ? SEV_REPAIRED : SEV_ERROR;
	const char *what = repaired ? "corrected from a good copy" :
			   e->fixed && !e->unfixable ? "a good copy exists, not repaired (-n)" :
			   "no good copy";

	if (!e->is_tree && report_stripe_sectors(ctx, st, e, sev, what))
		return;
	resolve_logical(ctx, st, e);
	on_dev(&on, e->devname);
	if (e->is_data && e->inode) {
		note_damaged(st, e->root, e->inode);
		if (!file_path(ctx, st, e->root, e->inode, &path)) {
			if (e->root != st->mnt_root)
				strbuf_addf(&path, "<subvolume %llu>/", (unsigned long long)e->root);
			strbuf_addstr(&path, e->path[0] ? e->path : "?");
		}
		report_range_at(ctx, sev, CHECK_BTRFS_DATA_CSUM, NULL, path.buf, e->inode,
				e->offset, e->length, __FILE__, __LINE__,
				"data checksum error in the 64 KiB from file offset %llu, length "
				"%llu, %s (logical %llu%s)",
				(unsigned long long)e->offset, (unsigned long long)e->length,
				what, (unsigned long long)e->logical, on.buf);
	} else if (e->is_tree) {
		report_at(ctx, sev, CHECK_BTRFS_TREE, NULL, NULL, 0, __FILE__, __LINE__,
			  "%s%s, %s", e->tree_msg, on.buf, what);
	}
	strbuf_release(&path);
	strbuf_release(&on);
}

/*
 * The kernel rate-limits its messages for the whole machine (10 per 5 s),
 * so a scrub right after another filesystem's may find errors it does not
 * log.  Where a device's counters show data checksum errors still on the
 * disk that the log did not lead to, its data is read here to name them.
 */
static void find_unlogged(struct scrub_ctx *ctx, struct btrfs_state *st, struct btrfs_dev *d)
{
	const struct btrfs_scrub_progress *p = &d->scrub.progress;
	unsigned long long left = st->readonly ? p->csum_errors :
				  p->csum_errors < p->uncorrectable_errors ? p->csum_errors :
				  p->uncorrectable_errors;
	struct bad_run b = { ctx, st, d, SEV_ERROR,
			     st->readonly ? "not repaired (read-only scrub)" : "no good copy" };
	int ret;

	if (!st->kmsg_followed || d->err || d->named >= left)
		return;
	report_verbose(ctx, "Phase 2: devid %llu %s: %llu data checksum errors, %llu named from "
		       "the kernel log: reading its data to find the others",
		       (unsigned long long)d->info.devid, dev_label(d), left, d->named);
	ret = btrfs_sectors_verify_dev(&st->sectors, d->info.devid, (const char *)d->info.path,
				       report_bad_sector, &b);
	if (ret < 0)
		report_verbose(ctx, "Phase 2: devid %llu %s: cannot read its data (%s): the files "
			       "are not named; run with -x to find them", (unsigned long long)
			       d->info.devid, dev_label(d), strerror(-ret));
}

/*
 * Did the repairing scrub leave nothing uncorrected on any device?  Its
 * counters are the authority: the kernel rate-limits its messages, so a
 * block's "fixed up" verdict may never reach the log (a RAID1 after a
 * degraded session: 176 blocks corrected, 0 uncorrectable, and the
 * verdicts of the last ones missing).
 */
static bool scrub_corrected_all(const struct btrfs_state *st)
{
	bool any = false;

	if (st->readonly)
		return false;
	for (unsigned i = 0; i < st->nr_devs; i++) {
		const struct btrfs_dev *d = &st->devs[i];

		if (!d->scrub_it)
			continue;
		if (!d->whole || d->scrub.progress.uncorrectable_errors)
			return false;
		any = true;
	}
	return any;
}

/* A message without a verdict, where the counters say everything was corrected: corrected. */
static void apply_counters(struct btrfs_state *st)
{
	if (!scrub_corrected_all(st))
		return;
	for (size_t i = 0; i < st->nr_log; i++)
		if (!st->log[i].fixed && !st->log[i].unfixable)
			st->log[i].fixed = true;
}

static void report_log_errors(struct scrub_ctx *ctx, struct btrfs_state *st)
{
	apply_verdicts(st);
	apply_counters(st);
	if (btrfs_sectors_init(&st->sectors, ctx->mnt_fd) < 0)
		st->sectors.crc32c = false;
	for (size_t i = 0; i < st->nr_log; i++)
		if (!st->log[i].covered)	/* else covered by detailed messages */
			report_log_error(ctx, st, &st->log[i]);
	for (unsigned i = 0; i < st->nr_devs; i++)
		find_unlogged(ctx, st, &st->devs[i]);
	if (st->log_dropped)
		str_info(ctx, CHECK_BTRFS_SCRUB, NULL, NULL, 0,
			 "%llu more kernel messages about errors were not kept",
			 st->log_dropped);
}

static void report_device(struct scrub_ctx *ctx, struct btrfs_state *st, struct btrfs_dev *d)
{
	const struct btrfs_scrub_progress *p = &d->scrub.progress;
	unsigned long long found = p->read_errors + p->csum_errors + p->verify_errors +
				   p->super_errors;
	unsigned long long bad = st->readonly ? found : p->uncorrectable_errors;

	report_verbose(ctx, "Phase 2: devid %llu %s: %llu data bytes, %llu tree bytes scrubbed; "
		       "read %llu, csum %llu, verify %llu, super %llu errors; "
		       "%llu corrected, %llu uncorrectable, %llu unverified",
		       (unsigned long long)d->info.devid, dev_label(d),
		       (unsigned long long)p->data_bytes_scrubbed,
		       (unsigned long long)p->tree_bytes_scrubbed,
		       (unsigned long long)p->read_errors, (unsigned long long)p->csum_errors,
		       (unsigned long long)p->verify_errors, (unsigned long long)p->super_errors,
		       (unsigned long long)p->corrected_errors,
		       (unsigned long long)p->uncorrectable_errors,
		       (unsigned long long)p->unverified_errors);
	if (bad || (found && st->readonly))
		str_error(ctx, CHECK_BTRFS_SCRUB, NULL, NULL, 0,
			  "devid %llu %s: %llu %s errors (read %llu, csum %llu, verify %llu, "
			  "super %llu)%s", (unsigned long long)d->info.devid, dev_label(d),
			  bad, st->readonly ? "scrub" : "uncorrectable",
			  (unsigned long long)p->read_errors, (unsigned long long)p->csum_errors,
			  (unsigned long long)p->verify_errors, (unsigned long long)p->super_errors,
			  st->readonly ? ", not repaired (read-only scrub)" : "");
	if (!st->readonly && p->corrected_errors)
		str_repaired(ctx, CHECK_BTRFS_SCRUB, NULL, NULL, 0,
			     "devid %llu %s: %llu errors corrected from a good copy",
			     (unsigned long long)d->info.devid, dev_label(d),
			     (unsigned long long)p->corrected_errors);
}

/* The block group profile of flags, as btrfs-progs names it. */
static const char *profile_name(uint64_t flags)
{
	static const struct { uint64_t bit; const char *name; } profiles[] = {
		{ BTRFS_BLOCK_GROUP_RAID0, "RAID0" }, { BTRFS_BLOCK_GROUP_RAID1, "RAID1" },
		{ BTRFS_BLOCK_GROUP_DUP, "DUP" }, { BTRFS_BLOCK_GROUP_RAID10, "RAID10" },
		{ BTRFS_BLOCK_GROUP_RAID5, "RAID5" }, { BTRFS_BLOCK_GROUP_RAID6, "RAID6" },
		{ BTRFS_BLOCK_GROUP_RAID1C3, "RAID1C3" }, { BTRFS_BLOCK_GROUP_RAID1C4, "RAID1C4" },
	};

	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
		if (flags & profiles[i].bit)
			return profiles[i].name;
	return "single";
}

/* "data RAID1, metadata RAID1, system RAID1": the profiles in use (BTRFS_IOC_SPACE_INFO). */
static void profiles_in_use(struct scrub_ctx *ctx, struct strbuf *out)
{
	struct btrfs_ioctl_space_args probe = { 0 }, *sp;

	if (ioctl(ctx->mnt_fd, BTRFS_IOC_SPACE_INFO, &probe) < 0 || !probe.total_spaces)
		return;
	sp = calloc(1, sizeof(*sp) + probe.total_spaces * sizeof(sp->spaces[0]));
	if (!sp)
		return;
	sp->space_slots = probe.total_spaces;
	if (ioctl(ctx->mnt_fd, BTRFS_IOC_SPACE_INFO, sp) == 0)
		for (uint64_t i = 0; i < sp->total_spaces && i < sp->space_slots; i++) {
			uint64_t f = sp->spaces[i].flags;

			if (f & BTRFS_SPACE_INFO_GLOBAL_RSV)
				continue;
			strbuf_addf(out, "%s%s %s", out->len ? ", " : "",
				    f & BTRFS_BLOCK_GROUP_DATA ?
				    (f & BTRFS_BLOCK_GROUP_METADATA ? "mixed" : "data") :
				    f & BTRFS_BLOCK_GROUP_METADATA ? "metadata" : "system",
				    profile_name(f));
		}
	free(sp);
}

/*
 * A device the filesystem runs without (mounted -o degraded): every block
 * group with a copy on it has lost that copy, and what it alone held
 * (single, RAID0) is gone.  Lost redundancy is what a scrub is for.
 */
static void report_missing(struct scrub_ctx *ctx, const struct btrfs_dev *d)
{
	struct strbuf prof = STRBUF_INIT;

	profiles_in_use(ctx, &prof);
	str_error(ctx, CHECK_BTRFS_MISSING_DEVICE, NULL, NULL, 0,
		  "devid %llu is missing: the filesystem is mounted without it (degraded), so "
		  "every block group with a copy on it has lost that copy (profiles in use: %s); "
		  "replace it ('btrfs replace start %llu NEWDEV MOUNTPOINT'), or add a device "
		  "and 'btrfs device remove missing MOUNTPOINT'",
		  (unsigned long long)d->info.devid, prof.len ? prof.buf : "unknown",
		  (unsigned long long)d->info.devid);
	strbuf_release(&prof);
}

/*
 * Which devices the kernel's scrub can check: not a missing one
 * (report_missing()), nor a seed device, whose tree blocks carry the
 * seed's fsid, which the scrub of the sprouted filesystem takes for
 * corruption (and a seed is read-only: a repairing scrub fails with
 * EROFS).  The tree checks read the seed's metadata through the trees,
 * and -x its files' data.
 */
static bool scrubbable(struct scrub_ctx *ctx, const struct btrfs_dev *d)
{
	if (d->missing) {
		report_missing(ctx, d);
		return false;
	}
	if (d->seed) {
		str_info(ctx, CHECK_BTRFS_SCRUB, NULL, NULL, 0,
			 "devid %llu %s is a seed device: the kernel's scrub cannot check it (its "
			 "tree blocks carry the seed's own fsid); its trees are checked in phase 3 "
			 "and, with -x, its files' data is read", (unsigned long long)d->info.devid,
			 d->info.path);
		return false;
	}
	return true;
}

/*
 * Did every device's scrub run to its end, finding nothing (a seed or a
 * missing device is not scrubbed: no)?  Then the
 * kernel read and verified every copy of every checksummed data block
 * (and every tree block), and nothing of it needs reading again.  Where
 * it found errors, -x reads every file all the same: the kernel log may
 * not have named each damaged file (no /dev/kmsg, messages rate-limited
 * or not kept), and a read names it (EIO).
 */
/*
 * Did phase 2's scrub read every device to its end (and, unless
 * errors_ok, find nothing)?
 */
static bool scrub_was_whole(const struct btrfs_state *st, bool errors_ok)
{
	if (!st->nr_devs || scrub_cancelled)
		return false;
	for (unsigned i = 0; i < st->nr_devs; i++) {
		const struct btrfs_scrub_progress *p = &st->devs[i].scrub.progress;

		if (!st->devs[i].whole ||
		    (!errors_ok && p->read_errors + p->csum_errors + p->verify_errors +
				   p->super_errors))
			return false;
	}
	return true;
}

/*
 * A scrub that failed with EIO: is it the csum tree the kernel cannot read
 * (a tree block bad in every copy)?  The scrub looks up every data
 * block's checksums in it and stops at the first it cannot read.  Then
 * the damage is the finding -- phase 3 reads the csum tree and reports it
 * (btrfs.csum) -- not a failure to scrub.  Reads the whole csum tree.
 */
static bool csum_tree_unreadable(struct scrub_ctx *ctx)
{
	const struct btrfs_tkey min = { 0, 0, 0 };
	const struct btrfs_tkey max = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, ctx->mnt_fd, BTRFS_CSUM_TREE_OBJECTID, min, max);

	if (ret < 0)
		return false;
	while ((ret = btrfs_tree_next(&r, &it)) > 0 && !scrub_should_stop(ctx))
		;
	btrfs_tree_close(&r);
	return ret == -EIO || ret == -EUCLEAN;
}

/* A vm sysctl in centiseconds (/proc/sys/vm/NAME), or fallback if unreadable. */
static unsigned vm_centisecs(const char *name, unsigned fallback)
{
	char path[64];
	unsigned v = fallback;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/sys/vm/%s", name);
	if ((f = fopen(path, "re"))) {
		if (fscanf(f, "%u", &v) != 1)
			v = fallback;
		fclose(f);
	}
	return v;
}

/*
 * With -x, what the scrub cannot have read: data written after the last
 * commit before it began, and data still in the page cache then (dirty
 * pages are written back once older than dirty_expire_centisecs, by a
 * flusher that wakes every dirty_writeback_centisecs).  So files changed
 * at or after its start less the longer of the commit interval and the
 * expiry, the flusher's period and a second of margin.  The defaults
 * (30 s, 30 s, 5 s) make it 36 s.
 */
static int64_t recent_since(const struct scrub_ctx *ctx)
{
	unsigned commit = btrfs_commit_interval(ctx) * 100;	/* centiseconds */
	unsigned expire = vm_centisecs("dirty_expire_centisecs", 3000);
	unsigned back = (commit > expire ? commit : expire) +
			vm_centisecs("dirty_writeback_centisecs", 500) + 100;
	const char *dbg = getenv("FSCRUB_DEBUG_RECENT_SECONDS");	/* for the tests */
	struct timespec now;

	if (dbg)
		back = (unsigned)strtoul(dbg, NULL, 10) * 100;
	clock_gettime(CLOCK_REALTIME, &now);	/* the clock of mtime and ctime */
	return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - (int64_t)back * 10000000LL;
}

/*
 * Phase 2 without -x: the tree blocks only (btrfs_meta.h), every copy on
 * every device but a missing one; no file data is read.
 */
static int verify_tree_blocks(struct scrub_ctx *ctx, struct btrfs_state *st)
{
	struct btrfs_meta_dev *md = calloc(st->nr_devs ? st->nr_devs : 1, sizeof(*md));
	int ret;

	if (!md)
		return -ENOMEM;
	for (unsigned i = 0; i < st->nr_devs; i++) {
		const struct btrfs_dev *d = &st->devs[i];

		md[i] = (struct btrfs_meta_dev){
			.devid = d->info.devid, .path = (const char *)d->info.path,
			.missing = d->missing, .seed = d->seed, .total_bytes = d->info.total_bytes,
		};
		memcpy(md[i].fsid, d->info.unused, sizeof(md[i].fsid));
		if (d->missing)
			report_missing(ctx, d);
	}
	if (st->readonly)
		report_verbose(ctx, "Phase 2: tree blocks read-only (%s): nothing is repaired",
			       ctx->opt.check_only ? "-n" : "read-only mount");
	ret = btrfs_meta_verify(ctx, md, st->nr_devs, st->readonly, &st->meta);
	free(md);
	return ret;
}

static int btrfs_scan_metadata(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = ctx->backend;
	bool in_progress = false, refused = false;
	int csum_bad = -1;	/* the csum tree unreadable: not known yet */
	int ret = 0;

	if (!ctx->opt.verify_data)
		return verify_tree_blocks(ctx, st);
	if (st->readonly)
		report_verbose(ctx, "Phase 2: read-only scrub (%s): nothing is repaired",
			       ctx->opt.check_only ? "-n" : "read-only mount");
	if (ctx->opt.verify_data)
		st->unsummed.recent_ns = recent_since(ctx);
	kmsg_start(ctx, st);
	for (unsigned i = 0; i < st->nr_devs; i++) {
		struct btrfs_dev *d = &st->devs[i];

		if (!(d->scrub_it = scrubbable(ctx, d)))
			continue;
		if (thread_start(&d->thread, scrub_main, d) == 0)
			d->started = true;
		else
			report_operational(ctx, NULL, NULL, EAGAIN, "cannot start a scrub thread");
	}
	wait_scrubs(ctx, st);
	kmsg_stop(st);
	for (unsigned i = 0; i < st->nr_devs; i++) {
		struct btrfs_dev *d = &st->devs[i];

		if (!d->scrub_it)
			continue;
		if (d->err == EINPROGRESS) {
			in_progress = true;
			continue;
		}
		if (d->err == EROFS && st->rescue.len) {
			refused = true;
			continue;
		}
		if (d->err == EIO && csum_bad < 0)
			csum_bad = csum_tree_unreadable(ctx);
		if (d->err == EIO && csum_bad) {
			report_verbose(ctx, "Phase 2: the scrub of devid %llu stopped at the csum "
				       "tree, which cannot be read (phase 3 reports it)",
				       (unsigned long long)d->info.devid);
			report_device(ctx, st, d);
			continue;
		}
		if (d->err == ECANCELED && scrub_cancelled)
			continue;
		if (d->err)
			report_operational(ctx, NULL, NULL, d->err, "scrub of devid %llu %s",
					   (unsigned long long)d->info.devid, dev_label(d));
		report_device(ctx, st, d);
	}
	if (refused)
		str_info(ctx, CHECK_BTRFS_SCRUB, NULL, NULL, 0, "the kernel does not scrub a "
			 "filesystem mounted with rescue=%s: no tree block or data checksum is "
			 "verified by a scrub; every other check runs", st->rescue.buf);
	if (in_progress) {
		report_operational(ctx, NULL, NULL, 0, "a scrub is already running on this "
				   "filesystem (see 'btrfs scrub status'); not scrubbing");
		ret = 0;
	}
	/*
	 * Under -n a scrub that found errors covered the checksummed data as
	 * well: they are named from the device (btrfs_sectors.c), and reading
	 * the damaged files again through btrfs would repair them from a good
	 * copy -- its read repair writes, -n or not.  Without -n phase 5 reads
	 * every file again, and what it repairs is said.
	 */
	st->scrub_whole = scrub_was_whole(st, ctx->opt.check_only);
	report_log_errors(ctx, st);
	return ret;
}

/*
 * Under -n: the files the scrub found damaged out of phase 5's list.
 * Read through btrfs, a bad copy with a good one would be rewritten (read
 * repair); they are reported already.  A recent file may be among them.
 */
static void drop_damaged(struct btrfs_state *st, struct subvol_ino *v, size_t *nr)
{
	size_t kept = 0;

	sort_items(st->damaged, st->nr_damaged, sizeof(*st->damaged), subvol_ino_cmp);
	for (size_t i = 0; i < *nr; i++)
		if (!find_item(&v[i], st->damaged, st->nr_damaged, sizeof(*st->damaged),
			       subvol_ino_cmp))
			v[kept++] = v[i];
	*nr = kept;
}

/* The data_left hook: see backend.h and btrfs_datasum.h. */
static int btrfs_data_left(struct scrub_ctx *ctx, struct subvol_ino **left, size_t *nr,
			   const char **why)
{
	struct btrfs_state *st = ctx->backend;

	if (!st->scrub_whole) {
		*why = ctx->opt.check_only ? "the kernel's scrub did not cover every device"
					   : "the kernel's scrub did not cover every device, or "
					     "found errors";
		return -EAGAIN;
	}
	if (!btrfs_unsummed_take(&st->unsummed, left, nr)) {
		*why = "the files without data checksums, or those changed since the scrub "
		       "could see them, are not known";
		return -EAGAIN;
	}
	if (ctx->opt.check_only)
		drop_damaged(st, *left, nr);
	return 0;
}

static const char *const dev_stat_names[BTRFS_DEV_STAT_VALUES_MAX] = {
	[BTRFS_DEV_STAT_WRITE_ERRS] = "write",
	[BTRFS_DEV_STAT_READ_ERRS] = "read",
	[BTRFS_DEV_STAT_FLUSH_ERRS] = "flush",
	[BTRFS_DEV_STAT_CORRUPTION_ERRS] = "corruption",
	[BTRFS_DEV_STAT_GENERATION_ERRS] = "generation",
};

static int btrfs_summary(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = ctx->backend;

	for (unsigned i = 0; i < st->nr_devs; i++) {
		struct btrfs_ioctl_get_dev_stats s = {
			.devid = st->devs[i].info.devid, .nr_items = BTRFS_DEV_STAT_VALUES_MAX,
		};
		struct strbuf sb = STRBUF_INIT;
		unsigned long long total = 0;

		if (ioctl(ctx->mnt_fd, BTRFS_IOC_GET_DEV_STATS, &s) < 0)
			return -errno;
		for (unsigned k = 0; k < BTRFS_DEV_STAT_VALUES_MAX && k < s.nr_items; k++) {
			strbuf_addf(&sb, "%s%s %llu", k ? ", " : "", dev_stat_names[k],
				    (unsigned long long)s.values[k]);
			total += s.values[k];
		}
		if (total)
			str_warn(ctx, CHECK_BTRFS_DEV_STATS, NULL, NULL, 0,
				 "devid %llu %s has device error counters: %s (since they were "
				 "last reset with 'btrfs device stats -z')",
				 (unsigned long long)st->devs[i].info.devid, dev_label(&st->devs[i]),
				 sb.buf);
		else
			report_verbose(ctx, "Phase 6: devid %llu %s error counters: %s",
				       (unsigned long long)st->devs[i].info.devid,
				       dev_label(&st->devs[i]), sb.buf);
		strbuf_release(&sb);
	}
	return 0;
}

struct btrfs_bulk *btrfs_bulk_of(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = ctx->backend;

	return st ? st->bulk : NULL;
}

/* Phase 3, walk threads: the files -x must read although the scrub ran. */
static void btrfs_check_inode(struct scrub_ctx *ctx, const struct backend_dir *d,
			      const struct backend_entry *e)
{
	struct btrfs_state *st = ctx->backend;

	btrfs_unsummed_note_recent(&st->unsummed, d, e);
}

struct btrfs_unsummed *btrfs_unsummed_of(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = ctx->backend;

	return &st->unsummed;
}

/*
 * Phase 3, before the walk: the tree check's first pass starts reading
 * beside it.  Without -n the walk's first bulk request commits what was
 * changed before the scan (btrfs_bulk.c) while the pass may be reading
 * already: a change committed then is read as any change of a live
 * filesystem is, and a finding it makes is read again (btrfs_check.c).
 */
static void btrfs_scan_inodes_start(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = ctx->backend;

	st->tcheck = btrfs_check_trees_start(ctx);
}

/* Phase 3, after the walk: what the bulk records served, then the tree check. */
static int btrfs_scan_inodes(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = ctx->backend;
	struct btrfs_tree_check *c = st->tcheck;

	st->tcheck = NULL;	/* btrfs_check_trees() frees it */
	btrfs_meta_finish(st->meta);	/* phase 2's verdicts before the tree check's */
	st->meta = NULL;
	btrfs_bulk_report(ctx, btrfs_bulk_of(ctx));
	return btrfs_check_trees(ctx, c);
}

static void btrfs_cleanup(struct scrub_ctx *ctx)
{
	struct btrfs_state *st = ctx->backend;

	if (!st)
		return;
	btrfs_check_trees_stop(st->tcheck);
	btrfs_meta_stop(st->meta);
	btrfs_bulk_free(st->bulk);
	btrfs_unsummed_release(&st->unsummed);
	free(st->damaged);
	kmsg_stop(st);
	if (st->kmsg_fd >= 0)
		close(st->kmsg_fd);
	pthread_mutex_destroy(&st->lock);
	free(st->log);
	free(st->named);
	free(st->devs);
	strbuf_release(&st->rescue);
	free(st);
	ctx->backend = NULL;
}

const struct scrub_ops btrfs_ops = {
	.name = "btrfs",
	.needs = "CAP_SYS_ADMIN for the kernel scrub",
	.match = btrfs_match,
	.scan_fs = btrfs_scan_fs,
	.scan_metadata = btrfs_scan_metadata,
	.bulk_inodes = btrfs_bulk_inodes,
	.bulk_extents = btrfs_bulk_extents,
	.scan_inodes_start = btrfs_scan_inodes_start,
	.scan_inodes = btrfs_scan_inodes,
	.check_inode = btrfs_check_inode,
	.data_checksummed = btrfs_data_checksummed,
	.data_left = btrfs_data_left,
	.list_xattrs = btrfs_list_xattrs,
	.summary = btrfs_summary,
	.cleanup = btrfs_cleanup,
	.health = btrfs_health,
	.watch_open = btrfs_watch_open,
	.watch_poll = btrfs_watch_poll,
	.watch_close = btrfs_watch_close,
};
