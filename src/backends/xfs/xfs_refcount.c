/*
 * xfs_refcount: the reference counts of shared blocks without the rmapbt
 * (xfs.refcount), phase 3 after the walk.
 *
 * With the rmapbt, xfs_xref.c counts each AG's owners from the disk.
 * Without it an AG's look has no owners -- a file's data may lie in any
 * AG -- but the walk mapped every regular file with FIEMAP (phase 3's
 * extents, backend_extent_at()).  Per AG, those extents become AG block ranges and are
 * swept (xfs_xref.c's xref_refcount_diff(), the comparison the rmapbt
 * variant makes): a range that two or more extents cover (a file
 * reflinked to itself counts twice) must have a refcountbt record of that
 * count, read from the disk now, and no other range one.
 *
 * What cannot be judged.  The extents of a file that changed during the
 * scan, or whose map the walk could not collect whole, are not known: the
 * ranges they touch are skipped (counted under -v).  A record counting
 * more owners than the extents give may count a file the walk did not
 * map at all (unreached, unlinked but open, not opened): it is judged
 * only if BULKSTAT finds no regular file with blocks outside the files
 * known whole.  The refcountbt's CoW staging records cannot be judged:
 * FIEMAP does not show CoW forks (said under -v).
 *
 * The live rule.  A difference is looked at again after syncfs(): the
 * refcountbt re-read from the disk, every owner of the range opened by
 * handle and mapped afresh (FIEMAP_FLAG_SYNC), its ctime unchanged from
 * before to after and older than the scan.  The kernel writes the btree
 * blocks it logged back later than syncfs forces the log: what is still
 * there is asked of the on-disk log (xfs_logview.h).  If no item in it
 * names a block of the AG's refcountbt, the disk holds the btree the
 * kernel has: a third look at once, the log asked again, and what still
 * differs is damage, however busy the AG is.  Where the log names one (or
 * cannot be read: an external log), the third look waits for the log
 * worker (xfs_ondisk.c), and a block the kernel keeps relogging may stay
 * old on the disk even so: last, the kernel's own view must be the
 * disk's -- FIEMAP's shared flag comes from the refcountbt the kernel
 * holds, so blocks of two owners it does not call shared have no record
 * there either, and the one owner's block it calls shared has one (it
 * asks only of files with the reflink flag); a count that differs
 * otherwise, or that no owner can answer for, is believed only of an AG
 * whose counters (XFS_IOC_AG_GEOMETRY) did not move since the sweep.
 * Only what passes all of this is an error, the rest "changed".
 *
 * Cost: one pass over the walk's extents per AG, and for the AG in hand
 * 32 bytes per extent in it plus the sweep's edges (16) and runs (32);
 * one refcountbt walk per AG.
 */
#include "backends/xfs/xfs_ondisk.h"
#include "backends/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/inoset.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

/* Differences per AG, and in all: the first say enough. */
#define REFC_MAX_PER_AG 8
#define REFC_MAX_SUSPECTS 64
/* Owners named in a message: enough to find the files; the rest are counted. */
#define REFC_SHOWN 4
/* Extents per FIEMAP call of the second look. */
#define REFC_FIEMAP_BATCH 256
/* Before the second look: time for writeback of what syncfs pushed. */
#define REFC_PAUSE_NS 200000000L

struct refc_suspect {
	uint32_t ag;
	struct ref_diff d;
	uint64_t *owners;	/* every inode whose extents touch the range, sorted */
	size_t nr_owners;
	int verdict;		/* 1 still there, 0 gone, -1 an owner changed */
	struct xfs_ag_geometry k0;	/* the kernel's counters of the AG, at the sweep */
	bool have_k0;
	bool shared, unshared;	/* the owners' fresh FIEMAP flags over the range */
	struct xref_exts blocks;	/* the AG's refcountbt blocks at the last look */
	int log;		/* what the log said of them: LOG_* */
};

/* A suspect's refcountbt blocks in the on-disk log (od_log_names()). */
enum {
	LOG_UNASKED,	/* not asked, or the log cannot say */
	LOG_CLEAR,	/* named by no item: the disk holds what the kernel has */
	LOG_NAMED,	/* the kernel may have newer copies of them */
};

struct refc_check {
	struct scrub_ctx *ctx;
	struct xfs_state *xs;
	uint64_t *unmapped;	/* files not mapped whole, sorted */
	size_t nr_unmapped;
	struct refc_suspect *sus;
	size_t nr_sus;
	bool overflow;
	size_t skipped;		/* ranges not judged: unknown maps */
	size_t incomplete;	/* ... a record that may count an unmapped file */
	size_t cow;		/* CoW staging records, not judged */
	uint32_t ags, ags_unread;
	size_t max_ag_extents;	/* the most extents one AG held */
};

