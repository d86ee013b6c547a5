/*
 * btrfs_bulk: phase 3's bulk records on btrfs (see btrfs_bulk.h).
 *
 * Where the records come from.  A getdents buffer's inode numbers are
 * those of one directory's entries, so of one subvolume: the tree the
 * directory's statx names (STATX_SUBVOL; else BTRFS_IOC_INO_LOOKUP on the
 * directory).  The sorted numbers are cut into windows of at most
 * BULK_WINDOW consecutive numbers, and each window is one key range of
 * that tree, [(first, INODE_ITEM, 0), (last, EXTENT_DATA, max)], read with
 * the backend's TREE_SEARCH_V2 reader (btrfs_trees.h): an inode's items
 * sort together, INODE_ITEM first, then its INODE_REFs, XATTR_ITEMs and
 * EXTENT_DATA items.  Items of numbers not asked for (a subdirectory's
 * names, a file of another directory) come along and are passed over.
 *
 * What a record holds.  The INODE_ITEM gives mode, links, size, uid, gid,
 * times (otime as the birth time), generation; st_blocks is nbytes rounded
 * up to the sector, as btrfs_getattr() computes it (no delayed allocation:
 * see the rule below).  An XATTR_ITEM makes BACKEND_INODE_XATTRS.  A
 * regular file's EXTENT_DATA items make its map, as the kernel's FIEMAP
 * gives it: inline data at 0 (DATA_INLINE | NOT_ALIGNED, its length to the
 * sector), regular and preallocated extents at disk_bytenr + offset (a
 * btrfs logical address, as FIEMAP's fe_physical is on btrfs: it is not
 * mapped to a device through the chunk tree), preallocated ones UNWRITTEN,
 * compressed ones ENCODED, holes left out, neighbours that FIEMAP merges
 * (end to end on the file and the disk, same flags) merged, LAST on the
 * last.  FIEMAP's SHARED flag (a back-reference walk per extent) is not
 * given: on btrfs phase 3 does not collect extents (st_dev is not the
 * device's, so ctx->dev_size is 0) and phase 5 reads btrfs file by file;
 * the map serves the extent checks alone (extent_validate()).
 *
 * The rule a record follows.  btrfs writes an inode's changes to its tree
 * late: the delayed-inode code keeps them in memory until the transaction
 * commits, and delayed allocation keeps size and extents until writeback.
 * So the first request of the walk runs syncfs() once, which commits
 * what was changed before, and notes the generation then; a record is
 * given only for an inode whose item's transid is not newer and whose
 * ctime and mtime are older than the scan (ctx->changed_since_ns).  An
 * inode changed after that is read as its tree had it: a stale record,
 * which the walk never reports from (every suspect is looked at again
 * through the VFS), as XFS's BULKSTAT records read before a change.
 *
 * Anything odd gives no record (the walk stats the entry and the per-file
 * path says what is wrong): an inode item too short, a link count of 0, a
 * directory or unknown type, flags that change what statx or FIEMAP shows
 * (COMPRESS, verity, unknown ones), times out of range, an item type an
 * inode of its kind does not have (verity items, directory items of a
 * file, extents of a device node).  A map that is odd -- an extent item of
 * the wrong size, unaligned, overlapping, encrypted, an unknown
 * compression, inline data not at 0, more than MAX_MAP extents, extents
 * whose bytes are not the inode's nbytes -- is not given (nextents
 * UINT32_MAX): the file is opened and mapped with FIEMAP.
 *
 * Memory: per walk thread, one reader buffer (BTRFS_TREES_BUF) and, for
 * bulk_extents, the maps of the current getdents buffer's records
 * (32 bytes an extent, at most MAX_MAP a file).
 */
#include "backends/btrfs/btrfs_bulk.h"

#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fiemap.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/btrfs/btrfs_trees.h"
#include "scan/context.h"
#include "lib/inokey.h"
#include "report/report.h"
#include "lib/strbuf.h"

