/*
 * xfs_btree: every block of every per-AG btree read from the block device,
 * the AG headers' counters against the records, and the inode chunks the
 * inode btree gives.
 *
 * Each btree (bnobt, cntbt, rmapbt, refcountbt from the AGF, inobt and
 * finobt from the AGI) is walked level by level from its root: the blocks
 * of a level are the child pointers of the level above, in order, so the
 * sibling pointers of each block must name its neighbours in that list
 * (NULLAGBLOCK at both ends).  Each block says what it is (magic, CRC, the
 * metadata UUID, AG number as owner, its own disk address, its level, one
 * less than its parent's); the first key of a block must be its parent's
 * key for it (and for the rmapbt, whose keys are ranges, the largest high
 * key its parent's high key); keys and records increase strictly across a
 * whole level; records lie within the AG.  Levels strictly decrease, so a
 * walk cannot loop; a block reached twice is a problem, and no walk visits
 * more blocks than the AG has.
 *
 * Then the sums: AGF free blocks against the bnobt's and the cntbt's
 * records, the longest free extent, the btree block counters, the AGFL;
 * AGI inode counts against the inobt (sparse chunks counted without their
 * holes), the finobt against the inobt's records that have free inodes.
 * A sum is compared only when the walks it depends on found nothing, and
 * such a problem, like every problem between two blocks (sibling
 * pointers, a parent's keys, order across blocks, a block or inode that
 * is not what its pointer or record says: the kernel may have freed it
 * and reused it, for file data even, which is written at once, before it
 * wrote the pointer's block back), is "cross": see xfs_ondisk.c.
 *
 * Last, every inode of every chunk the inobt gives (free ones too, v5
 * writes them at allocation) is read, each run of chunk without holes in
 * one O_DIRECT read (64 inodes of 512 bytes: 32 KiB), 32 such reads a
 * batch with up to 16 in flight, and checked: magic, version 3, CRC, its
 * own number, the UUID.
 *
 * Indexes of records, keys and pointers count from 1, as xfs_db's do.
 *
 * Memory: the pointers of one level (48 bytes each), the numbers of the
 * blocks visited (4 bytes each), and the inobt and finobt records (16
 * bytes each: 100,000 inodes make about 1,600).
 */
#include "backends/xfs/xfs_ondisk.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "report/checks.h"
#include "lib/ioengine.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

/* Deeper than any btree of an AG of at most 2^31 blocks can grow. */
#define BT_MAX_LEVELS 9
/* The largest key: the rmapbt's packed startblock, owner and offset. */
#define BT_KEY_MAX 20
#define BT_HDR XFS_BTREE_SBLOCK_CRC_LEN
/* Inodes per sparse-chunk holemask bit. */
#define HOLE_INODES XFS_INODES_PER_HOLEMASK_BIT

enum { BT_BNO, BT_CNT, BT_RMAP, BT_REFC, BT_INO, BT_FINO, BT_NR };

struct bt_walk;

struct bt_ops {
	const char *name;
	uint32_t magic;
	size_t rec_len, key_len;
	bool overlapping;	/* node keys are (low, high) pairs: the rmapbt */
	/* The key of a record and, for an overlapping btree, its high key. */
	void (*rec_keys)(const uint8_t *rec, uint8_t *lo, uint8_t *hi);
	int (*cmp)(const uint8_t *a, const uint8_t *b);
	/* Check one leaf record and add it to the sums. */
	void (*rec)(struct bt_walk *w, uint32_t agbno, unsigned idx, const uint8_t *rec);
};

/* A block of the level below and its parent's keys for it. */
struct bt_ptr {
	uint32_t agbno;
	uint32_t parent;	/* the block that points here, OD_BLK_HEADERS for the root */
	uint8_t lo[BT_KEY_MAX], hi[BT_KEY_MAX];
};

struct ino_recs {
	struct ino_rec *v;
	size_t n, alloc;
};

/* What the records of one AG add up to. */
struct ag_sums {
	uint64_t bno_free, cnt_free;
	uint32_t cnt_longest;
	uint64_t ino_count, ino_free;
	struct ino_recs inobt, finobt;
	uint32_t blocks[BT_NR];
	bool clean[BT_NR];	/* the walk found nothing */
	struct xref_space sp;	/* for xfs_xref.c */
};

struct bt_walk {
	struct od *od;
	const struct bt_ops *ops;
	int type;
	uint32_t agno, length;
	uint64_t base;
	struct ag_sums *sums;
	bool bad;
	uint8_t prev[BT_KEY_MAX];	/* the last key of the level so far */
	bool have_prev;
	uint64_t prev_end;		/* the end of the last record (bnobt, refcountbt) */
	uint32_t *seen;
	size_t nseen, aseen;
	const uint8_t *blk;		/* the block bt_header() read */
	/* the block in hand, its parent, and its neighbours on the level with theirs */
	uint32_t here[2], left[2], right[2];	/* NULLAGBLOCK: none */
	struct bt_ahead *ahead;		/* a level's blocks read together, or NULL */
};

/*
 * A level's blocks are read BT_AHEAD at a time with many reads in flight
 * (ioengine.h), not one synchronous read each: the rmapbt's leaves are
 * most of phase 2's btree reads (343 on a kernel tree).  A level of one
 * block is read by itself, as every block is with
 * FSCRUB_DEBUG_NO_CHUNKBATCH=1.
 */
#define BT_AHEAD 64
#define BT_AHEAD_MIN 2

struct bt_ahead {
	uint8_t *data;			/* BT_AHEAD blocks */
	struct io_range range[BT_AHEAD];
	int res[BT_AHEAD];
	size_t slot;			/* bytes per block */
	size_t n;			/* blocks read, 0: none (read each) */
	size_t at;			/* the next block's slot */
};

static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