static bool unmapped(const struct refc_check *rc, uint64_t ino)
{
	return find_item(&ino, rc->unmapped, rc->nr_unmapped, sizeof(ino), u64_cmp);
}

/* The file's whole map is in the walk's list, and it did not change. */
static bool known_whole(const struct refc_check *rc, uint64_t ino)
{
	return inoset_test(rc->xs->files, 0, ino) && !unmapped(rc, ino);
}

/*
 * The blocks of the device bytes [phys, phys + len) of file offset
 * logical that lie in AG ag and in its blocks [lo, hi) (hi past the AG's
 * end: to its end), added to to (owner ino, offset the file block).
 */
static void ag_part(const struct xfs_state *xs, uint64_t ino, uint64_t phys, uint64_t len,
		    uint64_t logical, uint32_t ag, uint64_t lo, uint64_t hi,
		    struct xref_exts *to)
{
	uint64_t bs = xs->geo.blocksize, base = (uint64_t)ag * xs->geo.agblocks;
	uint64_t first = phys / bs, end = (phys + len + bs - 1) / bs;
	uint64_t s, e;

	if (hi > xs->geo.agblocks)
		hi = xs->geo.agblocks;
	s = first > base + lo ? first : base + lo;
	e = end < base + hi ? end : base + hi;

	if (s < e)
		xref_exts_add(to, (uint32_t)(s - base), (uint32_t)(e - s), ino,
			      logical / bs + (s - first));
}

/* The inodes of refs that touch [start, end), sorted, each once. */
static uint64_t *owners_of(const struct xref_exts *refs, uint32_t start, uint32_t end,
			   size_t *n)
{
	uint64_t *v = NULL;
	size_t k = 0, alloc = 0, out = 0;

	for (size_t i = 0; i < refs->n; i++) {
		const struct xref_ext *e = &refs->v[i];

		if (e->start >= end || e->start + (uint64_t)e->len <= start)
			continue;
		if (k == alloc) {
			alloc = alloc ? 2 * alloc : 8;
			v = xrealloc(v, alloc * sizeof(*v));
		}
		v[k++] = e->owner;
	}
	sort_items(v, k, sizeof(*v), u64_cmp);
	for (size_t i = 0; i < k; i++)
		if (!out || v[out - 1] != v[i])
			v[out++] = v[i];
	*n = out;
	return v;
}

static void add_suspect(struct refc_check *rc, uint32_t ag, const struct ref_diff *d,
			const struct xref_exts *refs)
{
	struct refc_suspect *s;

	if (rc->nr_sus == REFC_MAX_SUSPECTS) {
		rc->overflow = true;
		return;
	}
	rc->sus = xrealloc(rc->sus, (rc->nr_sus + 1) * sizeof(*rc->sus));
	s = &rc->sus[rc->nr_sus++];
	*s = (struct refc_suspect){ .ag = ag, .d = *d };
	s->owners = owners_of(refs, d->start, d->end, &s->nr_owners);
	s->k0.ag_number = ag;
	s->have_k0 = ioctl(rc->xs->fd, XFS_IOC_AG_GEOMETRY, &s->k0) == 0;
}

/* The first look at AG ag: the walk's extents against its refcountbt. */
static void sweep_ag(struct refc_check *rc, struct od *od, uint32_t ag)
{
	struct xref_exts refs = { 0 }, unknown = { 0 };
	struct xref_space sp = { 0 };
	struct ref_diff d[REFC_MAX_PER_AG];
	size_t n = backend_extents_count(rc->ctx);

	for (size_t i = 0; i < n; i++) {
		struct backend_extent x = backend_extent_at(rc->ctx, i);
		bool known = !x.recent && known_whole(rc, x.ino);

		ag_part(rc->xs, x.ino, x.phys, x.len, x.logical, ag, 0, UINT32_MAX,
			known ? &refs : &unknown);
	}
	if (refs.n + unknown.n > rc->max_ag_extents)
		rc->max_ag_extents = refs.n + unknown.n;
	if (!od_ag_refcounts(od, ag, &sp)) {
		rc->ags_unread++;
	} else {
		rc->cow += sp.cow.n;
		n = xref_refcount_diff(&refs, &sp.refc, &unknown, d, REFC_MAX_PER_AG,
				       &rc->skipped);
		for (size_t i = 0; i < n; i++)
			add_suspect(rc, ag, &d[i], &refs);
	}
	xref_space_release(&sp);
	free(refs.v);
	free(unknown.v);
}

