/*
 * xfs_ownermap: phase 3's extent maps of regular files from GETFSMAP
 * owner records (the rmapbt), instead of an open, a FIEMAP and a close
 * per file; the bulk_extents hook (backend.h).
 *
 * With the rmapbt, GETFSMAP lists every data fork mapping by owner inode
 * and file offset.  One pass over each AG's device range (the AGs in
 * parallel, -j threads) keeps the data fork records in a compact array
 * (24 bytes a record) sorted by (inode, file offset); the walk then looks
 * a file up by number.  The pass is made alongside phase 2 (started by
 * xfs_ownermap_start(), its threads beside phase 2's: both mostly wait for
 * the disk, the pass for the rmapbt's blocks, ~1 s on a million files),
 * or else at the walk's first bulk_inodes call.  Either way every bulk
 * record is younger than the map, and a file changed since the pass began
 * has a ctime in its record no older than 1 s before that (the coarse
 * clock's margin, as phase 3's): such a file is mapped with FIEMAP.
 *
 * The rmapbt is not the data fork: a map read from it would hide exactly
 * what the reverse-mapping cross-check (xfs_inodes.c, xfs.rmap_missing
 * and xfs.rmap_extra) compares, a data fork that does not say what its
 * reverse mappings say.  So a file's records stand for its map only if
 * they agree with its data fork as the on-disk walk of phase 2 read it
 * (xfs_btree.c hands each regular file in extents format to
 * xfs_ownermap_note()): the same extents, compared through a CRC32c
 * digest of the map merged into maximal runs, so that two records of the
 * rmapbt for one bmbt record (or the reverse) do not matter.  And only if
 * they account for every block BULKSTAT counts for the inode (bs_blocks
 * has the delayed allocations too): a file with attribute blocks, bmbt
 * blocks or data not yet allocated is mapped with FIEMAP, as is one whose
 * records overlap another's (reflinked: FIEMAP flags those blocks
 * shared), one changed since the scan began (the walk does not ask) and
 * one whose digest disagrees -- a damaged fork, or one the disk has not
 * caught up with.  None of this reports anything: the map handed to the
 * walk is checked as a FIEMAP map is, and whatever looks wrong in it
 * (an overlap, a cross-link, a mismatch with the rmapbt after the walk)
 * is looked at again through the open file before it is said.
 *
 * The race: a file whose extents change after the BULKSTAT record the
 * walk took for it (and so after the GETFSMAP pass) has a stale map
 * here, as a file that changes after its FIEMAP has a stale map.  A
 * stale map only makes suspects, which the VFS re-check clears (the
 * file's ctime moved).
 *
 * Memory: 24 bytes per data extent for the walk; 8 per on-disk digest
 * from phase 2 until the map is built (each inode's records are judged
 * against it then, the verdict kept in the flags of its first record);
 * 12 per nameless attribute fork to the end of the walk.  The walk does
 * not copy a map it takes into phase 3's extent list: the records are
 * marked (xfs_ownermap_keep()) and handed over after the walk, a slice at
 * a time from the end of the array, which shrinks as the list grows
 * (xfs_ownermap_handover()), so the two are never held whole at once.
 */
#include "backends/xfs/xfs_ondisk.h"

#include <endian.h>
#include <errno.h>
#include <linux/fiemap.h>
#include <linux/fsmap.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>

#include "backends/backend.h"
#include "scan/context.h"
#include "lib/crc32c.h"
#include "lib/fsmap.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/thread.h"

/* Record flags, in the top bits of len (a length of 2^27 blocks is left to FIEMAP). */
#define OM_UNWRITTEN (1u << 31)
#define OM_UNUSABLE (1u << 30)	/* overlaps another owner's, or does not fit */
#define OM_TAKEN (1u << 29)	/* the walk took the inode's map: for the extent list */
/* On an inode's first record: phase 2 read no data fork of it, or a different one. */
#define OM_NO_DIGEST (1u << 28)
#define OM_DIFFERS (1u << 27)
#define OM_LEN_MASK (OM_DIFFERS - 1)

struct om_rec {
	uint64_t ino, phys;		/* phys: device block */
	uint32_t off;			/* file block */
	uint32_t len;			/* blocks, with OM_* flags */
};

