/*
 * xfs_ondisk: the AG headers read from the block device, and the rule by
 * which what is read from the disk of a mounted XFS becomes an error, for
 * kernels without online scrub (and as a second opinion with it).
 *
 * After syncfs(), every AG's superblock, AGF, AGI and AGFL are read with
 * O_DIRECT (the page cache of the block device is not the filesystem's)
 * and checked for what a header says about itself: magic number, CRC32c,
 * the filesystem's metadata UUID, its AG number, version and length; then
 * xfs_btree.c walks the AG's btrees and inode chunks.  Only v5 (crc)
 * filesystems.
 *
 * The live rule.  A mounted XFS writes metadata back lazily: syncfs only
 * forces the log, and a block the kernel keeps relogging may stay old on
 * the disk for as long as it is busy, while file data goes to the disk at
 * once (into blocks an old btree block on the disk may still call free,
 * or an inode chunk).  So the disk of a busy AG is torn between blocks.
 * A look at an AG gives a list of problems, each either about one block
 * (bad CRC, records out of order inside a block...) or between blocks
 * ("cross": counters against btrees, keys, siblings, a block or inode
 * that is not what its pointer says).  An AG with problems is looked at
 * again after another syncfs and a pause:
 *   - a problem the second look has not, word for word, is "changed
 *     while being checked" (an info);
 *   - one about a single block is an error;
 *   - one between blocks is judged by the log (xfs_logview.c): after
 *     syncfs, a block no log item between the tail and the head names is
 *     on the disk as the kernel has it.  If the log names none of the
 *     AG's blocks, a third look follows at once, and the problem is an
 *     error if it is still there and the log still names none of them;
 *     if the log names some, it is an info.  Other AGs may be as busy as
 *     they like.
 * Where the log cannot be read (an external log, a log too big or not
 * understood), the AG's quiet is guessed from outside as before the log
 * was read: the kernel's counters for it (XFS_IOC_AG_GEOMETRY) did not
 * move, the AGF and AGI LSNs on the disk did not change, and the disk's
 * AGI counts are the kernel's.  Then a problem between blocks of a quiet
 * AG waits: after all AGs, one wait for the log worker
 * (fs.xfs.xfssyncd_centisecs, 30 s by default; it pushes everything
 * logged to the disk), and a third look; an error only if the problem is
 * still there and the AG still quiet.  (The guess can be fooled: the
 * kernel moves blocks between the free space btrees and the AGFL of an AG
 * it merely considers for an allocation, and none of those counters move.)
 * What this cannot tell: on-disk metadata that is old but self-consistent
 * (it is checked against itself, not against the kernel's memory).
 */
#include "backends/xfs/xfs_ondisk.h"
#include "backends/xfs/xfs_logview.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "report/checks.h"
#include "lib/crc32c.h"
#include "lib/ioengine.h"
#include "scan/context.h"
#include "report/report.h"
#include "lib/strbuf.h"

/* O_DIRECT wants buffers aligned to the device's logical block size. */
#define OD_ALIGN 4096
/* Between the two looks: enough for writeback of what the log pushed. */
#define OD_PAUSE_NS 200000000L
/* The log worker's period is capped at this for the wait (centiseconds). */
#define OD_MAX_WAIT_CS 6000
/* After the log worker's push: time for its writes to reach the disk. */
#define OD_PUSH_MS 2000

/* XFS's checksum: CRC32c of the block with its CRC field taken as zero. */
bool od_crc_ok(const uint8_t *buf, size_t len, size_t off)
{
	static const uint8_t zero[4];
	uint32_t crc = crc32c(0xffffffff, buf, off);
	uint32_t stored;

	crc = crc32c(crc, zero, 4);
	crc = crc32c(crc, buf + off + 4, len - off - 4);
	memcpy(&stored, buf + off, 4);
	return le32toh(stored) == ~crc;
}

int od_pread(struct od *od, void *buf, uint64_t off, size_t len)
{
	ssize_t n = pread(od->fd, buf, len, (off_t)off);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

struct od_reads {
	const struct io_range *range;
	char *(*buf)(void *arg, size_t i);
	void *arg;
	int *res;
};

static void od_read_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct od_reads *j = arg;

	(void)buf;		/* range i's own (od_read_buf()) */
	j->res[r - j->range] = res < 0 ? (int)res : (uint64_t)res == r->len ? 0 : -EIO;
}

static char *od_read_buf(void *arg, size_t i)
{
	struct od_reads *j = arg;

	return j->buf(j->arg, i);
}

