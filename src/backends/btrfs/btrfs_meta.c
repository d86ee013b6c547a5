/*
 * btrfs_meta: metadata-only verification, the tree blocks on the devices.
 *
 * Without -x, fscrub must not read file data, and the kernel's scrub has
 * no metadata-only mode.  So phase 2 reads the tree blocks itself:
 *
 *  - the chunk tree gives the metadata and system block groups and their
 *    stripes (device, physical offset) -- single, DUP, RAID0, RAID1,
 *    RAID1C3/C4 and RAID10;
 *  - the extent tree, read only over those block groups (a METADATA_ITEM,
 *    or an EXTENT_ITEM with the TREE_BLOCK flag), lists every tree block
 *    with its level, the transaction that wrote it and, for the trees
 *    below 256 that are never shared, its owner;
 *  - each device is read in device order (its stripes sorted by offset,
 *    the blocks of a stripe in logical order), O_DIRECT, contiguous blocks
 *    merged into reads of up to META_READ bytes, several in flight
 *    (ioengine.h);
 *  - each copy is checked as the kernel's read of a tree block checks it
 *    (btrfs_validate_extent_buffer): crc32c over the block after its
 *    checksum, bytenr, fsid (the metadata UUID; on a seed device the
 *    seed's fsid), level, generation (the extent item's, which is the one
 *    the block was written with: btrfs never rewrites a tree block in
 *    place) and owner where known.
 *
 * A copy that fails is confirmed before it is reported: the extent tree
 * must still hold the block with the same generation (else it was freed,
 * perhaps reused: changed while being checked), and the copy must read
 * bad again.  A bad copy with a good one is an error under -n or on a
 * read-only mount ("a good copy exists, not repaired"); otherwise the
 * kernel's scrub of that block group's stripe on that device
 * (BTRFS_IOC_SCRUB from its physical start) rewrites it from the good
 * copy, the copy is read again and the finding is "Repaired".  A block
 * with no good copy is an error.  Blocks written by the transaction
 * running now are not on the disk yet: those newer than the superblock's
 * generation, read after the extent tree, are left out.
 *
 * When: the kernel's own reads in phase 3 (the walk, the tree check)
 * repair a bad copy from a good one on a writable mount, -n or not, so a
 * copy the kernel may read must be read here first.  Every copy is read
 * and judged in phase 2 but the second copy of a DUP block group's blocks:
 * the kernel reads a DUP block's first copy and the second only when the
 * first fails, so where the first read good here, nobody else reads the
 * second; those are read in a thread of their own beside phase 3 (about
 * half of phase 2's bytes on a single device) and judged after the walk,
 * before the tree check says what it found (btrfs_meta_finish()).  A
 * block whose first copy read bad has its second read at once, and is
 * judged in phase 2 as before.
 *
 * On a read-only rescue= mount that left the extent tree unloaded, the
 * extent tree is read from the devices (btrfs_devtree.h).
 *
 * What is not checked here: block groups with RAID5/6 metadata (parity
 * would have to be recomputed) and filesystems with an xxhash, sha256 or
 * blake2 checksum get the kernel's scrub of those block groups' device
 * ranges only, which verifies their tree blocks and no file data.  The
 * item-level checks of the kernel's tree checker are phase 3's.
 *
 * Memory: META_SLOT bytes per sector of each metadata block group (an
 * array per block group, 2 MiB per GiB of metadata at 4 KiB sectors), and
 * the reads of one stripe at a time (two while the later copies read).
 */
#include "backends/btrfs/btrfs_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "backends/btrfs/btrfs_chunkmap.h"
#include "backends/btrfs/btrfs_devtree.h"
#include "backends/btrfs/btrfs_trees.h"
#include "report/checks.h"
#include "scan/context.h"
#include "lib/ioengine.h"
#include "lib/mountpoint.h"
#include "report/report.h"
#include "lib/sorted.h"
#include "lib/strbuf.h"
#include "lib/thread.h"

/*
 * 1 MiB reads: large enough that a device streams (merged neighbouring
 * tree blocks), small enough that META_DEPTH buffers stay a few MiB.
 */
#define META_READ (1024 * 1024)
/* Reads in flight per device: what keeps an SSD's queue busy, a disk's sorted. */
#define META_DEPTH 8
/* O_DIRECT alignment: every block device's logical block divides 4 KiB. */
#define META_ALIGN 4096
/*
 * btrfs_extent_item: refs, generation, flags; a tree block's EXTENT_ITEM
 * then a btrfs_tree_block_info (key, level).
 */
#define EI_GENERATION 8
#define EI_FLAGS 16
#define EI_SIZE 24
#define TBI_LEVEL 17
#define TBI_SIZE 18
/* Levels 0-7: the deepest tree btrfs builds (BTRFS_MAX_LEVEL, not in the uapi headers). */
#define MAX_TREE_LEVEL 8
/* An inline back reference of a tree block: a type byte and a u64. */
#define IREF_SIZE 9
/* The superblock: at 64 KiB on every device; its generation at byte 72. */
#define SB_OFFSET 65536
#define SB_GENERATION 72

/*
 * SLOT_JUDGED: its bad copies were confirmed and reported in phase 2; the
 * second read of its DUP copy beside phase 3 is not judged again.
 */
enum { SLOT_USED = 1, SLOT_REPAIR = 2, SLOT_JUDGED = 4 };

