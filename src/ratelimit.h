/*
 * ratelimit: a token bucket that caps the data scan's read bandwidth
 * (--limit RATE), shared by every reader thread.
 *
 * A reader takes the bytes it is about to read; when the bucket is empty
 * it sleeps until the debt is paid.  The bucket holds at most a tenth of a
 * second of tokens, so a pause is not followed by a burst at full speed.
 */
#ifndef FSCRUB_RATELIMIT_H
#define FSCRUB_RATELIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct ratelimit {
	uint64_t rate;		/* bytes per second; 0 = unlimited */
	double tokens;		/* may go negative: the debt to sleep off */
	double burst;
	uint64_t last_ns;
	pthread_mutex_t lock;
};

void ratelimit_init(struct ratelimit *rl, uint64_t rate);
void ratelimit_destroy(struct ratelimit *rl);
/* Wait until bytes may be read; returns early (false) if *stop becomes true. */
bool ratelimit_take(struct ratelimit *rl, uint64_t bytes, bool (*stop)(void *), void *arg);

/*
 * Parse a rate such as "200M", "1.5G", "800k" or "50000000" (bytes per
 * second; K, M, G, T are powers of 1024; a trailing "B", "/s" or "B/s" is
 * allowed).  Returns 0 and sets *rate, or -1 if it is not a positive rate.
 */
int ratelimit_parse(const char *s, uint64_t *rate);

#endif