void od_read_ranges(struct od *od, const struct io_range *range, size_t n, size_t max_len,
		    char *(*buf)(void *arg, size_t i), void *arg, int *res, bool single)
{
	struct od_reads j = { range, buf, arg, res };
	struct io_job job = {
		.fd = od->fd, .ranges = range, .nr_ranges = n,
		.depth = od->ctx->opt.background ? 1 : OD_READ_DEPTH, .max_len = max_len,
		.align = OD_READ_ALIGN, .no_uring = getenv("FSCRUB_DEBUG_NO_URING") != NULL,
		.done = od_read_done, .buffer = od_read_buf, .arg = &j,
	};

	for (size_t i = 0; i < n; i++)
		res[i] = -ECANCELED;
	if (single || ioengine_run(&job) < 0)
		for (size_t i = 0; i < n; i++)	/* no engine: one after the other */
			res[i] = od_pread(od, buf(arg, i), range[i].off, range[i].len);
}

/* Add blocks blk[0..n) to p: NULLAGBLOCK ones and repeats left out. */
static void problem_add_blocks(struct od_problem *p, const uint32_t *blk, unsigned n)
{
	for (unsigned i = 0; i < n && p->nblk < OD_MAX_BLKS; i++) {
		bool seen = blk[i] == NULLAGBLOCK;

		for (unsigned j = 0; j < p->nblk && !seen; j++)
			seen = p->blk[j] == blk[i];
		if (!seen)
			p->blk[p->nblk++] = blk[i];
	}
}

static void od_vproblem(struct od *od, const char *check, uint64_t ino, bool cross,
			const uint32_t *blk, unsigned n, const char *fmt, va_list ap)
{
	struct strbuf sb = STRBUF_INIT;

	if (od->pn == OD_MAX_PROBLEMS) {
		od->pdropped++;
		return;
	}
	strbuf_vaddf(&sb, fmt, ap);
	if (od->pn == od->palloc) {
		od->palloc = od->palloc ? 2 * od->palloc : 8;
		od->pv = xrealloc(od->pv, od->palloc * sizeof(*od->pv));
	}
	od->pv[od->pn] = (struct od_problem){
		.msg = strbuf_detach(&sb), .check = check, .ino = ino, .cross = cross,
	};
	problem_add_blocks(&od->pv[od->pn++], blk, n);
}

void od_problem(struct od *od, uint64_t ino, bool cross, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	od_vproblem(od, NULL, ino, cross, NULL, 0, fmt, ap);
	va_end(ap);
}

void od_problem_between(struct od *od, const uint32_t *blk, unsigned n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	od_vproblem(od, NULL, 0, true, blk, n, fmt, ap);
	va_end(ap);
}

void od_problem_id(struct od *od, const char *check, uint64_t ino, bool cross,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	od_vproblem(od, check, ino, cross, NULL, 0, fmt, ap);
	va_end(ap);
}

/* Forget this look's problems. */
static void od_forget(struct od *od)
{
	for (size_t i = 0; i < od->pn; i++)
		free(od->pv[i].msg);
	od->pn = od->pdropped = 0;
}

/* A sector-sized AG header: read, magic, CRC, UUID, AG number. */
static bool check_header(struct od *od, uint64_t off, const char *name, uint32_t magic,
			 size_t crc_off, const void *uuid, const void *seqno_be, uint32_t agno)
{
	uint32_t m, seq;
	int ret = od_pread(od, od->buf, off, od->sect);

	if (ret < 0) {
		od_problem(od, 0, false, "%s cannot be read: %s", name, strerror(-ret));
		return false;
	}
	memcpy(&m, od->buf, 4);
	memcpy(&seq, seqno_be, 4);
	if (be32toh(m) != magic)
		od_problem(od, 0, false, "%s has magic 0x%08x", name, be32toh(m));
	else if (!od_crc_ok(od->buf, od->sect, crc_off))
		od_problem(od, 0, false, "%s fails its CRC", name);
	else if (memcmp(uuid, od->meta_uuid, 16))
		od_problem(od, 0, false, "%s has another filesystem's UUID", name);
	else if (be32toh(seq) != agno)
		od_problem(od, 0, false, "%s says it is AG %u's", name, be32toh(seq));
	else
		return true;
	return false;
}

