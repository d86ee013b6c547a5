/*
 * xfs_quota: phase 3, after the walk: the quota usage the kernel keeps per
 * user, group and project, against what the inodes add up to.
 *
 * What XFS charges to an id: one inode per inode it owns, and every block
 * the inode holds -- data, attribute fork and bmbt blocks, preallocated
 * blocks past EOF, and (in the in-core dquot, which is what quotactl
 * returns) delayed allocations not yet written.  Reflinked blocks are
 * charged in full to every file that maps them.  BULKSTAT's bs_blocks is
 * exactly that sum for one inode (di_nblocks plus the delayed blocks), and
 * it names the project (bs_projectid), so one BULKSTAT pass gives the
 * expected figures of every id.  It also sees the inodes no name reaches
 * (orphans, unlinked but open files), which XFS charges too; what it does
 * not return are the internal inodes: the quota inodes are not charged,
 * but on filesystems without a metadata directory the realtime bitmap and
 * summary inodes are, to uid, gid and project 0 (quotacheck charges every
 * inode but the quota inodes): id 0 may show those two on top.
 *
 * The kernel's figures come from quotactl (Q_XGETNEXTQUOTA for every id
 * with a dquot, Q_XGETQUOTA for an id the inodes name that has none) on the
 * mount's descriptor (quotactl_fd, Linux 5.14), or on the device before
 * that.  Which types are accounted: Q_XGETQSTATV.
 *
 * The live rule.  Per id the kernel's figures are read before and after
 * the BULKSTAT pass; an id whose figures moved in between, or that owns an
 * inode created or changed since the scan began, changed while being
 * checked.  A mismatch is looked at again with a second round over the
 * suspects alone; only one that is there in both rounds, with the id
 * quiet both times, is an error.  A file deleted or given away during a
 * round moves the kernel's figures of its id, so it cannot pass as quiet.
 *
 * Memory: 80 bytes per id per quota type.
 */
#include "backends/xfs/xfs.h"

#include <errno.h>
#include <grp.h>
#include <linux/dqblk_xfs.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/quota.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "report/checks.h"
#include "scan/context.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif
/* Newer than the xfslibs-dev 6.1 headers: metadata inodes are not charged. */
#ifndef XFS_FSOP_GEOM_FLAGS_METADIR
#define XFS_FSOP_GEOM_FLAGS_METADIR	(1 << 26)	/* Linux 6.13 */
#endif
/* The realtime bitmap and summary inodes (see above). */
#define INTERNAL_INODES 2
/* Names are looked up (NSS, perhaps slow) for this many findings at most. */
#define MAX_NAME_LOOKUPS 100

enum qtype { QT_USER, QT_GROUP, QT_PROJECT, NR_QTYPES };

static const struct {
	int type;		/* quotactl's */
	unsigned acct;		/* Q_XGETQSTATV's flag */
	const char *what, *id;
} qtypes[NR_QTYPES] = {
	{ USRQUOTA, FS_QUOTA_UDQ_ACCT, "user", "uid" },
	{ GRPQUOTA, FS_QUOTA_GDQ_ACCT, "group", "gid" },
	{ PRJQUOTA, FS_QUOTA_PDQ_ACCT, "project", "project id" },
};

struct qfig {
	uint64_t inodes, bytes;
};

struct qent {
	uint32_t id;
	bool used;			/* the hash slot holds an id */
	bool changed;			/* owns an inode changed since the scan began */
	bool have_before;		/* the kernel's figures before the pass were read */
	bool seen;			/* ... in the current snapshot */
	struct qfig walk, before, after;
};

/* One quota type's ids: open addressing, linear probing. */
struct qtable {
	struct qent *v;
	size_t mask, n;
};

struct quota_run {
	struct scrub_ctx *ctx;
	struct xfs_state *xs;
	bool on[NR_QTYPES];		/* accounted */
	bool no_quotactl_fd;		/* ENOSYS once: quotactl on the device */
	bool only_known;		/* round 2: sum only the ids in the tables */
	uint64_t internal_bytes;	/* of the realtime bitmap and summary */
	unsigned internal_inodes;	/* charged to id 0, not seen by BULKSTAT */
	int err;			/* a quotactl failed (positive errno) */
	pthread_mutex_t lock;		/* the tables, during the BULKSTAT pass */
	struct qtable t[NR_QTYPES];
};

/* ------------------------------------------------------------ the tables */

static size_t id_hash(uint32_t id)
{
	return (size_t)(id * 0x9E3779B97F4A7C15ULL >> 17);
}

