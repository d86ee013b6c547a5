/*
 * ext4_inodes: phase 3 of the ext4 backend; see ext4.h.
 *
 * During the walk, ext4_check_inode() and ext4_check_dir() note what the
 * kernel showed of every inode reached by a name: its link count, whether
 * it changed during the scan, and for regular files a digest of the FIEMAP
 * extent map.  The notes are an array of 8 bytes per inode of each block
 * group that has an inode reached, allocated on first use.
 *
 * After the walk, ext4_scan_inodes() reads every inode table from the disk
 * (libext2fs's inode scan) and, for every inode the inode bitmap says is in
 * use:
 *
 *   - its checksum (metadata_csum; also a free one's, in the part of its
 *     group's table that has been in use, unless it is all zeros);
 *   - its extent tree, read block by block with O_DIRECT: header magic,
 *     entries within the node's capacity, the depth of every level, logical
 *     order, physical ranges inside the filesystem, every tree block's
 *     checksum; or an ext2/ext3 block map, its indirect blocks read the
 *     same way: every pointer inside the filesystem (ext4.block_map);
 *     what either maps goes to ext4_xref_tree() (i_blocks, i_size);
 *   - for a directory, every directory block's checksum and the record
 *     lengths that chain its entries, and the htree root and index nodes
 *     (and, from the same reads, the index judged whole: ext4_htree.c);
 *   - against the walk: an inode with links that no name reached is an
 *     orphan; its on-disk link count must be what the kernel showed; its
 *     extent map must be what FIEMAP showed (both only for inodes that did
 *     not change during the scan);
 *   - every block its extents (or block map) and tree use, and the filesystem's own
 *     metadata, must be marked in use in the block bitmap; none may be
 *     group metadata (ext4.crosslink) or the journal's (ext4.journal),
 *     and the journal inode's own blocks are checked as the journal's;
 *   - a deleted inode must not be marked in use (ext4.inode_bitmap).
 *
 * Then the orphan list in the superblock is followed, and every inode the
 * walk reached must be marked in use in the inode bitmap.  Every finding is a
 * suspect for ext4_confirm.c; the inode-level ones (orphan, link count,
 * extent map) also ask the kernel again, through open_by_handle_at(), for
 * the inode as it is now.
 */
#include "backends/ext4/ext4.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "report/checks.h"
#include "lib/crc32c.h"
#include "lib/ioengine.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

/* Inode-table blocks per read of the inode scan: 8 MiB at 4 KiB blocks. */
#define INODE_SCAN_BLOCKS 2048
/* EXT4_MAX_EXTENT_DEPTH in the kernel. */
#define MAX_EXTENT_DEPTH 5
/* FIEMAP records per ioctl in the walk hook (3.5 KiB on the stack). */
#define HOOK_FIEMAP_BATCH 64
/* A link count the walk notes as "this or more" (ext4 counts to 65000). */
#define SEEN_NLINK_MAX 65534
/* Blocks marked in use that nothing claims: how many are named in the info. */
#define LEAK_EXAMPLES 4
/* The legacy "more than 65000 subdirectories" link count of dir_nlink. */
#define DIR_NLINK_UNCOUNTED 1

/* ---- what the walk saw ------------------------------------------------- */

static struct ext4_seen *seen_slot(struct ext4_state *st, ext2_ino_t ino, bool create)
{
	uint32_t ipg = st->fs->super->s_inodes_per_group;
	dgrp_t g;
	struct ext4_seen *chunk;

	if (!st->seen || ino == 0 || ino > st->fs->super->s_inodes_count)
		return NULL;
	g = (ino - 1) / ipg;
	chunk = atomic_load(&st->seen[g]);
	if (!chunk && create) {
		struct ext4_seen *fresh = xcalloc(ipg, sizeof(*fresh)), *none = NULL;

		if (atomic_compare_exchange_strong(&st->seen[g], &none, fresh))
			chunk = fresh;
		else {
			free(fresh);
			chunk = none;
		}
	}
	return chunk ? &chunk[(ino - 1) % ipg] : NULL;
}

/* Merged runs of an extent map, hashed (FNV-1a): the same on both sides. */
struct map_digest {
	uint32_t hash;
	bool have;
	uint64_t lblk, pblk, len;
	bool uninit;
	unsigned long long runs;
};

static void digest_init(struct map_digest *m)
{
	memset(m, 0, sizeof(*m));
	m->hash = 2166136261U;
}

static void digest_mix(struct map_digest *m, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		m->hash ^= (uint8_t)(v >> (8 * i));
		m->hash *= 16777619U;
	}
}

static void digest_flush(struct map_digest *m)
{
	if (!m->have)
		return;
	digest_mix(m, m->lblk);
	digest_mix(m, m->pblk);
	digest_mix(m, m->len);
	digest_mix(m, m->uninit);
	m->runs++;
	m->have = false;
}

static void digest_add(struct map_digest *m, uint64_t lblk, uint64_t pblk, uint64_t len,
		       bool uninit)
{
	if (m->have && m->lblk + m->len == lblk && m->pblk + m->len == pblk &&
	    m->uninit == uninit) {
		m->len += len;
		return;
	}
	digest_flush(m);
	m->have = true;
	m->lblk = lblk;
	m->pblk = pblk;
	m->len = len;
	m->uninit = uninit;
}

static uint32_t digest_end(struct map_digest *m)
{
	digest_flush(m);
	digest_mix(m, m->runs);
	return m->hash;
}

/* FIEMAP flags after which physical offsets say nothing about the disk. */
#define FIEMAP_NOT_ON_DISK (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | \
			    FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_INLINE | \
			    FIEMAP_EXTENT_DATA_TAIL | FIEMAP_EXTENT_NOT_ALIGNED)

/* The digest of fd's FIEMAP map in fs blocks; false if it cannot be compared. */
/* Add FIEMAP extents to the digest; false if one has no place in blocks. */
static bool digest_extents(struct map_digest *m, const struct fiemap_extent *ext, size_t n,
			   unsigned bs)
{
	for (size_t i = 0; i < n; i++) {
		const struct fiemap_extent *x = &ext[i];

		if ((x->fe_flags & FIEMAP_NOT_ON_DISK) || x->fe_logical % bs ||
		    x->fe_physical % bs || x->fe_length % bs)
			return false;
		digest_add(m, x->fe_logical / bs, x->fe_physical / bs, x->fe_length / bs,
			   x->fe_flags & FIEMAP_EXTENT_UNWRITTEN);
	}
	return true;
}

/* The digest of a whole map phase 3 already read (backend_entry.map). */
static bool map_digest(const struct fiemap_extent *ext, size_t n, unsigned bs, uint32_t *out)
{
	struct map_digest m;

	digest_init(&m);
	if (!digest_extents(&m, ext, n, bs))
		return false;
	*out = digest_end(&m);
	return true;
}

/* FIEMAP's map of fd digested; false past max extents (stx_max_extents()). */
static bool fiemap_digest(int fd, unsigned bs, unsigned long long max, uint32_t *out)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext[HOOK_FIEMAP_BATCH];
	} req;
	struct map_digest m;
	uint64_t start = 0;
	unsigned long long n = 0;

	digest_init(&m);
	for (;;) {
		memset(&req.fm, 0, sizeof(req.fm));
		req.fm.fm_start = start;
		req.fm.fm_length = FIEMAP_MAX_OFFSET - start;
		req.fm.fm_extent_count = HOOK_FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, &req.fm) < 0)
			return false;
		n += req.fm.fm_mapped_extents;
		if ((max && n > max) || !digest_extents(&m, req.ext, req.fm.fm_mapped_extents, bs))
			return false;
		if (req.fm.fm_mapped_extents < HOOK_FIEMAP_BATCH ||
		    (req.ext[req.fm.fm_mapped_extents - 1].fe_flags & FIEMAP_EXTENT_LAST))
			break;
		const struct fiemap_extent *last = &req.ext[req.fm.fm_mapped_extents - 1];
		start = last->fe_logical + last->fe_length;
	}
	*out = digest_end(&m);
	return true;
}

static void note_seen(struct scrub_ctx *ctx, const struct statx *stx, uint16_t flags)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_seen *s;
	uint32_t nlink = stx->stx_nlink > SEEN_NLINK_MAX ? SEEN_NLINK_MAX : stx->stx_nlink;

	if (!st || !st->fs || stx_devno(stx) != stx_devno(&ctx->root_stx))
		return;
	s = seen_slot(st, (ext2_ino_t)stx->stx_ino, true);
	if (!s)
		return;
	if (stx_changed_during_scan(ctx, stx))
		flags |= EXT4_SEEN_CHANGED;
	/* Two names of one inode: a different link count means it changed. */
	uint16_t was = atomic_exchange(&s->nlink, (uint16_t)(nlink + 1));
	if (was && was != nlink + 1)
		flags |= EXT4_SEEN_CHANGED;
	atomic_fetch_or(&s->flags, flags);
}

void ext4_check_inode(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const struct backend_entry *e)
{
	struct ext4_state *st = ext4_state(ctx);
	uint16_t flags = 0;

	(void)d;
	if (!st || !st->fs)
		return;
	if ((e->fd >= 0 || (e->bulk_map && e->map)) && !stx_changed_during_scan(ctx, e->stx)) {
		struct ext4_seen *s = seen_slot(st, (ext2_ino_t)e->stx->stx_ino, true);
		uint32_t h;
		struct statx after;

		/*
		 * Phase 3's own map when it has it whole (no second FIEMAP and
		 * statx per file): read through this fd after the walk's look
		 * at the inode, as ours would be, or from the inode's bulk
		 * record (ext4_bulk.c: the kernel's inode-table buffer), which
		 * the scan after the walk then compares with the disk.  A map
		 * that moves after it (writeback) is a suspect the comparison
		 * looks at again.
		 */
		if (s && e->map ? map_digest(e->map, e->nr_map, st->fs->blocksize, &h) :
		    s && fiemap_digest(e->fd, st->fs->blocksize,
				       stx_max_extents(e->stx, &ctx->svfs), &h) &&
		    stx_get(e->fd, NULL, &after) == 0 && stx_unchanged(&after, e->stx)) {
			atomic_store(&s->map_hash, h);
			flags |= EXT4_SEEN_MAP;
		}
	}
	note_seen(ctx, e->stx, flags);
}

void ext4_check_dir(struct scrub_ctx *ctx, const struct backend_dir *d)
{
	struct ext4_state *st = ext4_state(ctx);

	if (st)
		atomic_fetch_add_explicit(&st->walk_dirs, 1, memory_order_relaxed);
	note_seen(ctx, d->stx, EXT4_SEEN_DIR);
}

/* ---- reading inodes ------------------------------------------------------ */

/* The inode's ctime in ns (whole seconds where the inode has no extra field). */
static int64_t inode_ctime_ns(const struct ext2_inode_large *in, unsigned isize)
{
	int64_t sec = (int32_t)in->i_ctime, nsec = 0;

	if (isize > EXT2_GOOD_OLD_INODE_SIZE &&
	    (size_t)EXT2_GOOD_OLD_INODE_SIZE + in->i_extra_isize >=
	    offsetof(struct ext2_inode_large, i_ctime_extra) + sizeof(in->i_ctime_extra)) {
		sec += (int64_t)(in->i_ctime_extra & EXT4_EPOCH_MASK) << 32;
		nsec = in->i_ctime_extra >> EXT4_EPOCH_BITS;
	}
	return ext4_time_ns(sec, nsec);
}

/*
 * Did the on-disk inode change since shortly before the scan?  The same
 * rule as stx_changed_during_scan(): changed_since_ns is already 1 s
 * early, which covers inodes that keep whole seconds.
 */
static bool inode_recent(const struct scrub_ctx *ctx, const struct ext2_inode_large *in,
			 unsigned isize)
{
	int64_t ns = inode_ctime_ns(in, isize);

	return ns < 0 || (uint64_t)ns >= ctx->changed_since_ns;
}

/* A copy of an inode out of a fresh inode-table block. */
static void inode_from_block(ext2_filsys fs, const unsigned char *blk, unsigned off,
			     struct ext2_inode_large *out)
{
	unsigned isize = EXT2_INODE_SIZE(fs->super);

	memset(out, 0, sizeof(*out));
	memcpy(out, blk + off, isize < sizeof(*out) ? isize : sizeof(*out));
}

static bool inode_in_use_on_disk(const struct ext2_inode_large *in)
{
	return in->i_links_count > 0 && in->i_dtime == 0 && in->i_mode != 0;
}


/* ---- extent trees -------------------------------------------------------- */

/* A tree block's bytes (level: its depth below the root, 1..5), NULL: none. */
typedef const unsigned char *(*fetch_fn)(void *arg, blk64_t blk, unsigned level);

