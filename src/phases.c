/*
 * phases: the phase list, phase 1 (finding the filesystem) and the -T
 * accounting; see phases.h.  Later phases live in the modules they name.
 */
#include "phases.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "checks.h"
#include "context.h"
#include "dataverify.h"
#include "inode_check.h"
#include "devverify.h"
#include "inoset.h"
#include "ledger.h"
#include "ratelimit.h"
#include "json_report.h"
#include "progress.h"
#include "linktable.h"
#include "mountclone.h"
#include "mountpoint.h"
#include "report.h"
#include "strbuf.h"
#include "walk.h"

#include <sys/mount.h>

/*
 * Descriptors kept for everything but directories: stdio, the mount, the
 * clone, -C, one open file per thread and some slack for libraries.
 */
#define FD_RESERVE 16
/*
 * More cached directory descriptors than this buy nothing: the walk is
 * depth-first, so the few most recent directories are the ones reused.
 */
#define FD_BUDGET_MAX 4096

/* Filesystems with nothing on a medium to check. */
static const char *const pseudo_fstypes[] = {
	"proc", "sysfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs",
	"securityfs", "bpf", "pstore", "efivarfs", "configfs", "fusectl",
	"binfmt_misc", "mqueue", "nsfs", "selinuxfs", "autofs", "rpc_pipefs",
	"hugetlbfs", NULL,
};

static bool is_pseudo(const char *fstype)
{
	for (int i = 0; pseudo_fstypes[i]; i++)
		if (!strcmp(fstype, pseudo_fstypes[i]))
			return true;
	return false;
}

static int open_dir_noatime(int dirfd, const char *path)
{
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOATIME);

	if (fd < 0 && errno == EPERM)
		fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd;
}

/*
 * Walk a private, detached clone of the mount (open_tree): it has no
 * submounts, so the walk cannot cross into another filesystem and sees the
 * directories that other mounts cover.  mnt_fd stays open, so umount of
 * the real mount still fails with EBUSY while fscrub runs.
 *
 * The clone is made read-only and noatime: nothing fscrub does through it
 * can write to the filesystem, and readlink() (which has no O_NOATIME)
 * does not update a symlink's atime.
 */
static void restrict_clone(struct scrub_ctx *ctx, int tree)
{
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOATIME,
		.attr_clr = MOUNT_ATTR__ATIME,
	};

	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) == 0)
		ctx->walk_is_readonly = true;
	else
		report_verbose(ctx, "Phase 1: cannot make the clone read-only and noatime (%s)",
			       strerror(errno));
}

static void open_walk_root(struct scrub_ctx *ctx)
{
	if (ctx->walk_fd >= 0)
		return;		/* a covered mount: open_covered() cloned it */

	/* FSCRUB_DEBUG_NO_CLONE: fault-injection knob for the fallback's tests. */
	int tree = getenv("FSCRUB_DEBUG_NO_CLONE") ? (errno = EPERM, -1) :
		   (int)syscall(SYS_open_tree, ctx->mnt_fd, "",
				OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);

	if (tree >= 0) {
		restrict_clone(ctx, tree);
		ctx->walk_fd = open_dir_noatime(tree, ".");
		close(tree);
		if (ctx->walk_fd >= 0) {
			ctx->walk_is_clone = true;
			return;
		}
	}
	report_verbose(ctx, "Phase 1: cannot clone the mount (%s): submounts are skipped "
		       "and the directories under them are not seen", strerror(errno));
	ctx->walk_fd = ctx->mnt_fd;
}

/* Size of the mount's block device, if FIEMAP offsets are offsets on it. */
static uint64_t device_size(const struct scrub_ctx *ctx)
{
	struct stat st;
	char path[64];
	unsigned long long sectors;
	FILE *f;

	if (stat(ctx->source, &st) < 0 || !S_ISBLK(st.st_mode) ||
	    major(st.st_rdev) != ctx->root_stx.stx_dev_major ||
	    minor(st.st_rdev) != ctx->root_stx.stx_dev_minor)
		return 0;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/size", major(st.st_rdev),
		 minor(st.st_rdev));
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &sectors) != 1)
		sectors = 0;
	fclose(f);
	return sectors * 512;	/* sysfs sizes are in 512-byte sectors */
}