/* The on-disk data fork of one inode of an AG, as a digest. */
struct om_digest {
	uint32_t agino, dig;
};

/*
 * An inode whose attribute fork the disk shows without a name listxattr
 * would give, at this ctime (seconds modulo 2^32, nanoseconds).
 */
struct om_noattr {
	uint32_t agino, ctime_lo, ctime_nsec;
};

/* om_find() reads agino as the first member of both. */
_Static_assert(offsetof(struct om_digest, agino) == 0, "agino first");
_Static_assert(offsetof(struct om_noattr, agino) == 0, "agino first");

struct om_ag {
	struct om_digest *v;
	size_t n, alloc;
	struct om_noattr *na;
	size_t nna, alloc_na;
};

struct xfs_ownermap {
	struct om_ag *ags;		/* geo.agcount, filled by phase 2's looks */
	uint32_t nags;
	unsigned ag_shift;		/* inode number bits below the AG number */
	pthread_mutex_t lock;		/* the build */
	atomic_bool built;
	bool ok;			/* built and usable */
	struct om_rec *v;
	size_t n, alloc;
	/*
	 * The pass started alongside phase 2 (early_started), its result
	 * (early_err) for om_ready(), which joins it; a record's inode whose
	 * ctime is since_ns or later (0: the pass was made in phase 3) may
	 * have changed after the pass.
	 */
	pthread_t early;
	bool early_started, early_done;
	int early_err;
	int64_t since_ns;
	atomic_ullong used, unsure, no_digest, differ, changed;
	atomic_ullong attrs_unlisted;	/* HASATTR inodes the disk shows without names */
	size_t nr_records;		/* GETFSMAP's data fork records (n before the handover) */
};

static void om_join(struct xfs_ownermap *om);

void xfs_ownermap_init(struct xfs_state *xs)
{
	struct xfs_ownermap *om = xcalloc(1, sizeof(*om));

	om->nags = xs->geo.agcount;
	om->ags = xcalloc(om->nags ? om->nags : 1, sizeof(*om->ags));
	pthread_mutex_init(&om->lock, NULL);
	xs->ownermap = om;
}

void xfs_ownermap_release(struct xfs_state *xs)
{
	struct xfs_ownermap *om = xs->ownermap;

	if (!om)
		return;
	om_join(om);	/* phase 3 did not ask for the map */
	for (uint32_t ag = 0; ag < om->nags; ag++) {
		free(om->ags[ag].v);
		free(om->ags[ag].na);
	}
	free(om->ags);
	free(om->v);
	pthread_mutex_destroy(&om->lock);
	free(om);
	xs->ownermap = NULL;
}

/* ------------------------------------------------------------ the digest */

/* A map as maximal runs (contiguous in the file and on the device, one state). */
struct om_dig {
	uint32_t crc;
	uint64_t off, phys, len;	/* the open run, len 0: none */
	bool unwritten;
	uint64_t blocks;
};

static void dig_flush(struct om_dig *d)
{
	uint64_t run[4] = { htole64(d->off), htole64(d->phys), htole64(d->len), d->unwritten };

	if (d->len)
		d->crc = crc32c(d->crc, run, sizeof(run));
	d->len = 0;
}

static void dig_add(struct om_dig *d, uint64_t off, uint64_t phys, uint64_t len,
		    bool unwritten)
{
	d->blocks += len;
	if (d->len && d->off + d->len == off && d->phys + d->len == phys &&
	    d->unwritten == unwritten) {
		d->len += len;
		return;
	}
	dig_flush(d);
	*d = (struct om_dig){ d->crc, off, phys, len, unwritten, d->blocks };
}

static uint32_t dig_end(struct om_dig *d)
{
	dig_flush(d);
	return d->crc;
}

/* ------------------------------------------------- phase 2: the data forks */

void xfs_ownermap_look(struct xfs_state *xs, uint32_t agno)
{
	if (xs->ownermap && agno < xs->ownermap->nags) {
		/* The last look's inodes count. */
		xs->ownermap->ags[agno].n = 0;
		xs->ownermap->ags[agno].nna = 0;
	}
}

