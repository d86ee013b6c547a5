/*
 * spacemap: file data ranges from GETFSMAP; see spacemap.h.
 */
#include "spacemap.h"

#include <errno.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>

#include "strbuf.h"

/*
 * The owner of inode chunks and tables: XFS's XFS_FMR_OWN_INODES and
 * ext4's EXT4_FMR_OWN_INODES are both FMR_OWNER('X', 5), in the kernel's
 * private headers, not in <linux/fsmap.h>.
 */
#ifndef FMR_OWN_INODES
#define FMR_OWN_INODES FMR_OWNER('X', 5)
#endif

/* Records per GETFSMAP call: 512 KiB of records, a few calls per GiB of small files. */
#define FSMAP_BATCH 4096

uint32_t spacemap_devno(dev_t dev)
{
	unsigned maj = major(dev), min = minor(dev);

	return (min & 0xff) | (maj << 8) | ((min & ~0xffU) << 12);
}

/* What a record is: file data (1), something else (0), or a sign that the map has no owners (-1). */
static int classify(const struct fsmap *r)
{
	if (!(r->fmr_flags & FMR_OF_SPECIAL_OWNER))
		return !(r->fmr_flags & (FMR_OF_ATTR_FORK | FMR_OF_EXTENT_MAP | FMR_OF_PREALLOC));
	return r->fmr_owner == FMR_OWN_UNKNOWN;
}

/*
 * XFS without the rmapbt says FMR_OWN_UNKNOWN of its inode chunks too; it
 * says nothing of inodes at all, so its maps have no FMR_OWN_INODES
 * record, which both XFS with the rmapbt and ext4 (inode tables) have.
 */
static bool owns_inodes(const struct fsmap *r)
{
	return (r->fmr_flags & FMR_OF_SPECIAL_OWNER) && r->fmr_owner == FMR_OWN_INODES;
}

/* The ranges, held until the map is known to have owners (owns_inodes()). */
struct held {
	struct { uint64_t off, len; } *v;
	size_t n, alloc;
};

/* Keep [off, off+len), merged with the last range where they touch or overlap. */
static void hold(struct held *h, uint64_t off, uint64_t len)
{
	if (h->n && off <= h->v[h->n - 1].off + h->v[h->n - 1].len) {
		uint64_t end = off + len;

		if (end > h->v[h->n - 1].off + h->v[h->n - 1].len)
			h->v[h->n - 1].len = end - h->v[h->n - 1].off;
		return;
	}
	if (h->n == h->alloc) {
		h->alloc = h->alloc ? h->alloc * 2 : 256;
		h->v = xrealloc(h->v, h->alloc * sizeof(*h->v));
	}
	h->v[h->n].off = off;
	h->v[h->n++].len = len;
}

int spacemap_data(int mnt_fd, dev_t dev, uint64_t end,
		  void (*fn)(void *arg, uint64_t off, uint64_t len), void *arg)
{
	struct fsmap_head *h = xcalloc(1, fsmap_sizeof(FSMAP_BATCH));
	struct held held = { 0 };
	bool inodes = false, last = false;
	uint64_t pos = 0;			/* where the records so far end */
	int ret = 0;

	h->fmh_count = FSMAP_BATCH;
	h->fmh_keys[0].fmr_device = spacemap_devno(dev);
	h->fmh_keys[1].fmr_device = spacemap_devno(dev);
	h->fmh_keys[1].fmr_physical = UINT64_MAX;
	h->fmh_keys[1].fmr_owner = UINT64_MAX;
	h->fmh_keys[1].fmr_offset = UINT64_MAX;
	h->fmh_keys[1].fmr_flags = UINT32_MAX;
	while (!last) {
		if (ioctl(mnt_fd, FS_IOC_GETFSMAP, h) < 0) {
			ret = -errno;
			break;
		}
		if (!h->fmh_entries)
			break;
		for (unsigned i = 0; i < h->fmh_entries; i++) {
			const struct fsmap *r = &h->fmh_recs[i];

			last = r->fmr_flags & FMR_OF_LAST;
			inodes |= owns_inodes(r);
			if (r->fmr_device != spacemap_devno(dev) || !r->fmr_length)
				continue;
			/* A stretch no record covers is in use by no one known (see above). */
			if (r->fmr_physical > pos)
				hold(&held, pos, r->fmr_physical - pos);
			if (classify(r) == 1)
				hold(&held, r->fmr_physical, r->fmr_length);
			if (r->fmr_physical + r->fmr_length > pos)
				pos = r->fmr_physical + r->fmr_length;
		}
		/* The next call starts after the last record (the kernel's fsmap_advance). */
		h->fmh_keys[0] = h->fmh_recs[h->fmh_entries - 1];
	}
	if (!ret && pos < end)
		hold(&held, pos, end - pos);
	if (!ret && !inodes)
		ret = -EOPNOTSUPP;
	for (size_t i = 0; i < held.n && !ret; i++)
		fn(arg, held.v[i].off, held.v[i].len);
	free(held.v);
	free(h);
	return ret;
}
