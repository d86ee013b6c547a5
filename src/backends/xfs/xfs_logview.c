/*
 * xfs_logview: the blocks the on-disk log still holds changes to (see
 * xfs_logview.h for why).
 *
 * The log is a ring of 512-byte basic blocks.  Each pass around it writes
 * a cycle number into the first word of every block (a record header
 * keeps it in h_cycle; the words it displaces are kept in the header's
 * h_cycle_data).  So the head -- where the kernel writes next -- is where
 * the cycle number drops by one: found by bisection, as log recovery does.
 * The newest whole record before the head (CRC right) says where the tail
 * is; the records from the tail up to it are read in order, each checked
 * to be where its LSN says, and their operations walked: a transaction
 * (under delayed logging, a checkpoint of many) is a start record, a
 * transaction header, then items of which the first region is a format
 * structure naming the item's type, its region count and, for the types
 * collected, the blocks.  A region split across operations is put back
 * together as far as the format structures go.
 *
 * Records past the newest whole one are being written now: changes made
 * after the caller's syncfs(), whose blocks the kernel cannot write back
 * before they are in the log, so the disk still has the blocks as before.
 *
 * Every length, count and position read from the log is bounded before it
 * is used: the log may be anything (a filesystem someone else made).
 */
#include "backends/xfs/xfs_logview.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/xfs/xfs.h"	/* <xfs/xfs.h>, which xfs_log_format.h needs first */
#include "lib/crc32c.h"
#include "lib/strbuf.h"

#include <xfs/xfs_log_format.h>

#define BB 512u
/* Cycle words a header (or an extended header) keeps: one per 512 bytes of 32 KiB. */
#define CYCLE_WORDS (XLOG_HEADER_CYCLE_SIZE / BB)
/* A record: at most 256 KiB of data and the 8 header blocks that cover it. */
#define MAX_HDR_BBS (XLOG_MAX_RECORD_BSIZE / XLOG_HEADER_CYCLE_SIZE)
#define MAX_REC_BBS (MAX_HDR_BBS + XLOG_MAX_RECORD_BSIZE / BB)
/*
 * How far before the head the newest whole record may start: the kernel
 * has at most 8 in-core logs of 256 KiB in flight, written in any order.
 */
#define SCAN_BACK_BBS (8 * MAX_REC_BBS + 64)
/* Reads of the ring are a window of this many blocks at a time. */
#define WINDOW_BBS 256u
#define WINDOW_ALIGN 4096
/* Transactions open at once in the records read (delayed logging: a few). */
#define MAX_TIDS 32
/* The longest format structure read (xfs_inode_log_format). */
#define FMT_BYTES 64
/* The clients of the log's operations. */
#define CLIENT_TRANSACTION 0x69

#if __BYTE_ORDER == __LITTLE_ENDIAN
#define HOST_FMT XLOG_FMT_LINUX_LE
#else
#define HOST_FMT XLOG_FMT_LINUX_BE
#endif

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

/* Format structures are in the writer's byte order (h_fmt says which). */
static uint16_t get_host16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

/* A window onto the ring. */
struct cursor {
	const struct logsrc *src;
	uint8_t *win;
	uint64_t start;
	uint32_t n;
};

static int bb_at(struct cursor *c, uint64_t bb, const uint8_t **p)
{
	if (bb >= c->src->nbb)
		return -EUCLEAN;
	if (!c->n || bb < c->start || bb >= c->start + c->n) {
		uint64_t start = bb - bb % WINDOW_BBS;
		uint64_t n = c->src->nbb - start < WINDOW_BBS ? c->src->nbb - start : WINDOW_BBS;
		int ret = c->src->read(c->src->arg, c->win, start, (uint32_t)n);

		c->n = 0;
		if (ret < 0)
			return ret;
		c->start = start;
		c->n = (uint32_t)n;
	}
	*p = c->win + (bb - c->start) * BB;
	return 0;
}

/* The cycle number block bb was written in. */
static int bb_cycle(struct cursor *c, uint64_t bb, uint32_t *cycle)
{
	const uint8_t *p;
	int ret = bb_at(c, bb, &p);

	if (ret < 0)
		return ret;
	*cycle = get_be32(p) == XLOG_HEADER_MAGIC_NUM ? get_be32(p + 4) : get_be32(p);
	return 0;
}