/* ------------------------------------------------------------ looking again */

/*
 * Inode ino mapped afresh, its blocks in AG ag's [lo, hi) added to to.
 * 1, or -1 if it changed during the scan or cannot be opened or mapped.
 */
static int remap(struct refc_check *rc, uint64_t ino, uint32_t ag, uint32_t lo, uint32_t hi,
		 struct xref_exts *to, struct refc_suspect *s)
{
	struct xfs_state *xs = rc->xs;
	struct xfs_bulkstat bs, after;
	struct fiemap *fm = xcalloc(1, sizeof(*fm) +
				    REFC_FIEMAP_BATCH * sizeof(struct fiemap_extent));
	uint64_t start = 0;
	int fd, ret = 1;

	if (xfs_bulkstat_one(xs, ino, &bs) != 1 || xfs_bs_changed_during_scan(rc->ctx, &bs) ||
	    (fd = xfs_open_by_ino(xs, ino, bs.bs_gen)) < 0) {
		free(fm);
		return -1;
	}
	for (;;) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = start;
		fm->fm_length = FIEMAP_MAX_OFFSET - start;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = REFC_FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			ret = -1;
			break;
		}
		for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
			const struct fiemap_extent *e = &fm->fm_extents[i];

			size_t had = to->n;

			if (e->fe_flags & BACKEND_NO_LOCATION)
				continue;
			ag_part(xs, ino, e->fe_physical, e->fe_length, e->fe_logical, ag, lo, hi,
				to);
			if (to->n > had && (e->fe_flags & FIEMAP_EXTENT_SHARED))
				s->shared = true;
			else if (to->n > had)
				s->unshared = true;
		}
		if (!fm->fm_mapped_extents ||
		    (fm->fm_extents[fm->fm_mapped_extents - 1].fe_flags & FIEMAP_EXTENT_LAST) ||
		    fm->fm_mapped_extents < REFC_FIEMAP_BATCH)
			break;
		start = fm->fm_extents[fm->fm_mapped_extents - 1].fe_logical +
			fm->fm_extents[fm->fm_mapped_extents - 1].fe_length;
	}
	close(fd);
	free(fm);
	if (xfs_bulkstat_one(xs, ino, &after) != 1 || after.bs_gen != bs.bs_gen ||
	    after.bs_ctime != bs.bs_ctime || after.bs_ctime_nsec != bs.bs_ctime_nsec)
		return -1;
	return ret;
}

/* The records of recs inside [lo, hi), cut to it, in out. */
static void clip(const struct xref_exts *recs, uint32_t lo, uint32_t hi, struct xref_exts *out)
{
	for (size_t i = 0; i < recs->n; i++) {
		const struct xref_ext *r = &recs->v[i];
		uint64_t s = r->start > lo ? r->start : lo;
		uint64_t e = r->start + (uint64_t)r->len < hi ? r->start + (uint64_t)r->len : hi;

		if (s < e)
			xref_exts_add(out, (uint32_t)s, (uint32_t)(e - s), r->owner, r->offset);
	}
}

/* Suspect s against the refcountbt as read now (sp): 1 still, 0 gone, -1 changed. */
static int recheck(struct refc_check *rc, struct refc_suspect *s, const struct xref_space *sp)
{
	struct xref_exts fresh = { 0 }, have = { 0 };
	struct ref_diff d[2];
	size_t n, skipped = 0;
	int ret = 1;

	s->shared = s->unshared = false;
	for (size_t i = 0; i < s->nr_owners && ret > 0; i++)
		ret = remap(rc, s->owners[i], s->ag, s->d.start, s->d.end, &fresh, s);
	if (ret > 0) {
		clip(&sp->refc, s->d.start, s->d.end, &have);
		n = xref_refcount_diff(&fresh, &have, NULL, d, 2, &skipped);
		ret = n == 1 && d[0].start == s->d.start && d[0].end == s->d.end &&
		      d[0].want == s->d.want && d[0].have == s->d.have;
	}
	free(fresh.v);
	free(have.v);
	return ret;
}

/* The blocks of the refcountbt as sp was read, kept with s for the log. */
static void keep_blocks(struct refc_suspect *s, const struct xref_space *sp)
{
	free(s->blocks.v);
	s->blocks = (struct xref_exts){ 0 };
	for (size_t i = 0; i < sp->used.n; i++)
		xref_exts_add(&s->blocks, sp->used.v[i].start, sp->used.v[i].len, 0, 0);
}

