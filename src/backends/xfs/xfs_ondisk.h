/*
 * xfs_ondisk: what xfs_ondisk.c (AG headers, the re-read rule) and
 * xfs_btree.c (whole per-AG btrees, counters, inode chunks) share: the
 * reader of the block device and the list of one look's problems.
 *
 * A look at an AG collects problems as strings; two looks are compared
 * string by string, so a problem's text must depend only on what is on
 * the disk (block numbers, indexes, values), never on timing.
 */
#ifndef FSCRUB_BACKEND_XFS_ONDISK_H
#define FSCRUB_BACKEND_XFS_ONDISK_H

#include <stdbool.h>
#include <stddef.h>
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include "backends/xfs/xfs.h"	/* <xfs/xfs.h>, which xfs_format.h needs first */

#include <xfs/xfs_format.h>

/* Big-endian fields of on-disk blocks, at any alignment. */
static inline uint16_t od_get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return be16toh(v);
}

static inline uint32_t od_get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static inline uint64_t od_get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* Problems one look at one AG keeps; the rest are only counted. */
#define OD_MAX_PROBLEMS 64
#define OD_MAX_BLKS 6
/* not NULLAGBLOCK (UINT32_MAX), which means no block; no AG has this many */
#define OD_BLK_HEADERS (UINT32_MAX - 1)

struct od_problem {
	char *msg;
	const char *check;	/* its check id; NULL: CHECK_XFS_ONDISK */
	uint64_t ino;		/* the inode it is about, 0 for none */
	/*
	 * Between blocks (a counter against a btree, keys, siblings, order
	 * across blocks): a mounted XFS writes its blocks back apart, and a
	 * block it keeps changing may stay old on the disk for as long as it
	 * does, so such a problem is only believed of blocks the log does not
	 * name (or, without the log, of a quiet AG).
	 */
	bool cross;
	/*
	 * The blocks a problem between blocks is about (agbnos, or
	 * OD_BLK_HEADERS for the AG's header sectors, where a btree's root
	 * pointer is): nblk 0 for one about many (a counter against a whole
	 * btree), which is judged by all the AG's blocks.
	 */
	uint32_t blk[OD_MAX_BLKS];
	unsigned nblk;
};

struct od {
	struct scrub_ctx *ctx;
	struct xfs_state *xs;
	int fd;
	uint32_t sect, bsize;
	uint8_t *buf;			/* one block or sector */
	uint8_t *ibuf;			/* one inode chunk, sector-aligned */
	size_t ibuf_len;
	uint8_t uuid[16];		/* sb_uuid of the primary superblock */
	uint8_t meta_uuid[16];		/* what the metadata blocks carry */
	struct xfs_dsb primary;		/* the primary superblock, as read first */
	uint32_t isize;			/* sb_inodesize */
	unsigned agblklog, inopblog;	/* for inode numbers */
	bool sparse;			/* sparse inode chunks */

	/* This look at the current AG. */
	struct od_problem *pv;
	size_t pn, palloc, pdropped;
	uint64_t agf_lsn, agi_lsn;	/* as read by this look, 0: not read */
	uint32_t agi_count, agi_freecount;
	unsigned long long blocks, inodes;	/* read by this look */
	/*
	 * The AG's first look: what is held for the walk to decide, outside
	 * the looks' lists (xfs_defer_if_named()), is held once.
	 */
	bool first_look;
	/* xfs_dirindex.c's forks kept to be read together, or NULL (none). */
	struct di_batch *dirindex;
};