/* Where the cycle number drops: *head (nbb when the pass ended at the ring's end). */
static int find_head(struct cursor *c, uint64_t *head)
{
	uint64_t lo = 0, hi = c->src->nbb - 1;
	uint32_t c0, cl, cm;
	int ret = bb_cycle(c, lo, &c0);

	if (!ret)
		ret = bb_cycle(c, hi, &cl);
	if (ret < 0)
		return ret;
	if (c0 == cl) {
		*head = c->src->nbb;
		return 0;
	}
	if (c0 != cl + 1)
		return -EUCLEAN;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		ret = bb_cycle(c, mid, &cm);
		if (ret < 0)
			return ret;
		if (cm == cl)
			hi = mid;
		else
			lo = mid;
	}
	*head = hi;
	return 0;
}

/* One record, read whole with its cycle words put back. */
struct record {
	uint64_t at;			/* its header's block */
	uint32_t bbs;			/* header and data blocks */
	uint64_t lsn, tail_lsn;
	uint32_t len, nops;
	uint8_t *buf;			/* MAX_REC_BBS blocks */
	const uint8_t *data;		/* len bytes of operations */
};

/* Blocks [at, at + n) of the ring (wrapping at its end) into dst. */
static int read_ring(struct cursor *c, uint8_t *dst, uint64_t at, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *p;
		int ret = bb_at(c, (at + i) % c->src->nbb, &p);

		if (ret < 0)
			return ret;
		memcpy(dst + (size_t)i * BB, p, BB);
	}
	return 0;
}

/* The header's shape: 0, -ENOTSUP (not a log this reader knows) or -EUCLEAN. */
static int header_shape(const uint8_t *h, uint64_t at, uint32_t *hbbs, uint32_t *dbbs)
{
	const xlog_rec_header_t *rh = (const void *)h;
	uint32_t version = be32toh(rh->h_version), len = be32toh(rh->h_len);
	uint32_t size = be32toh(rh->h_size);
	uint64_t lsn = be64toh(rh->h_lsn);

	if (be32toh(rh->h_magicno) != XLOG_HEADER_MAGIC_NUM)
		return -EUCLEAN;
	if (version & ~(uint32_t)XLOG_VERSION_OKBITS)
		return -EUCLEAN;
	if (!(version & XLOG_VERSION_2) || be32toh(rh->h_fmt) != HOST_FMT)
		return -ENOTSUP;
	if (!len || len > XLOG_MAX_RECORD_BSIZE || size > XLOG_MAX_RECORD_BSIZE ||
	    (lsn & 0xffffffff) != at || lsn >> 32 != be32toh(rh->h_cycle))
		return -EUCLEAN;
	*hbbs = size > XLOG_HEADER_CYCLE_SIZE ?
		(size + XLOG_HEADER_CYCLE_SIZE - 1) / XLOG_HEADER_CYCLE_SIZE : 1;
	*dbbs = (len + BB - 1) / BB;
	return *dbbs <= *hbbs * CYCLE_WORDS ? 0 : -EUCLEAN;
}

static bool record_crc_ok(const uint8_t *buf, uint32_t hbbs, uint32_t len)
{
	static const uint8_t zero[4];
	size_t crc_off = offsetof(xlog_rec_header_t, h_crc);
	uint32_t crc = crc32c(0xffffffff, buf, crc_off), stored;

	crc = crc32c(crc, zero, 4);
	crc = crc32c(crc, buf + crc_off + 4, sizeof(xlog_rec_header_t) - crc_off - 4);
	for (uint32_t i = 1; i < hbbs; i++)
		crc = crc32c(crc, buf + (size_t)i * BB, sizeof(xlog_rec_ext_header_t));
	crc = crc32c(crc, buf + (size_t)hbbs * BB, len);
	memcpy(&stored, buf + crc_off, 4);
	/* mkfs writes its unmount record without one */
	return !stored || le32toh(stored) == ~crc;
}

/* The words the cycle numbers displaced, back in the data's blocks. */
static void unpack_cycles(uint8_t *buf, uint32_t hbbs, uint32_t dbbs)
{
	for (uint32_t i = 0; i < dbbs; i++) {
		uint32_t j = i / CYCLE_WORDS, k = i % CYCLE_WORDS;
		const uint8_t *words = j ? buf + (size_t)j * BB + offsetof(xlog_rec_ext_header_t,
									  xh_cycle_data)
					 : buf + offsetof(xlog_rec_header_t, h_cycle_data);

		memcpy(buf + (size_t)(hbbs + i) * BB, words + 4 * k, 4);
	}
}