/*
 * A sector of a metadata block group, where a tree block may start.  The
 * generation is kept in 32 bits: a block is compared with its extent
 * item's, and four billion transactions apart are not told apart.
 */
struct meta_slot {
	uint32_t gen;
	uint8_t level;
	uint8_t owner;		/* the one tree below 256 referencing it; 0: not known */
	_Atomic uint8_t bad;	/* bit c: copy c failed its check */
	uint8_t flags;		/* SLOT_* */
};

struct meta_chunk {
	struct btrfs_cmap_chunk g;
	struct meta_slot *slots;	/* len / sectorsize; NULL: the kernel's scrub checks it */
};

enum meta_why { META_OK = BTRFS_BLOCK_OK, META_READ_ERR = BTRFS_BLOCK_READ_ERR,
		META_CSUM = BTRFS_BLOCK_CSUM, META_BYTENR = BTRFS_BLOCK_BYTENR,
		META_FSID = BTRFS_BLOCK_FSID, META_GEN = BTRFS_BLOCK_GEN,
		META_LEVEL = BTRFS_BLOCK_LEVEL, META_OWNER = BTRFS_BLOCK_OWNER };

static const char *const why_text[] = {
	[META_OK] = "good", [META_READ_ERR] = "read error", [META_CSUM] = "bad checksum",
	[META_BYTENR] = "another block's address in its header",
	[META_FSID] = "another filesystem's fsid in its header",
	[META_GEN] = "another generation than its extent item's",
	[META_LEVEL] = "another level than its extent item's",
	[META_OWNER] = "another owner than its extent item's",
};

struct btrfs_meta {
	struct scrub_ctx *ctx;
	struct btrfs_meta_dev *devs;	/* a copy: the reads beside phase 3 outlive the caller's */
	unsigned nr_devs;
	bool readonly;
	uint32_t nodesize, sectorsize;
	bool crc32c;			/* else the kernel's scrub checks every block group */
	uint8_t metadata_uuid[16];
	uint64_t committed;		/* the superblock's generation */
	struct meta_chunk *c;
	size_t nr_c, alloc_c;
	/* the stripe being read */
	const struct meta_chunk *cur;
	unsigned cur_stripe;
	const uint8_t *cur_fsid;
	struct io_range *ranges;
	uint64_t *logicals;		/* of each range's first block */
	size_t nr_ranges, alloc_ranges, alloc_logicals;
	atomic_ullong bytes, copies, bad_copies;
	unsigned long long blocks, unwritten, scrubbed;
	unsigned long long scrub_tree, scrub_data;	/* bytes the kernel's scrubs read */
	int fd;
	bool later;			/* reading the DUP copies left for beside phase 3 */
	bool started;			/* the thread reading them */
	pthread_t thread;
};


/* ---- the chunk tree and the extent tree ---- */

/*
 * The longest metadata chunk whose sectors get a slot each (8 bytes per
 * sector: 128 MiB of slots).  The kernel makes metadata chunks of at most
 * 1 GiB (256 MiB below 50 GiB of devices; a zoned device's zone times its
 * data stripes), so a longer one is damage, and so is one longer than all
 * the devices together: its length is not believed (phase 3's chunk checks
 * report it against its block group) and its blocks are not read here --
 * a 16 TiB length in a fuzzed 64 MiB image asked for 32 GiB of slots.
 */
#define META_CHUNK_MAX (64ULL << 30)

static bool chunk_len_believable(const struct btrfs_meta *m, const struct btrfs_cmap_chunk *g)
{
	uint64_t devices = 0;

	for (unsigned i = 0; i < m->nr_devs; i++)
		devices += m->devs[i].total_bytes;
	return g->len <= META_CHUNK_MAX && (!devices || g->len <= devices);
}

static int chunk_item(struct btrfs_meta *m, const struct btrfs_tree_item *it)
{
	struct meta_chunk *c;
	int ret;

	if (btrfs_grow((void **)&m->c, &m->alloc_c, m->nr_c + 1, sizeof(*m->c)) < 0)
		return -ENOMEM;
	c = &m->c[m->nr_c];
	*c = (struct meta_chunk){ 0 };
	if ((ret = btrfs_cmap_parse(it, &c->g)) <= 0)
		return ret;
	if (!btrfs_cmap_is_meta(c->g.type) || !chunk_len_believable(m, &c->g)) {
		free(c->g.st);
		return 0;
	}
	m->nr_c++;
	if (m->crc32c && btrfs_cmap_readable(&c->g) &&
	    !(c->slots = calloc(c->g.len / m->sectorsize, sizeof(*c->slots))))
		return -ENOMEM;
	return 0;
}

static int read_chunks(struct btrfs_meta *m)
{
	const struct btrfs_tkey min = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0 };
	const struct btrfs_tkey max = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY,
					UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = btrfs_tree_open(&r, m->ctx->mnt_fd, BTRFS_CHUNK_TREE_OBJECTID, min, max);

	if (ret < 0)
		return ret;
	while ((ret = btrfs_tree_next(&r, &it)) > 0)
		if ((ret = chunk_item(m, &it)) < 0)
			break;
	btrfs_tree_close(&r);
	return ret;
}

/*
 * The owner a tree block must carry: the root of its one inline
 * TREE_BLOCK_REF, for the trees below 256, which are never snapshotted
 * (a subvolume's blocks keep the owner that wrote them when shared).
 */
