/*
 * xfs_dirindex: the name indexes of directories and attribute forks, read
 * from the device by phase 2 for each inode of a chunk (xfs_btree.c).
 *
 * A lookup by name walks these indexes, so a damaged one hides a name the
 * walk still reads with getdents: phase 3 no longer looks names up, so
 * they are checked here, block by block, as xfs_repair -n does.
 *
 *   xfs.dir_hash   a directory in block, leaf or node form: every hash
 *                  entry (the block's tail, the LEAF1 block, the LEAFN
 *                  blocks) points at a live data entry whose name hashes
 *                  to the entry's hash (the ASCII-CI hash on an ASCII-CI
 *                  filesystem); a block's entries are in hash order and
 *                  its stale count is what its entries say; every live
 *                  data entry has exactly one hash entry; a da node's
 *                  hashes are in order, each its child's last.
 *   xfs.dir_free   the LEAF1 block's best-free table, or the free index
 *                  blocks of a node directory, against each data block's
 *                  bestfree[0]; every data block has its entry.
 *   xfs.attr_hash  an attribute leaf block's entries in hash order, each
 *                  hash the hash of its name (parent pointers, which hash
 *                  their parent too, are not judged); da nodes as above.
 *
 * The fork's extent map (the inode's list, or its bmbt read from the
 * device) gives the blocks, read with O_DIRECT, the extents of many forks
 * together in physical order with reads in flight ("forks read together"
 * below), at most DI_MAX_BYTES of a fork (a bigger one is only counted,
 * under -v).  A block that fails its CRC, magic or owner is a
 * problem of its own and is not judged further; one that does not name the
 * inode as its owner, or has another kind's magic, sets the inode's map
 * against the block, so it is judged as a problem between blocks.
 *
 * Problems go to the AG's look (xfs_ondisk.c) under the inode: the live
 * rule re-reads them fresh, and the walk names the directory or file.
 * What lies inside one block (order, stale count, an attribute's hash
 * against its own name, a block-form directory) is a problem about one
 * block; what sets two blocks against each other (a hash entry against a
 * data block, a best-free table, a node against its child) is "cross":
 * the kernel writes a directory's blocks back apart.
 */
#include "backends/xfs/xfs_ondisk.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <xfs/xfs_da_format.h>

#include "report/checks.h"
#include "scan/context.h"
#include "lib/ioengine.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"

/* A fork read whole for its index: 16 MiB holds a directory of ~300 000 names. */
#define DI_MAX_BYTES (16u << 20)
/* One pread of an extent: bounded so that a big extent does not hog the device. */
#define DI_READ_MAX (1u << 20)
/* Problems said about one fork in one look; the rest are counted in one more. */
#define DI_MAX_SAID 8
/* bests[] and bestfree lengths: the data block does not exist (NULLDATAOFF). */
#define DI_HOLE 0xffffu
/* ... or is not judged (it failed its own checks). */
#define DI_BAD 0x10000u
/* Parent pointer attributes (Linux 6.10) hash their parent with the name. */
#ifndef XFS_ATTR_PARENT
#define XFS_ATTR_PARENT (1u << 3)
#endif

/* The da3 block header (xfs_da3_blkinfo): magic, owner; the dir3 one (xfs_dir3_blk_hdr). */
#define DA3_MAGIC_OFF 8
#define DA3_OWNER_OFF 48
#define DA3_UUID_OFF 32
#define DIR3_OWNER_OFF 40
#define DIR3_UUID_OFF 24
/* Counts after the da3 header: node count/level, leaf count/stale, attr leaf count. */
#define DA3_HDR_LEN 56
/* struct xfs_dir3_data_hdr: its bestfree[0] (offset, length) follows the 48-byte header. */
#define DIR3_BESTFREE_LEN_OFF 50

static uint32_t rol32(uint32_t x, unsigned s)
{
	return x << s | x >> (32 - s);
}

/* xfs_da_hashname(): four bytes at a time, 7 bits apart, the hash rotated in. */
static uint32_t name_hash(const uint8_t *n, size_t len)
{
	uint32_t h = 0;

	for (; len >= 4; len -= 4, n += 4)
		h = (uint32_t)n[0] << 21 ^ (uint32_t)n[1] << 14 ^ (uint32_t)n[2] << 7 ^
		    n[3] ^ rol32(h, 28);
	switch (len) {
	case 3:
		return (uint32_t)n[0] << 14 ^ (uint32_t)n[1] << 7 ^ n[2] ^ rol32(h, 21);
	case 2:
		return (uint32_t)n[0] << 7 ^ n[1] ^ rol32(h, 14);
	case 1:
		return n[0] ^ rol32(h, 7);
	default:
		return h;
	}
}

/* The ASCII-CI hash: a byte at a time, A-Z folded to a-z. */
static uint32_t name_hash_ci(const uint8_t *n, size_t len)
{
	uint32_t h = 0;

	for (size_t i = 0; i < len; i++)
		h = (uint32_t)(n[i] >= 'A' && n[i] <= 'Z' ? n[i] + ('a' - 'A') : n[i]) ^
		    rol32(h, 7);
	return h;
}

/* ------------------------------------------------------------ the fork */

struct di_ext {
	uint64_t off, fsb, len;	/* in filesystem blocks */
	uint64_t at;		/* its first block's place in the buffer */
};

