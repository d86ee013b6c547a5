/*
 * xfs_xref: what only cross-referencing finds in one AG, read from the
 * device by xfs_btree.c -- damage that passes every check of a block on
 * its own, the kind xfs_repair -n finds by building its own maps.
 *
 *   xfs.inode_alloc  an inode of a chunk in use (mode not 0) that its inobt
 *                    record calls free, or free (mode 0) that it calls in
 *                    use (xfs_repair: "imap claims ..."); with the rmapbt,
 *                    one in use in a sparse hole whose blocks are still
 *                    the chunk's (xref_hole_owned_by_inodes()).
 *   xfs.unlinked     the AGI's unlinked buckets, followed through the
 *                    inodes' di_next_unlinked: every inode on them is
 *                    allocated, in use, has no link, is in its bucket
 *                    (agino % 64), and on one list once; lists do not loop.
 *                    One with no link is held for the walk: reachable
 *                    by a name, it is not unlinked (xfs_defer_if_named()).
 *   xfs.space        every block of the AG is free (bnobt; the cntbt has
 *                    the same extents) or used -- AG headers, the AGFL,
 *                    btree blocks, inode chunks, the log and, with the
 *                    rmapbt, whatever it maps -- never both, never by two
 *                    owners of the headers, btrees and chunks; with the
 *                    rmapbt, never by nobody.
 *   xfs.block_count  an inode counts other blocks (di_nblocks) than its
 *                    forks map, with their bmbt blocks (walked from the
 *                    root in the inode, read from the device).
 *   xfs.refcount     with the rmapbt and reflink: every range of blocks
 *                    that two or more data fork records of the rmapbt map
 *                    (a file reflinked to itself counts twice) has a
 *                    refcountbt record of that count, and no other range
 *                    has one; the refcountbt's CoW staging records are the
 *                    rmapbt's XFS_RMAP_OWN_COW records (xfs_repair:
 *                    "Incorrect reference count", "Missing reference
 *                    count record").
 *   xfs.sb_secondary a secondary superblock's geometry and features are
 *                    the primary's.
 *
 * Each of these is a problem between blocks ("cross": see xfs_ondisk.c),
 * so it is believed only if it persists across looks of a quiet AG.
 * Without the rmapbt, file data is not in the space or the refcount
 * check here: an AG's look sees the inodes of its own chunks only, whose
 * data may lie in any AG; after the walk, xfs_inodes.c sets the files'
 * FIEMAP extents against GETFSMAP's free space instead, and
 * xfs_refcount.c counts them against the refcountbt (through
 * xref_refcount_diff(), the comparison made here).
 */
#include "backends/xfs/xfs_ondisk.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

/* Problems of one kind per AG: the first few say enough. */
#define XREF_MAX_SAID 8

void xref_exts_add(struct xref_exts *s, uint32_t start, uint32_t len, uint64_t owner,
		   uint64_t offset)
{
	if (s->n == s->alloc) {
		s->alloc = s->alloc ? 2 * s->alloc : 64;
		s->v = xrealloc(s->v, s->alloc * sizeof(*s->v));
	}
	s->v[s->n++] = (struct xref_ext){ start, len, owner, offset, NULL };
}

void xref_used_add(struct xref_space *sp, uint32_t start, uint32_t len, uint64_t owner,
		   const char *what)
{
	xref_exts_add(&sp->used, start, len, owner, 0);
	sp->used.v[sp->used.n - 1].what = what;
}

void xref_space_release(struct xref_space *sp)
{
	free(sp->bno.v);
	free(sp->cnt.v);
	free(sp->rmap.v);
	free(sp->used.v);
	free(sp->refc.v);
	free(sp->cow.v);
	memset(sp, 0, sizeof(*sp));
}

/* ------------------------------------------------------ inode allocation */

void xref_inode_alloc(struct od *od, const struct xfs_dinode *d, uint64_t ino, bool free)
{
	unsigned mode = be16toh(d->di_mode);

	if (mode && free)
		od_problem_id(od, CHECK_XFS_INODE_ALLOC, ino, true,
			      "inode %llu is in use (mode 0%o, %u links) but free in its inobt "
			      "record", (unsigned long long)ino, mode, be32toh(d->di_nlink));
	else if (!mode && !free)
		od_problem_id(od, CHECK_XFS_INODE_ALLOC, ino, true,
			      "inode %llu is free (mode 0) but in use in its inobt record",
			      (unsigned long long)ino);
}

/* Does an extent of s (sorted by start, not overlapping) meet [start, end)? */
static const struct xref_ext *ext_meeting(const struct xref_exts *s, uint32_t start, uint32_t end)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].start + s->v[mid].len <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n && s->v[lo].start < end ? &s->v[lo] : NULL;
}

bool xref_hole_owned_by_inodes(const struct xref_space *sp, uint32_t start, uint32_t len)
{
	uint32_t end = start + len;

	if (!sp->bno_ok || !sp->rmap_ok || ext_meeting(&sp->bno, start, end))
		return false;
	/* rmapbt records overlap only for shared data, never for inode chunks. */
	for (uint32_t b = start; b < end;) {
		const struct xref_ext *r = ext_meeting(&sp->rmap, b, b + 1);

		if (!r || r->start > b || r->owner != XFS_RMAP_OWN_INODES)
			return false;
		b = r->start + r->len;
	}
	return true;
}

