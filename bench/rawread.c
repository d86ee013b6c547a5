/*
 * rawread: the device's limit for bench/data_verify.sh.  Reads exactly the
 * byte ranges listed in RANGES ("offset length" per line, bytes, 4 KiB
 * aligned, as bench/extents prints them) from DEV with O_DIRECT, in pieces
 * of at most CHUNK bytes (default 4 MiB), THREADS preads in flight (default
 * 4), in the order given.  Nothing is merged beyond what the list has.
 * Prints "BYTES SECONDS" (the read only: the list is loaded first).
 *
 *   cc -O2 -pthread -o rawread rawread.c
 *   rawread DEV RANGES [THREADS [CHUNK]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct piece { uint64_t off, len; };

static struct piece *pieces;
static size_t nr_pieces;
static atomic_size_t next_piece;
static atomic_uint_fast64_t done_bytes;
static atomic_int failed;
static int fd;
static uint64_t chunk = 4U << 20;

static void *reader(void *arg)
{
	char *buf;

	(void)arg;
	if (posix_memalign((void **)&buf, 4096, chunk)) {
		atomic_store(&failed, ENOMEM);
		return NULL;
	}
	for (;;) {
		size_t i = atomic_fetch_add(&next_piece, 1);
		uint64_t got = 0;

		if (i >= nr_pieces || atomic_load(&failed))
			break;
		while (got < pieces[i].len) {
			ssize_t n = pread(fd, buf, pieces[i].len - got, (off_t)(pieces[i].off + got));

			if (n <= 0) {
				fprintf(stderr, "rawread: pread at %" PRIu64 ": %s\n", pieces[i].off + got,
					n < 0 ? strerror(errno) : "end of device");
				atomic_store(&failed, n < 0 ? errno : EIO);
				break;
			}
			got += (uint64_t)n;
		}
		atomic_fetch_add(&done_bytes, got);
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long long off, len;
	size_t alloc = 0;
	int nthreads = 4;
	struct timespec t0, t1;
	pthread_t tid[64];
	FILE *f;

	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: rawread DEV RANGES [THREADS [CHUNK]]\n");
		return 2;
	}
	if (argc > 3)
		nthreads = atoi(argv[3]);
	if (argc > 4)
		chunk = strtoull(argv[4], NULL, 0);
	if (nthreads < 1 || nthreads > 64 || chunk < 4096 || chunk % 4096) {
		fprintf(stderr, "rawread: bad THREADS or CHUNK\n");
		return 2;
	}
	f = fopen(argv[2], "r");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	while (fscanf(f, "%llu %llu", &off, &len) == 2) {
		if (off % 4096 || len % 4096) {
			fprintf(stderr, "rawread: range %llu %llu is not 4 KiB aligned\n", off, len);
			return 1;
		}
		while (len) {
			uint64_t p = len < chunk ? len : chunk;

			if (nr_pieces == alloc) {
				alloc = alloc ? alloc * 2 : 4096;
				pieces = realloc(pieces, alloc * sizeof(*pieces));
				if (!pieces) {
					perror("realloc");
					return 1;
				}
			}
			pieces[nr_pieces++] = (struct piece){ off, p };
			off += p;
			len -= p;
		}
	}
	fclose(f);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&tid[i], NULL, reader, NULL)) {
			perror("pthread_create");
			return 1;
		}
	for (int i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (atomic_load(&failed))
		return 1;
	printf("%" PRIu64 " %.6f\n", (uint64_t)atomic_load(&done_bytes),
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