/* A fork's mapped blocks, in the buffer in logical order without holes. */
struct di_map {
	struct di_ext *v;
	size_t n, alloc;
	uint64_t blocks;
	unsigned bsize;		/* the filesystem's block size */
	bool bad;		/* out of order, too big or not walked */
	uint8_t *data;
};

/* od_bmx_fn: packed records into the map. */
static void map_recs(void *arg, const uint8_t *recs, unsigned n)
{
	struct di_map *m = arg;

	for (unsigned i = 0; i < n && !m->bad; i++) {
		struct di_ext e;
		bool unwritten;

		od_bmx_decode(recs + (size_t)i * sizeof(struct xfs_bmbt_rec), &e.off, &e.fsb,
			      &e.len, &unwritten);
		if (unwritten || !e.len)
			continue;
		if (m->n && e.off < m->v[m->n - 1].off + m->v[m->n - 1].len) {
			m->bad = true;	/* the bmbt's own checks are the kernel's */
			return;
		}
		e.at = m->blocks;
		m->blocks += e.len;
		if (m->n == m->alloc) {
			m->alloc = m->alloc ? 2 * m->alloc : 16;
			m->v = xrealloc(m->v, m->alloc * sizeof(*m->v));
		}
		m->v[m->n++] = e;
	}
}

/* The fork's extents (extents or btree format) into m; false: none to check. */
static bool map_fork(struct od *od, uint64_t ino, const uint8_t *fork, size_t room, uint8_t fmt,
		     uint64_t nextents, struct di_map *m)
{
	unsigned bmbt_blocks;

	if (fmt == XFS_DINODE_FMT_EXTENTS) {
		if (!nextents || nextents > room / sizeof(struct xfs_bmbt_rec))
			return false;
		map_recs(m, fork, (unsigned)nextents);
	} else if (fmt != XFS_DINODE_FMT_BTREE ||
		   !od_bmbt_walk(od, ino, fork, room, map_recs, m, &bmbt_blocks)) {
		return false;
	}
	return !m->bad && m->n;
}

/* nfsb blocks from logical block lblk, mapped without a hole: in the buffer, or NULL. */
static const uint8_t *map_block(const struct di_map *m, uint64_t lblk, unsigned nfsb)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].off + m->v[mid].len <= lblk)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == m->n || m->v[lo].off > lblk)
		return NULL;
	for (size_t i = lo; m->v[i].off + m->v[i].len < lblk + nfsb; i++)
		if (i + 1 == m->n || m->v[i + 1].off != m->v[i].off + m->v[i].len)
			return NULL;
	return m->data + (m->v[lo].at + (lblk - m->v[lo].off)) * (size_t)m->bsize;
}

/* ------------------------------------------------------ one fork's look */

/* A live data entry of a directory, by its address (byte in the directory / 8). */
struct di_dent {
	uint32_t addr, hash;
	unsigned refs;		/* hash entries pointing at it */
};

struct di;
/* A da btree leaf at dablk: checked, its last hash in *last; false: not judged. */
typedef bool (*di_leaf_fn)(struct di *di, uint64_t dablk, const uint8_t *b, uint32_t *last);

struct di {
	struct od *od;
	uint64_t ino;
	const char *check;	/* of the index's problems */
	struct di_map map;
	unsigned blksize, fsbs;	/* a da block: bytes, filesystem blocks */
	di_leaf_fn leaf;
	unsigned visits;	/* da blocks walked: no more than are mapped */
	unsigned said, unsaid;

	/* Directories. */
	bool ci, ftype;
	struct di_dent *e;
	size_t ne, alloc;
	uint32_t *best;		/* per data block: bestfree[0]'s length, DI_HOLE, DI_BAD */
	size_t nbest;
	bool leaves_ok;		/* every hash entry was read: missing ones can be told */
};