/* Split the descriptor limit between the directory cache and the threads. */
static int set_fd_budget(struct scrub_ctx *ctx)
{
	struct rlimit rl;
	unsigned long long avail;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		rl.rlim_cur = 1024;
	avail = rl.rlim_cur > FD_RESERVE ? rl.rlim_cur - FD_RESERVE : 0;
	/* Each thread pins up to two directories and opens one file. */
	while (ctx->opt.nr_threads > 1 && avail < 4ULL * ctx->opt.nr_threads)
		ctx->opt.nr_threads--;
	if (avail < 4) {
		fprintf(stderr, "fscrub: the open file limit (%llu) is too low to scrub\n",
			(unsigned long long)rl.rlim_cur);
		return EXIT_OPERATIONAL;
	}
	avail -= ctx->opt.nr_threads;
	ctx->fd_budget = avail > FD_BUDGET_MAX ? FD_BUDGET_MAX : (unsigned)avail;
	dircache_init(&ctx->dcache, ctx->fd_budget);
	return 0;
}

static void note_submount(const char *target, const char *fstype, void *arg)
{
	struct scrub_ctx *ctx = arg;

	report_verbose(ctx, "Phase 1: not entering %s (%s): another filesystem",
		       target, fstype ? fstype : "unknown");
}

static void list_submounts(struct scrub_ctx *ctx, int id)
{
	int err;
	struct libmnt_table *tb;

	if (!ctx->opt.verbose || !id)
		return;
	tb = mount_table_load(ctx->opt.mtab, &err);
	if (tb) {
		mount_for_each_child(tb, id, note_submount, ctx);
		mount_table_free(tb);
	}
}

/*
 * The backend's scan_fs; a backend that lacks a privilege (-EPERM or
 * -EACCES, see backend.h) gives way to the generic backend, so that an
 * unprivileged run still walks and checks what it can read.  Said once on
 * standard error, whatever -v says: the run checks less than asked.  Not
 * an operational error (the exit code stays 0 on a clean filesystem, see
 * EXIT STATUS in fscrub.8) unless -t demanded that backend.
 */
static int setup_backend(struct scrub_ctx *ctx)
{
	const struct scrub_ops *ops = ctx->ops;
	int ret = ops->scan_fs ? ops->scan_fs(ctx) : 0;

	if ((ret != -EPERM && ret != -EACCES) || !ops->needs || ops == &generic_ops)
		return ret;
	if (ops->cleanup)
		ops->cleanup(ctx);
	if (ctx->opt.backend)
		report_operational(ctx, NULL, NULL, -ret, "-t %s: the %s backend needs %s "
				   "(%s)", ops->name, ops->name, ops->needs, ctx->source);
	else
		fprintf(stderr, "fscrub: %s: the %s backend needs %s (%s: %s): its checks "
			"are skipped, only the generic checks are done\n", ctx->mntpoint,
			ops->name, ops->needs, ctx->source, strerror(-ret));
	ctx->ops = &generic_ops;
	return generic_ops.scan_fs(ctx);
}

/*
 * A device's mount that another mount covers: its path shows the other
 * filesystem.  Reached through a clone made in a private mount namespace
 * (mountclone.h) or, without the privilege for that, refused: scrubbing
 * what the path shows would check a filesystem other than the one named.
 */