/* Which suspects still there a look or a question to the log is for. */
static bool any_still(const struct refc_suspect *s)
{
	return s->verdict == 1;
}

static bool clear_still(const struct refc_suspect *s)
{
	return s->verdict == 1 && s->log == LOG_CLEAR;
}

static bool unclear_still(const struct refc_suspect *s)
{
	return s->verdict == 1 && s->log != LOG_CLEAR;
}

/* One more look at the suspects pick() picks; AGs re-read once each. */
static void look_again(struct refc_check *rc, struct od *od,
		       bool (*pick)(const struct refc_suspect *))
{
	struct xref_space sp = { 0 };
	bool have_ag = false, ok = false;
	uint32_t ag = 0;

	for (size_t i = 0; i < rc->nr_sus && !scrub_should_stop(rc->ctx); i++) {
		struct refc_suspect *s = &rc->sus[i];

		if (!pick(s))
			continue;
		if (!have_ag || ag != s->ag) {
			xref_space_release(&sp);
			ag = s->ag;
			have_ag = true;
			ok = od_ag_refcounts(od, ag, &sp);
		}
		/* A btree that cannot be read whole now: phase 2 says why. */
		s->verdict = ok ? recheck(rc, s, &sp) : -1;
		if (ok)
			keep_blocks(s, &sp);
	}
	xref_space_release(&sp);
}

/*
 * Asks the on-disk log about the suspects pick() picks, after their last
 * look: does an item between its tail and head name a block of their
 * AG's refcountbt as that look read it?  Returns how many it names none
 * of (LOG_CLEAR).  Why the refcountbt's blocks alone: a block the kernel
 * changed, split off, joined or freed since it was last written back is
 * in a logged transaction (a freed one as a cancelled buffer item) until
 * the AGF and every other block of that transaction are written back, and
 * a block added to the btree is reached through a parent whose pointer
 * changed.  So if no block reached from the disk's AGF is named, the
 * disk's refcountbt is the kernel's, however the AGF itself is relogged.
 */
static size_t ask_log(struct refc_check *rc, struct od *od,
		      bool (*pick)(const struct refc_suspect *))
{
	struct od_logcheck *lc = od_log_open(od);
	size_t clear = 0;

	for (size_t i = 0; i < rc->nr_sus; i++) {
		struct refc_suspect *s = &rc->sus[i];
		int named;

		if (!pick(s))
			continue;
		named = od_log_names(od, lc, s->ag, &s->blocks);
		s->log = named < 0 ? LOG_UNASKED : named ? LOG_NAMED : LOG_CLEAR;
		clear += s->log == LOG_CLEAR;
	}
	od_log_close(lc);
	return clear;
}

/*
 * Is the kernel's own view the disk's?  FIEMAP's shared flag comes from
 * the refcountbt the kernel has in memory: blocks of two owners that it
 * does not call shared have no record there either, and a block it calls
 * shared has one.  A count that differs otherwise (or with no owner to
 * ask) is the kernel's too if the log names none of the btree's blocks;
 * where the log cannot say, it may be a block the kernel keeps relogging
 * and has not written back: believed only of an AG whose counters did
 * not move.
 */
static bool kernel_agrees(struct refc_check *rc, const struct refc_suspect *s)
{
	struct xfs_ag_geometry k = { .ag_number = s->ag };

	if (!s->d.have)
		return !s->shared;
	/* Not shared is no answer: FIEMAP asks only of files with the reflink flag. */
	if (s->d.want == 1 && s->shared && !s->unshared)
		return true;
	if (s->log == LOG_CLEAR)
		return true;
	return s->have_k0 && ioctl(rc->xs->fd, XFS_IOC_AG_GEOMETRY, &k) == 0 &&
	       k.ag_freeblks == s->k0.ag_freeblks && k.ag_icount == s->k0.ag_icount &&
	       k.ag_ifree == s->k0.ag_ifree;
}

static size_t still_there(const struct refc_check *rc)
{
	size_t n = 0;

	for (size_t i = 0; i < rc->nr_sus; i++)
		n += rc->sus[i].verdict == 1;
	return n;
}

static size_t unclear(const struct refc_check *rc)
{
	size_t n = 0;

	for (size_t i = 0; i < rc->nr_sus; i++)
		n += unclear_still(&rc->sus[i]);
	return n;
}