/*
 * Inode numbers one tree search covers: 64, as the XFS and ext4 windows;
 * a window of small files is a few hundred bytes of items an inode, well
 * inside one reader buffer.
 */
#define BULK_WINDOW 64
/* Extents kept of one file: more, and it is mapped with FIEMAP. */
#define MAX_MAP 64
/*
 * btrfs_inode_item.flags that change nothing statx or FIEMAP shows here
 * (btrfs_inode.h, not in the uapi headers): NODATASUM, NODATACOW,
 * NOCOMPRESS, PREALLOC, SYNC, IMMUTABLE, APPEND, NODUMP, NOATIME,
 * DIRSYNC.  Not READONLY (obsolete), COMPRESS (STATX_ATTR_COMPRESSED:
 * FIEMAP's map is then read as encoded), nor the read-only flags in the
 * upper half (verity).
 */
#define RECORD_FLAGS (0x1ULL | 0x2ULL | 0x8ULL | 0x10ULL | 0x20ULL | 0x40ULL | 0x80ULL | \
		      0x100ULL | 0x200ULL | 0x400ULL)
/* The highest compression type (BTRFS_COMPRESS_ZSTD). */
#define MAX_COMPRESSION 3
/* Where the regular and preallocated extents' fields end: the whole item. */
#define FE_REG_SIZE sizeof(struct btrfs_file_extent_item)
/* Where inline data starts: the fields before disk_bytenr. */
#define FE_INLINE_START offsetof(struct btrfs_file_extent_item, disk_bytenr)

/* One extent of a record's map, as FIEMAP would give it (but LAST). */
struct bulk_ext {
	uint64_t logical, physical, len;
	uint32_t flags;
};

/* What bulk_extents needs of a record: where its map is, if it has one. */
struct bulk_rec {
	uint32_t first, count;		/* in ext[] */
	bool map_ok;
};

struct bulk_thread {
	struct btrfs_tree_reader r;
	bool open;
	uint64_t *inos;			/* the last request, sorted */
	struct bulk_rec *recs;		/* recs[i] for inos[i] */
	size_t n, alloc;
	struct bulk_ext *ext;
	size_t nr_ext, alloc_ext;
};

struct btrfs_bulk {
	int fd;				/* the mount: ioctls, syncfs */
	bool check_only;		/* -n: no syncfs (it commits a transaction) */
	uint32_t sectorsize;
	unsigned nr_threads;
	struct bulk_thread *t;
	pthread_mutex_t lock;		/* the first request's syncfs */
	atomic_bool synced;
	uint64_t generation;		/* after that syncfs: newer items are skipped */
	atomic_ullong records, searches, maps;
};

/* One inode's items being gathered into out[k]. */
struct gather {
	struct btrfs_bulk *b;
	struct bulk_thread *t;
	const struct scrub_ctx *ctx;
	struct backend_inode *out;
	size_t k;			/* its index in the request */
	bool active, have_inode, odd, map_odd;
	uint64_t nbytes, found, next_off;
};

struct btrfs_bulk *btrfs_bulk_new(struct scrub_ctx *ctx, uint32_t sectorsize)
{
	unsigned nr_threads = ctx->opt.nr_threads ? ctx->opt.nr_threads : 1;
	struct btrfs_bulk *b;

	if (!sectorsize || sectorsize % 512)
		return NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->t = calloc(nr_threads, sizeof(*b->t));
	if (!b->t) {
		free(b);
		return NULL;
	}
	b->fd = ctx->mnt_fd;
	b->check_only = ctx->opt.check_only;
	b->sectorsize = sectorsize;
	b->nr_threads = nr_threads;
	pthread_mutex_init(&b->lock, NULL);
	return b;
}

