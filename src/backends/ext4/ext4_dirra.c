/*
 * ext4_dirra: phase 3's directory prefetch on ext4.  A thread started just
 * before the walk reads the inode tables in disk order, finds every
 * directory's blocks in its extents, and asks the kernel to read them into
 * the block device's page cache (POSIX_FADV_WILLNEED, sorted and merged),
 * so that the walk's getdents finds them there instead of waiting for each.
 *
 * Why that helps.  ext4 reads a directory through the buffers of the block
 * device's own page cache (ext4_bread(), sb_getblk() on the bdev mapping),
 * and a buffer attached to a folio that is up to date is up to date: a
 * block read here is a block the kernel does not read again.  Without it,
 * a cold getdents reads its directory's blocks synchronously, one
 * directory after the other (an htree directory block by block): most of
 * the walk's time on a tree of small directories was that wait.  The
 * inode-table reads warm the same cache for the kernel's own inode
 * lookups and for ext4_bulk.c's records.
 *
 * What it reads is a hint, never a finding: nothing here reports, judges
 * or keeps a block, and a damaged inode or extent only means a block not
 * prefetched (inodes must be in use, directories, checksums good, extents
 * inside the filesystem).  It writes nothing.  Trees deeper than one index
 * level (directories of more than a few hundred extents), the blocks of a
 * block-mapped (ext2/ext3) directory past its twelve direct ones, and
 * inline directories are left to the kernel.
 *
 * The check of the directory blocks after the walk (ext4_inodes.c) still
 * reads them again with O_DIRECT: a scrubber checks what is on the disk
 * (an unreadable sector, a block the kernel holds good but the disk holds
 * damaged), and the page cache shows the kernel's view, which on a
 * journalled filesystem may be ahead of the disk.  Served from this
 * cache, it would find neither.
 *
 * Bounds.  Memory: one chunk of inode table (DIRRA_CHUNK_BLOCKS), one
 * extent block, and the runs of one chunk's directories (at most
 * DIRRA_MAX_RUNS, then they are issued early).  One descriptor.  The page
 * cache: the thread stays at most about DIRRA_WINDOW bytes ahead of the
 * walk, estimated from the directories each has done (the walk goes in its
 * own order, the thread in inode order: the share of its bytes not yet
 * walked is the share of its directories not yet walked), so a large
 * filesystem is read a window at a time, not pushed out of the cache
 * before the walk gets there.  It stops when the walk ends.
 * FSCRUB_DEBUG_NO_DIRRA=1 turns it off (the tests compare); so does -b
 * (a background scan reads one thing at a time) and a mount of a
 * subdirectory (the walk sees only part of the filesystem).
 */
#include "backends/ext4/ext4.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ext2fs/ext3_extents.h>

#include "scan/context.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/thread.h"

/* Inode-table blocks per read: 1 MiB of 4 KiB blocks, one request, 4096 inodes of 256 bytes. */
#define DIRRA_CHUNK_BLOCKS 256
/* At most this far ahead of the walk: a tree of small directories (a kernel's, 20 MiB) in one go. */
#define DIRRA_WINDOW (32ULL << 20)
/* Runs held before they are issued: 384 KiB, a chunk of directories of a few extents each. */
#define DIRRA_MAX_RUNS 16384
/*
 * Bytes per WILLNEED: the kernel reads at most max(read_ahead_kb,
 * max_sectors_kb) of one (force_page_cache_ra()); 128 KiB is the smallest
 * default of read_ahead_kb.
 */
#define DIRRA_READ_BYTES (128U << 10)
/* How long the thread sleeps while the walk catches up: short against a directory read. */
#define DIRRA_POLL_NS 2000000L
/* Entries of an extent root in the inode: (60 - 12) / 12. */
#define ROOT_ENTRIES 4

