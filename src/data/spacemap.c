/*
 * spacemap: file data ranges from GETFSMAP; see spacemap.h.
 */
#include "data/spacemap.h"

#include <errno.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "lib/fsmap.h"
#include "lib/strbuf.h"

/*
 * The owner of inode chunks and tables: XFS's XFS_FMR_OWN_INODES and
 * ext4's EXT4_FMR_OWN_INODES are both FMR_OWNER('X', 5), in the kernel's
 * private headers, not in <linux/fsmap.h>.
 */
#ifndef FMR_OWN_INODES
#define FMR_OWN_INODES FMR_OWNER('X', 5)
#endif

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

/* Where the records so far end, what they held, and whether any owns inodes. */
struct scan {
	uint32_t dev;
	uint64_t pos;
	bool inodes;
	struct held held;
};

static void take(const struct fsmap *r, void *arg)
{
	struct scan *sc = arg;

	sc->inodes |= owns_inodes(r);
	if (r->fmr_device != sc->dev || !r->fmr_length)
		return;
	/* A stretch no record covers is in use by no one known (see above). */
	if (r->fmr_physical > sc->pos)
		hold(&sc->held, sc->pos, r->fmr_physical - sc->pos);
	if (classify(r) == 1)
		hold(&sc->held, r->fmr_physical, r->fmr_length);
	if (r->fmr_physical + r->fmr_length > sc->pos)
		sc->pos = r->fmr_physical + r->fmr_length;
}

int spacemap_data(int mnt_fd, dev_t dev, uint64_t end,
		  void (*fn)(void *arg, uint64_t off, uint64_t len), void *arg)
{
	struct scan sc = { .dev = fsmap_dev(major(dev), minor(dev)) };
	int ret = fsmap_query(mnt_fd, sc.dev, 0, UINT64_MAX, take, &sc);

	if (!ret && sc.pos < end)
		hold(&sc.held, sc.pos, end - sc.pos);
	if (!ret && !sc.inodes)
		ret = -EOPNOTSUPP;
	for (size_t i = 0; i < sc.held.n && !ret; i++)
		fn(arg, sc.held.v[i].off, sc.held.v[i].len);
	free(sc.held.v);
	return ret;
}