static uint8_t sole_owner(const unsigned char *d, uint32_t len, size_t off)
{
	uint64_t root;

	if (btrfs_get64(d) != 1 || btrfs_get64(d + EI_FLAGS) & BTRFS_BLOCK_FLAG_FULL_BACKREF ||
	    off + IREF_SIZE != len || d[off] != BTRFS_TREE_BLOCK_REF_KEY)
		return 0;
	root = btrfs_get64(d + off + 1);
	return root < BTRFS_FIRST_FREE_OBJECTID ? (uint8_t)root : 0;
}

/* An extent item of a tree block in c: its slot filled.  Data extents are skipped. */
static void extent_item(struct btrfs_meta *m, struct meta_chunk *c,
			const struct btrfs_tree_item *it)
{
	const unsigned char *d = it->data;
	uint64_t bytenr = it->key.objectid;
	struct meta_slot *s;
	size_t refs = EI_SIZE;
	uint8_t level;

	if (it->len < EI_SIZE || bytenr < c->g.start ||
	    bytenr - c->g.start + m->nodesize > c->g.len || (bytenr - c->g.start) % m->sectorsize)
		return;
	if (it->key.type == BTRFS_METADATA_ITEM_KEY) {
		/* a level past the deepest tree is phase 3's finding (btrfs.extent_item) */
		if (it->key.offset >= MAX_TREE_LEVEL)
			return;
		level = (uint8_t)it->key.offset;
	} else if (it->key.type == BTRFS_EXTENT_ITEM_KEY &&
		   btrfs_get64(d + EI_FLAGS) & BTRFS_EXTENT_FLAG_TREE_BLOCK &&
		   it->len >= EI_SIZE + TBI_SIZE) {
		level = d[EI_SIZE + TBI_LEVEL];
		refs += TBI_SIZE;
	} else {
		return;
	}
	s = &c->slots[(bytenr - c->g.start) / m->sectorsize];
	s->gen = (uint32_t)btrfs_get64(d + EI_GENERATION);
	s->level = level;
	s->owner = sole_owner(d, it->len, refs);
	s->flags = SLOT_USED;
	m->blocks++;
}

static int read_extents(struct btrfs_meta *m, struct btrfs_tree_reader *r, struct meta_chunk *c)
{
	const struct btrfs_tkey min = { c->g.start, 0, 0 };
	const struct btrfs_tkey max = { c->g.start + c->g.len - 1, UINT8_MAX, UINT64_MAX };
	struct btrfs_tree_item it;
	int ret;

	btrfs_tree_seek(r, BTRFS_EXTENT_TREE_OBJECTID, min, max);
	while ((ret = btrfs_tree_next(r, &it)) > 0 && !scrub_should_stop(m->ctx))
		extent_item(m, c, &it);
	return ret;
}

/*
 * The extent tree's items over each checked block group.  On a read-only
 * rescue= mount that left the extent tree unloaded, it is read from the
 * devices (btrfs_devtree.h says why only there; its bad blocks are phase
 * 3's findings, which reads it again).
 */
static int read_all_extents(struct btrfs_meta *m)
{
	const struct btrfs_tkey zero = { 0, 0, 0 };
	struct btrfs_devtree_log log = { 0 };
	struct btrfs_tree_reader r;
	int ret = btrfs_tree_open(&r, m->ctx->mnt_fd, BTRFS_EXTENT_TREE_OBJECTID, zero, zero);

	if ((m->ctx->svfs.f_flag & ST_RDONLY) && mount_option(m->ctx->table_mnt_id, "rescue", NULL))
		btrfs_tree_fallback(&r, &log);

	for (size_t i = 0; ret >= 0 && i < m->nr_c; i++)
		if (m->c[i].slots)
			ret = read_extents(m, &r, &m->c[i]);
	btrfs_tree_close(&r);
	return ret < 0 ? ret : 0;
}

/* ---- reading and checking the copies ---- */

static enum meta_why check_block(const struct btrfs_meta *m, const unsigned char *b,
				 uint64_t logical, const uint8_t *fsid,
				 const struct meta_slot *s)
{
	enum meta_why why = (enum meta_why)btrfs_block_header(b, m->nodesize, logical, fsid);

	if (why != META_OK)
		return why;
	if ((uint32_t)btrfs_get64(b + BTRFS_H_GENERATION) != s->gen)
		return META_GEN;
	if (b[BTRFS_H_LEVEL] != s->level)
		return META_LEVEL;
	if (s->owner && btrfs_get64(b + BTRFS_H_OWNER) != s->owner)
		return META_OWNER;
	return META_OK;
}

static struct meta_slot *slot_of(const struct btrfs_meta *m, const struct meta_chunk *c,
				 uint64_t logical)
{
	return &c->slots[(logical - c->g.start) / m->sectorsize];
}

/* ioengine's done(): check each block of a read of the current stripe. */
static void read_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct btrfs_meta *m = arg;
	uint64_t logical = m->logicals[r - m->ranges];

	atomic_fetch_add(&m->bytes, res > 0 ? (unsigned long long)res : 0);
	for (uint64_t at = 0; at < r->len; at += m->nodesize, logical += m->nodesize) {
		struct meta_slot *s = slot_of(m, m->cur, logical);
		uint64_t phys;
		unsigned copy;

		btrfs_cmap_on_stripe(&m->cur->g, m->cur_stripe, logical, &phys, &copy);
		atomic_fetch_add(&m->copies, 1);
		if (res < (int64_t)(at + m->nodesize) ||
		    check_block(m, (unsigned char *)buf + at, logical, m->cur_fsid, s) != META_OK) {
			atomic_fetch_or(&s->bad, (uint8_t)(1u << copy));
			atomic_fetch_add(&m->bad_copies, 1);
		}
	}
}