static int open_covered(struct scrub_ctx *ctx, const struct mount_info *mi)
{
	struct strbuf why = STRBUF_INIT;
	int hold = -1, walk = -1;
	bool readonly = false;
	int ret = mount_clone_covered(mi, &hold, &walk, &readonly, &why);

	if (ret < 0) {
		fprintf(stderr, "fscrub: %s is mounted on %s, but another mount covers it, and "
			"it cannot be reached otherwise (%s: %s); not scrubbing what the path "
			"shows instead\n", ctx->opt.target, mi->target, why.buf, strerror(-ret));
		strbuf_release(&why);
		return EXIT_OPERATIONAL;
	}
	strbuf_release(&why);
	ctx->mnt_fd = open_dir_noatime(hold, ".");
	ctx->walk_fd = open_dir_noatime(walk, ".");
	close(hold);
	close(walk);
	if (ctx->mnt_fd < 0 || ctx->walk_fd < 0) {
		fprintf(stderr, "fscrub: cannot open the clone of the mount on '%s': %s\n",
			mi->target, strerror(errno));
		return EXIT_OPERATIONAL;
	}
	ctx->walk_is_clone = true;
	ctx->walk_is_readonly = readonly;
	fprintf(stderr, "fscrub: %s is mounted on %s, which another mount covers: scrubbing "
		"it through a private clone of its mount\n", ctx->opt.target, mi->target);
	return 0;
}

/*
 * Is what mnt_fd shows the mount the argument names?  The mount opened
 * must be the one the kernel's table named (with -m, for a device: a mount
 * of that device).  If not, a device's mount point was covered meanwhile
 * (1: reach it by a clone); a mount point's table changed while it was
 * read (refused).
 */