struct xwalk {
	ext2_filsys fs;
	ext2_ino_t ino;
	uint32_t gen;
	fetch_fn fetch;
	void *farg;
	/* what is wrong, and in which node (0: the inode's own root) */
	const char *why;
	char whybuf[160];
	blk64_t bad_node;
	/* every tree block read, in order */
	blk64_t tree[EXT4_SUSPECT_BLOCKS];
	/*
	 * Every tree block reached, to stop at one reached twice: entries that
	 * all point to the same node make a tree of a few blocks walk as one
	 * of their product (five levels of 340: 4.5e12 nodes).  Freed at the
	 * end of xwalk_run(): 16 bytes per tree block at most.
	 */
	struct tree_seen {
		blk64_t *v;		/* block + 1, 0: a free slot */
		size_t n, cap;
	} seen;
	unsigned nr_tree;
	unsigned long long tree_blocks;
	uint64_t next_lblk;
	struct map_digest digest;
	/* the blocks the leaves map, unwritten included; after the last written one */
	uint64_t mapped, written_end;
	/* the blocks mapped below i_size, whose file blocks are size_blocks */
	uint64_t mapped_in_size, size_blocks;
	/* an ext2/ext3 block map (walk_blockmap()), its run not yet passed on */
	bool blockmap;
	uint64_t run_lblk;
	blk64_t run_pblk, run_node;
	uint32_t run_len;
	/* every tree block, as it is reached (may be NULL) */
	void (*node)(struct xwalk *w, blk64_t blk);
	/* leaf callback (may be NULL) */
	void (*leaf)(struct xwalk *w, uint32_t lblk, blk64_t pblk, uint32_t len, bool uninit,
		     blk64_t node);
	void *larg;
	/* "does the tree map physical block find (from lblk find_lblk)?" */
	blk64_t find;
	bool finding;		/* find is set (block 0 is a block) */
	bool found;
};

static bool xbad(struct xwalk *w, blk64_t node, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static bool xbad(struct xwalk *w, blk64_t node, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->whybuf, sizeof(w->whybuf), fmt, ap);
	va_end(ap);
	w->why = w->whybuf;
	w->bad_node = node;
	return false;
}

static uint64_t ext_pblk(const struct ext3_extent *x)
{
	return (uint64_t)x->ee_start_hi << 32 | x->ee_start;
}

static uint64_t idx_pblk(const struct ext3_extent_idx *x)
{
	return (uint64_t)x->ei_leaf_hi << 32 | x->ei_leaf;
}

static bool extent_block_csum_ok(struct xwalk *w, const unsigned char *b)
{
	const struct ext3_extent_header *eh = (const void *)b;
	size_t tail = sizeof(*eh) + (size_t)eh->eh_max * sizeof(struct ext3_extent);
	uint32_t stored;

	if (!ext2fs_has_feature_metadata_csum(w->fs->super))
		return true;
	if (tail + sizeof(uint32_t) > w->fs->blocksize)
		return false;
	memcpy(&stored, b + tail, sizeof(stored));
	return ext4_csum(w->fs, w->ino, w->gen, b, tail) == stored;
}

static void seen_put(struct tree_seen *s, blk64_t key)
{
	size_t i = (size_t)(key * 0x9e3779b97f4a7c15ULL) & (s->cap - 1);

	while (s->v[i])
		i = (i + 1) & (s->cap - 1);
	s->v[i] = key;
	s->n++;
}

/* Note tree block b reached: false if it was already. */
static bool seen_add(struct tree_seen *s, blk64_t b)
{
	blk64_t key = b + 1;

	if (s->cap) {
		for (size_t i = (size_t)(key * 0x9e3779b97f4a7c15ULL) & (s->cap - 1); s->v[i];
		     i = (i + 1) & (s->cap - 1))
			if (s->v[i] == key)
				return false;
	}
	if (2 * (s->n + 1) > s->cap) {	/* at most half full: probes stay short */
		struct tree_seen g = { xcalloc(s->cap ? 2 * s->cap : 64, sizeof(*g.v)), 0,
				       s->cap ? 2 * s->cap : 64 };

		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i])
				seen_put(&g, s->v[i]);
		free(s->v);
		*s = g;
	}
	seen_put(s, key);
	return true;
}

/*
 * A tree block (an extent node or an indirect block, what), in walk order:
 * noted, looked for, read for level; NULL (w->why says so) if it cannot be.
 */
static const unsigned char *tree_block(struct xwalk *w, blk64_t p, unsigned level,
				       const char *what)
{
	const unsigned char *b;

	if (w->finding && w->find == p)
		w->found = true;
	if (w->nr_tree < EXT4_SUSPECT_BLOCKS - 1)
		w->tree[w->nr_tree++] = p;
	else
		w->nr_tree = EXT4_SUSPECT_BLOCKS;	/* too many to hold */
	w->tree_blocks++;
	if (w->node)
		w->node(w, p);
	if (!seen_add(&w->seen, p)) {
		xbad(w, p, "%s %llu is reached twice in the tree", what, (unsigned long long)p);
		return NULL;
	}
	b = w->fetch(w->farg, p, level);
	if (!b)
		xbad(w, p, "%s %llu cannot be read", what, (unsigned long long)p);
	return b;
}

/* Blocks lblk.. of the file at pblk..: the totals, the digest, the leaf callback. */
static void map_run(struct xwalk *w, uint64_t lblk, blk64_t pblk, uint32_t len, bool uninit,
		    blk64_t node)
{
	w->next_lblk = lblk + len;
	w->mapped += len;
	if (lblk < w->size_blocks)
		w->mapped_in_size += len < w->size_blocks - lblk ? len : w->size_blocks - lblk;
	if (!uninit)
		w->written_end = w->next_lblk;
	digest_add(&w->digest, lblk, pblk, len, uninit);
	if (w->finding && w->find >= pblk && w->find < pblk + len)
		w->found = true;
	if (w->leaf)
		w->leaf(w, (uint32_t)lblk, pblk, len, uninit, node);
}

/* Check one node (the inode's root if node == 0) and below; false: stop. */
static bool walk_node(struct xwalk *w, const unsigned char *bytes, size_t size, blk64_t node,
		      int depth, unsigned level)
{
	const struct ext3_extent_header *eh = (const void *)bytes;
	uint16_t max = (uint16_t)((size - sizeof(*eh)) / sizeof(struct ext3_extent));
	blk64_t end = ext2fs_blocks_count(w->fs->super), first = w->fs->super->s_first_data_block;

	if (eh->eh_magic != EXT3_EXT_MAGIC)
		return xbad(w, node, "bad extent header magic 0x%04x", eh->eh_magic);
	if (depth < 0) {
		depth = eh->eh_depth;
		if (depth > MAX_EXTENT_DEPTH)
			return xbad(w, node, "extent tree depth %d: more than the kernel "
				    "reads (%d), it refuses the file; e2fsck -fy rebuilds the "
				    "tree", depth, MAX_EXTENT_DEPTH);
	} else if (eh->eh_depth != depth) {
		return xbad(w, node, "extent node at depth %u where %d was expected",
			    eh->eh_depth, depth);
	}
	if (eh->eh_max != max)
		return xbad(w, node, "extent node holds %u entries where it has room for %u",
			    eh->eh_max, max);
	if (eh->eh_entries > eh->eh_max)
		return xbad(w, node, "extent node has %u entries, more than its %u",
			    eh->eh_entries, eh->eh_max);
	if (node && !extent_block_csum_ok(w, bytes))
		return xbad(w, node, "extent block checksum does not match");

	if (depth == 0) {
		const struct ext3_extent *x = (const void *)(eh + 1);

		for (unsigned i = 0; i < eh->eh_entries; i++, x++) {
			uint32_t len = x->ee_len > EXT_INIT_MAX_LEN ? x->ee_len - EXT_INIT_MAX_LEN :
					x->ee_len;
			bool uninit = x->ee_len > EXT_INIT_MAX_LEN;
			uint64_t p = ext_pblk(x);

			if (len == 0)
				return xbad(w, node, "extent %u has length 0", i);
			if (x->ee_block < w->next_lblk)
				return xbad(w, node, "extent at file block %u overlaps the one "
					    "before it", x->ee_block);
			if (p < first || p >= end || len > end - p)
				return xbad(w, node, "extent at file block %u maps blocks %llu-%llu, "
					    "outside the filesystem", x->ee_block,
					    (unsigned long long)p, (unsigned long long)(p + len - 1));
			map_run(w, x->ee_block, p, len, uninit, node);
		}
		return true;
	}
	const struct ext3_extent_idx *ix = (const void *)(eh + 1);

	for (unsigned i = 0; i < eh->eh_entries; i++, ix++) {
		uint64_t p = idx_pblk(ix);
		const unsigned char *child;

		if (i && ix->ei_block <= ix[-1].ei_block)
			return xbad(w, node, "extent index %u is not in file order", i);
		if (p < first || p >= end)
			return xbad(w, node, "extent index %u points to block %llu, outside the "
				    "filesystem", i, (unsigned long long)p);
		if (!(child = tree_block(w, p, level + 1, "extent block")))
			return false;
		if (!walk_node(w, child, w->fs->blocksize, p, depth - 1, level + 1))
			return false;
	}
	return true;
}

/*
 * ext2/ext3 block maps: i_block[0..11] point at data blocks, [12], [13]
 * and [14] at a single, double and triple indirect block, each a block of
 * little-endian pointers, 0 for a hole.  Data blocks that follow on are
 * passed on as one run, as an extent would be.
 */
static void blockmap_flush(struct xwalk *w)
{
	if (w->run_len)
		map_run(w, w->run_lblk, w->run_pblk, w->run_len, false, w->run_node);
	w->run_len = 0;
}

static void blockmap_data(struct xwalk *w, uint64_t lblk, blk64_t p, blk64_t node)
{
	if (w->run_len && w->run_lblk + w->run_len == lblk && w->run_pblk + w->run_len == p &&
	    w->run_node == node && w->run_len < EXT_INIT_MAX_LEN) {
		w->run_len++;
		return;
	}
	blockmap_flush(w);
	w->run_lblk = lblk;
	w->run_pblk = p;
	w->run_node = node;
	w->run_len = 1;
}

/* File blocks one pointer at depth covers (depth 0: a data block). */
static uint64_t blockmap_span(const struct xwalk *w, unsigned depth)
{
	uint64_t n = 1;

	while (depth--)
		n *= w->fs->blocksize / 4;
	return n;
}

/*
 * Pointer slot of node (0: the inode) points at p, depth levels above the
 * data; *lblk is the file block it starts at, moved past what it covers.
 */
static bool blockmap_ptr(struct xwalk *w, blk64_t node, unsigned slot, blk64_t p,
			 unsigned depth, uint64_t *lblk, unsigned level)
{
	blk64_t end = ext2fs_blocks_count(w->fs->super), first = w->fs->super->s_first_data_block;
	unsigned per = w->fs->blocksize / 4;
	const unsigned char *child;

	if (p < first || p >= end)
		return xbad(w, node, "pointer %u points to block %llu, outside the filesystem",
			    slot, (unsigned long long)p);
	if (!depth) {
		blockmap_data(w, (*lblk)++, p, node);
		return true;
	}
	if (!(child = tree_block(w, p, level + 1, "indirect block")))
		return false;
	for (unsigned i = 0; i < per; i++) {
		uint32_t q;

		memcpy(&q, child + 4 * i, sizeof(q));
		q = le32toh(q);
		if (!q)
			*lblk += blockmap_span(w, depth - 1);
		else if (!blockmap_ptr(w, p, i, q, depth - 1, lblk, level + 1))
			return false;
	}
	return true;
}

static bool walk_blockmap(struct xwalk *w, const struct ext2_inode_large *in)
{
	uint64_t lblk = 0;

	w->blockmap = true;
	for (unsigned i = 0; i < EXT2_N_BLOCKS; i++) {
		unsigned depth = i < EXT2_IND_BLOCK ? 0 : i - EXT2_IND_BLOCK + 1;
		uint32_t p = le32toh(in->i_block[i]);

		if (!p)
			lblk += blockmap_span(w, depth);
		else if (!blockmap_ptr(w, 0, i, p, depth, &lblk, 0))
			return false;
	}
	blockmap_flush(w);
	return true;
}

static void xwalk_init(struct xwalk *w, ext2_filsys fs, ext2_ino_t ino,
		       const struct ext2_inode_large *in, fetch_fn fetch, void *farg)
{
	memset(w, 0, sizeof(*w));
	w->fs = fs;
	w->ino = ino;
	w->gen = in->i_generation;
	w->size_blocks = EXT2_I_SIZE(in) / fs->blocksize;
	w->fetch = fetch;
	w->farg = farg;
	digest_init(&w->digest);
}

/* Walk an inode's whole extent tree or block map; true if nothing is wrong. */
static bool xwalk_run(struct xwalk *w, const struct ext2_inode_large *in)
{
	bool ok = in->i_flags & EXT4_EXTENTS_FL ?
		  walk_node(w, (const unsigned char *)in->i_block, sizeof(in->i_block), 0, -1, 0) :
		  walk_blockmap(w, in);

	free(w->seen.v);
	w->seen = (struct tree_seen){ 0 };
	return ok;
}

/*
 * First pass: tree blocks from the disk, O_DIRECT.  The walk is depth
 * first, so one buffer per level holds every node on the current path.
 */
struct disk_fetch {
	struct ext4_state *st;
	unsigned char *buf[MAX_EXTENT_DEPTH + 1];
	int err;
};

static const unsigned char *fetch_disk(void *arg, blk64_t blk, unsigned level)
{
	struct disk_fetch *f = arg;
	unsigned char *b = f->buf[level % (MAX_EXTENT_DEPTH + 1)];
	int ret = ext4_read_direct(f->st, blk, b);

	f->st->extent_blocks++;
	if (ret < 0) {
		f->err = ret;
		return NULL;
	}
	return b;
}

/* Confirmation: tree blocks out of the suspect's fresh buffers. */
struct buf_fetch {
	const struct ext4_suspect *s;
	unsigned char *const *bufs;
};