static bool admit(void *arg, uint64_t len)
{
	const struct btrfs_meta *m = arg;

	(void)len;
	return !scrub_should_stop(m->ctx);
}

/* Is this block on the disk yet?  Not if the running transaction wrote it. */
static bool written(const struct btrfs_meta *m, const struct meta_slot *s)
{
	return s->gen <= (uint32_t)m->committed;
}

/* Add the block at logical (at phys) to the reads: merged with the last if it continues it. */
static int add_read(struct btrfs_meta *m, uint64_t logical, uint64_t phys)
{
	struct io_range *last = m->nr_ranges ? &m->ranges[m->nr_ranges - 1] : NULL;
	bool striped = m->cur->g.type & (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10);

	if (last && last->off + last->len == phys && last->len + m->nodesize <= META_READ &&
	    m->logicals[m->nr_ranges - 1] + last->len == logical &&
	    (!striped || phys % BTRFS_CMAP_STRIPE_LEN)) {
		last->len += m->nodesize;
		return 0;
	}
	if (btrfs_grow((void **)&m->ranges, &m->alloc_ranges, m->nr_ranges + 1,
		       sizeof(*m->ranges)) < 0 ||
	    btrfs_grow((void **)&m->logicals, &m->alloc_logicals, m->nr_ranges + 1,
		 sizeof(*m->logicals)) < 0)
		return -ENOMEM;
	m->ranges[m->nr_ranges] = (struct io_range){ phys, m->nodesize };
	m->logicals[m->nr_ranges++] = logical;
	return 0;
}

/* Read stripe i of chunk c (on the device open as m->fd). */
static int read_stripe(struct btrfs_meta *m, const struct meta_chunk *c, unsigned i,
		       const uint8_t *fsid)
{
	size_t nslots = c->g.len / m->sectorsize;
	int ret = 0;
	struct io_job job = {
		.fd = m->fd, .depth = META_DEPTH, .max_len = META_READ, .align = META_ALIGN,
		.no_uring = getenv("FSCRUB_DEBUG_NO_URING") != NULL,
		.admit = admit, .done = read_done, .arg = m,
	};

	m->cur = c;
	m->cur_stripe = i;
	m->cur_fsid = fsid;
	m->nr_ranges = 0;
	for (size_t k = 0; k < nslots && ret == 0; k++) {
		uint64_t logical = c->g.start + k * m->sectorsize, phys;
		unsigned copy;

		if (!(c->slots[k].flags & SLOT_USED) || (c->slots[k].flags & SLOT_JUDGED) ||
		    !btrfs_cmap_on_stripe(&c->g, i, logical, &phys, &copy))
			continue;
		if (written(m, &c->slots[k]))
			ret = add_read(m, logical, phys);
		else if (copy == 0)
			m->unwritten++;
	}
	if (ret < 0 || !m->nr_ranges)
		return ret;
	job.ranges = m->ranges;
	job.nr_ranges = m->nr_ranges;
	return ioengine_run(&job);
}

/* The fsid the blocks on device d carry. */
static const uint8_t *dev_fsid(const struct btrfs_meta *m, const struct btrfs_meta_dev *d)
{
	return d->seed ? d->fsid : m->metadata_uuid;
}

/* A (chunk, stripe) on a device, for sorting by physical offset. */
struct dev_stripe {
	uint64_t offset;
	size_t chunk;
	unsigned stripe;
};