static void di_problem(struct di *di, const char *check, bool cross, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void di_problem(struct di *di, const char *check, bool cross, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	if (di->said == DI_MAX_SAID) {
		di->unsaid++;
		return;
	}
	di->said++;
	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	od_problem_id(di->od, check, di->ino, cross, "inode %llu: %s",
		      (unsigned long long)di->ino, sb.buf);
	strbuf_release(&sb);
}

/*
 * A block's own header: CRC (at crc_off), magic, owner and UUID (at
 * owner_off, uuid_off).  False, a problem said, if it is not what the
 * fork's map says it is.
 */
static bool block_ok(struct di *di, const char *what, uint64_t blk, const uint8_t *b,
		     size_t crc_off, size_t owner_off, size_t uuid_off)
{
	const char *bad = NULL;
	bool ours = od_get64(b + owner_off) == di->ino;

	if (!od_crc_ok(b, di->blksize, crc_off))
		bad = "fails its CRC";
	else if (!ours)
		bad = "belongs to another inode";
	else if (memcmp(b + uuid_off, di->od->meta_uuid, 16))
		bad = "has another filesystem's UUID";
	/*
	 * A block that does not name this inode as its owner sets the inode's
	 * map on the disk against the block: under churn the disk keeps an
	 * old map (the inode relogged) whose blocks were freed and written
	 * over at once (file data, another directory's block).  That is a
	 * problem between blocks, judged by the log.  One that names it and
	 * fails its CRC is damage in the block itself.
	 */
	if (bad)
		di_problem(di, di->check, !ours, "%s block %llu %s", what,
			   (unsigned long long)blk, bad);
	return !bad;
}

static bool da3_ok(struct di *di, const char *what, uint64_t blk, const uint8_t *b)
{
	/* xfs_da3_blkinfo: forw, back, magic, pad, crc at 12, blkno, lsn, uuid, owner. */
	return block_ok(di, what, blk, b, XFS_DA3_NODE_CRC_OFF, DA3_OWNER_OFF, DA3_UUID_OFF);
}

/* Hashes of n entries of stride bytes from p (hash first) in order: else a problem. */
static void hash_order(struct di *di, const char *what, uint64_t blk, const uint8_t *p,
		       unsigned n, size_t stride)
{
	for (unsigned i = 1; i < n; i++)
		if (od_get32(p + i * stride) < od_get32(p + (i - 1) * stride)) {
			di_problem(di, di->check, false, "%s block %llu: hash entry %u "
				   "(0x%08x) is below the one before it (0x%08x)", what,
				   (unsigned long long)blk, i, od_get32(p + i * stride),
				   od_get32(p + (i - 1) * stride));
			return;
		}
}

/*
 * The da btree block at dablk: a node (checked here, its children walked)
 * or a leaf (di->leaf).  want_level: the level its parent gives, -1 for
 * the root.  *last: its last hash.  False if it was not judged whole.
 */
static bool da_block(struct di *di, uint64_t dablk, int want_level, unsigned depth,
		     uint32_t *last)
{
	const uint8_t *b = map_block(&di->map, dablk, di->fsbs);
	unsigned count, level;
	bool ok = true;

	if (!b || depth >= XFS_DA_NODE_MAXDEPTH || ++di->visits > di->map.blocks) {
		di_problem(di, di->check, true, "da block %llu is %s",
			   (unsigned long long)dablk, b ? "too deep in the tree" : "not mapped");
		return false;
	}
	if (od_get16(b + DA3_MAGIC_OFF) != XFS_DA3_NODE_MAGIC) {
		if (want_level > 0)
			di_problem(di, di->check, true, "da block %llu is a leaf, its parent "
				   "says level %d", (unsigned long long)dablk, want_level);
		return want_level <= 0 && di->leaf(di, dablk, b, last);
	}
	if (!da3_ok(di, "da node", dablk, b))
		return false;
	count = od_get16(b + DA3_HDR_LEN);
	level = od_get16(b + DA3_HDR_LEN + 2);
	if (!count || sizeof(struct xfs_da3_node_hdr) + count * 8u > di->blksize || !level ||
	    (want_level >= 0 && level != (unsigned)want_level)) {
		di_problem(di, di->check, want_level >= 0, "da node block %llu: %u entries at "
			   "level %u", (unsigned long long)dablk, count, level);
		return false;
	}
	b += sizeof(struct xfs_da3_node_hdr);
	hash_order(di, "da node", dablk, b, count, 8);
	for (unsigned i = 0; i < count; i++) {
		uint32_t child_last;

		if (!da_block(di, od_get32(b + i * 8 + 4), (int)level - 1, depth + 1, &child_last)) {
			ok = false;
			continue;
		}
		if (child_last != od_get32(b + i * 8))
			di_problem(di, di->check, true, "da node block %llu: entry %u gives hash "
				   "0x%08x for block %u, whose last hash is 0x%08x",
				   (unsigned long long)dablk, i, od_get32(b + i * 8),
				   od_get32(b + i * 8 + 4), child_last);
	}
	*last = od_get32(b + (count - 1) * 8);
	return ok;
}

/* ---------------------------------------------------------- directories */

static void dent_add(struct di *di, uint32_t addr, const uint8_t *name, unsigned len)
{
	if (di->ne == di->alloc) {
		di->alloc = di->alloc ? 2 * di->alloc : 256;
		di->e = xrealloc(di->e, di->alloc * sizeof(*di->e));
	}
	di->e[di->ne++] = (struct di_dent){
		addr, di->ci ? name_hash_ci(name, len) : name_hash(name, len), 0,
	};
}

/* A data entry's size: inumber, namelen, name, file type, tag; 8-byte aligned. */
static size_t dent_size(const struct di *di, unsigned namelen)
{
	return (8 + 1 + namelen + (di->ftype ? 1u : 0u) + 2 + 7) & ~(size_t)7;
}

/* The entries of data block db, [header, end): false if they do not parse. */
static bool data_entries(struct di *di, uint32_t db, const uint8_t *b, size_t end)
{
	size_t off = sizeof(struct xfs_dir3_data_hdr);

	while (off < end) {
		size_t sz = 0;

		if (end - off >= 4 && od_get16(b + off) == XFS_DIR2_DATA_FREE_TAG)
			sz = od_get16(b + off + 2);
		else if (end - off >= 9 && b[off + 8])
			sz = dent_size(di, b[off + 8]);
		if (!sz || sz % XFS_DIR2_DATA_ALIGN || sz > end - off ||
		    (od_get16(b + off) != XFS_DIR2_DATA_FREE_TAG && od_get16(b + off + sz - 2) != off)) {
			di_problem(di, di->check, false, "directory data block %u: its entries "
				   "do not parse at offset %zu", db, off);
			return false;
		}
		if (od_get16(b + off) != XFS_DIR2_DATA_FREE_TAG)
			dent_add(di, (uint32_t)(((uint64_t)db * di->blksize + off) >>
						XFS_DIR2_DATA_ALIGN_LOG), b + off + 9, b[off + 8]);
		off += sz;
	}
	return true;
}

/* Data block db (magic: XDD3 or, in block form, XDB3): its entries and bestfree[0]. */
static void data_block(struct di *di, uint32_t db, const uint8_t *b, uint32_t magic, size_t end)
{
	di->best[db] = DI_BAD;
	if (od_get32(b) != magic) {
		di_problem(di, di->check, true, "directory data block %u has magic 0x%08x", db,
			   od_get32(b));
		return;
	}
	if (!block_ok(di, "directory data", db, b, XFS_DIR3_DATA_CRC_OFF, DIR3_OWNER_OFF,
		      DIR3_UUID_OFF) || !data_entries(di, db, b, end))
		return;
	di->best[db] = od_get16(b + DIR3_BESTFREE_LEN_OFF);
}

static int cmp_dent(const void *a, const void *b)
{
	uint32_t x = ((const struct di_dent *)a)->addr, y = ((const struct di_dent *)b)->addr;

	return x < y ? -1 : x > y;
}

/* The data entries by address. */
static void dents_sort(struct di *di)
{
	sort_items(di->e, di->ne, sizeof(*di->e), cmp_dent);
}

/* Every data block below leaf_blk (the leaf space), dir block by dir block. */
static void data_blocks(struct di *di, uint64_t leaf_blk)
{
	const struct di_map *m = &di->map;
	uint64_t top = 0;

	for (size_t i = 0; i < m->n && m->v[i].off < leaf_blk; i++)
		top = m->v[i].off + m->v[i].len < leaf_blk ? m->v[i].off + m->v[i].len : leaf_blk;
	di->nbest = (top + di->fsbs - 1) / di->fsbs;
	di->best = xmalloc((di->nbest ? di->nbest : 1) * sizeof(*di->best));
	for (size_t db = 0; db < di->nbest; db++)
		di->best[db] = DI_HOLE;
	for (size_t i = 0; i < m->n && m->v[i].off < leaf_blk; i++) {
		uint64_t end = m->v[i].off + m->v[i].len;

		for (uint64_t l = (m->v[i].off + di->fsbs - 1) / di->fsbs * di->fsbs;
		     l < end && l < leaf_blk; l += di->fsbs) {
			const uint8_t *b = map_block(m, l, di->fsbs);

			if (b)
				data_block(di, (uint32_t)(l / di->fsbs), b, XFS_DIR3_DATA_MAGIC,
					   di->blksize);
		}
	}
	dents_sort(di);
}

/* The live data entry at addr, or NULL. */
static struct di_dent *dent_find(struct di *di, uint32_t addr)
{
	struct di_dent key = { .addr = addr };

	return find_item(&key, di->e, di->ne, sizeof(*di->e), cmp_dent);
}

/* One hash entry (index i of what) against the data entry it points at. */
static void hash_entry(struct di *di, const char *what, uint64_t blk, unsigned i,
		       uint32_t hash, uint32_t addr, bool cross)
{
	uint64_t byte = (uint64_t)addr << XFS_DIR2_DATA_ALIGN_LOG;
	uint32_t db = (uint32_t)(byte / di->blksize), off = (uint32_t)(byte % di->blksize);
	struct di_dent *e;

	if (db < di->nbest && di->best[db] == DI_BAD)
		return;		/* said of the data block */
	if (db >= di->nbest || di->best[db] == DI_HOLE) {
		di_problem(di, di->check, cross, "%s block %llu: hash entry %u points at data "
			   "block %u, which is not mapped", what, (unsigned long long)blk, i, db);
	} else if (!(e = dent_find(di, addr))) {
		di_problem(di, di->check, cross, "%s block %llu: hash entry %u points at data "
			   "block %u offset %u, where no entry begins", what,
			   (unsigned long long)blk, i, db, off);
	} else {
		e->refs++;
		if (e->hash != hash)
			di_problem(di, di->check, cross, "%s block %llu: hash entry %u has hash "
				   "0x%08x, the name it points at (data block %u offset %u) "
				   "hashes to 0x%08x", what, (unsigned long long)blk, i, hash,
				   db, off, e->hash);
	}
}

/* count hash entries at p of block blk, stale of them by its header: order, stale, targets. */
static void hash_entries(struct di *di, const char *what, uint64_t blk, const uint8_t *p,
			 unsigned count, unsigned stale, bool cross)
{
	unsigned nstale = 0;

	hash_order(di, what, blk, p, count, 8);
	for (unsigned i = 0; i < count; i++) {
		uint32_t addr = od_get32(p + i * 8 + 4);

		if (addr == XFS_DIR2_NULL_DATAPTR)
			nstale++;
		else
			hash_entry(di, what, blk, i, od_get32(p + i * 8), addr, cross);
	}
	if (nstale != stale)
		di_problem(di, di->check, false, "%s block %llu has %u stale hash entries, its "
			   "header says %u", what, (unsigned long long)blk, nstale, stale);
}

/* Every live data entry has one hash entry (once all of them were read). */
static void dents_referenced(struct di *di, bool cross)
{
	for (size_t i = 0; i < di->ne && di->leaves_ok; i++) {
		uint64_t byte = (uint64_t)di->e[i].addr << XFS_DIR2_DATA_ALIGN_LOG;

		if (di->e[i].refs != 1)
			di_problem(di, di->check, cross, "the entry at data block %llu offset %llu "
				   "has %u hash entries", (unsigned long long)(byte / di->blksize),
				   (unsigned long long)(byte % di->blksize), di->e[i].refs);
	}
}

/* A directory in block form: one block, its hash entries in its tail. */
static void block_form(struct di *di, const uint8_t *b)
{
	uint32_t count = od_get32(b + di->blksize - 8), stale = od_get32(b + di->blksize - 4);
	size_t tail = sizeof(struct xfs_dir2_block_tail) + (size_t)count * 8;

	di->nbest = 1;
	di->best = xmalloc(sizeof(*di->best));
	if (tail > di->blksize - sizeof(struct xfs_dir3_data_hdr)) {
		di_problem(di, di->check, false, "directory block 0 has %u hash entries, more "
			   "than fit", count);
		return;
	}
	data_block(di, 0, b, XFS_DIR3_BLOCK_MAGIC, di->blksize - tail);
	if (di->best[0] == DI_BAD)
		return;
	dents_sort(di);
	hash_entries(di, "directory", 0, b + di->blksize - tail, count, stale, false);
	di->leaves_ok = true;
	dents_referenced(di, false);
}

/* An entry of a best-free table (what: where) for data block db against the block. */
static void best_entry(struct di *di, const char *what, uint64_t blk, uint32_t db, uint16_t have)
{
	uint32_t want = db < di->nbest ? di->best[db] : DI_HOLE;

	if (want == DI_BAD || want == have)
		return;
	if (want == DI_HOLE)
		di_problem(di, CHECK_XFS_DIR_FREE, true, "%s block %llu gives data block %u, "
			   "which is not mapped, %u free bytes", what, (unsigned long long)blk,
			   db, have);
	else if (have == DI_HOLE)
		di_problem(di, CHECK_XFS_DIR_FREE, true, "%s block %llu calls data block %u "
			   "unmapped", what, (unsigned long long)blk, db);
	else
		di_problem(di, CHECK_XFS_DIR_FREE, true, "%s block %llu gives data block %u %u "
			   "free bytes, its bestfree[0] says %u", what, (unsigned long long)blk,
			   db, have, want);
}

/* A directory in leaf form: the LEAF1 block's hash entries and best-free table. */
static void leaf1_form(struct di *di, uint64_t blk, const uint8_t *b)
{
	unsigned count = od_get16(b + DA3_HDR_LEN), stale = od_get16(b + DA3_HDR_LEN + 2);
	uint32_t nbests = od_get32(b + di->blksize - sizeof(struct xfs_dir2_leaf_tail));
	/* The header, the hash entries, the best-free table and the tail, in that order. */
	size_t used = sizeof(struct xfs_dir3_leaf_hdr) + (size_t)count * 8 + (size_t)nbests * 2 +
		      sizeof(struct xfs_dir2_leaf_tail);
	const uint8_t *bests;

	if (!da3_ok(di, "leaf", blk, b))
		return;
	if (used > di->blksize) {
		di_problem(di, di->check, false, "leaf block %llu: %u hash entries and %u "
			   "best-free entries do not fit", (unsigned long long)blk, count, nbests);
		return;
	}
	bests = b + di->blksize - sizeof(struct xfs_dir2_leaf_tail) - (size_t)nbests * 2;
	hash_entries(di, "leaf", blk, b + sizeof(struct xfs_dir3_leaf_hdr), count, stale, true);
	di->leaves_ok = true;
	for (uint32_t db = 0; db < nbests; db++)
		best_entry(di, "leaf", blk, db, od_get16(bests + db * 2));
	for (size_t db = nbests; db < di->nbest; db++)
		if (di->best[db] != DI_HOLE)
			di_problem(di, CHECK_XFS_DIR_FREE, true, "leaf block %llu: its best-free "
				   "table of %u entries has none for data block %zu",
				   (unsigned long long)blk, nbests, db);
}

/*
 * A da btree leaf block (what: "leaf", "attr leaf") of this magic whose
 * count entries of 8 bytes follow a header of hdr_len bytes: false, a
 * problem said, if it is not one or they do not fit.
 */
static bool leaf_ok(struct di *di, const char *what, uint64_t blk, const uint8_t *b,
		    uint16_t magic, size_t hdr_len, unsigned count)
{
	if (od_get16(b + DA3_MAGIC_OFF) != magic) {
		di_problem(di, di->check, true, "da block %llu has magic 0x%04x, not a leaf's",
			   (unsigned long long)blk, od_get16(b + DA3_MAGIC_OFF));
		return false;
	}
	if (!da3_ok(di, what, blk, b))
		return false;
	if (hdr_len + (size_t)count * 8 > di->blksize) {
		di_problem(di, di->check, false, "%s block %llu: %u entries do not fit", what,
			   (unsigned long long)blk, count);
		return false;
	}
	return true;
}

/* di_leaf_fn of a node directory: a LEAFN block. */
static bool leafn(struct di *di, uint64_t blk, const uint8_t *b, uint32_t *last)
{
	unsigned count = od_get16(b + DA3_HDR_LEN), stale = od_get16(b + DA3_HDR_LEN + 2);
	const uint8_t *ents = b + sizeof(struct xfs_dir3_leaf_hdr);

	if (!leaf_ok(di, "leaf", blk, b, XFS_DIR3_LEAFN_MAGIC, sizeof(struct xfs_dir3_leaf_hdr),
		     count))
		return false;
	hash_entries(di, "leaf", blk, ents, count, stale, true);
	*last = count ? od_get32(ents + (count - 1) * 8) : 0;
	return true;
}

/* One free index block at blk (the nth of the free space): bests, nused, coverage. */
static void free_block(struct di *di, uint64_t blk, uint64_t nth, const uint8_t *b,
		       bool *covered)
{
	uint32_t firstdb = od_get32(b + 48), nvalid = od_get32(b + 52), nused = od_get32(b + 56);
	uint32_t per = (di->blksize - (uint32_t)sizeof(struct xfs_dir3_free_hdr)) / 2, used = 0;
	const uint8_t *bests = b + sizeof(struct xfs_dir3_free_hdr);

	if (od_get32(b) != XFS_DIR3_FREE_MAGIC) {
		di_problem(di, di->check, true, "free index block %llu has magic 0x%08x",
			   (unsigned long long)blk, od_get32(b));
		return;
	}
	if (!block_ok(di, "free index", blk, b, XFS_DIR3_FREE_CRC_OFF, DIR3_OWNER_OFF,
		      DIR3_UUID_OFF))
		return;
	if (nvalid > per || firstdb != nth * per) {
		di_problem(di, di->check, false, "free index block %llu: first data block %u, "
			   "%u entries (%llu, at most %u expected)", (unsigned long long)blk,
			   firstdb, nvalid, (unsigned long long)(nth * per), per);
		return;
	}
	for (uint32_t i = 0; i < nvalid; i++) {
		best_entry(di, "free index", blk, firstdb + i, od_get16(bests + i * 2));
		used += od_get16(bests + i * 2) != DI_HOLE;
		if (firstdb + i < di->nbest)
			covered[firstdb + i] = true;
	}
	if (used != nused)
		di_problem(di, di->check, false, "free index block %llu has %u entries in use, "
			   "its header says %u", (unsigned long long)blk, used, nused);
}

/* The free index of a node directory: every data block has its entry. */
static void free_blocks(struct di *di)
{
	const struct di_map *m = &di->map;
	uint64_t first = XFS_DIR2_FREE_OFFSET / m->bsize;
	bool *covered = xcalloc(di->nbest ? di->nbest : 1, sizeof(*covered));
	const char *check = di->check;

	di->check = CHECK_XFS_DIR_FREE;	/* the free index's own blocks too */
	for (size_t i = 0; i < m->n; i++)
		for (uint64_t l = m->v[i].off; l < m->v[i].off + m->v[i].len; l++) {
			const uint8_t *b;

			if (l < first || (l - first) % di->fsbs || !(b = map_block(m, l, di->fsbs)))
				continue;
			free_block(di, l, (l - first) / di->fsbs, b, covered);
		}
	for (size_t db = 0; db < di->nbest; db++)
		if (di->best[db] != DI_HOLE && !covered[db])
			di_problem(di, di->check, true, "data block %zu has no free index entry",
				   db);
	di->check = check;
	free(covered);
}

static void check_dir(struct di *di)
{
	uint64_t leaf = XFS_DIR2_LEAF_OFFSET / di->map.bsize;
	const uint8_t *b = map_block(&di->map, leaf, di->fsbs);
	const uint8_t *b0 = map_block(&di->map, 0, di->fsbs);
	uint32_t last;

	if (!b) {
		if (b0 && di->map.blocks == di->fsbs && od_get32(b0) == XFS_DIR3_BLOCK_MAGIC)
			block_form(di, b0);
		return;		/* else no index to check (the kernel's business) */
	}
	data_blocks(di, leaf);
	if (od_get16(b + DA3_MAGIC_OFF) == XFS_DIR3_LEAF1_MAGIC) {
		leaf1_form(di, leaf, b);
	} else if (od_get16(b + DA3_MAGIC_OFF) == XFS_DA3_NODE_MAGIC) {
		di->leaf = leafn;
		di->leaves_ok = da_block(di, leaf, -1, 0, &last);
		free_blocks(di);
	} else {
		/* between blocks, as in block_ok(): the map names it a leaf */
		di_problem(di, di->check, true, "leaf block %llu has magic 0x%04x",
			   (unsigned long long)leaf, od_get16(b + DA3_MAGIC_OFF));
	}
	dents_referenced(di, true);
}

/* ------------------------------------------------------ attribute forks */

/* Entry i's name in attr leaf block b, into *name and *len: false if out of the block. */
static bool attr_name(const struct di *di, const uint8_t *ent, const uint8_t *b,
		      const uint8_t **name, unsigned *len)
{
	size_t idx = od_get16(ent + 4);
	/* xfs_attr_leaf_name_local: valuelen, namelen; _remote: valueblk, valuelen, namelen. */
	size_t at = ent[6] & XFS_ATTR_LOCAL ? 2 : 8;

	if (idx + at + 1 > di->blksize || idx + at + 1 + b[idx + at] > di->blksize)
		return false;
	*len = b[idx + at];
	*name = b + idx + at + 1;
	return true;
}

/* di_leaf_fn of an attribute fork: an attr leaf block. */
static bool attr_leaf(struct di *di, uint64_t blk, const uint8_t *b, uint32_t *last)
{
	unsigned count = od_get16(b + DA3_HDR_LEN);
	const uint8_t *ents = b + sizeof(struct xfs_attr3_leaf_hdr);

	if (!leaf_ok(di, "attr leaf", blk, b, XFS_ATTR3_LEAF_MAGIC,
		     sizeof(struct xfs_attr3_leaf_hdr), count))
		return false;
	hash_order(di, "attr leaf", blk, ents, count, 8);
	for (unsigned i = 0; i < count; i++) {
		const uint8_t *e = ents + i * 8, *name;
		unsigned len;

		if (!attr_name(di, e, b, &name, &len))
			di_problem(di, di->check, false, "attr leaf block %llu: entry %u's name "
				   "is out of the block", (unsigned long long)blk, i);
		else if (!(e[6] & XFS_ATTR_PARENT) && name_hash(name, len) != od_get32(e))
			di_problem(di, di->check, false, "attr leaf block %llu: entry %u has hash "
				   "0x%08x, its name hashes to 0x%08x", (unsigned long long)blk,
				   i, od_get32(e), name_hash(name, len));
	}
	*last = count ? od_get32(ents + (count - 1) * 8) : 0;
	return true;
}

/* ------------------------------------------------- forks read together */

/*
 * The forks' blocks are read several forks at a time with many reads in
 * flight (ioengine.h), not one synchronous read of a fork after the
 * other: ~0.5 ms each, 9 743 of them one at a time per AG thread on a
 * million small files in 9 600 directories (bench/README.md).
 * xfs_dirindex_check() maps a fork and keeps it; xfs_dirindex_flush()
 * reads every kept fork's extents in one job, in physical order, then
 * judges the forks in the order they came, each as if read by itself.
 * Their problems come later in the look's list than before, after those
 * of the inodes read with them: looks are compared problem by problem,
 * by text, not by place; only past OD_MAX_PROBLEMS in one look may others
 * be kept than an inode at a time would keep.
 * FSCRUB_DEBUG_NO_CHUNKBATCH=1 reads each fork by itself when it is
 * checked, one read after the other.
 */
/*
 * Forks kept at most: 64 directories are some 6 000 inodes of a
 * million-file set (a few of xfs_btree.c's chunk batches), enough reads
 * to keep OD_READ_DEPTH in flight.  Their blocks: at most DI_BATCH_BYTES
 * before one more fork is kept, so an AG thread holds less than
 * DI_BATCH_BYTES + DI_MAX_BYTES (one big fork kept last).
 */
#define DI_BATCH_FORKS 64
#define DI_BATCH_BYTES (8u << 20)

struct di_fork {
	uint64_t ino;
	bool dir;
	int ret;		/* 0, or the first failed read's errno in physical order */
	struct di_map map;
};

struct di_batch {
	struct di_fork fork[DI_BATCH_FORKS];
	size_t n;
	uint64_t bytes;		/* the kept forks' blocks */
	bool single;		/* FSCRUB_DEBUG_NO_CHUNKBATCH: a fork at a time */
};

/* One read of a batch: a piece of an extent of a fork, at most DI_READ_MAX. */
struct di_piece {
	uint64_t dev;
	size_t len;
	uint8_t *to;
	struct di_fork *f;
	int res;
};

struct di_pieces {
	struct di_piece *v;
	size_t n, alloc;
};

/* The pieces of every extent of f, from where its blocks are to where they go. */
static void pieces_add(struct di_pieces *ps, const struct od *od, struct di_fork *f)
{
	const struct di_map *m = &f->map;

	for (size_t i = 0; i < m->n; i++) {
		uint64_t dev = od_fsb_offset(od, m->v[i].fsb);
		size_t left = m->v[i].len * m->bsize;

		for (size_t done = 0; done < left; done += DI_READ_MAX) {
			if (ps->n == ps->alloc) {
				ps->alloc = ps->alloc ? 2 * ps->alloc : 64;
				ps->v = xrealloc(ps->v, ps->alloc * sizeof(*ps->v));
			}
			ps->v[ps->n++] = (struct di_piece){
				.dev = dev + done, .to = m->data + m->v[i].at * m->bsize + done,
				.len = left - done < DI_READ_MAX ? left - done : DI_READ_MAX,
				.f = f, .res = -ECANCELED,
			};
		}
	}
}

static int cmp_dev(const void *a, const void *b)
{
	uint64_t x = ((const struct di_piece *)a)->dev, y = ((const struct di_piece *)b)->dev;

	return x < y ? -1 : x > y;
}

static char *piece_buf(void *arg, size_t i)
{
	struct di_pieces *ps = arg;

	return (char *)ps->v[i].to;
}

/* Read the pieces (sorted by place): in one job, or one after the other. */
static void pieces_read(struct od *od, struct di_pieces *ps, bool single)
{
	struct io_range *range = xmalloc(ps->n * sizeof(*range));
	int *res = xmalloc(ps->n * sizeof(*res));

	for (size_t i = 0; i < ps->n; i++)
		range[i] = (struct io_range){ ps->v[i].dev, ps->v[i].len };
	atomic_fetch_add(&od->xs->index_reads, ps->n);
	if (!single)
		atomic_fetch_add(&od->xs->index_batches, 1);
	od_read_ranges(od, range, ps->n, DI_READ_MAX, piece_buf, ps, res, single);
	for (size_t i = 0; i < ps->n; i++)
		ps->v[i].res = res[i];
	free(range);
	free(res);
}

/* Read every kept fork's blocks; a fork's error is its first failed piece's. */
static void batch_read(struct od *od, struct di_batch *b)
{
	struct di_pieces ps = { 0 };

	for (size_t i = 0; i < b->n; i++)
		if (!b->fork[i].ret)
			pieces_add(&ps, od, &b->fork[i]);
	if (ps.n) {
		sort_items(ps.v, ps.n, sizeof(*ps.v), cmp_dev);
		pieces_read(od, &ps, b->single);
	}
	for (size_t i = 0; i < ps.n; i++)
		if (ps.v[i].res < 0 && !ps.v[i].f->ret)
			ps.v[i].f->ret = ps.v[i].res;
	free(ps.v);
}

/* -------------------------------------------------------------- judging */

/* Judge the index of one fork read (dir: a directory's data fork, else the attr fork). */
static void fork_judge(struct od *od, const struct di_fork *f)
{
	struct xfs_state *xs = od->xs;
	struct di di = {
		.od = od, .ino = f->ino, .check = f->dir ? CHECK_XFS_DIR_HASH : CHECK_XFS_ATTR_HASH,
		.map = f->map, .blksize = f->dir ? xs->geo.dirblocksize : od->bsize,
		.ci = xs->geo.flags & XFS_FSOP_GEOM_FLAGS_DIRV2CI, .leaf = attr_leaf,
		.ftype = be32toh(od->primary.sb_features_incompat) & XFS_SB_FEAT_INCOMPAT_FTYPE,
	};
	uint32_t last;

	di.fsbs = di.blksize / od->bsize;
	if (f->ret < 0) {
		di_problem(&di, di.check, false, "its %s fork's blocks cannot be read: %s",
			   f->dir ? "data" : "attribute", strerror(-f->ret));
		return;
	}
	if (f->dir)
		check_dir(&di);
	else
		da_block(&di, 0, -1, 0, &last);
	if (di.unsaid)
		od_problem_id(od, di.check, f->ino, false, "inode %llu: %u more problems with "
			      "its name index", (unsigned long long)f->ino, di.unsaid);
	if (od->first_look)
		atomic_fetch_add(f->dir ? &xs->index_dirs : &xs->index_attrs, 1);
	free(di.e);
	free(di.best);
}

/* ---------------------------------------------------------------- entry */

/* Keep the mapped fork f for the next flush (which comes first if the batch is full). */
static void fork_keep(struct od *od, struct di_fork *f)
{
	struct di_batch *b = od->dirindex;
	uint64_t bytes = f->map.blocks * f->map.bsize;

	if (b && (b->n == DI_BATCH_FORKS || (b->n && b->bytes + bytes > DI_BATCH_BYTES)))
		xfs_dirindex_flush(od);
	if (!(b = od->dirindex)) {
		b = od->dirindex = xcalloc(1, sizeof(*b));
		b->single = getenv("FSCRUB_DEBUG_NO_CHUNKBATCH") != NULL;
	}
	if (posix_memalign((void **)&f->map.data, OD_READ_ALIGN, bytes)) {
		f->map.data = NULL;
		f->ret = -ENOMEM;
	}
	b->fork[b->n++] = *f;
	b->bytes += bytes;
	if (b->single)
		xfs_dirindex_flush(od);
}

/* Map one fork (dir: the data fork of a directory, else the attr fork) and keep it. */
static void check_fork(struct od *od, uint64_t ino, const uint8_t *fork, size_t room,
		       uint8_t fmt, uint64_t nextents, bool dir)
{
	struct di_fork f = { .ino = ino, .dir = dir, .map.bsize = od->bsize };
	unsigned blksize = dir ? od->xs->geo.dirblocksize : od->bsize;

	if (blksize < od->bsize || !map_fork(od, ino, fork, room, fmt, nextents, &f.map)) {
		free(f.map.v);
		return;
	}
	if (f.map.blocks > DI_MAX_BYTES / od->bsize) {
		if (od->first_look)
			atomic_fetch_add(&od->xs->index_big, 1);
		free(f.map.v);
		return;
	}
	fork_keep(od, &f);
}

void xfs_dirindex_check(struct od *od, const struct xfs_dinode *d, uint64_t ino)
{
	struct od_forks f;

	if (!od_dinode_forks(od, d, &f))
		return;
	if (S_ISDIR(be16toh(d->di_mode)))
		check_fork(od, ino, f.data, f.data_room, d->di_format, f.nextents, true);
	if (f.attr && f.anextents)
		check_fork(od, ino, f.attr, f.attr_room, (uint8_t)d->di_aformat, f.anextents,
			   false);
}

void xfs_dirindex_flush(struct od *od)
{
	struct di_batch *b = od->dirindex;
	bool read;

	if (!b)
		return;
	od->dirindex = NULL;
	/* A scan told to stop reads no more; what was read is judged until it stops. */
	if ((read = !scrub_should_stop(od->ctx)))
		batch_read(od, b);
	for (size_t i = 0; i < b->n; i++) {
		if (read && !scrub_should_stop(od->ctx))
			fork_judge(od, &b->fork[i]);
		free(b->fork[i].map.v);
		free(b->fork[i].map.data);
	}
	free(b);
}