void btrfs_bulk_free(struct btrfs_bulk *b)
{
	if (!b)
		return;
	for (unsigned i = 0; i < b->nr_threads; i++) {
		if (b->t[i].open)
			btrfs_tree_close(&b->t[i].r);
		free(b->t[i].inos);
		free(b->t[i].recs);
		free(b->t[i].ext);
	}
	free(b->t);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void btrfs_bulk_report(struct scrub_ctx *ctx, const struct btrfs_bulk *b)
{
	if (!b || !atomic_load(&b->synced))
		return;
	report_verbose(ctx, "Phase 3: btrfs: %llu bulk records for the walk from %llu tree "
		       "searches; %llu files' extent maps from their file extent items",
		       (unsigned long long)atomic_load(&b->records),
		       (unsigned long long)atomic_load(&b->searches),
		       (unsigned long long)atomic_load(&b->maps));
}

/*
 * Once, before the first records: commit what was changed before the
 * scan (delayed inodes, delayed allocation) and note the generation.
 * Under -n nothing is committed (syncfs would commit the transaction the
 * scrub of phase 2 joined, or anyone's): the generation is the running
 * one, and an inode whose changes wait in memory is read as its tree has
 * it -- a stale record, which the walk never reports from (above).
 */
static void sync_once(struct btrfs_bulk *b)
{
	struct btrfs_ioctl_fs_info_args fi = { .flags = BTRFS_FS_INFO_FLAG_GENERATION };

	if (atomic_load(&b->synced))
		return;
	pthread_mutex_lock(&b->lock);
	if (!atomic_load(&b->synced)) {
		/* Without a generation every item is newer: no record. */
		if ((b->check_only || syncfs(b->fd) == 0) &&
		    ioctl(b->fd, BTRFS_IOC_FS_INFO, &fi) == 0 &&
		    (fi.flags & BTRFS_FS_INFO_FLAG_GENERATION))
			b->generation = fi.generation;
		atomic_store(&b->synced, true);
	}
	pthread_mutex_unlock(&b->lock);
}

/* The subvolume (tree id) of directory d's inodes; 0 if unknown. */
static uint64_t tree_of_dir(const struct backend_dir *d)
{
	struct btrfs_ioctl_ino_lookup_args lk = { .objectid = BTRFS_FIRST_FREE_OBJECTID };
	uint64_t subvol;

	if (stx_subvol(d->stx, &subvol))
		return subvol;
	return ioctl(d->fd, BTRFS_IOC_INO_LOOKUP, &lk) == 0 ? lk.treeid : 0;
}

/* ---- one inode's items ---------------------------------------------------- */

static int64_t time_ns(const unsigned char *ts, bool *ok)
{
	uint64_t sec = btrfs_get64(ts + offsetof(struct btrfs_timespec, sec));
	uint32_t nsec = btrfs_get32(ts + offsetof(struct btrfs_timespec, nsec));

	/* A time whose nanoseconds since the epoch do not fit a backend_inode's int64_t. */
	if (nsec >= 1000000000U || (int64_t)sec > INT64_MAX / 1000000000LL - 1 ||
	    (int64_t)sec < INT64_MIN / 1000000000LL + 1)
		*ok = false;
	return (int64_t)sec * 1000000000LL + nsec;
}

#define INODE_FIELD(it, f) ((it)->data + offsetof(struct btrfs_inode_item, f))

static void inode_item(struct gather *g, const struct btrfs_tree_item *it)
{
	struct backend_inode *r = &g->out[g->k];
	uint64_t flags;
	bool ok = true;

	if (g->have_inode || it->len < sizeof(struct btrfs_inode_item)) {
		g->odd = true;
		return;
	}
	g->have_inode = true;
	flags = btrfs_get64(INODE_FIELD(it, flags));
	g->nbytes = btrfs_get64(INODE_FIELD(it, nbytes));
	*r = (struct backend_inode){
		.ino = it->key.objectid,
		.size = btrfs_get64(INODE_FIELD(it, size)),
		.atime_ns = time_ns(INODE_FIELD(it, atime), &ok),
		.mtime_ns = time_ns(INODE_FIELD(it, mtime), &ok),
		.ctime_ns = time_ns(INODE_FIELD(it, ctime), &ok),
		.btime_ns = time_ns(INODE_FIELD(it, otime), &ok),
		.nlink = btrfs_get32(INODE_FIELD(it, nlink)),
		.uid = btrfs_get32(INODE_FIELD(it, uid)),
		.gid = btrfs_get32(INODE_FIELD(it, gid)),
		.gen = (uint32_t)btrfs_get64(INODE_FIELD(it, generation)),
		.nextents = 0,
		.mode = (uint16_t)btrfs_get32(INODE_FIELD(it, mode)),
	};
	/* Changed since shortly before the scan, or since the syncfs: the tree may lag. */
	if (!ok || (flags & ~RECORD_FLAGS) || btrfs_get32(INODE_FIELD(it, mode)) > UINT16_MAX ||
	    r->nlink == 0 || (int64_t)r->size < 0 || g->nbytes > INT64_MAX ||
	    btrfs_get64(INODE_FIELD(it, transid)) > g->b->generation || r->ctime_ns < 0 ||
	    (uint64_t)r->ctime_ns >= g->ctx->changed_since_ns ||
	    (uint64_t)r->mtime_ns >= g->ctx->changed_since_ns)
		g->odd = true;
	switch (r->mode & S_IFMT) {
	case S_IFREG: case S_IFLNK: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	default:
		g->odd = true;	/* a directory (stat'ed by the walk) or bogus */
	}
	r->blocks = (g->nbytes + g->b->sectorsize - 1) / g->b->sectorsize *
		    (g->b->sectorsize / 512);
}

/* Add x to the record's map, merged with the last extent as FIEMAP merges. */
static void map_add(struct gather *g, const struct bulk_ext *x)
{
	struct bulk_thread *t = g->t;
	struct bulk_rec *rec = &t->recs[g->k];
	struct bulk_ext *last = rec->count ? &t->ext[t->nr_ext - 1] : NULL;

	if (last && last->logical + last->len == x->logical &&
	    last->physical + last->len == x->physical && last->flags == x->flags &&
	    !(x->flags & FIEMAP_EXTENT_DATA_INLINE)) {
		last->len += x->len;
		return;
	}
	if (rec->count == MAX_MAP) {
		g->map_odd = true;
		return;
	}
	if (t->nr_ext == t->alloc_ext) {
		t->alloc_ext = t->alloc_ext ? 2 * t->alloc_ext : 256;
		t->ext = xrealloc(t->ext, t->alloc_ext * sizeof(*t->ext));
	}
	if (!rec->count)
		rec->first = (uint32_t)t->nr_ext;
	t->ext[t->nr_ext++] = *x;
	rec->count++;
}

#define FE_FIELD(it, f) ((it)->data + offsetof(struct btrfs_file_extent_item, f))

/* Inline data: at 0 only, its length to the sector, nbytes its ram_bytes. */
static void inline_extent(struct gather *g, const struct btrfs_tree_item *it, uint8_t comp)
{
	uint64_t ram = btrfs_get64(FE_FIELD(it, ram_bytes)), ss = g->b->sectorsize;

	if (it->key.offset != 0 || g->next_off != 0 || ram == 0 || ram > ss) {
		g->map_odd = true;
		return;
	}
	g->found += ram;
	g->next_off = (ram + ss - 1) / ss * ss;
	map_add(g, &(struct bulk_ext){
		.logical = 0, .physical = 0, .len = g->next_off,
		.flags = FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_NOT_ALIGNED |
			 (comp ? FIEMAP_EXTENT_ENCODED : 0),
	});
}

static void file_extent(struct gather *g, const struct btrfs_tree_item *it)
{
	uint64_t ss = g->b->sectorsize, off = it->key.offset, bytenr, num;
	uint8_t type, comp;

	if (!S_ISREG(g->out[g->k].mode)) {
		/* A symlink's target is an inline extent; a device node has none. */
		if (!S_ISLNK(g->out[g->k].mode))
			g->odd = true;
		return;
	}
	if (g->map_odd)
		return;
	if (it->len < FE_INLINE_START || FE_FIELD(it, encryption)[0] ||
	    FE_FIELD(it, other_encoding)[0] || FE_FIELD(it, other_encoding)[1] ||
	    (comp = FE_FIELD(it, compression)[0]) > MAX_COMPRESSION) {
		g->map_odd = true;
		return;
	}
	type = FE_FIELD(it, type)[0];
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		inline_extent(g, it, comp);
		return;
	}
	if ((type != BTRFS_FILE_EXTENT_REG && type != BTRFS_FILE_EXTENT_PREALLOC) ||
	    it->len != FE_REG_SIZE || off % ss || off < g->next_off) {
		g->map_odd = true;
		return;
	}
	bytenr = btrfs_get64(FE_FIELD(it, disk_bytenr));
	num = btrfs_get64(FE_FIELD(it, num_bytes));
	if (num == 0 || num % ss || off + num < off ||
	    (type == BTRFS_FILE_EXTENT_PREALLOC && (!bytenr || comp))) {
		g->map_odd = true;
		return;
	}
	g->next_off = off + num;
	if (!bytenr)
		return;		/* a hole: FIEMAP leaves it out */
	g->found += num;
	map_add(g, &(struct bulk_ext){
		.logical = off, .physical = bytenr + btrfs_get64(FE_FIELD(it, offset)),
		.len = num,
		.flags = (type == BTRFS_FILE_EXTENT_PREALLOC ? FIEMAP_EXTENT_UNWRITTEN : 0) |
			 (comp ? FIEMAP_EXTENT_ENCODED : 0),
	});
}