static struct qent *qtable_find(const struct qtable *t, uint32_t id)
{
	if (!t->v)
		return NULL;
	for (size_t i = id_hash(id) & t->mask;; i = (i + 1) & t->mask) {
		if (!t->v[i].used)
			return NULL;
		if (t->v[i].id == id)
			return &t->v[i];
	}
}

static struct qent *qtable_get(struct qtable *t, uint32_t id)
{
	struct qent *e = qtable_find(t, id);
	size_t i;

	if (e)
		return e;
	/* Keep it at most half full: probes stay short. */
	if (2 * (t->n + 1) > (t->v ? t->mask + 1 : 0)) {
		struct qtable bigger = { .mask = t->v ? 2 * t->mask + 1 : 63 };

		bigger.v = xcalloc(bigger.mask + 1, sizeof(*bigger.v));
		for (size_t j = 0; t->v && j <= t->mask; j++) {
			if (!t->v[j].used)
				continue;
			for (i = id_hash(t->v[j].id) & bigger.mask; bigger.v[i].used;
			     i = (i + 1) & bigger.mask)
				;
			bigger.v[i] = t->v[j];
		}
		bigger.n = t->n;
		free(t->v);
		*t = bigger;
	}
	for (i = id_hash(id) & t->mask; t->v[i].used; i = (i + 1) & t->mask)
		;
	t->v[i] = (struct qent){ .id = id, .used = true };
	t->n++;
	return &t->v[i];
}