static const unsigned char *fetch_bufs(void *arg, blk64_t blk, unsigned level)
{
	struct buf_fetch *f = arg;

	(void)level;
	for (unsigned i = 0; i < f->s->nr_blocks; i++)
		if (f->s->blocks[i] == blk)
			return f->bufs[i];
	return NULL;
}

/* ---- inode-level suspects ------------------------------------------------ */

/*
 * Inode suspects: blocks[0] is the inode-table block, arg[0] the inode's
 * offset in it, arg[1] its generation as first read, arg[2]/arg[3] what the
 * suspect needs.
 */
bool ext4_fresh_inode(struct scrub_ctx *ctx, const struct ext4_suspect *s,
		      unsigned char *const *bufs, struct ext2_inode_large *in)
{
	ext2_filsys fs = ext4_state(ctx)->fs;

	inode_from_block(fs, bufs[0], (unsigned)s->arg[0], in);
	return in->i_generation == (uint32_t)s->arg[1];
}

/*
 * Is the inode mapped by blocks (an extent tree or a block map)?  The
 * bad-blocks inode always is, by a block map, though it has no mode.
 */
static bool mapped_by_blocks(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode_large *in)
{
	return ino == EXT2_BAD_INO || (!(in->i_flags & EXT4_INLINE_DATA_FL) &&
				       ext2fs_inode_has_valid_blocks2(fs, (struct ext2_inode *)in));
}

/* The same, still in use and still mapped by blocks. */
static bool fresh_mapped_inode(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			       unsigned char *const *bufs, struct ext2_inode_large *in)
{
	return ext4_fresh_inode(ctx, s, bufs, in) &&
	       (inode_in_use_on_disk(in) || s->ino == EXT2_BAD_INO) &&
	       mapped_by_blocks(ext4_state(ctx)->fs, (ext2_ino_t)s->ino, in);
}

struct ext4_suspect *ext4_inode_suspect(struct scrub_ctx *ctx, const char *check,
					ext2_ino_t ino, const struct ext2_inode_large *in,
					ext4_still_bad_fn fn, const char *fmt, ...)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct strbuf sb = STRBUF_INIT;
	struct ext4_suspect *s;
	blk64_t blk;
	unsigned off;
	va_list ap;

	va_start(ap, fmt);
	strbuf_vaddf(&sb, fmt, ap);
	va_end(ap);
	s = ext4_suspect_add(ctx, check, ino, fn, "%s", sb.buf);
	strbuf_release(&sb);
	if (!ext4_inode_location(fs, ino, &blk, &off)) {
		s->cleared = "its inode table cannot be found";
		return s;
	}
	ext4_suspect_block(s, blk);
	s->arg[0] = off;
	s->arg[1] = in->i_generation;
	return s;
}

static bool inode_csum_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				 unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	unsigned isize = EXT2_INODE_SIZE(fs->super);
	unsigned char *copy = xmalloc(isize);
	bool bad;

	memcpy(copy, bufs[0] + s->arg[0], isize);
	bad = !ext4_inode_csum_ok(fs, (ext2_ino_t)s->ino, copy) && !ext4_all_zero(copy, isize);
	free(copy);
	/*
	 * Still in use (arg[3] 0) or still free (arg[3] 1): the inode bitmap
	 * block is blocks[1], the bit arg[2].
	 */
	return bad && ((bufs[1][s->arg[2] / 8] >> (s->arg[2] % 8)) & 1) == !s->arg[3];
}

/*
 * An inode marked free whose checksum fails.  The kernel writes an inode
 * it frees whole, with its checksum, so a free slot in the part of its
 * group's table that has been in use (past it, lazy_itable_init may not
 * have zeroed the slots yet) holds zeros or an inode that checks out:
 * this is damage, never something in flux.
 */
static void check_unused_csum(struct scrub_ctx *ctx, ext2_ino_t ino,
			      const struct ext2_inode_large *in)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	dgrp_t g = (ino - 1) / ipg;

	if ((ino - 1) % ipg >= ext4_itable_in_use(fs, g) || ext4_inode_csum_ok(fs, ino, in) ||
	    ext4_all_zero(in, EXT2_INODE_SIZE(fs->super)))
		return;
	struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_INODE_CSUM, ino, in,
		inode_csum_still_bad, "inode checksum does not match in an unused inode (marked "
		"free in the inode bitmap of group %u)", g);

	ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, g));
	s->arg[2] = (ino - 1) % ipg;
	s->arg[3] = 1;
	s->no_name = true;
}

/* Extent suspects: blocks[0] the inode, then every tree block as first read. */
static bool extent_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;
	struct buf_fetch f = { s, bufs };
	struct xwalk w;

	if (!fresh_mapped_inode(ctx, s, bufs, &in))
		return false;
	xwalk_init(&w, fs, (ext2_ino_t)s->ino, &in, fetch_bufs, &f);
	/* A tree block not among the blocks first read: the tree changed. */
	return !xwalk_run(&w, &in) && w.bad_node == s->arg[2] &&
	       (w.bad_node == 0 || fetch_bufs(&f, w.bad_node, 0));
}

/*
 * A tree with more blocks than a suspect holds (tree_beyond): the others
 * are read afresh from the disk as the walk reaches them.  Only the
 * inode's block and the blocks held are compared between the rounds, but
 * what the walks judge (the blocks mapped, the end of the written ones,
 * whether a block is mapped) does not change without i_blocks, i_size or
 * the times changing in the inode's block.
 */
struct fresh_fetch {
	struct buf_fetch held;
	struct disk_fetch disk;
};

static const unsigned char *fetch_fresh(void *arg, blk64_t blk, unsigned level)
{
	struct fresh_fetch *f = arg;
	const unsigned char *b = fetch_bufs(&f->held, blk, level);

	return b ? b : fetch_disk(&f->disk, blk, level);
}

/* The fresh inode's whole tree into *w (find: a block to look for, or NULL). */
static bool fresh_walk(struct scrub_ctx *ctx, const struct ext4_suspect *s,
		       unsigned char *const *bufs, struct ext2_inode_large *in, struct xwalk *w,
		       const blk64_t *find)
{
	struct ext4_state *st = ext4_state(ctx);
	struct fresh_fetch f = { .held = { s, bufs }, .disk = { .st = st } };
	bool ok;

	if (!fresh_mapped_inode(ctx, s, bufs, in))
		return false;
	if (s->tree_beyond)
		for (unsigned i = 0; i <= MAX_EXTENT_DEPTH; i++)
			f.disk.buf[i] = ext4_block_buf(st);
	xwalk_init(w, st->fs, (ext2_ino_t)s->ino, in, s->tree_beyond ? fetch_fresh : fetch_bufs,
		   s->tree_beyond ? (void *)&f : (void *)&f.held);
	if (find) {
		w->find = *find;
		w->finding = true;
	}
	ok = xwalk_run(w, in);
	for (unsigned i = 0; i <= MAX_EXTENT_DEPTH; i++)
		free(f.disk.buf[i]);
	return ok;
}

bool ext4_fresh_maps(struct scrub_ctx *ctx, const struct ext4_suspect *s,
		     unsigned char *const *bufs, blk64_t b)
{
	struct ext2_inode_large in;
	struct xwalk w;

	return fresh_walk(ctx, s, bufs, &in, &w, &b) && w.found;
}

bool ext4_fresh_tree_totals(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs, struct ext2_inode_large *in,
			    uint64_t *count, uint64_t *written_end)
{
	struct xwalk w;

	if (!fresh_walk(ctx, s, bufs, in, &w, NULL))
		return false;
	*count = w.mapped + w.tree_blocks;
	*written_end = w.written_end;
	return true;
}

bool ext4_fresh_tree_in_size(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs, struct ext2_inode_large *in,
			     uint64_t *mapped_in_size)
{
	struct xwalk w;

	if (!fresh_walk(ctx, s, bufs, in, &w, NULL))
		return false;
	*mapped_in_size = w.mapped_in_size;
	return true;
}

/* Block-in-use suspects: arg[2] the block, blocks[1] its bitmap, [2] the descriptor. */
static bool in_use_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	blk64_t b = s->arg[2];
	dgrp_t g = ext2fs_group_of_blk2(fs, b);
	const struct ext4_group_desc *gd = ext4_gd_in_block(fs, g, bufs[2]);
	blk64_t bmblk = (blk64_t)gd->bg_block_bitmap | (EXT2_DESC_SIZE(fs->super) >= EXT2_MIN_DESC_SIZE_64BIT ?
		       (blk64_t)gd->bg_block_bitmap_hi << 32 : 0);
	blk64_t bit = (b - ext2fs_group_first_block2(fs, g)) >> fs->cluster_ratio_bits;

	if (bmblk != s->blocks[1])
		return false;
	/*
	 * A BLOCK_UNINIT group's bitmap block is not read (the kernel and
	 * libext2fs make one of the group's own metadata): a block the file
	 * uses there is free whatever the block holds (e2fsprogs'
	 * f_uninit_blk_used_not_set).
	 */
	if (!(gd->bg_flags & EXT2_BG_BLOCK_UNINIT) && ((bufs[1][bit / 8] >> (bit % 8)) & 1))
		return false;
	return ext4_fresh_maps(ctx, s, bufs, b);
}

/*
 * An inode's block that is also group metadata or the journal's:
 * arg[2] the block.  Metadata and the journal do not move while mounted
 * (but for an online resize, which only adds groups), so it is enough
 * that the inode still maps it.
 */
static bool shared_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	return ext4_fresh_maps(ctx, s, bufs, s->arg[2]);
}

/* The kernel's inode now, by handle: an fd (O_PATH, or O_RDONLY for FIEMAP). */
static int open_inode(struct scrub_ctx *ctx, ext2_ino_t ino, uint32_t gen, int flags)
{
	_Alignas(struct file_handle) unsigned char buf[sizeof(struct file_handle) + 8];
	struct file_handle *fh = (void *)buf;
	uint32_t id[2] = { ino, gen };

	fh->handle_bytes = sizeof(id);
	fh->handle_type = 1;		/* FILEID_INO32_GEN: what ext4 encodes */
	memcpy(buf + sizeof(*fh), id, sizeof(id));
	return open_by_handle_at(ctx->mnt_fd, fh, flags | O_CLOEXEC);
}

/* Common part of the kernel's view: the inode by handle, unchanged, old. */
static const char *kernel_inode(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				int flags, int *fdp, struct statx *stx)
{
	int fd = open_inode(ctx, (ext2_ino_t)s->ino, (uint32_t)s->arg[1], flags);

	*fdp = -1;
	if (fd < 0)
		return errno == ESTALE ? "the kernel says the inode is no longer in use" :
		       "the kernel cannot be asked for the inode by handle";
	if (stx_get(fd, NULL, stx) < 0) {
		close(fd);
		return "the inode cannot be looked at through the kernel";
	}
	if (stx_changed_during_scan(ctx, stx)) {
		close(fd);
		return "the kernel's inode changed during the scan";
	}
	*fdp = fd;
	return NULL;
}

/* The kernel's link count of s's inode, by handle (kernel_inode()), or why it cannot be had. */
static const char *kernel_nlink(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				uint32_t *nlink)
{
	struct statx stx;
	int fd;
	const char *why = kernel_inode(ctx, s, O_PATH, &fd, &stx);

	if (why)
		return why;
	close(fd);
	*nlink = stx.stx_nlink;
	return NULL;
}

static bool orphan_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			     unsigned char *const *bufs)
{
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && inode_in_use_on_disk(&in) &&
	       ((bufs[1][s->arg[2] / 8] >> (s->arg[2] % 8)) & 1);
}

static const char *orphan_kernel_view(struct scrub_ctx *ctx, const struct ext4_suspect *s)
{
	uint32_t nlink;
	const char *why;

	if (atomic_load(&ctx->dirs_changed))
		return "directories changed during the scan: a name may have moved past the walk";
	if (atomic_load(&ctx->names_hidden))
		return "part of the filesystem was not visible to the walk";
	if ((why = kernel_nlink(ctx, s, &nlink)))
		return why;
	if (nlink == 0)
		return "the kernel says it has no links (open and unlinked)";
	return NULL;
}

static bool nlink_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			    unsigned char *const *bufs)
{
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && inode_in_use_on_disk(&in) &&
	       in.i_links_count == s->arg[2];
}

static const char *nlink_kernel_view(struct scrub_ctx *ctx, const struct ext4_suspect *s)
{
	uint32_t nlink;
	const char *why;

	if ((why = kernel_nlink(ctx, s, &nlink)))
		return why;
	if (nlink != s->arg[3])
		return "the kernel's link count changed";
	return NULL;
}

/* Extent-map suspects: the disk digest again, from fresh buffers. */
static bool map_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			  unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;
	struct buf_fetch f = { s, bufs };
	struct xwalk w;

	if (!ext4_fresh_inode(ctx, s, bufs, &in) || !inode_in_use_on_disk(&in))
		return false;
	xwalk_init(&w, fs, (ext2_ino_t)s->ino, &in, fetch_bufs, &f);
	return xwalk_run(&w, &in) && digest_end(&w.digest) == (uint32_t)s->arg[2];
}

