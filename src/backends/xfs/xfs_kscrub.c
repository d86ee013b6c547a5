/*
 * xfs_kscrub: the kernel's online scrub (XFS_IOC_SCRUB_METADATA) of every
 * metadata object, and its repair.
 *
 * Phase 1 probes the ioctl (type PROBE); without it (a kernel built
 * without CONFIG_XFS_ONLINE_SCRUB, as most distribution kernels are) fscrub
 * says so once and does its own checks only.  Unless -n, it probes again
 * with XFS_SCRUB_IFLAG_REPAIR: that is the only way to learn whether the
 * kernel repairs.  Under -n the repair flag is never set, in no call.
 *
 * Phase 2 checks in dependency order, as xfs_scrub does: per AG the headers
 * (sb, agf, agfl, agi) and then the btrees (bnobt, cntbt, inobt, finobt,
 * rmapbt, refcountbt), the AGs in parallel; the filesystem-wide objects
 * (realtime bitmap and summary, quotas); every inode BULKSTAT found (inode
 * core, fork maps, directory, xattrs, symlink, parent, directory tree), in
 * parallel over ranges of inodes; then the summaries that depend on all of
 * that (fscounters, quotacheck, nlinks, and "healthy" last).  A type the
 * kernel does not know, or that the filesystem does not have (rmapbt on a
 * filesystem without it, quotas when off), comes back ENOENT: skipped.
 *
 * The output flags: corrupt and xcorrupt (cross-referencing found a
 * disagreement) are errors; preen is an info (the object could be
 * optimised); incomplete and warning are warnings.  Xfail (the object
 * could not be cross-referenced) is counted, per AG: the kernel sets it on
 * every object whose cross-check touched metadata it found sick, so one
 * damaged btree record marks every inode of the AG (886 objects for one
 * sparse inode holemask).  As xfs_scrub does, that is an info, one per AG
 * with the count (ks_report_xfails()); the damage is the error.  EBUSY and EDEADLOCK mean the kernel could not get
 * its locks on a busy filesystem: the call is retried.
 *
 * Repair (not under -n, only if the probe accepted the flag): everything
 * found corrupt is repaired after all the checks, in the same dependency
 * order; each object is checked first (an earlier repair may have fixed
 * it), repaired, and checked again.  "Repaired" (exit 1 if nothing else is
 * wrong) only when the last check is clean; otherwise the error stands.
 */
#include "backends/xfs/xfs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "scan/context.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

/* Types newer than the xfslibs-dev 6.1 headers (the kernel's ABI numbers). */
#define KS_TYPE_QUOTACHECK	25	/* Linux 6.9 */
#define KS_TYPE_NLINKS		26	/* Linux 6.9 */
#define KS_TYPE_HEALTHY		27	/* Linux 6.9 */
#define KS_TYPE_DIRTREE		28	/* Linux 6.10 */

/*
 * EBUSY/EDEADLOCK: the kernel gave up on its locks.  Ten tries with a
 * growing pause (10 ms .. 100 ms, about half a second in all) outlast a
 * burst of activity without stalling the scrub on a busy object.
 */
#define KS_TRIES 10

enum ks_scope {
	KS_AGHEADER,	/* once per AG, before its btrees */
	KS_AGBTREE,
	KS_FS,		/* filesystem-wide objects */
	KS_INODE,	/* once per inode */
	KS_SUMMARY,	/* after everything it summarises */
};

struct ks_type {
	uint32_t type;
	enum ks_scope scope;
	const char *name;	/* xfs_scrub's name for it */
	const char *what;
	mode_t only;		/* S_IFDIR/S_IFLNK: inodes of that type only; 0: all */
	bool aggregate;		/* says what the others found: never repaired itself */
};

