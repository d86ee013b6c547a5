/*
 * Phase 1: find the filesystem.
 *
 * Resolve the argument (a mount point or a mounted device) to one mount
 * through the kernel's mount table, refuse pseudo filesystems, open the
 * mount root and make sure it is the mount named (a covered device's
 * mount is reached through a clone made in a private mount namespace),
 * pick the backend, and open the root the walk will use: a private,
 * read-only, noatime clone of the mount where the kernel allows it.  Then
 * split the descriptor limit between the directory cache and the threads,
 * and let the backend learn the filesystem (its scan_fs hook), falling
 * back to the generic backend when it lacks the privilege it needs.
 *
 * Reads: the options (ctx->opt).  Leaves, for every later phase: what is
 * scrubbed (mntpoint, source, fstype, fsroot, mnt_fd, walk_fd, root_stx,
 * statfs, dev_size), the backend (ctx->ops, ctx->backend), the directory
 * cache and descriptor budget, and the quirks and flags the walk follows
 * (names_hidden, proc_fd_ok, no_fiemap).  It runs before -C progress
 * starts and makes no product for later phases beyond these.
 */
#include "scan/phase.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "scan/context.h"
#include "lib/mountclone.h"
#include "lib/mountpoint.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "tree/walk.h"

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
		if (ctx->walk_fd >= 0)
			return;
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
	dircache_init(&ctx->dcache, avail > FD_BUDGET_MAX ? FD_BUDGET_MAX : (unsigned)avail);
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

	if (stx_get(ctx->mnt_fd, NULL, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
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
	if (stx_get(ctx->mnt_fd, NULL, &stx) == 0 &&
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

int phase1_find_fs(struct scrub_ctx *ctx, unsigned long long *items)
{
	struct mount_info mi;
	struct strbuf err = STRBUF_INIT;
	int ret = mount_resolve(ctx->opt.target, ctx->opt.mtab, &mi, &err);

	(void)items;
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
	ctx->fs_readonly = mount_sb_readonly_by_id(ctx->table_mnt_id);
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
	if (stx_get(ctx->walk_fd, NULL, &ctx->root_stx) < 0) {
		fprintf(stderr, "fscrub: cannot stat '%s': %s\n", ctx->mntpoint, strerror(errno));
		return EXIT_OPERATIONAL;
	}
	if (ctx->root_stx.stx_mask & STATX_MNT_ID) {
		ctx->have_mnt_id = true;
		ctx->walk_mnt_id = ctx->root_stx.stx_mnt_id;
	}
	ctx->dev_size = device_size(ctx);
	ctx->proc_fd_ok = access("/proc/self/fd", R_OK | X_OK) == 0;
	ret = set_fd_budget(ctx);
	if (ret)
		return ret;

	report_verbose(ctx, "Phase 1: scrubbing %s (%s) with %s backend", ctx->mntpoint,
		       ctx->fstype, ctx->ops->name);
	report_verbose(ctx, "Phase 1: source %s, %u threads, %u directory descriptors%s",
		       ctx->source, ctx->opt.nr_threads, ctx->dcache.budget,
		       ctx->opt.check_only ? ", check only (-n)" : "");
	if (strcmp(ctx->fsroot, "/")) {
		report_verbose(ctx, "Phase 1: the mount shows only %s of the filesystem: "
			       "link counts are checked against the names under it", ctx->fsroot);
		atomic_store(&ctx->names_hidden, true);
	}
	/* A clone (open_walk_root(), open_covered()) is a descriptor of its own. */
	if (ctx->walk_fd != ctx->mnt_fd)
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