static const char *map_kernel_view(struct scrub_ctx *ctx, const struct ext4_suspect *s)
{
	struct statx stx;
	uint32_t h;
	int fd;
	const char *why;

	if ((why = kernel_inode(ctx, s, O_RDONLY | O_NOATIME | O_NONBLOCK, &fd, &stx)))
		return why;
	bool same = fiemap_digest(fd, ext4_state(ctx)->fs->blocksize,
				  stx_max_extents(&stx, &ctx->svfs), &h) &&
		    h == (uint32_t)s->arg[3];
	close(fd);
	return same ? NULL : "FIEMAP shows a different map now";
}

/* ---- directories --------------------------------------------------------- */

struct dir_run {
	uint32_t lblk;
	blk64_t pblk;
	uint32_t len;
	blk64_t node;		/* the tree block that maps it, 0: the inode */
};

struct dir_map {
	struct dir_run *r;
	size_t n, alloc;
};

static void collect_dir_run(struct xwalk *w, uint32_t lblk, blk64_t pblk, uint32_t len,
			    bool uninit, blk64_t node)
{
	struct dir_map *m = w->larg;

	if (uninit)
		return;
	if (m->n == m->alloc) {
		m->alloc = m->alloc ? 2 * m->alloc : 8;
		m->r = xrealloc(m->r, m->alloc * sizeof(*m->r));
	}
	m->r[m->n++] = (struct dir_run){ lblk, pblk, len, node };
}

/* A directory entry's record length: 65 536 is written as 0 or 65 535. */
static unsigned rec_len_of(ext2_filsys fs, const struct ext2_dir_entry_2 *de)
{
	return fs->blocksize >= 65536 && (de->rec_len == 0 || de->rec_len == 65535) ?
	       fs->blocksize : de->rec_len;
}

/* The dirents of a leaf block: record lengths chain the block exactly. */
static const char *dirents_bad(ext2_filsys fs, const unsigned char *b)
{
	static char why[96];
	unsigned bs = fs->blocksize, off = 0;
	bool csum = ext2fs_has_feature_metadata_csum(fs->super);

	while (off < bs) {
		const struct ext2_dir_entry_2 *de = (const void *)(b + off);
		unsigned rec;

		/* off is a multiple of 4, not of 8: an entry's header may not fit. */
		if (off + 8 > bs) {
			snprintf(why, sizeof(why), "directory entry at byte %u runs past the "
				 "end of the block", off);
			return why;
		}
		rec = rec_len_of(fs, de);
		if (rec < 8 || rec % 4 || off + rec > bs || (unsigned)de->name_len + 8 > rec) {
			snprintf(why, sizeof(why), "directory entry at byte %u has record "
				 "length %u (name length %u)", off, rec, de->name_len);
			return why;
		}
		/* The checksum tail is an entry of its own: inode 0, rec_len 12. */
		if (csum && off + 12 == bs && de->inode == 0 && rec == 12 && de->file_type == 0xDE)
			break;
		off += rec;
	}
	return NULL;
}

static bool is_dx_node(ext2_filsys fs, const unsigned char *b)
{
	const struct ext2_dir_entry_2 *de = (const void *)b;

	return de->inode == 0 && rec_len_of(fs, de) == fs->blocksize;
}

/*
 * htree index: root (lblk 0, after "." and "..") or an interior node
 * (lblk > 0, after a fake empty entry).  nblocks: the directory's size in
 * blocks, levels: the root's indirect levels (out).
 */
static const char *dx_bad(ext2_filsys fs, const unsigned char *b, bool root, uint64_t nblocks,
			  unsigned *levels)
{
	static char why[128];
	bool csum = ext2fs_has_feature_metadata_csum(fs->super);
	unsigned bs = fs->blocksize, off;

	if (root) {
		const struct ext2_dx_root_info *ri = (const void *)(b + 24);
		unsigned maxlev = ext2fs_has_feature_largedir(fs->super) ? 3 : 2;

		if (ri->reserved_zero || ri->info_length != 8)
			return "htree root information is damaged";
		if (ri->hash_version > EXT2_HASH_SIPHASH) {
			snprintf(why, sizeof(why), "htree root has unknown hash version %u",
				 ri->hash_version);
			return why;
		}
		if (ri->indirect_levels >= maxlev) {
			snprintf(why, sizeof(why), "htree has %u index levels, more than %u",
				 ri->indirect_levels + 1, maxlev);
			return why;
		}
		*levels = ri->indirect_levels;
		off = 32;
	} else {
		off = 8;
	}
	const struct ext2_dx_countlimit *cl = (const void *)(b + off);
	const struct ext2_dx_entry *ent = (const void *)(b + off);
	unsigned want = (bs - off - (csum ? sizeof(struct ext2_dx_tail) : 0)) /
			sizeof(struct ext2_dx_entry);

	if (cl->limit != want || cl->count > cl->limit || cl->count == 0) {
		snprintf(why, sizeof(why), "htree %s has count %u and limit %u (expected "
			 "limit %u)", root ? "root" : "index node", cl->count, cl->limit, want);
		return why;
	}
	for (unsigned i = 0; i < cl->count; i++) {
		if (ent[i].block >= nblocks) {
			snprintf(why, sizeof(why), "htree entry %u points to directory block %u, "
				 "past the end (%llu blocks)", i, ent[i].block,
				 (unsigned long long)nblocks);
			return why;
		}
		if (i > 1 && ent[i].hash < ent[i - 1].hash) {
			snprintf(why, sizeof(why), "htree hashes are out of order at entry %u", i);
			return why;
		}
	}
	return NULL;
}

/*
 * Where an htree block's count and limit are: after the root's "." and ".."
 * and its root information, or after an interior node's fake entry; 0 if
 * the block is neither.
 */
static unsigned dx_countlimit_at(ext2_filsys fs, const unsigned char *b)
{
	const struct ext2_dir_entry_2 *de = (const void *)b;
	const struct ext2_dir_entry_2 *dotdot = (const void *)(b + 12);
	const struct ext2_dx_root_info *ri = (const void *)(b + 24);
	unsigned bs = fs->blocksize;

	if (rec_len_of(fs, de) == bs && de->name_len == 0)
		return 8;
	if (de->rec_len == 12 && rec_len_of(fs, dotdot) == bs - 12 && ri->info_length == 8)
		return 24 + 8;
	return 0;
}

/*
 * A directory block's checksum (metadata_csum): a leaf's is in a 12-byte
 * tail entry over the bytes before it, an htree block's after its index
 * entries (up to its limit), over the entries in use and the tail's first
 * word.  Computed here from the directory's generation, which the caller
 * has: ext2fs_dir_block_csum_verify() reads the directory's inode again
 * for it, one synchronous read per block (2 765 reads, about 0.3 s of the
 * scan's 0.55 s on a kernel tree).
 */
static bool dir_block_csum_ok(ext2_filsys fs, ext2_ino_t ino, uint32_t gen,
			      const unsigned char *b)
{
	unsigned bs = fs->blocksize, at;
	const struct ext2_dir_entry_tail *t = (const void *)(b + bs - sizeof(*t));

	if (!ext2fs_has_feature_metadata_csum(fs->super))
		return true;
	/* An htree block's first entries span the block: its last bytes may look like a tail. */
	if (!(at = dx_countlimit_at(fs, b)))
		return t->det_reserved_zero1 == 0 && t->det_rec_len == sizeof(*t) &&
		       t->det_reserved_name_len == EXT2_DIR_NAME_LEN_CSUM &&
		       ext4_csum(fs, ino, gen, b, bs - sizeof(*t)) == t->det_checksum;

	const struct ext2_dx_countlimit *cl = (const void *)(b + at);
	size_t tail = at + (size_t)cl->limit * sizeof(struct ext2_dx_entry);
	const struct ext2_dx_tail *dt = (const void *)(b + tail);
	uint32_t zero = 0, crc;

	if (cl->count > cl->limit || tail + sizeof(*dt) > bs)
		return false;
	crc = ext4_csum(fs, ino, gen, b, at + (size_t)cl->count * sizeof(struct ext2_dx_entry));
	crc = crc32c(crc, &dt->dt_reserved, sizeof(dt->dt_reserved));
	/* ... and the checksum word as zero. */
	crc = crc32c(crc, &zero, sizeof(zero));
	return crc == dt->dt_checksum;
}

/*
 * Directory-block suspects: blocks [inode, dir block, mapping node];
 * arg[2] the logical block, arg[3] 1 if it is an htree interior node (its
 * only entry is a fake empty one, the index follows).
 */
static const char *dir_block_bad(ext2_filsys fs, ext2_ino_t ino, uint32_t gen,
				 const unsigned char *b, bool dx_node)
{
	const char *why;

	if (!dir_block_csum_ok(fs, ino, gen, b))
		return "directory block checksum does not match";
	if (!dx_node && (why = dirents_bad(fs, b)))
		return why;
	return NULL;
}

static bool node_maps(ext2_filsys fs, const unsigned char *node, size_t size, uint32_t lblk,
		      blk64_t pblk)
{
	const struct ext3_extent_header *eh = (const void *)node;
	const struct ext3_extent *x = (const void *)(eh + 1);

	if (eh->eh_magic != EXT3_EXT_MAGIC || eh->eh_depth != 0 ||
	    eh->eh_entries > (size - sizeof(*eh)) / sizeof(*x))
		return false;
	(void)fs;
	for (unsigned i = 0; i < eh->eh_entries; i++, x++) {
		uint32_t len = x->ee_len > EXT_INIT_MAX_LEN ? x->ee_len - EXT_INIT_MAX_LEN : x->ee_len;

		if (lblk >= x->ee_block && lblk - x->ee_block < len)
			return ext_pblk(x) + (lblk - x->ee_block) == pblk;
	}
	return false;
}

static bool dir_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			  unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;
	uint32_t lblk = (uint32_t)s->arg[2];

	if (!ext4_fresh_inode(ctx, s, bufs, &in) || !inode_in_use_on_disk(&in) ||
	    !LINUX_S_ISDIR(in.i_mode))
		return false;
	/*
	 * Still this directory's block: the inode or the leaf still maps it;
	 * a block map is walked afresh for it (tree_beyond).
	 */
	if (!(in.i_flags & EXT4_EXTENTS_FL)) {
		struct ext2_inode_large again;
		struct xwalk w;

		if (!fresh_walk(ctx, s, bufs, &again, &w, &s->blocks[1]) || !w.found)
			return false;
	} else if (s->nr_blocks == 3 ?
		   !node_maps(fs, bufs[2], fs->blocksize, lblk, s->blocks[1]) :
		   !node_maps(fs, (const unsigned char *)in.i_block, sizeof(in.i_block), lblk,
			      s->blocks[1])) {
		return false;
	}
	if (!strcmp(s->check, CHECK_EXT4_HTREE)) {
		unsigned levels = 0;
		uint64_t nblocks = EXT2_I_SIZE(&in) / fs->blocksize;

		return dx_bad(fs, bufs[1], lblk == 0, nblocks, &levels) != NULL;
	}
	return dir_block_bad(fs, (ext2_ino_t)s->ino, in.i_generation, bufs[1], s->arg[3]) != NULL;
}

static void dir_suspect(struct scrub_ctx *ctx, const char *check, ext2_ino_t ino,
			const struct ext2_inode_large *in, uint32_t lblk, blk64_t pblk,
			blk64_t node, bool dx_node, const char *why)
{
	struct ext4_suspect *s = ext4_inode_suspect(ctx, check, ino, in, dir_still_bad,
		"directory block %u (block %llu): %s", lblk, (unsigned long long)pblk, why);

	ext4_suspect_block(s, pblk);
	if (node)
		ext4_suspect_block(s, node);
	s->arg[2] = lblk;
	s->arg[3] = dx_node;
	/* A block map's other indirect blocks are read afresh (dir_still_bad()). */
	s->tree_beyond = !(in->i_flags & EXT4_EXTENTS_FL);
}

/*
 * Directory blocks are read a batch at a time with many reads in flight
 * (ioengine.h), not one synchronous read after the other: a tree of small
 * directories has about one block per directory, and the scan then waited
 * out the device's latency once per directory (5237 reads on a kernel
 * tree, most of the scan's time on a busy disk).  A directory's check
 * waits for its batch: its inode (a copy) and its runs are held until
 * then, at most DIR_BATCH_BLOCKS blocks' worth of directories.  A
 * directory with more blocks than a batch holds is read block by block,
 * as every directory is with FSCRUB_DEBUG_NO_DIRBATCH=1.  Adjacent blocks
 * are one read; a block of a read that failed is read again by itself, so
 * an unreadable block is found as it was without batches.
 */
/* Blocks per batch: 1 MiB of 4 KiB blocks, about as many directories in a tree of small ones. */
#define DIR_BATCH_BLOCKS 256
/* Reads in flight: the device's queue covers its latency, another load still gets in. */
#define DIR_BATCH_DEPTH 16
/* 4096: the largest logical sector size O_DIRECT may ask for. */
#define DIRECT_ALIGN 4096

struct dir_pending {
	ext2_ino_t ino;
	struct ext2_inode_large *in;	/* a copy, the inode's size */
	struct dir_map dm;
};

struct dir_batch {
	bool off;			/* FSCRUB_DEBUG_NO_DIRBATCH */
	unsigned depth;
	uint64_t bs;			/* the block size */
	struct dir_pending *v;
	size_t n, alloc;
	size_t nblk;
	blk64_t blk[DIR_BATCH_BLOCKS];
	int res[DIR_BATCH_BLOCKS];	/* 0, or a negative errno */
	unsigned char *data;		/* DIR_BATCH_BLOCKS blocks, aligned for O_DIRECT */
	struct io_range ranges[DIR_BATCH_BLOCKS];
	size_t first[DIR_BATCH_BLOCKS];	/* each range's first block in blk[] */
	unsigned long long reads, batches;
};

