/*
 * ext4_locate: the owners of a range of an ext4 device, for fscrub locate
 * (cmd/owners.h).
 *
 * The kernel's GETFSMAP on ext4 names free space and each kind of
 * metadata (superblocks, descriptors, bitmaps, inode tables, the journal)
 * from its own bitmaps, current and not the disk's; the blocks of files
 * it leaves "unknown".  Those are looked up here: the inode tables are
 * read with libext2fs through the block device's page cache, where ext4
 * keeps its metadata buffers (so a recent change is seen; see ext4_bulk.c),
 * each inode in use has its extent tree (or block map) walked, and the
 * inodes that map a wanted block are the owners.  ext4 allocates a file's
 * blocks near its inode, in the same flex group, so the groups of the
 * block's flex group are read first: a targeted pass, not a whole scan, in
 * the common case; blocks not found there are looked up in the index of
 * the whole filesystem (below), read once.  A
 * file is named by its handle (the inode number and generation just
 * read), which also says whether the kernel still has that inode.
 *
 * Many ranges in one run (--from with a thousand sectors) would read the
 * same inode tables again and again: after TARGETED_SEARCHES targeted
 * passes (or the first that fails) the whole filesystem's map (every extent, tree block, indirect
 * and attribute block, with its inode) is read once into a sorted index,
 * as debugfs icheck does for a list of blocks, and each later range is a
 * binary search.  The filesystem stays open between ranges of one run
 * (locate_ext4_release() closes it).
 */
#include <errno.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include <ext2fs/ext2fs.h>

#include "backends/ext4/ext4.h"
#include "lib/fsmap.h"
#include "lib/sorted.h"
#include "cmd/owners.h"

/* At most this many blocks are looked for in the inode tables per range: 4 MiB of flags. */
#define MAX_SEARCH_BLOCKS (4u << 20)
/* FILEID_INO32_GEN: the handle ext4 encodes, (u32 ino, u32 gen). */
#define HANDLE_INO32_GEN 1

/* ext4's GETFSMAP owner codes (fs/ext4/fsmap.h) beyond the generic ones. */
#define EXT4_OWN_FS FMR_OWNER('X', 1)
#define EXT4_OWN_LOG FMR_OWNER('X', 2)
#define EXT4_OWN_INODES FMR_OWNER('X', 5)
#define EXT4_OWN_GDT FMR_OWNER('f', 1)
#define EXT4_OWN_RESV_GDT FMR_OWNER('f', 2)
#define EXT4_OWN_BLKBM FMR_OWNER('f', 3)
#define EXT4_OWN_INOBM FMR_OWNER('f', 4)

/* Targeted passes before the whole map is indexed: a handful of sectors stay cheap. */
#define TARGETED_SEARCHES 4
/* The longest extent ext4 maps (32768 blocks): how far back an index search looks. */
#define MAX_EXTENT_BLOCKS 32768

/* One mapping of the whole-filesystem index. */
struct ext4_rec {
	blk64_t pblk;
	uint64_t lblk, n;
	ext2_ino_t ino;
	uint32_t gen;
	const char *meta;	/* NULL: a file's data; else what the block is to the inode */
};

struct ext4_index {
	struct ext4_rec *v;
	size_t n, alloc;
};

/* The filesystem open between the ranges of one run, and its index once built. */
static struct {
	dev_t devno;
	ext2_filsys fs;
	unsigned searches;
	bool indexed;
	struct ext4_index idx;
} cache;

/* The blocks GETFSMAP leaves unknown, looked for in the inode tables. */
struct search {
	const struct loc_fs *lfs;
	ext2_filsys fs;
	uint64_t off, end;		/* the bytes asked about */
	blk64_t lo, hi;			/* [lo, hi): the blocks spanned by unknown pieces */
	unsigned char *want;		/* per block of [lo, hi): 1 wanted, 0 not or found */
	uint64_t left;			/* blocks still wanted */
	struct loc_owners *out;
	struct ext4_index *index;	/* building the index: every block is wanted, kept here */
	int ret;
};

static const char *ext4_owner_name(uint64_t owner)
{
	switch (owner) {
	case EXT4_OWN_FS: return "the superblock";
	case EXT4_OWN_LOG: return "the journal";
	case EXT4_OWN_GDT: return "the group descriptors";
	case EXT4_OWN_RESV_GDT: return "the reserved group descriptor blocks";
	case EXT4_OWN_BLKBM: return "a block bitmap";
	case EXT4_OWN_INOBM: return "an inode bitmap";
	default: return NULL;
	}
}