static void check_sb(struct od *od, uint64_t base)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;
	const struct xfs_dsb *sb = (const void *)od->buf;
	int ret = od_pread(od, od->buf, base, od->sect);

	if (ret < 0)
		od_problem(od, 0, false, "superblock cannot be read: %s", strerror(-ret));
	else if (be32toh(sb->sb_magicnum) != XFS_SB_MAGIC)
		od_problem(od, 0, false, "superblock has magic 0x%08x", be32toh(sb->sb_magicnum));
	else if (!od_crc_ok(od->buf, od->sect, offsetof(struct xfs_dsb, sb_crc)))
		od_problem(od, 0, false, "superblock fails its CRC");
	else if (memcmp(&sb->sb_uuid, od->uuid, 16))
		od_problem(od, 0, false, "superblock has another filesystem's UUID");
	else if (be32toh(sb->sb_blocksize) != od->bsize ||
		 be32toh(sb->sb_agblocks) != g->agblocks ||
		 be32toh(sb->sb_agcount) != g->agcount)
		od_problem(od, 0, false, "superblock geometry (block size %u, %u AGs of %u "
			   "blocks) differs from the primary's", be32toh(sb->sb_blocksize),
			   be32toh(sb->sb_agcount), be32toh(sb->sb_agblocks));
	else if (base)
		xref_sb(od, sb);
}

/* AG agno's first block on the device and its length in blocks. */
static uint64_t ag_where(const struct od *od, uint32_t agno, uint32_t *length)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;

	*length = od->xs->ags[agno].ag_length;
	if (!*length)	/* no AG geometry: all but the last AG are full */
		*length = agno + 1 < g->agcount ? g->agblocks :
			  (uint32_t)(g->datablocks - (uint64_t)agno * g->agblocks);
	return (uint64_t)agno * g->agblocks * od->bsize;
}

/* AG agno's AGF into *agf: false (a problem of the look) if it is not sound. */
static bool read_agf(struct od *od, uint32_t agno, uint64_t base, uint32_t length,
		     struct xfs_agf *agf)
{
	bool ok = check_header(od, base + od->sect, "AGF", XFS_AGF_MAGIC, XFS_AGF_CRC_OFF,
			       od->buf + offsetof(struct xfs_agf, agf_uuid),
			       od->buf + offsetof(struct xfs_agf, agf_seqno), agno);

	memcpy(agf, od->buf, sizeof(*agf));
	if (!ok)
		return false;
	od->agf_lsn = be64toh(agf->agf_lsn);
	if (be32toh(agf->agf_versionnum) != XFS_AGF_VERSION ||
	    be32toh(agf->agf_length) != length || be32toh(agf->agf_freeblks) > length) {
		od_problem(od, 0, false, "AGF version, length or free block count is impossible");
		return false;
	}
	return true;
}

void od_check_ag(struct od *od, uint32_t agno)
{
	uint32_t length;
	uint64_t base = ag_where(od, agno, &length);
	struct xfs_agf agf;
	struct xfs_agi agi;
	bool agf_ok, agi_ok;

	od->agf_lsn = od->agi_lsn = 0;
	check_sb(od, base);
	agf_ok = read_agf(od, agno, base, length, &agf);

	agi_ok = check_header(od, base + 2 * od->sect, "AGI", XFS_AGI_MAGIC, XFS_AGI_CRC_OFF,
			      od->buf + offsetof(struct xfs_agi, agi_uuid),
			      od->buf + offsetof(struct xfs_agi, agi_seqno), agno);
	memcpy(&agi, od->buf, sizeof(agi));
	if (agi_ok) {
		od->agi_lsn = be64toh(agi.agi_lsn);
		od->agi_count = be32toh(agi.agi_count);
		od->agi_freecount = be32toh(agi.agi_freecount);
		if (be32toh(agi.agi_versionnum) != XFS_AGI_VERSION ||
		    be32toh(agi.agi_length) != length ||
		    be32toh(agi.agi_freecount) > be32toh(agi.agi_count)) {
			od_problem(od, 0, false,
				   "AGI version, length or free inode count is impossible");
			agi_ok = false;
		}
	}

	check_header(od, base + 3 * od->sect, "AGFL", XFS_AGFL_MAGIC, XFS_AGFL_CRC_OFF,
		     od->buf + offsetof(struct xfs_agfl, agfl_uuid),
		     od->buf + offsetof(struct xfs_agfl, agfl_seqno), agno);

	xfs_btrees_check(od, agno, base, length, agf_ok ? &agf : NULL, agi_ok ? &agi : NULL);
}