/* A regular file's data fork in extents format, as a digest; false: none. */
static bool data_fork_digest(const struct od *od, const struct xfs_dinode *d, uint32_t *out)
{
	const uint8_t *lit = (const uint8_t *)d + sizeof(*d);
	size_t room = od->isize - sizeof(*d), boff = (size_t)d->di_forkoff << 3;
	bool big = be64toh(d->di_flags2) & XFS_DIFLAG2_NREXT64;
	uint64_t next = big ? be64toh(d->di_big_nextents) : be32toh(d->di_nextents);
	struct om_dig dig = { 0 };

	if (!S_ISREG(be16toh(d->di_mode)) || d->di_format != XFS_DINODE_FMT_EXTENTS || !next ||
	    boff > room || next > (boff ? boff : room) / sizeof(struct xfs_bmbt_rec))
		return false;
	for (uint64_t i = 0; i < next; i++) {
		uint64_t off, fsb, len;
		bool unwritten;

		od_bmx_decode(lit + i * sizeof(struct xfs_bmbt_rec), &off, &fsb, &len, &unwritten);
		/* A filesystem block number is (AG, block in AG); GETFSMAP's are linear. */
		dig_add(&dig, off, (fsb >> od->agblklog) * od->xs->geo.agblocks +
			(fsb & ((1ULL << od->agblklog) - 1)), len, unwritten);
	}
	*out = dig_end(&dig);
	return true;
}

/* Parent pointers (Linux 6.10): never listed by listxattr. */
#ifndef XFS_ATTR_PARENT
#define XFS_ATTR_PARENT (1 << 3)
#endif

/*
 * Has the inode an attribute fork (BULKSTAT's HASATTR) in which listxattr
 * finds no name?  An empty fork in extents format (Linux 6.18 gives new
 * files one), or a shortform fork whose entries are all parent pointers.
 * Anything else, or a fork that does not parse, may have names.
 */
static bool attr_fork_nameless(const struct od *od, const struct xfs_dinode *d)
{
	const uint8_t *lit = (const uint8_t *)d + sizeof(*d);
	size_t room = od->isize - sizeof(*d), boff = (size_t)d->di_forkoff << 3;
	bool big = be64toh(d->di_flags2) & XFS_DIFLAG2_NREXT64;
	uint64_t anext = big ? be32toh(d->di_big_anextents) : be16toh(d->di_anextents);
	const uint8_t *p = lit + boff;
	size_t total, pos = 4;

	if (!boff || boff >= room)
		return false;
	if (d->di_aformat == XFS_DINODE_FMT_EXTENTS)
		return anext == 0;
	if (d->di_aformat != XFS_DINODE_FMT_LOCAL)
		return false;
	/* struct xfs_attr_sf_hdr: totsize (be16), count, padding; then the entries. */
	total = (size_t)p[0] << 8 | p[1];
	if (total < 4 || total > room - boff)
		return false;
	for (unsigned i = 0; i < p[2]; i++) {
		/* struct xfs_attr_sf_entry: namelen, valuelen, flags, name and value. */
		if (pos + 3 > total || pos + 3 + p[pos] + p[pos + 1] > total ||
		    !(p[pos + 2] & XFS_ATTR_PARENT))
			return false;
		pos += 3 + (size_t)p[pos] + p[pos + 1];
	}
	return pos == total;
}

/* The ctime of an inode core in seconds and nanoseconds since the epoch. */
static void dinode_ctime(const struct xfs_dinode *d, int64_t *sec, uint32_t *nsec)
{
	uint64_t t;

	memcpy(&t, &d->di_ctime, 8);
	t = be64toh(t);
	if (be64toh(d->di_flags2) & XFS_DIFLAG2_BIGTIME) {
		/* Nanoseconds since the bigtime epoch, 2^31 s before the Unix one. */
		*sec = (int64_t)(t / 1000000000ULL) - XFS_BIGTIME_EPOCH_OFFSET;
		*nsec = (uint32_t)(t % 1000000000ULL);
	} else {
		*sec = (int32_t)(t >> 32);
		*nsec = (uint32_t)t;
	}
}