/* ----------------------------------------------------------- block counts */

/* Blocks a fork in extents format maps, added to *sum; false: not known here. */
static bool fork_blocks(const uint8_t *fork, size_t room, uint8_t fmt, uint64_t nextents,
			uint64_t *sum)
{
	/* A packed bmbt record: 128 bits, the block count in the low 21. */
	const uint64_t count_mask = (1ULL << 21) - 1;

	if (fmt == XFS_DINODE_FMT_LOCAL || fmt == XFS_DINODE_FMT_DEV)
		return true;
	if (fmt != XFS_DINODE_FMT_EXTENTS || nextents > room / sizeof(struct xfs_bmbt_rec))
		return false;
	for (uint64_t i = 0; i < nextents; i++) {
		uint64_t l1;

		memcpy(&l1, fork + i * sizeof(struct xfs_bmbt_rec) + 8, 8);
		*sum += be64toh(l1) & count_mask;
	}
	return true;
}

/* bmbt blocks below a root: at most this many are read for one inode. */
#define BMBT_MAX_BLOCKS (1u << 16)
#define BMBT_MAX_LEVELS 9

uint64_t od_fsb_offset(const struct od *od, uint64_t fsb)
{
	uint64_t agno = fsb >> od->agblklog, agbno = fsb & ((1ULL << od->agblklog) - 1);

	return (agno * od->xs->geo.agblocks + agbno) * od->bsize;
}

void od_bmx_decode(const uint8_t *p, uint64_t *off, uint64_t *fsb, uint64_t *len,
		   bool *unwritten)
{
	uint64_t l0, l1;

	memcpy(&l0, p, 8);
	memcpy(&l1, p + 8, 8);
	l0 = be64toh(l0);
	l1 = be64toh(l1);
	*unwritten = l0 >> 63;
	*off = (l0 & ((1ULL << 63) - 1)) >> 9;
	*fsb = ((l0 & 0x1ff) << 43) | (l1 >> 21);
	*len = l1 & ((1ULL << 21) - 1);
}

struct bmbt_walk {
	struct od *od;
	uint64_t ino;
	od_bmx_fn fn;
	void *arg;
	unsigned blocks;
};

/*
 * The bmbt block fsb at level, its records handed to w->fn, itself counted
 * in w->blocks.  False if it is not what its pointer says (other checks or
 * the kernel will say so) or the tree is too big to walk.
 */
static bool bmbt_block(struct bmbt_walk *w, uint64_t fsb, unsigned level)
{
	struct od *od = w->od;
	const uint8_t *b = od->buf;
	unsigned n, maxrecs = (od->bsize - XFS_BTREE_LBLOCK_CRC_LEN) / 16;
	uint64_t owner, *ptrs;
	bool ok = true;

	if (++w->blocks > BMBT_MAX_BLOCKS || od_pread(od, od->buf, od_fsb_offset(od, fsb),
						      od->bsize) < 0)
		return false;
	memcpy(&owner, b + offsetof(struct xfs_btree_block, bb_u.l.bb_owner), 8);
	n = be16toh(((const struct xfs_btree_block *)b)->bb_numrecs);
	if (be32toh(((const struct xfs_btree_block *)b)->bb_magic) != XFS_BMAP_CRC_MAGIC ||
	    be16toh(((const struct xfs_btree_block *)b)->bb_level) != level ||
	    be64toh(owner) != w->ino || n > maxrecs ||
	    !od_crc_ok(b, od->bsize, XFS_BTREE_LBLOCK_CRC_OFF))
		return false;
	if (!level) {
		w->fn(w->arg, b + XFS_BTREE_LBLOCK_CRC_LEN, n);
		return true;
	}
	/* The children overwrite od->buf: their pointers are copied first. */
	ptrs = xmalloc((size_t)n * 8 + 1);
	memcpy(ptrs, b + XFS_BTREE_LBLOCK_CRC_LEN + (size_t)maxrecs * 8, (size_t)n * 8);
	for (unsigned i = 0; i < n && ok; i++)
		ok = bmbt_block(w, be64toh(ptrs[i]), level - 1);
	free(ptrs);
	return ok;
}

bool od_bmbt_walk(struct od *od, uint64_t ino, const uint8_t *fork, size_t room, od_bmx_fn fn,
		  void *arg, unsigned *blocks)
{
	const struct xfs_bmdr_block *root = (const void *)fork;
	unsigned level = be16toh(root->bb_level), n = be16toh(root->bb_numrecs);
	/* The root's keys and pointers share the fork, as xfs_bmdr_maxrecs() has it. */
	size_t maxrecs = (room - sizeof(*root)) / 16;
	struct bmbt_walk w = { .od = od, .ino = ino, .fn = fn, .arg = arg };
	const uint8_t *p = fork + sizeof(*root) + maxrecs * 8;

	if (!level || level > BMBT_MAX_LEVELS || !n || n > maxrecs)
		return false;
	for (unsigned i = 0; i < n; i++) {
		uint64_t fsb;

		memcpy(&fsb, p + (size_t)i * 8, 8);
		if (!bmbt_block(&w, be64toh(fsb), level - 1))
			return false;
	}
	*blocks = w.blocks;
	return true;
}

