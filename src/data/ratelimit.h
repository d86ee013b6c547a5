/*
 * ratelimit: a token bucket that caps the data scan's read bandwidth
 * (--limit RATE), shared by every reader thread; with --limit auto the
 * cap follows the adaptive controller (adaptive.h).
 *
 * A reader takes the bytes it is about to read; when the bucket is empty
 * it sleeps until the debt is paid.  The bucket holds at most a tenth of a
 * second of tokens, so a pause is not followed by a burst at full speed.
 *
 * --limit auto: a reader also notes each read's latency when it is done
 * (ratelimit_note).  Whoever takes or waits when an interval (RL_TICK_NS)
 * is over feeds the controller with it and with the delta of
 * /proc/pressure/io's "some" total, and the rate changes.  Every
 * RL_PROBE_EVERY intervals (and after each interval while the controller
 * backs off for pressure it is too busy to see) the scan pauses: no new
 * read is admitted, and once every read admitted has been noted done the
 * pressure measured over RL_PROBE_NS is other tasks'
 * alone (without PSI, the device's busy time: ratelimit_watch_device).
 * Each interval also counts the device's completed requests and their
 * sectors against the requests of our reads: another load's show without
 * a probe (adaptive.h).
 * The controller also sets how many reads may be in flight
 * (ratelimit_depth): one after a back-off, up to the reader's depth again
 * as it ramps up; and, for a user that can split its reads
 * (ratelimit_split_reads), their size (ratelimit_size).  It begins with one
 * read of the smallest size and grows them while the probes find the
 * device quiet (adaptive.h's slow start).  A utility: it reports only
 * through the callback its user gives.
 */
#ifndef FSCRUB_RATELIMIT_H
#define FSCRUB_RATELIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct rl_auto;

struct ratelimit {
	uint64_t rate;		/* bytes per second; 0 = unlimited */
	double tokens;		/* may go negative: the debt to sleep off */
	double burst;
	uint64_t last_ns;
	pthread_mutex_t lock;
	struct rl_auto *autorate;	/* --limit auto, else NULL */
	unsigned depth;		/* reads in flight at full speed */
};

/*
 * rate: bytes per second, 0 = unlimited; adaptive: --limit auto, rate is
 * then its maximum (0 = none).  depth >= 1: the user keeps at most
 * ratelimit_depth() reads in flight, that many at full speed, and admits
 * none while it is 0 (a probe: it then reaps what is in flight and asks
 * again); depth 0: a user that cannot (a fixed set of threads), whom
 * ratelimit_take() holds back during the probes instead.
 * report(arg, line): where the adaptive rate's changes (at most one line a
 * second) and, at ratelimit_destroy(), its average are told; may be NULL.
 */
void ratelimit_init(struct ratelimit *rl, uint64_t rate, bool adaptive, unsigned depth,
		    void (*report)(void *arg, const char *line), void *arg);
void ratelimit_destroy(struct ratelimit *rl);
/* Wait until bytes may be read; returns early (false) if *stop becomes true. */
bool ratelimit_take(struct ratelimit *rl, uint64_t bytes, bool (*stop)(void *), void *arg);
/* A read admitted by ratelimit_take() is done: bytes read, its latency. */
void ratelimit_note(struct ratelimit *rl, uint64_t bytes, uint64_t lat_ns);
/*
 * The same for a read outside the scan's own pattern (the 4 KiB re-reads
 * that look for a media error's blocks): its requests are ours (not
 * another load's) but its latency and bytes are not the scan's -- small
 * reads take longer per byte, and would look like a slower device.
 */
void ratelimit_note_aside(struct ratelimit *rl, uint64_t bytes);
/*
 * --limit auto: watch the block device major:minor (the one the reads go
 * to; its stat file counts what is issued to it, a partition's or a
 * loop or dm device's own): its completed requests less ours are another
 * load's (adaptive.h), with ratelimit_split_reads()'s min_len as the size
 * of our requests (and of the device's largest: requests the sectors it
 * moved could not fill are another load's small ones).  Without PSI its busy time also stands in for PSI --
 * the share of each interval in which it had requests in flight, ours
 * told apart as PSI's stalls are.  No effect without --limit auto; call
 * before the first ratelimit_take().
 */
void ratelimit_watch_device(struct ratelimit *rl, unsigned major, unsigned minor);
/*
 * --limit auto: the user can read in pieces of any multiple of min_len up
 * to max_len (min_len: the device's largest request, at most max_len); the
 * controller then sets the size (ratelimit_size), min_len in its slow
 * start and while it backs off.  No effect without --limit auto; call
 * before the first ratelimit_take().
 */
void ratelimit_split_reads(struct ratelimit *rl, uint64_t min_len, uint64_t max_len);
/*
 * The largest read to issue now: 0 (whole reads) without --limit auto or
 * ratelimit_split_reads(), else min_len..max_len.  Thread-safe.
 */
uint64_t ratelimit_size(struct ratelimit *rl);
/*
 * Reads that may be in flight now: init's depth, or with --limit auto the
 * controller's, 1..depth, and 0 while a probe waits for the reads in
 * flight to end or measures.  Thread-safe; NULL or depth 0 give 1.
 */
unsigned ratelimit_depth(struct ratelimit *rl);

/*
 * Parse a rate such as "200M", "1.5G", "800k" or "50000000" (bytes per
 * second; K, M, G, T are powers of 1024; a trailing "B", "/s" or "B/s" is
 * allowed).  "auto" or "auto:RATE" set *adaptive (and *rate to the
 * maximum, 0 for none).  Returns 0 and sets *rate and *adaptive, or -1 if
 * it is not a positive rate.
 */
int ratelimit_parse(const char *s, uint64_t *rate, bool *adaptive);

#endif