void xfs_ownermap_note(struct od *od, const struct xfs_dinode *d, uint64_t ino)
{
	struct xfs_ownermap *om = od->xs->ownermap;
	uint32_t agno = (uint32_t)(ino >> (od->agblklog + od->inopblog));
	uint32_t agino = (uint32_t)(ino & ((1ULL << (od->agblklog + od->inopblog)) - 1));
	uint32_t dig;
	struct om_ag *a;

	if (!om || agno >= om->nags || !be16toh(d->di_mode))
		return;
	om->ag_shift = od->agblklog + od->inopblog;
	a = &om->ags[agno];
	if (data_fork_digest(od, d, &dig)) {
		if (a->n == a->alloc) {
			a->alloc = a->alloc ? 2 * a->alloc : 256;
			a->v = xrealloc(a->v, a->alloc * sizeof(*a->v));
		}
		a->v[a->n++] = (struct om_digest){ agino, dig };
	}
	if (attr_fork_nameless(od, d)) {
		int64_t sec;
		uint32_t nsec;

		dinode_ctime(d, &sec, &nsec);
		if (a->nna == a->alloc_na) {
			a->alloc_na = a->alloc_na ? 2 * a->alloc_na : 256;
			a->na = xrealloc(a->na, a->alloc_na * sizeof(*a->na));
		}
		a->na[a->nna++] = (struct om_noattr){ agino, (uint32_t)sec, nsec };
	}
}

/* --------------------------------------------- phase 3: the GETFSMAP pass */

/* One AG's records of the pass, in device order. */
struct om_part {
	struct om_rec *v;
	size_t n, alloc;
	int err;			/* the AG's GETFSMAP: 0 or a negative errno */
};

static void om_add(struct om_part *p, const struct fsmap *m, unsigned bs)
{
	uint64_t off = m->fmr_offset / bs, len = m->fmr_length / bs;
	struct om_rec r = {
		.ino = m->fmr_owner, .phys = m->fmr_physical / bs, .off = (uint32_t)off,
		.len = (uint32_t)(len & OM_LEN_MASK),
	};

	if (off > UINT32_MAX || len > OM_LEN_MASK || !len || (m->fmr_offset | m->fmr_length |
							      m->fmr_physical) % bs)
		r.len |= OM_UNUSABLE;
	if (m->fmr_flags & FMR_OF_PREALLOC)
		r.len |= OM_UNWRITTEN;
	if (p->n == p->alloc) {
		p->alloc = p->alloc ? 2 * p->alloc : 4096;
		p->v = xrealloc(p->v, p->alloc * sizeof(*p->v));
	}
	p->v[p->n++] = r;
}

/*
 * Records [from, to) of one AG, in device order: one that overlaps
 * another (shared blocks) cannot stand for a FIEMAP map, which flags them.
 */
static void mark_overlaps(struct om_rec *v, size_t from, size_t to)
{
	uint64_t end = 0;

	for (size_t i = from; i < to; i++) {
		uint64_t e = v[i].phys + (v[i].len & OM_LEN_MASK);

		if (i > from && v[i].phys < end)
			v[i].len |= OM_UNUSABLE;
		if (i + 1 < to && e > v[i + 1].phys)
			v[i].len |= OM_UNUSABLE;
		if (e > end)
			end = e;
	}
}

struct om_query {
	struct om_part *part;
	unsigned bs;
};

/* A GETFSMAP record: kept if it maps a file's data fork. */
static void om_take(const struct fsmap *m, void *arg)
{
	struct om_query *q = arg;

	if (xfs_is_data_rmap(m))
		om_add(q->part, m, q->bs);
}

static bool rec_before(const struct om_rec *x, const struct om_rec *y)
{
	return x->ino != y->ino ? x->ino < y->ino : x->off < y->off;
}

static void rec_sift(struct om_rec *v, size_t root, size_t n)
{
	for (size_t child; (child = 2 * root + 1) < n; root = child) {
		struct om_rec t;

		if (child + 1 < n && rec_before(&v[child], &v[child + 1]))
			child++;
		if (!rec_before(&v[root], &v[child]))
			return;
		t = v[root];
		v[root] = v[child];
		v[child] = t;
	}
}

