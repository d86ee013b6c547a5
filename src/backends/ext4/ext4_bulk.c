/*
 * ext4_bulk: phase 3's bulk records on ext4, the bulk_inodes and
 * bulk_extents hooks (backend.h): a file's inode, and its extent map when
 * the inode holds the whole tree, read from the inode table instead of a
 * statx, an open and a FIEMAP.
 *
 * Where the inodes are read.  Not with O_DIRECT, as the rest of the
 * backend reads the disk: on a journalled filesystem a changed inode
 * reaches its place in the inode table only at the journal's checkpoint,
 * so the disk can lag the kernel by minutes.  ext4 keeps every inode-table
 * block it has touched in a buffer of the block device's own page cache
 * (sb_bread() on the bdev mapping), and copies an inode into that buffer
 * each time it marks it dirty (ext4_mark_iloc_dirty()), journalled or not
 * yet committed; jbd2 commits from a frozen copy and leaves the buffer to
 * the next change.  So a buffered pread() of the device returns the
 * inode-table bytes as the kernel last wrote them.  What is then still
 * only in the kernel's inode, not in the buffer: sizes and blocks of
 * delayed allocations and lazytime timestamps, which phase 1's syncfs
 * wrote out for every change made before the scan.  Hence the rule: a
 * record is given only for an inode whose ctime and mtime are older than
 * the scan (ctx->changed_since_ns, a second early); any other is stat'ed.
 *
 * Records are never trusted on their own.  A record is given only when
 * the kernel's own lookup (ext4_iget()) would accept the inode: in use,
 * a known file type, its checksum good (metadata_csum), i_extra_isize
 * sane, no flag that changes what statx or FIEMAP shows (inline data,
 * encryption, verity, huge file, EA inode, DAX, compression, casefold),
 * not a reserved inode, an attribute block and the extent tree's root
 * entries inside the filesystem and outside its own metadata (the
 * kernel's "system zone": superblocks, descriptors, bitmaps, inode tables,
 * the journal), a fast symlink's target its size, and the attributes in
 * the inode's body well formed (names and values inside it, no value in
 * an EA inode).  An inode with attributes, in its body or in a block, has
 * BACKEND_INODE_XATTRS: the walk lists them.  So a damaged inode is
 * stat'ed, and reported, exactly as without records.
 * A record read before a change (the inode changed between this read and
 * the visit of its entry) is stale; the walk looks again through the VFS
 * before it reports anything, as it does with XFS's BULKSTAT records.
 *
 * Memory: per walk thread, one buffer of a window of 64 inodes (the
 * inode numbers of a getdents buffer are read window by window, one
 * pread() each, fresh for every buffer: no cache that could go stale)
 * and, for bulk_extents, the i_block and flags of each record of the
 * current getdents buffer (64 bytes each, at most a few thousand); the
 * system zone is a sorted array of block runs, a few per block group.
 *
 * bulk_extents gives the map only of a tree held whole in the inode
 * (depth 0, at most 4 extents) that accounts for every block i_blocks
 * counts, with no two extents FIEMAP could report as one; any other file
 * is opened and mapped with FIEMAP.
 */
#include "backends/ext4/ext4.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ext2fs/ext3_extents.h>

#include "backends/backend.h"
#include "scan/context.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "lib/stx.h"

/* Inode numbers one read covers: 64, as XFS's inode chunks (16 KiB of 256-byte inodes). */
#define BULK_WINDOW 64
/* Extents a root node inside the inode holds: (60 - 12) / 12. */
#define ROOT_EXTENTS 4
/* EXT4_MAX_EXTENT_DEPTH in the kernel. */
#define MAX_DEPTH 5
/* The in-inode attribute area's magic (EXT4_XATTR_MAGIC). */
#define IBODY_XATTR_MAGIC 0xEA020000U
/*
 * Inode flags a record may have: they change nothing statx or FIEMAP
 * shows (secure/undelete deletion, sync, immutable, append, nodump,
 * noatime, data journalling, notail, dirsync, topdir, extents, project
 * inheritance).  Any other (inline data, encryption, verity, EA inode,
 * huge file, DAX, compression, casefold, snapshots) makes it stat'ed.
 */