static int read_record(struct cursor *c, uint64_t at, struct record *r)
{
	const xlog_rec_header_t *rh = (const void *)r->buf;
	uint32_t hbbs, dbbs;
	int ret = read_ring(c, r->buf, at, 1);

	if (!ret)
		ret = header_shape(r->buf, at, &hbbs, &dbbs);
	if (!ret && hbbs + dbbs > c->src->nbb)
		ret = -EUCLEAN;
	if (!ret && hbbs > 1)
		ret = read_ring(c, r->buf + BB, at + 1, hbbs - 1);
	if (!ret)
		ret = read_ring(c, r->buf + (size_t)hbbs * BB, at + hbbs, dbbs);
	if (ret < 0)
		return ret;
	r->len = be32toh(rh->h_len);
	if (!record_crc_ok(r->buf, hbbs, r->len))
		return -EUCLEAN;
	unpack_cycles(r->buf, hbbs, dbbs);
	r->at = at;
	r->bbs = hbbs + dbbs;
	r->lsn = be64toh(rh->h_lsn);
	r->tail_lsn = be64toh(rh->h_tail_lsn);
	r->nops = be32toh(rh->h_num_logops);
	r->data = r->buf + (size_t)hbbs * BB;
	return 0;
}

/* Blocks from a to b going forwards round the ring. */
static uint64_t ring_dist(uint64_t nbb, uint64_t a, uint64_t b)
{
	return b >= a ? b - a : nbb - a + b;
}

/* The newest whole record that ends at or before the head. */
static int find_last(struct cursor *c, uint64_t head, struct record *r)
{
	uint64_t nbb = c->src->nbb;
	uint64_t scan = nbb < SCAN_BACK_BBS ? nbb : SCAN_BACK_BBS;
	int unknown = 0;

	for (uint64_t back = 1; back <= scan; back++) {
		uint64_t at = (head + nbb - back) % nbb;
		const uint8_t *p;
		int ret = bb_at(c, at, &p);

		if (ret < 0)
			return ret;
		if (get_be32(p) != XLOG_HEADER_MAGIC_NUM)
			continue;
		ret = read_record(c, at, r);
		if (ret == -ENOTSUP)
			unknown = ret;
		else if (ret < 0 && ret != -EUCLEAN)
			return ret;
		else if (!ret && r->bbs <= back)
			return 0;
	}
	return unknown ? unknown : -EUCLEAN;
}

/* What the walk of the operations knows of one open transaction. */
struct tid_state {
	uint32_t tid;
	bool used;
	bool known;			/* from its start record: regions can be counted */
	uint32_t left;			/* regions of the current item still to come */
	/* a format structure split across operations, put back together */
	uint8_t part[FMT_BYTES];
	uint32_t partlen;
	bool partial;
};

struct walk {
	struct logview *lv;
	const struct logsrc *src;
	struct tid_state tids[MAX_TIDS];
	unsigned next_victim;
	int err;
};

static struct tid_state *tid_get(struct walk *w, uint32_t tid)
{
	struct tid_state *t;

	for (unsigned i = 0; i < MAX_TIDS; i++)
		if (w->tids[i].used && w->tids[i].tid == tid)
			return &w->tids[i];
	for (unsigned i = 0; i < MAX_TIDS; i++)
		if (!w->tids[i].used) {
			t = &w->tids[i];
			goto fresh;
		}
	/* more open than expected: forget one, its regions are then guessed at */
	t = &w->tids[w->next_victim++ % MAX_TIDS];
fresh:
	*t = (struct tid_state){ .tid = tid, .used = true };
	return t;
}

static void add_span(struct walk *w, uint16_t type, uint64_t daddr, uint64_t bbs)
{
	struct logview *lv = w->lv;

	if (!bbs)
		return;
	if (lv->n == LOGVIEW_MAX_SPANS) {
		w->err = -E2BIG;
		return;
	}
	if (lv->n == lv->alloc) {
		lv->alloc = lv->alloc ? 2 * lv->alloc : 64;
		lv->v = xrealloc(lv->v, lv->alloc * sizeof(*lv->v));
	}
	lv->v[lv->n++] = (struct logspan){ daddr, (uint32_t)(bbs > UINT32_MAX ? UINT32_MAX : bbs),
					   type };
}