static int qent_cmp(const void *a, const void *b)
{
	const struct qent *x = a, *y = b;

	if (x->used != y->used)
		return x->used ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* ------------------------------------------------------------- quotactl */

static int qctl(struct quota_run *r, int cmd, enum qtype qt, uint32_t id, void *addr)
{
	int qcmd = QCMD(cmd, qtypes[qt].type);

	if (!r->no_quotactl_fd) {
		if (syscall(SYS_quotactl_fd, r->xs->fd, qcmd, id, addr) == 0)
			return 0;
		if (errno != ENOSYS)
			return -errno;
		r->no_quotactl_fd = true;
	}
	if (!r->ctx->source)
		return -ENODEV;
	if (quotactl(qcmd, r->ctx->source, (int)id, addr) < 0)
		return -errno;
	return 0;
}

static struct qfig dquot_fig(const struct fs_disk_quota *d)
{
	/* d_bcount and d_rtbcount are in 512-byte units. */
	return (struct qfig){ d->d_icount, (d->d_bcount + d->d_rtbcount) * 512 };
}

static void record(struct qent *e, const struct qfig *f, bool before)
{
	if (before) {
		e->before = *f;
		e->have_before = true;
	} else {
		e->after = *f;
	}
	e->seen = true;
}

/*
 * The kernel's figures of every id of the type (every id in the table in
 * round 2) into before or after.  An id without a dquot uses nothing.
 */
static void snapshot_type(struct quota_run *r, enum qtype qt, bool before)
{
	struct qtable *t = &r->t[qt];
	struct fs_disk_quota d;
	uint64_t id = 0;
	int ret;

	for (size_t i = 0; t->v && i <= t->mask; i++)
		t->v[i].seen = false;
	while (!r->only_known && id <= UINT32_MAX) {
		memset(&d, 0, sizeof(d));
		ret = qctl(r, Q_XGETNEXTQUOTA, qt, (uint32_t)id, &d);
		if (ret == -ENOENT || ret == -ESRCH)
			break;
		if (ret < 0) {
			r->err = -ret;
			return;
		}
		if (d.d_id < id)
			break;		/* never backwards: the walk of ids ends */
		struct qfig f = dquot_fig(&d);

		record(qtable_get(t, d.d_id), &f, before);
		id = (uint64_t)d.d_id + 1;
	}
	for (size_t i = 0; t->v && i <= t->mask; i++) {
		struct qent *e = &t->v[i];

		if (!e->used || e->seen)
			continue;
		memset(&d, 0, sizeof(d));
		ret = qctl(r, Q_XGETQUOTA, qt, e->id, &d);
		if (ret < 0 && ret != -ENOENT && ret != -ESRCH) {
			r->err = -ret;
			return;
		}
		struct qfig f = ret < 0 ? (struct qfig){ 0, 0 } : dquot_fig(&d);

		record(e, &f, before);
	}
}

static void snapshot(struct quota_run *r, bool before)
{
	for (enum qtype qt = 0; qt < NR_QTYPES && !r->err; qt++)
		if (r->on[qt])
			snapshot_type(r, qt, before);
}

/* --------------------------------------------------------- the BULKSTAT */

static void sum_fn(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs, void *arg)
{
	struct quota_run *r = arg;
	const uint32_t ids[NR_QTYPES] = { bs->bs_uid, bs->bs_gid, bs->bs_projectid };
	bool changed = xfs_bs_changed_during_scan(ctx, bs);
	uint64_t bytes = bs->bs_blocks * (uint64_t)r->xs->geo.blocksize;

	pthread_mutex_lock(&r->lock);
	for (enum qtype qt = 0; qt < NR_QTYPES; qt++) {
		struct qent *e;

		if (!r->on[qt])
			continue;
		e = r->only_known ? qtable_find(&r->t[qt], ids[qt]) : qtable_get(&r->t[qt], ids[qt]);
		if (!e)
			continue;
		e->walk.inodes++;
		e->walk.bytes += bytes;
		e->changed |= changed;
	}
	pthread_mutex_unlock(&r->lock);
}

/* One round: figures before, BULKSTAT, figures after.  0 or -errno. */
static int quota_round(struct quota_run *r)
{
	int ret;

	for (enum qtype qt = 0; qt < NR_QTYPES; qt++)
		for (size_t i = 0; r->t[qt].v && i <= r->t[qt].mask; i++) {
			struct qent *e = &r->t[qt].v[i];

			if (e->used)
				*e = (struct qent){ .id = e->id, .used = true };
		}
	snapshot(r, true);
	if (r->err)
		return -r->err;
	ret = xfs_bulkstat_each(r->ctx, sum_fn, r);
	if (ret < 0)
		return ret;
	snapshot(r, false);
	return r->err ? -r->err : 0;
}

/* ------------------------------------------------------------- verdicts */

static bool figures_agree(const struct quota_run *r, const struct qent *e)
{
	const struct qfig *q = &e->after, *w = &e->walk;

	if (q->inodes == w->inodes && q->bytes == w->bytes)
		return true;
	return e->id == 0 && r->internal_inodes && q->inodes == w->inodes + r->internal_inodes &&
	       q->bytes >= w->bytes && q->bytes - w->bytes <= r->internal_bytes;
}

static bool quiet(const struct qent *e)
{
	return !e->changed && e->have_before && e->before.inodes == e->after.inodes &&
	       e->before.bytes == e->after.bytes;
}

/* Drop the ids that agree; the rest are round 2's suspects.  How many left. */
static size_t keep_suspects(struct quota_run *r)
{
	size_t left = 0;

	for (enum qtype qt = 0; qt < NR_QTYPES; qt++) {
		struct qtable *t = &r->t[qt];
		struct qtable kept = { 0 };

		for (size_t i = 0; t->v && i <= t->mask; i++)
			if (t->v[i].used && !figures_agree(r, &t->v[i]))
				qtable_get(&kept, t->v[i].id);
		free(t->v);
		*t = kept;
		left += kept.n;
	}
	return left;
}

/* " (name)" of the id, if it has one and lookups are still allowed. */
static void id_name(enum qtype qt, uint32_t id, unsigned *lookups, char *buf, size_t size)
{
	char scratch[4096];
	struct passwd pw, *pwp = NULL;
	struct group gr, *grp = NULL;

	buf[0] = 0;
	if (qt == QT_PROJECT || (*lookups)++ >= MAX_NAME_LOOKUPS)
		return;
	if (qt == QT_USER && getpwuid_r(id, &pw, scratch, sizeof(scratch), &pwp) == 0 && pwp)
		snprintf(buf, size, " (%s)", pwp->pw_name);
	else if (qt == QT_GROUP && getgrgid_r(id, &gr, scratch, sizeof(scratch), &grp) == 0 &&
		 grp)
		snprintf(buf, size, " (%s)", grp->gr_name);
}

static void report_round2(struct quota_run *r)
{
	struct scrub_ctx *ctx = r->ctx;
	unsigned lookups = 0;
	char name[300];

	for (enum qtype qt = 0; qt < NR_QTYPES; qt++) {
		struct qtable *t = &r->t[qt];

		if (t->v)	/* by id: the report does not depend on the hash */
			sort_items(t->v, t->mask + 1, sizeof(*t->v), qent_cmp);
		for (size_t i = 0; i < t->n && !scrub_should_stop(ctx); i++) {
			const struct qent *e = &t->v[i];
			const struct qfig *q = &e->after, *w = &e->walk;

			if (figures_agree(r, e)) {
				report_verbose(ctx, "Phase 3: %s quota of %s %u: agrees on the "
					       "second look", qtypes[qt].what, qtypes[qt].id, e->id);
				continue;
			}
			if (!quiet(e)) {
				str_changed(ctx, CHECK_XFS_QUOTA, NULL, NULL, 0,
					    "%s quota of %s %u", qtypes[qt].what, qtypes[qt].id,
					    e->id);
				continue;
			}
			id_name(qt, e->id, &lookups, name, sizeof(name));
			str_error(ctx, CHECK_XFS_QUOTA, NULL, NULL, 0,
				  "%s quota of %s %u%s: quota says %llu inodes and %llu KiB, "
				  "the inodes it owns add up to %llu inodes and %llu KiB",
				  qtypes[qt].what, qtypes[qt].id, e->id, name,
				  (unsigned long long)q->inodes,
				  (unsigned long long)(q->bytes / 1024),
				  (unsigned long long)w->inodes,
				  (unsigned long long)(w->bytes / 1024));
		}
	}
}

/* The realtime bitmap and summary: what quotacheck charged to id 0. */
static void internal_charge(struct quota_run *r)
{
	const struct xfs_fsop_geom *g = &r->xs->geo;
	uint64_t bits = 8ULL * g->blocksize, rbm, levels = 1, rsum;

	if (g->flags & XFS_FSOP_GEOM_FLAGS_METADIR)
		return;
	r->internal_inodes = INTERNAL_INODES;
	if (!g->rtextents)
		return;
	/* xfs_rtbitmap_blockcount() and xfs_rtsummary_blockcount(). */
	rbm = (g->rtextents + bits - 1) / bits;
	for (uint64_t x = g->rtextents; x > 1; x >>= 1)
		levels++;
	rsum = (levels * rbm * sizeof(uint32_t) + g->blocksize - 1) / g->blocksize;
	r->internal_bytes = (rbm + rsum) * g->blocksize;
}

/* Which types are accounted; false if none (or no quota at all). */
static bool quota_types(struct quota_run *r)
{
	struct fs_quota_statv sv = { .qs_version = FS_QSTATV_VERSION1 };
	bool any = false;
	int ret;

	if (!(r->xs->geo.flags & XFS_FSOP_GEOM_FLAGS_QUOTA)) {
		report_verbose(r->ctx, "Phase 3: no quota on this filesystem");
		return false;
	}
	ret = qctl(r, Q_XGETQSTATV, QT_USER, 0, &sv);
	if (ret < 0) {
		/* ENOSYS: a kernel without quota; ESRCH: accounting is off. */
		if (ret != -ENOSYS && ret != -ESRCH)
			report_operational(r->ctx, NULL, NULL, -ret, "quotactl Q_XGETQSTATV");
		else
			report_verbose(r->ctx, "Phase 3: quota accounting is off");
		return false;
	}
	for (enum qtype qt = 0; qt < NR_QTYPES; qt++) {
		r->on[qt] = sv.qs_flags & qtypes[qt].acct;
		any |= r->on[qt];
	}
	report_verbose(r->ctx, "Phase 3: quota accounting: user %s, group %s, project %s",
		       r->on[QT_USER] ? "on" : "off", r->on[QT_GROUP] ? "on" : "off",
		       r->on[QT_PROJECT] ? "on" : "off");
	return any;
}

void xfs_quota_check(struct scrub_ctx *ctx)
{
	struct quota_run r = { .ctx = ctx, .xs = xfs_state(ctx) };
	size_t ids = 0, suspects;
	int ret;

	if (scrub_should_stop(ctx) || !quota_types(&r))
		return;
	internal_charge(&r);
	pthread_mutex_init(&r.lock, NULL);
	ret = quota_round(&r);
	for (enum qtype qt = 0; qt < NR_QTYPES; qt++)
		ids += r.t[qt].n;
	if (ret < 0)
		goto fail;
	suspects = keep_suspects(&r);
	report_verbose(ctx, "Phase 3: quota of %zu ids against BULKSTAT: %zu to look at again",
		       ids, suspects);
	if (suspects && !scrub_should_stop(ctx)) {
		r.only_known = true;
		ret = quota_round(&r);
		if (ret < 0)
			goto fail;
		report_round2(&r);
	}
	goto out;
fail:
	report_operational(ctx, NULL, NULL, -ret, "quota usage: %s",
			   r.err ? "quotactl" : "XFS_IOC_BULKSTAT");
out:
	for (enum qtype qt = 0; qt < NR_QTYPES; qt++)
		free(r.t[qt].v);
	pthread_mutex_destroy(&r.lock);
}