int od_read_primary(struct od *od)
{
	const struct xfs_dsb *sb = (const void *)od->buf;
	int ret = od_pread(od, od->buf, 0, od->sect);
	uint32_t incompat;

	if (ret < 0)
		return ret;
	if (be32toh(sb->sb_magicnum) != XFS_SB_MAGIC)
		return -EINVAL;
	incompat = be32toh(sb->sb_features_incompat);
	memcpy(&od->primary, sb, sizeof(od->primary));
	memcpy(od->uuid, &sb->sb_uuid, 16);
	if (incompat & XFS_SB_FEAT_INCOMPAT_META_UUID)
		memcpy(od->meta_uuid, &sb->sb_meta_uuid, 16);
	else
		memcpy(od->meta_uuid, &sb->sb_uuid, 16);
	od->isize = be16toh(sb->sb_inodesize);
	od->agblklog = sb->sb_agblklog;
	od->inopblog = sb->sb_inopblog;
	od->sparse = incompat & XFS_SB_FEAT_INCOMPAT_SPINODES;
	if (od->isize < 256 || od->isize > od->bsize || od->agblklog > 31 ||
	    od->inopblog > 8 || (1u << od->inopblog) * od->isize != od->bsize)
		return -EINVAL;
	return 0;
}

/* One look at one AG: its problems and what says whether the AG moved. */
struct od_look {
	uint32_t ag;
	struct od_problem *pv;
	size_t pn, dropped;
	uint64_t agf_lsn, agi_lsn;
	uint32_t icount, ifree;		/* the AGI's on the disk */
	struct xfs_ag_geometry k;	/* the kernel's, after the look */
	bool have_k;
};

static void look_release(struct od_look *l)
{
	for (size_t i = 0; i < l->pn; i++)
		free(l->pv[i].msg);
	free(l->pv);
	l->pv = NULL;
	l->pn = 0;
}

static void look(struct od *od, uint32_t ag, struct od_look *l)
{
	xfs_ownermap_look(od->xs, ag);
	od_check_ag(od, ag);
	*l = (struct od_look){
		.ag = ag, .pv = od->pv, .pn = od->pn, .dropped = od->pdropped,
		.agf_lsn = od->agf_lsn, .agi_lsn = od->agi_lsn,
		.icount = od->agi_count, .ifree = od->agi_freecount,
	};
	memset(&l->k, 0, sizeof(l->k));
	l->k.ag_number = ag;
	l->have_k = ioctl(od->xs->fd, XFS_IOC_AG_GEOMETRY, &l->k) == 0;
	od->pv = NULL;
	od->pn = od->palloc = od->pdropped = 0;
}

static const struct od_problem *look_find(const struct od_look *l, const char *msg)
{
	for (size_t i = 0; i < l->pn; i++)
		if (!strcmp(l->pv[i].msg, msg))
			return &l->pv[i];
	return NULL;
}

/*
 * Was the AG quiet from look a (and the kernel's counters k0 before it)
 * to look b: the kernel's free block and inode counters did not move, the
 * AGF and AGI on the disk were not rewritten, and the AGI's inode counts
 * on the disk are the kernel's (a hot AGI stays old on the disk).
 */
static bool quiet(const struct xfs_ag_geometry *k0, const struct od_look *a,
		  const struct od_look *b)
{
	const struct xfs_ag_geometry *k = &b->k;

	return a->have_k && b->have_k && k0->ag_freeblks == k->ag_freeblks &&
	       k0->ag_icount == k->ag_icount && k0->ag_ifree == k->ag_ifree &&
	       a->k.ag_freeblks == k->ag_freeblks && a->k.ag_icount == k->ag_icount &&
	       a->agf_lsn == b->agf_lsn && a->agi_lsn == b->agi_lsn &&
	       (!a->agi_lsn || (a->icount == b->icount && a->ifree == b->ifree &&
				a->icount == k->ag_icount && a->ifree == k->ag_ifree));
}

static void verdict(struct od *od, const struct od_look *l, const struct od_problem *p,
		    bool error)
{
	/* A cross-reference about an inode waits for the walk to name it. */
	if (p->check && p->ino)
		xfs_defer(od->xs, p->ino, error ? SEV_ERROR : SEV_INFO, p->check,
			  "%sAG %u on disk: %s", error ? "" : "changed while being checked: ",
			  l->ag, p->msg);
	else if (p->check && error)
		str_error(od->ctx, p->check, NULL, NULL, 0, "AG %u on disk: %s", l->ag, p->msg);
	else if (p->check)
		str_changed(od->ctx, p->check, NULL, NULL, 0, "AG %u on disk: %s", l->ag, p->msg);
	else if (error)
		str_error(od->ctx, CHECK_XFS_ONDISK, NULL, NULL, p->ino, "AG %u on disk: %s",
			  l->ag, p->msg);
	else
		str_changed(od->ctx, CHECK_XFS_ONDISK, NULL, NULL, p->ino, "AG %u on disk: %s",
			    l->ag, p->msg);
}