/*
 * By (inode, file offset), in place: glibc's qsort() sorts a malloc()ed
 * copy, 24 more bytes per record beside the digests at the walk's start.
 */
static void rec_sort(struct om_rec *v, size_t n)
{
	for (size_t i = n / 2; i-- > 0;)
		rec_sift(v, i, n);
	for (size_t i = n; i-- > 1;) {
		struct om_rec t = v[0];

		v[0] = v[i];
		v[i] = t;
		rec_sift(v, 0, i);
	}
}

static int digest_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct om_digest *)a)->agino, y = ((const struct om_digest *)b)->agino;

	return x < y ? -1 : x > y;
}

struct om_build_run {
	struct scrub_ctx *ctx;
	struct xfs_state *xs;
	struct om_part *parts;		/* one per AG */
	uint32_t dev;
};

static void om_build_ag(void *arg, uint32_t ag, unsigned thread)
{
	struct om_build_run *br = arg;
	unsigned bs = br->xs->geo.blocksize;
	uint64_t agbytes = (uint64_t)br->xs->geo.agblocks * bs;
	struct om_part *p = &br->parts[ag];
	struct om_query q = { .part = p, .bs = bs };

	(void)thread;
	if (scrub_should_stop(br->ctx)) {
		p->err = -ECANCELED;
		return;
	}
	p->err = fsmap_query(br->xs->fd, br->dev, ag * agbytes, (ag + 1) * agbytes - 1,
				 om_take, &q);
	mark_overlaps(p->v, 0, p->n);
}

/*
 * One GETFSMAP pass per AG, the AGs in parallel (xfs_for_each_ag(): -j
 * threads), their records then put end to end and sorted: 0, or a
 * negative errno if the map cannot serve.
 */
static int om_build(struct scrub_ctx *ctx, struct xfs_state *xs, struct xfs_ownermap *om)
{
	struct om_build_run br = {
		.ctx = ctx, .xs = xs, .parts = xcalloc(om->nags ? om->nags : 1, sizeof(*br.parts)),
		.dev = fsmap_dev(ctx->root_stx.stx_dev_major, ctx->root_stx.stx_dev_minor),
	};
	int ret = xfs_for_each_ag(ctx, om_build_ag, &br);
	size_t total = om->n;

	for (uint32_t ag = 0; ag < om->nags && !ret; ag++) {
		ret = br.parts[ag].err;
		total += br.parts[ag].n;
	}
	/*
	 * One allocation for all AGs, not a grown copy per AG: the first
	 * AG's part grown (a mapping of its own: mremap, no copy) to hold them
	 * all, the others' copied in and freed one by one.
	 */
	if (!ret && !om->v && om->nags) {
		om->v = br.parts[0].v;
		om->n = br.parts[0].n;
		om->alloc = br.parts[0].alloc;
		br.parts[0] = (struct om_part){ 0 };
	}
	if (!ret && total > om->alloc) {
		om->alloc = total;
		om->v = xrealloc(om->v, om->alloc * sizeof(*om->v));
	}
	for (uint32_t ag = 0; ag < om->nags; ag++) {
		struct om_part *p = &br.parts[ag];

		if (!ret && p->n) {
			memcpy(om->v + om->n, p->v, p->n * sizeof(*p->v));
			om->n += p->n;
		}
		free(p->v);
	}
	free(br.parts);
	if (ret < 0)
		return ret;
	rec_sort(om->v, om->n);
	om->nr_records = om->n;
	return 0;
}

/* Can the map serve here (the walk's maps are offsets on the data device alone)? */
static bool om_applies(const struct scrub_ctx *ctx, const struct xfs_state *xs)
{
	return (xs->geo.flags & XFS_FSOP_GEOM_FLAGS_RMAPBT) && ctx->dev_size && !xs->geo.rtblocks;
}

/* 1 s: the coarse clock's lag and whole-second timestamps (phase3.c). */
#define OM_CTIME_MARGIN_NS 1000000000LL