static int check_opened(struct scrub_ctx *ctx, const struct mount_info *mi)
{
	struct statx stx;
	bool ok = true;

	if (walk_statx(ctx->mnt_fd, NULL, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
		return 0;	/* cannot tell (kernels before 5.8) */
	if (!ctx->opt.mtab && mi->id)
		ok = stx.stx_mnt_id == (uint64_t)mi->id;
	else if (mi->by_device)
		ok = mount_id_is_device((int)stx.stx_mnt_id, mi->arg_rdev);
	if (ok || mi->by_device)
		return ok ? 0 : 1;
	fprintf(stderr, "fscrub: '%s' shows another mount than the mount table named: "
		"the mounts changed while it was opened; not scrubbing\n", ctx->mntpoint);
	return EXIT_OPERATIONAL;
}

/*
 * Open the mount root (mnt_fd) of what the argument names; for a covered
 * device, the clones too (walk_fd).
 */
static int open_mount(struct scrub_ctx *ctx, const struct mount_info *mi)
{
	struct statx stx;
	int ret;

	if (mi->covered)
		return open_covered(ctx, mi);
	ctx->mnt_fd = open_dir_noatime(AT_FDCWD, ctx->mntpoint);
	if (ctx->mnt_fd < 0) {
		fprintf(stderr, "fscrub: cannot open '%s': %s\n", ctx->mntpoint, strerror(errno));
		return EXIT_OPERATIONAL;
	}
	if (walk_statx(ctx->mnt_fd, NULL, &stx) == 0 &&
	    (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	    !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		fprintf(stderr, "fscrub: '%s' is not a mount point\n", ctx->mntpoint);
		return EXIT_USAGE;
	}
	ret = check_opened(ctx, mi);
	if (!ret)
		return 0;
	/* Not the mount named: nothing of it is scrubbed, so no summary either. */
	close(ctx->mnt_fd);
	ctx->mnt_fd = -1;
	return ret == 1 ? open_covered(ctx, mi) : ret;
}

static int phase1_find_fs(struct scrub_ctx *ctx)
{
	struct mount_info mi;
	struct strbuf err = STRBUF_INIT;
	int ret = mount_resolve(ctx->opt.target, ctx->opt.mtab, &mi, &err);

	if (ret) {
		fprintf(stderr, "fscrub: %s\n", err.buf);
		strbuf_release(&err);
		mount_info_release(&mi);
		return ret;
	}
	strbuf_release(&err);
	ctx->mntpoint = mi.target;
	ctx->source = mi.source;
	ctx->fstype = mi.fstype;
	ctx->fsroot = mi.fsroot;
	ctx->table_mnt_id = ctx->opt.mtab ? 0 : mi.id;
	if (mi.nr_mounts > 1)
		fprintf(stderr, "fscrub: %s is mounted in %u places; scrubbing %s\n",
			ctx->opt.target, mi.nr_mounts, ctx->mntpoint);
	/* A mount point names what it shows: the top of a stack (see fscrub.8). */
	if (mi.nr_stacked > 1)
		fprintf(stderr, "fscrub: %u mounts are stacked on %s; scrubbing the top one, "
			"which the path shows (%s, %s); name a device to scrub one below\n",
			mi.nr_stacked, ctx->mntpoint, ctx->fstype, ctx->source);

	if (is_pseudo(ctx->fstype)) {
		fprintf(stderr, "fscrub: '%s' is a %s filesystem: there is nothing to scrub\n",
			ctx->mntpoint, ctx->fstype);
		return EXIT_USAGE;
	}
	ret = open_mount(ctx, &mi);
	if (ret)
		return ret;
	if (fstatfs(ctx->mnt_fd, &ctx->sfs) < 0 || fstatvfs(ctx->mnt_fd, &ctx->svfs) < 0) {
		fprintf(stderr, "fscrub: cannot statfs '%s': %s\n", ctx->mntpoint, strerror(errno));
		return EXIT_OPERATIONAL;
	}
	ctx->ops = backend_select(ctx);
	/* -t picks among the backends that fit; it cannot make one fit. */
	if (ctx->opt.backend && ctx->ops->match && !ctx->ops->match(ctx)) {
		fprintf(stderr, "fscrub: -t %s: '%s' is not %s (it is %s)\n", ctx->ops->name,
			ctx->mntpoint, ctx->ops->name, ctx->fstype);
		return EXIT_OPERATIONAL;
	}
	open_walk_root(ctx);
	if (walk_statx(ctx->walk_fd, NULL, &ctx->root_stx) < 0) {
		fprintf(stderr, "fscrub: cannot stat '%s': %s\n", ctx->mntpoint, strerror(errno));
		return EXIT_OPERATIONAL;
	}
	ctx->xlinks.dev = stx_devno(&ctx->root_stx);
	if (ctx->root_stx.stx_mask & STATX_MNT_ID) {
		ctx->have_mnt_id = true;
		ctx->walk_mnt_id = ctx->root_stx.stx_mnt_id;
	}
	ctx->dev_size = device_size(ctx);
	ctx->proc_fd_ok = access("/proc/self/fd", R_OK | X_OK) == 0;
	ctx->links = linktable_new();
	ret = set_fd_budget(ctx);
	if (ret)
		return ret;

	report_verbose(ctx, "Phase 1: scrubbing %s (%s) with %s backend", ctx->mntpoint,
		       ctx->fstype, ctx->ops->name);
	report_verbose(ctx, "Phase 1: source %s, %u threads, %u directory descriptors%s",
		       ctx->source, ctx->opt.nr_threads, ctx->fd_budget,
		       ctx->opt.check_only ? ", check only (-n)" : "");
	if (strcmp(ctx->fsroot, "/")) {
		report_verbose(ctx, "Phase 1: the mount shows only %s of the filesystem: "
			       "link counts are checked against the names under it", ctx->fsroot);
		atomic_store(&ctx->names_hidden, true);
	}
	if (ctx->walk_is_clone)
		report_verbose(ctx, "Phase 1: walking a private%s clone of the mount: "
			       "submounts are not entered, covered directories are seen",
			       ctx->walk_is_readonly ? " read-only, noatime" : "");
	else
		atomic_store(&ctx->names_hidden, true);
	list_submounts(ctx, mi.id);
	if (!ctx->proc_fd_ok)
		str_info(ctx, CHECK_XATTR_UNREADABLE, NULL, NULL, 0,
			 "/proc is not mounted: attributes of symlinks and special files "
			 "are not checked");
	if (getenv("FSCRUB_DEBUG_NO_FIEMAP")) {
		/* Fault-injection knob for the tests: take the FIBMAP path. */
		ctx->no_fiemap = true;
		str_info(ctx, CHECK_EXTENT_UNSUPPORTED, NULL, NULL, 0,
			 "FSCRUB_DEBUG_NO_FIEMAP: extent maps are checked with FIBMAP");
	}
	ret = setup_backend(ctx);
	if (ret < 0) {
		report_operational(ctx, NULL, NULL, -ret, "%s backend setup", ctx->ops->name);
		return EXIT_OPERATIONAL;
	}
	return 0;
}

/* A backend hook's failure is operational; the run goes on. */
static void run_hook(struct scrub_ctx *ctx, int (*hook)(struct scrub_ctx *), const char *what)
{
	int ret;

	if (!hook)
		return;
	ret = hook(ctx);
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "%s backend: %s", ctx->ops->name, what);
}

static int phase2_metadata(struct scrub_ctx *ctx, unsigned long long *items)
{
	(void)items;
	run_hook(ctx, ctx->ops->scan_metadata, "metadata scan");
	return 0;
}

static int phase3_inodes(struct scrub_ctx *ctx, unsigned long long *items)
{
	struct scrub_stats stats = { 0 };
	struct timespec now;
	int ret;

	/*
	 * Timestamps are coarse: the kernel's coarse clock lags by up to a
	 * tick, and some filesystems (ext4 with 128-byte inodes) keep whole
	 * seconds, so a change at or after the start may carry a ctime up to
	 * 1 s before it.  An inode whose ctime is within 1 s before the scan
	 * began is treated as changed during it.
	 */
	clock_gettime(CLOCK_REALTIME, &now);
	ctx->changed_since_ns = ((uint64_t)now.tv_sec - 1) * 1000000000ULL + (uint64_t)now.tv_nsec;
	/* The walk notes the files the checksum ledger will hash in phase 5. */
	if (!ctx->ops->scan_data && ledger_new(ctx, &ctx->ledger) < 0)
		return EXIT_USAGE;
	ret = walk_tree(ctx, &inode_check_visitor, NULL, &stats, items);

	ctx->stats = stats;
	if (ret < 0) {
		report_operational(ctx, NULL, NULL, -ret, "cannot start the tree walk");
		return EXIT_OPERATIONAL;
	}
	*items = stats.entries;
	report_verbose(ctx, "Phase 3: %llu directories, %llu files, %llu symlinks, %llu "
		       "special files, %llu extents, %llu attributes",
		       stats.dirs, stats.files, stats.symlinks, stats.specials,
		       stats.extents, stats.xattrs);
	if (stats.symlinks_unread)
		str_info(ctx, CHECK_SYMLINK_UNREAD, NULL, NULL, 0,
			 "%llu of %llu symlinks were not read (symlink.size not checked): "
			 "reading them would change their access times, as the walk is not "
			 "through a noatime clone of the mount", stats.symlinks_unread,
			 stats.symlinks);
	run_hook(ctx, ctx->ops->scan_inodes, "inode scan");
	return 0;
}

static int phase4_links(struct scrub_ctx *ctx, unsigned long long *items)
{
	*items = linktable_count(ctx->links);
	inode_check_links(ctx);
	return 0;
}

/* The per-file reader, for every file or (only != NULL) for those inodes. */
static int read_files(struct scrub_ctx *ctx, const struct ino_key *only, size_t nr_only,
		      struct scrub_stats *stats)
{
	struct ratelimit limit;
	struct dataverify_args args = { .linked = inoset_new(), .only = only,
					.nr_only = nr_only, .limit = &limit };
	int ret;

	ratelimit_init(&limit, ctx->opt.limit_rate);
	ret = walk_tree(ctx, &dataverify_visitor, &args, stats, NULL);
	ratelimit_destroy(&limit);
	inoset_free(args.linked);
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "cannot start the data scan");
	return ret;
}

/*
 * The inodes the per-file reader takes after the device reader: those
 * whose extents are not all known, and a manifest's (sorted by
 * ino_key_cmp, distinct).
 */
static struct ino_key *per_file_inodes(struct scrub_ctx *ctx, size_t *n)
{
	struct xlink_list *l = &ctx->xlinks;
	size_t nr_manifest, w = 0;
	const struct ino_key *manifest = ledger_per_file(ctx->ledger, &nr_manifest);
	struct ino_key *v = xmalloc((l->nr_unmapped + nr_manifest + 1) * sizeof(*v));

	if (l->nr_unmapped)	/* memcpy from NULL is undefined, even of 0 bytes */
		memcpy(v, l->unmapped, l->nr_unmapped * sizeof(*v));
	if (nr_manifest)
		memcpy(v + l->nr_unmapped, manifest, nr_manifest * sizeof(*v));
	*n = l->nr_unmapped + nr_manifest;
	if (*n)
		qsort(v, *n, sizeof(*v), ino_key_cmp);
	for (size_t i = 0; i < *n; i++)
		if (!w || !ino_key_eq(v[w - 1], v[i]))
			v[w++] = v[i];
	*n = w;
	return v;
}

static int phase5_data(struct scrub_ctx *ctx, unsigned long long *items)
{
	struct scrub_stats stats = { 0 };
	struct xlink_list *l = &ctx->xlinks;
	unsigned long long dev_bytes = 0;
	const char *why = NULL;
	int ret = 0;

	if (ctx->ops->scan_data) {
		if (ctx->opt.record || ctx->opt.manifest_path)
			str_info(ctx, CHECK_LEDGER_RECORD, NULL, NULL, 0, "the %s backend verifies "
				 "data by its own checksums: --record and --manifest are not used",
				 ctx->ops->name);
		run_hook(ctx, ctx->ops->scan_data, "data verification");
		return 0;
	}
	ledger_prepare(ctx, ctx->ledger);
	if (devverify_run(ctx, &dev_bytes, &why) == 0) {
		size_t nr_only;
		struct ino_key *only = per_file_inodes(ctx, &nr_only);

		/* Then the files the device reader could not know all of. */
		if (nr_only && !scrub_should_stop(ctx)) {
			report_verbose(ctx, "Phase 5: reading %zu files file by file (extents not "
				       "all known, or in the manifest)", nr_only);
			if (read_files(ctx, only, nr_only, &stats) < 0)
				ret = EXIT_OPERATIONAL;
		}
		if (!ret && !scrub_should_stop(ctx) &&
		    ledger_judge_walk(ctx, ctx->ledger, only, nr_only) < 0) {
			report_operational(ctx, NULL, NULL, EIO, "cannot walk the tree to check "
					   "the checksum records");
			ret = EXIT_OPERATIONAL;
		}
		free(only);
	} else {
		report_verbose(ctx, "Phase 5: reading file by file: %s", why);
		if (read_files(ctx, NULL, 0, &stats) < 0)
			ret = EXIT_OPERATIONAL;
	}
	ledger_finish(ctx, ctx->ledger);
	if (ret)
		return ret;
	xlink_list_release(l);
	*items = stats.bytes_read + dev_bytes;
	ctx->stats.bytes_read = stats.bytes_read + dev_bytes;
	report_verbose(ctx, "Phase 5: %llu bytes read (%llu from the device in physical order, "
		       "%llu from %llu files)", ctx->stats.bytes_read, dev_bytes,
		       stats.bytes_read, stats.files);
	return 0;
}

static int phase6_summary(struct scrub_ctx *ctx, unsigned long long *items)
{
	(void)items;
	run_hook(ctx, ctx->ops->summary, "summary");
	return 0;
}

struct phase {
	const char *title;
	const char *unit;	/* what the -T item count counts */
	const char *progress_unit;	/* what -C counts (totals from statfs) */
	int (*run)(struct scrub_ctx *ctx, unsigned long long *items);
	bool data_only;		/* only with -x */
};

static const struct phase phases[] = {
	{ "Find the filesystem", "", "steps", NULL, false },
	{ "Check filesystem metadata", "", "steps", phase2_metadata, false },
	{ "Scan all inodes and the directory tree", "entries", "inodes", phase3_inodes, false },
	{ "Check link counts, back pointers and cross-linked blocks", "multiply-linked inodes", "steps",
	  phase4_links, false },
	{ "Verify file data", "bytes", "bytes", phase5_data, true },
	{ "Check summary counters", "", "steps", phase6_summary, false },
};

struct phase_clock {
	struct timespec wall;
	struct rusage ru;
};

static void clock_now(struct phase_clock *c)
{
	clock_gettime(CLOCK_MONOTONIC, &c->wall);
	getrusage(RUSAGE_SELF, &c->ru);
}

static double tv_sec(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_usec - a->tv_usec) / 1e6;
}

