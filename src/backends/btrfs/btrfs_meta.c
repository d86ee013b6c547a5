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
 * What is not checked here: block groups with RAID5/6 metadata (parity
 * would have to be recomputed) and filesystems with an xxhash, sha256 or
 * blake2 checksum get the kernel's scrub of those block groups' device
 * ranges only, which verifies their tree blocks and no file data.  The
 * item-level checks of the kernel's tree checker are phase 3's.
 *
 * Memory: META_SLOT bytes per sector of each metadata block group (an
 * array per block group, 2 MiB per GiB of metadata at 4 KiB sectors), and
 * the reads of one stripe at a time.
 */
#include "backends/btrfs/btrfs_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backends/btrfs/btrfs_trees.h"
#include "report/checks.h"
#include "scan/context.h"
#include "lib/crc32c.h"
#include "lib/ioengine.h"
#include "report/report.h"
#include "lib/strbuf.h"

/*
 * 1 MiB reads: large enough that a device streams (merged neighbouring
 * tree blocks), small enough that META_DEPTH buffers stay a few MiB.
 */
#define META_READ (1024 * 1024)
/* Reads in flight per device: what keeps an SSD's queue busy, a disk's sorted. */
#define META_DEPTH 8
/* O_DIRECT alignment: every block device's logical block divides 4 KiB. */
#define META_ALIGN 4096
/* The striping unit of RAID0 / RAID10 (BTRFS_STRIPE_LEN, not in the uapi headers). */
#define STRIPE_LEN (64 * 1024)
/* Copies fscrub tracks per block (a bit each): RAID1C4's four and margin. */
#define MAX_COPIES 8

/*
 * struct btrfs_header: csum[32], fsid[16], bytenr, flags,
 * chunk_tree_uuid[16], generation, owner, nritems, level.
 */
#define H_CSUM_END 32
#define H_FSID 32
#define H_BYTENR 48
#define H_GENERATION 80
#define H_OWNER 88
#define H_LEVEL 100
/*
 * btrfs_chunk: length, owner, stripe_len, type (24), ..., num_stripes (44),
 * sub_stripes (46), stripes (48, 32 bytes each: devid, offset, dev_uuid).
 */
#define CHUNK_TYPE 24
#define CHUNK_NUM_STRIPES 44
#define CHUNK_SUB_STRIPES 46
#define CHUNK_STRIPES 48
#define CHUNK_STRIPE_SIZE 32
/*
 * btrfs_extent_item: refs, generation, flags; a tree block's EXTENT_ITEM
 * then a btrfs_tree_block_info (key, level).
 */
#define EI_GENERATION 8
#define EI_FLAGS 16
#define EI_SIZE 24
#define TBI_LEVEL 17
#define TBI_SIZE 18
/* An inline back reference of a tree block: a type byte and a u64. */
#define IREF_SIZE 9
/* The superblock: at 64 KiB on every device; its generation at byte 72. */
#define SB_OFFSET 65536
#define SB_GENERATION 72

enum { SLOT_USED = 1, SLOT_REPAIR = 2 };

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

struct meta_stripe {
	uint64_t devid, offset;
};

struct meta_chunk {
	uint64_t start, len, type;
	uint16_t n, sub;
	struct meta_stripe *st;
	struct meta_slot *slots;	/* len / sectorsize; NULL: the kernel's scrub checks it */
};

enum meta_why { META_OK, META_READ_ERR, META_CSUM, META_BYTENR, META_FSID, META_GEN,
		META_LEVEL, META_OWNER };

static const char *const why_text[] = {
	[META_OK] = "good", [META_READ_ERR] = "read error", [META_CSUM] = "bad checksum",
	[META_BYTENR] = "another block's address in its header",
	[META_FSID] = "another filesystem's fsid in its header",
	[META_GEN] = "another generation than its extent item's",
	[META_LEVEL] = "another level than its extent item's",
	[META_OWNER] = "another owner than its extent item's",
};

