/*
 * rawread: the device's limit for bench/data_verify.sh.  Reads exactly the
 * byte ranges listed in RANGES ("offset length" per line, bytes, 4 KiB
 * aligned, as bench/extents prints them) from DEV with O_DIRECT, in pieces
 * of at most CHUNK bytes (default 4 MiB), THREADS preads in flight (default
 * 4), in the order given.  Nothing is merged beyond what the list has.
 * Prints "BYTES SECONDS" (the read only: the list is loaded first).
 * Built with -DHAVE_URING -luring, THREADS given as uN means N reads in
 * flight through one io_uring instead of N threads.
 *
 *   cc -O2 -pthread -o rawread rawread.c [-DHAVE_URING -luring]
 *   rawread DEV RANGES [THREADS|uN [CHUNK]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_URING
#include <liburing.h>
#endif

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

#ifdef HAVE_URING
/* depth reads in flight through one ring, buffers reused as reads finish */
static int uring_read(int depth)
{
	struct io_uring ring;
	char *bufs[64];
	uint64_t got[64];
	size_t which[64], next = 0;
	int inflight = 0, free_slot[64], nfree = 0;

	if (io_uring_queue_init((unsigned)depth, &ring, 0))
		return ENOSYS;
	for (int i = 0; i < depth; i++) {
		if (posix_memalign((void **)&bufs[i], 4096, chunk))
			return ENOMEM;
		free_slot[nfree++] = i;
	}
	for (;;) {
		while (nfree && next < nr_pieces) {
			int slot = free_slot[--nfree];
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			which[slot] = next++;
			got[slot] = 0;
			io_uring_prep_read(sqe, fd, bufs[slot], (unsigned)pieces[which[slot]].len,
					   pieces[which[slot]].off);
			io_uring_sqe_set_data64(sqe, (uint64_t)slot);
			inflight++;
		}
		if (!inflight)
			break;
		struct io_uring_cqe *cqe;
		if (io_uring_submit_and_wait(&ring, 1) < 0 || io_uring_wait_cqe(&ring, &cqe))
			return EIO;
		int slot = (int)io_uring_cqe_get_data64(cqe), res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
		struct piece *p = &pieces[which[slot]];
		if (res <= 0) {
			fprintf(stderr, "rawread: read at %" PRIu64 ": %s\n", p->off + got[slot],
				res < 0 ? strerror(-res) : "end of device");
			return EIO;
		}
		got[slot] += (uint64_t)res;
		atomic_fetch_add(&done_bytes, (uint64_t)res);
		if (got[slot] < p->len) {	/* short read: the rest */
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

			io_uring_prep_read(sqe, fd, bufs[slot] + got[slot],
					   (unsigned)(p->len - got[slot]), p->off + got[slot]);
			io_uring_sqe_set_data64(sqe, (uint64_t)slot);
			inflight++;
		} else {
			free_slot[nfree++] = slot;
		}
	}
	io_uring_queue_exit(&ring);
	return 0;
}
#endif

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
	bool use_uring = false;

	(void)use_uring;

	if (argc > 3 && argv[3][0] == 'u') {
#ifdef HAVE_URING
		use_uring = true;
		nthreads = atoi(argv[3] + 1);
#else
		fprintf(stderr, "rawread: built without liburing\n");
		return 2;
#endif
	} else if (argc > 3) {
		nthreads = atoi(argv[3]);
	}
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
#ifdef HAVE_URING
	if (use_uring) {
		int err = uring_read(nthreads);

		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (err) {
			fprintf(stderr, "rawread: io_uring: %s\n", strerror(err));
			return 1;
		}
		goto out;
	}
#endif
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
#ifdef HAVE_URING
out:
#endif
	printf("%" PRIu64 " %.6f\n", (uint64_t)atomic_load(&done_bytes),
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