/* A problem of this btree; blk: the n blocks it is between alone (see bt_between()). */
static void bt_vproblem(struct bt_walk *w, bool cross, const uint32_t *blk, unsigned n,
			const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

static void bt_vproblem(struct bt_walk *w, bool cross, const uint32_t *blk, unsigned n,
			const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_vaddf(&sb, fmt, ap);
	if (n)
		od_problem_between(w->od, blk, n, "%s %s", w->ops->name, sb.buf);
	else
		od_problem(w->od, 0, cross, "%s %s", w->ops->name, sb.buf);
	strbuf_release(&sb);
	w->bad = true;
}

/*
 * cross: the problem is between blocks (see struct od_problem), judged
 * by every block of the AG.
 */
static void bt_problem(struct bt_walk *w, bool cross, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void bt_problem(struct bt_walk *w, bool cross, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bt_vproblem(w, cross, NULL, 0, fmt, ap);
	va_end(ap);
}

/*
 * A problem between blocks alone: the n of blk (NULLAGBLOCK ones left
 * out).  The level's order, which siblings and the order across blocks
 * are held against, comes from the parents: they are among the blocks.
 */
static void bt_between(struct bt_walk *w, const uint32_t *blk, unsigned n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void bt_between(struct bt_walk *w, const uint32_t *blk, unsigned n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	bt_vproblem(w, true, blk, n, fmt, ap);
	va_end(ap);
}

/* A record's extent [start, start + len) must lie within the AG. */
static bool extent_ok(struct bt_walk *w, uint32_t agbno, unsigned idx, uint32_t start,
		      uint32_t len)
{
	if (len && start < w->length && len <= w->length - start)
		return true;
	bt_problem(w, false, "block %u: record %u (blocks %u, length %u) is outside the AG", agbno,
		   idx, start, len);
	return false;
}

static void no_overlap(struct bt_walk *w, uint32_t agbno, unsigned idx, uint64_t start,
		       uint32_t len)
{
	/* The first against the block before it: between blocks. */
	if (w->prev_end > start && idx == 1)
		bt_between(w, (const uint32_t[]){ agbno, w->here[1], w->left[0], w->left[1] }, 4,
			   "block %u: record %u overlaps the one before it", agbno, idx);
	else if (w->prev_end > start)
		bt_problem(w, false, "block %u: record %u overlaps the one before it", agbno, idx);
	w->prev_end = start + len;
}

/* bnobt and cntbt: (startblock, blockcount), the key is the record. */
static void alloc_keys(const uint8_t *rec, uint8_t *lo, uint8_t *hi)
{
	(void)hi;
	memcpy(lo, rec, 8);
}

static int bno_cmp(const uint8_t *a, const uint8_t *b)
{
	return cmp_u64(od_get32(a), od_get32(b));
}

static int cnt_cmp(const uint8_t *a, const uint8_t *b)
{
	int c = cmp_u64(od_get32(a + 4), od_get32(b + 4));

	return c ? c : bno_cmp(a, b);
}

static void bno_rec(struct bt_walk *w, uint32_t agbno, unsigned idx, const uint8_t *rec)
{
	uint32_t start = od_get32(rec), len = od_get32(rec + 4);

	if (extent_ok(w, agbno, idx, start, len)) {
		no_overlap(w, agbno, idx, start, len);
		xref_exts_add(&w->sums->sp.bno, start, len, 0, 0);
	}
	w->sums->bno_free += len;
}

static void cnt_rec(struct bt_walk *w, uint32_t agbno, unsigned idx, const uint8_t *rec)
{
	uint32_t len = od_get32(rec + 4);

	if (extent_ok(w, agbno, idx, od_get32(rec), len))
		xref_exts_add(&w->sums->sp.cnt, od_get32(rec), len, 0, 0);
	w->sums->cnt_free += len;
	if (len > w->sums->cnt_longest)
		w->sums->cnt_longest = len;
}

/* inobt and finobt: the key is ir_startino. */
static void ino_keys(const uint8_t *rec, uint8_t *lo, uint8_t *hi)
{
	(void)hi;
	memcpy(lo, rec, 4);
}

/* Inodes of a chunk that are not in a sparse hole. */
static uint64_t ino_allocmask(uint16_t holemask)
{
	uint64_t mask = 0;

	for (unsigned i = 0; i < XFS_INOBT_HOLEMASK_BITS; i++)
		if (!(holemask & (1u << i)))
			mask |= ((1ULL << HOLE_INODES) - 1) << (i * HOLE_INODES);
	return mask;
}

static void ino_rec(struct bt_walk *w, uint32_t agbno, unsigned idx, const uint8_t *rec)
{
	struct od *od = w->od;
	const struct xfs_inobt_rec *r = (const void *)rec;
	struct ino_recs *set = w->type == BT_INO ? &w->sums->inobt : &w->sums->finobt;
	struct ino_rec ir = { .startino = be32toh(r->ir_startino), .free = be64toh(r->ir_free) };
	uint64_t alloc;
	unsigned last;

	if (od->sparse) {
		ir.holemask = be16toh(r->ir_u.sp.ir_holemask);
		ir.count = r->ir_u.sp.ir_count;
		ir.freecount = r->ir_u.sp.ir_freecount;
	} else {
		ir.count = XFS_INODES_PER_CHUNK;
		ir.freecount = be32toh(r->ir_u.f.ir_freecount) > XFS_INODES_PER_CHUNK ?
			       0xff : be32toh(r->ir_u.f.ir_freecount);
	}
	alloc = ino_allocmask(ir.holemask);
	last = alloc ? 63 - (unsigned)__builtin_clzll(alloc) : 0;
	if (ir.startino % XFS_INODES_PER_CHUNK || !alloc ||
	    ((uint64_t)(ir.startino + last) >> od->inopblog) >= w->length) {
		bt_problem(w, false, "block %u: record %u (inode %u, holes 0x%04x) is outside the AG",
			   agbno, idx, ir.startino, ir.holemask);
		return;
	}
	if (ir.count != __builtin_popcountll(alloc) ||
	    ir.freecount != __builtin_popcountll(ir.free & alloc)) {
		bt_problem(w, false, "block %u: record %u (inode %u) counts %u inodes, %u free; its "
			   "masks say %d, %d", agbno, idx, ir.startino, ir.count, ir.freecount,
			   __builtin_popcountll(alloc), __builtin_popcountll(ir.free & alloc));
		return;
	}
	if (w->type == BT_INO) {
		w->sums->ino_count += ir.count;
		w->sums->ino_free += ir.freecount;
	}
	if (set->n == set->alloc) {
		set->alloc = set->alloc ? 2 * set->alloc : 64;
		set->v = xrealloc(set->v, set->alloc * sizeof(*set->v));
	}
	set->v[set->n++] = ir;
}

/* rmapbt: keys (startblock, owner, offset), packed; records overlap. */
static void rmap_keys(const uint8_t *rec, uint8_t *lo, uint8_t *hi)
{
	uint32_t start = od_get32(rec), adj = od_get32(rec + 4) - 1;
	uint64_t owner = od_get64(rec + 8), off = od_get64(rec + 16);

	memcpy(lo, rec, 4);
	memcpy(lo + 4, rec + 8, 16);
	put32(hi, start + adj);
	put64(hi + 4, owner);
	if (XFS_RMAP_NON_INODE_OWNER(owner) || XFS_RMAP_IS_BMBT_BLOCK(off))
		adj = 0;
	put64(hi + 12, off + adj);
}

/* As the kernel orders them: the offset's flag bits do not count. */
static int rmap_cmp(const uint8_t *a, const uint8_t *b)
{
	int c = cmp_u64(od_get32(a), od_get32(b));

	if (!c)
		c = cmp_u64(od_get64(a + 4), od_get64(b + 4));
	return c ? c : cmp_u64(XFS_RMAP_OFF(od_get64(a + 12)), XFS_RMAP_OFF(od_get64(b + 12)));
}

static void rmap_rec(struct bt_walk *w, uint32_t agbno, unsigned idx, const uint8_t *rec)
{
	if (extent_ok(w, agbno, idx, od_get32(rec), od_get32(rec + 4)))
		xref_exts_add(&w->sums->sp.rmap, od_get32(rec), od_get32(rec + 4), od_get64(rec + 8),
			      od_get64(rec + 16));
}

/* refcountbt: key rc_startblock, CoW staging extents (top bit) last. */
static void refc_keys(const uint8_t *rec, uint8_t *lo, uint8_t *hi)
{
	(void)hi;
	memcpy(lo, rec, 4);
}

static void refc_rec(struct bt_walk *w, uint32_t agbno, unsigned idx, const uint8_t *rec)
{
	uint32_t raw = od_get32(rec), len = od_get32(rec + 4), refcount = od_get32(rec + 8);
	bool cow = raw & XFS_REFC_COWFLAG;

	if (!extent_ok(w, agbno, idx, raw & ~XFS_REFC_COWFLAG, len))
		return;
	no_overlap(w, agbno, idx, raw, len);
	if (cow ? refcount != 1 : refcount < 2)
		bt_problem(w, false, "block %u: record %u (%sblocks %u, length %u) has refcount %u",
			   agbno, idx, cow ? "CoW staging " : "", raw & ~XFS_REFC_COWFLAG, len,
			   refcount);
	else
		xref_exts_add(cow ? &w->sums->sp.cow : &w->sums->sp.refc, raw & ~XFS_REFC_COWFLAG,
			      len, refcount, 0);
}

/* Who owns a block of each btree, as the rmapbt says it. */
static const uint64_t bt_owner[BT_NR] = {
	[BT_BNO] = XFS_RMAP_OWN_AG, [BT_CNT] = XFS_RMAP_OWN_AG, [BT_RMAP] = XFS_RMAP_OWN_AG,
	[BT_REFC] = XFS_RMAP_OWN_REFC, [BT_INO] = XFS_RMAP_OWN_INOBT,
	[BT_FINO] = XFS_RMAP_OWN_INOBT,
};

/* What a block of each btree is, for xfs_xref.c's messages. */
static const char *const bt_used_name[BT_NR] = {
	[BT_BNO] = "the bnobt", [BT_CNT] = "the cntbt", [BT_RMAP] = "the rmapbt",
	[BT_REFC] = "the refcountbt", [BT_INO] = "the inobt", [BT_FINO] = "the finobt",
};

static const struct bt_ops bt_types[BT_NR] = {
	[BT_BNO] = { "bnobt", XFS_ABTB_CRC_MAGIC, 8, 8, false, alloc_keys, bno_cmp, bno_rec },
	[BT_CNT] = { "cntbt", XFS_ABTC_CRC_MAGIC, 8, 8, false, alloc_keys, cnt_cmp, cnt_rec },
	[BT_RMAP] = { "rmapbt", XFS_RMAP_CRC_MAGIC, sizeof(struct xfs_rmap_rec),
		      sizeof(struct xfs_rmap_key), true, rmap_keys, rmap_cmp, rmap_rec },
	[BT_REFC] = { "refcountbt", XFS_REFC_CRC_MAGIC, sizeof(struct xfs_refcount_rec), 4,
		      false, refc_keys, bno_cmp, refc_rec },
	[BT_INO] = { "inobt", XFS_IBT_CRC_MAGIC, sizeof(struct xfs_inobt_rec), 4, false,
		     ino_keys, bno_cmp, ino_rec },
	[BT_FINO] = { "finobt", XFS_FIBT_CRC_MAGIC, sizeof(struct xfs_inobt_rec), 4, false,
		      ino_keys, bno_cmp, ino_rec },
};

/* Block agbno's header (parent points to it): what it says about itself. */
static bool bt_header(struct bt_walk *w, uint32_t agbno, uint32_t parent, const char *root,
		      unsigned level, unsigned maxrecs)
{
	struct od *od = w->od;
	struct bt_ahead *a = w->ahead;
	uint64_t off = w->base + (uint64_t)agbno * od->bsize;
	const struct xfs_btree_block *b;
	unsigned numrecs;
	int ret;

	if (a && a->at < a->n) {
		w->blk = a->data + a->at * od->bsize;
		ret = a->res[a->at++];
	} else {
		w->blk = od->buf;
		ret = od_pread(od, od->buf, off, od->bsize);
	}
	b = (const void *)w->blk;
	od->blocks++;
	if (ret < 0) {
		bt_problem(w, false, "%sblock %u cannot be read: %s", root, agbno, strerror(-ret));
		return false;
	}
	numrecs = be16toh(b->bb_numrecs);
	if (be32toh(b->bb_magic) != w->ops->magic)
		/* A pointer the kernel has not written back yet may lead to a block
		 * freed and reused, for data even: between blocks. */
		bt_between(w, (const uint32_t[]){ agbno, parent }, 2, "%sblock %u has magic 0x%08x",
			   root, agbno, be32toh(b->bb_magic));
	else if (!od_crc_ok(w->blk, od->bsize, XFS_BTREE_SBLOCK_CRC_OFF))
		bt_problem(w, false, "%sblock %u fails its CRC", root, agbno);
	else if (be64toh(b->bb_u.s.bb_blkno) != off / 512)
		bt_problem(w, false, "%sblock %u says it is at disk address %llu", root, agbno,
			   (unsigned long long)be64toh(b->bb_u.s.bb_blkno));
	else if (be32toh(b->bb_u.s.bb_owner) != w->agno)
		bt_problem(w, false, "%sblock %u belongs to AG %u", root, agbno,
			   be32toh(b->bb_u.s.bb_owner));
	else if (memcmp(&b->bb_u.s.bb_uuid, od->meta_uuid, 16))
		bt_problem(w, false, "%sblock %u has another filesystem's UUID", root, agbno);
	else if (be16toh(b->bb_level) != level)
		bt_between(w, (const uint32_t[]){ agbno, parent }, 2, "%sblock %u is at level %u, not %u",
			   root, agbno, be16toh(b->bb_level), level);
	else if (numrecs > maxrecs || (!numrecs && (level || !*root)))
		bt_problem(w, false, "%sblock %u has %u records (at most %u)", root, agbno, numrecs,
			   maxrecs);
	else
		return true;
	return false;
}

static void bt_siblings(struct bt_walk *w, uint32_t agbno, uint32_t left, uint32_t right)
{
	const struct xfs_btree_block *b = (const void *)w->blk;
	uint32_t l = be32toh(b->bb_u.s.bb_leftsib), r = be32toh(b->bb_u.s.bb_rightsib);

	if (l != left || r != right)
		bt_between(w, (const uint32_t[]){ agbno, w->here[1], w->left[0], w->left[1],
						  w->right[0], w->right[1] }, 6,
			   "block %u: siblings %d and %d, the level's order says %d and %d",
			   agbno, (int32_t)l, (int32_t)r, (int32_t)left, (int32_t)right);
}

/*
 * The keys of one block (key i at keys + i * stride, its high key kl
 * further): strictly after the level's last, the first and (overlapping)
 * the largest high key as the parent said.
 */
static void bt_keys(struct bt_walk *w, const struct bt_ptr *p, bool root, const char *what,
		    const uint8_t *keys, size_t stride, unsigned n)
{
	const struct bt_ops *ops = w->ops;
	size_t kl = ops->key_len;
	const uint8_t *hi = NULL;

	for (unsigned i = 0; i < n; i++) {
		const uint8_t *k = keys + i * stride;

		if (w->have_prev && ops->cmp(w->prev, k) >= 0) {
			/* The first against the block before it: between blocks. */
			if (!i)
				bt_between(w, (const uint32_t[]){ p->agbno, p->parent, w->left[0],
								  w->left[1] }, 4,
					   "block %u: %s out of order at index %u", p->agbno,
					   what, i + 1);
			else
				bt_problem(w, false, "block %u: %s out of order at index %u",
					   p->agbno, what, i + 1);
			break;
		}
		memcpy(w->prev, k, kl);
		w->have_prev = true;
	}
	if (n)
		memcpy(w->prev, keys + (n - 1) * stride, kl);
	if (root || !n)
		return;
	if (ops->cmp(keys, p->lo))
		bt_between(w, (const uint32_t[]){ p->agbno, p->parent }, 2,
			   "block %u: first key differs from its parent's", p->agbno);
	if (!ops->overlapping)
		return;
	for (unsigned i = 0; i < n; i++)
		if (!hi || ops->cmp(keys + i * stride + kl, hi) > 0)
			hi = keys + i * stride + kl;
	if (ops->cmp(hi, p->hi))
		bt_between(w, (const uint32_t[]){ p->agbno, p->parent }, 2,
			   "block %u: high key differs from its parent's", p->agbno);
}

/* One block of a level: header, siblings, keys or records, children. */
static void bt_block(struct bt_walk *w, const struct bt_ptr *p, const struct bt_ptr *lp,
		     const struct bt_ptr *rp, unsigned level, bool root, struct bt_ptr **next,
		     size_t *nn, size_t *an)
{
	uint32_t left = lp ? lp->agbno : NULLAGBLOCK, right = rp ? rp->agbno : NULLAGBLOCK;

	struct od *od = w->od;
	const struct bt_ops *ops = w->ops;
	size_t kstride = ops->key_len * (ops->overlapping ? 2 : 1);
	unsigned maxrecs = (od->bsize - BT_HDR) / (level ? kstride + 4 : ops->rec_len);
	const uint8_t *data;
	unsigned n;

	if (w->nseen == w->aseen) {
		w->aseen = w->aseen ? 2 * w->aseen : 64;
		w->seen = xrealloc(w->seen, w->aseen * sizeof(*w->seen));
	}
	w->seen[w->nseen++] = p->agbno;
	w->sums->blocks[w->type]++;
	xref_used_add(&w->sums->sp, p->agbno, 1, bt_owner[w->type],
		      bt_used_name[w->type]);
	w->here[0] = p->agbno;
	w->here[1] = p->parent;
	w->left[0] = left;
	w->left[1] = lp ? lp->parent : NULLAGBLOCK;
	w->right[0] = right;
	w->right[1] = rp ? rp->parent : NULLAGBLOCK;
	if (!bt_header(w, p->agbno, p->parent, root ? "root " : "", level, maxrecs))
		return;
	bt_siblings(w, p->agbno, left, right);
	data = w->blk + BT_HDR;
	n = be16toh(((const struct xfs_btree_block *)w->blk)->bb_numrecs);
	if (!level) {
		uint8_t *keys = xmalloc((size_t)n * 2 * BT_KEY_MAX + 1);

		for (unsigned i = 0; i < n; i++) {
			const uint8_t *rec = data + (size_t)i * ops->rec_len;

			ops->rec_keys(rec, keys + i * 2 * BT_KEY_MAX,
				      keys + i * 2 * BT_KEY_MAX + ops->key_len);
		}
		/* Records are checked before bt_keys() moves w->prev on. */
		for (unsigned i = 0; i < n; i++)
			ops->rec(w, p->agbno, i + 1, data + (size_t)i * ops->rec_len);
		bt_keys(w, p, root, "records", keys, 2 * BT_KEY_MAX, n);
		free(keys);
		return;
	}
	bt_keys(w, p, root, "keys", data, kstride, n);
	for (unsigned i = 0; i < n; i++) {
		uint32_t child = od_get32(data + (size_t)maxrecs * kstride + (size_t)i * 4);
		struct bt_ptr *c;

		if (!child || child >= w->length) {
			bt_problem(w, false, "block %u: pointer %u to block %u is outside the AG",
				   p->agbno, i + 1, child);
			continue;
		}
		if (*nn == *an) {
			*an = *an ? 2 * *an : 64;
			*next = xrealloc(*next, *an * sizeof(**next));
		}
		c = &(*next)[(*nn)++];
		c->agbno = child;
		c->parent = p->agbno;
		memcpy(c->lo, data + (size_t)i * kstride, ops->key_len);
		if (ops->overlapping)
			memcpy(c->hi, data + (size_t)i * kstride + ops->key_len, ops->key_len);
	}
}

static char *bt_ahead_slot(void *arg, size_t i)
{
	struct bt_ahead *a = arg;

	return (char *)a->data + i * a->slot;
}

/* Read the next n blocks of the level (at most BT_AHEAD) for bt_header() to take in order. */
static void bt_read_ahead(struct bt_walk *w, const struct bt_ptr *p, size_t n)
{
	struct od *od = w->od;
	struct bt_ahead *a = w->ahead;

	if (!a) {
		if (getenv("FSCRUB_DEBUG_NO_CHUNKBATCH"))
			return;
		a = w->ahead = xcalloc(1, sizeof(*a));
		a->slot = od->bsize;
		if (posix_memalign((void **)&a->data, OD_READ_ALIGN, BT_AHEAD * a->slot))
			a->data = NULL;
	}
	a->n = a->at = 0;
	if (!a->data)
		return;
	/* Every pointer on a level is inside the AG: bt_block() and bt_walk() keep the others out. */
	for (size_t i = 0; i < n; i++)
		a->range[i] = (struct io_range){ w->base + (uint64_t)p[i].agbno * od->bsize,
						 od->bsize };
	atomic_fetch_add(&od->xs->bt_ahead_blocks, n);
	atomic_fetch_add(&od->xs->bt_ahead_batches, 1);
	od_read_ranges(od, a->range, n, od->bsize, bt_ahead_slot, a, a->res, false);
	a->n = n;
}

/* Walk btree type from root (levels deep): every block, level by level. */
static void bt_walk(struct od *od, struct ag_sums *sums, int type, uint32_t agno,
		    uint64_t base, uint32_t length, uint32_t root, uint32_t levels)
{
	struct bt_walk w = { .od = od, .ops = &bt_types[type], .type = type, .agno = agno,
			     .length = length, .base = base, .sums = sums };
	struct bt_ptr *cur;
	size_t n = 1;

	if (!root || root >= length || !levels || levels > BT_MAX_LEVELS) {
		bt_problem(&w, false, "root %u (%u levels) is outside the AG", root, levels);
		return;
	}
	cur = xcalloc(1, sizeof(*cur));
	cur[0].agbno = root;
	cur[0].parent = OD_BLK_HEADERS;
	for (unsigned level = levels; level-- > 0 && n;) {
		struct bt_ptr *next = NULL;
		size_t nn = 0, an = 0;

		w.have_prev = false;
		w.prev_end = 0;
		for (size_t i = 0; i < n && w.nseen < length; i++) {
			if (i % BT_AHEAD == 0 && n >= BT_AHEAD_MIN)
				bt_read_ahead(&w, cur + i, n - i < BT_AHEAD ? n - i : BT_AHEAD);
			bt_block(&w, &cur[i], i ? &cur[i - 1] : NULL, i + 1 < n ? &cur[i + 1] : NULL,
				 level, level + 1 == levels, &next, &nn, &an);
		}
		free(cur);
		cur = next;
		n = nn;
		if (w.nseen >= length && n) {
			bt_problem(&w, true, "has more blocks than the AG");
			break;
		}
	}
	free(cur);
	if (w.ahead)
		free(w.ahead->data);
	free(w.ahead);
	sort_items(w.seen, w.nseen, sizeof(*w.seen), u32_cmp);
	for (size_t i = 1; i < w.nseen; i++)
		if (w.seen[i] == w.seen[i - 1] && (i < 2 || w.seen[i - 2] != w.seen[i]))
			bt_problem(&w, true, "block %u is reached more than once", w.seen[i]);
	free(w.seen);
	sums->clean[type] = !w.bad;
}

/* A header's counter against what the records add up to. */
static void counter(struct od *od, const char *hdr, const char *field, uint64_t said,
		    const char *what, uint64_t found)
{
	if (said != found)
		od_problem(od, 0, true, "%s %s %llu, %s %llu", hdr, field,
			   (unsigned long long)said, what, (unsigned long long)found);
}

static void check_agf_sums(struct od *od, const struct ag_sums *s, const struct xfs_agf *agf)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;
	bool rmap = g->flags & XFS_FSOP_GEOM_FLAGS_RMAPBT;

	if (s->clean[BT_BNO])
		counter(od, "AGF", "freeblks", be32toh(agf->agf_freeblks),
			"bnobt records add up to", s->bno_free);
	if (s->clean[BT_CNT]) {
		counter(od, "AGF", "freeblks", be32toh(agf->agf_freeblks),
			"cntbt records add up to", s->cnt_free);
		counter(od, "AGF", "longest", be32toh(agf->agf_longest),
			"the largest cntbt record is", s->cnt_longest);
	}
	if (rmap && s->clean[BT_RMAP])
		counter(od, "AGF", "rmap_blocks", be32toh(agf->agf_rmap_blocks),
			"rmapbt blocks", s->blocks[BT_RMAP]);
	if ((g->flags & XFS_FSOP_GEOM_FLAGS_REFLINK) && s->clean[BT_REFC])
		counter(od, "AGF", "refcount_blocks", be32toh(agf->agf_refcount_blocks),
			"refcountbt blocks", s->blocks[BT_REFC]);
	/* agf_btreeblks: the free space btrees' and rmapbt's blocks but their roots. */
	if (s->clean[BT_BNO] && s->clean[BT_CNT] && (!rmap || s->clean[BT_RMAP]))
		counter(od, "AGF", "btreeblks", be32toh(agf->agf_btreeblks),
			"bnobt, cntbt and rmapbt blocks but the roots",
			s->blocks[BT_BNO] + s->blocks[BT_CNT] - 2 +
			(rmap ? s->blocks[BT_RMAP] - 1 : 0));
}

/* The AGFL: agf_flcount slots from agf_flfirst to agf_fllast, in the AG. */
static void check_agfl(struct od *od, uint64_t base, uint32_t length, const struct xfs_agf *agf,
		       struct xref_space *sp)
{
	uint32_t slots = (od->sect - sizeof(struct xfs_agfl)) / 4;
	uint32_t first = be32toh(agf->agf_flfirst), last = be32toh(agf->agf_fllast);
	uint32_t count = be32toh(agf->agf_flcount);
	const uint8_t *bno = od->buf + sizeof(struct xfs_agfl);
	int ret;

	if (first >= slots || last >= slots || count > slots) {
		od_problem(od, 0, false, "AGF free list first %u, last %u, count %u: the AGFL "
			   "has %u slots", first, last, count, slots);
		return;
	}
	if (!count)
		return;
	if ((last + slots - first) % slots + 1 != count) {
		od_problem(od, 0, true, "AGF free list first %u, last %u, count %u do not agree",
			   first, last, count);
		return;
	}
	ret = od_pread(od, od->buf, base + 3 * (uint64_t)od->sect, od->sect);
	if (ret < 0) {
		od_problem(od, 0, false, "AGFL cannot be read: %s", strerror(-ret));
		return;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint32_t slot = (first + i) % slots, b = od_get32(bno + 4 * slot);

		if (!b || b >= length) {
			od_problem(od, 0, true, "AGFL slot %u, block %u, is outside the AG",
				   slot, b);
			break;
		}
		xref_used_add(sp, b, 1, XFS_RMAP_OWN_AG, "the AGFL");
	}
}

static bool ino_rec_eq(const struct ino_rec *a, const struct ino_rec *b)
{
	return a->startino == b->startino && a->holemask == b->holemask &&
	       a->count == b->count && a->freecount == b->freecount && a->free == b->free;
}

/* The finobt holds exactly the inobt's records that have a free inode. */
static void check_finobt(struct od *od, const struct ag_sums *s)
{
	const struct ino_recs *in = &s->inobt, *fi = &s->finobt;
	size_t j = 0;

	for (size_t i = 0; i < in->n; i++) {
		if (!in->v[i].freecount)
			continue;
		if (j < fi->n && ino_rec_eq(&in->v[i], &fi->v[j])) {
			j++;
			continue;
		}
		od_problem(od, 0, true, "finobt %s the inobt's record for inode %u (%u free)",
			   j < fi->n && fi->v[j].startino == in->v[i].startino ?
			   "differs from" : "lacks", in->v[i].startino, in->v[i].freecount);
		return;
	}
	if (j < fi->n)
		od_problem(od, 0, true, "finobt has a record for inode %u the inobt has not "
			   "or with no free inode", fi->v[j].startino);
}

static void check_agi_sums(struct od *od, const struct ag_sums *s, const struct xfs_agi *agi)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;
	bool fino = g->flags & XFS_FSOP_GEOM_FLAGS_FINOBT;

	if (s->clean[BT_INO]) {
		counter(od, "AGI", "count", be32toh(agi->agi_count),
			"inobt records count", s->ino_count);
		counter(od, "AGI", "freecount", be32toh(agi->agi_freecount),
			"inobt records count free", s->ino_free);
		if (fino && s->clean[BT_FINO])
			check_finobt(od, s);
	}
	if (!(g->flags & XFS_FSOP_GEOM_FLAGS_INOBTCNT))
		return;
	if (s->clean[BT_INO])
		counter(od, "AGI", "iblocks", be32toh(agi->agi_iblocks), "inobt blocks",
			s->blocks[BT_INO]);
	if (fino && s->clean[BT_FINO])
		counter(od, "AGI", "fblocks", be32toh(agi->agi_fblocks), "finobt blocks",
			s->blocks[BT_FINO]);
}

/* True if the inode's core is what it says it is. */
static bool check_inode(struct od *od, const uint8_t *p, uint64_t ino)
{
	const struct xfs_dinode *d = (const void *)p;

	od->inodes++;
	if (be16toh(d->di_magic) != XFS_DINODE_MAGIC)
		/* The chunk may be freed and reused, the inobt not yet written. */
		od_problem(od, ino, true, "inode %llu has magic 0x%04x",
			   (unsigned long long)ino, be16toh(d->di_magic));
	else if (d->di_version != 3)
		od_problem(od, ino, false, "inode %llu has version %u", (unsigned long long)ino,
			   d->di_version);
	else if (!od_crc_ok(p, od->isize, XFS_DINODE_CRC_OFF))
		od_problem(od, ino, false, "inode %llu fails its CRC", (unsigned long long)ino);
	else if (be64toh(d->di_ino) != ino)
		od_problem(od, ino, false, "inode %llu says it is inode %llu",
			   (unsigned long long)ino, (unsigned long long)be64toh(d->di_ino));
	else if (memcmp(&d->di_uuid, od->meta_uuid, 16))
		od_problem(od, ino, false, "inode %llu has another filesystem's UUID",
			   (unsigned long long)ino);
	else
		return true;
	return false;
}

/*
 * The inode chunks are read a batch at a time with many reads in flight
 * (ioengine.h), not one synchronous read after the other: 1311 reads of
 * 32 KiB on a kernel tree, each waiting out the device's latency.  A run
 * of a chunk between sparse holes is one read, as before; the batch's
 * runs are then checked in inobt order from memory.
 * FSCRUB_DEBUG_NO_CHUNKBATCH=1 reads each run when it is checked.
 */
/* Runs per batch: 32 chunks of 64 inodes of 512 bytes, 1 MiB. */
#define CHUNK_BATCH 32

/* One read: inodes [i, j) of a chunk between holes. */
struct chunk_run {
	const struct ino_rec *r;
	unsigned i, j;
	uint64_t off, start, end;	/* inode i's byte; the sector-aligned read */
};

struct chunk_batch {
	struct chunk_run run[CHUNK_BATCH];
	struct io_range range[CHUNK_BATCH];
	int res[CHUNK_BATCH];
	size_t n, slot;			/* runs; bytes of buffer per run */
	uint8_t *data;			/* CHUNK_BATCH slots */
};

static uint64_t chunk_byte(const struct od *od, uint64_t base, const struct ino_rec *r)
{
	uint32_t inopb_mask = (1u << od->inopblog) - 1;

	return base + (uint64_t)(r->startino >> od->inopblog) * od->bsize +
	       (uint64_t)(r->startino & inopb_mask) * od->isize;
}

/* Check the inodes of one run, read into p (or not: ret < 0). */
static void check_run(struct od *od, uint32_t agno, const struct chunk_run *c, const uint8_t *p,
		      int ret, struct xref_space *sp)
{
	const struct ino_rec *r = c->r;
	uint64_t ino0 = ((uint64_t)agno << (od->agblklog + od->inopblog)) | r->startino;

	xref_used_add(sp, (r->startino + c->i * HOLE_INODES) >> od->inopblog,
		      ((r->startino + c->j * HOLE_INODES - 1) >> od->inopblog) -
		      ((r->startino + c->i * HOLE_INODES) >> od->inopblog) + 1,
		      XFS_RMAP_OWN_INODES, "an inode chunk");
	if (ret < 0) {
		od_problem(od, ino0, false, "inodes %llu-%llu cannot be read: %s",
			   (unsigned long long)(ino0 + c->i * HOLE_INODES),
			   (unsigned long long)(ino0 + c->j * HOLE_INODES - 1), strerror(-ret));
		return;
	}
	for (unsigned k = c->i * HOLE_INODES; k < c->j * HOLE_INODES; k++) {
		const uint8_t *q = p + (c->off - c->start) + (size_t)(k - c->i * HOLE_INODES) *
				   od->isize;

		if (!check_inode(od, q, ino0 + k))
			continue;
		xref_inode_alloc(od, (const void *)q, ino0 + k, (r->free >> k) & 1);
		xref_inode_blocks(od, (const void *)q, ino0 + k);
		xfs_ownermap_note(od, (const void *)q, ino0 + k);
		xfs_dirindex_check(od, (const void *)q, ino0 + k);
	}
}

/* Run i is read straight into its slot of the batch, checked after the batch. */
static char *chunk_slot(void *arg, size_t i)
{
	struct chunk_batch *b = arg;

	return (char *)b->data + i * b->slot;
}

/* Read the batch's runs (many in flight), check them in order, empty it. */
static void chunk_batch_flush(struct od *od, uint32_t agno, struct chunk_batch *b,
			      struct xref_space *sp)
{
	for (size_t i = 0; i < b->n; i++)
		b->range[i] = (struct io_range){ b->run[i].start, b->run[i].end - b->run[i].start };
	if (!b->n)
		return;
	atomic_fetch_add(&od->xs->chunk_reads, b->n);
	atomic_fetch_add(&od->xs->chunk_batches, 1);
	od_read_ranges(od, b->range, b->n, b->slot, chunk_slot, b, b->res, false);
	for (size_t i = 0; i < b->n && !scrub_should_stop(od->ctx); i++)
		check_run(od, agno, &b->run[i], b->data + i * b->slot, b->res[i], sp);
	b->n = 0;
}

/* Every inode of the chunk, each run between sparse holes one read of the batch. */
static void check_chunk(struct od *od, uint32_t agno, uint64_t base, const struct ino_rec *r,
			struct xref_space *sp, struct chunk_batch *b)
{
	uint64_t chunk = chunk_byte(od, base, r);

	for (unsigned i = 0; i < XFS_INOBT_HOLEMASK_BITS;) {
		unsigned j = i;
		struct chunk_run c = { .r = r, .i = i };

		if (r->holemask & (1u << i)) {
			i++;
			continue;
		}
		while (j < XFS_INOBT_HOLEMASK_BITS && !(r->holemask & (1u << j)))
			j++;
		c.j = j;
		c.off = chunk + (uint64_t)i * HOLE_INODES * od->isize;
		c.start = c.off & ~(uint64_t)(od->sect - 1);
		c.end = (chunk + (uint64_t)j * HOLE_INODES * od->isize + od->sect - 1) &
			~(uint64_t)(od->sect - 1);
		if (!b->data) {
			atomic_fetch_add(&od->xs->chunk_reads, 1);
			check_run(od, agno, &c, od->ibuf, od_pread(od, od->ibuf, c.start,
								   c.end - c.start), sp);
		} else {
			if (b->n == CHUNK_BATCH)
				chunk_batch_flush(od, agno, b, sp);
			b->run[b->n++] = c;
		}
		i = j;
	}
}

/* An inode core in use, sound, of this number and filesystem (no problem said). */
static bool inode_in_use(const struct od *od, const uint8_t *p, uint64_t ino)
{
	const struct xfs_dinode *d = (const void *)p;

	return be16toh(d->di_magic) == XFS_DINODE_MAGIC && d->di_version == 3 &&
	       od_crc_ok(p, od->isize, XFS_DINODE_CRC_OFF) && be64toh(d->di_ino) == ino &&
	       !memcmp(&d->di_uuid, od->meta_uuid, 16) && be16toh(d->di_mode);
}

/* Holes [i, j) of record r (in holemask bits): inodes in use there are said. */
static void check_hole(struct od *od, uint32_t agno, uint64_t base, const struct ino_rec *r,
		       unsigned i, unsigned j, const struct xref_space *sp)
{
	uint32_t first = r->startino + i * HOLE_INODES, last = r->startino + j * HOLE_INODES - 1;
	uint64_t ino0 = ((uint64_t)agno << (od->agblklog + od->inopblog)) | r->startino;
	uint64_t off = chunk_byte(od, base, r) + (uint64_t)i * HOLE_INODES * od->isize;
	uint64_t start = off & ~(uint64_t)(od->sect - 1);
	uint64_t end = (off + (uint64_t)(j - i) * HOLE_INODES * od->isize + od->sect - 1) &
		       ~(uint64_t)(od->sect - 1);

	if (!xref_hole_owned_by_inodes(sp, first >> od->inopblog,
				       (last >> od->inopblog) - (first >> od->inopblog) + 1) ||
	    od_pread(od, od->ibuf, start, end - start) < 0)
		return;
	for (unsigned k = i * HOLE_INODES; k < j * HOLE_INODES; k++) {
		const uint8_t *q = od->ibuf + (off - start) + (size_t)(k - i * HOLE_INODES) * od->isize;

		if (inode_in_use(od, q, ino0 + k))
			od_problem_id(od, CHECK_XFS_INODE_ALLOC, ino0 + k, true,
				      "inode %llu is in use (mode 0%o) in a sparse hole of its inobt "
				      "record (inode %u, holes 0x%04x)", (unsigned long long)(ino0 + k),
				      be16toh(((const struct xfs_dinode *)q)->di_mode), r->startino,
				      r->holemask);
	}
}

/*
 * The sparse holes of record r: with the rmapbt, a hole whose blocks are
 * still an inode chunk's and hold inodes in use hides them from the inobt.
 */
static void check_holes(struct od *od, uint32_t agno, uint64_t base, const struct ino_rec *r,
			const struct xref_space *sp)
{
	for (unsigned i = 0; i < XFS_INOBT_HOLEMASK_BITS;) {
		unsigned j = i;

		if (!(r->holemask & (1u << i))) {
			i++;
			continue;
		}
		while (j < XFS_INOBT_HOLEMASK_BITS && (r->holemask & (1u << j)))
			j++;
		check_hole(od, agno, base, r, i, j, sp);
		i = j;
	}
}

/* Every chunk the inobt gives, batch by batch. */
static void check_chunks(struct od *od, uint32_t agno, uint64_t base, const struct ino_recs *recs,
			 struct xref_space *sp)
{
	struct chunk_batch *b = xcalloc(1, sizeof(*b));

	b->slot = (od->ibuf_len + OD_READ_ALIGN - 1) & ~(size_t)(OD_READ_ALIGN - 1);
	if (!getenv("FSCRUB_DEBUG_NO_CHUNKBATCH") &&
	    posix_memalign((void **)&b->data, OD_READ_ALIGN, CHUNK_BATCH * b->slot))
		b->data = NULL;
	for (size_t i = 0; i < recs->n && !scrub_should_stop(od->ctx); i++)
		check_chunk(od, agno, base, &recs->v[i], sp, b);
	chunk_batch_flush(od, agno, b, sp);
	xfs_dirindex_flush(od);
	for (size_t i = 0; i < recs->n && !scrub_should_stop(od->ctx); i++)
		if (recs->v[i].holemask)
			check_holes(od, agno, base, &recs->v[i], sp);
	free(b->data);
	free(b);
}

void xfs_btrees_check(struct od *od, uint32_t agno, uint64_t base, uint32_t length,
		      const struct xfs_agf *agf, const struct xfs_agi *agi)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;
	struct ag_sums s = { 0 };

	s.sp.have_rmap = g->flags & XFS_FSOP_GEOM_FLAGS_RMAPBT;
	if (agf) {
		bt_walk(od, &s, BT_BNO, agno, base, length,
			be32toh(agf->agf_roots[XFS_BTNUM_BNOi]),
			be32toh(agf->agf_levels[XFS_BTNUM_BNOi]));
		bt_walk(od, &s, BT_CNT, agno, base, length,
			be32toh(agf->agf_roots[XFS_BTNUM_CNTi]),
			be32toh(agf->agf_levels[XFS_BTNUM_CNTi]));
		if (g->flags & XFS_FSOP_GEOM_FLAGS_RMAPBT)
			bt_walk(od, &s, BT_RMAP, agno, base, length,
				be32toh(agf->agf_roots[XFS_BTNUM_RMAPi]),
				be32toh(agf->agf_levels[XFS_BTNUM_RMAPi]));
		if (g->flags & XFS_FSOP_GEOM_FLAGS_REFLINK)
			bt_walk(od, &s, BT_REFC, agno, base, length,
				be32toh(agf->agf_refcount_root), be32toh(agf->agf_refcount_level));
		check_agf_sums(od, &s, agf);
		check_agfl(od, base, length, agf, &s.sp);
		s.sp.bno_ok = s.clean[BT_BNO];
		s.sp.cnt_ok = s.clean[BT_CNT];
		s.sp.rmap_ok = s.sp.have_rmap && s.clean[BT_RMAP];
		s.sp.refc_ok = (g->flags & XFS_FSOP_GEOM_FLAGS_REFLINK) && s.clean[BT_REFC];
		/* Both btrees walked clean: the refcounts against the owners. */
		if (s.sp.rmap_ok && s.sp.refc_ok)
			xref_refcount_check(od, &s.sp);
	}
	if (agi) {
		bt_walk(od, &s, BT_INO, agno, base, length, be32toh(agi->agi_root),
			be32toh(agi->agi_level));
		if (g->flags & XFS_FSOP_GEOM_FLAGS_FINOBT)
			bt_walk(od, &s, BT_FINO, agno, base, length,
				be32toh(agi->agi_free_root), be32toh(agi->agi_free_level));
		check_agi_sums(od, &s, agi);
		check_chunks(od, agno, base, &s.inobt, &s.sp);
		if (s.clean[BT_INO])
			xref_unlinked(od, agno, base, length, agi, s.inobt.v, s.inobt.n);
	}
	/* Every AG header was read and the inode btrees walked: all is used. */
	if (agf && agi && s.clean[BT_INO] && (!s.sp.have_rmap || s.clean[BT_RMAP]))
		xref_space_check(od, agno, length, &s.sp);
	xref_space_release(&s.sp);
	free(s.inobt.v);
	free(s.finobt.v);
}

bool xfs_refcountbt_read(struct od *od, uint32_t agno, uint64_t base, uint32_t length,
			 const struct xfs_agf *agf, struct xref_space *sp)
{
	struct ag_sums s = { 0 };

	bt_walk(od, &s, BT_REFC, agno, base, length, be32toh(agf->agf_refcount_root),
		be32toh(agf->agf_refcount_level));
	sp->used = s.sp.used;	/* the btree's blocks, for the log to be asked of */
	sp->refc = s.sp.refc;
	sp->cow = s.sp.cow;
	sp->refc_ok = s.clean[BT_REFC];
	return sp->refc_ok;
}