/* od_bmx_fn: the blocks a bmbt leaf's records map, added to *(uint64_t *)arg. */
static void sum_recs(void *arg, const uint8_t *recs, unsigned n)
{
	fork_blocks(recs, (size_t)n * 16, XFS_DINODE_FMT_EXTENTS, n, arg);
}

/* A fork in btree format: its bmbt blocks and what its records map. */
static bool btree_fork_blocks(struct od *od, uint64_t ino, const uint8_t *fork, size_t room,
			      uint64_t *sum)
{
	uint64_t mapped = 0;
	unsigned blocks;

	if (!od_bmbt_walk(od, ino, fork, room, sum_recs, &mapped, &blocks))
		return false;
	*sum += mapped + blocks;
	return true;
}

/* A fork's blocks, in any format; false: not known here. */
static bool any_fork_blocks(struct od *od, uint64_t ino, const uint8_t *fork, size_t room,
			    uint8_t fmt, uint64_t nextents, uint64_t *sum)
{
	if (fmt == XFS_DINODE_FMT_BTREE)
		return btree_fork_blocks(od, ino, fork, room, sum);
	return fork_blocks(fork, room, fmt, nextents, sum);
}

bool od_dinode_forks(const struct od *od, const struct xfs_dinode *d, struct od_forks *f)
{
	const uint8_t *lit = (const uint8_t *)d + sizeof(*d);
	size_t room = od->isize - sizeof(*d), boff = (size_t)d->di_forkoff << 3;
	bool big = be64toh(d->di_flags2) & XFS_DIFLAG2_NREXT64;

	if (!be16toh(d->di_mode) || boff > room)
		return false;
	*f = (struct od_forks){
		.data = lit, .data_room = boff ? boff : room,
		.attr = boff ? lit + boff : NULL, .attr_room = boff ? room - boff : 0,
		.nextents = big ? be64toh(d->di_big_nextents) : be32toh(d->di_nextents),
		.anextents = big ? be32toh(d->di_big_anextents) : be16toh(d->di_anextents),
	};
	return true;
}

void xref_inode_blocks(struct od *od, const struct xfs_dinode *d, uint64_t ino)
{
	struct od_forks f;
	uint64_t mapped = 0;

	if (!od_dinode_forks(od, d, &f))
		return;
	if (!any_fork_blocks(od, ino, f.data, f.data_room, d->di_format, f.nextents, &mapped) ||
	    (f.attr && !any_fork_blocks(od, ino, f.attr, f.attr_room, (uint8_t)d->di_aformat,
					f.anextents, &mapped)))
		return;
	if (mapped != be64toh(d->di_nblocks))
		od_problem_id(od, CHECK_XFS_BLOCK_COUNT, ino, true,
			      "inode %llu counts %llu blocks, its forks map %llu",
			      (unsigned long long)ino, (unsigned long long)be64toh(d->di_nblocks),
			      (unsigned long long)mapped);
}

/* --------------------------------------------------------- unlinked lists */

/* The inobt record holding agino (recs sorted by startino), or NULL. */
static const struct ino_rec *rec_of(const struct ino_rec *recs, size_t n, uint32_t agino)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (recs[mid].startino + XFS_INODES_PER_CHUNK <= agino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && recs[lo].startino <= agino ? &recs[lo] : NULL;
}

/* Allocated in the inobt: in a chunk, not in a hole, not free. */
static bool ino_allocated(const struct ino_rec *recs, size_t n, uint32_t agino)
{
	const struct ino_rec *r = rec_of(recs, n, agino);
	unsigned k;

	if (!r)
		return false;
	k = agino - r->startino;
	return !(r->holemask & (1u << (k / XFS_INODES_PER_HOLEMASK_BIT))) &&
	       !((r->free >> k) & 1);
}

struct unl_walk {
	struct od *od;
	uint32_t agno, length;
	uint64_t base;
	const struct ino_rec *recs;
	size_t nrecs;
	uint32_t *seen;		/* every agino met on any list */
	size_t nseen, aseen;
	uint64_t limit;		/* more steps than this: a loop */
};

static uint64_t unl_ino(const struct unl_walk *u, uint32_t agino)
{
	return ((uint64_t)u->agno << (u->od->agblklog + u->od->inopblog)) | agino;
}

/*
 * Read inode agino's block into od->buf; returns its core, or NULL if it
 * cannot be read or fails its own checks (check_chunk() says so).
 */
static const struct xfs_dinode *unl_read(struct unl_walk *u, uint32_t agino)
{
	struct od *od = u->od;
	uint32_t agbno = agino >> od->inopblog;
	const uint8_t *p;

	if (agbno >= u->length || od_pread(od, od->buf, u->base + (uint64_t)agbno * od->bsize,
					   od->bsize) < 0)
		return NULL;
	p = od->buf + (size_t)(agino & ((1u << od->inopblog) - 1)) * od->isize;
	if (be16toh(((const struct xfs_dinode *)p)->di_magic) != XFS_DINODE_MAGIC ||
	    !od_crc_ok(p, od->isize, XFS_DINODE_CRC_OFF))
		return NULL;
	return (const void *)p;
}

