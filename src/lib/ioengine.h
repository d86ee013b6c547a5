/*
 * ioengine: read a list of large ranges of one descriptor with several
 * reads in flight -- io_uring where the kernel allows it, else a pool of
 * threads doing pread.  The data scan's device reader uses it; the engine
 * knows nothing of filesystems.
 *
 * Each range is read into a buffer of its own and handed to done() with
 * the result (bytes read, or a negative errno).  done() may use the buffer
 * (all max_len bytes of it) for its own reads, e.g. to bisect a failure;
 * with the thread pool it is called from several threads at once.  Before
 * each read, admit() is called with its length; it may sleep (a rate
 * limit) and returns false to stop submitting (cancelled).  timed(), if
 * set, is told each read's length and latency (submission to completion
 * seen) before done().  depth_now(), if set, is asked before each read how
 * many may be in flight now (at most depth; more counts as depth): the
 * engine keeps at most that many, so that a rate controller can shorten
 * the queue it puts in front of other I/O.  0 pauses: the engine starts
 * nothing, reaps what is in flight, and asks again every 10 ms.
 *
 * size_now(), if set, is asked before each read for the largest read to
 * issue now (a multiple of align; 0 or more than the range: the range in
 * one read): a range longer than that is read in pieces of it, one after
 * the other into its buffer, each piece admitted, timed and counted in
 * flight by itself, and done() is called once, for the whole range (the
 * bytes read, or the first piece's error).  A range whose pieces are cut
 * short by a stop is dropped: done() is not called for it.
 *
 * buffer(), if set, gives the buffer range i is read into (room for the
 * range, suitably aligned for the descriptor, the caller's until done()
 * has been called for it; done() gets it and may use the range's length
 * only): a caller that keeps what it reads saves the copy out of the
 * engine's buffer.  Unset, the engine reads into buffers of its own (of
 * max_len bytes, aligned to align), one per read in flight.
 */
#ifndef FSCRUB_IOENGINE_H
#define FSCRUB_IOENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct io_range {
	uint64_t off;
	uint64_t len;		/* at most max_len */
};

struct io_job {
	int fd;
	const struct io_range *ranges;
	size_t nr_ranges;
	unsigned depth;		/* reads in flight, at most */
	size_t max_len;		/* largest range; buffer size */
	size_t align;		/* buffer alignment (O_DIRECT) */
	bool no_uring;		/* force the thread pool (FSCRUB_DEBUG_NO_URING) */
	bool (*admit)(void *arg, uint64_t len);
	void (*done)(void *arg, const struct io_range *r, char *buf, int64_t res);
	void (*timed)(void *arg, uint64_t len, uint64_t lat_ns);
	unsigned (*depth_now)(void *arg);
	uint64_t (*size_now)(void *arg);
	char *(*buffer)(void *arg, size_t i);
	void *arg;
	const char *engine;	/* out: "io_uring" or "pread" */
};

/* Read every range (until admit() says stop).  0, or a negative errno. */
int ioengine_run(struct io_job *job);

#endif
