/*
 * extents: the device ranges that hold file data under a mount, for
 * bench/data_verify.sh's raw-read baseline, found independently of fscrub.
 * Walks MNT (nftw, FTW_PHYS | FTW_MOUNT), FIEMAPs every regular file and
 * prints the physical ranges of its written extents, rounded out to 4 KiB,
 * sorted, with overlapping or exactly adjacent ranges merged (no gaps are
 * bridged: the list is exactly the blocks that hold file data).  Unwritten
 * (preallocated) extents are left out; extents without a device address
 * (inline, delalloc, unknown) are counted and reported.
 *
 *   cc -O2 -o extents extents.c
 *   extents MNT >RANGES      (stderr: "files F extents E bytes B unmapped U")
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define NR 1024

struct range { uint64_t off, end; };

static struct range *v;
static size_t n, alloc;
static uint64_t files, extents, unmapped, errors;
static struct fiemap *fm;

static void add(uint64_t off, uint64_t end)
{
	if (n == alloc) {
		alloc = alloc ? alloc * 2 : 65536;
		v = realloc(v, alloc * sizeof(*v));
		if (!v) {
			perror("realloc");
			exit(1);
		}
	}
	v[n++] = (struct range){ off & ~4095ULL, (end + 4095) & ~4095ULL };
}

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	uint64_t start = 0;
	int fd;

	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	files++;
	fd = open(path, O_RDONLY | O_NOATIME | O_NOFOLLOW);
	if (fd < 0) {
		errors++;
		return 0;
	}
	for (;;) {
		memset(fm, 0, sizeof(*fm));
		fm->fm_start = start;
		fm->fm_length = ~0ULL;
		fm->fm_extent_count = NR;
		if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
			errors++;
			break;
		}
		if (!fm->fm_mapped_extents)
			break;
		for (unsigned i = 0; i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *e = &fm->fm_extents[i];

			extents++;
			if (e->fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
					   FIEMAP_EXTENT_DATA_INLINE | FIEMAP_EXTENT_ENCODED))
				unmapped++;
			else if (!(e->fe_flags & FIEMAP_EXTENT_UNWRITTEN))
				add(e->fe_physical, e->fe_physical + e->fe_length);
		}
		struct fiemap_extent *last = &fm->fm_extents[fm->fm_mapped_extents - 1];
		if (last->fe_flags & FIEMAP_EXTENT_LAST)
			break;
		start = last->fe_logical + last->fe_length;
	}
	close(fd);
	return 0;
}

static int cmp(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

int main(int argc, char **argv)
{
	uint64_t bytes = 0;
	size_t m = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: extents MNT >RANGES\n");
		return 2;
	}
	fm = malloc(sizeof(*fm) + NR * sizeof(struct fiemap_extent));
	if (!fm || nftw(argv[1], visit, 256, FTW_PHYS | FTW_MOUNT) != 0) {
		perror(argv[1]);
		return 1;
	}
	qsort(v, n, sizeof(*v), cmp);
	for (size_t i = 0; i < n; i++) {
		if (m && v[i].off <= v[m - 1].end) {
			if (v[i].end > v[m - 1].end)
				v[m - 1].end = v[i].end;
		} else {
			v[m++] = v[i];
		}
	}
	for (size_t i = 0; i < m; i++) {
		printf("%" PRIu64 " %" PRIu64 "\n", v[i].off, v[i].end - v[i].off);
		bytes += v[i].end - v[i].off;
	}
	fprintf(stderr, "files %" PRIu64 " extents %" PRIu64 " bytes %" PRIu64 " ranges %zu unmapped %"
		PRIu64 " errors %" PRIu64 "\n", files, extents, bytes, m, unmapped, errors);
	return errors ? 1 : 0;
}