/* The internal log's blocks [bb, bb + n), for logview_read(). */
static int od_log_read(void *arg, uint8_t *buf, uint64_t bb, uint32_t n)
{
	struct od *od = arg;

	return od_pread(od, buf, od_fsb_offset(od, od->xs->geo.logstart) + bb * 512,
			(size_t)n * 512);
}

/*
 * A log written while it was read does not make sense for a moment: read
 * again after 50 ms, then twice as long each time, OD_LOG_ATTEMPTS in all
 * (0.75 s of pauses at most, only while it makes no sense).
 */
#define OD_LOG_RETRY_NS 50000000L
#define OD_LOG_ATTEMPTS 5

/* The log's view, read once for the verdicts of a look (see xfs_logview.h). */
struct od_logcheck {
	/*
	 * 0: lv read; -E2BIG: a log too big to read, one written as fast as
	 * it can be: every block is taken to be in it; else (-ENOTSUP,
	 * -EUCLEAN, an I/O error) the log cannot judge.
	 */
	int ret;
	struct logview lv;
};

static void od_logcheck_read(struct od *od, struct od_logcheck *lc)
{
	const struct xfs_fsop_geom *g = &od->xs->geo;
	struct logsrc src = {
		.read = od_log_read, .arg = od, .nbb = (uint64_t)g->logblocks * od->bsize / 512,
		.agblocks = g->agblocks, .bb_per_block = od->bsize / 512,
	};
	struct timespec pause = { 0, OD_LOG_RETRY_NS };

	lc->ret = -ENOTSUP;
	lc->lv = (struct logview){ 0 };
	if (!g->logstart)
		return;		/* an external log */
	for (int attempt = 0; attempt < OD_LOG_ATTEMPTS; attempt++) {
		if (attempt) {
			logview_release(&lc->lv);
			nanosleep(&pause, NULL);
			pause.tv_nsec *= 2;
		}
		lc->ret = logview_read(&src, &lc->lv);
		if (lc->ret != -EUCLEAN)
			break;
	}
}

static void od_logcheck_release(struct od_logcheck *lc)
{
	logview_release(&lc->lv);
}

static bool od_logcheck_judges(const struct od_logcheck *lc)
{
	return !lc->ret || lc->ret == -E2BIG;
}

/*
 * Does the log name a block problem p of AG ag is about (all the AG's
 * blocks for one about many)?  The primary superblock does not count: the
 * log worker logs it to cover an idle log, and no problem between blocks
 * is about it.
 */
static bool problem_in_log(const struct od *od, uint32_t ag, const struct od_logcheck *lc,
			   const struct od_problem *p)
{
	uint32_t length;
	uint64_t base = ag_where(od, ag, &length) / 512, bpb = od->bsize / 512;
	uint64_t sect = od->sect / 512;

	if (lc->ret)
		return true;
	if (!p->nblk)
		return logview_hits(&lc->lv, base + sect, (uint64_t)length * bpb - sect);
	for (unsigned i = 0; i < p->nblk; i++) {
		bool hit = p->blk[i] == OD_BLK_HEADERS ?
			   logview_hits(&lc->lv, base + sect, 3 * sect) :
			   logview_hits(&lc->lv, base + (uint64_t)p->blk[i] * bpb, bpb);

		if (hit)
			return true;
	}
	return false;
}

struct od_logcheck *od_log_open(struct od *od)
{
	struct od_logcheck *lc = xcalloc(1, sizeof(*lc));

	od_logcheck_read(od, lc);
	return lc;
}

int od_log_names(const struct od *od, const struct od_logcheck *lc, uint32_t agno,
		 const struct xref_exts *blks)
{
	uint32_t length;
	uint64_t base = ag_where(od, agno, &length) / 512, bpb = od->bsize / 512;

	if (!od_logcheck_judges(lc))
		return -1;
	if (lc->ret)
		return 1;	/* -E2BIG: every block is taken to be in it */
	for (size_t i = 0; i < blks->n; i++)
		if (logview_hits(&lc->lv, base + (uint64_t)blks->v[i].start * bpb,
				 (uint64_t)blks->v[i].len * bpb))
			return 1;
	return 0;
}