/* One inode of bucket b's list: what it must be; false ends the list. */
static bool unl_inode(struct unl_walk *u, unsigned b, uint32_t agino, uint32_t *next)
{
	struct od *od = u->od;
	uint64_t ino = unl_ino(u, agino);
	const struct xfs_dinode *d;

	if (agino % XFS_AGI_UNLINKED_BUCKETS != b)
		od_problem_id(od, CHECK_XFS_UNLINKED, ino, true,
			      "unlinked bucket %u holds inode %llu, whose bucket is %u", b,
			      (unsigned long long)ino, agino % XFS_AGI_UNLINKED_BUCKETS);
	if (!ino_allocated(u->recs, u->nrecs, agino)) {
		od_problem_id(od, CHECK_XFS_UNLINKED, 0, true,
			      "unlinked bucket %u holds inode %llu, which the inobt does not "
			      "have in use", b, (unsigned long long)ino);
		return false;
	}
	d = unl_read(u, agino);
	if (!d)
		return false;	/* the inode's own check says why */
	if (!be16toh(d->di_mode))
		od_problem_id(od, CHECK_XFS_UNLINKED, ino, true,
			      "unlinked bucket %u holds inode %llu, which is free (mode 0)", b,
			      (unsigned long long)ino);
	else if (be32toh(d->di_nlink))
		od_problem_id(od, CHECK_XFS_UNLINKED, ino, true,
			      "unlinked bucket %u holds inode %llu, which has %u links", b,
			      (unsigned long long)ino, be32toh(d->di_nlink));
	else if (od->first_look)
		/*
		 * Rightly there if no name reaches it (unlinked but open, an
		 * O_TMPFILE); its link count may lie too, and only the walk can
		 * tell.  Not a problem of the look: those make an AG wait for a
		 * third, and every open unlinked file would.
		 */
		xfs_defer_if_named(od->xs, ino, SEV_ERROR, CHECK_XFS_UNLINKED,
				   "AG %u on disk: unlinked bucket %u holds inode %llu, which has "
				   "no link but is reachable by a name", u->agno, b,
				   (unsigned long long)ino);
	*next = be32toh(d->di_next_unlinked);
	return true;
}

static void unl_bucket(struct unl_walk *u, unsigned b, uint32_t head)
{
	uint32_t agino = head, next = NULLAGINO;
	uint64_t steps = 0;

	while (agino != NULLAGINO && !scrub_should_stop(u->od->ctx)) {
		if (++steps > u->limit) {
			od_problem_id(u->od, CHECK_XFS_UNLINKED, 0, true,
				      "unlinked bucket %u's list is longer than the AG has "
				      "inodes: it loops", b);
			return;
		}
		if (u->nseen == u->aseen) {
			u->aseen = u->aseen ? 2 * u->aseen : 64;
			u->seen = xrealloc(u->seen, u->aseen * sizeof(*u->seen));
		}
		u->seen[u->nseen++] = agino;
		if (!unl_inode(u, b, agino, &next))
			return;
		agino = next;
	}
}

void xref_unlinked(struct od *od, uint32_t agno, uint64_t base, uint32_t length,
		   const struct xfs_agi *agi, const struct ino_rec *recs, size_t nrecs)
{
	struct unl_walk u = { .od = od, .agno = agno, .length = length, .base = base,
			      .recs = recs, .nrecs = nrecs,
			      .limit = (uint64_t)be32toh(agi->agi_count) + 1 };
	size_t said = 0;

	for (unsigned b = 0; b < XFS_AGI_UNLINKED_BUCKETS; b++)
		unl_bucket(&u, b, be32toh(agi->agi_unlinked[b]));
	sort_items(u.seen, u.nseen, sizeof(*u.seen), u32_cmp);
	for (size_t i = 1; i < u.nseen && said < XREF_MAX_SAID; i++)
		if (u.seen[i] == u.seen[i - 1] && (i < 2 || u.seen[i - 2] != u.seen[i])) {
			od_problem_id(od, CHECK_XFS_UNLINKED, unl_ino(&u, u.seen[i]), true,
				      "inode %llu is on the unlinked lists more than once",
				      (unsigned long long)unl_ino(&u, u.seen[i]));
			said++;
		}
	free(u.seen);
}

/* ------------------------------------------------------------ free space */

static int cmp_ext(const void *a, const void *b)
{
	const struct xref_ext *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return x->owner < y->owner ? -1 : x->owner > y->owner;
}

/* Who an rmapbt owner is, for a message. */
static void owner_name(char *buf, size_t len, const struct xref_ext *e)
{
	static const char *const special[] = {
		"the AG headers", "the log", "the free space btrees or the AGFL", "the inode btrees",
		"inode chunks", "the refcount btree", "CoW staging",
	};
	uint64_t off = XFS_RMAP_OFF(e->offset);

	if (e->what)
		snprintf(buf, len, "%s", e->what);
	else if (e->owner <= XFS_RMAP_OWN_FS && e->owner > XFS_RMAP_OWN_MIN)
		snprintf(buf, len, "%s", special[XFS_RMAP_OWN_FS - e->owner]);
	else if (e->offset & XFS_RMAP_OFF_BMBT_BLOCK)
		snprintf(buf, len, "inode %llu's block map", (unsigned long long)e->owner);
	else
		snprintf(buf, len, "inode %llu (%s fork, file block %llu)",
			 (unsigned long long)e->owner,
			 e->offset & XFS_RMAP_OFF_ATTR_FORK ? "attr" : "data",
			 (unsigned long long)off);
}

