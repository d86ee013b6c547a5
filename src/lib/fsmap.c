/*
 * fsmap: FS_IOC_GETFSMAP; see fsmap.h.
 */
#include "lib/fsmap.h"

#include <errno.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "lib/strbuf.h"

/* 1024 fsmap records of 64 bytes per GETFSMAP call. */
#define FSMAP_BATCH 1024

uint32_t fsmap_dev(unsigned major, unsigned minor)
{
	return (minor & 0xff) | (major << 8) | ((minor & ~0xffu) << 12);
}

int fsmap_query(int fd, uint32_t dev, uint64_t lo, uint64_t hi,
		void (*fn)(const struct fsmap *, void *), void *arg)
{
	struct fsmap_head *h = xcalloc(1, fsmap_sizeof(FSMAP_BATCH));
	int ret = 0;

	h->fmh_count = FSMAP_BATCH;
	h->fmh_keys[0].fmr_device = dev;
	h->fmh_keys[0].fmr_physical = lo;
	h->fmh_keys[1].fmr_device = dev;
	h->fmh_keys[1].fmr_physical = hi;
	h->fmh_keys[1].fmr_owner = UINT64_MAX;
	h->fmh_keys[1].fmr_offset = UINT64_MAX;
	h->fmh_keys[1].fmr_flags = UINT32_MAX;
	for (;;) {
		if (ioctl(fd, FS_IOC_GETFSMAP, h) < 0) {
			ret = -errno;
			break;
		}
		if (!h->fmh_entries)
			break;
		for (uint32_t i = 0; i < h->fmh_entries; i++)
			fn(&h->fmh_recs[i], arg);
		if (h->fmh_recs[h->fmh_entries - 1].fmr_flags & FMR_OF_LAST)
			break;
		fsmap_advance(h);
	}
	free(h);
	return ret;
}

/* GETFSMAP's special owners of XFS (<xfs/xfs_fs.h>, XFS_FMR_OWN_*). */
const char *fsmap_xfs_owner_name(uint64_t owner)
{
	static const char *const names[] = {
		NULL, "static filesystem metadata (superblock, AG headers)", "the journal",
		"per-AG metadata (free space and reverse mapping btrees, free list)",
		"an inode btree", "an inode cluster", "a reference count btree",
		"copy-on-write staging", "blocks marked defective",
	};
	uint32_t code = FMR_OWNER_CODE(owner);

	return FMR_OWNER_TYPE(owner) == 'X' && code < sizeof(names) / sizeof(*names) ?
	       names[code] : NULL;
}
