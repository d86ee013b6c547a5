/*
 * ratelimit: the token bucket; see ratelimit.h.
 */
#include "ratelimit.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void ratelimit_init(struct ratelimit *rl, uint64_t rate)
{
	memset(rl, 0, sizeof(*rl));
	rl->rate = rate;
	rl->burst = (double)rate / 10;
	rl->tokens = rl->burst;
	rl->last_ns = now_ns();
	pthread_mutex_init(&rl->lock, NULL);
}

void ratelimit_destroy(struct ratelimit *rl)
{
	pthread_mutex_destroy(&rl->lock);
}

bool ratelimit_take(struct ratelimit *rl, uint64_t bytes, bool (*stop)(void *), void *arg)
{
	double wait_s;

	if (!rl || !rl->rate)
		return true;
	pthread_mutex_lock(&rl->lock);
	uint64_t now = now_ns();

	rl->tokens += (double)(now - rl->last_ns) * (double)rl->rate / 1e9;
	if (rl->tokens > rl->burst)
		rl->tokens = rl->burst;
	rl->last_ns = now;
	rl->tokens -= (double)bytes;
	wait_s = rl->tokens < 0 ? -rl->tokens / (double)rl->rate : 0;
	pthread_mutex_unlock(&rl->lock);

	/* Sleep in slices of at most 100 ms so that a cancel is seen soon. */
	while (wait_s > 0) {
		double slice = wait_s > 0.1 ? 0.1 : wait_s;
		struct timespec ts = { .tv_sec = (time_t)slice,
				       .tv_nsec = (long)((slice - floor(slice)) * 1e9) };

		if (stop && stop(arg))
			return false;
		nanosleep(&ts, NULL);
		wait_s -= slice;
	}
	return true;
}

int ratelimit_parse(const char *s, uint64_t *rate)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v <= 0)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'T': v *= 1024; /* fall through */
	case 'G': v *= 1024; /* fall through */
	case 'M': v *= 1024; /* fall through */
	case 'K': v *= 1024; end++; break;
	default: break;
	}
	if (toupper((unsigned char)*end) == 'B')
		end++;
	if (!strcasecmp(end, "/s"))
		end += 2;
	if (*end || v < 1 || v > 1e18)
		return -1;
	*rate = (uint64_t)v;
	return 0;
}