/* A format structure of len bytes (of the region's first FMT_BYTES): its blocks. */
static void format_blocks(struct walk *w, const uint8_t *f, uint32_t len)
{
	const struct logsrc *src = w->src;
	uint64_t agno, agbno, blocks;
	int64_t blkno;
	int32_t ilen;

	switch (get_host16(f)) {
	case XFS_LI_BUF:
		if (len < offsetof(xfs_buf_log_format_t, blf_map_size))
			return;
		memcpy(&blkno, f + offsetof(xfs_buf_log_format_t, blf_blkno), 8);
		if (blkno >= 0)
			add_span(w, XFS_LI_BUF, (uint64_t)blkno,
				 get_host16(f + offsetof(xfs_buf_log_format_t, blf_len)));
		return;
	case XFS_LI_INODE:
		/* 56 bytes from a 64-bit kernel; 52, packed, from a 32-bit one */
		if (len >= sizeof(struct xfs_inode_log_format)) {
			memcpy(&blkno, f + offsetof(struct xfs_inode_log_format, ilf_blkno), 8);
			memcpy(&ilen, f + offsetof(struct xfs_inode_log_format, ilf_len), 4);
		} else if (len >= sizeof(struct xfs_inode_log_format_32)) {
			memcpy(&blkno, f + offsetof(struct xfs_inode_log_format_32, ilf_blkno), 8);
			memcpy(&ilen, f + offsetof(struct xfs_inode_log_format_32, ilf_len), 4);
		} else {
			return;
		}
		if (blkno >= 0 && ilen > 0)
			add_span(w, XFS_LI_INODE, (uint64_t)blkno, (uint64_t)ilen);
		return;
	case XFS_LI_ICREATE:
		if (len < offsetof(struct xfs_icreate_log, icl_gen))
			return;
		agno = get_be32(f + offsetof(struct xfs_icreate_log, icl_ag));
		agbno = get_be32(f + offsetof(struct xfs_icreate_log, icl_agbno));
		blocks = get_be32(f + offsetof(struct xfs_icreate_log, icl_length));
		add_span(w, XFS_LI_ICREATE, (agno * src->agblocks + agbno) * src->bb_per_block,
			 blocks * src->bb_per_block);
		return;
	}
}

/* Does a region of an unknown transaction begin like a format structure? */
static bool looks_like_format(const uint8_t *f, uint32_t len)
{
	uint16_t type = len >= 4 ? get_host16(f) : 0, size = len >= 4 ? get_host16(f + 2) : 0;

	return type >= XFS_LI_EFI && type <= XFS_LI_EFI + 0x20 && size >= 1 && size <= 512;
}

/* The first bytes of an item's first region, whole: which item, and its blocks. */
static void region_start(struct walk *w, struct tid_state *t, const uint8_t *f, uint32_t len)
{
	uint32_t magic = 0;
	uint16_t size;

	if (len >= 4)
		memcpy(&magic, f, 4);
	if (magic == XFS_TRANS_HEADER_MAGIC)
		return;		/* a transaction header, not an item */
	if (!t->known && !looks_like_format(f, len))
		return;
	size = len >= 4 ? get_host16(f + 2) : 1;
	t->known = true;
	t->left = size ? size - 1u : 0;
	format_blocks(w, f, len);
}

/* One operation of transaction t: its flags and its len bytes at p. */
static void walk_op(struct walk *w, struct tid_state *t, uint8_t flags, const uint8_t *p,
		    uint32_t len)
{
	if (flags & XLOG_START_TRANS) {
		*t = (struct tid_state){ .tid = t->tid, .used = true, .known = true };
		return;
	}
	if (t->partial && !(flags & XLOG_WAS_CONT_TRANS)) {
		/* a split region that ended without saying so: what there is of it */
		t->partial = false;
		region_start(w, t, t->part, t->partlen);
	}
	if (flags & XLOG_WAS_CONT_TRANS) {
		/* the rest of a region: only a split format structure's bytes matter */
		if (t->partial) {
			uint32_t room = FMT_BYTES - t->partlen, take = len < room ? len : room;

			memcpy(t->part + t->partlen, p, take);
			t->partlen += take;
			if (t->partlen == FMT_BYTES || (flags & XLOG_END_TRANS)) {
				t->partial = false;
				region_start(w, t, t->part, t->partlen);
			}
		}
	} else if (t->known && t->left) {
		t->left--;	/* a data region of the current item */
	} else if ((flags & XLOG_CONTINUE_TRANS) && len < FMT_BYTES) {
		memcpy(t->part, p, len);
		t->partlen = len;
		t->partial = true;
	} else {
		region_start(w, t, p, len < FMT_BYTES ? len : FMT_BYTES);
	}
	if (flags & XLOG_COMMIT_TRANS)
		t->used = false;
}