static void *om_build_early(void *arg)
{
	struct scrub_ctx *ctx = arg;
	struct xfs_state *xs = xfs_state(ctx);
	/*
	 * FSCRUB_DEBUG_AFTER_FSMAP: a shell command run once the records are
	 * read, before phase 2 ends (xfs_ownermap_wait()), for the test of a
	 * file changed in between.
	 */
	const char *after = getenv("FSCRUB_DEBUG_AFTER_FSMAP");

	xs->ownermap->early_err = om_build(ctx, xs, xs->ownermap);
	if (after && system(after) != 0)
		xs->ownermap->early_err = -ECHILD;
	return NULL;
}

static void om_join(struct xfs_ownermap *om)
{
	if (!om->early_started)
		return;
	pthread_join(om->early, NULL);
	om->early_started = false;
	om->early_done = true;
}

void xfs_ownermap_wait(struct scrub_ctx *ctx)
{
	struct xfs_ownermap *om = xfs_state(ctx)->ownermap;

	if (om && getenv("FSCRUB_DEBUG_AFTER_FSMAP"))
		om_join(om);
}

void xfs_ownermap_start(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct xfs_ownermap *om = xs->ownermap;
	const struct scrub_options *o = &ctx->opt;
	struct timespec now;

	/*
	 * Not where the walk will not ask (the ledger notes every file, or no
	 * bulk records), and not under -b: one read at a time there.
	 */
	if (!om || !om_applies(ctx, xs) || o->background || backend_ledger_notes_all(ctx) ||
	    getenv("FSCRUB_DEBUG_NO_BULK") || getenv("FSCRUB_DEBUG_LATE_FSMAP"))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	om->since_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - OM_CTIME_MARGIN_NS;
	om->early_started = thread_start(&om->early, om_build_early, ctx) == 0;
	if (!om->early_started)
		om->since_ns = 0;
}

/* The map, from the pass alongside phase 2 or made now; false (said under -v): none. */
static bool om_get(struct scrub_ctx *ctx, struct xfs_state *xs, struct xfs_ownermap *om)
{
	int ret;

	om_join(om);
	if (om->early_done)
		ret = om->early_err;
	else
		ret = om_applies(ctx, xs) ? om_build(ctx, xs, om) : -EOPNOTSUPP;
	if (ret < 0 && ret != -EOPNOTSUPP)
		report_verbose(ctx, "Phase 3: GETFSMAP: %s: files are mapped with FIEMAP",
			       strerror(-ret));
	return ret == 0;
}

static void om_judge(struct xfs_ownermap *om);

/*
 * Built once, by the first walk thread that asks for bulk records (before
 * their BULKSTAT: a record is never older than the map); false: not
 * usable here.
 */
static bool om_ready(struct scrub_ctx *ctx, struct xfs_state *xs, struct xfs_ownermap *om)
{
	if (atomic_load(&om->built))
		return om->ok;
	pthread_mutex_lock(&om->lock);
	if (!atomic_load(&om->built)) {
		for (uint32_t ag = 0; ag < om->nags; ag++) {
			struct om_ag *a = &om->ags[ag];

			sort_items(a->v, a->n, sizeof(*a->v), digest_cmp);
			sort_items(a->na, a->nna, sizeof(*a->na), digest_cmp);
		}
		om->ok = om_get(ctx, xs, om);
		om_judge(om);
		atomic_store(&om->built, true);
	}
	pthread_mutex_unlock(&om->lock);
	return om->ok;
}

/*
 * The AG and index of ino in one of its AG's arrays, sorted by agino (the
 * first member of every element, each size bytes); false if not there.
 */
static bool om_find(const struct xfs_ownermap *om, uint64_t ino, bool noattr, size_t *agno,
		    size_t *idx)
{
	unsigned shift = om->ag_shift;
	uint32_t agino = (uint32_t)(ino & ((1ULL << shift) - 1));

	*agno = (size_t)(ino >> shift);
	if (!shift || *agno >= om->nags)
		return false;
	const struct om_ag *a = &om->ags[*agno];
	const char *v = noattr ? (const char *)a->na : (const char *)a->v;
	size_t size = noattr ? sizeof(*a->na) : sizeof(*a->v);
	size_t n = noattr ? a->nna : a->n, lo = 0, hi = n;
	uint32_t at;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		memcpy(&at, v + mid * size, sizeof(at));
		if (at < agino)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == n)
		return false;
	memcpy(&at, v + lo * size, sizeof(at));
	*idx = lo;
	return at == agino;
}