static void gather_item(struct gather *g, const struct btrfs_tree_item *it)
{
	if (it->key.type == BTRFS_INODE_ITEM_KEY) {
		inode_item(g, it);
		return;
	}
	if (!g->have_inode) {
		g->odd = true;	/* its items without the inode item first */
		return;
	}
	switch (it->key.type) {
	case BTRFS_INODE_REF_KEY:
	case BTRFS_INODE_EXTREF_KEY:
		break;
	case BTRFS_XATTR_ITEM_KEY:
		g->out[g->k].flags |= BACKEND_INODE_XATTRS;
		break;
	case BTRFS_EXTENT_DATA_KEY:
		file_extent(g, it);
		break;
	default:
		g->odd = true;	/* verity, a directory's items: stat'ed */
	}
}

/* The inode's items are all read: its record, or none. */
static size_t gather_end(struct gather *g)
{
	struct backend_inode *r = &g->out[g->k];
	struct bulk_rec *rec = &g->t->recs[g->k];

	if (!g->active)
		return 0;
	g->active = false;
	if (!g->have_inode || g->odd) {
		r->ino = 0;
		g->t->nr_ext -= rec->count;	/* the last record's: drop them */
		*rec = (struct bulk_rec){ 0 };
		return 0;
	}
	if (S_ISLNK(r->mode)) {
		r->nextents = UINT32_MAX;	/* never mapped by the walk */
	} else if (S_ISREG(r->mode)) {
		rec->map_ok = !g->map_odd && g->found == g->nbytes;
		r->nextents = rec->map_ok ? rec->count : UINT32_MAX;
	}
	return 1;
}