/* The inode whose slot is at the start of inode-table block b, or 0. */
static ext2_ino_t itable_first_ino(ext2_filsys fs, blk64_t b)
{
	unsigned per_block = fs->blocksize / EXT2_INODE_SIZE(fs->super);

	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk64_t it = ext2fs_inode_table_loc(fs, g);

		if (it && b >= it && b - it < fs->inode_blocks_per_group)
			return g * fs->super->s_inodes_per_group + (ext2_ino_t)(b - it) * per_block + 1;
	}
	return 0;
}

/* "the inode table of group 0 (the slots of inodes 17-32)": a piece of inode tables. */
static void itable_what(ext2_filsys fs, uint64_t off, uint64_t len, struct strbuf *sb)
{
	blk64_t first = off / fs->blocksize, last = (off + len - 1) / fs->blocksize;
	ext2_ino_t a = itable_first_ino(fs, first), b = itable_first_ino(fs, last);
	unsigned per_block = fs->blocksize / EXT2_INODE_SIZE(fs->super);

	if (!a || !b) {
		strbuf_addstr(sb, "an inode table");
		return;
	}
	strbuf_addf(sb, "the inode table of group %u (the slots of inodes %u-%u)",
		    (a - 1) / fs->super->s_inodes_per_group, a, b + per_block - 1);
}

/* A piece of a file (or metadata of inode ino) found in the tables. */
static void found_gen(struct search *s, ext2_ino_t ino, uint32_t gen, blk64_t pblk,
		      uint64_t lblk, uint64_t n, const char *meta)
{
	uint64_t bs = s->fs->blocksize, a = pblk * bs, e = (pblk + n) * bs;
	uint32_t handle[2] = { ino, gen };
	struct loc_owner *o;

	if (s->index) {
		struct ext4_index *x = s->index;

		if (x->n == x->alloc) {
			x->alloc = x->alloc ? 2 * x->alloc : 4096;
			x->v = xrealloc(x->v, x->alloc * sizeof(*x->v));
		}
		x->v[x->n++] = (struct ext4_rec){ pblk, lblk, n, ino, gen, meta };
		return;
	}

	a = a > s->off ? a : s->off;
	e = e < s->end ? e : s->end;
	for (blk64_t b = a / bs; b < (e + bs - 1) / bs; b++) {
		if (b >= s->lo && b < s->hi && s->want[b - s->lo]) {
			s->want[b - s->lo] = 0;
			s->left--;
		}
	}
	if (ino == EXT2_JOURNAL_INO && !meta)
		meta = "the journal";
	else if (ino < EXT2_FIRST_INO(s->fs->super) && ino != EXT2_ROOT_INO && !meta)
		meta = "blocks of a reserved inode";
	if (meta) {
		o = loc_owner_add(s->out, LOC_META, a, e - a, meta, NULL);
	} else {
		o = loc_owner_add(s->out, LOC_FILE, a, e - a, "data",
				  loc_handle_path(s->lfs, HANDLE_INO32_GEN, handle, sizeof(handle)));
		o->file_off = lblk * bs + (a - pblk * bs);
	}
	o->ino = ino;
}

static void found(struct search *s, ext2_ino_t ino, const struct ext2_inode_large *in,
		  blk64_t pblk, uint64_t lblk, uint64_t n, const char *meta)
{
	found_gen(s, ino, in->i_generation, pblk, lblk, n, meta);
}

/* Does [pblk, pblk + n) meet a wanted block?  (Every block, while indexing.) */
static bool wanted(const struct search *s, blk64_t pblk, uint64_t n)
{
	if (s->index)
		return true;
	blk64_t a = pblk > s->lo ? pblk : s->lo, e = pblk + n < s->hi ? pblk + n : s->hi;

	for (blk64_t b = a; b < e; b++)
		if (s->want[b - s->lo])
			return true;
	return false;
}

static void extents_of(struct search *s, ext2_ino_t ino, struct ext2_inode_large *in)
{
	ext2_extent_handle_t h;
	struct ext2fs_extent e;
	errcode_t err;
	int op = EXT2_EXTENT_ROOT;

	if (ext2fs_extent_open2(s->fs, ino, (struct ext2_inode *)in, &h))
		return;
	while (!(err = ext2fs_extent_get(h, op, &e))) {
		op = EXT2_EXTENT_NEXT;
		if (!(e.e_flags & EXT2_EXTENT_FLAGS_LEAF)) {
			/* An index entry: e_pblk is the tree block below it. */
			if (!(e.e_flags & EXT2_EXTENT_FLAGS_SECOND_VISIT) && wanted(s, e.e_pblk, 1))
				found(s, ino, in, e.e_pblk, 0, 1, "the extent tree of an inode");
		} else if (e.e_len && wanted(s, e.e_pblk, e.e_len)) {
			found(s, ino, in, e.e_pblk, e.e_lblk, e.e_len, NULL);
		}
	}
	ext2fs_extent_free(h);
}