/* In dependency order: repairs are done in this order too. */
static const struct ks_type ks_types[] = {
	{ XFS_SCRUB_TYPE_SB, KS_AGHEADER, "sb", "superblock", 0, false },
	{ XFS_SCRUB_TYPE_AGF, KS_AGHEADER, "agf", "free space header", 0, false },
	{ XFS_SCRUB_TYPE_AGFL, KS_AGHEADER, "agfl", "free list", 0, false },
	{ XFS_SCRUB_TYPE_AGI, KS_AGHEADER, "agi", "inode header", 0, false },
	{ XFS_SCRUB_TYPE_BNOBT, KS_AGBTREE, "bnobt", "free space by block btree", 0, false },
	{ XFS_SCRUB_TYPE_CNTBT, KS_AGBTREE, "cntbt", "free space by length btree", 0, false },
	{ XFS_SCRUB_TYPE_INOBT, KS_AGBTREE, "inobt", "inode btree", 0, false },
	{ XFS_SCRUB_TYPE_FINOBT, KS_AGBTREE, "finobt", "free inode btree", 0, false },
	{ XFS_SCRUB_TYPE_RMAPBT, KS_AGBTREE, "rmapbt", "reverse mapping btree", 0, false },
	{ XFS_SCRUB_TYPE_REFCNTBT, KS_AGBTREE, "refcountbt", "reference count btree", 0, false },
	{ XFS_SCRUB_TYPE_RTBITMAP, KS_FS, "rtbitmap", "realtime bitmap", 0, false },
	{ XFS_SCRUB_TYPE_RTSUM, KS_FS, "rtsummary", "realtime summary", 0, false },
	{ XFS_SCRUB_TYPE_UQUOTA, KS_FS, "usrquota", "user quotas", 0, false },
	{ XFS_SCRUB_TYPE_GQUOTA, KS_FS, "grpquota", "group quotas", 0, false },
	{ XFS_SCRUB_TYPE_PQUOTA, KS_FS, "prjquota", "project quotas", 0, false },
	{ XFS_SCRUB_TYPE_INODE, KS_INODE, "inode", "inode record", 0, false },
	{ XFS_SCRUB_TYPE_BMBTD, KS_INODE, "bmapbtd", "data fork mapping", 0, false },
	{ XFS_SCRUB_TYPE_BMBTA, KS_INODE, "bmapbta", "attribute fork mapping", 0, false },
	{ XFS_SCRUB_TYPE_BMBTC, KS_INODE, "bmapbtc", "copy-on-write fork mapping", 0, false },
	{ XFS_SCRUB_TYPE_DIR, KS_INODE, "directory", "directory", S_IFDIR, false },
	{ XFS_SCRUB_TYPE_XATTR, KS_INODE, "xattr", "extended attributes", 0, false },
	{ XFS_SCRUB_TYPE_SYMLINK, KS_INODE, "symlink", "symlink target", S_IFLNK, false },
	{ XFS_SCRUB_TYPE_PARENT, KS_INODE, "parent", "parent pointer", 0, false },
	{ KS_TYPE_DIRTREE, KS_INODE, "dirtree", "directory tree", S_IFDIR, false },
	{ XFS_SCRUB_TYPE_FSCOUNTERS, KS_SUMMARY, "fscounters", "summary counters", 0, false },
	{ KS_TYPE_QUOTACHECK, KS_SUMMARY, "quotacheck", "quota usage counts", 0, false },
	{ KS_TYPE_NLINKS, KS_SUMMARY, "nlinks", "file link counts", 0, false },
	{ KS_TYPE_HEALTHY, KS_SUMMARY, "healthy", "health of everything checked", 0, true },
};

#define NR_KS_TYPES (sizeof(ks_types) / sizeof(ks_types[0]))

/*
 * Types newer than the ones above (Linux 6.13 added metadata directory
 * paths and realtime groups: 29 and on) are not known to fscrub but are
 * asked for anyway, once each, for the whole filesystem (AG or group 0,
 * no inode): a kernel that has one says what it found, and it is reported
 * by number.  Never repaired, only looked at again after the repairs.
 */
#define KS_NEWER_FIRST	(KS_TYPE_DIRTREE + 1)
#define KS_NEWER_LAST	63
#define NR_KS_NEWER	(KS_NEWER_LAST - KS_NEWER_FIRST + 1)
#define NR_KS_ALL	(NR_KS_TYPES + NR_KS_NEWER)