/* The inode's on-disk digest from phase 2; false: none. */
static bool ondisk_digest(const struct xfs_ownermap *om, uint64_t ino, uint32_t *dig)
{
	size_t ag, i;

	if (!om_find(om, ino, false, &ag, &i))
		return false;
	*dig = om->ags[ag].v[i].dig;
	return true;
}

/* The inode's nameless attribute fork from phase 2, or NULL. */
static const struct om_noattr *ondisk_noattr(const struct xfs_ownermap *om, uint64_t ino)
{
	size_t ag, i;

	return om_find(om, ino, true, &ag, &i) ? &om->ags[ag].na[i] : NULL;
}

/*
 * Each inode's records against its on-disk data fork, now that both are
 * known; the verdict goes on its first record and the digests are freed
 * (8 bytes per file that would be held to the end of the walk).
 */
static void om_judge(struct xfs_ownermap *om)
{
	for (size_t i = 0, j; om->ok && i < om->n; i = j) {
		struct om_dig dig = { 0 };
		bool usable = true;
		uint32_t want;

		for (j = i; j < om->n && om->v[j].ino == om->v[i].ino; j++) {
			usable &= !(om->v[j].len & OM_UNUSABLE);
			dig_add(&dig, om->v[j].off, om->v[j].phys, om->v[j].len & OM_LEN_MASK,
				om->v[j].len & OM_UNWRITTEN);
		}
		if (!usable)
			continue;
		if (!ondisk_digest(om, om->v[i].ino, &want))
			om->v[i].len |= OM_NO_DIGEST;
		else if (dig_end(&dig) != want)
			om->v[i].len |= OM_DIFFERS;
	}
	for (uint32_t ag = 0; ag < om->nags; ag++) {
		free(om->ags[ag].v);
		om->ags[ag].v = NULL;
		om->ags[ag].n = om->ags[ag].alloc = 0;
	}
}

bool xfs_ownermap_nameless(struct scrub_ctx *ctx, uint64_t ino, int64_t ctime_sec,
			   uint32_t ctime_nsec)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct xfs_ownermap *om = xs->ownermap;
	const struct om_noattr *na;

	if (!om)
		return false;
	om_ready(ctx, xs, om);	/* built (sorted), with or without the rmapbt */
	if (!(na = ondisk_noattr(om, ino)) || na->ctime_lo != (uint32_t)ctime_sec ||
	    na->ctime_nsec != ctime_nsec)
		return false;
	atomic_fetch_add(&om->attrs_unlisted, 1);
	return true;
}

