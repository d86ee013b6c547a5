/*
 * btrfs_sectors: the bad data sectors of a range or of a device, read with
 * O_DIRECT against the csum tree (see btrfs_sectors.h for why).
 *
 * A range is walked through the EXTENT_CSUM items that reach it (each
 * holds the checksums of the sectors from its key's offset on); the bytes
 * an item covers are read a run at a time and each sector's crc32c is
 * compared.  A mismatch is confirmed by a second read of the sector and a
 * second look-up of its checksum: a sector freed and rewritten between the
 * two reads changed, it is not damage.
 */
#include "backends/btrfs/btrfs_sectors.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backends/btrfs/btrfs_trees.h"
#include "lib/crc32c.h"

/* Bytes read per pread(): few calls, a small buffer. */
#define READ_RUN (1024 * 1024)
/* crc32c's checksum bytes in the csum tree. */
#define CRC32C_SIZE 4

int btrfs_sectors_init(struct btrfs_sectors *s, int mnt_fd)
{
	struct btrfs_ioctl_fs_info_args fs = { .flags = BTRFS_FS_INFO_FLAG_CSUM_INFO };

	memset(s, 0, sizeof(*s));
	s->mnt_fd = mnt_fd;
	if (ioctl(mnt_fd, BTRFS_IOC_FS_INFO, &fs) < 0)
		return -errno;
	s->sectorsize = fs.sectorsize;
	s->nodesize = fs.nodesize;
	/* Kernels before 5.5 do not say: crc32c was the only checksum then. */
	s->crc32c = !(fs.flags & BTRFS_FS_INFO_FLAG_CSUM_INFO) ||
		    fs.csum_type == BTRFS_CSUM_TYPE_CRC32;
	return 0;
}

/* The most bytes one csum item can cover: a leaf full of checksums. */
static uint64_t item_reach(const struct btrfs_sectors *s)
{
	return (uint64_t)(s->nodesize / CRC32C_SIZE) * s->sectorsize;
}

static struct btrfs_tkey csum_key(uint64_t offset)
{
	return (struct btrfs_tkey){ BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, offset };
}

static int csum_open(const struct btrfs_sectors *s, struct btrfs_tree_reader *r, uint64_t lo,
		     uint64_t hi)
{
	uint64_t reach = item_reach(s);

	return btrfs_tree_open(r, s->mnt_fd, BTRFS_CSUM_TREE_OBJECTID,
			       csum_key(lo > reach ? lo - reach : 0), csum_key(hi - 1));
}

/* The recorded checksum of the sector at logical, looked up now: 0, or -ENOENT. */
static int csum_of(const struct btrfs_sectors *s, uint64_t logical, uint32_t *out)
{
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = -ENOENT, got;

	if (csum_open(s, &r, logical, logical + 1) < 0)
		return -ENOMEM;
	while ((got = btrfs_tree_next(&r, &it)) > 0) {
		uint64_t n = it.len / CRC32C_SIZE, i = (logical - it.key.offset) / s->sectorsize;

		if (logical >= it.key.offset && i < n) {
			*out = btrfs_get32(it.data + i * CRC32C_SIZE);
			ret = 0;
		}
	}
	btrfs_tree_close(&r);
	return got < 0 ? got : ret;
}

struct span {
	const struct btrfs_sectors *s;
	int dev;
	uint64_t lo, hi, physical;	/* [lo, hi) held from physical */
	unsigned char *buf;		/* READ_RUN bytes, aligned for O_DIRECT */
	btrfs_bad_sector_fn *fn;
	void *arg;
	int bad;
};

/* The sector at logical, read from the device now, against its checksum now. */
static bool still_bad(struct span *sp, uint64_t logical)
{
	uint32_t want, ss = sp->s->sectorsize;

	if (csum_of(sp->s, logical, &want) < 0)
		return false;	/* no checksum now: freed meanwhile */
	if (pread(sp->dev, sp->buf, ss, (off_t)(sp->physical + logical - sp->lo)) != (ssize_t)ss)
		return false;	/* a read error is the scrub's read_errors, not a checksum */
	return ~crc32c(0xffffffff, sp->buf, ss) != want;
}

/* Sectors [a, b) of one csum item (checksums at sums): read and compared. */
static int check_run(struct span *sp, uint64_t a, uint64_t b, const unsigned char *sums)
{
	uint32_t ss = sp->s->sectorsize;
	size_t len = (size_t)(b - a);

	ssize_t got = pread(sp->dev, sp->buf, len, (off_t)(sp->physical + a - sp->lo));

	if (got != (ssize_t)len)
		return got < 0 ? -errno : -EIO;
	for (size_t i = 0; i < len / ss; i++) {
		uint64_t at = a + (uint64_t)i * ss;

		if (~crc32c(0xffffffff, sp->buf + i * ss, ss) == btrfs_get32(sums + i * CRC32C_SIZE))
			continue;
		if (still_bad(sp, at)) {
			sp->bad++;
			sp->fn(at, sp->arg);
		}
		/* still_bad() read into the buffer: read the run's rest again. */
		if (i + 1 < len / ss)
			return check_run(sp, at + ss, b, sums + (i + 1) * CRC32C_SIZE);
	}
	return 0;
}