/* Where check_directory() takes its blocks: NULL reads each one now. */
struct dir_src {
	struct dir_batch *b;
	size_t next;			/* the next of b->blk[] */
};

static int dir_block(struct ext4_state *st, struct dir_src *src, blk64_t pblk,
		     unsigned char **buf)
{
	size_t i;

	if (!src)
		return ext4_read_direct(st, pblk, *buf);
	i = src->next++;
	if (i >= src->b->nblk || src->b->blk[i] != pblk)
		return ext4_read_direct(st, pblk, *buf);	/* cannot happen */
	*buf = src->b->data + i * st->fs->blocksize;
	return src->b->res[i];
}

/* What check_directory() knows of the directory it reads. */
struct dir_check {
	ext2_ino_t ino;
	const struct ext2_inode_large *in;
	uint64_t nblocks;
	bool htree;
	unsigned levels;		/* the htree root's indirect levels */
	struct ext4_htree *index;	/* the htree summed up (ext4_htree.c), NULL: none */
};

/*
 * One directory block, read into buf, mapped by the tree block node:
 * true if it is sound by itself (its findings become suspects).
 */
static bool check_dir_block(struct scrub_ctx *ctx, struct dir_check *dc, uint32_t lblk,
			    blk64_t pblk, blk64_t node, const unsigned char *buf)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	const char *why;
	/*
	 * Interior index nodes exist only below a root with levels; they are
	 * one fake empty entry the size of the block (an empty leaf has the
	 * same, without checksums: so only where the root says there are any).
	 */
	bool dx_node = dc->htree && lblk > 0 && dc->levels > 0 && is_dx_node(fs, buf);

	why = dir_block_bad(fs, dc->ino, dc->in->i_generation, buf, dx_node);
	if (why) {
		dir_suspect(ctx, CHECK_EXT4_DIR_BLOCK, dc->ino, dc->in, lblk, pblk, node, dx_node,
			    why);
		return false;
	}
	if (!(dc->htree && (lblk == 0 || dx_node)))
		return true;
	why = dx_bad(fs, buf, lblk == 0, dc->nblocks, lblk == 0 ? &dc->levels : &(unsigned){ 0 });
	if (why)
		dir_suspect(ctx, CHECK_EXT4_HTREE, dc->ino, dc->in, lblk, pblk, node, dx_node, why);
	return why == NULL;
}

/* The htree's extent: up to the last block mapped, within the directory's size. */
static uint32_t dir_span(const struct dir_map *m, uint64_t nblocks)
{
	uint64_t end = m->n ? m->r[m->n - 1].lblk + (uint64_t)m->r[m->n - 1].len : 0;

	return (uint32_t)(end < nblocks ? end : nblocks);
}

static void check_directory(struct scrub_ctx *ctx, ext2_ino_t ino,
			    const struct ext2_inode_large *in, const struct dir_map *m,
			    unsigned char *scratch, struct dir_src *src)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	struct dir_check dc = { ino, in, EXT2_I_SIZE(in) / fs->blocksize,
				(in->i_flags & EXT2_INDEX_FL) && ext2fs_has_feature_dir_index(fs->super),
				0, NULL };

	if (dc.htree)
		dc.index = ext4_htree_begin(fs, ino, in, dir_span(m, dc.nblocks));
	/* Runs are in logical order: block 0 (the htree root) comes first. */
	for (size_t i = 0; i < m->n; i++) {
		for (uint32_t k = 0; k < m->r[i].len; k++) {
			uint32_t lblk = m->r[i].lblk + k;
			blk64_t pblk = m->r[i].pblk + k;
			unsigned char *buf = scratch;
			bool sound = false;
			int ret;

			/* Past the end: preallocated. */
			if (lblk >= dc.nblocks || scrub_should_stop(ctx))
				break;
			st->dir_blocks++;
			if ((ret = dir_block(st, src, pblk, &buf)) < 0) {
				if (errno_is_corruption(-ret))
					dir_suspect(ctx, CHECK_EXT4_DIR_BLOCK, ino, in, lblk, pblk,
						    m->r[i].node, false, strerror(-ret));
			} else {
				sound = check_dir_block(ctx, &dc, lblk, pblk, m->r[i].node, buf);
			}
			if (dc.index && sound)
				ext4_htree_block(dc.index, lblk, pblk, buf);
			else if (dc.index)
				ext4_htree_spoil(dc.index);
		}
	}
	if (dc.index && scrub_should_stop(ctx))
		ext4_htree_spoil(dc.index);
	if (dc.index)
		ext4_htree_end(ctx, dc.index, in);
}

/*
 * The blocks check_directory() reads, in its order, into out (at most max);
 * returns how many there are.
 */
static size_t dir_blocks_of(ext2_filsys fs, const struct ext2_inode_large *in,
			    const struct dir_map *m, blk64_t *out, size_t max)
{
	uint64_t nblocks = EXT2_I_SIZE(in) / fs->blocksize;
	size_t n = 0;

	for (size_t i = 0; i < m->n; i++)
		for (uint32_t k = 0; k < m->r[i].len && m->r[i].lblk + k < nblocks; k++) {
			if (n < max)
				out[n] = m->r[i].pblk + k;
			n++;
		}
	return n;
}

static void dir_batch_init(struct scrub_ctx *ctx, struct dir_batch *b)
{
	memset(b, 0, sizeof(*b));
	b->off = getenv("FSCRUB_DEBUG_NO_DIRBATCH") != NULL;
	b->depth = ctx->opt.background ? 1 : DIR_BATCH_DEPTH;
	b->bs = ext4_state(ctx)->fs->blocksize;
	if (!b->off && posix_memalign((void **)&b->data, DIRECT_ALIGN,
				      (size_t)DIR_BATCH_BLOCKS * b->bs))
		abort();
}

/* A read of blocks first[ri].. (into their places: batch_slot()): each one's result. */
static void batch_read_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct dir_batch *b = arg;
	size_t ri = (size_t)(r - b->ranges);

	(void)buf;
	for (size_t i = b->first[ri], k = 0; k * b->bs < r->len; i++, k++) {
		if (res < 0)
			b->res[i] = (int)res;
		else if ((uint64_t)res < (k + 1) * b->bs)
			b->res[i] = -EIO;	/* short: past the end of the device */
		else
			b->res[i] = 0;
	}
}

/*
 * A read's blocks are adjacent in data too (dir_batch_read() merges only
 * those): it goes straight there, from its first block's place on.
 */
static char *batch_slot(void *arg, size_t ri)
{
	struct dir_batch *b = arg;

	return (char *)b->data + b->first[ri] * b->bs;
}

/* Read every block of the batch: adjacent ones in one read, many in flight. */
static void dir_batch_read(struct ext4_state *st, struct dir_batch *b)
{
	uint64_t count = ext2fs_blocks_count(st->fs->super);
	size_t nr = 0, longest = 1;

	for (size_t i = 0; i < b->nblk; i++) {
		b->res[i] = -ERANGE;	/* as ext4_read_direct() says of it */
		if (b->blk[i] >= count)
			continue;
		/* The block after the last range's, and the next in blk[]: one read. */
		if (nr && b->ranges[nr - 1].off + b->ranges[nr - 1].len == b->blk[i] * b->bs &&
		    b->first[nr - 1] + b->ranges[nr - 1].len / b->bs == i) {
			b->ranges[nr - 1].len += b->bs;
			if (b->ranges[nr - 1].len / b->bs > longest)
				longest = b->ranges[nr - 1].len / b->bs;
			continue;
		}
		b->first[nr] = i;
		b->ranges[nr++] = (struct io_range){ .off = b->blk[i] * b->bs, .len = b->bs };
	}
	struct io_job job = {
		.fd = st->direct_fd, .ranges = b->ranges, .nr_ranges = nr, .depth = b->depth,
		.max_len = longest * b->bs, .align = DIRECT_ALIGN,
		.no_uring = getenv("FSCRUB_DEBUG_NO_URING") != NULL,
		.done = batch_read_done, .buffer = batch_slot, .arg = b,
	};
	int ret = nr ? ioengine_run(&job) : 0;

	b->reads += nr;
	b->batches++;
	for (size_t ri = 0; ri < nr; ri++)
		for (size_t i = b->first[ri], k = 0; k * b->bs < b->ranges[ri].len; i++, k++)
			/* The engine failed, or one bad block failed a longer read: each by itself. */
			if (ret < 0 || (b->res[i] < 0 && b->ranges[ri].len > b->bs))
				b->res[i] = ext4_read_direct(st, b->blk[i], b->data + i * b->bs);
}

/* Read the held directories' blocks and check them. */
static void dir_batch_flush(struct scrub_ctx *ctx, struct dir_batch *b)
{
	struct dir_src src = { .b = b };

	if (!b->n)
		return;
	dir_batch_read(ext4_state(ctx), b);
	for (size_t i = 0; i < b->n; i++) {
		struct dir_pending *p = &b->v[i];

		if (!scrub_should_stop(ctx))
			check_directory(ctx, p->ino, p->in, &p->dm, NULL, &src);
		free(p->dm.r);
		free(p->in);
	}
	b->n = b->nblk = 0;
}

/*
 * Check directory ino now (batches off, or too many blocks for one) or
 * with its batch; takes m's runs either way.
 */
static void dir_batch_add(struct scrub_ctx *ctx, struct dir_batch *b, ext2_ino_t ino,
			  const struct ext2_inode_large *in, struct dir_map *m, unsigned char *buf)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	size_t n = b->off ? 0 : dir_blocks_of(fs, in, m, NULL, 0);

	if (b->off || n > DIR_BATCH_BLOCKS) {
		check_directory(ctx, ino, in, m, buf, NULL);
		free(m->r);
		return;
	}
	if (b->nblk + n > DIR_BATCH_BLOCKS)
		dir_batch_flush(ctx, b);
	if (b->n == b->alloc) {
		b->alloc = b->alloc ? 2 * b->alloc : 64;
		b->v = xrealloc(b->v, b->alloc * sizeof(*b->v));
	}
	struct dir_pending *p = &b->v[b->n++];

	p->ino = ino;
	p->in = xmalloc(EXT2_INODE_SIZE(fs->super));
	memcpy(p->in, in, EXT2_INODE_SIZE(fs->super));
	p->dm = *m;
	b->nblk += dir_blocks_of(fs, in, m, b->blk + b->nblk, DIR_BATCH_BLOCKS - b->nblk);
}

/* What is held is checked; then everything is freed. */
static void dir_batch_release(struct scrub_ctx *ctx, struct dir_batch *b)
{
	dir_batch_flush(ctx, b);
	if (b->reads)
		report_verbose(ctx, "Phase 3: ext4: directory blocks read %u at a time: %llu "
			       "reads in %llu batches", b->depth, b->reads, b->batches);
	free(b->v);
	free(b->data);
	b->v = NULL;
	b->data = NULL;
	b->reads = 0;
}

/* ---- the block bitmap against use ---------------------------------------- */

struct claim {
	struct scrub_ctx *ctx;
	ext2_ino_t ino;
	const struct ext2_inode_large *in;
	unsigned long long bad;		/* blocks used but free in the bitmap */
	blk64_t first_bad, last_bad;
	struct dir_map *dir;
	bool is_journal;		/* the internal journal's inode */
	bool in_meta;			/* block meta is also group metadata */
	blk64_t meta;
	bool in_journal;		/* blocks [jfirst, jlast] are also the journal's */
	blk64_t jfirst, jlast;
	bool in_badlist;		/* block bad_listed is in the bad-blocks inode */
	blk64_t bad_listed;
};

/*
 * The bad-blocks inode's blocks into st->badblocks (it comes first in the
 * scan); another inode's that are among them into c->bad_listed (e2fsck's
 * pass 1B: "shared with <The bad blocks inode>").
 */
static void claim_badlist(struct claim *c, blk64_t p, uint64_t len)
{
	struct ext4_state *st = ext4_state(c->ctx);
	blk64_t first;

	if (c->ino == EXT2_BAD_INO) {
		if (!st->badblocks &&
		    ext2fs_allocate_block_bitmap(st->fs, "bad blocks", &st->badblocks))
			return;
		ext2fs_mark_block_bitmap_range2(st->badblocks, p, (unsigned)len);
	} else if (st->badblocks && !c->in_badlist && ext2fs_find_first_set_block_bitmap2(
			   st->badblocks, p, p + len - 1, &first) == 0) {
		c->bad_listed = first;
		c->in_badlist = true;
	}
}