/* The first record of ino, or om->n. */
static size_t first_of(const struct xfs_ownermap *om, uint64_t ino)
{
	size_t lo = 0, hi = om->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (om->v[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

void xfs_ownermap_prepare(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);

	if (xs->ownermap)
		om_ready(ctx, xs, xs->ownermap);
}

int xfs_ownermap_extents(struct scrub_ctx *ctx, unsigned thread,
			 const struct backend_inode *b, struct fiemap_extent *out, size_t max)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct xfs_ownermap *om = xs->ownermap;
	unsigned bs = xs->geo.blocksize;
	struct om_dig dig = { 0 };
	size_t n = 0;

	(void)thread;	/* the owner map is shared */
	if (!om || !om_ready(ctx, xs, om))
		return -EOPNOTSUPP;
	/* Changed since the pass alongside phase 2 began: its records may be older. */
	if (om->since_ns && b->ctime_ns >= om->since_ns) {
		atomic_fetch_add(&om->changed, 1);
		return -ENODATA;
	}
	for (size_t i = first_of(om, b->ino); i < om->n && om->v[i].ino == b->ino; i++) {
		const struct om_rec *r = &om->v[i];
		uint64_t len = r->len & OM_LEN_MASK;

		if ((r->len & OM_UNUSABLE) || n == max) {
			atomic_fetch_add(&om->unsure, 1);
			return -ENODATA;
		}
		dig_add(&dig, r->off, r->phys, len, r->len & OM_UNWRITTEN);
		out[n++] = (struct fiemap_extent){
			.fe_logical = (uint64_t)r->off * bs, .fe_physical = r->phys * bs,
			.fe_length = len * bs,
			.fe_flags = r->len & OM_UNWRITTEN ? FIEMAP_EXTENT_UNWRITTEN : 0,
		};
	}
	/* Every block BULKSTAT counts (delayed allocations too) is a data extent. */
	if (!n || dig.blocks * bs != b->blocks * 512) {
		atomic_fetch_add(&om->unsure, 1);
		return -ENODATA;
	}
	/* om_judge()'s verdict, on the first record. */
	if (om->v[first_of(om, b->ino)].len & OM_NO_DIGEST) {
		atomic_fetch_add(&om->no_digest, 1);
		return -ENODATA;
	}
	if (om->v[first_of(om, b->ino)].len & OM_DIFFERS) {
		atomic_fetch_add(&om->differ, 1);
		return -ENODATA;
	}
	out[n - 1].fe_flags |= FIEMAP_EXTENT_LAST;
	atomic_fetch_add(&om->used, 1);
	return (int)n;
}

void xfs_ownermap_keep(struct scrub_ctx *ctx, const struct backend_inode *b)
{
	struct xfs_ownermap *om = xfs_state(ctx)->ownermap;

	/* Only this thread maps this inode (once, at its first name): no race on its records. */
	for (size_t i = first_of(om, b->ino); i < om->n && om->v[i].ino == b->ino; i++)
		__atomic_fetch_or(&om->v[i].len, OM_TAKEN, __ATOMIC_RELAXED);
}

/* Records handed over per shrink of the array: 1.5 MiB. */
#define HANDOVER_SLICE 65536

void xfs_ownermap_handover(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct xfs_ownermap *om = xs->ownermap;
	unsigned bs = xs->geo.blocksize;

	if (!om)
		return;
	/* From the end, a slice at a time, each given back as it is added. */
	while (om->n) {
		size_t from = om->n > HANDOVER_SLICE ? om->n - HANDOVER_SLICE : 0;

		for (size_t i = from; i < om->n; i++) {
			const struct om_rec *r = &om->v[i];
			struct fiemap_extent fe = {
				.fe_logical = (uint64_t)r->off * bs, .fe_physical = r->phys * bs,
				.fe_length = (uint64_t)(r->len & OM_LEN_MASK) * bs,
				.fe_flags = r->len & OM_UNWRITTEN ? FIEMAP_EXTENT_UNWRITTEN : 0,
			};

			if (r->len & OM_TAKEN)
				backend_collect_extents(ctx, r->ino, &fe, 1);
		}
		om->n = from;
		om->v = from ? xrealloc(om->v, from * sizeof(*om->v)) : (free(om->v), NULL);
		om->alloc = from;
	}
}

void xfs_ownermap_report(struct scrub_ctx *ctx)
{
	struct xfs_ownermap *om = xfs_state(ctx)->ownermap;

	if (!om || !atomic_load(&om->built))
		return;
	report_verbose(ctx, "Phase 3: %llu inodes with an attribute fork not listed: the disk "
		       "shows it without a name, at the inode's ctime",
		       (unsigned long long)atomic_load(&om->attrs_unlisted));
	if (!om->ok)
		return;
	report_verbose(ctx, "Phase 3: %llu files' extent maps from %zu GETFSMAP owner records "
		       "(read %s); mapped with FIEMAP instead: %llu not covered by their records "
		       "alone, %llu without an on-disk data fork read, %llu whose on-disk data "
		       "fork differs, %llu changed since the records were read",
		       (unsigned long long)atomic_load(&om->used), om->nr_records,
		       om->since_ns ? "alongside phase 2" : "at the start of the walk",
		       (unsigned long long)atomic_load(&om->unsure),
		       (unsigned long long)atomic_load(&om->no_digest),
		       (unsigned long long)atomic_load(&om->differ),
		       (unsigned long long)atomic_load(&om->changed));
}
