/*
 * fsmap: FS_IOC_GETFSMAP; see fsmap.h.
 */
#include "fsmap.h"

#include <errno.h>
#include <linux/fsmap.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>

#include "strbuf.h"

/* 1024 records of 64 bytes per call. */
#define FSMAP_BATCH 1024

uint32_t fsmap_devno(dev_t dev)
{
	unsigned maj = major(dev), min = minor(dev);

	return (min & 0xff) | (maj << 8) | ((min & ~0xffU) << 12);
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
		fsmap_advance(h);	/* the next call starts after the last record */
	}
	free(h);
	return ret;
}