static void claim_range(struct claim *c, blk64_t p, uint64_t len)
{
	ext2_filsys fs = ext4_state(c->ctx)->fs;
	blk64_t zero;

	struct ext4_state *st = ext4_state(c->ctx);
	blk64_t first, last;

	ext2fs_mark_block_bitmap_range2(st->claimed, p, (unsigned)len);
	claim_badlist(c, p, len);
	if (ext2fs_find_first_zero_block_bitmap2(fs->block_map, p, p + len - 1, &zero) == 0) {
		if (!c->bad)
			c->first_bad = zero;
		for (blk64_t b = zero; b < p + len; b++)
			if (!ext2fs_test_block_bitmap2(fs->block_map, b)) {
				c->bad++;
				c->last_bad = b;
			}
	}
	/* The bad-blocks and resize inodes own metadata blocks by design. */
	if (!c->in_meta && c->ino != EXT2_BAD_INO && c->ino != EXT2_RESIZE_INO &&
	    ext2fs_find_first_set_block_bitmap2(st->metadata, p, p + len - 1, &first) == 0) {
		c->meta = first;
		c->in_meta = true;
	}
	if (!c->is_journal && ext4_journal_overlap(st, p, len, &first, &last)) {
		if (!c->in_journal || first < c->jfirst)
			c->jfirst = first;
		if (!c->in_journal || last > c->jlast)
			c->jlast = last;
		c->in_journal = true;
	}
}

static void claim_node(struct xwalk *w, blk64_t blk)
{
	claim_range(w->larg, blk, 1);
}

static void claim_leaf(struct xwalk *w, uint32_t lblk, blk64_t pblk, uint32_t len, bool uninit,
		       blk64_t node)
{
	struct claim *c = w->larg;

	claim_range(c, pblk, len);
	if (c->dir) {
		w->larg = c->dir;
		collect_dir_run(w, lblk, pblk, len, uninit, node);
		w->larg = c;
	}
}

/*
 * The filesystem's own metadata, group by group, into st->metadata, and
 * st->claimed starts as a copy; places outside the filesystem (a damaged
 * descriptor, ext4.group_desc) claim nothing.
 */
static errcode_t claim_metadata(struct ext4_state *st)
{
	ext2_filsys fs = st->fs;

	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk64_t bb = ext2fs_block_bitmap_loc(fs, g), ib = ext2fs_inode_bitmap_loc(fs, g);
		blk64_t it = ext2fs_inode_table_loc(fs, g);

		ext2fs_reserve_super_and_bgd(fs, g, st->metadata);
		if (ext4_blocks_in_fs(fs, bb, 1))
			ext2fs_mark_block_bitmap2(st->metadata, bb);
		if (ext4_blocks_in_fs(fs, ib, 1))
			ext2fs_mark_block_bitmap2(st->metadata, ib);
		if (ext4_blocks_in_fs(fs, it, fs->inode_blocks_per_group))
			ext2fs_mark_block_bitmap_range2(st->metadata, it, fs->inode_blocks_per_group);
	}
	if (ext2fs_has_feature_mmp(fs->super) && fs->super->s_mmp_block)
		ext2fs_mark_block_bitmap2(st->metadata, fs->super->s_mmp_block);
	return ext2fs_copy_bitmap(st->metadata, &st->claimed);
}

/* Blocks marked in use that nothing claims: an info (preallocation does it). */
static void report_unclaimed(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	unsigned long long n = 0;
	blk64_t ex[LEAK_EXAMPLES];
	struct strbuf sb = STRBUF_INIT;

	for (blk64_t b = fs->super->s_first_data_block; b < ext2fs_blocks_count(fs->super); b++)
		if (ext2fs_fast_test_block_bitmap2(fs->block_map, b) &&
		    !ext2fs_fast_test_block_bitmap2(st->claimed, b)) {
			if (n < LEAK_EXAMPLES)
				ex[n] = b;
			n++;
		}
	if (!n)
		return;
	for (unsigned long long i = 0; i < n && i < LEAK_EXAMPLES; i++)
		strbuf_addf(&sb, "%s%llu", i ? ", " : "", (unsigned long long)ex[i]);
	str_info(ctx, CHECK_EXT4_BLOCK_BITMAP, NULL, NULL, 0,
		 "%llu blocks are marked in use that no inode or metadata claims (e.g. %s%s): "
		 "preallocation on a live filesystem, or blocks leaked", n, sb.buf,
		 n > LEAK_EXAMPLES ? ", ..." : "");
	strbuf_release(&sb);
}

/* ---- one inode ----------------------------------------------------------- */

static bool special_inode(ext2_filsys fs, ext2_ino_t ino, const struct ext2_inode_large *in)
{
	const struct ext2_super_block *sb = fs->super;

	return ino < EXT2_FIRST_INODE(sb) || ino == sb->s_journal_inum ||
	       ino == sb->s_usr_quota_inum || ino == sb->s_grp_quota_inum ||
	       ino == sb->s_prj_quota_inum || ino == sb->s_orphan_file_inum ||
	       (in->i_flags & EXT4_EA_INODE_FL);
}

/* ---- inodes in use that the inode bitmap calls free ---------------------- */

/*
 * Blocks [inode table block, inode bitmap, descriptor block]; arg[2] the
 * inode's bit in its group.  The bit as the fresh bitmap block holds it
 * (0 or 1), or -1 when that block is no longer the one the fresh
 * descriptor names or the group's bitmap is not initialised (a changed
 * group: nothing to judge).
 */
static int fresh_inode_bit(ext2_filsys fs, const struct ext4_suspect *s,
			   unsigned char *const *bufs)
{
	dgrp_t g = (dgrp_t)((s->ino - 1) / fs->super->s_inodes_per_group);
	const struct ext4_group_desc *gd = ext4_gd_in_block(fs, g, bufs[2]);
	blk64_t bm = (blk64_t)gd->bg_inode_bitmap |
		     (EXT2_DESC_SIZE(fs->super) >= EXT2_MIN_DESC_SIZE_64BIT ?
		      (blk64_t)gd->bg_inode_bitmap_hi << 32 : 0);

	if (bm != s->blocks[1] || (gd->bg_flags & EXT2_BG_INODE_UNINIT))
		return -1;
	return (bufs[1][s->arg[2] / 8] >> (s->arg[2] % 8)) & 1;
}

/*
 * Blocks and arg[2] as fresh_inode_bit().  Still in use on the disk, the
 * same inode (the generation), its bit still clear in the bitmap the fresh
 * descriptor names.
 */
static bool marked_free_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				  unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && inode_in_use_on_disk(&in) &&
	       fresh_inode_bit(fs, s, bufs) == 0;
}

/* The kernel's view: the inode, by handle, still has links and did not change. */
static const char *marked_free_kernel_view(struct scrub_ctx *ctx, const struct ext4_suspect *s)
{
	uint32_t nlink;
	const char *why;

	if ((why = kernel_nlink(ctx, s, &nlink)))
		return why;
	return nlink ? NULL : "the kernel says it has no links (open and unlinked)";
}

/*
 * An inode the bitmap calls free that looks in use (links, no deletion
 * time, a mode) and that no name reached: e2fsck's pass 1 takes it for in
 * use by its link count, pass 4 finds it unattached and pass 5 the bitmap
 * difference.  (One a name reached is check_reached_marked_free()'s.)
 * Only in the part of its group's table that has been in use -- past it,
 * lazy_itable_init may not have zeroed the slots yet -- with a good
 * checksum, not changed during the scan; the kernel's view is an orphan's.
 */
static void check_unreached_marked_free(struct scrub_ctx *ctx, ext2_ino_t ino,
					const struct ext2_inode_large *in)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	dgrp_t g = (ino - 1) / ipg;

	if (!inode_in_use_on_disk(in) || special_inode(fs, ino, in) ||
	    (ino - 1) % ipg >= ext4_itable_in_use(fs, g) || atomic_load(&ctx->names_hidden) ||
	    backend_reached(ctx, stx_devno(&ctx->root_stx), ino) ||
	    !ext4_inode_csum_ok(fs, ino, in) || inode_recent(ctx, in, EXT2_INODE_SIZE(fs->super)))
		return;
	struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_INODE_BITMAP, ino, in,
		marked_free_still_bad, "%s of %llu bytes, link count %u, no deletion time, is marked "
		"free in the inode bitmap of group %u, and no name was found for it",
		inode_mode_name(in->i_mode), (unsigned long long)EXT2_I_SIZE(in),
		in->i_links_count, g);

	ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, g));
	ext4_suspect_block(s, ext4_gd_block(fs, g));
	s->arg[2] = (ino - 1) % ipg;
	s->kernel_view = orphan_kernel_view;
	s->no_name = true;
}

/*
 * Blocks and arg[2] as fresh_inode_bit().  Still deleted (no links, a
 * deletion time, not an orphan link), still marked in use in the bitmap
 * the fresh descriptor names.
 */
static bool deleted_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			      unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && in.i_links_count == 0 &&
	       in.i_dtime > fs->super->s_inodes_count && fresh_inode_bit(fs, s, bufs) == 1;
}

/*
 * Does the inode's dtime say it is an orphan (a list link, or 0 with no
 * links)?  Both but for 0 with links, an inode in ordinary use.
 */
static bool orphan_by_dtime(ext2_filsys fs, const struct ext2_inode_large *in)
{
	return in->i_mode && in->i_dtime <= fs->super->s_inodes_count &&
	       (in->i_links_count == 0 || in->i_dtime);
}

/*
 * Blocks and arg[2] as fresh_inode_bit(), arg[3] the first read's dtime.
 * The same inode, still an orphan by the same dtime (joining or leaving
 * the orphan list rewrites it), still marked in use.
 */
static bool unlisted_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
			       unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct ext2_inode_large in;

	return ext4_fresh_inode(ctx, s, bufs, &in) && orphan_by_dtime(fs, &in) &&
	       in.i_dtime == s->arg[3] && fresh_inode_bit(fs, s, bufs) == 1;
}

/*
 * The kernel's view: an inode it has open (unlinked, not yet on the disk's
 * list) comes back by handle; one with no links that it does not hold is
 * ESTALE ("no longer in use"), which is the damage itself.
 */
static const char *unlisted_kernel_view(struct scrub_ctx *ctx, const struct ext4_suspect *s)
{
	int fd = open_inode(ctx, (ext2_ino_t)s->ino, (uint32_t)s->arg[1], O_PATH);

	if (fd >= 0) {
		close(fd);
		return "the kernel holds it open, unlinked";
	}
	return errno == ESTALE ? NULL : "the kernel cannot be asked for the inode by handle";
}

/*
 * e2fsck's pass 1 "Inodes that were part of a corrupted orphan linked list
 * found", "Deleted inode has zero dtime": an inode marked in use that its
 * dtime makes an orphan (orphan_by_dtime()) and that neither the
 * superblock's orphan list nor the orphan file names.  The kernel puts an
 * inode on one of them in the transaction that takes its last link (or
 * starts a truncate) and takes it off in the one that frees it (or ends
 * the truncate); off both, one with no links is freed by no one, its
 * blocks lost, and one with links keeps a list link as its dtime (e2fsck:
 * "is in use, but has dtime set").  A dtime above the inode count is a
 * time: check_deleted_marked_used()'s, or ext4_xref.c's with links.
 */
static void check_unlisted_orphan(struct scrub_ctx *ctx, ext2_ino_t ino,
				  const struct ext2_inode_large *in)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	struct ext4_suspect *s;

	if (!orphan_by_dtime(fs, in) || special_inode(fs, ino, in) ||
	    ext4_orphan_listed(st, ino) || inode_recent(ctx, in, EXT2_INODE_SIZE(fs->super)))
		return;
	if (in->i_links_count)
		s = ext4_inode_suspect(ctx, CHECK_EXT4_ORPHAN_LIST, ino, in, unlisted_still_bad,
			"%s, link count %u, has an orphan-list link as its deletion time (dtime %u), "
			"but is on no orphan list", inode_mode_name(in->i_mode),
			in->i_links_count, in->i_dtime);
	else
		s = ext4_inode_suspect(ctx, CHECK_EXT4_ORPHAN_LIST, ino, in, unlisted_still_bad,
			"%s of %llu bytes, owner %u:%u, has no links and is marked in use in the "
			"inode bitmap of group %u, but is on no orphan list (dtime %u): nothing will "
			"free it", inode_mode_name(in->i_mode), (unsigned long long)EXT2_I_SIZE(in),
			inode_uid(*in), inode_gid(*in), (ino - 1) / ipg, in->i_dtime);
	ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, (ino - 1) / ipg));
	ext4_suspect_block(s, ext4_gd_block(fs, (ino - 1) / ipg));
	s->arg[2] = (ino - 1) % ipg;
	s->arg[3] = in->i_dtime;
	/* The kernel holding an unlinked inode open is its own orphan; a linked one says nothing. */
	if (!in->i_links_count) {
		s->kernel_view = unlisted_kernel_view;
		s->no_name = true;
	}
}

/*
 * e2fsck's pass 5 "inode bitmap differences: -N": a deleted inode (no
 * links, a deletion time) still marked in use.  The kernel sets the
 * deletion time and clears the bit in one transaction (ext4_evict_inode),
 * so a lag between the two is a recent transaction, which the
 * confirmation rules out.
 */
static void check_deleted_marked_used(struct scrub_ctx *ctx, ext2_ino_t ino,
				      const struct ext2_inode_large *in)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	struct ext4_suspect *s;

	if (ino < EXT2_FIRST_INODE(fs->super))
		return;
	s = ext4_inode_suspect(ctx, CHECK_EXT4_INODE_BITMAP, ino, in, deleted_still_bad,
		"%s deleted (dtime %u, no links) is still marked in use in the inode bitmap of "
		"group %u", inode_mode_name(in->i_mode), in->i_dtime, (ino - 1) / ipg);
	ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, (ino - 1) / ipg));
	ext4_suspect_block(s, ext4_gd_block(fs, (ino - 1) / ipg));
	s->arg[2] = (ino - 1) % ipg;
}