struct meta {
	struct scrub_ctx *ctx;
	const struct btrfs_meta_dev *devs;
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
};

static bool is_meta(uint64_t type)
{
	return type & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM);
}

/* Profiles fscrub reads itself; RAID5/6 (parity) is left to the kernel's scrub. */
static bool readable_profile(const struct meta_chunk *c)
{
	if (c->type & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
		return false;
	if (c->type & BTRFS_BLOCK_GROUP_RAID10)
		return c->sub && c->sub <= MAX_COPIES && c->n % c->sub == 0;
	return c->n && c->n <= MAX_COPIES;
}

/* The bytes each stripe of c holds on its device (the kernel's btrfs_calc_stripe_length()). */
static uint64_t stripe_bytes(const struct meta_chunk *c)
{
	if (c->type & BTRFS_BLOCK_GROUP_RAID0)
		return c->len / c->n;
	if (c->type & BTRFS_BLOCK_GROUP_RAID10)
		return c->len / (c->n / c->sub);
	if (c->type & BTRFS_BLOCK_GROUP_RAID5)
		return c->len / (c->n - 1u);
	if (c->type & BTRFS_BLOCK_GROUP_RAID6)
		return c->len / (c->n - 2u);
	return c->len;
}

/*
 * Where stripe i of c holds a copy of the block at logical: its physical
 * offset and which copy it is.  False if the stripe holds none (RAID0 and
 * RAID10 spread 64 KiB units over their stripes; a tree block never
 * crosses one).
 */
static bool on_stripe(const struct meta_chunk *c, unsigned i, uint64_t logical, uint64_t *phys,
		      unsigned *copy)
{
	uint64_t off = logical - c->start, nr = off / STRIPE_LEN;
	unsigned groups;

	*copy = 0;
	if (c->type & BTRFS_BLOCK_GROUP_RAID0) {
		if (nr % c->n != i)
			return false;
		*phys = c->st[i].offset + nr / c->n * STRIPE_LEN + off % STRIPE_LEN;
		return true;
	}
	if (c->type & BTRFS_BLOCK_GROUP_RAID10) {
		groups = c->n / c->sub;
		if (nr % groups != i / c->sub)
			return false;
		*phys = c->st[i].offset + nr / groups * STRIPE_LEN + off % STRIPE_LEN;
		*copy = i % c->sub;
		return true;
	}
	*phys = c->st[i].offset + off;	/* single, DUP, RAID1*: every stripe a whole copy */
	*copy = i;
	return true;
}

/* ---- the chunk tree and the extent tree ---- */

static int chunk_item(struct meta *m, const struct btrfs_tree_item *it)
{
	struct meta_chunk *c;
	uint16_t n;

	if (it->len < CHUNK_STRIPES || !is_meta(btrfs_get64(it->data + CHUNK_TYPE)))
		return 0;
	n = (uint16_t)(it->data[CHUNK_NUM_STRIPES] | it->data[CHUNK_NUM_STRIPES + 1] << 8);
	if (!n || it->len < CHUNK_STRIPES + (size_t)n * CHUNK_STRIPE_SIZE)
		return 0;	/* the kernel's tree checker rejects such an item */
	if (btrfs_grow((void **)&m->c, &m->alloc_c, m->nr_c + 1, sizeof(*m->c)) < 0)
		return -ENOMEM;
	c = &m->c[m->nr_c];
	*c = (struct meta_chunk){
		.start = it->key.offset, .len = btrfs_get64(it->data),
		.type = btrfs_get64(it->data + CHUNK_TYPE), .n = n,
		.sub = (uint16_t)(it->data[CHUNK_SUB_STRIPES] | it->data[CHUNK_SUB_STRIPES + 1] << 8),
	};
	if (!(c->st = calloc(n, sizeof(*c->st))))
		return -ENOMEM;
	m->nr_c++;
	for (unsigned i = 0; i < n; i++) {
		const unsigned char *s = it->data + CHUNK_STRIPES + (size_t)i * CHUNK_STRIPE_SIZE;

		c->st[i] = (struct meta_stripe){ btrfs_get64(s), btrfs_get64(s + 8) };
	}
	if (m->crc32c && readable_profile(c) &&
	    !(c->slots = calloc(c->len / m->sectorsize, sizeof(*c->slots))))
		return -ENOMEM;
	return 0;
}

static int read_chunks(struct meta *m)
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
static void extent_item(struct meta *m, struct meta_chunk *c, const struct btrfs_tree_item *it)
{
	const unsigned char *d = it->data;
	uint64_t bytenr = it->key.objectid;
	struct meta_slot *s;
	size_t refs = EI_SIZE;
	uint8_t level;

	if (it->len < EI_SIZE || bytenr < c->start || bytenr - c->start + m->nodesize > c->len ||
	    (bytenr - c->start) % m->sectorsize)
		return;
	if (it->key.type == BTRFS_METADATA_ITEM_KEY) {
		level = (uint8_t)it->key.offset;
	} else if (it->key.type == BTRFS_EXTENT_ITEM_KEY &&
		   btrfs_get64(d + EI_FLAGS) & BTRFS_EXTENT_FLAG_TREE_BLOCK &&
		   it->len >= EI_SIZE + TBI_SIZE) {
		level = d[EI_SIZE + TBI_LEVEL];
		refs += TBI_SIZE;
	} else {
		return;
	}
	s = &c->slots[(bytenr - c->start) / m->sectorsize];
	s->gen = (uint32_t)btrfs_get64(d + EI_GENERATION);
	s->level = level;
	s->owner = sole_owner(d, it->len, refs);
	s->flags = SLOT_USED;
	m->blocks++;
}

static int read_extents(struct meta *m, struct btrfs_tree_reader *r, struct meta_chunk *c)
{
	const struct btrfs_tkey min = { c->start, 0, 0 };
	const struct btrfs_tkey max = { c->start + c->len - 1, UINT8_MAX, UINT64_MAX };
	struct btrfs_tree_item it;
	int ret;

	btrfs_tree_seek(r, BTRFS_EXTENT_TREE_OBJECTID, min, max);
	while ((ret = btrfs_tree_next(r, &it)) > 0 && !scrub_should_stop(m->ctx))
		extent_item(m, c, &it);
	return ret;
}

static int read_all_extents(struct meta *m)
{
	const struct btrfs_tkey zero = { 0, 0, 0 };
	struct btrfs_tree_reader r;
	int ret = btrfs_tree_open(&r, m->ctx->mnt_fd, BTRFS_EXTENT_TREE_OBJECTID, zero, zero);

	for (size_t i = 0; ret >= 0 && i < m->nr_c; i++)
		if (m->c[i].slots)
			ret = read_extents(m, &r, &m->c[i]);
	btrfs_tree_close(&r);
	return ret < 0 ? ret : 0;
}

/* ---- reading and checking the copies ---- */

static enum meta_why check_block(const struct meta *m, const unsigned char *b, uint64_t logical,
				 const uint8_t *fsid, const struct meta_slot *s)
{
	if (~crc32c(0xffffffff, b + H_CSUM_END, m->nodesize - H_CSUM_END) != btrfs_get32(b))
		return META_CSUM;
	if (btrfs_get64(b + H_BYTENR) != logical)
		return META_BYTENR;
	if (memcmp(b + H_FSID, fsid, BTRFS_FSID_SIZE))
		return META_FSID;
	if ((uint32_t)btrfs_get64(b + H_GENERATION) != s->gen)
		return META_GEN;
	if (b[H_LEVEL] != s->level)
		return META_LEVEL;
	if (s->owner && btrfs_get64(b + H_OWNER) != s->owner)
		return META_OWNER;
	return META_OK;
}

static struct meta_slot *slot_of(const struct meta *m, const struct meta_chunk *c,
				 uint64_t logical)
{
	return &c->slots[(logical - c->start) / m->sectorsize];
}

/* ioengine's done(): check each block of a read of the current stripe. */
static void read_done(void *arg, const struct io_range *r, char *buf, int64_t res)
{
	struct meta *m = arg;
	uint64_t logical = m->logicals[r - m->ranges];

	atomic_fetch_add(&m->bytes, res > 0 ? (unsigned long long)res : 0);
	for (uint64_t at = 0; at < r->len; at += m->nodesize, logical += m->nodesize) {
		struct meta_slot *s = slot_of(m, m->cur, logical);
		uint64_t phys;
		unsigned copy;

		on_stripe(m->cur, m->cur_stripe, logical, &phys, &copy);
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
	const struct meta *m = arg;

	(void)len;
	return !scrub_should_stop(m->ctx);
}

/* Is this block on the disk yet?  Not if the running transaction wrote it. */
static bool written(const struct meta *m, const struct meta_slot *s)
{
	return s->gen <= (uint32_t)m->committed;
}

/* Add the block at logical (at phys) to the reads: merged with the last if it continues it. */
static int add_read(struct meta *m, uint64_t logical, uint64_t phys)
{
	struct io_range *last = m->nr_ranges ? &m->ranges[m->nr_ranges - 1] : NULL;
	bool striped = m->cur->type & (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10);

	if (last && last->off + last->len == phys && last->len + m->nodesize <= META_READ &&
	    m->logicals[m->nr_ranges - 1] + last->len == logical &&
	    (!striped || phys % STRIPE_LEN)) {
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
static int read_stripe(struct meta *m, const struct meta_chunk *c, unsigned i,
		       const uint8_t *fsid)
{
	size_t nslots = c->len / m->sectorsize;
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
		uint64_t logical = c->start + k * m->sectorsize, phys;
		unsigned copy;

		if (!(c->slots[k].flags & SLOT_USED) || !on_stripe(c, i, logical, &phys, &copy))
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
static const uint8_t *dev_fsid(const struct meta *m, const struct btrfs_meta_dev *d)
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

/* The stripes of checked block groups on device d, in device order (*out: caller frees). */
static int dev_stripes(const struct meta *m, uint64_t devid, struct dev_stripe **out, size_t *nr)
{
	size_t n = 0, alloc = 0;

	*out = NULL;
	for (size_t i = 0; i < m->nr_c; i++)
		for (unsigned j = 0; m->c[i].slots && j < m->c[i].n; j++) {
			if (m->c[i].st[j].devid != devid)
				continue;
			if (btrfs_grow((void **)out, &alloc, n + 1, sizeof(**out)) < 0)
				return -ENOMEM;
			(*out)[n++] = (struct dev_stripe){ m->c[i].st[j].offset, i, j };
		}
	if (n)
		qsort(*out, n, sizeof(**out), cmp_dev_stripe);
	*nr = n;
	return 0;
}

static int read_device(struct meta *m, const struct btrfs_meta_dev *d)
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

static const struct btrfs_meta_dev *dev_by_id(const struct meta *m, uint64_t devid)
{
	for (unsigned i = 0; i < m->nr_devs; i++)
		if (m->devs[i].devid == devid)
			return &m->devs[i];
	return NULL;
}

/* Read copy (stripe i) of the block at logical again: its verdict. */
static enum meta_why reread(const struct meta *m, const struct meta_chunk *c, unsigned i,
			    uint64_t logical, unsigned char *buf)
{
	const struct btrfs_meta_dev *d = dev_by_id(m, c->st[i].devid);
	enum meta_why why = META_READ_ERR;
	uint64_t phys;
	unsigned copy;
	int fd;

	if (!d || d->missing || !on_stripe(c, i, logical, &phys, &copy))
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
static bool still_allocated(const struct meta *m, uint64_t bytenr, uint32_t gen)
{
	const struct btrfs_tkey min = { bytenr, BTRFS_EXTENT_ITEM_KEY, 0 };
	const struct btrfs_tkey max = { bytenr, BTRFS_METADATA_ITEM_KEY, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	bool found = false;

	if (btrfs_tree_open(&r, m->ctx->mnt_fd, BTRFS_EXTENT_TREE_OBJECTID, min, max) < 0)
		return true;	/* cannot tell: judged by the reads alone */
	while (!found && btrfs_tree_next(&r, &it) > 0)
		found = (it.key.type == BTRFS_METADATA_ITEM_KEY ||
			 it.key.type == BTRFS_EXTENT_ITEM_KEY) && it.len >= EI_SIZE &&
			(uint32_t)btrfs_get64(it.data + EI_GENERATION) == gen;
	btrfs_tree_close(&r);
	return found;
}

/*
 * The copies of the block at logical that c stores on a device that is
 * there (a missing device's copy is neither good nor bad): a bit per copy,
 * and the stripe of each.
 */
static unsigned copies_of(const struct meta *m, const struct meta_chunk *c, uint64_t logical,
			  unsigned stripe[])
{
	unsigned mask = 0;

	for (unsigned i = 0; i < c->n; i++) {
		const struct btrfs_meta_dev *d = dev_by_id(m, c->st[i].devid);
		uint64_t phys;
		unsigned copy;

		if (d && !d->missing && on_stripe(c, i, logical, &phys, &copy)) {
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
static void confirm(struct meta *m, struct meta_chunk *c, struct meta_slot *s, uint64_t logical,
		    unsigned char *buf)
{
	unsigned stripe[MAX_COPIES], all = copies_of(m, c, logical, stripe);
	uint8_t bad = 0;

	for (unsigned k = 0; k < MAX_COPIES; k++)
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
static int scrub_range(struct meta *m, uint64_t devid, uint64_t start, uint64_t end,
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
static void repair_chunk(struct meta *m, const struct meta_chunk *c)
{
	size_t nslots = c->len / m->sectorsize;
	uint8_t stripes = 0;

	for (size_t k = 0; k < nslots; k++) {
		unsigned stripe[MAX_COPIES];

		if (!(c->slots[k].flags & SLOT_REPAIR))
			continue;
		copies_of(m, c, c->start + k * m->sectorsize, stripe);
		for (unsigned j = 0; j < MAX_COPIES; j++)
			if (c->slots[k].bad & (1u << j))
				stripes |= (uint8_t)(1u << stripe[j]);
	}
	for (unsigned i = 0; i < c->n && i < MAX_COPIES; i++) {
		struct btrfs_scrub_progress p;
		int ret;

		if (!(stripes & (1u << i)))
			continue;
		ret = scrub_range(m, c->st[i].devid, c->st[i].offset,
				  c->st[i].offset + stripe_bytes(c), &p);
		if (ret < 0)
			report_operational(m->ctx, NULL, NULL, -ret, "scrub of devid %llu from %llu",
					   (unsigned long long)c->st[i].devid,
					   (unsigned long long)c->st[i].offset);
	}
}

static void report_copy(struct meta *m, const struct meta_chunk *c, uint64_t logical,
			unsigned i, enum meta_why why, enum severity sev, const char *what)
{
	const struct btrfs_meta_dev *d = dev_by_id(m, c->st[i].devid);
	struct strbuf owners = STRBUF_INIT;
	uint64_t phys = 0;
	unsigned copy;

	on_stripe(c, i, logical, &phys, &copy);
	if (!btrfs_tree_block_owners(m->ctx->mnt_fd, logical, 1, &owners))
		strbuf_addstr(&owners, "metadata (owner unknown)");
	report_at(m->ctx, sev, CHECK_BTRFS_TREE, NULL, NULL, 0, __FILE__, __LINE__,
		  "tree block at logical %llu (in the %s), copy %u on devid %llu %s at %llu: "
		  "%s, %s", (unsigned long long)logical, owners.buf, copy + 1,
		  (unsigned long long)c->st[i].devid, d ? d->path : "?",
		  (unsigned long long)phys, why_text[why], what);
	strbuf_release(&owners);
}

/* Report the confirmed bad copies of one block (after any repair). */
static void report_block(struct meta *m, const struct meta_chunk *c, const struct meta_slot *s,
			 uint64_t logical, unsigned char *buf)
{
	unsigned stripe[MAX_COPIES];
	bool good = s->flags & SLOT_REPAIR;

	copies_of(m, c, logical, stripe);
	for (unsigned k = 0; k < MAX_COPIES; k++) {
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

static void judge_chunk(struct meta *m, struct meta_chunk *c, unsigned char *buf)
{
	size_t nslots = c->len / m->sectorsize;
	bool repair = false;

	for (size_t k = 0; k < nslots && !scrub_should_stop(m->ctx); k++)
		if (c->slots[k].bad && c->slots[k].flags & SLOT_USED) {
			confirm(m, c, &c->slots[k], c->start + k * m->sectorsize, buf);
			repair |= c->slots[k].flags & SLOT_REPAIR;
		}
	if (repair && !m->readonly)
		repair_chunk(m, c);
	for (size_t k = 0; k < nslots; k++)
		if (c->slots[k].bad && c->slots[k].flags & SLOT_USED)
			report_block(m, c, &c->slots[k], c->start + k * m->sectorsize, buf);
}

/* ---- the block groups fscrub leaves to the kernel's scrub ---- */

static void scrub_chunk(struct meta *m, const struct meta_chunk *c)
{
	for (unsigned i = 0; i < c->n && !scrub_should_stop(m->ctx); i++) {
		const struct btrfs_meta_dev *d = dev_by_id(m, c->st[i].devid);
		struct btrfs_scrub_progress p;
		unsigned long long found;
		int ret;

		if (!d || d->missing || d->seed)
			continue;
		ret = scrub_range(m, d->devid, c->st[i].offset, c->st[i].offset + stripe_bytes(c),
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
				  (unsigned long long)c->start,
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
static int fs_facts(struct meta *m)
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

static void meta_release(struct meta *m)
{
	for (size_t i = 0; i < m->nr_c; i++) {
		free(m->c[i].st);
		free(m->c[i].slots);
	}
	free(m->c);
	free(m->ranges);
	free(m->logicals);
}

static int read_devices(struct meta *m)
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

static void judge(struct meta *m)
{
	unsigned char *buf = NULL;

	if (posix_memalign((void **)&buf, META_ALIGN, m->nodesize)) {
		report_operational(m->ctx, NULL, NULL, ENOMEM, "confirming bad tree blocks");
		return;
	}
	for (size_t i = 0; i < m->nr_c && !scrub_should_stop(m->ctx); i++) {
		if (m->c[i].slots)
			judge_chunk(m, &m->c[i], buf);
		else
			scrub_chunk(m, &m->c[i]);
	}
	free(buf);
}

int btrfs_meta_verify(struct scrub_ctx *ctx, const struct btrfs_meta_dev *devs, unsigned nr,
		      bool readonly)
{
	struct meta m = { .ctx = ctx, .devs = devs, .nr_devs = nr, .readonly = readonly, .fd = -1 };
	int ret;

	if ((ret = fs_facts(&m)) < 0 || (ret = read_chunks(&m)) < 0 ||
	    (ret = read_all_extents(&m)) < 0 || (ret = fs_facts(&m)) < 0 ||
	    (ret = read_devices(&m)) < 0) {
		meta_release(&m);
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
	judge(&m);
	report_verbose(ctx, "Phase 2: %llu tree blocks in %zu metadata block groups: %llu copies "
		       "read (%llu bytes, no file data), %llu bad; %llu not on disk yet (newer "
		       "than generation %llu); %llu device ranges given to the kernel's scrub (%llu "
		       "tree bytes, %llu data bytes)",
		       m.blocks, m.nr_c, (unsigned long long)m.copies,
		       (unsigned long long)m.bytes, (unsigned long long)m.bad_copies,
		       m.unwritten, (unsigned long long)m.committed, m.scrubbed, m.scrub_tree,
		       m.scrub_data);
	meta_release(&m);
	return 0;
}