struct ks_newer {
	struct ks_type t;
	char name[16], what[48];
};

static struct ks_newer ks_newer[NR_KS_NEWER];

/* Phase 2 is single-threaded when this runs, before any newer type is used. */
static void ks_newer_init(void)
{
	for (unsigned i = 0; i < NR_KS_NEWER; i++) {
		struct ks_newer *n = &ks_newer[i];

		snprintf(n->name, sizeof(n->name), "type %u", KS_NEWER_FIRST + i);
		snprintf(n->what, sizeof(n->what), "scrub type %u (newer than fscrub)",
			 KS_NEWER_FIRST + i);
		n->t = (struct ks_type){ KS_NEWER_FIRST + i, KS_FS, n->name, n->what, 0, true };
	}
}

/* A type's place among all of them: the table's, then the newer ones. */
static size_t ks_type_index(const struct ks_type *t)
{
	if (t >= ks_types && t < ks_types + NR_KS_TYPES)
		return (size_t)(t - ks_types);
	return NR_KS_TYPES + (size_t)((const struct ks_newer *)(const void *)t - ks_newer);
}

#define OFLAGS_BAD (XFS_SCRUB_OFLAG_CORRUPT | XFS_SCRUB_OFLAG_XCORRUPT)

/* One object to check: a type and where. */
struct ks_obj {
	const struct ks_type *t;
	uint32_t agno;
	uint64_t ino;
	uint32_t gen;
};

struct ks_repair {
	struct ks_obj o;
	uint32_t oflags;		/* what the check said */
	size_t order;			/* dependency order: scope, then position */
};

struct ks_run {
	struct scrub_ctx *ctx;
	struct xfs_state *xs;
	bool repair;			/* collect repairs (not -n, kernel repairs) */
	pthread_mutex_t lock;
	struct ks_repair *repairs;
	size_t nr_repairs, alloc_repairs;
	atomic_bool absent_said[NR_KS_ALL];	/* "not on this kernel/fs" said */
	atomic_ullong calls;
	atomic_ullong xfail_cleared;	/* cross-referencing works after the repairs */
	/* Objects that could not be cross-referenced, per AG; [agcount]: the filesystem's. */
	atomic_ullong *xfail;
	unsigned agino_shift;		/* inode number >> agino_shift = its AG */
};

static int ks_call(int fd, const struct ks_obj *o, bool repair, uint32_t *oflags)
{
	for (int i = 0;; i++) {
		struct xfs_scrub_metadata sm = {
			.sm_type = o->t ? o->t->type : XFS_SCRUB_TYPE_PROBE,
			.sm_flags = repair ? XFS_SCRUB_IFLAG_REPAIR : 0,
			.sm_ino = o->ino, .sm_gen = o->gen, .sm_agno = o->agno,
		};

		if (ioctl(fd, XFS_IOC_SCRUB_METADATA, &sm) == 0) {
			*oflags = sm.sm_flags & XFS_SCRUB_FLAGS_OUT;
			return 0;
		}
		int err = errno;

		if ((err == EBUSY || err == EDEADLK) && i + 1 < KS_TRIES) {
			struct timespec pause = { 0, 10000000L * (i + 1) };

			nanosleep(&pause, NULL);
			continue;
		}
		return -err;
	}
}

static void ks_describe(struct strbuf *sb, const struct ks_obj *o)
{
	switch (o->t->scope) {
	case KS_AGHEADER:
	case KS_AGBTREE:
		strbuf_addf(sb, "AG %u %s (%s)", o->agno, o->t->what, o->t->name);
		break;
	case KS_INODE:
		strbuf_addf(sb, "%s (%s)", o->t->what, o->t->name);
		break;
	case KS_FS:
	case KS_SUMMARY:
		strbuf_addf(sb, "%s (%s)", o->t->what, o->t->name);
		break;
	}
}