/*
 * e2fsck's pass 5 "inode bitmap differences" for the inodes that matter:
 * every inode a name reached in the walk (unchanged since) must be marked
 * in use in the inode bitmap, or the allocator may hand its number out
 * again.  The inode scan reads only the inodes the bitmap marks, so these
 * are read here, from the disk.
 */
static void check_reached_marked_free(struct scrub_ctx *ctx, unsigned char *buf)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	struct ext2_inode_large in;

	for (dgrp_t g = 0; g < st->nr_seen_groups && !scrub_should_stop(ctx); g++) {
		struct ext4_seen *chunk = atomic_load(&st->seen[g]);

		for (uint32_t i = 0; chunk && i < ipg; i++) {
			ext2_ino_t ino = g * ipg + i + 1;
			blk64_t blk;
			unsigned off;

			if (!atomic_load(&chunk[i].nlink) ||
			    (atomic_load(&chunk[i].flags) & EXT4_SEEN_CHANGED) ||
			    ext2fs_fast_test_inode_bitmap2(fs->inode_map, ino) ||
			    !ext4_inode_location(fs, ino, &blk, &off) ||
			    ext4_read_direct(st, blk, buf) < 0)
				continue;
			inode_from_block(fs, buf, off, &in);
			if (!inode_in_use_on_disk(&in) || inode_recent(ctx, &in, EXT2_INODE_SIZE(fs->super)))
				continue;
			struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_INODE_BITMAP,
				ino, &in, marked_free_still_bad, "%s with %u links, reached by "
				"a name, is marked free in the inode bitmap of group %u",
				inode_mode_name(in.i_mode), in.i_links_count, g);

			ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, g));
			ext4_suspect_block(s, ext4_gd_block(fs, g));
			s->arg[2] = i;
			s->kernel_view = marked_free_kernel_view;
		}
	}
}

/* A suspect that inode ino's block b is also someone else's. */
static struct ext4_suspect *shared_suspect(struct scrub_ctx *ctx, const char *check,
					   ext2_ino_t ino, const struct ext2_inode_large *in,
					   const struct xwalk *w, blk64_t b, const char *msg)
{
	struct ext4_suspect *s = ext4_inode_suspect(ctx, check, ino, in, shared_still_bad, "%s",
						     msg);

	ext4_suspect_tree(s, w->tree, w->nr_tree);
	s->arg[2] = b;
	return s;
}

/* Is b a block or inode bitmap, or in an inode table, of any group? */
static bool group_table_block(ext2_filsys fs, blk64_t b)
{
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk64_t it = ext2fs_inode_table_loc(fs, g);

		if (b == ext2fs_block_bitmap_loc(fs, g) || b == ext2fs_inode_bitmap_loc(fs, g) ||
		    (it && b >= it && b - it < fs->inode_blocks_per_group))
			return true;
	}
	return false;
}

/*
 * e2fsck's pass 1 on the bad-blocks inode: the first listed block that is
 * group 0's superblock or descriptors, a bitmap or an inode table block
 * ("The primary superblock (1) is on the bad block list", "Group 0's
 * block bitmap (3) is bad"), else 0.  The kernel reads and writes it as
 * metadata all the same.  A backup superblock or its descriptors may be
 * listed: mke2fs lists them and only warns.
 */
static blk64_t badlisted_metadata(const struct ext4_state *st)
{
	ext2_filsys fs = st->fs;
	blk64_t b = fs->super->s_first_data_block, end = ext2fs_blocks_count(fs->super) - 1, hit;

	while (st->badblocks && b <= end &&
	       ext2fs_find_first_set_block_bitmap2(st->badblocks, b, end, &hit) == 0) {
		if (ext2fs_test_block_bitmap2(st->metadata, hit) &&
		    (ext2fs_group_of_blk2(fs, hit) == 0 || group_table_block(fs, hit)))
			return hit;
		b = hit + 1;
	}
	return 0;
}

/* The bad-blocks inode's list against the metadata (see badlisted_metadata()). */
static void check_badlist(struct scrub_ctx *ctx, const struct ext2_inode_large *in,
			  const struct xwalk *w)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	blk64_t b = badlisted_metadata(ext4_state(ctx));
	struct strbuf sb = STRBUF_INIT;
	char owner[64];

	if (!b || !ext4_metadata_owner(fs, b, owner, sizeof(owner)))
		return;
	strbuf_addf(&sb, "block %llu, %s, is in the bad blocks list: the kernel uses it as "
		    "metadata all the same", (unsigned long long)b, owner);
	shared_suspect(ctx, CHECK_EXT4_CROSSLINK, EXT2_BAD_INO, in, w, b, sb.buf);
	strbuf_release(&sb);
}

/*
 * e2fsck's pass 1B for the blocks that never move while mounted: an
 * inode's block that is also group metadata, or the journal's (the
 * journal itself included: its blocks must be no metadata).  None with
 * the shared_blocks feature, where e2fsck takes any block claimed twice
 * for shared.
 */
static void check_shared(struct scrub_ctx *ctx, ext2_ino_t ino, const struct ext2_inode_large *in,
			 const struct claim *c, const struct xwalk *w)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	struct strbuf sb = STRBUF_INIT;
	char owner[64];

	if (c->ino == EXT2_BAD_INO)
		check_badlist(ctx, in, w);
	if (ctx->quirks & QUIRK_BLOCKS_SHARED)
		return;		/* shared_blocks: said in phase 1 */
	if (c->in_meta && ext4_metadata_owner(fs, c->meta, owner, sizeof(owner))) {
		strbuf_addf(&sb, "block %llu, %s, is also %s", (unsigned long long)c->meta,
			    c->is_journal ? "the journal's" : "used by this inode", owner);
		/*
		 * A journal mapped over metadata cannot be read to tell recent
		 * blocks from old; the kernel never rewrites its inode.
		 */
		shared_suspect(ctx, c->is_journal ? CHECK_EXT4_JOURNAL : CHECK_EXT4_CROSSLINK,
			       ino, in, w, c->meta, sb.buf)->journal_free = c->is_journal;
		strbuf_reset(&sb);
	}
	if (c->in_journal) {
		strbuf_addf(&sb, "blocks %llu-%llu of the journal (inode %u) are also used by "
			    "this %s", (unsigned long long)c->jfirst, (unsigned long long)c->jlast,
			    fs->super->s_journal_inum, inode_mode_name(in->i_mode));
		shared_suspect(ctx, CHECK_EXT4_JOURNAL, ino, in, w, c->jfirst, sb.buf);
		strbuf_reset(&sb);
	}
	if (c->in_badlist) {
		strbuf_addf(&sb, "block %llu, used by this %s, is in the bad blocks list "
			    "(inode %u)", (unsigned long long)c->bad_listed,
			    inode_mode_name(in->i_mode), EXT2_BAD_INO);
		shared_suspect(ctx, CHECK_EXT4_CROSSLINK, ino, in, w, c->bad_listed, sb.buf);
	}
	strbuf_release(&sb);
}

static void check_against_walk(struct scrub_ctx *ctx, ext2_ino_t ino,
			       const struct ext2_inode_large *in, struct xwalk *w, bool tree_ok)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	unsigned isize = EXT2_INODE_SIZE(fs->super);
	struct ext4_seen *seen = seen_slot(st, ino, false);
	uint16_t nl = seen ? atomic_load(&seen->nlink) : 0;
	uint16_t flags = seen ? atomic_load(&seen->flags) : 0;

	if (special_inode(fs, ino, in) || !inode_in_use_on_disk(in) || inode_recent(ctx, in, isize))
		return;
	if (!backend_reached(ctx, stx_devno(&ctx->root_stx), ino)) {
		/*
		 * The walk did not see every name (a bind mount of a
		 * subdirectory, a covered directory): an unreached inode is
		 * no evidence, and confirming each one costs a re-read; they
		 * are counted for one info instead (report_unreached).
		 */
		if (atomic_load(&ctx->names_hidden)) {
			st->unreached++;
			return;
		}
		struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_ORPHAN, ino, in,
			orphan_still_bad, "%s of %llu bytes, owner %u:%u, link count %u, is in use "
			"but no name was found for it", inode_mode_name(in->i_mode),
			(unsigned long long)EXT2_I_SIZE(in), inode_uid(*in), inode_gid(*in),
			in->i_links_count);
		uint32_t ipg = fs->super->s_inodes_per_group;

		ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, (ino - 1) / ipg));
		s->arg[2] = (ino - 1) % ipg;
		s->kernel_view = orphan_kernel_view;
		s->no_name = true;
		return;
	}
	if (!nl || (flags & EXT4_SEEN_CHANGED))
		return;
	unsigned walk_nlink = nl - 1u;

	if (in->i_links_count != walk_nlink && walk_nlink < SEEN_NLINK_MAX &&
	    !(LINUX_S_ISDIR(in->i_mode) && in->i_links_count == DIR_NLINK_UNCOUNTED)) {
		struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_NLINK, ino, in,
			nlink_still_bad, "link count on the disk is %u, the kernel shows %u",
			in->i_links_count, walk_nlink);

		s->arg[2] = in->i_links_count;
		s->arg[3] = walk_nlink;
		s->kernel_view = nlink_kernel_view;
	}
	if (tree_ok && (flags & EXT4_SEEN_MAP) && LINUX_S_ISREG(in->i_mode) &&
	    (in->i_flags & EXT4_EXTENTS_FL)) {
		uint32_t disk = digest_end(&w->digest), walk = atomic_load(&seen->map_hash);

		if (disk == walk)
			return;
		struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_EXTENT_MAP, ino, in,
			map_still_bad, "the extent tree on the disk (%llu extents) maps other "
			"blocks than FIEMAP shows", w->digest.runs);

		if (w->nr_tree >= EXT4_SUSPECT_BLOCKS)
			s->cleared = "its extent tree has too many blocks to be confirmed";
		for (unsigned i = 0; i < w->nr_tree && i < EXT4_SUSPECT_BLOCKS - 1; i++)
			ext4_suspect_block(s, w->tree[i]);
		s->arg[2] = disk;
		s->arg[3] = walk;
		s->kernel_view = map_kernel_view;
	}
}

static void check_one_inode(struct scrub_ctx *ctx, ext2_ino_t ino, struct ext2_inode_large *in,
			    struct disk_fetch *df, struct dir_batch *db, unsigned char *buf)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	struct dir_map dm = { 0 };
	struct claim c = { .ctx = ctx, .ino = ino, .in = in };
	struct xwalk w;
	bool tree_ok = true;

	c.is_journal = st->journal_known && ino == fs->super->s_journal_inum;

	st->inodes_scanned++;
	if (!ext4_inode_csum_ok(fs, ino, in)) {
		struct ext4_suspect *s = ext4_inode_suspect(ctx, CHECK_EXT4_INODE_CSUM, ino, in,
			inode_csum_still_bad, "inode checksum does not match (%s, link count %u)",
			inode_mode_name(in->i_mode), in->i_links_count);

		ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, (ino - 1) / ipg));
		s->arg[2] = (ino - 1) % ipg;
		return;		/* nothing else in it can be trusted */
	}
	check_unlisted_orphan(ctx, ino, in);
	if (!(in->i_links_count == 0 && in->i_dtime > fs->super->s_inodes_count)) {
		ext4_quota_note(ctx, ino, in, inode_recent(ctx, in, EXT2_INODE_SIZE(fs->super)));
		ext4_eainode_note_body(ctx, ino, in);
	}
	if (in->i_links_count == 0 && in->i_dtime) {
		/* A dtime below the inode count links the orphan list: open, unlinked. */
		if (in->i_dtime > fs->super->s_inodes_count)
			check_deleted_marked_used(ctx, ino, in);
		else if (ext2fs_file_acl_block(fs, (struct ext2_inode *)in))
			ext4_eainode_unknown(ctx);	/* its block's EA inodes are not noted */
		return;
	}
	bool flags_ok = ext4_xref_inode(ctx, ino, in);

	xwalk_init(&w, fs, ino, in, fetch_disk, df);
	if (LINUX_S_ISDIR(in->i_mode))
		c.dir = &dm;
	w.node = claim_node;
	w.leaf = claim_leaf;
	w.larg = &c;
	if (mapped_by_blocks(fs, ino, in)) {
		/* An extent tree, or an ext2/ext3 block map (walk_blockmap()). */
		tree_ok = xwalk_run(&w, in);
		if (!tree_ok) {
			char where[48];

			if (w.bad_node)
				snprintf(where, sizeof(where), "%s %llu",
					 w.blockmap ? "indirect block" : "block",
					 (unsigned long long)w.bad_node);
			else
				snprintf(where, sizeof(where), "%s in the inode",
					 w.blockmap ? "pointers" : "root");
			struct ext4_suspect *s = ext4_inode_suspect(ctx, c.is_journal ?
				CHECK_EXT4_JOURNAL : w.blockmap ? CHECK_EXT4_BLOCK_MAP :
				CHECK_EXT4_EXTENT, ino, in, extent_still_bad, "%s%s %s: %s",
				c.is_journal ? "the journal's " :
				ino == EXT2_BAD_INO ? "the bad blocks inode's " : "",
				w.blockmap ? "block map" : "extent tree", where, w.why);

			for (unsigned i = 0; i < w.nr_tree && i < EXT4_SUSPECT_BLOCKS - 1; i++)
				ext4_suspect_block(s, w.tree[i]);
			if (w.nr_tree >= EXT4_SUSPECT_BLOCKS)
				s->cleared = "its extent tree has too many blocks to be confirmed";
			s->arg[2] = w.bad_node;
			/* As in check_shared(): the journal's own map. */
			s->journal_free = c.is_journal;
		} else if (c.is_journal) {
			ext4_xref_journal(ctx, ino, in, w.mapped_in_size, w.tree, w.nr_tree);
		} else if (flags_ok) {
			ext4_xref_tree(ctx, ino, in, w.mapped + w.tree_blocks, w.written_end,
				       w.tree, w.nr_tree);
		}
	}
	blk64_t acl = ext2fs_file_acl_block(fs, (struct ext2_inode *)in);
	if (acl && acl >= fs->super->s_first_data_block && acl < ext2fs_blocks_count(fs->super)) {
		claim_range(&c, acl, 1);
		ext4_xattr_refs_note(st, ino, in, acl);
	}

	if (c.bad && tree_ok && !inode_recent(ctx, in, EXT2_INODE_SIZE(fs->super))) {
		dgrp_t g = ext2fs_group_of_blk2(fs, c.first_bad);
		struct ext4_suspect *s = c.is_journal ?
			ext4_inode_suspect(ctx, CHECK_EXT4_JOURNAL, ino, in, in_use_still_bad,
				"%llu of the journal's blocks are marked free in the block bitmap "
				"(blocks %llu-%llu)", c.bad, (unsigned long long)c.first_bad,
				(unsigned long long)c.last_bad) :
			ext4_inode_suspect(ctx, CHECK_EXT4_BLOCK_IN_USE, ino, in,
			in_use_still_bad, "%llu %s used by this %s %s marked free in the block "
			"bitmap (the first: block %llu)", c.bad, c.bad == 1 ? "block" : "blocks",
			inode_mode_name(in->i_mode), c.bad == 1 ? "is" : "are",
			(unsigned long long)c.first_bad);

		ext4_suspect_block(s, ext2fs_block_bitmap_loc(fs, g));
		ext4_suspect_block(s, ext4_gd_block(fs, g));
		ext4_suspect_tree(s, w.tree, w.nr_tree);
		s->arg[2] = c.first_bad;
	}
	if (tree_ok)
		check_shared(ctx, ino, in, &c, &w);
	if (tree_ok && dm.n)
		dir_batch_add(ctx, db, ino, in, &dm, buf);	/* takes dm.r */
	else
		free(dm.r);
	check_against_walk(ctx, ino, in, &w, tree_ok);
}