struct complete_run {
	struct refc_check *rc;
	atomic_ullong unknown;	/* regular files with blocks not known whole */
};

static void complete_fn(struct scrub_ctx *ctx, const struct xfs_bulkstat *bs, void *arg)
{
	struct complete_run *cr = arg;

	if (S_ISREG(bs->bs_mode) && bs->bs_blocks &&
	    (!known_whole(cr->rc, bs->bs_ino) || xfs_bs_changed_during_scan(ctx, bs)))
		atomic_fetch_add(&cr->unknown, 1);
}

/*
 * A record counting more owners than the extents give may count a file
 * the walk did not map: such suspects are not judged unless BULKSTAT
 * finds no regular file with blocks other than the files known whole.
 */
static void drop_uncounted(struct refc_check *rc)
{
	struct complete_run cr = { .rc = rc };
	bool any = false;

	for (size_t i = 0; i < rc->nr_sus; i++)
		any |= rc->sus[i].verdict == 1 && rc->sus[i].d.have > rc->sus[i].d.want;
	if (!any)
		return;
	if (xfs_bulkstat_each(rc->ctx, complete_fn, &cr) == 0 && !atomic_load(&cr.unknown))
		return;
	report_verbose(rc->ctx, "Phase 3: %llu regular files with blocks are not known whole: "
		       "refcountbt records that count more owners than the files' extents give "
		       "are not judged", (unsigned long long)atomic_load(&cr.unknown));
	for (size_t i = 0; i < rc->nr_sus; i++)
		if (rc->sus[i].verdict == 1 && rc->sus[i].d.have > rc->sus[i].d.want) {
			rc->sus[i].verdict = 2;	/* not judged */
			rc->incomplete++;
		}
}

/* ------------------------------------------------------------------ entry */

/* The check applies: reflink, no rmapbt, FIEMAP offsets on the data device. */
static bool applies(struct scrub_ctx *ctx, const struct xfs_state *xs)
{
	const char *why = NULL;

	if (!(xs->geo.flags & XFS_FSOP_GEOM_FLAGS_REFLINK) ||
	    (xs->geo.flags & XFS_FSOP_GEOM_FLAGS_RMAPBT))
		return false;	/* no refcountbt, or xfs_xref.c counts from the rmapbt */
	if (!(xs->geo.flags & XFS_FSOP_GEOM_FLAGS_V5SB) || !ctx->dev_size || xs->geo.rtblocks)
		why = "FIEMAP offsets are not offsets on the data device alone, or it is not read";
	else if (!backend_extents_whole(ctx))
		why = "the walk did not keep every file's extents";
	if (why)
		report_verbose(ctx, "Phase 3: reference counts not judged: %s", why);
	return !why;
}


struct refc_check *xfs_refcount_collect(struct scrub_ctx *ctx, struct xfs_names *names)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct refc_check *rc;
	struct timespec pause = { 0, REFC_PAUSE_NS };
	struct od od;
	int primary_err = 0;

	if (!applies(ctx, xs))
		return NULL;
	if (od_open(ctx, &od, &primary_err) < 0) {
		/* Phase 2 said why the device cannot be read. */
		report_verbose(ctx, "Phase 3: reference counts not judged: %s cannot be read",
			       ctx->source);
		return NULL;
	}
	rc = xcalloc(1, sizeof(*rc));
	rc->ctx = ctx;
	rc->xs = xs;
	rc->unmapped = backend_unmapped_inodes(ctx, &rc->nr_unmapped);
	for (uint32_t ag = 0; ag < xs->geo.agcount && !scrub_should_stop(ctx); ag++, rc->ags++)
		sweep_ag(rc, &od, ag);
	for (size_t i = 0; i < rc->nr_sus; i++)
		rc->sus[i].verdict = 1;
	if (rc->nr_sus) {
		syncfs(ctx->mnt_fd);
		nanosleep(&pause, NULL);
		look_again(rc, &od, any_still);
		drop_uncounted(rc);
	}
	/*
	 * The third look: at once where the log names none of the btree's
	 * blocks (and it is asked again after it), else after the log worker.
	 */
	if (still_there(rc) && ask_log(rc, &od, any_still)) {
		syncfs(ctx->mnt_fd);
		look_again(rc, &od, clear_still);
		ask_log(rc, &od, clear_still);
	}
	if (unclear(rc)) {
		od_wait_log_worker(ctx, "Phase 3", unclear(rc),
				   "ranges whose reference counts differ from the files' extents, "
				   "the log naming their refcountbt's blocks or unread");
		look_again(rc, &od, unclear_still);
	}
	for (size_t i = 0; i < rc->nr_sus; i++)
		if (rc->sus[i].verdict == 1 && !kernel_agrees(rc, &rc->sus[i]))
			rc->sus[i].verdict = 0;
	od_close(&od);
	report_verbose(ctx, "Phase 3: reference counts of %u AGs against the files' extents "
		       "(at most %zu in an AG): %zu ranges not judged (files changed or not mapped "
		       "whole), %zu CoW staging records not judged (FIEMAP does not show CoW "
		       "forks), %u AGs' refcountbt not read whole", rc->ags, rc->max_ag_extents,
		       rc->skipped + rc->incomplete, rc->cow, rc->ags_unread);
	for (size_t i = 0; i < rc->nr_sus; i++)
		for (size_t k = 0; rc->sus[i].verdict == 1 && k < rc->sus[i].nr_owners &&
		     k < REFC_SHOWN; k++)
			xfs_names_add(names, rc->sus[i].owners[k]);
	return rc;
}