/* The part of one csum item inside [lo, hi), a READ_RUN at a time. */
static int check_item(struct span *sp, const struct btrfs_tree_item *it)
{
	uint32_t ss = sp->s->sectorsize;
	uint64_t start = it->key.offset, end = start + (uint64_t)(it->len / CRC32C_SIZE) * ss;
	uint64_t a = start > sp->lo ? start : sp->lo, b = end < sp->hi ? end : sp->hi;
	int ret = 0;

	while (a < b && !ret) {
		uint64_t run = b - a < READ_RUN ? b - a : READ_RUN;

		ret = check_run(sp, a, a + run, it->data + (a - start) / ss * CRC32C_SIZE);
		a += run;
	}
	return ret;
}

int btrfs_sectors_verify(const struct btrfs_sectors *s, const char *devpath, uint64_t logical,
			 uint64_t physical, uint64_t len, btrfs_bad_sector_fn *fn, void *arg)
{
	struct span sp = { .s = s, .lo = logical, .hi = logical + len, .physical = physical,
			   .fn = fn, .arg = arg };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int ret = 0, got;

	if (!s->crc32c || !s->sectorsize)
		return -EOPNOTSUPP;
	if (!len)
		return 0;
	sp.dev = open(devpath, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (sp.dev < 0)
		return -errno;
	/* O_DIRECT: the buffer aligned to the sector (a multiple of the device's block). */
	if (posix_memalign((void **)&sp.buf, s->sectorsize, READ_RUN) != 0) {
		close(sp.dev);
		return -ENOMEM;
	}
	if (csum_open(s, &r, sp.lo, sp.hi) < 0)
		ret = -ENOMEM;
	while (!ret && (got = btrfs_tree_next(&r, &it)) != 0)
		ret = got < 0 ? got : check_item(&sp, &it);
	btrfs_tree_close(&r);
	free(sp.buf);
	close(sp.dev);
	return ret < 0 ? ret : sp.bad;
}

/* Profiles whose every stripe is a whole copy of the chunk. */
#define WHOLE_COPY_PROFILES (BTRFS_BLOCK_GROUP_DUP | BTRFS_BLOCK_GROUP_RAID1 | \
			     BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4)

/* A CHUNK_ITEM's stripes on devid, each verified; bad sectors or a negative errno. */
static int verify_chunk(const struct btrfs_sectors *s, uint64_t devid, const char *devpath,
			const struct btrfs_tree_item *it, btrfs_bad_sector_fn *fn, void *arg)
{
	const size_t stripes = offsetof(struct btrfs_chunk, stripe);
	uint64_t length, type;
	uint16_t num;
	int bad = 0;

	if (it->len < stripes)
		return 0;
	length = btrfs_get64(it->data + offsetof(struct btrfs_chunk, length));
	type = btrfs_get64(it->data + offsetof(struct btrfs_chunk, type));
	memcpy(&num, it->data + offsetof(struct btrfs_chunk, num_stripes), sizeof(num));
	num = le16toh(num);
	if (!(type & BTRFS_BLOCK_GROUP_DATA) ||
	    (type & BTRFS_BLOCK_GROUP_PROFILE_MASK & ~WHOLE_COPY_PROFILES))
		return 0;
	for (uint16_t i = 0; i < num && stripes + (i + 1) * sizeof(struct btrfs_stripe) <= it->len;
	     i++) {
		const unsigned char *st = it->data + stripes + i * sizeof(struct btrfs_stripe);
		int ret;

		if (btrfs_get64(st + offsetof(struct btrfs_stripe, devid)) != devid)
			continue;
		ret = btrfs_sectors_verify(s, devpath, it->key.offset,
					   btrfs_get64(st + offsetof(struct btrfs_stripe, offset)),
					   length, fn, arg);
		if (ret < 0)
			return ret;
		bad += ret;
	}
	return bad;
}

int btrfs_sectors_verify_dev(const struct btrfs_sectors *s, uint64_t devid,
			     const char *devpath, btrfs_bad_sector_fn *fn, void *arg)
{
	struct btrfs_tkey min = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 0 };
	struct btrfs_tkey max = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, UINT64_MAX };
	struct btrfs_tree_reader r;
	struct btrfs_tree_item it;
	int bad = 0, got, ret = 0;

	if (btrfs_tree_open(&r, s->mnt_fd, BTRFS_CHUNK_TREE_OBJECTID, min, max) < 0)
		return -ENOMEM;
	while (!ret && (got = btrfs_tree_next(&r, &it)) != 0) {
		ret = got < 0 ? got : verify_chunk(s, devid, devpath, &it, fn, arg);
		bad += ret > 0 ? ret : 0;
		ret = ret > 0 ? 0 : ret;
	}
	btrfs_tree_close(&r);
	return ret < 0 ? ret : bad;
}