/* The owner to name a finding after: an inode, else none. */
static uint64_t owner_ino(const struct xref_ext *e)
{
	return e->owner < XFS_RMAP_OWN_MIN ? e->owner : 0;
}

/* The bnobt and the cntbt hold the same extents (bno sorted by block). */
static void check_bno_cnt(struct od *od, struct xref_space *sp)
{
	struct xref_exts *bno = &sp->bno, *cnt = &sp->cnt;

	sort_items(cnt->v, cnt->n, sizeof(*cnt->v), cmp_ext);
	for (size_t i = 0; i < bno->n || i < cnt->n; i++) {
		const struct xref_ext *b = i < bno->n ? &bno->v[i] : NULL;
		const struct xref_ext *c = i < cnt->n ? &cnt->v[i] : NULL;

		if (b && c && b->start == c->start && b->len == c->len)
			continue;
		if (b && (!c || b->start <= c->start))
			od_problem_id(od, CHECK_XFS_SPACE, 0, true,
				      "bnobt has free blocks %u-%u, the cntbt has not", b->start,
				      b->start + b->len - 1);
		else
			od_problem_id(od, CHECK_XFS_SPACE, 0, true,
				      "cntbt has free blocks %u-%u, the bnobt has not", c->start,
				      c->start + c->len - 1);
		return;
	}
}

/* The free extent that overlaps [start, end), or NULL (free: sorted, disjoint). */
static const struct xref_ext *free_overlap(const struct xref_exts *free, uint32_t start,
					   uint32_t end)
{
	size_t lo = 0, hi = free->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if ((uint64_t)free->v[mid].start + free->v[mid].len <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < free->n && free->v[lo].start < end ? &free->v[lo] : NULL;
}

/*
 * Used blocks (of exts, sorted) that the bnobt calls free: the headers,
 * btrees, chunks and log (exts: sp->used), or the files' and CoW staging
 * blocks the rmapbt maps (exts: sp->rmap).
 */
static void check_free_used(struct od *od, const struct xref_space *sp,
			    const struct xref_exts *exts, size_t *said)
{
	const struct xref_exts *free = &sp->bno;
	char who[96], what[40];

	for (size_t i = 0; i < exts->n && *said < XREF_MAX_SAID; i++) {
		const struct xref_ext *u = &exts->v[i];
		const struct xref_ext *f;
		uint32_t s, e;

		/* The rmapbt's AG metadata: known from the walks (check_used_twice). */
		if (exts != &sp->used && u->owner >= XFS_RMAP_OWN_MIN && u->owner != XFS_RMAP_OWN_COW)
			continue;
		f = free_overlap(free, u->start, u->start + u->len);
		if (!f)
			continue;
		s = f->start > u->start ? f->start : u->start;
		e = f->start + f->len < u->start + u->len ? f->start + f->len : u->start + u->len;
		owner_name(who, sizeof(who), u);
		if (e - s == 1)
			snprintf(what, sizeof(what), "block %u is", s);
		else
			snprintf(what, sizeof(what), "blocks %u-%u are", s, e - 1);
		od_problem_id(od, CHECK_XFS_SPACE, owner_ino(u), true,
			      "%s free in the bnobt (free extent %u-%u) but used by %s", what,
			      f->start, f->start + f->len - 1, who);
		(*said)++;
	}
}

/* The headers, btrees, chunks, AGFL and log (sorted) never share a block. */
static void check_used_twice(struct od *od, const struct xref_exts *used)
{
	char a[96], b[96];
	size_t said = 0;
	uint64_t end = 0;
	size_t last = 0;

	for (size_t i = 0; i < used->n && said < XREF_MAX_SAID; i++) {
		const struct xref_ext *u = &used->v[i];

		/* The same block twice in one btree: bt_walk() says so. */
		if (i && u->start < end && (cmp_ext(u, &used->v[last]) ||
					    u->what != used->v[last].what)) {
			owner_name(a, sizeof(a), &used->v[last]);
			owner_name(b, sizeof(b), u);
			od_problem_id(od, CHECK_XFS_SPACE, 0, true,
				      "block %u is used by %s and by %s", u->start, a, b);
			said++;
		}
		if (u->start + (uint64_t)u->len > end) {
			end = u->start + (uint64_t)u->len;
			last = i;
		}
	}
}

/* With the rmapbt: blocks neither free nor mapped (both sorted by block). */
static void check_unowned(struct od *od, uint32_t length, const struct xref_space *sp)
{
	size_t i = 0, j = 0, said = 0;
	uint64_t at = 0;	/* every block before it is free or mapped */

	while (at < length && said < XREF_MAX_SAID) {
		const struct xref_ext *f = i < sp->bno.n ? &sp->bno.v[i] : NULL;
		const struct xref_ext *r = j < sp->rmap.n ? &sp->rmap.v[j] : NULL;
		const struct xref_ext *e = f && (!r || f->start <= r->start) ? f : r;

		if (!e || e->start > at) {
			uint64_t to = e ? e->start : length;

			od_problem_id(od, CHECK_XFS_SPACE, 0, true,
				      "blocks %llu-%llu are neither free nor in the rmapbt",
				      (unsigned long long)at, (unsigned long long)to - 1);
			said++;
			at = to;
			continue;
		}
		if (e->start + (uint64_t)e->len > at)
			at = e->start + (uint64_t)e->len;
		if (e == f)
			i++;
		else
			j++;
	}
}

/* What is used but in no btree: the AG headers and, in its AG, the log. */
static void add_static(struct od *od, uint32_t agno, struct xref_space *sp)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;
	/* Superblock, AGF, AGI, AGFL: a sector each, at the start of the AG. */
	uint32_t hdr = (4 * od->sect + od->bsize - 1) / od->bsize;

	xref_used_add(sp, 0, hdr, XFS_RMAP_OWN_FS, "the AG headers");
	if (g->logstart && g->logstart >> od->agblklog == agno)
		xref_used_add(sp, (uint32_t)(g->logstart & ((1ULL << od->agblklog) - 1)),
			      g->logblocks, XFS_RMAP_OWN_LOG, "the log");
}