static void gather_start(struct gather *g, size_t k)
{
	*g = (struct gather){ .b = g->b, .t = g->t, .ctx = g->ctx, .out = g->out, .k = k,
			      .active = true };
	g->out[k] = (struct backend_inode){ 0 };
	g->t->recs[k] = (struct bulk_rec){ 0 };
}

/* inos[i .. j] (one window) of tree from one key range into out[i .. j]. */
static size_t bulk_window(struct gather *g, uint64_t tree, const uint64_t *inos, size_t i,
			  size_t j)
{
	struct btrfs_tree_reader *r = &g->t->r;
	struct btrfs_tree_item it;
	unsigned long long calls = r->calls;
	size_t found = 0, k = j + 1;
	uint64_t cur = 0;
	int ret;

	for (size_t x = i; x <= j; x++) {
		g->out[x].ino = 0;
		g->t->recs[x] = (struct bulk_rec){ 0 };
	}
	btrfs_tree_seek(r, tree, (struct btrfs_tkey){ inos[i], BTRFS_INODE_ITEM_KEY, 0 },
			(struct btrfs_tkey){ inos[j], BTRFS_EXTENT_DATA_KEY, UINT64_MAX });
	while ((ret = btrfs_tree_next(r, &it)) > 0) {
		if (it.key.objectid != cur) {
			found += gather_end(g);
			cur = it.key.objectid;
			k = i + bulk_index_of(inos + i, j - i + 1, cur);
			if (k <= j)
				gather_start(g, k);
		}
		if (k <= j)
			gather_item(g, &it);
	}
	found += gather_end(g);
	atomic_fetch_add(&g->b->searches, r->calls - calls);
	if (ret < 0) {
		/* A failed search: none of the window's records (each is stat'ed). */
		for (size_t x = i; x <= j; x++)
			g->out[x].ino = 0;
		return 0;
	}
	return found;
}