#define RECORD_FLAGS (0x1U | 0x2U | 0x8U | 0x10U | 0x20U | 0x40U | 0x80U | 0x4000U | \
		      0x8000U | 0x10000U | 0x20000U | EXT4_EXTENTS_FL | 0x20000000U)

/* What bulk_extents needs of a record: its extent root and flags. */
struct bulk_tree {
	uint32_t i_block[EXT2_N_BLOCKS];
	uint32_t i_flags;
};

struct ext4_bulk {
	unsigned char *window;		/* BULK_WINDOW inodes */
	uint64_t *inos;			/* the last request, sorted */
	struct bulk_tree *trees;	/* trees[i] for inos[i] (i_flags 0: none) */
	size_t n, alloc;
};

/* ---- the system zone -------------------------------------------------- */

static void zone_add(struct ext4_state *st, blk64_t start, uint64_t len)
{
	if (st->nr_zones == st->alloc_zones) {
		st->alloc_zones = st->alloc_zones ? 2 * st->alloc_zones : 256;
		st->zones = xrealloc(st->zones, st->alloc_zones * sizeof(*st->zones));
	}
	st->zones[st->nr_zones++] = (struct ext4_run){ .start = start, .len = len };
}

/*
 * The blocks no file may map, as the kernel's system zone: every group's
 * superblock and descriptors, bitmaps and inode table, the MMP block and
 * the journal's blocks, as sorted runs.  Returns 0 or a negative errno.
 */
static int zones_build(struct scrub_ctx *ctx, struct ext4_state *st)
{
	ext2_filsys fs = st->fs;
	ext2fs_block_bitmap map;
	blk64_t b = fs->super->s_first_data_block, end = ext2fs_blocks_count(fs->super) - 1;

	if (ext2fs_allocate_block_bitmap(fs, "system zone", &map))
		return -ENOMEM;
	for (dgrp_t g = 0; g < fs->group_desc_count; g++) {
		blk64_t bb = ext2fs_block_bitmap_loc(fs, g), ib = ext2fs_inode_bitmap_loc(fs, g);
		blk64_t it = ext2fs_inode_table_loc(fs, g);

		ext2fs_reserve_super_and_bgd(fs, g, map);
		if (!ext4_blocks_in_fs(fs, bb, 1) || !ext4_blocks_in_fs(fs, ib, 1) ||
		    !ext4_blocks_in_fs(fs, it, fs->inode_blocks_per_group)) {
			ext2fs_free_block_bitmap(map);
			return -EUCLEAN;	/* a damaged descriptor: phase 2 said so */
		}
		ext2fs_mark_block_bitmap2(map, bb);
		ext2fs_mark_block_bitmap2(map, ib);
		ext2fs_mark_block_bitmap_range2(map, it, fs->inode_blocks_per_group);
	}
	if (ext2fs_has_feature_mmp(fs->super) && ext4_blocks_in_fs(fs, fs->super->s_mmp_block, 1))
		ext2fs_mark_block_bitmap2(map, fs->super->s_mmp_block);
	ext4_journal_map(ctx, false);
	if (ext2fs_has_feature_journal(fs->super) && !ext2fs_has_feature_journal_dev(fs->super) &&
	    !st->nr_jruns) {
		ext2fs_free_block_bitmap(map);
		return -ENODATA;	/* an internal journal whose blocks are unknown */
	}
	for (size_t i = 0; i < st->nr_jruns; i++)
		if (ext4_blocks_in_fs(fs, st->jruns[i].start, st->jruns[i].len))
			ext2fs_mark_block_bitmap_range2(map, st->jruns[i].start, st->jruns[i].len);
	while (b <= end) {
		blk64_t first, last;

		if (ext2fs_find_first_set_block_bitmap2(map, b, end, &first))
			break;
		if (ext2fs_find_first_zero_block_bitmap2(map, first, end, &last))
			last = end + 1;
		zone_add(st, first, last - first);
		b = last;
	}
	ext2fs_free_block_bitmap(map);
	return 0;
}