static int cmp_dev_stripe(const void *a, const void *b)
{
	const struct dev_stripe *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/*
 * Is stripe j of c read beside phase 3?  A DUP block group's second copy:
 * the kernel reads a DUP block's first copy, and its second only when the
 * first fails (and then rewrites the first from it on a writable mount,
 * -n or not).  So the second copy of a block whose first is good is read
 * by nobody but fscrub, and may wait; every other copy is read before the
 * kernel may read it in phase 3, to be found bad before it is repaired.
 * (RAID1's kernel chooses a mirror by the reading thread: all its copies
 * are read in phase 2.)
 */
static bool later_copy(const struct meta_chunk *c, unsigned j)
{
	return (c->g.type & BTRFS_BLOCK_GROUP_DUP) && j > 0;
}

/*
 * The stripes of checked block groups on device d that this pass reads
 * (m->later: the later copies, else the others), in device order (*out:
 * caller frees).
 */
static int dev_stripes(const struct btrfs_meta *m, uint64_t devid, struct dev_stripe **out,
		       size_t *nr)
{
	size_t n = 0, alloc = 0;

	*out = NULL;
	for (size_t i = 0; i < m->nr_c; i++)
		for (unsigned j = 0; m->c[i].slots && j < m->c[i].g.n; j++) {
			if (m->c[i].g.st[j].devid != devid || later_copy(&m->c[i], j) != m->later)
				continue;
			if (btrfs_grow((void **)out, &alloc, n + 1, sizeof(**out)) < 0)
				return -ENOMEM;
			(*out)[n++] = (struct dev_stripe){ m->c[i].g.st[j].offset, i, j };
		}
	sort_items(*out, n, sizeof(**out), cmp_dev_stripe);
	*nr = n;
	return 0;
}

static int read_device(struct btrfs_meta *m, const struct btrfs_meta_dev *d)
{
	struct dev_stripe *ds;
	size_t n;
	int ret = dev_stripes(m, d->devid, &ds, &n);

	if (ret < 0 || !n) {
		free(ds);
		return ret;
	}
	if ((m->fd = open(d->path, O_RDONLY | O_DIRECT | O_CLOEXEC)) < 0) {
		free(ds);
		return -errno;
	}
	for (size_t k = 0; k < n && ret == 0 && !scrub_should_stop(m->ctx); k++)
		ret = read_stripe(m, &m->c[ds[k].chunk], ds[k].stripe, dev_fsid(m, d));
	close(m->fd);
	m->fd = -1;
	free(ds);
	return ret;
}

/* ---- confirming, repairing and reporting a bad copy ---- */

static const struct btrfs_meta_dev *dev_by_id(const struct btrfs_meta *m, uint64_t devid)
{
	for (unsigned i = 0; i < m->nr_devs; i++)
		if (m->devs[i].devid == devid)
			return &m->devs[i];
	return NULL;
}

/* Read copy (stripe i) of the block at logical again: its verdict. */
static enum meta_why reread(const struct btrfs_meta *m, const struct meta_chunk *c, unsigned i,
			    uint64_t logical, unsigned char *buf)
{
	const struct btrfs_meta_dev *d = dev_by_id(m, c->g.st[i].devid);
	enum meta_why why = META_READ_ERR;
	uint64_t phys;
	unsigned copy;
	int fd;

	if (!d || d->missing || !btrfs_cmap_on_stripe(&c->g, i, logical, &phys, &copy))
		return META_OK;		/* not read: not judged */
	if ((fd = open(d->path, O_RDONLY | O_DIRECT | O_CLOEXEC)) < 0)
		return META_READ_ERR;
	if (pread(fd, buf, m->nodesize, (off_t)phys) == (ssize_t)m->nodesize)
		why = check_block(m, buf, logical, dev_fsid(m, d), slot_of(m, c, logical));
	close(fd);
	return why;
}

/*
 * Does the extent tree still hold a tree block at bytenr, of generation
 * gen (low 32 bits)?  If not it was freed, perhaps reused, since it was
 * listed: what read bad is not damage.
 */
static bool still_allocated(const struct btrfs_meta *m, uint64_t bytenr, uint32_t gen)
{
	const struct btrfs_tkey min = { bytenr, BTRFS_EXTENT_ITEM_KEY, 0 };
	const struct btrfs_tkey max = { bytenr, BTRFS_METADATA_ITEM_KEY, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	bool found = false;
	/*
	 * A search that fails (the extent tree's own damage, on the path to
	 * this very block) cannot tell either; FSCRUB_DEBUG_EXTENT_SEARCH_FAILS
	 * makes it fail at once, for the tests.
	 */
	int ret = getenv("FSCRUB_DEBUG_EXTENT_SEARCH_FAILS") ? -EIO : 0;

	if (btrfs_tree_open(&r, m->ctx->mnt_fd, BTRFS_EXTENT_TREE_OBJECTID, min, max) < 0)
		return true;	/* cannot tell: judged by the reads alone */
	while (ret >= 0 && !found && (ret = btrfs_tree_next(&r, &it)) > 0)
		found = (it.key.type == BTRFS_METADATA_ITEM_KEY ||
			 it.key.type == BTRFS_EXTENT_ITEM_KEY) && it.len >= EI_SIZE &&
			(uint32_t)btrfs_get64(it.data + EI_GENERATION) == gen;
	btrfs_tree_close(&r);
	return found || ret < 0;
}

/*
 * The copies of the block at logical that c stores on a device that is
 * there (a missing device's copy is neither good nor bad): a bit per copy,
 * and the stripe of each.
 */
static unsigned copies_of(const struct btrfs_meta *m, const struct meta_chunk *c, uint64_t logical,
			  unsigned stripe[])
{
	unsigned mask = 0;

	for (unsigned i = 0; i < c->g.n; i++) {
		const struct btrfs_meta_dev *d = dev_by_id(m, c->g.st[i].devid);
		uint64_t phys;
		unsigned copy;

		if (d && !d->missing && btrfs_cmap_on_stripe(&c->g, i, logical, &phys, &copy)) {
			mask |= 1u << copy;
			stripe[copy] = i;
		}
	}
	return mask;
}

/*
 * Confirm the bad copies of the block at logical: read each again.  What
 * reads good now, or a block the extent tree no longer holds, changed
 * while being checked (an info).  Leaves in s->bad the copies bad twice,
 * and marks the block for repair where a good copy exists.
 */
static void confirm(struct btrfs_meta *m, struct meta_chunk *c, struct meta_slot *s,
		    uint64_t logical, unsigned char *buf)
{
	unsigned stripe[BTRFS_CMAP_MAX_COPIES], all = copies_of(m, c, logical, stripe);
	uint8_t bad = 0;

	for (unsigned k = 0; k < BTRFS_CMAP_MAX_COPIES; k++)
		if (s->bad & (1u << k) && reread(m, c, stripe[k], logical, buf) != META_OK)
			bad |= (uint8_t)(1u << k);
	if (bad && !still_allocated(m, logical, s->gen)) {
		str_changed(m->ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "tree block at logical %llu "
			    "read bad, then the extent tree no longer held it (freed)",
			    (unsigned long long)logical);
		bad = 0;
	} else if (bad != s->bad) {
		str_changed(m->ctx, CHECK_BTRFS_TREE, NULL, NULL, 0, "tree block at logical %llu: "
			    "a copy read bad, then good", (unsigned long long)logical);
	}
	if (!bad)
		s->flags &= (uint8_t)~SLOT_USED;
	s->bad = bad;
	if (bad && (all & ~bad))
		s->flags |= SLOT_REPAIR;
}

/* BTRFS_IOC_SCRUB of the device range [start, end) on devid: its progress counters. */
static int scrub_range(struct btrfs_meta *m, uint64_t devid, uint64_t start, uint64_t end,
		       struct btrfs_scrub_progress *p)
{
	struct btrfs_ioctl_scrub_args a = {
		.devid = devid, .start = start, .end = end,
		.flags = m->readonly ? BTRFS_SCRUB_READONLY : 0,
	};
	int ret = ioctl(m->ctx->mnt_fd, BTRFS_IOC_SCRUB, &a) < 0 ? -errno : 0;

	*p = a.progress;
	m->scrubbed++;
	m->scrub_tree += p->tree_bytes_scrubbed;
	m->scrub_data += p->data_bytes_scrubbed;
	return ret;
}

/* Repair: the kernel's scrub of each stripe of c holding a bad copy that has a good one. */
static void repair_chunk(struct btrfs_meta *m, const struct meta_chunk *c)
{
	size_t nslots = c->g.len / m->sectorsize;
	uint8_t stripes = 0;

	for (size_t k = 0; k < nslots; k++) {
		unsigned stripe[BTRFS_CMAP_MAX_COPIES];

		if (!(c->slots[k].flags & SLOT_REPAIR))
			continue;
		copies_of(m, c, c->g.start + k * m->sectorsize, stripe);
		for (unsigned j = 0; j < BTRFS_CMAP_MAX_COPIES; j++)
			if (c->slots[k].bad & (1u << j))
				stripes |= (uint8_t)(1u << stripe[j]);
	}
	for (unsigned i = 0; i < c->g.n && i < BTRFS_CMAP_MAX_COPIES; i++) {
		struct btrfs_scrub_progress p;
		int ret;

		if (!(stripes & (1u << i)))
			continue;
		ret = scrub_range(m, c->g.st[i].devid, c->g.st[i].offset,
				  c->g.st[i].offset + btrfs_cmap_stripe_bytes(&c->g), &p);
		if (ret < 0)
			report_operational(m->ctx, NULL, NULL, -ret, "scrub of devid %llu from %llu",
					   (unsigned long long)c->g.st[i].devid,
					   (unsigned long long)c->g.st[i].offset);
	}
}

static void report_copy(struct btrfs_meta *m, const struct meta_chunk *c, uint64_t logical,
			unsigned i, enum meta_why why, enum severity sev, const char *what)
{
	const struct btrfs_meta_dev *d = dev_by_id(m, c->g.st[i].devid);
	struct strbuf owners = STRBUF_INIT;
	uint64_t phys = 0;
	unsigned copy;

	btrfs_cmap_on_stripe(&c->g, i, logical, &phys, &copy);
	if (!btrfs_tree_block_owners(m->ctx->mnt_fd, logical, 1, &owners))
		strbuf_addstr(&owners, "metadata (owner unknown)");
	report_at(m->ctx, sev, CHECK_BTRFS_TREE, NULL, NULL, 0, __FILE__, __LINE__,
		  "tree block at logical %llu (in the %s), copy %u on devid %llu %s at %llu: "
		  "%s, %s", (unsigned long long)logical, owners.buf, copy + 1,
		  (unsigned long long)c->g.st[i].devid, d ? d->path : "?",
		  (unsigned long long)phys, why_text[why], what);
	strbuf_release(&owners);
}

/* Report the confirmed bad copies of one block (after any repair). */
static void report_block(struct btrfs_meta *m, const struct meta_chunk *c,
			 const struct meta_slot *s, uint64_t logical, unsigned char *buf)
{
	unsigned stripe[BTRFS_CMAP_MAX_COPIES];
	bool good = s->flags & SLOT_REPAIR;

	copies_of(m, c, logical, stripe);
	for (unsigned k = 0; k < BTRFS_CMAP_MAX_COPIES; k++) {
		enum meta_why why;

		if (!(s->bad & (1u << k)))
			continue;
		why = reread(m, c, stripe[k], logical, buf);
		if (!good)
			report_copy(m, c, logical, stripe[k], why, SEV_ERROR, "no good copy");
		else if (m->readonly)
			report_copy(m, c, logical, stripe[k], why, SEV_ERROR,
				    m->ctx->opt.check_only ? "a good copy exists, not repaired (-n)" :
				    "a good copy exists, not repaired (read-only mount)");
		else if (why == META_OK)
			report_copy(m, c, logical, stripe[k], META_CSUM, SEV_REPAIRED,
				    "corrected from a good copy");
		else
			report_copy(m, c, logical, stripe[k], why, SEV_ERROR,
				    "a good copy exists; the kernel's scrub did not correct it");
	}
}

/*
 * Before the later copies are read (!m->later): the later copies of a
 * block whose other copy read bad are read now, so that it is judged
 * whole in phase 2.
 */
static void read_later_copies(struct btrfs_meta *m, const struct meta_chunk *c,
			      struct meta_slot *s, uint64_t logical, unsigned char *buf)
{
	for (unsigned j = 0; j < c->g.n && !m->later; j++) {
		uint64_t phys;
		unsigned copy;

		if (later_copy(c, j) && btrfs_cmap_on_stripe(&c->g, j, logical, &phys, &copy) &&
		    reread(m, c, j, logical, buf) != META_OK)
			s->bad |= (uint8_t)(1u << copy);
	}
}

/* A block with a copy that read bad, not judged before. */
static bool to_judge(const struct meta_slot *s)
{
	return s->bad && (s->flags & SLOT_USED) && !(s->flags & SLOT_JUDGED);
}

static void judge_chunk(struct btrfs_meta *m, struct meta_chunk *c, unsigned char *buf)
{
	size_t nslots = c->g.len / m->sectorsize;
	bool repair = false;

	for (size_t k = 0; k < nslots && !scrub_should_stop(m->ctx); k++)
		if (to_judge(&c->slots[k])) {
			read_later_copies(m, c, &c->slots[k], c->g.start + k * m->sectorsize, buf);
			confirm(m, c, &c->slots[k], c->g.start + k * m->sectorsize, buf);
			repair |= c->slots[k].flags & SLOT_REPAIR;
		}
	if (repair && !m->readonly)
		repair_chunk(m, c);
	for (size_t k = 0; k < nslots; k++)
		if (to_judge(&c->slots[k])) {
			report_block(m, c, &c->slots[k], c->g.start + k * m->sectorsize, buf);
			c->slots[k].flags |= SLOT_JUDGED;
		}
}

/* ---- the block groups fscrub leaves to the kernel's scrub ---- */

static void scrub_chunk(struct btrfs_meta *m, const struct meta_chunk *c)
{
	for (unsigned i = 0; i < c->g.n && !scrub_should_stop(m->ctx); i++) {
		const struct btrfs_meta_dev *d = dev_by_id(m, c->g.st[i].devid);
		struct btrfs_scrub_progress p;
		unsigned long long found;
		int ret;

		if (!d || d->missing || d->seed)
			continue;
		ret = scrub_range(m, d->devid, c->g.st[i].offset,
				  c->g.st[i].offset + btrfs_cmap_stripe_bytes(&c->g),
				  &p);
		if (ret < 0) {
			report_operational(m->ctx, NULL, NULL, -ret, "scrub of devid %llu %s",
					   (unsigned long long)d->devid, d->path);
			continue;
		}
		found = p.read_errors + p.csum_errors + p.verify_errors;
		if (m->readonly ? found : p.uncorrectable_errors)
			str_error(m->ctx, CHECK_BTRFS_SCRUB, NULL, NULL, 0,
				  "devid %llu %s: %llu tree block errors in the block group at "
				  "logical %llu%s", (unsigned long long)d->devid, d->path,
				  m->readonly ? found : (unsigned long long)p.uncorrectable_errors,
				  (unsigned long long)c->g.start,
				  m->readonly ? ", not repaired (read-only scrub)" : "");
		if (!m->readonly && p.corrected_errors)
			str_repaired(m->ctx, CHECK_BTRFS_SCRUB, NULL, NULL, 0,
				     "devid %llu %s: %llu tree block errors corrected from a good "
				     "copy", (unsigned long long)d->devid, d->path,
				     (unsigned long long)p.corrected_errors);
	}
}

/* ---- the whole ---- */

/* Checksum type, metadata UUID, and the superblock's generation (read from the disk). */
static int fs_facts(struct btrfs_meta *m)
{
	struct btrfs_ioctl_fs_info_args fs = {
		.flags = BTRFS_FS_INFO_FLAG_CSUM_INFO | BTRFS_FS_INFO_FLAG_METADATA_UUID,
	};
	unsigned char *sb = NULL;
	int fd = -1, ret = 0;

	if (ioctl(m->ctx->mnt_fd, BTRFS_IOC_FS_INFO, &fs) < 0)
		return -errno;
	m->nodesize = fs.nodesize;
	m->sectorsize = fs.sectorsize;
	/* Kernels before 5.5 do not say: crc32c was the only checksum then. */
	m->crc32c = !(fs.flags & BTRFS_FS_INFO_FLAG_CSUM_INFO) || fs.csum_type == BTRFS_CSUM_TYPE_CRC32;
	memcpy(m->metadata_uuid, fs.flags & BTRFS_FS_INFO_FLAG_METADATA_UUID ? fs.metadata_uuid :
	       fs.fsid, sizeof(m->metadata_uuid));
	for (unsigned i = 0; i < m->nr_devs && fd < 0; i++)
		if (!m->devs[i].missing && !m->devs[i].seed)
			fd = open(m->devs[i].path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (posix_memalign((void **)&sb, META_ALIGN, META_ALIGN))
		ret = -ENOMEM;
	else if (pread(fd, sb, META_ALIGN, SB_OFFSET) != META_ALIGN)
		ret = -EIO;
	else
		m->committed = btrfs_get64(sb + SB_GENERATION);
	free(sb);
	close(fd);
	return ret;
}

static void meta_free(struct btrfs_meta *m)
{
	for (size_t i = 0; i < m->nr_c; i++) {
		free(m->c[i].g.st);
		free(m->c[i].slots);
	}
	free(m->c);
	free(m->ranges);
	free(m->logicals);
	free(m->devs);
	free(m);
}

static int read_devices(struct btrfs_meta *m)
{
	int ret = 0;

	for (unsigned i = 0; i < m->nr_devs && !scrub_should_stop(m->ctx); i++) {
		if (m->devs[i].missing)
			continue;
		if ((ret = read_device(m, &m->devs[i])) < 0) {
			report_operational(m->ctx, NULL, NULL, -ret, "cannot read the tree blocks "
					   "on devid %llu %s", (unsigned long long)m->devs[i].devid,
					   m->devs[i].path);
			ret = 0;
		}
	}
	return ret;
}

/* Confirm, repair and report what read bad and was not judged yet. */
static void judge(struct btrfs_meta *m)
{
	unsigned char *buf = NULL;

	if (posix_memalign((void **)&buf, META_ALIGN, m->nodesize)) {
		report_operational(m->ctx, NULL, NULL, ENOMEM, "confirming bad tree blocks");
		return;
	}
	for (size_t i = 0; i < m->nr_c && !scrub_should_stop(m->ctx); i++) {
		if (m->c[i].slots)
			judge_chunk(m, &m->c[i], buf);
		else if (!m->later)
			scrub_chunk(m, &m->c[i]);
	}
	free(buf);
}

static bool any_later_copy(const struct btrfs_meta *m)
{
	for (size_t i = 0; i < m->nr_c; i++)
		for (unsigned j = 0; m->c[i].slots && j < m->c[i].g.n; j++)
			if (later_copy(&m->c[i], j))
				return true;
	return false;
}

static void *later_main(void *arg)
{
	read_devices(arg);
	return NULL;
}

/* The later copies (later_copy()) start reading in a thread of their own. */
static void start_later(struct btrfs_meta *m)
{
	m->later = true;
	if (!any_later_copy(m))
		return;
	if (thread_start(&m->thread, later_main, m) == 0)
		m->started = true;
	else
		read_devices(m);	/* no thread: read them now */
	report_verbose(m->ctx, "Phase 2: the second copies of DUP tree blocks read %s",
		       m->started ? "beside phase 3, judged after its walk" : "now");
}

/* What the extent tree that lists the blocks could not be read means. */
static int unlisted(struct scrub_ctx *ctx, int ret)
{
	if (ret == -EIO || ret == -EUCLEAN) {
		report_verbose(ctx, "Phase 2: the extent tree cannot be read (%s): the tree "
			       "blocks are not listed, and their copies are not read (phase 3 "
			       "reports it)", strerror(-ret));
		return 0;
	}
	if (ret != -ENOENT)
		return ret;
	/* rescue=ignorebadroots: a tree the kernel could not load is not there */
	str_info(ctx, CHECK_BTRFS_TREE, NULL, NULL, 0,
		 "the extent tree is not loaded on this mount: the tree blocks are not "
		 "listed, and their copies are not read");
	return 0;
}

int btrfs_meta_verify(struct scrub_ctx *ctx, const struct btrfs_meta_dev *devs, unsigned nr,
		      bool readonly, struct btrfs_meta **later)
{
	struct btrfs_meta_dev *copy = calloc(nr ? nr : 1, sizeof(*devs));
	struct btrfs_meta *m = calloc(1, sizeof(*m));
	int ret;

	*later = NULL;
	if (!m || !copy) {
		free(copy);
		free(m);
		return -ENOMEM;
	}
	memcpy(copy, devs, nr * sizeof(*devs));
	*m = (struct btrfs_meta){ .ctx = ctx, .devs = copy, .nr_devs = nr, .readonly = readonly,
				  .fd = -1 };
	if ((ret = fs_facts(m)) < 0 || (ret = read_chunks(m)) < 0 ||
	    (ret = read_all_extents(m)) < 0 || (ret = fs_facts(m)) < 0 ||
	    (ret = read_devices(m)) < 0) {
		meta_free(m);
		return unlisted(ctx, ret);
	}
	judge(m);
	start_later(m);
	*later = m;
	return 0;
}

void btrfs_meta_finish(struct btrfs_meta *m)
{
	if (!m)
		return;
	if (m->started)
		pthread_join(m->thread, NULL);
	m->started = false;
	judge(m);
	report_verbose(m->ctx, "Phase 2: %llu tree blocks in %zu metadata block groups: %llu "
		       "copies read (%llu bytes, no file data), %llu bad; %llu not on disk yet "
		       "(newer than generation %llu); %llu device ranges given to the kernel's "
		       "scrub (%llu tree bytes, %llu data bytes)",
		       m->blocks, m->nr_c, (unsigned long long)m->copies,
		       (unsigned long long)m->bytes, (unsigned long long)m->bad_copies,
		       m->unwritten, (unsigned long long)m->committed, m->scrubbed, m->scrub_tree,
		       m->scrub_data);
	meta_free(m);
}

void btrfs_meta_stop(struct btrfs_meta *m)
{
	if (!m)
		return;
	if (m->started)
		pthread_join(m->thread, NULL);
	meta_free(m);
}