/* Add a problem to this look (at most OD_MAX_PROBLEMS are kept). */
void od_problem(struct od *od, uint64_t ino, bool cross, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* The same under another check id than CHECK_XFS_ONDISK. */
void od_problem_id(struct od *od, const char *check, uint64_t ino, bool cross,
		   const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/*
 * A problem between the n blocks of blk alone (cross; see struct
 * od_problem: NULLAGBLOCK ones and repeats are left out, at most
 * OD_MAX_BLKS kept).
 */
void od_problem_between(struct od *od, const uint32_t *blk, unsigned n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* pread len bytes at off into buf (aligned): 0 or a negative errno. */
int od_pread(struct od *od, void *buf, uint64_t off, size_t len);
/* The alignment of od_read_ranges()'s buffers: O_DIRECT's largest logical sector. */
#define OD_READ_ALIGN 4096
/* Reads in flight: the device's queue covers its latency, another load still gets in. */
#define OD_READ_DEPTH 16
/*
 * Read the n ranges, each at most max_len bytes, into buf(arg, i) (aligned
 * to OD_READ_ALIGN): OD_READ_DEPTH reads in flight through the I/O engine
 * (one under -b), in the order given (the callers sort by place).  res[i]:
 * 0, a negative errno, or -EIO for a short read.  single, or no engine:
 * one od_pread() after the other.
 */
struct io_range;
void od_read_ranges(struct od *od, const struct io_range *range, size_t n, size_t max_len,
		    char *(*buf)(void *arg, size_t i), void *arg, int *res, bool single);
/* XFS's CRC32c of a block of len bytes whose CRC is at crc_off. */
bool od_crc_ok(const uint8_t *buf, size_t len, size_t crc_off);

/* An inobt or finobt record, decoded. */
struct ino_rec {
	uint32_t startino;
	uint16_t holemask;
	uint8_t count, freecount;
	uint64_t free;
};

/* Extents of one AG: free space, reverse mappings or other used blocks. */
struct xref_ext {
	uint32_t start, len;
	uint64_t owner;		/* an inode, or XFS_RMAP_OWN_*; 0 for free space */
	uint64_t offset;	/* in the owner (rmapbt records), with its flags */
	const char *what;	/* sp->used: "the bnobt", "the AGFL"...; else NULL */
};

struct xref_exts {
	struct xref_ext *v;
	size_t n, alloc;
};

/* What xfs_btree.c's walks of one AG leave for the space cross-check. */
struct xref_space {
	struct xref_exts bno, cnt;	/* the free space btrees' records */
	struct xref_exts rmap;		/* the rmapbt's records */
	struct xref_exts used;		/* headers, AGFL, btree blocks, inode chunks, log */
	struct xref_exts refc;		/* the refcountbt's shared records, owner: refcount */
	struct xref_exts cow;		/* its CoW staging records, owner: 1 */
	bool bno_ok, cnt_ok, rmap_ok, refc_ok;	/* that walk found nothing wrong */
	bool have_rmap;
};

/*
 * xfs_xref.c: cross-references inside one AG, each problem "cross" (see
 * struct od_problem) and under its own check id.
 */
void xref_exts_add(struct xref_exts *s, uint32_t start, uint32_t len, uint64_t owner,
		   uint64_t offset);
/* A used extent of AG metadata: owner XFS_RMAP_OWN_*, what names it. */
void xref_used_add(struct xref_space *sp, uint32_t start, uint32_t len, uint64_t owner,
		   const char *what);
void xref_space_release(struct xref_space *sp);
/* Every block of the AG is free or used, never both; bnobt == cntbt. */
void xref_space_check(struct od *od, uint32_t agno, uint32_t length, struct xref_space *sp);
/*
 * With the rmapbt and the refcountbt (both walked clean): the refcountbt's
 * shared records are what the rmapbt's data fork records add up to, its
 * CoW staging records the rmapbt's XFS_RMAP_OWN_COW records.
 */
void xref_refcount_check(struct od *od, struct xref_space *sp);

/* A range of an AG's blocks where the two counts differ. */
struct ref_diff {
	uint32_t start, end;
	uint64_t want, have;	/* the owners' references, the refcountbt's count */
};

/*
 * The comparison xref_refcount_check() makes, from any source of owners:
 * refs are data fork references (owner an inode, offset without the
 * XFS_RMAP_OFF_* flags: rmapbt records, or the files' extents), refc the
 * refcountbt's shared records.  Where the two differ -- a count below 2
 * needs no record -- at most max ranges go to d (the number is returned).
 * Ranges that a reference of unknown (may be NULL: files whose maps are
 * not known whole) touches are not judged, only counted in *skipped.
 */
size_t xref_refcount_diff(const struct xref_exts *refs, const struct xref_exts *refc,
			  const struct xref_exts *unknown, struct ref_diff *d, size_t max,
			  size_t *skipped);
/* An inode core's forks in its literal area, and their extent counts. */
struct od_forks {
	const uint8_t *data, *attr;	/* attr NULL: no attribute fork */
	size_t data_room, attr_room;	/* bytes */
	uint64_t nextents, anextents;
};

/* The forks of an inode in use (false: free, or a fork offset past the inode). */
bool od_dinode_forks(const struct od *od, const struct xfs_dinode *d, struct od_forks *f);
/* The disk address of filesystem block fsb (AG, block in AG). */
uint64_t od_fsb_offset(const struct od *od, uint64_t fsb);
/* A packed bmbt record (xfs_format.h, xfs_bmbt_rec): 128 bits, big-endian. */
void od_bmx_decode(const uint8_t *p, uint64_t *off, uint64_t *fsb, uint64_t *len,
		   bool *unwritten);
/*
 * A fork of inode ino in btree format (its root at fork, room bytes):
 * fn(arg, recs, n) for each leaf's n packed records, in key order.  False
 * if a bmbt block is not what its pointer says, or the tree is too big;
 * else *blocks is the count of bmbt blocks below the root.  Uses od->buf.
 */
typedef void (*od_bmx_fn)(void *arg, const uint8_t *recs, unsigned n);
bool od_bmbt_walk(struct od *od, uint64_t ino, const uint8_t *fork, size_t room, od_bmx_fn fn,
		  void *arg, unsigned *blocks);
/* An inode of a chunk (its core passed its checks) against its inobt free bit. */
void xref_inode_alloc(struct od *od, const struct xfs_dinode *d, uint64_t ino, bool free);
/*
 * Are blocks [start, start + len) of the AG, a sparse hole of an inobt
 * record, inode chunk blocks all the same: used in the bnobt and owned
 * by XFS_RMAP_OWN_INODES in the rmapbt (both walked clean)?  Only then
 * are inodes read there believed: a freed hole's blocks keep old inodes.
 */
bool xref_hole_owned_by_inodes(const struct xref_space *sp, uint32_t start, uint32_t len);
/* Its di_nblocks against the blocks its forks map (extents format only). */
void xref_inode_blocks(struct od *od, const struct xfs_dinode *d, uint64_t ino);
/* The AGI's unlinked lists, read from the disk (recs: the inobt's records). */
void xref_unlinked(struct od *od, uint32_t agno, uint64_t base, uint32_t length,
		   const struct xfs_agi *agi, const struct ino_rec *recs, size_t nrecs);
/* A secondary superblock (that passed its own checks) against the primary. */
void xref_sb(struct od *od, const struct xfs_dsb *sb);

/*
 * xfs_btree.c: walk every btree of AG agno (agf, agi: copies of headers
 * that passed their checks, or NULL), check the counters of the headers
 * against the records, and the inode chunks the inobt records give.
 */
void xfs_btrees_check(struct od *od, uint32_t agno, uint64_t ag_base, uint32_t length,
		      const struct xfs_agf *agf, const struct xfs_agi *agi);
/*
 * The refcountbt of AG agno alone (agf: its AGF, checked), its records in
 * sp->refc and sp->cow (the caller releases sp).  True if the walk found
 * nothing wrong; its problems are left in od's look.
 */
bool xfs_refcountbt_read(struct od *od, uint32_t agno, uint64_t base, uint32_t length,
			 const struct xfs_agf *agf, struct xref_space *sp);

/*
 * xfs_dirindex.c: the name indexes of an inode whose core passed its
 * checks -- a directory's hash entries, best-free tables and da nodes,
 * an attribute fork's leaf hashes -- read from the device into the look.
 * check() maps the inode's forks and keeps them in od->dirindex (a full
 * batch is read and judged first); flush() reads and judges what is kept
 * and leaves od->dirindex NULL: call it before the look ends.
 */
void xfs_dirindex_check(struct od *od, const struct xfs_dinode *d, uint64_t ino);
void xfs_dirindex_flush(struct od *od);

/*
 * xfs_ondisk.c, for the checks after the walk: a reader of the device
 * (od_open: 0, or a negative errno, and nothing to release; *primary_err
 * is set too if the primary superblock is what failed), one AG's
 * refcountbt as it is on the disk now (false if its AGF or the btree
 * cannot be read whole and clean: phase 2 says why; the btree's blocks
 * in sp->used), and the wait for the log worker to push what the kernel
 * logged to the disk.
 */
int od_open(struct scrub_ctx *ctx, struct od *od, int *primary_err);
void od_close(struct od *od);
/*
 * The steps od_open() and a look take, for tests/fuzz/fuzz_xfs.c too: the
 * primary superblock (read from od->fd at 0) into od (0, or -EINVAL if it
 * is not one fscrub can read, or the read's negative errno); and one look
 * at AG agno (superblock, AGF, AGI, AGFL, btrees, inode chunks), whose
 * problems are left in od->pv.
 */
int od_read_primary(struct od *od);
void od_check_ag(struct od *od, uint32_t agno);
bool od_ag_refcounts(struct od *od, uint32_t agno, struct xref_space *sp);
void od_wait_log_worker(struct scrub_ctx *ctx, const char *phase, size_t what,
			const char *why);

/*
 * The on-disk log's view (xfs_logview.h), read now through od: does it
 * name one of AG agno's blocks in blks?  1 yes, 0 none (what the disk
 * holds of them is what the kernel has), or -1 when the log cannot say
 * (an external log, one this reader does not know or cannot parse).  A
 * log too big to read names every block.
 */
struct od_logcheck;
struct od_logcheck *od_log_open(struct od *od);
int od_log_names(const struct od *od, const struct od_logcheck *lc, uint32_t agno,
		 const struct xref_exts *blks);
void od_log_close(struct od_logcheck *lc);

/*
 * xfs_ownermap.c, phase 2: look() forgets what an earlier look at the AG
 * noted; note() keeps a digest of a regular file's data fork in extents
 * format (a core that passed its checks), for phase 3 to hold GETFSMAP's
 * records of the file against.  An AG's looks run on one thread at a time.
 */
void xfs_ownermap_look(struct xfs_state *xs, uint32_t agno);
void xfs_ownermap_note(struct od *od, const struct xfs_dinode *d, uint64_t ino);

#endif
