/*
 * fuzz_dev.c: the fuzz targets' memfd device (see the header).
 */
#include "fuzz_dev.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

void fuzz_dev_open(struct fuzz_dev *d, const char *name)
{
	int fd;

	if ((d->fd = memfd_create(name, 0)) < 0) {
		perror("memfd_create");
		abort();
	}
	snprintf(d->path, sizeof(d->path), "/proc/self/fd/%d", d->fd);
	/*
	 * The scan reads the device with O_DIRECT, which a memfd takes from
	 * Linux 6.6 on: before, every input would be refused at open, silently.
	 */
	if ((fd = open(d->path, O_RDONLY | O_DIRECT)) < 0) {
		perror("the memfd cannot be opened with O_DIRECT (Linux >= 6.6)");
		abort();
	}
	close(fd);
}

void fuzz_dev_reset(const struct fuzz_dev *d, uint64_t size)
{
	if (ftruncate(d->fd, 0) < 0 || ftruncate(d->fd, (off_t)size) < 0) {
		perror("ftruncate");
		abort();
	}
}