void od_log_close(struct od_logcheck *lc)
{
	if (lc)
		od_logcheck_release(lc);
	free(lc);
}

/* An AG whose problems between blocks wait for the log worker. */
struct od_pending {
	struct xfs_ag_geometry k0;
	struct od_look first;		/* only the problems still pending */
	bool by_log;			/* the log judges: no wait for the log worker */
};

/*
 * The first and second look at AG ag (see xfs_ondisk_check()).  Returns
 * true and fills *pend if problems between blocks are left for the third.
 */
static bool check_ag_twice(struct od *od, uint32_t ag, struct od_pending *pend)
{
	struct timespec pause = { 0, OD_PAUSE_NS };
	struct xfs_ag_geometry k0 = { .ag_number = ag };
	struct od_look first, again;
	size_t kept = 0, between = 0, named = 0;
	bool have_k0, q_ag, by_log, same[OD_MAX_PROBLEMS];
	struct od_logcheck lc = { .ret = -ENOTSUP };

	have_k0 = ioctl(od->xs->fd, XFS_IOC_AG_GEOMETRY, &k0) == 0;
	od->first_look = true;
	look(od, ag, &first);
	od->first_look = false;
	if (!first.pn) {
		look_release(&first);
		return false;
	}
	syncfs(od->ctx->mnt_fd);
	nanosleep(&pause, NULL);
	look(od, ag, &again);
	for (size_t i = 0; i < first.pn; i++) {
		same[i] = look_find(&again, first.pv[i].msg);
		between += same[i] && first.pv[i].cross;
	}
	/* The log is read only for problems between blocks seen twice. */
	if (between)
		od_logcheck_read(od, &lc);
	by_log = od_logcheck_judges(&lc);
	q_ag = !by_log && have_k0 && quiet(&k0, &first, &again);
	for (size_t i = 0; i < first.pn; i++) {
		struct od_problem *p = &first.pv[i];
		bool q = by_log ? !problem_in_log(od, ag, &lc, p) : q_ag;

		named += same[i] && p->cross && by_log && !q;
		if (same[i] && p->cross && q) {
			first.pv[kept++] = *p;	/* for the third look */
			continue;
		}
		verdict(od, &first, p, same[i] && !p->cross);
		free(p->msg);
	}
	od_logcheck_release(&lc);
	if (between && by_log)
		report_verbose(od->ctx, "Phase 2: AG %u looks wrong twice; the log names blocks of "
			       "%zu of its %zu problems between blocks", ag, named, between);
	else if (between)
		report_verbose(od->ctx, "Phase 2: AG %u looks wrong twice; the log cannot say "
			       "whether it is busy", ag);
	if (first.dropped && again.dropped)
		str_info(od->ctx, CHECK_XFS_ONDISK, NULL, NULL, 0,
			 "AG %u on disk: %zu more problems are not listed", ag, again.dropped);
	look_release(&again);
	first.pn = kept;
	if (!kept) {
		look_release(&first);
		return false;
	}
	pend->k0 = k0;
	pend->first = first;
	pend->by_log = by_log;
	return true;
}

/* How long the kernel may keep metadata it has logged from the disk. */
static unsigned log_worker_ms(void)
{
	unsigned cs = 3000;	/* the default fs.xfs.xfssyncd_centisecs: 30 s */
	FILE *f = fopen("/proc/sys/fs/xfs/xfssyncd_centisecs", "re");

	if (f) {
		if (fscanf(f, "%u", &cs) != 1)
			cs = 3000;
		fclose(f);
	}
	if (cs > OD_MAX_WAIT_CS)
		cs = OD_MAX_WAIT_CS;
	return cs * 10 + OD_PUSH_MS;
}

void od_wait_log_worker(struct scrub_ctx *ctx, const char *phase, size_t what,
			const char *why)
{
	unsigned ms = log_worker_ms();

	report_verbose(ctx, "%s: %zu %s: waiting %u ms for the log worker to write everything "
		       "back, then a third look", phase, what, why, ms);
	for (unsigned t = 0; t < ms && !scrub_should_stop(ctx); t += 100) {
		struct timespec slice = { 0, 100000000L };

		nanosleep(&slice, NULL);
	}
	syncfs(ctx->mnt_fd);
}

/*
 * The third look: at once where the log judges, else after the log worker
 * pushed everything to the disk.  A problem still there is an error if
 * the log, read once after all the third looks, names none of its blocks,
 * or, without the log, if its AG is still quiet.
 */