/*
 * One info for all the inodes in use that the walk could not reach because
 * part of the tree was hidden from it (the XFS backend skips its orphan
 * check in the same case): their number, and why.
 */
static void report_unreached(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (!st->unreached)
		return;
	if (strcmp(ctx->fsroot, "/"))
		str_info(ctx, CHECK_EXT4_ORPHAN, NULL, NULL, 0,
			 "%llu inodes in use were not reached by a name: the mount shows only "
			 "%s of the filesystem, so they are not checked for orphans",
			 st->unreached, ctx->fsroot);
	else
		str_info(ctx, CHECK_EXT4_ORPHAN, NULL, NULL, 0,
			 "%llu inodes in use were not reached by a name: part of the tree was "
			 "not visible to the walk (see -v), so they are not checked for orphans",
			 st->unreached);
}

/* ---- the orphan list ----------------------------------------------------- */

/* Orphan-list suspects: blocks [holder of the link, inode bitmap]; arg: offset, next, bit. */
static bool orphan_list_still_bad(struct scrub_ctx *ctx, const struct ext4_suspect *s,
				  unsigned char *const *bufs)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	uint32_t next;

	memcpy(&next, bufs[0] + s->arg[0], sizeof(next));
	if (next != s->arg[1])
		return false;
	if (next > fs->super->s_inodes_count || s->nr_blocks < 2)
		return true;
	return !((bufs[1][s->arg[2] / 8] >> (s->arg[2] % 8)) & 1);
}

/*
 * Brent's cycle finding on the orphan list: a mark set at the entries
 * 1, 2, 4, 8, ... steps in; a loop comes back to a mark within twice its
 * length and its lead-in, however many inodes the filesystem has (the
 * walk bounded only by the inode count took seconds per 100 million).
 */
struct loop_watch {
	ext2_ino_t mark;
	unsigned long long power, since;
};

static bool loop_seen(struct loop_watch *w, ext2_ino_t ino)
{
	if (ino == w->mark)
		return true;
	if (++w->since == w->power) {
		w->mark = ino;
		w->power *= 2;
		w->since = 0;
	}
	return false;
}

static void check_orphan_list(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	uint32_t ipg = fs->super->s_inodes_per_group;
	ext2_ino_t ino = fs->super->s_last_orphan, prev = 0;
	struct loop_watch w = { .power = 1 };
	struct ext2_inode_large in;

	while (ino && !scrub_should_stop(ctx)) {
		bool out = ino > fs->super->s_inodes_count;

		if (loop_seen(&w, ino)) {
			str_error(ctx, CHECK_EXT4_ORPHAN_LIST, NULL, NULL, prev,
				  "the orphan list loops: it runs from inode %u, the superblock's, "
				  "back to inode %u, which it passed before (this inode names it)",
				  fs->super->s_last_orphan, ino);
			return;
		}

		if (out || !ext2fs_fast_test_inode_bitmap2(fs->inode_map, ino)) {
			struct ext4_suspect *s = ext4_suspect_add(ctx, CHECK_EXT4_ORPHAN_LIST, prev,
				orphan_list_still_bad, "orphan list %s inode %u, which is %s",
				prev ? "entry after this inode names" : "in the superblock starts at",
				ino, out ? "past the last inode" : "not in use");
			blk64_t blk;
			unsigned off;

			if (prev && ext4_inode_location(fs, prev, &blk, &off)) {
				ext4_suspect_block(s, blk);
				s->arg[0] = off + offsetof(struct ext2_inode, i_dtime);
			} else {
				ext4_suspect_block(s, SUPERBLOCK_OFFSET / fs->blocksize);
				s->arg[0] = SUPERBLOCK_OFFSET % fs->blocksize +
					    offsetof(struct ext2_super_block, s_last_orphan);
			}
			s->arg[1] = ino;
			if (!out) {
				ext4_suspect_block(s, ext2fs_inode_bitmap_loc(fs, (ino - 1) / ipg));
				s->arg[2] = (ino - 1) % ipg;
			}
			return;
		}
		if (!ext4_inode_placed(fs, ino) ||
		    ext2fs_read_inode_full(fs, ino, (struct ext2_inode *)&in, sizeof(in)))
			return;
		prev = ino;
		ino = in.i_dtime;
	}
}

/* ---- the scan ------------------------------------------------------------ */

/* What the inode-table scan holds: tree blocks by level, the directories batched. */
struct ext4_iscan {
	struct disk_fetch df;
	struct dir_batch db;
	unsigned char *buf;
};

/* The bitmaps as they are now, after the walk; the metadata's blocks; the journal's. */
static errcode_t iscan_prepare(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	ext2_filsys fs = st->fs;
	errcode_t err;

	ext2fs_free_block_bitmap(fs->block_map);
	fs->block_map = NULL;
	ext2fs_free_inode_bitmap(fs->inode_map);
	fs->inode_map = NULL;
	if ((err = ext2fs_read_bitmaps(fs)) ||
	    (err = ext2fs_allocate_block_bitmap(fs, "metadata", &st->metadata)) ||
	    (err = claim_metadata(st)))
		return err;
	ext4_orphans_collect(ctx);
	ext4_quota_begin(ctx);
	ext4_eainode_begin(ctx);
	ext4_journal_map(ctx, true);
	/*
	 * A descriptor that puts its inode table outside the filesystem (an
	 * ext4.group_desc error of phase 2) would stop the inode scan there:
	 * the group is left out instead (in memory only, the filesystem is
	 * open read-only), and the scan goes on with the next group.
	 */
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		if (ext4_blocks_in_fs(fs, ext2fs_inode_table_loc(fs, g), fs->inode_blocks_per_group))
			continue;
		ext2fs_inode_table_loc_set(fs, g, 0);
		str_info(ctx, CHECK_EXT4_UNCHECKED, NULL, NULL, 0, "group %u: the descriptor puts "
			 "the inode table outside the filesystem: the group's inodes are not "
			 "checked", g);
	}
	return 0;
}

struct ext4_iscan *ext4_iscan_begin(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_iscan *is;
	const char *why = ext4_sb_insane(st->fs, st->fs->super);
	errcode_t err;

	/*
	 * libext2fs opens a superblock whose geometry is impossible (a first
	 * data block past the first group's start...) and then reads the
	 * bitmaps it describes past its own buffers: phase 2 said what is
	 * wrong with it, nothing here is read through it.
	 */
	if (why) {
		str_info(ctx, CHECK_EXT4_UNCHECKED, NULL, NULL, 0, "the inode tables are not "
			 "scanned: the superblock's geometry is impossible (%s)", why);
		return NULL;
	}
	if ((err = iscan_prepare(ctx))) {
		report_operational(ctx, NULL, NULL, 0, "ext4: cannot scan the inodes: %s",
				   ext4_strerror(err));
		return NULL;
	}
	is = xcalloc(1, sizeof(*is));
	is->df.st = st;
	is->buf = ext4_block_buf(st);
	for (unsigned i = 0; i <= MAX_EXTENT_DEPTH; i++)
		is->df.buf[i] = ext4_block_buf(st);
	dir_batch_init(ctx, &is->db);
	return is;
}

/* One inode of the tables (in: its raw bytes). */
static void iscan_inode(struct scrub_ctx *ctx, struct ext4_iscan *is, ext2_ino_t ino,
			struct ext2_inode_large *in)
{
	if (!ext2fs_fast_test_inode_bitmap2(ext4_state(ctx)->fs->inode_map, ino)) {
		check_unused_csum(ctx, ino, in);
		check_unreached_marked_free(ctx, ino, in);
		return;
	}
	if ((in->i_flags & EXT4_EA_INODE_FL) && in->i_links_count)
		ext4_eainode_note_inode(ctx, ino, in);
	check_one_inode(ctx, ino, in, &is->df, &is->db, is->buf);
}

void ext4_iscan_tables(struct scrub_ctx *ctx, struct ext4_iscan *is, unsigned long long max)
{
	ext2_filsys fs = ext4_state(ctx)->fs;
	unsigned isize = EXT2_INODE_SIZE(fs->super);
	struct ext2_inode_large *in = xcalloc(1, isize > sizeof(*in) ? isize : sizeof(*in));
	ext2_inode_scan scan = NULL;
	errcode_t err;
	ext2_ino_t ino;

	if ((err = ext2fs_open_inode_scan(fs, INODE_SCAN_BLOCKS, &scan))) {
		report_operational(ctx, NULL, NULL, 0, "ext4: cannot scan the inodes: %s",
				   ext4_strerror(err));
		free(in);
		return;
	}
	ext2fs_inode_scan_flags(scan, EXT2_SF_SKIP_MISSING_ITABLE, 0);
	for (unsigned long long n = 0; n < max; n++) {
		if (scrub_should_stop(ctx))
			break;
		err = ext2fs_get_next_inode_full(scan, &ino, (struct ext2_inode *)in, (int)isize);
		if (err == EXT2_ET_BAD_BLOCK_IN_INODE_TABLE)
			continue;
		if (err) {
			report_operational(ctx, NULL, NULL, 0, "ext4: inode scan stopped after "
					   "inode %u: %s", ino, ext4_strerror(err));
			break;
		}
		if (!ino)
			break;
		iscan_inode(ctx, is, ino, in);
	}
	ext2fs_close_inode_scan(scan);
	free(in);
}

void ext4_iscan_after(struct scrub_ctx *ctx, struct ext4_iscan *is)
{
	dir_batch_flush(ctx, &is->db);	/* before the suspects are confirmed */
	check_orphan_list(ctx);
	if (!scrub_should_stop(ctx))
		ext4_xattr_refs_check(ctx);
	if (!scrub_should_stop(ctx))
		ext4_eainode_check(ctx);	/* after the attribute blocks' entries are noted */
	ext4_quota_check(ctx);
	check_reached_marked_free(ctx, is->buf);
}

void ext4_iscan_free(struct scrub_ctx *ctx, struct ext4_iscan *is)
{
	if (!is)
		return;
	dir_batch_release(ctx, &is->db);	/* nothing held if the scan did not start */
	for (unsigned i = 0; i <= MAX_EXTENT_DEPTH; i++)
		free(is->df.buf[i]);
	free(is->buf);
	free(is);
}

int ext4_scan_inodes(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_iscan *is = ext4_iscan_begin(ctx);

	if (!is)
		return 0;
	ext4_iscan_tables(ctx, is, ULLONG_MAX);
	ext4_iscan_after(ctx, is);
	report_unreached(ctx);
	ext4_journal_check(ctx);
	ext4_confirm_run(ctx, true);
	if (!scrub_should_stop(ctx))
		report_unclaimed(ctx);
	report_verbose(ctx, "Phase 3: ext4: %llu inodes, %llu extent tree and block map blocks "
		       "and %llu directory blocks read from the disk", st->inodes_scanned, st->extent_blocks,
		       st->dir_blocks);
	ext4_iscan_free(ctx, is);
	return 0;
}