/* "inodes 131 (/mnt/a), 132 (/mnt/b) and 2 more" into sb; the first's name. */
static void say_owners(struct refc_check *rc, const struct refc_suspect *s,
		       struct xfs_names *names, struct strbuf *sb, const struct xfs_named **first)
{
	*first = NULL;
	if (!s->nr_owners) {
		strbuf_addstr(sb, "no file");
		return;
	}
	strbuf_addstr(sb, s->nr_owners == 1 ? "inode " : "inodes ");
	for (size_t k = 0; k < s->nr_owners && k < REFC_SHOWN; k++) {
		const struct xfs_named *n = xfs_names_find(names, s->owners[k]);

		if (!k)
			*first = n;
		strbuf_addf(sb, "%s%llu (", k ? ", " : "", (unsigned long long)s->owners[k]);
		if (n && n->found)
			report_path(rc->ctx, sb, n->dir, n->name);
		else
			strbuf_addstr(sb, "no name found");
		strbuf_addch(sb, ')');
	}
	if (s->nr_owners > REFC_SHOWN)
		strbuf_addf(sb, " and %zu more", s->nr_owners - REFC_SHOWN);
}

static void report_one(struct refc_check *rc, const struct refc_suspect *s,
		       struct xfs_names *names)
{
	struct strbuf who = STRBUF_INIT, found = STRBUF_INIT;
	const struct xfs_named *n;
	char what[48];

	if (s->d.end - s->d.start == 1)
		snprintf(what, sizeof(what), "block %u", s->d.start);
	else
		snprintf(what, sizeof(what), "blocks %u-%u", s->d.start, s->d.end - 1);
	if (s->verdict != 1) {
		str_changed(rc->ctx, CHECK_XFS_REFCOUNT, NULL, NULL, 0,
			    "AG %u on disk: %s: reference count", s->ag, what);
		return;
	}
	say_owners(rc, s, names, &who, &n);
	if (s->d.have)
		strbuf_addf(&found, "the refcountbt counts %llu", (unsigned long long)s->d.have);
	else
		strbuf_addstr(&found, "the refcountbt has no record");
	str_error(rc->ctx, CHECK_XFS_REFCOUNT, n && n->found ? n->dir : NULL,
		  n && n->found ? n->name : NULL, s->nr_owners ? s->owners[0] : 0,
		  "AG %u on disk: %s: the files' extents give %llu data fork reference%s (%s), %s",
		  s->ag, what, (unsigned long long)s->d.want, s->d.want == 1 ? "" : "s", who.buf,
		  found.buf);
	strbuf_release(&who);
	strbuf_release(&found);
}

void xfs_refcount_report(struct refc_check *rc, struct xfs_names *names)
{
	if (!rc)
		return;
	for (size_t i = 0; i < rc->nr_sus && !scrub_should_stop(rc->ctx); i++)
		if (rc->sus[i].verdict != 2)
			report_one(rc, &rc->sus[i], names);
	if (rc->overflow)
		str_info(rc->ctx, CHECK_XFS_REFCOUNT, NULL, NULL, 0,
			 "more than %d reference count mismatches: only the first are examined",
			 REFC_MAX_SUSPECTS);
	for (size_t i = 0; i < rc->nr_sus; i++) {
		free(rc->sus[i].owners);
		free(rc->sus[i].blocks.v);
	}
	free(rc->sus);
	free(rc->unmapped);
	free(rc);
}