struct blockmap {
	struct search *s;
	ext2_ino_t ino;
	struct ext2_inode_large *in;
};

static int block_fn(ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt, blk64_t ref_blk,
		    int ref_offset, void *priv)
{
	struct blockmap *m = priv;

	(void)fs, (void)ref_blk, (void)ref_offset;
	if (wanted(m->s, *blocknr, 1))
		found(m->s, m->ino, m->in, *blocknr, blockcnt < 0 ? 0 : (uint64_t)blockcnt, 1,
		      blockcnt < 0 ? "an indirect block of an inode" : NULL);
	return m->s->left ? 0 : BLOCK_ABORT;
}

static void inode_blocks(struct search *s, ext2_ino_t ino, struct ext2_inode_large *in)
{
	blk64_t acl = ext2fs_file_acl_block(s->fs, (struct ext2_inode *)in);
	struct blockmap m = { s, ino, in };

	if (!in->i_links_count || in->i_dtime)
		return;
	if (acl && wanted(s, acl, 1))
		found(s, ino, in, acl, 0, 1, "the extended attribute block of an inode");
	if (!ext2fs_inode_has_valid_blocks2(s->fs, (struct ext2_inode *)in))
		return;
	if (in->i_flags & EXT4_EXTENTS_FL)
		extents_of(s, ino, in);
	else if (ext4_inode_placed(s->fs, ino))
		ext2fs_block_iterate3(s->fs, ino, BLOCK_FLAG_READ_ONLY, NULL, block_fn, &m);
}

/* Inodes of groups [g, g_end) read, until nothing is wanted. */
static void scan_groups(struct search *s, ext2_inode_scan scan, dgrp_t g, dgrp_t g_end)
{
	ext2_ino_t last = g_end * s->fs->super->s_inodes_per_group, ino;
	size_t size = sizeof(struct ext2_inode_large);
	struct ext2_inode_large *in = xcalloc(1, EXT2_INODE_SIZE(s->fs->super) > size ?
					      EXT2_INODE_SIZE(s->fs->super) : size);

	if (ext2fs_inode_scan_goto_blockgroup(scan, g)) {
		free(in);
		return;
	}
	while (s->left) {
		errcode_t err = ext2fs_get_next_inode_full(scan, &ino, (struct ext2_inode *)in,
							   EXT2_INODE_SIZE(s->fs->super));

		if (err == EXT2_ET_INODE_CSUM_INVALID ||
		    err == EXT2_ET_INODE_IS_GARBAGE)
			continue;
		if (err || !ino || ino > last)
			break;
		inode_blocks(s, ino, in);
	}
	free(in);
}

/* The inodes of the flex group of the first wanted block. */
static void search_flex_group(struct search *s)
{
	ext2_filsys fs = s->fs;
	unsigned flex = ext2fs_has_feature_flex_bg(fs->super) ?
			1u << fs->super->s_log_groups_per_flex : 1;
	dgrp_t g = ext2fs_group_of_blk2(fs, s->lo) / flex * flex;
	dgrp_t g_end = g + flex < fs->group_desc_count ? g + flex : fs->group_desc_count;
	ext2_inode_scan scan;

	if (ext2fs_open_inode_scan(fs, 0, &scan)) {
		s->ret = -EIO;
		return;
	}
	ext2fs_inode_scan_flags(scan, EXT2_SF_SKIP_MISSING_ITABLE | EXT2_SF_DO_LAZY, 0);
	scan_groups(s, scan, g, g_end);
	ext2fs_close_inode_scan(scan);
}

/* One GETFSMAP record, clipped: named, or its blocks wanted. */
static void take_record(const struct fsmap *m, void *arg)
{
	struct search *s = arg;
	uint64_t a = m->fmr_physical > s->off ? m->fmr_physical : s->off;
	uint64_t e = m->fmr_physical + m->fmr_length < s->end ?
		     m->fmr_physical + m->fmr_length : s->end;
	struct strbuf what = STRBUF_INIT;
	uint64_t bs = s->fs->blocksize;

	if (e <= a)
		return;
	if (m->fmr_owner == FMR_OWN_FREE) {
		loc_owner_add(s->out, LOC_FREE, a, e - a, "free space", NULL);
	} else if (m->fmr_owner == FMR_OWN_UNKNOWN) {
		for (blk64_t b = a / bs; b < (e + bs - 1) / bs; b++)
			if (b >= s->lo && b < s->hi && !s->want[b - s->lo]) {
				s->want[b - s->lo] = 1;
				s->left++;
			}
	} else if (m->fmr_owner == EXT4_OWN_INODES) {
		itable_what(s->fs, a, e - a, &what);
		loc_owner_add(s->out, LOC_META, a, e - a, what.buf, NULL);
	} else {
		const char *name = ext4_owner_name(m->fmr_owner);

		loc_owner_add(s->out, LOC_META, a, e - a, name ? name : "filesystem metadata", NULL);
	}
	strbuf_release(&what);
}