/* The operations of one record. */
static int walk_record(struct walk *w, const struct record *r)
{
	const uint8_t *p = r->data, *end = r->data + r->len;

	for (uint32_t i = 0; i < r->nops && !w->err; i++) {
		/* at any alignment: an operation is as long as it says */
		uint32_t tid, len;
		uint8_t client, flags;

		if ((size_t)(end - p) < sizeof(xlog_op_header_t))
			return -EUCLEAN;
		tid = get_be32(p + offsetof(xlog_op_header_t, oh_tid));
		len = get_be32(p + offsetof(xlog_op_header_t, oh_len));
		client = p[offsetof(xlog_op_header_t, oh_clientid)];
		flags = p[offsetof(xlog_op_header_t, oh_flags)];
		p += sizeof(xlog_op_header_t);
		if (len > (size_t)(end - p))
			return -EUCLEAN;
		if (client == CLIENT_TRANSACTION)
			walk_op(w, tid_get(w, tid), flags, p, len);
		p += len;
	}
	return w->err;
}

/* The records from the tail to last (read, the newest whole one), in order. */
static int walk_records(struct cursor *c, struct walk *w, struct record *last, struct record *r)
{
	uint64_t nbb = c->src->nbb, tail = last->tail_lsn & 0xffffffff;
	uint32_t tail_cycle = last->tail_lsn >> 32, last_cycle = last->lsn >> 32;
	uint64_t span = ring_dist(nbb, tail, last->at), at = tail, gone = 0;
	int ret;

	if (tail >= nbb || last->tail_lsn > last->lsn ||
	    (tail_cycle != last_cycle && (tail_cycle + 1 != last_cycle || tail <= last->at)))
		return -EUCLEAN;
	if (span > LOGVIEW_MAX_BBS)
		return -E2BIG;
	while (at != last->at) {
		ret = read_record(c, at, r);
		if (ret < 0)
			return ret == -ENOTSUP ? -EUCLEAN : ret;
		ret = walk_record(w, r);
		if (ret < 0)
			return ret;
		w->lv->records++;
		gone += r->bbs;
		if (gone > span)
			return -EUCLEAN;	/* stepped over the newest record */
		at = (at + r->bbs) % nbb;
	}
	ret = walk_record(w, last);
	w->lv->records++;
	return ret;
}

int logview_read(const struct logsrc *src, struct logview *lv)
{
	struct cursor c = { .src = src };
	struct record last = { 0 }, r = { 0 };
	struct walk w = { .lv = lv, .src = src };
	uint64_t head;
	int ret;

	*lv = (struct logview){ 0 };
	if (src->nbb < 2 || src->nbb > UINT32_MAX)
		return -EUCLEAN;
	/* aligned: the device's reader may use O_DIRECT */
	if (posix_memalign((void **)&c.win, WINDOW_ALIGN, (size_t)WINDOW_BBS * BB))
		c.win = NULL;
	last.buf = malloc((size_t)MAX_REC_BBS * BB);
	r.buf = malloc((size_t)MAX_REC_BBS * BB);
	ret = c.win && last.buf && r.buf ? find_head(&c, &head) : -ENOMEM;
	if (!ret)
		ret = find_last(&c, head % src->nbb, &last);
	if (!ret) {
		lv->head_lsn = last.lsn;
		lv->tail_lsn = last.tail_lsn;
		ret = walk_records(&c, &w, &last, &r);
	}
	free(c.win);
	free(last.buf);
	free(r.buf);
	return ret;
}

bool logview_hits(const struct logview *lv, uint64_t daddr, uint64_t bbs)
{
	for (size_t i = 0; i < lv->n; i++)
		if (lv->v[i].daddr < daddr + bbs && daddr < lv->v[i].daddr + lv->v[i].bbs)
			return true;
	return false;
}

void logview_release(struct logview *lv)
{
	free(lv->v);
	*lv = (struct logview){ 0 };
}