/* -T and the JSON report's "phases". */
static void account_phase(struct scrub_ctx *ctx, int n, const struct phase *p,
			  const struct phase_clock *a, const struct phase_clock *b,
			  unsigned long long items)
{
	double wall = (double)(b->wall.tv_sec - a->wall.tv_sec) +
		      (double)(b->wall.tv_nsec - a->wall.tv_nsec) / 1e9;
	double user = tv_sec(&a->ru.ru_utime, &b->ru.ru_utime);
	double sys = tv_sec(&a->ru.ru_stime, &b->ru.ru_stime);

	json_report_phase(ctx, n, p->title, wall, user, sys, items, p->unit);
	if (!ctx->opt.timing)
		return;
	if (p->unit[0])
		report_text(ctx, "Phase %d: wall %.3fs, user %.3fs, system %.3fs, peak RSS "
			    "%.1f MiB, %llu %s", n, wall, user, sys,
			    (double)b->ru.ru_maxrss / 1024.0, items, p->unit);
	else
		report_text(ctx, "Phase %d: wall %.3fs, user %.3fs, system %.3fs, peak RSS "
			    "%.1f MiB", n, wall, user, sys, (double)b->ru.ru_maxrss / 1024.0);
}

/* What a phase will count to, from statfs now: inodes or bytes in use. */
static unsigned long long phase_total(const struct scrub_ctx *ctx, size_t i)
{
	struct statvfs sv;

	if (fstatvfs(ctx->mnt_fd, &sv) < 0)
		return 0;
	if (i == 2)
		return sv.f_files > sv.f_ffree ? sv.f_files - sv.f_ffree : 0;
	if (i == 4)
		return (sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	return 0;
}

/*
 * A lazy unmount (umount -l) detaches the mount while fscrub still holds
 * it: the scan could go on through the clone, but the administrator asked
 * for the filesystem to go away.  Stop with an operational error.
 */
static bool unmounted_meanwhile(struct scrub_ctx *ctx)
{
	if (!ctx->table_mnt_id || mount_id_attached(ctx->table_mnt_id))
		return false;
	report_operational(ctx, NULL, NULL, 0, "the filesystem was unmounted during the scan");
	return true;
}

int phases_run(struct scrub_ctx *ctx)
{
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		const struct phase *p = &phases[i];
		struct phase_clock start, end;
		unsigned long long items = 0;
		int ret;

		if (p->data_only && !ctx->opt.verify_data)
			continue;
		if (scrub_should_stop(ctx))
			break;
		clock_now(&start);
		report_verbose(ctx, "Phase %zu: %s.", i + 1, p->title);
		if (i > 0)
			progress_phase(ctx, (int)i + 1, p->title, phase_total(ctx, i),
				       p->progress_unit);
		ret = p->run ? p->run(ctx, &items) : phase1_find_fs(ctx);
		if (ret)
			return ret;
		progress_phase_end(ctx);
		if (i > 0 && unmounted_meanwhile(ctx))
			return EXIT_OPERATIONAL;
		if (i == 0 && (ret = progress_start(ctx)) < 0)
			report_operational(ctx, NULL, NULL, -ret, "cannot start the progress reporter");
		clock_now(&end);
		account_phase(ctx, (int)i + 1, p, &start, &end, items);
	}
	return 0;
}