/* A finding about o: about the filesystem, or held back for the inode's name. */
static void ks_report_at(struct ks_run *r, const struct ks_obj *o, enum severity sev,
			 const char *check, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

static void ks_report_at(struct ks_run *r, const struct ks_obj *o, enum severity sev,
			 const char *check, const char *file, int line, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	ks_describe(&sb, o);
	strbuf_addstr(&sb, ": ");
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	if (o->t->scope == KS_INODE)
		xfs_defer_at(r->xs, o->ino, sev, check, file, line, "%s", sb.buf);
	else
		report_at(r->ctx, sev, check, NULL, NULL, 0, file, line, "%s", sb.buf);
	strbuf_release(&sb);
}

#define ks_report(r, o, sev, check, ...) \
	ks_report_at(r, o, sev, check, __FILE__, __LINE__, __VA_ARGS__)

/* log2 of n rounded up: the bits of an AG block number or of an inode's place in a block. */
static unsigned log2_up(uint64_t n)
{
	unsigned l = 0;

	while ((1ULL << l) < n)
		l++;
	return l;
}

/* The xfail bucket of an object: its AG, or the filesystem's (agcount). */
static uint32_t xfail_bucket(const struct ks_run *r, const struct ks_obj *o)
{
	uint32_t agcount = r->xs->geo.agcount;
	uint64_t agno = o->t->scope == KS_INODE ? o->ino >> r->agino_shift :
			o->t->scope == KS_AGHEADER || o->t->scope == KS_AGBTREE ? o->agno : agcount;

	return agno < agcount ? (uint32_t)agno : agcount;
}

/* An object that could not be cross-referenced: counted (see the head comment). */
static void ks_xfail(struct ks_run *r, const struct ks_obj *o)
{
	if (r->xfail)
		atomic_fetch_add(&r->xfail[xfail_bucket(r, o)], 1);
	else	/* no memory for the counts: each one said */
		ks_report(r, o, SEV_INFO, CHECK_XFS_SCRUB_WARNING,
			  "could not be cross-referenced with other metadata");
}

/* One info per AG (and for the filesystem-wide objects) with a count. */
static void ks_report_xfails(struct ks_run *r)
{
	for (uint32_t b = 0; r->xfail && b <= r->xs->geo.agcount; b++) {
		unsigned long long n = atomic_load(&r->xfail[b]);
		char where[32];

		if (!n)
			continue;
		if (b < r->xs->geo.agcount)
			snprintf(where, sizeof(where), "AG %u", b);
		else
			snprintf(where, sizeof(where), "filesystem-wide");
		str_info(r->ctx, CHECK_XFS_SCRUB_WARNING, NULL, NULL, 0,
			 "%s: %llu metadata %s could not be cross-referenced with other "
			 "metadata (the kernel marks every object whose cross-check touched "
			 "metadata it found sick; that damage is reported on its own)", where, n,
			 n == 1 ? "object" : "objects");
	}
}

static const char *bad_how(uint32_t oflags)
{
	if ((oflags & OFLAGS_BAD) == XFS_SCRUB_OFLAG_XCORRUPT)
		return "disagrees with other metadata (cross-referencing found it corrupt)";
	return "is corrupt";
}

static void queue_repair(struct ks_run *r, const struct ks_obj *o, uint32_t oflags)
{
	size_t pos = ks_type_index(o->t);

	pthread_mutex_lock(&r->lock);
	if (r->nr_repairs == r->alloc_repairs) {
		r->alloc_repairs = r->alloc_repairs ? 2 * r->alloc_repairs : 16;
		r->repairs = xrealloc(r->repairs, r->alloc_repairs * sizeof(*r->repairs));
	}
	r->repairs[r->nr_repairs++] = (struct ks_repair){
		.o = *o, .oflags = oflags, .order = (size_t)o->t->scope * NR_KS_ALL + pos,
	};
	pthread_mutex_unlock(&r->lock);
}

/* Check one object and report what the kernel said. */
static void ks_check(struct ks_run *r, const struct ks_obj *o)
{
	struct scrub_ctx *ctx = r->ctx;
	uint32_t of = 0;
	int ret;

	if (r->xs->shut_down || scrub_should_stop(ctx))
		return;
	ret = ks_call(r->xs->fd, o, false, &of);
	atomic_fetch_add(&r->calls, 1);
	if (ret == -ENOENT || (ret == -EINVAL && o->t->scope == KS_INODE)) {
		/* Not on this kernel or filesystem; an inode: freed since BULKSTAT. */
		if (o->t->scope != KS_INODE &&
		    !atomic_exchange(&r->absent_said[ks_type_index(o->t)], true) &&
		    ks_type_index(o->t) < NR_KS_TYPES)
			report_verbose(ctx, "Phase 2: kernel scrub of %s (%s): not on this "
				       "kernel or filesystem", o->t->what, o->t->name);
		return;
	}
	if (ret == -ESHUTDOWN) {
		if (!r->xs->shut_down) {
			r->xs->shut_down = true;
			str_error(ctx, CHECK_XFS_SCRUB, NULL, NULL, 0,
				  "the filesystem has been shut down (the kernel found damage it "
				  "could not work around): the scrub stops here");
		}
		return;
	}
	if (ret < 0 && errno_is_corruption(-ret)) {
		of = XFS_SCRUB_OFLAG_CORRUPT;
	} else if (ret < 0) {
		struct strbuf sb = STRBUF_INIT;

		ks_describe(&sb, o);
		if (o->t->scope == KS_INODE)
			strbuf_addf(&sb, " of inode %llu", (unsigned long long)o->ino);
		report_operational(ctx, NULL, NULL, -ret, "kernel scrub of %s", sb.buf);
		strbuf_release(&sb);
		return;
	}
	if (of & OFLAGS_BAD) {
		if (r->repair)
			queue_repair(r, o, of);
		else if (ret < 0)
			ks_report(r, o, SEV_ERROR, CHECK_XFS_SCRUB, "the kernel cannot read it: %s",
				  strerror(-ret));
		else
			ks_report(r, o, SEV_ERROR, CHECK_XFS_SCRUB, "%s", bad_how(of));
	}
	if (of & XFS_SCRUB_OFLAG_PREEN)
		ks_report(r, o, SEV_INFO, CHECK_XFS_PREEN, "could be optimised (preen)");
	/*
	 * Cross-referencing fails when the other object is sick: with repairs
	 * to come, look again after them (as xfs_scrub does).
	 */
	if ((of & XFS_SCRUB_OFLAG_XFAIL) && r->repair && !(of & OFLAGS_BAD))
		queue_repair(r, o, XFS_SCRUB_OFLAG_XFAIL);
	else if (of & XFS_SCRUB_OFLAG_XFAIL)
		ks_xfail(r, o);
	if (of & XFS_SCRUB_OFLAG_INCOMPLETE)
		ks_report(r, o, SEV_WARNING, CHECK_XFS_SCRUB_WARNING,
			  "the kernel could not check it completely");
	if (of & XFS_SCRUB_OFLAG_WARNING)
		ks_report(r, o, SEV_WARNING, CHECK_XFS_SCRUB_WARNING, "looks suspicious");
}

static void ks_check_scope(struct ks_run *r, enum ks_scope scope, uint32_t agno)
{
	for (size_t i = 0; i < NR_KS_TYPES; i++)
		if (ks_types[i].scope == scope)
			ks_check(r, &(struct ks_obj){ .t = &ks_types[i], .agno = agno });
}

static void ks_ag_fn(void *arg, uint32_t agno, unsigned thread)
{
	(void)thread;
	ks_check_scope(arg, KS_AGHEADER, agno);
	ks_check_scope(arg, KS_AGBTREE, agno);
}

/* Every per-inode type that applies, for one inode BULKSTAT returned. */
static void ks_inode_fn(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs, void *arg)
{
	struct ks_run *r = arg;

	xfs_inode_health(ctx, bs);
	for (size_t i = 0; i < NR_KS_TYPES; i++) {
		const struct ks_type *t = &ks_types[i];

		if (t->scope != KS_INODE || (t->only && (bs->bs_mode & S_IFMT) != t->only))
			continue;
		ks_check(r, &(struct ks_obj){ .t = t, .ino = bs->bs_ino, .gen = bs->bs_gen });
	}
}

/* Every newer type the kernel may have, once (see ks_newer). */
static void ks_check_newer(struct ks_run *r)
{
	unsigned known = 0;

	ks_newer_init();
	for (unsigned i = 0; i < NR_KS_NEWER; i++) {
		ks_check(r, &(struct ks_obj){ .t = &ks_newer[i].t });
		known += !atomic_load(&r->absent_said[NR_KS_TYPES + i]);
	}
	report_verbose(r->ctx, "Phase 2: scrub types %u to %u (newer than fscrub): %u known to "
		       "this kernel for this filesystem", KS_NEWER_FIRST, KS_NEWER_LAST, known);
}

static void ks_parallel_ags(struct ks_run *r)
{
	int ret = xfs_for_each_ag(r->ctx, ks_ag_fn, r);

	if (ret < 0)
		report_operational(r->ctx, NULL, NULL, -ret, "cannot start the kernel scrub threads");
}

static int by_order(const void *a, const void *b)
{
	const struct ks_repair *x = a, *y = b;

	bool xa = !(x->oflags & OFLAGS_BAD), ya = !(y->oflags & OFLAGS_BAD);

	if (xa != ya)
		return xa ? 1 : -1;	/* the rechecks after every repair */
	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	if (x->o.agno != y->o.agno)
		return x->o.agno < y->o.agno ? -1 : 1;
	return x->o.ino < y->o.ino ? -1 : x->o.ino > y->o.ino;
}

/* An object that could not be cross-referenced, after the repairs. */
static void ks_recheck_xfail(struct ks_run *r, const struct ks_obj *o)
{
	uint32_t of = 0;
	int ret = ks_call(r->xs->fd, o, false, &of);

	if (ret == 0 && (of & OFLAGS_BAD))
		ks_report(r, o, SEV_ERROR, CHECK_XFS_SCRUB, "could not be cross-referenced with "
			  "other metadata, and after the repairs it is corrupt");
	else if (ret < 0 || (of & XFS_SCRUB_OFLAG_XFAIL))
		ks_xfail(r, o);
	else
		atomic_fetch_add(&r->xfail_cleared, 1);
}

/* Repair one object found corrupt: check, repair, check again. */
static void ks_repair_one(struct ks_run *r, const struct ks_repair *rp)
{
	const struct ks_obj *o = &rp->o;
	const char *how = bad_how(rp->oflags);
	uint32_t of = 0;
	int ret;

	if (!(rp->oflags & OFLAGS_BAD)) {
		ks_recheck_xfail(r, o);
		return;
	}
	ret = ks_call(r->xs->fd, o, false, &of);
	if (ret == 0 && !(of & OFLAGS_BAD)) {
		ks_report(r, o, SEV_REPAIRED, CHECK_XFS_SCRUB,
			  "%s; no longer after the repairs before it", how);
		return;
	}
	if (o->t->aggregate) {
		ks_report(r, o, SEV_ERROR, CHECK_XFS_SCRUB, "%s; still after the repairs "
			  "before it", how);
		return;
	}
	ret = ks_call(r->xs->fd, o, true, &of);
	if (ret < 0) {
		ks_report(r, o, SEV_ERROR, CHECK_XFS_SCRUB, "%s; the kernel could not repair it: %s",
			  how, ret == -EOPNOTSUPP ? "this kernel does not repair it" : strerror(-ret));
		return;
	}
	if (of & OFLAGS_BAD) {
		ks_report(r, o, SEV_ERROR, CHECK_XFS_SCRUB, "%s; still corrupt after the kernel's "
			  "repair", how);
		return;
	}
	ret = ks_call(r->xs->fd, o, false, &of);
	if (ret < 0 || (of & OFLAGS_BAD))
		ks_report(r, o, SEV_ERROR, CHECK_XFS_SCRUB, "%s; repaired, but the check after the "
			  "repair still finds it corrupt", how);
	else
		ks_report(r, o, SEV_REPAIRED, CHECK_XFS_SCRUB, "%s: repaired", how);
}

void xfs_kscrub_probe(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct ks_obj probe = { 0 };
	uint32_t of;
	int ret = ks_call(xs->fd, &probe, false, &of);

	if (ret == -ENOTTY || ret == -EOPNOTSUPP) {
		str_info(ctx, CHECK_XFS_SCRUB_UNSUPPORTED, NULL, NULL, 0,
			 "this kernel has no XFS online scrub (CONFIG_XFS_ONLINE_SCRUB): "
			 "fscrub's own checks only");
		return;
	}
	if (ret < 0) {
		str_info(ctx, CHECK_XFS_SCRUB_UNSUPPORTED, NULL, NULL, 0,
			 "the kernel's XFS online scrub cannot be used: %s: fscrub's own "
			 "checks only", strerror(-ret));
		return;
	}
	xs->kscrub = true;
	if (ctx->opt.check_only) {
		report_verbose(ctx, "Phase 1: kernel online scrub available; check only (-n): "
			       "nothing is repaired");
		return;
	}
	ret = ks_call(xs->fd, &probe, true, &of);
	if (ret == 0) {
		xs->krepair = true;
		report_verbose(ctx, "Phase 1: kernel online scrub and repair available");
	} else {
		str_info(ctx, CHECK_XFS_SCRUB_UNSUPPORTED, NULL, NULL, 0,
			 "the kernel scrubs but does not repair: %s",
			 ret == -EOPNOTSUPP ? "built without CONFIG_XFS_ONLINE_REPAIR" :
			 ret == -EROFS ? "the filesystem is read-only" : strerror(-ret));
	}
}

void xfs_kscrub_all(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct ks_run r = {
		.ctx = ctx, .xs = xs, .repair = xs->krepair && !ctx->opt.check_only,
	};
	int ret;

	pthread_mutex_init(&r.lock, NULL);
	r.xfail = calloc(xs->geo.agcount + 1, sizeof(*r.xfail));
	r.agino_shift = log2_up(xs->geo.agblocks) +
			log2_up(xs->geo.blocksize / (xs->geo.inodesize ? xs->geo.inodesize : 1));
	ks_parallel_ags(&r);
	ks_check_scope(&r, KS_FS, 0);
	ks_check_newer(&r);
	ret = xfs_bulkstat_each(ctx, ks_inode_fn, &r);
	if (ret < 0)
		report_operational(ctx, NULL, NULL, -ret, "XFS_IOC_BULKSTAT: inodes not scrubbed");
	ks_check_scope(&r, KS_SUMMARY, 0);

	if (r.nr_repairs) {
		sort_items(r.repairs, r.nr_repairs, sizeof(*r.repairs), by_order);
		report_verbose(ctx, "Phase 2: %zu metadata %s to repair or to look at again",
			       r.nr_repairs, r.nr_repairs == 1 ? "object" : "objects");
	}
	for (size_t i = 0; i < r.nr_repairs; i++) {
		if (!(r.repairs[i].oflags & OFLAGS_BAD) && (xs->shut_down || scrub_should_stop(ctx)))
			ks_xfail(&r, &r.repairs[i].o);
		else if (xs->shut_down || scrub_should_stop(ctx))
			ks_report(&r, &r.repairs[i].o, SEV_ERROR, CHECK_XFS_SCRUB,
				  "%s (not repaired: the scrub stopped)",
				  bad_how(r.repairs[i].oflags));
		else
			ks_repair_one(&r, &r.repairs[i]);
	}
	ks_report_xfails(&r);
	if (atomic_load(&r.xfail_cleared))
		report_verbose(ctx, "Phase 2: %llu objects that could not be cross-referenced "
			       "before the repairs can be now",
			       (unsigned long long)atomic_load(&r.xfail_cleared));
	report_verbose(ctx, "Phase 2: %llu kernel scrub calls over %u AGs and %llu inodes",
		       (unsigned long long)atomic_load(&r.calls), xs->geo.agcount,
		       (unsigned long long)atomic_load(&xs->nr_bulkstat));
	free(r.repairs);
	free(r.xfail);
	pthread_mutex_destroy(&r.lock);
}