static void check_pending(struct od *od, struct od_pending *pend, size_t n)
{
	struct od_logcheck lc = { .ret = -ENOTSUP };
	struct od_look *last = xcalloc(n, sizeof(*last));
	size_t guessed = 0;

	for (size_t i = 0; i < n; i++)
		guessed += !pend[i].by_log;
	if (guessed)
		od_wait_log_worker(od->ctx, "Phase 2", guessed,
				   "AGs with problems between blocks and no log to judge them");
	else
		syncfs(od->ctx->mnt_fd);
	for (size_t i = 0; i < n; i++)
		look(od, pend[i].first.ag, &last[i]);
	if (guessed < n) {
		od_logcheck_read(od, &lc);
		if (getenv("FSCRUB_DEBUG_THIRD_LOG_UNREADABLE")) {
			logview_release(&lc.lv);
			lc = (struct od_logcheck){ .ret = -EUCLEAN };
		}
		if (!od_logcheck_judges(&lc))
			report_verbose(od->ctx, "Phase 2: the log cannot be read for the third "
				       "look (%s): the AGs' counters judge", strerror(-lc.ret));
	}
	for (size_t i = 0; i < n; i++) {
		struct od_look *first = &pend[i].first;
		/*
		 * The log judged the second look; a log that cannot be read
		 * now says nothing (it does not name the blocks): the AG's
		 * counters and LSNs judge, as where there is no log to read.
		 */
		bool by_log = pend[i].by_log && od_logcheck_judges(&lc);
		bool q_ag = !by_log && quiet(&pend[i].k0, first, &last[i]);

		for (size_t j = 0; j < first->pn; j++) {
			const struct od_problem *p = &first->pv[j];
			bool q = by_log ? !problem_in_log(od, first->ag, &lc, p) : q_ag;

			verdict(od, first, p, look_find(&last[i], p->msg) && q);
		}
		look_release(&last[i]);
		look_release(first);
	}
	free(last);
	od_logcheck_release(&lc);
}

/* A thread's reader: the primary's geometry, its own buffers and looks. */
static bool od_clone(const struct od *proto, struct od *od)
{
	*od = *proto;
	od->pv = NULL;
	od->pn = od->palloc = od->pdropped = 0;
	od->blocks = od->inodes = 0;
	od->buf = od->ibuf = NULL;
	if (posix_memalign((void **)&od->buf, OD_ALIGN, od->bsize > od->sect ? od->bsize : od->sect) ||
	    posix_memalign((void **)&od->ibuf, OD_ALIGN, od->ibuf_len)) {
		free(od->buf);
		od->buf = NULL;
		return false;
	}
	return true;
}

static void od_release(struct od *od)
{
	od_forget(od);
	free(od->pv);
	free(od->buf);
	free(od->ibuf);
}

/* The AGs checked in parallel: a reader per thread, AGs left for the third look. */
struct od_run {
	struct od *readers;
	struct od_pending *pend;	/* by AG */
	bool *pending;
};

static void od_ag_fn(void *arg, uint32_t agno, unsigned thread)
{
	struct od_run *run = arg;

	run->pending[agno] = check_ag_twice(&run->readers[thread], agno, &run->pend[agno]);
}

/* Every AG, twice where it looks wrong; then the third look.  AGs checked. */
static unsigned long long check_all_ags(struct od *od)
{
	struct scrub_ctx *ctx = od->ctx;
	uint32_t nags = od->xs->geo.agcount;
	unsigned nthreads = xfs_ag_threads(ctx), ready = 0;
	struct od_run run = {
		.readers = xcalloc(nthreads, sizeof(*run.readers)),
		.pend = xcalloc(nags ? nags : 1, sizeof(*run.pend)),
		.pending = xcalloc(nags ? nags : 1, sizeof(*run.pending)),
	};
	unsigned long long ags = 0;
	size_t npend = 0;

	while (ready < nthreads && od_clone(od, &run.readers[ready]))
		ready++;
	if (ready == nthreads && xfs_for_each_ag(ctx, od_ag_fn, &run) == 0) {
		ags = nags;
	} else {
		/* No threads (or memory for them): one AG after another. */
		for (uint32_t ag = 0; ag < nags && !scrub_should_stop(ctx); ag++, ags++)
			run.pending[ag] = check_ag_twice(od, ag, &run.pend[ag]);
	}
	for (uint32_t ag = 0; ag < nags; ag++)
		if (run.pending[ag])
			run.pend[npend++] = run.pend[ag];
	if (npend)
		check_pending(od, run.pend, npend);
	for (unsigned t = 0; t < ready; t++) {
		od->blocks += run.readers[t].blocks;
		od->inodes += run.readers[t].inodes;
		od_release(&run.readers[t]);
	}
	free(run.readers);
	free(run.pend);
	free(run.pending);
	return ags;
}