/*
 * Would the kernel let an inode map blocks [p, p + len)
 * (ext4_inode_block_valid())?  Inside the filesystem, past its first data
 * block, and outside the system zone.
 */
static bool blocks_valid(const struct ext4_state *st, uint64_t p, uint64_t len)
{
	ext2_filsys fs = st->fs;
	size_t lo = 0, hi = st->nr_zones;

	if (p <= fs->super->s_first_data_block || len == 0 || p + len < p ||
	    p + len > ext2fs_blocks_count(fs->super))
		return false;
	/* The first run that ends after p. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st->zones[mid].start + st->zones[mid].len <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == st->nr_zones || st->zones[lo].start >= p + len;
}

/* ---- setup -------------------------------------------------------------- */

void ext4_bulk_init(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	int ret;

	if (!st || !st->fs || st->bulk)
		return;
	ret = zones_build(ctx, st);
	if (ret < 0) {
		report_verbose(ctx, "Phase 2: ext4: no bulk inode records for the walk (%s)",
			       strerror(-ret));
		return;
	}
	/* Buffered on purpose: the page cache holds the kernel's inode-table buffers. */
	st->cached_fd = open(ctx->source, O_RDONLY | O_CLOEXEC);
	if (st->cached_fd < 0) {
		report_verbose(ctx, "Phase 2: ext4: no bulk inode records for the walk (%s)",
			       strerror(errno));
		return;
	}
	st->nr_bulk = ctx->opt.nr_threads ? ctx->opt.nr_threads : 1;
	st->bulk = xcalloc(st->nr_bulk, sizeof(*st->bulk));
	for (unsigned i = 0; i < st->nr_bulk; i++)
		st->bulk[i].window = xmalloc((size_t)BULK_WINDOW * EXT2_INODE_SIZE(st->fs->super));
}

void ext4_bulk_free(struct ext4_state *st)
{
	for (unsigned i = 0; st->bulk && i < st->nr_bulk; i++) {
		free(st->bulk[i].window);
		free(st->bulk[i].inos);
		free(st->bulk[i].trees);
	}
	free(st->bulk);
	st->bulk = NULL;
	free(st->zones);
	st->zones = NULL;
	if (st->cached_fd >= 0)
		close(st->cached_fd);
	st->cached_fd = -1;
}

void ext4_bulk_report(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);

	if (!st || !st->bulk)
		return;
	report_verbose(ctx, "Phase 3: %llu bulk records for the walk from %llu inode-table "
		       "reads; %llu files' extent maps from their inodes",
		       (unsigned long long)atomic_load(&st->bulk_records),
		       (unsigned long long)atomic_load(&st->bulk_reads),
		       (unsigned long long)atomic_load(&st->bulk_maps));
}

/* ---- one inode ------------------------------------------------------------ */

/* A time field and its _extra in ns, the extra only where i_extra_isize covers it. */
static int64_t time_ns(const struct ext2_inode_large *in, uint32_t sec, size_t extra_off,
		       bool extra_ok)
{
	int64_t s = (int32_t)sec, ns = 0;

	if (extra_ok && (size_t)EXT2_GOOD_OLD_INODE_SIZE + in->i_extra_isize >= extra_off + 4) {
		uint32_t x;

		memcpy(&x, (const unsigned char *)in + extra_off, sizeof(x));
		s += (int64_t)(x & EXT4_EPOCH_MASK) << 32;
		ns = x >> EXT4_EPOCH_BITS;
	}
	return ext4_time_ns(s, ns);
}