struct ext4_dirra {
	struct scrub_ctx *ctx;
	struct ext4_state *st;
	pthread_t thread;
	int fd;				/* the device, buffered, POSIX_FADV_RANDOM */
	atomic_bool stop;
	unsigned char *chunk;		/* DIRRA_CHUNK_BLOCKS blocks of inode table */
	unsigned char *node;		/* one extent block */
	struct ext4_run *runs;
	size_t nr_runs, alloc_runs;
	/* The thread's alone until it is joined. */
	unsigned long long dirs, blocks, reads, batches, itable_reads, node_reads, waits, deep;
	uint64_t issued;		/* bytes read or asked for */
};

static int run_cmp(const void *a, const void *b)
{
	const struct ext4_run *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Ask for the held runs, in disk order, adjacent ones merged. */
static void dirra_issue(struct ext4_dirra *ra)
{
	uint64_t bs = ra->st->fs->blocksize, per = DIRRA_READ_BYTES / bs ? DIRRA_READ_BYTES / bs : 1;
	size_t n = 0;

	if (!ra->nr_runs)
		return;
	sort_items(ra->runs, ra->nr_runs, sizeof(*ra->runs), run_cmp);
	for (size_t i = 1; i < ra->nr_runs; i++) {
		struct ext4_run *last = &ra->runs[n];

		if (ra->runs[i].start <= last->start + last->len) {
			uint64_t end = ra->runs[i].start + ra->runs[i].len;

			if (end > last->start + last->len)
				last->len = end - last->start;
		} else {
			ra->runs[++n] = ra->runs[i];
		}
	}
	for (size_t i = 0; i <= n; i++)
		for (uint64_t k = 0; k < ra->runs[i].len; k += per) {
			uint64_t len = ra->runs[i].len - k < per ? ra->runs[i].len - k : per;

			(void)posix_fadvise(ra->fd, (off_t)((ra->runs[i].start + k) * bs),
					    (off_t)(len * bs), POSIX_FADV_WILLNEED);
			ra->reads++;
			ra->blocks += len;
			ra->issued += len * bs;
		}
	ra->batches++;
	ra->nr_runs = 0;
}

static void dirra_add(struct ext4_dirra *ra, blk64_t start, uint64_t len)
{
	if (ra->nr_runs == ra->alloc_runs) {
		if (ra->alloc_runs == DIRRA_MAX_RUNS)
			dirra_issue(ra);
		else {
			ra->alloc_runs = ra->alloc_runs ? 2 * ra->alloc_runs : 256;
			ra->runs = xrealloc(ra->runs, ra->alloc_runs * sizeof(*ra->runs));
		}
	}
	ra->runs[ra->nr_runs++] = (struct ext4_run){ start, len };
}

/* The blocks of a leaf's extents below the directory's size (nblocks). */
static void dirra_leaf(struct ext4_dirra *ra, const struct ext3_extent *x, unsigned n,
		       uint64_t nblocks)
{
	ext2_filsys fs = ra->st->fs;

	for (unsigned i = 0; i < n; i++, x++) {
		uint64_t p = (uint64_t)x->ee_start_hi << 32 | x->ee_start, len = x->ee_len;

		if (len > EXT_INIT_MAX_LEN || x->ee_block >= nblocks)
			continue;	/* unwritten (holds no entries) or past the end */
		if (len > nblocks - x->ee_block)
			len = nblocks - x->ee_block;
		if (len && ext4_blocks_in_fs(fs, p, len))
			dirra_add(ra, p, len);
	}
}

static bool header_ok(const struct ext3_extent_header *h, unsigned max, unsigned depth)
{
	return h->eh_magic == EXT3_EXT_MAGIC && h->eh_depth == depth && h->eh_entries <= max;
}

/* One index entry of the inode's root: its leaf read (through the cache) and walked. */
static void dirra_index(struct ext4_dirra *ra, const struct ext3_extent_idx *x, uint64_t nblocks)
{
	ext2_filsys fs = ra->st->fs;
	uint64_t p = (uint64_t)x->ei_leaf_hi << 32 | x->ei_leaf, bs = fs->blocksize;
	const struct ext3_extent_header *h = (const void *)ra->node;

	if (x->ei_block >= nblocks || !ext4_blocks_in_fs(fs, p, 1))
		return;
	ra->node_reads++;
	ra->issued += bs;
	if (pread(ra->fd, ra->node, bs, (off_t)(p * bs)) != (ssize_t)bs ||
	    !header_ok(h, (unsigned)((bs - sizeof(*h)) / sizeof(struct ext3_extent)), 0))
		return;
	dirra_leaf(ra, (const void *)(h + 1), h->eh_entries, nblocks);
}

/* Inode ino (raw, out of the chunk): a directory's blocks into the runs. */
static void dirra_inode(struct ext4_dirra *ra, ext2_ino_t ino, unsigned char *raw)
{
	ext2_filsys fs = ra->st->fs;
	unsigned isize = EXT2_INODE_SIZE(fs->super);
	struct ext2_inode_large in;
	const struct ext3_extent_header *h = (const void *)in.i_block;
	uint64_t nblocks;

	memset(&in, 0, sizeof(in));
	memcpy(&in, raw, isize < sizeof(in) ? isize : sizeof(in));
	if (!LINUX_S_ISDIR(in.i_mode) || in.i_links_count == 0 || in.i_dtime ||
	    (in.i_flags & EXT4_INLINE_DATA_FL) ||
	    !ext4_inode_csum_ok(fs, ino, raw))
		return;
	ra->dirs++;
	nblocks = EXT2_I_SIZE(&in) / fs->blocksize;
	if (!(in.i_flags & EXT4_EXTENTS_FL)) {
		/* Block-mapped (ext2, ext3): the direct blocks, no indirect ones. */
		for (uint64_t i = 0; i < EXT2_NDIR_BLOCKS && i < nblocks; i++)
			if (in.i_block[i] && ext4_blocks_in_fs(fs, in.i_block[i], 1))
				dirra_add(ra, in.i_block[i], 1);
		return;
	}
	if (h->eh_magic != EXT3_EXT_MAGIC || h->eh_entries > ROOT_ENTRIES)
		return;
	if (h->eh_depth == 0)
		dirra_leaf(ra, (const void *)(h + 1), h->eh_entries, nblocks);
	else if (h->eh_depth == 1)
		for (unsigned i = 0; i < h->eh_entries; i++)
			dirra_index(ra, (const struct ext3_extent_idx *)(h + 1) + i, nblocks);
	else
		ra->deep++;
}

/*
 * Wait while the thread is more than DIRRA_WINDOW ahead of the walk;
 * false: stop (the walk ended, or the scan is stopping).
 */
static bool dirra_wait(struct ext4_dirra *ra)
{
	bool waited = false;

	for (;;) {
		if (atomic_load(&ra->stop) || scrub_should_stop(ra->ctx))
			return false;
		unsigned long long m = ra->dirs, k = atomic_load(&ra->st->walk_dirs);

		/* Not yet walked: (m - k) of m directories, as much of the bytes. */
		if (m == 0 || k >= m || (double)ra->issued * (double)(m - k) / (double)m <=
		    (double)DIRRA_WINDOW)
			return true;
		if (!waited)
			ra->waits++;
		waited = true;
		nanosleep(&(struct timespec){ 0, DIRRA_POLL_NS }, NULL);
	}
}

/* Group g's initialised inodes, a chunk at a time. */
static bool dirra_group(struct ext4_dirra *ra, dgrp_t g)
{
	ext2_filsys fs = ra->st->fs;
	uint32_t ipg = fs->super->s_inodes_per_group, used = ext4_itable_in_use(fs, g);
	unsigned isize = EXT2_INODE_SIZE(fs->super), bs = fs->blocksize;
	blk64_t itable = ext2fs_inode_table_loc(fs, g);
	uint64_t nblocks;

	nblocks = ((uint64_t)used * isize + bs - 1) / bs;
	if (!used || !itable || !ext4_blocks_in_fs(fs, itable, nblocks))
		return true;
	for (uint64_t off = 0; off < nblocks; off += DIRRA_CHUNK_BLOCKS) {
		uint64_t n = nblocks - off < DIRRA_CHUNK_BLOCKS ? nblocks - off : DIRRA_CHUNK_BLOCKS;
		uint64_t first = off * bs / isize, count = n * bs / isize;

		if (!dirra_wait(ra))
			return false;
		ra->itable_reads++;
		ra->issued += n * bs;
		if (pread(ra->fd, ra->chunk, n * bs, (off_t)((itable + off) * bs)) != (ssize_t)(n * bs))
			return true;
		if (first + count > used)
			count = used - first;
		for (uint64_t i = 0; i < count; i++)
			dirra_inode(ra, (ext2_ino_t)((uint64_t)g * ipg + first + i + 1),
				    ra->chunk + i * isize);
		dirra_issue(ra);
	}
	return true;
}

static void *dirra_main(void *arg)
{
	struct ext4_dirra *ra = arg;

	for (dgrp_t g = 0; g < ra->st->fs->group_desc_count; g++)
		if (!dirra_group(ra, g))
			break;
	dirra_issue(ra);
	return NULL;
}

/* Why there is no prefetch for this scan, or NULL. */
static const char *dirra_off(const struct scrub_ctx *ctx, const struct ext4_state *st)
{
	if (getenv("FSCRUB_DEBUG_NO_DIRRA"))
		return "FSCRUB_DEBUG_NO_DIRRA is set";
	if (ctx->opt.background)
		return "a background scan (-b)";
	if (!ctx->fsroot || strcmp(ctx->fsroot, "/"))
		return "the mount may show only part of the filesystem";
	if (!st->fs || st->fs->blocksize > DIRRA_READ_BYTES)
		return "blocks larger than one read";
	return NULL;
}

void ext4_dirra_start(struct scrub_ctx *ctx)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_dirra *ra;
	const char *why;

	if (!st || st->dirra)
		return;
	if ((why = dirra_off(ctx, st))) {
		report_verbose(ctx, "Phase 2: ext4: directory blocks not prefetched for the walk: %s",
			       why);
		return;
	}
	ra = xcalloc(1, sizeof(*ra));
	ra->ctx = ctx;
	ra->st = st;
	/* Buffered on purpose: the block device's page cache is where ext4 looks. */
	ra->fd = open(ctx->source, O_RDONLY | O_CLOEXEC);
	if (ra->fd >= 0) {
		/* Each pread reads what it asks, no readahead past a group's used inodes. */
		(void)posix_fadvise(ra->fd, 0, 0, POSIX_FADV_RANDOM);
		ra->chunk = xmalloc((size_t)DIRRA_CHUNK_BLOCKS * st->fs->blocksize);
		ra->node = xmalloc(st->fs->blocksize);
		atomic_init(&ra->stop, false);
		if (thread_start(&ra->thread, dirra_main, ra) == 0) {
			st->dirra = ra;
			return;
		}
	}
	report_verbose(ctx, "Phase 2: ext4: directory blocks not prefetched for the walk: %s",
		       strerror(ra->fd < 0 ? errno : EAGAIN));
	if (ra->fd >= 0)
		close(ra->fd);
	free(ra->chunk);
	free(ra->node);
	free(ra);
}

void ext4_dirra_stop(struct scrub_ctx *ctx, bool say)
{
	struct ext4_state *st = ext4_state(ctx);
	struct ext4_dirra *ra = st ? st->dirra : NULL;

	if (!ra)
		return;
	atomic_store(&ra->stop, true);
	pthread_join(ra->thread, NULL);
	if (say)
		report_verbose(ctx, "Phase 3: ext4: %llu directory blocks of %llu directories "
			       "prefetched for the walk: %llu reads in %llu batches, from %llu "
			       "inode-table and %llu extent-block reads (%.1f MiB in all; %llu "
			       "waits for the walk, %llu deeper trees left out)", ra->blocks,
			       ra->dirs, ra->reads, ra->batches, ra->itable_reads, ra->node_reads,
			       (double)ra->issued / (1 << 20), ra->waits, ra->deep);
	close(ra->fd);
	free(ra->chunk);
	free(ra->node);
	free(ra->runs);
	free(ra);
	st->dirra = NULL;
}