int btrfs_bulk_inodes(struct scrub_ctx *ctx, const struct backend_dir *d,
		      const uint64_t *inos, size_t n, struct backend_inode *out)
{
	struct btrfs_bulk *b = btrfs_bulk_of(ctx);
	struct bulk_thread *t;
	struct gather g;
	uint64_t tree;
	size_t found = 0;
	static const struct btrfs_tkey none = { 0, 0, 0 };

	if (!b || d->thread >= b->nr_threads)
		return -EOPNOTSUPP;
	sync_once(b);
	tree = tree_of_dir(d);
	if (!tree)
		return -EOPNOTSUPP;
	t = &b->t[d->thread];
	if (!t->open) {
		if (btrfs_tree_open(&t->r, b->fd, tree, none, none) < 0)
			return -ENOMEM;
		t->open = true;
	}
	if (n > t->alloc) {
		t->alloc = n;
		t->inos = xrealloc(t->inos, n * sizeof(*t->inos));
		t->recs = xrealloc(t->recs, n * sizeof(*t->recs));
	}
	memcpy(t->inos, inos, n * sizeof(*inos));
	t->n = n;
	t->nr_ext = 0;
	g = (struct gather){ .b = b, .t = t, .ctx = ctx, .out = out };
	for (size_t i = 0, j; i < n; i = j + 1) {
		for (j = i; j + 1 < n && inos[j + 1] - inos[i] < BULK_WINDOW;)
			j++;
		found += bulk_window(&g, tree, inos, i, j);
	}
	atomic_fetch_add(&b->records, found);
	return (int)found;
}

int btrfs_bulk_extents(struct scrub_ctx *ctx, unsigned thread, const struct backend_inode *r,
		       struct fiemap_extent *out, size_t max)
{
	struct btrfs_bulk *b = btrfs_bulk_of(ctx);
	const struct bulk_thread *t;
	const struct bulk_rec *rec;
	size_t i;

	if (!b || thread >= b->nr_threads)
		return -EOPNOTSUPP;
	t = &b->t[thread];
	i = bulk_index_of(t->inos, t->n, r->ino);
	if (i == t->n || !t->recs[i].map_ok || !t->recs[i].count || t->recs[i].count > max)
		return -ENODATA;
	rec = &t->recs[i];
	for (uint32_t x = 0; x < rec->count; x++) {
		const struct bulk_ext *e = &t->ext[rec->first + x];

		out[x] = (struct fiemap_extent){ .fe_logical = e->logical,
						 .fe_physical = e->physical,
						 .fe_length = e->len, .fe_flags = e->flags };
	}
	out[rec->count - 1].fe_flags |= FIEMAP_EXTENT_LAST;
	atomic_fetch_add(&b->maps, 1);
	return (int)rec->count;
}