void xref_space_check(struct od *od, uint32_t agno, uint32_t length, struct xref_space *sp)
{
	size_t said = 0;

	add_static(od, agno, sp);
	sort_items(sp->used.v, sp->used.n, sizeof(*sp->used.v), cmp_ext);
	check_used_twice(od, &sp->used);
	if (!sp->bno_ok)
		return;
	if (sp->cnt_ok)
		check_bno_cnt(od, sp);
	check_free_used(od, sp, &sp->used, &said);
	if (!sp->rmap_ok)
		return;
	check_free_used(od, sp, &sp->rmap, &said);
	check_unowned(od, length, sp);
}

/* ------------------------------------------------------- reference counts */

/* An rmapbt record of a file's data fork: a reference to its blocks. */
static bool is_data_ref(const struct xref_ext *e)
{
	return e->owner < XFS_RMAP_OWN_MIN &&
	       !(e->offset & (XFS_RMAP_OFF_ATTR_FORK | XFS_RMAP_OFF_BMBT_BLOCK));
}

static bool is_cow_ref(const struct xref_ext *e)
{
	return e->owner == XFS_RMAP_OWN_COW;
}

/* One end of a picked rmapbt record, for the sweep. */
struct ref_edge {
	uint32_t at;
	int delta;
};

static int cmp_edge(const void *a, const void *b)
{
	const struct ref_edge *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/* Append the run [start, end) of count n, merged with an equal run before it. */
static void runs_add(struct xref_exts *out, uint32_t start, uint32_t end, uint64_t n)
{
	struct xref_ext *last = out->n ? &out->v[out->n - 1] : NULL;

	if (last && last->owner == n && last->start + last->len == start)
		last->len += end - start;
	else
		xref_exts_add(out, start, end - start, n, 0);
}

/*
 * How many of the rmapbt records that pick() takes cover each block: the
 * runs of at least min, in out (sorted, disjoint, count in owner).  The
 * edges are sorted with qsort: O(n log n) in the AG's rmapbt records.
 */
static void coverage(const struct xref_exts *rmap, bool (*pick)(const struct xref_ext *),
		     uint64_t min, struct xref_exts *out)
{
	struct ref_edge *e = xmalloc(2 * rmap->n * sizeof(*e) + 1);
	size_t n = 0;
	uint64_t count = 0;

	for (size_t i = 0; i < rmap->n; i++)
		if (pick(&rmap->v[i])) {
			e[n++] = (struct ref_edge){ rmap->v[i].start, 1 };
			e[n++] = (struct ref_edge){ rmap->v[i].start + rmap->v[i].len, -1 };
		}
	sort_items(e, n, sizeof(*e), cmp_edge);
	for (size_t i = 0; i < n; i++) {
		count += e[i].delta;
		if (i + 1 < n && e[i + 1].at > e[i].at && count >= min)
			runs_add(out, e[i].at, e[i + 1].at, count);
	}
	free(e);
}

/*
 * The refcountbt's records as runs: sorted, and a run of records with the
 * same count end to end as one (how the kernel splits them is no concern).
 */
static void runs_of(const struct xref_exts *recs, struct xref_exts *out)
{
	struct xref_ext *v = xmalloc(recs->n * sizeof(*v) + 1);

	if (recs->n) {		/* recs->v may be NULL when empty: no memcpy(NULL) */
		memcpy(v, recs->v, recs->n * sizeof(*v));
		sort_items(v, recs->n, sizeof(*v), cmp_ext);
	}
	for (size_t i = 0; i < recs->n; i++)
		runs_add(out, v[i].start, v[i].start + v[i].len, v[i].owner);
	free(v);
}

/* The count run i..n of runs gives block at (0: none); *i moves on. */
static uint64_t run_value(const struct xref_exts *runs, size_t *i, uint32_t at)
{
	while (*i < runs->n && runs->v[*i].start + (uint64_t)runs->v[*i].len <= at)
		(*i)++;
	return *i < runs->n && runs->v[*i].start <= at ? runs->v[*i].owner : 0;
}

/*
 * Where want (the owners' references) and have (the refcountbt) differ --
 * but a count below min needs no record -- at most max ranges in d,
 * adjacent ones with the same two counts merged.  A range that skip (may
 * be NULL) covers is not judged: counted in *skipped, never in d.
 */
static size_t runs_diff(const struct xref_exts *want, const struct xref_exts *have,
			const struct xref_exts *skip, uint64_t min, struct ref_diff *d,
			size_t max, size_t *skipped)
{
	const struct xref_exts *lists[] = { want, have, skip };
	size_t nb = 0, nd = 0, iw = 0, ih = 0, is = 0, all = want->n + have->n;
	uint32_t *b;

	if (skip)
		all += skip->n;
	b = xmalloc(2 * all * sizeof(*b) + 1);
	for (size_t l = 0; l < 3; l++)
		for (size_t i = 0; lists[l] && i < lists[l]->n; i++) {
			b[nb++] = lists[l]->v[i].start;
			b[nb++] = lists[l]->v[i].start + lists[l]->v[i].len;
		}
	sort_items(b, nb, sizeof(*b), u32_cmp);
	for (size_t i = 0; i + 1 < nb; i++) {
		uint64_t w, h;

		if (b[i + 1] == b[i])
			continue;
		w = run_value(want, &iw, b[i]);
		h = run_value(have, &ih, b[i]);
		if (w == h || (!h && w < min))
			continue;
		if (skip && run_value(skip, &is, b[i])) {
			(*skipped)++;
			continue;
		}
		if (nd && d[nd - 1].end == b[i] && d[nd - 1].want == w && d[nd - 1].have == h) {
			d[nd - 1].end = b[i + 1];
			continue;
		}
		if (nd == max)
			break;
		d[nd++] = (struct ref_diff){ b[i], b[i + 1], w, h };
	}
	free(b);
	return nd;
}

size_t xref_refcount_diff(const struct xref_exts *refs, const struct xref_exts *refc,
			  const struct xref_exts *unknown, struct ref_diff *d, size_t max,
			  size_t *skipped)
{
	struct xref_exts want = { 0 }, have = { 0 }, skip = { 0 };
	size_t n;

	/* Two references or more: a shared extent, which has a record. */
	coverage(refs, is_data_ref, 1, &want);
	runs_of(refc, &have);
	if (unknown)
		coverage(unknown, is_data_ref, 1, &skip);
	n = runs_diff(&want, &have, unknown ? &skip : NULL, 2, d, max, skipped);
	free(want.v);
	free(have.v);
	free(skip.v);
	return n;
}

/*
 * The inodes that map a block of [start, end), listed in sb: the data
 * forks' references, or whoever else holds a block that has none.
 */
static uint64_t ref_owners(const struct xref_exts *rmap, uint32_t start, uint32_t end,
			   struct strbuf *sb)
{
	/* Enough to find the file; the rest are counted. */
	enum { SHOWN = 4 };
	uint64_t first = 0, shown[SHOWN];
	size_t n = 0, more = 0;

	for (size_t i = 0; i < rmap->n; i++) {
		const struct xref_ext *e = &rmap->v[i];
		bool dup = false;

		if (e->owner >= XFS_RMAP_OWN_MIN || e->start >= end || e->start + (uint64_t)e->len <= start)
			continue;
		for (size_t k = 0; k < n; k++)
			dup |= shown[k] == e->owner;
		if (dup)
			continue;
		if (n == SHOWN) {
			more++;
			continue;
		}
		shown[n++] = e->owner;
		strbuf_addf(sb, "%s%llu", n > 1 ? ", " : "", (unsigned long long)e->owner);
		if (!first)
			first = e->owner;
	}
	if (more)
		strbuf_addf(sb, " and %zu more", more);
	return first;
}

static void say_range(char *buf, size_t len, uint32_t start, uint32_t end)
{
	if (end - start == 1)
		snprintf(buf, len, "block %u", start);
	else
		snprintf(buf, len, "blocks %u-%u", start, end - 1);
}

/* A shared range whose refcountbt count is not the rmapbt's. */
static void say_shared(struct od *od, const struct xref_exts *rmap, const struct ref_diff *d)
{
	struct strbuf who = STRBUF_INIT, found = STRBUF_INIT;
	char what[40];
	uint64_t ino = ref_owners(rmap, d->start, d->end, &who);

	say_range(what, sizeof(what), d->start, d->end);
	if (d->have)
		strbuf_addf(&found, "the refcountbt counts %llu", (unsigned long long)d->have);
	else
		strbuf_addf(&found, "the refcountbt has no record");
	od_problem_id(od, CHECK_XFS_REFCOUNT, ino, true,
		      "%s: the rmapbt gives %llu data fork reference%s (%s%s), %s", what,
		      (unsigned long long)d->want, d->want == 1 ? "" : "s",
		      !who.len ? "no file" : strchr(who.buf, ',') ? "inodes " : "inode ",
		      who.len ? who.buf : "", found.buf);
	strbuf_release(&who);
	strbuf_release(&found);
}

/* A range CoW staging in one btree but not the other. */
static void say_cow(struct od *od, const struct ref_diff *d)
{
	char what[40];

	say_range(what, sizeof(what), d->start, d->end);
	if (d->want && d->have)	/* two rmapbt records over one staging block */
		od_problem_id(od, CHECK_XFS_REFCOUNT, 0, true,
			      "%s: CoW staging %llu times in the rmapbt", what,
			      (unsigned long long)d->want);
	else
		od_problem_id(od, CHECK_XFS_REFCOUNT, 0, true,
			      "%s: CoW staging in the %s, not in the %s", what,
			      d->want ? "rmapbt" : "refcountbt",
			      d->want ? "refcountbt" : "rmapbt");
}

void xref_refcount_check(struct od *od, struct xref_space *sp)
{
	struct xref_exts want = { 0 }, have = { 0 };
	struct ref_diff d[XREF_MAX_SAID];
	size_t n, skipped = 0;

	n = xref_refcount_diff(&sp->rmap, &sp->refc, NULL, d, XREF_MAX_SAID, &skipped);
	for (size_t i = 0; i < n; i++)
		say_shared(od, &sp->rmap, &d[i]);
	coverage(&sp->rmap, is_cow_ref, 1, &want);
	runs_of(&sp->cow, &have);
	n = runs_diff(&want, &have, NULL, 1, d, XREF_MAX_SAID, &skipped);
	for (size_t i = 0; i < n; i++)
		say_cow(od, &d[i]);
	free(want.v);
	free(have.v);
}

/* ---------------------------------------------------- secondary superblocks */

/*
 * The fields a secondary superblock shares with the primary, but for the
 * bits the kernel sets in the primary alone: the first extended attribute
 * or quota mount sets XFS_SB_VERSION_ATTRBIT, _QUOTABIT and ATTR2BIT in
 * the primary (xfs_repair -n does not mind either).
 */
#define SB_FIELD(f, ign) \
	{ #f, offsetof(struct xfs_dsb, f), sizeof(((struct xfs_dsb *)0)->f), ign }
static const struct {
	const char *name;
	size_t off, len;
	uint64_t ignore;
} sb_fields[] = {
	SB_FIELD(sb_dblocks, 0), SB_FIELD(sb_rblocks, 0), SB_FIELD(sb_rextents, 0),
	SB_FIELD(sb_logstart, 0), SB_FIELD(sb_rextsize, 0), SB_FIELD(sb_rbmblocks, 0),
	SB_FIELD(sb_logblocks, 0),
	SB_FIELD(sb_versionnum, XFS_SB_VERSION_ATTRBIT | XFS_SB_VERSION_QUOTABIT),
	SB_FIELD(sb_sectsize, 0), SB_FIELD(sb_inodesize, 0), SB_FIELD(sb_inopblock, 0),
	SB_FIELD(sb_blocklog, 0), SB_FIELD(sb_sectlog, 0), SB_FIELD(sb_inodelog, 0),
	SB_FIELD(sb_inopblog, 0), SB_FIELD(sb_agblklog, 0), SB_FIELD(sb_rextslog, 0),
	SB_FIELD(sb_inoalignmt, 0), SB_FIELD(sb_dirblklog, 0), SB_FIELD(sb_logsectlog, 0),
	SB_FIELD(sb_logsectsize, 0), SB_FIELD(sb_logsunit, 0),
	SB_FIELD(sb_features2, XFS_SB_VERSION2_ATTR2BIT), SB_FIELD(sb_features_compat, 0),
	SB_FIELD(sb_features_ro_compat, 0), SB_FIELD(sb_features_incompat, 0),
	SB_FIELD(sb_spino_align, 0),
	/*
	 * Not compared: the counters (only the primary's are kept), the
	 * quota inodes and flags, sb_unit/sb_width (mount options change the
	 * primary's), sb_features_log_incompat (the primary's, at run time),
	 * the label (xfs_admin -L writes every copy, the kernel only the
	 * primary), the UUIDs (the metadata blocks' UUID is checked).
	 */
};

static uint64_t sb_value(const struct xfs_dsb *sb, size_t i)
{
	const uint8_t *p = (const uint8_t *)sb + sb_fields[i].off;
	uint64_t v = 0;

	/* Big-endian fields of 1, 2, 4 or 8 bytes. */
	for (size_t k = 0; k < sb_fields[i].len; k++)
		v = v << 8 | p[k];
	return v & ~sb_fields[i].ignore;
}

void xref_sb(struct od *od, const struct xfs_dsb *sb)
{
	for (size_t i = 0; i < sizeof(sb_fields) / sizeof(sb_fields[0]); i++) {
		uint64_t mine = sb_value(sb, i), primary = sb_value(&od->primary, i);

		if (mine != primary)
			od_problem_id(od, CHECK_XFS_SB_SECONDARY, 0, true,
				      "superblock %s is 0x%llx, the primary's 0x%llx",
				      sb_fields[i].name, (unsigned long long)mine,
				      (unsigned long long)primary);
	}
}