/* What is still wanted after the search: allocated, owner not found. */
static void left_unknown(struct search *s)
{
	uint64_t bs = s->fs->blocksize;

	for (blk64_t b = s->lo; b < s->hi; b++) {
		uint64_t a, e;

		if (!s->want[b - s->lo])
			continue;
		a = b * bs > s->off ? b * bs : s->off;
		e = (b + 1) * bs < s->end ? (b + 1) * bs : s->end;
		loc_owner_add(s->out, LOC_UNKNOWN, a, e - a,
			      "allocated, but no inode in use maps it", NULL);
	}
}

/* The filesystem of lfs, open from an earlier range or opened now. */
static int open_fs(const struct loc_fs *lfs, ext2_filsys *fs)
{
	errcode_t err;

	if (cache.fs && cache.devno == lfs->devno) {
		*fs = cache.fs;
		return 0;
	}
	locate_ext4_release();
	/* Read-only, no MMP (it writes), checksums judged by the scan, not here. */
	err = ext2fs_open2(lfs->devpath, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_SKIP_MMP |
			   EXT2_FLAG_IGNORE_CSUM_ERRORS, 0, 0, unix_io_manager, &cache.fs);
	if (err) {
		cache.fs = NULL;
		return -EIO;
	}
	cache.devno = lfs->devno;
	*fs = cache.fs;
	return 0;
}

void locate_ext4_release(void)
{
	if (cache.fs)
		ext2fs_close_free(&cache.fs);
	free(cache.idx.v);
	memset(&cache, 0, sizeof(cache));
}

static int rec_cmp(const void *a, const void *b)
{
	const struct ext4_rec *x = a, *y = b;

	return x->pblk < y->pblk ? -1 : x->pblk > y->pblk;
}

/* Every inode's blocks into the index, sorted by block. */
static void build_index(struct search *s)
{
	struct search all = { .lfs = s->lfs, .fs = s->fs, .left = 1, .index = &cache.idx };
	ext2_inode_scan scan;

	if (ext2fs_open_inode_scan(s->fs, 0, &scan)) {
		s->ret = -EIO;
		return;
	}
	ext2fs_inode_scan_flags(scan, EXT2_SF_SKIP_MISSING_ITABLE | EXT2_SF_DO_LAZY, 0);
	scan_groups(&all, scan, 0, s->fs->group_desc_count);
	ext2fs_close_inode_scan(scan);
	sort_items(cache.idx.v, cache.idx.n, sizeof(*cache.idx.v), rec_cmp);
	cache.indexed = true;
}

/* The wanted blocks of s from the index. */
static void index_lookup(struct search *s)
{
	const struct ext4_index *x = &cache.idx;
	size_t lo = 0, hi = x->n;

	while (lo < hi) {	/* the first record that starts at or after s->hi */
		size_t mid = (lo + hi) / 2;

		if (x->v[mid].pblk < s->hi)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo-- > 0 && x->v[lo].pblk + MAX_EXTENT_BLOCKS > s->lo) {
		const struct ext4_rec *r = &x->v[lo];

		if (wanted(s, r->pblk, r->n))
			found_gen(s, r->ino, r->gen, r->pblk, r->lblk, r->n, r->meta);
	}
}

int locate_ext4(const struct loc_fs *lfs, uint64_t off, uint64_t len, struct loc_owners *out)
{
	struct search s = { .lfs = lfs, .off = off, .end = off + len, .out = out };
	int ret = open_fs(lfs, &s.fs);

	if (ret)
		return ret;
	s.lo = off / s.fs->blocksize;
	s.hi = (off + len + s.fs->blocksize - 1) / s.fs->blocksize;
	if (s.hi - s.lo > MAX_SEARCH_BLOCKS)
		s.hi = s.lo + MAX_SEARCH_BLOCKS;
	s.end = s.end < s.hi * s.fs->blocksize ? s.end : s.hi * s.fs->blocksize;
	s.want = xcalloc(1, s.hi - s.lo);
	ret = fsmap_query(lfs->fd, fsmap_dev(major(lfs->devno), minor(lfs->devno)), off,
			  s.end - 1, take_record, &s);
	if (!ret && s.left && !cache.indexed && ++cache.searches <= TARGETED_SEARCHES)
		search_flex_group(&s);
	if (!ret && !s.ret && s.left && !cache.indexed)
		build_index(&s);
	if (!ret && s.left && cache.indexed)
		index_lookup(&s);
	if (!ret)
		ret = s.ret;
	if (!ret)
		left_unknown(&s);
	free(s.want);
	return ret;
}