#define TIME_NS(in, f, big) \
	time_ns((in), (in)->f, offsetof(struct ext2_inode_large, f##_extra), (big))

/* An in-inode attribute entry's header (struct ext4_xattr_entry). */
struct ibody_entry {
	uint8_t name_len, name_index;
	uint16_t value_offs;
	uint32_t value_inum, value_size, hash;
};

/* The bytes of an entry and its name, 4-aligned (EXT4_XATTR_LEN). */
#define ENTRY_LEN(name_len) (((size_t)(name_len) + sizeof(struct ibody_entry) + 3) & ~(size_t)3)

enum ibody { IBODY_NONE, IBODY_XATTRS, IBODY_BAD };

/*
 * The attributes in the inode's body, as ext4_iget() checks them
 * (check_xattrs(), stricter where kernels differ): every name inside
 * the inode and without a NUL, every value inside the value area, no
 * value in an EA inode (IBODY_BAD: the record is not given; the walk's
 * statx meets what the kernel says).
 */
static enum ibody ibody_xattrs(const unsigned char *raw, const struct ext2_inode_large *in,
			       unsigned isize)
{
	size_t at = EXT2_GOOD_OLD_INODE_SIZE + in->i_extra_isize, first = at + 4, term, e;
	uint32_t word;

	if (at + 4 > isize)
		return IBODY_NONE;
	memcpy(&word, raw + at, sizeof(word));
	if (word != IBODY_XATTR_MAGIC)
		return IBODY_NONE;
	/* The names, up to the 4 zero bytes that end them. */
	for (term = first;; term += ENTRY_LEN(raw[term])) {
		if (term + 4 > isize)
			return IBODY_BAD;
		memcpy(&word, raw + term, sizeof(word));
		if (word == 0)
			break;
		if (term + ENTRY_LEN(raw[term]) >= isize ||
		    strnlen((const char *)raw + term + sizeof(struct ibody_entry), raw[term]) !=
		    raw[term])
			return IBODY_BAD;
	}
	/* The values: after the names' end, inside the inode. */
	for (e = first; e < term; e += ENTRY_LEN(raw[e])) {
		struct ibody_entry x;

		memcpy(&x, raw + e, sizeof(x));
		if (x.value_inum != 0)
			return IBODY_BAD;
		if (x.value_size != 0 &&
		    (x.value_offs > isize - first || first + x.value_offs < term + 4 ||
		     ((x.value_size + 3ULL) & ~3ULL) > isize - first - x.value_offs))
			return IBODY_BAD;
	}
	return term == first ? IBODY_NONE : IBODY_XATTRS;
}

/*
 * The extent tree's root in i_block as ext4_ext_check_inode() checks it:
 * header, entries in logical order, every block they name valid.
 */
static bool root_valid(const struct ext4_state *st, const uint32_t *i_block)
{
	const struct ext3_extent_header *h = (const void *)i_block;
	uint16_t n = h->eh_entries, depth = h->eh_depth;
	uint64_t next = 0;

	if (h->eh_magic != EXT3_EXT_MAGIC || h->eh_max == 0 || h->eh_max > ROOT_EXTENTS ||
	    n > h->eh_max || depth > MAX_DEPTH || (depth > 0 && n == 0))
		return false;
	for (uint16_t i = 0; i < n; i++) {
		if (depth == 0) {
			const struct ext3_extent *x = (const struct ext3_extent *)(h + 1) + i;
			uint32_t len = x->ee_len > EXT_INIT_MAX_LEN ? x->ee_len - EXT_INIT_MAX_LEN
							    : x->ee_len;
			uint64_t p = ((uint64_t)x->ee_start_hi << 32) | x->ee_start;

			if (len == 0 || x->ee_block < next || !blocks_valid(st, p, len))
				return false;
			next = (uint64_t)x->ee_block + len;
		} else {
			const struct ext3_extent_idx *x = (const struct ext3_extent_idx *)(h + 1) + i;
			uint64_t p = ((uint64_t)x->ei_leaf_hi << 32) | x->ei_leaf;

			if (x->ei_block < next || !blocks_valid(st, p, 1))
				return false;
			next = (uint64_t)x->ei_block + 1;
		}
	}
	return true;
}

/* A fast symlink as ext4_iget() accepts it: its target in i_block, its size. */
static bool fast_symlink_valid(const struct ext2_inode_large *in, uint64_t size)
{
	return size > 0 && size < sizeof(in->i_block) &&
	       strnlen((const char *)in->i_block, size + 1) == size;
}

/* Would the kernel's lookup take this inode as the file type it says? */
static bool type_valid(const struct ext4_state *st, const struct ext2_inode_large *in,
		       uint64_t size)
{
	bool extents = in->i_flags & EXT4_EXTENTS_FL;

	switch (in->i_mode & LINUX_S_IFMT) {
	case LINUX_S_IFREG:
		return extents && root_valid(st, in->i_block);
	case LINUX_S_IFLNK:
		if (in->i_file_acl)
			return false;	/* "fast" then depends on the kernel's version */
		if (in->i_blocks == 0 && !extents)
			return fast_symlink_valid(in, size);
		return extents && in->i_blocks != 0 && root_valid(st, in->i_block);
	case LINUX_S_IFCHR: case LINUX_S_IFBLK: case LINUX_S_IFIFO: case LINUX_S_IFSOCK:
		return !extents;
	default:
		return false;	/* a directory (stat'ed by the walk) or bogus */
	}
}

static bool reserved_ino(const ext2_filsys fs, ext2_ino_t ino)
{
	const struct ext2_super_block *sb = fs->super;

	return ino < EXT2_FIRST_INO(sb) || ino == sb->s_usr_quota_inum ||
	       ino == sb->s_grp_quota_inum || ino == sb->s_prj_quota_inum ||
	       ino == sb->s_journal_inum || ino == sb->s_orphan_file_inum;
}

/*
 * Inode ino (its isize bytes at raw) as a record in r, its tree in t;
 * false when the rule above gives it none.
 */
static bool record_of(struct scrub_ctx *ctx, const struct ext4_state *st, ext2_ino_t ino,
		      unsigned char *raw, struct backend_inode *r, struct bulk_tree *t)
{
	ext2_filsys fs = st->fs;
	unsigned isize = EXT2_INODE_SIZE(fs->super);
	struct ext2_inode_large in;
	bool big = isize > EXT2_GOOD_OLD_INODE_SIZE;

	/* The fields as a struct (a 128-byte inode has none past i_osd2); raw for the rest. */
	memset(&in, 0, sizeof(in));
	memcpy(&in, raw, isize < sizeof(in) ? isize : sizeof(in));
	uint64_t size = in.i_size | (uint64_t)in.i_size_high << 32;
	uint64_t acl = in.i_file_acl | (uint64_t)in.osd2.linux2.l_i_file_acl_high << 32;
	uint64_t blocks = in.i_blocks;
	size_t covered = EXT2_GOOD_OLD_INODE_SIZE + (big ? in.i_extra_isize : 0);
	enum ibody ibody = !big ? IBODY_NONE :
			   covered <= isize ? ibody_xattrs(raw, &in, isize) : IBODY_BAD;

	if (in.i_links_count == 0 || in.i_dtime || reserved_ino(fs, ino) ||
	    (in.i_flags & ~RECORD_FLAGS) || (int64_t)size < 0 ||
	    (big && (covered > isize || (in.i_extra_isize & 3))) ||
	    (acl && !blocks_valid(st, acl, 1)) || ibody == IBODY_BAD ||
	    !type_valid(st, &in, size) ||
	    !ext4_inode_csum_ok(fs, ino, raw))
		return false;
	if (ext2fs_has_feature_huge_file(fs->super))
		blocks |= (uint64_t)in.osd2.linux2.l_i_blocks_hi << 32;
	*r = (struct backend_inode){
		.ino = ino, .size = size, .blocks = blocks,
		.atime_ns = TIME_NS(&in, i_atime, big),
		.mtime_ns = TIME_NS(&in, i_mtime, big),
		.ctime_ns = TIME_NS(&in, i_ctime, big),
		.nlink = in.i_links_count,
		.uid = in.i_uid | (uint32_t)in.osd2.linux2.l_i_uid_high << 16,
		.gid = in.i_gid | (uint32_t)in.osd2.linux2.l_i_gid_high << 16,
		.gen = in.i_generation,
		.nextents = UINT32_MAX,
		.mode = in.i_mode,
		.flags = acl || ibody == IBODY_XATTRS ? BACKEND_INODE_XATTRS : 0,
	};
	if (covered >= offsetof(struct ext2_inode_large, i_crtime) + sizeof(in.i_crtime))
		r->btime_ns = TIME_NS(&in, i_crtime, big);
	/* Changed since shortly before the scan: the buffer may lag the inode. */
	if ((uint64_t)r->ctime_ns >= ctx->changed_since_ns ||
	    (uint64_t)r->mtime_ns >= ctx->changed_since_ns || r->ctime_ns < 0)
		return false;
	if (LINUX_S_ISREG(in.i_mode)) {
		const struct ext3_extent_header *h = (const void *)in.i_block;

		if (h->eh_depth == 0)
			r->nextents = h->eh_entries;
		memcpy(t->i_block, in.i_block, sizeof(t->i_block));
		t->i_flags = in.i_flags;
	}
	return true;
}

/* ---- the hooks ------------------------------------------------------------ */

/* Is ino in the same group and BULK_WINDOW-inode window as first? */
static bool same_window(ext2_filsys fs, uint64_t first, uint64_t ino)
{
	uint32_t ipg = fs->super->s_inodes_per_group;

	return (first - 1) / ipg == (ino - 1) / ipg &&
	       (first - 1) % ipg / BULK_WINDOW == (ino - 1) % ipg / BULK_WINDOW;
}

/* Could an inode of group g at index idx be in use (not in its uninitialised tail)? */
static bool maybe_initialised(ext2_filsys fs, dgrp_t g, uint32_t idx)
{
	return idx < ext4_itable_in_use(fs, g);
}

/* inos[i .. j] (one window) from one read into out[i .. j]. */
static size_t bulk_window(struct scrub_ctx *ctx, struct ext4_state *st, struct ext4_bulk *b,
			  const uint64_t *inos, size_t i, size_t j, struct backend_inode *out)
{
	ext2_filsys fs = st->fs;
	unsigned isize = EXT2_INODE_SIZE(fs->super);
	size_t bytes = (size_t)(inos[j] - inos[i] + 1) * isize, found = 0;
	blk64_t blk;
	unsigned off;

	for (size_t k = i; k <= j; k++) {
		out[k].ino = 0;
		b->trees[k].i_flags = 0;
	}
	if (inos[j] > fs->super->s_inodes_count ||
	    !ext4_inode_location(fs, (ext2_ino_t)inos[i], &blk, &off) ||
	    !ext4_blocks_in_fs(fs, blk, 1))
		return 0;
	atomic_fetch_add(&st->bulk_reads, 1);
	if (pread(st->cached_fd, b->window, bytes, (off_t)(blk * fs->blocksize + off)) !=
	    (ssize_t)bytes)
		return 0;	/* each is stat'ed */
	for (size_t k = i; k <= j; k++) {
		uint32_t ipg = fs->super->s_inodes_per_group;
		ext2_ino_t ino = (ext2_ino_t)inos[k];

		if (maybe_initialised(fs, (ino - 1) / ipg, (ino - 1) % ipg) &&
		    record_of(ctx, st, ino, b->window + (size_t)(inos[k] - inos[i]) * isize,
			      &out[k], &b->trees[k]))
			found++;
		else
			out[k].ino = 0;
	}
	return found;
}

int ext4_bulk_inodes(struct scrub_ctx *ctx, const struct backend_dir *d,
		     const uint64_t *inos, size_t n, struct backend_inode *out)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_bulk *b;
	size_t found = 0;

	if (!st || !st->bulk || d->thread >= st->nr_bulk)
		return -EOPNOTSUPP;
	b = &st->bulk[d->thread];
	if (n > b->alloc) {
		b->alloc = n;
		b->inos = xrealloc(b->inos, n * sizeof(*b->inos));
		b->trees = xrealloc(b->trees, n * sizeof(*b->trees));
	}
	memcpy(b->inos, inos, n * sizeof(*inos));
	b->n = n;
	for (size_t i = 0, j; i < n; i = j + 1) {
		for (j = i; j + 1 < n && same_window(st->fs, inos[i], inos[j + 1]);)
			j++;
		found += bulk_window(ctx, st, b, inos, i, j, out);
	}
	atomic_fetch_add(&st->bulk_records, found);
	return (int)found;
}

/* The tree of the record of ino in this thread's last request, or NULL. */
static const struct bulk_tree *tree_of(const struct ext4_bulk *b, uint64_t ino)
{
	size_t i = bulk_index_of(b->inos, b->n, ino);

	if (i == b->n || !(b->trees[i].i_flags & EXT4_EXTENTS_FL))
		return NULL;
	return &b->trees[i];
}

int ext4_bulk_extents(struct scrub_ctx *ctx, unsigned thread, const struct backend_inode *r,
		      struct fiemap_extent *out, size_t max)
{
	struct ext4_state *st = ext4_state(ctx);
	const struct bulk_tree *t;
	const struct ext3_extent_header *h;
	const struct ext3_extent *x;
	unsigned bs;
	uint64_t blocks = 0;

	if (!st || !st->bulk || thread >= st->nr_bulk)
		return -EOPNOTSUPP;
	bs = st->fs->blocksize;
	t = tree_of(&st->bulk[thread], r->ino);
	if (!t || EXT2FS_CLUSTER_RATIO(st->fs) > 1)
		return -ENODATA;
	h = (const void *)t->i_block;
	x = (const struct ext3_extent *)(h + 1);
	if (h->eh_depth != 0 || h->eh_entries == 0 || h->eh_entries > max)
		return -ENODATA;
	for (uint16_t i = 0; i < h->eh_entries; i++) {
		bool unwritten = x[i].ee_len > EXT_INIT_MAX_LEN;
		uint32_t len = unwritten ? x[i].ee_len - EXT_INIT_MAX_LEN : x[i].ee_len;
		uint64_t p = ((uint64_t)x[i].ee_start_hi << 32) | x[i].ee_start;

		out[i] = (struct fiemap_extent){
			.fe_logical = (uint64_t)x[i].ee_block * bs, .fe_physical = p * bs,
			.fe_length = (uint64_t)len * bs,
			.fe_flags = unwritten ? FIEMAP_EXTENT_UNWRITTEN : 0,
		};
		/* Two extents end to end: FIEMAP may give them as one (the extent cache). */
		if (i > 0 && out[i - 1].fe_logical + out[i - 1].fe_length == out[i].fe_logical &&
		    out[i - 1].fe_physical + out[i - 1].fe_length == out[i].fe_physical &&
		    out[i - 1].fe_flags == out[i].fe_flags)
			return -ENODATA;
		blocks += len;
	}
	/* Every block i_blocks counts is a data block: no attribute block. */
	if (blocks * (bs / 512) != r->blocks)
		return -ENODATA;
	out[h->eh_entries - 1].fe_flags |= FIEMAP_EXTENT_LAST;
	atomic_fetch_add(&st->bulk_maps, 1);
	return h->eh_entries;
}
