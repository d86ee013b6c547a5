/*
 * mkdata: fast writers of bench/data_verify.sh's data sets.
 *
 *   mkdata big FILE BYTES       BYTES of a non-zero pattern (1 MiB writes)
 *   mkdata frag A B BYTES       A and B, BYTES each, allocated 4 KiB at a
 *                               time (fallocate), alternating A, B, A, B:
 *                               the allocator interleaves them on disk, so
 *                               each has ~BYTES/4096 extents
 *   mkdata tiny DIR FILES DIRS  FILES files of 100-2000 bytes (pattern),
 *                               spread over DIRS directories DIR/dNNNN
 *
 *   cc -O2 -o mkdata mkdata.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void fill(char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ULL | 1;

		memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
	}
}

static void full_write(int fd, const char *buf, size_t len, off_t off, const char *what)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, off);

		if (n <= 0)
			die(what);
		buf += n;
		len -= (size_t)n;
		off += n;
	}
}

int main(int argc, char **argv)
{
	char *buf;

	if (posix_memalign((void **)&buf, 4096, 1 << 20))
		die("posix_memalign");
	if (argc == 4 && !strcmp(argv[1], "big")) {
		uint64_t total = strtoull(argv[3], NULL, 0);
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0)
			die(argv[2]);
		for (uint64_t off = 0; off < total; off += 1 << 20) {
			size_t len = total - off < (1 << 20) ? (size_t)(total - off) : 1 << 20;

			buf[0] = (char)(off >> 20);	/* every MiB a little different */
			fill(buf, len, off);
			full_write(fd, buf, len, (off_t)off, argv[2]);
		}
		if (fsync(fd) || close(fd))
			die(argv[2]);
	} else if (argc == 5 && !strcmp(argv[1], "frag")) {
		uint64_t total = strtoull(argv[4], NULL, 0);
		int fd[2];

		for (int f = 0; f < 2; f++) {
			fd[f] = open(argv[2 + f], O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd[f] < 0)
				die(argv[2 + f]);
		}
		/*
		 * Allocate 4 KiB at a time, alternating between the two files:
		 * small fallocate()s are not rounded up (ext4 does not normalise
		 * them nor preallocate), so the blocks alternate on disk.  Then
		 * write the data over the (unwritten) allocation.
		 */
		for (uint64_t off = 0; off + 4096 <= total; off += 4096)
			for (int f = 0; f < 2; f++)
				if (fallocate(fd[f], 0, (off_t)off, 4096))
					die("fallocate");
		for (int f = 0; f < 2; f++) {
			for (uint64_t off = 0; off < total; off += 1 << 20) {
				size_t len = total - off < (1 << 20) ? (size_t)(total - off) : 1 << 20;

				fill(buf, len, off + (uint64_t)f);
				full_write(fd[f], buf, len, (off_t)off, argv[2 + f]);
			}
			if (fsync(fd[f]) || close(fd[f]))
				die(argv[2 + f]);
		}
	} else if (argc == 5 && !strcmp(argv[1], "tiny")) {
		long files = atol(argv[3]), dirs = atol(argv[4]);
		int top = open(argv[2], O_RDONLY | O_DIRECTORY);
		char name[32];

		if (top < 0 || files < 0 || dirs < 1)
			die(argv[2]);
		fill(buf, 4096, 12345);
		for (long d = 0; d < dirs; d++) {
			long first = files * d / dirs, last = files * (d + 1) / dirs;
			int dfd;

			snprintf(name, sizeof(name), "d%04ld", d);
			if (mkdirat(top, name, 0755) || (dfd = openat(top, name, O_RDONLY | O_DIRECTORY)) < 0)
				die(name);
			for (long i = first; i < last; i++) {
				size_t len = 100 + (size_t)((uint64_t)i * 2654435761U % 1901);
				int fd;

				snprintf(name, sizeof(name), "f%07ld", i);
				fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
				if (fd < 0)
					die(name);
				full_write(fd, buf + (i % 2048), len, 0, name);
				close(fd);
			}
			close(dfd);
		}
		close(top);
	} else {
		fprintf(stderr, "usage: mkdata big FILE BYTES | frag A B BYTES | tiny DIR FILES DIRS\n");
		return 2;
	}
	return 0;
}