bool od_ag_refcounts(struct od *od, uint32_t agno, struct xref_space *sp)
{
	uint32_t length;
	uint64_t base = ag_where(od, agno, &length);
	struct xfs_agf agf;
	bool ok = read_agf(od, agno, base, length, &agf) &&
		  xfs_refcountbt_read(od, agno, base, length, &agf, sp);

	od_forget(od);	/* phase 2's looks report what is wrong with the blocks */
	return ok;
}

int od_open(struct scrub_ctx *ctx, struct od *od, int *primary_err)
{
	struct xfs_state *xs = xfs_state(ctx);
	int ret;

	*od = (struct od){
		.ctx = ctx, .xs = xs, .sect = xs->geo.sectsize, .bsize = xs->geo.blocksize,
	};
	od->fd = open(ctx->source, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (od->fd < 0)
		return -errno;
	/* A chunk of 64 inodes, and a sector either side for alignment. */
	od->ibuf_len = (size_t)XFS_INODES_PER_CHUNK * xs->geo.inodesize + 2 * od->sect;
	if (posix_memalign((void **)&od->buf, OD_ALIGN, od->bsize > od->sect ? od->bsize : od->sect) ||
	    posix_memalign((void **)&od->ibuf, OD_ALIGN, od->ibuf_len)) {
		free(od->buf);
		close(od->fd);
		return -ENOMEM;
	}
	syncfs(ctx->mnt_fd);	/* the log forced: what is committed is on the disk */
	ret = od_read_primary(od);
	if (ret < 0) {
		*primary_err = ret;
		od_release(od);
		close(od->fd);
	}
	return ret;
}

void od_close(struct od *od)
{
	od_release(od);
	close(od->fd);
}

void xfs_ondisk_check(struct scrub_ctx *ctx)
{
	struct xfs_state *xs = xfs_state(ctx);
	struct od od;
	unsigned long long ags;
	int ret, primary_err = 0;

	if (!(xs->geo.flags & XFS_FSOP_GEOM_FLAGS_V5SB) || !ctx->dev_size) {
		report_verbose(ctx, "Phase 2: %s: AG headers are not read from the disk",
			       ctx->dev_size ? "not a v5 (crc) filesystem" :
			       "the mount source is not the filesystem's block device");
		return;
	}
	ret = od_open(ctx, &od, &primary_err);
	if (primary_err) {
		str_error(ctx, CHECK_XFS_ONDISK, NULL, NULL, 0,
			  "the primary superblock cannot be read from %s: %s", ctx->source,
			  strerror(-ret));
		return;
	}
	if (ret < 0) {
		report_verbose(ctx, "Phase 2: cannot open %s (%s): AG headers are not read from "
			       "the disk", ctx->source, strerror(-ret));
		return;
	}
	ags = check_all_ags(&od);
	report_verbose(ctx, "Phase 2: %llu AGs' headers, %llu btree blocks and %llu inodes "
		       "read from %s", ags, od.blocks, od.inodes, ctx->source);
	report_verbose(ctx, "Phase 2: inode chunks in %llu reads, %llu batches of them in flight",
		       (unsigned long long)atomic_load(&xs->chunk_reads),
		       (unsigned long long)atomic_load(&xs->chunk_batches));
	report_verbose(ctx, "Phase 2: btree blocks read ahead a level at a time: %llu in %llu "
		       "batches", (unsigned long long)atomic_load(&xs->bt_ahead_blocks),
		       (unsigned long long)atomic_load(&xs->bt_ahead_batches));
	report_verbose(ctx, "Phase 2: name indexes of %llu directories and %llu attribute forks "
		       "read from the disk, %llu forks over 16 MiB not read",
		       (unsigned long long)atomic_load(&xs->index_dirs),
		       (unsigned long long)atomic_load(&xs->index_attrs),
		       (unsigned long long)atomic_load(&xs->index_big));
	report_verbose(ctx, "Phase 2: name index blocks in %llu reads, %llu batches of them in "
		       "flight", (unsigned long long)atomic_load(&xs->index_reads),
		       (unsigned long long)atomic_load(&xs->index_batches));
	od_close(&od);
}
