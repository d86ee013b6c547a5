/*
 * ratelimit: the token bucket, and the --limit auto glue around the
 * adaptive controller; see ratelimit.h.
 */
#include "data/ratelimit.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "data/adaptive.h"
#include "lib/strbuf.h"

/* 100 ms: PSI's total moves in microseconds, so a tenth of a second
 * gives a share to 0.01 %; a back-off from full speed to the floor (1 %
 * of it, 7 halvings) takes 0.7 s, and a scan of a fast device at full
 * speed has its baselines after 0.3 s. */
#define RL_TICK_NS	100000000ULL
/* A probe every 10 intervals (1 s) of 50 ms: 5 % of the scan's time, and
 * a foreground job that starts is noticed within a second at full speed
 * (at reduced rates the running intervals notice it by themselves). */
#define RL_PROBE_EVERY	10
/* The first probe after 3 intervals: a job already running is seen soon. */
#define RL_PROBE_AT	3
#define RL_PROBE_NS	50000000ULL
/* Our reads in flight at a probe must end before it measures: it waits
 * until every read admitted has been noted done (the device reader stops
 * submitting and reaps them: ratelimit_depth() is 0), at most 5 s -- four
 * 8 MiB reads queued on a 10 MB/s device.  Past that there is no probe
 * this time: one would measure our own reads.  The device works on our
 * reads meanwhile, so a long settle costs the scan little. */
#define RL_SETTLE_MAX_NS 5000000000ULL
/* Waiters look at the clock this often (ticks, probes, cancel). */
#define RL_SLICE_NS	10000000ULL
/* At most one -v line per second about rate changes. */
#define RL_REPORT_NS	1000000000ULL

enum rl_state { RL_RUN, RL_SETTLE, RL_PROBE };

/* Where the foreign share comes from: PSI, else the device's busy time. */
enum rl_source { RL_SRC_NONE, RL_SRC_PSI, RL_SRC_DEVICE };

struct rl_auto {
	struct adaptive ctl;
	enum rl_state state;
	uint64_t since_ns;		/* start of the interval, settle or probe */
	uint64_t bytes, lat_ns, reads;	/* this interval's completed reads */
	unsigned inflight;		/* reads admitted and not noted done */
	uint64_t inflight_ns;		/* their time in flight this interval */
	uint64_t inflight_at;		/* inflight_ns counted up to here */
	unsigned tick_no;
	bool have_psi;			/* src gives a total (it did last time) */
	enum rl_source src;
	char stat_path[64];		/* /sys/dev/block/M:m/stat (watch_device) */
	bool have_dev;			/* its request counts are read (dev_at) */
	uint64_t dev_at;		/* its completed requests at since_ns */
	uint64_t sect_at;		/* ... and their sectors */
	uint64_t req_bytes;		/* the device's largest request (split_reads) */
	uint64_t our_ios;		/* requests of our reads completed this interval */
	uint64_t short_reads;		/* reads ended this interval that may have been
					 * short of req_bytes (see adaptive.h) */
	uint64_t inflight_ios;		/* requests of our reads admitted, not done */
	bool told_source;		/* -v said what is watched */
	uint64_t psi_at;		/* the stall or busy total (us) at since_ns */
	uint64_t start_ns, total_bytes;
	uint64_t reported_ns;
	unsigned long long unreported;
	void (*report)(void *arg, const char *line);
	void *report_arg;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The text of a small file (NUL-terminated in buf); false if unreadable. */
static bool read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* /proc/pressure/io's "some" total; false without PSI (old kernel, psi=0). */
static bool read_psi(uint64_t *total)
{
	char buf[512];

	return read_small("/proc/pressure/io", buf, sizeof(buf)) &&
	       adaptive_parse_psi(buf, total) == 0;
}

/* The stall total of au's source, in microseconds. */
static bool read_stall(const struct rl_auto *au, uint64_t *us)
{
	char buf[512];
	uint64_t ms;

	switch (au->src) {
	case RL_SRC_PSI:
		return read_psi(us);
	case RL_SRC_DEVICE:
		if (!read_small(au->stat_path, buf, sizeof(buf)) ||
		    adaptive_parse_diskstat(buf, &ms))
			return false;
		*us = ms * 1000;
		return true;
	case RL_SRC_NONE:
		break;
	}
	return false;
}

/* The device's completed requests (reads and writes) and their sectors;
 * false if unreadable. */
static bool read_dev_ios(const struct rl_auto *au, uint64_t *ios, uint64_t *sectors)
{
	char buf[512];

	return au->stat_path[0] && read_small(au->stat_path, buf, sizeof(buf)) &&
	       adaptive_parse_diskstat_reqs(buf, ios, sectors) == 0;
}

/* The requests a read of bytes becomes on the device: pieces of its
 * largest request (one read each when that is not known). */
static uint64_t requests(const struct rl_auto *au, uint64_t bytes)
{
	if (!au->req_bytes)
		return 1;
	return bytes ? (bytes + au->req_bytes - 1) / au->req_bytes : 1;
}

static void format_rate(char *buf, size_t len, double rate)
{
	if (!rate)
		snprintf(buf, len, "unlimited");
	else
		snprintf(buf, len, "%.1f MiB/s", rate / (1 << 20));
}

static void set_rate(struct ratelimit *rl, double rate)
{
	if (rate && !rl->rate)
		rl->tokens = 0;		/* from unlimited: no credit */
	rl->rate = (uint64_t)rate;
	rl->burst = rate / 10;
	if (rl->tokens > rl->burst)
		rl->tokens = rl->burst;
}

static void report_change(struct rl_auto *au, enum adaptive_change c, double old, uint64_t now)
{
	const struct adaptive *a = &au->ctl;
	char from[32], to[32], why[96] = "";

	if (c == ADAPTIVE_HOLD || !au->report)
		return;
	if (now - au->reported_ns < RL_REPORT_NS && au->reported_ns) {
		au->unreported++;
		return;
	}
	format_rate(from, sizeof(from), old);
	format_rate(to, sizeof(to), a->rate);
	if (c == ADAPTIVE_DOWN && a->cause == ADAPTIVE_CAUSE_DEVICE)
		snprintf(why, sizeof(why), ": another load's requests on the device (%.0f or "
			 "more per %llu ms)", a->last_dev_foreign,
			 (unsigned long long)(RL_TICK_NS / 1000000));
	else if (c == ADAPTIVE_DOWN && a->cause == ADAPTIVE_CAUSE_LATENCY)
		snprintf(why, sizeof(why), ": read latency %.1fx the idle baseline",
			 a->last_lat / a->lat_base);
	else if (c == ADAPTIVE_DOWN && au->src == RL_SRC_DEVICE)
		snprintf(why, sizeof(why), ": the device busy with other I/O %.0f%% of the time "
			 "(baseline %.0f%%)", a->last_foreign * 100, a->psi_base * 100);
	else if (c == ADAPTIVE_DOWN)
		snprintf(why, sizeof(why), ": other tasks stalled on I/O %.0f%% of the time "
			 "(baseline %.0f%%)", a->last_foreign * 100, a->psi_base * 100);
	else
		snprintf(why, sizeof(why), ": the device is quiet");
	char line[256];

	snprintf(line, sizeof(line), "--limit auto: %s %s -> %s%s; %u read%s in flight%s, "
		 "of up to %llu KiB (%llu changes not shown; %.1f s into the scan)",
		 c == ADAPTIVE_DOWN ? "back-off" : "ramp-up", from, to, why, a->depth,
		 a->depth == 1 ? "" : "s", a->starting ? " (slow start)" : "",
		 (unsigned long long)a->size >> 10, au->unreported,
		 (double)(now - au->start_ns) / 1e9);
	au->report(au->report_arg, line);
	au->reported_ns = now;
	au->unreported = 0;
}

/* Once, at the first interval: what is watched when PSI is not there. */
static void tell_source(struct rl_auto *au)
{
	char line[160];

	if (au->told_source || !au->report || au->src == RL_SRC_PSI)
		return;
	au->told_source = true;
	if (au->src == RL_SRC_DEVICE)
		snprintf(line, sizeof(line), "--limit auto: no /proc/pressure/io, the read "
			 "latency and the device's busy time (%s) are watched", au->stat_path);
	else
		snprintf(line, sizeof(line), "--limit auto: no /proc/pressure/io, "
			 "only the read latency is watched");
	au->report(au->report_arg, line);
}

/* Add our reads' time in flight up to now (their overlap with the
 * interval, reads that go on past it included). */
static void count_inflight(struct rl_auto *au, uint64_t now)
{
	if (now > au->inflight_at)
		au->inflight_ns += (uint64_t)au->inflight * (now - au->inflight_at);
	au->inflight_at = now;
}

static void feed(struct ratelimit *rl, bool probe, uint64_t now)
{
	struct rl_auto *au = rl->autorate;
	struct adaptive_sample s = { .interval_ns = now - au->since_ns, .reads = au->reads,
				     .bytes = au->bytes,
				     .lat_ns = au->lat_ns, .probe = probe };
	double old = au->ctl.rate;
	uint64_t psi, ios, sect;

	if (au->have_psi && read_stall(au, &psi) && psi >= au->psi_at) {
		s.have_psi = true;
		s.psi_stall_us = psi - au->psi_at;
		au->psi_at = psi;
	}
	if (au->have_dev && read_dev_ios(au, &ios, &sect) && ios >= au->dev_at &&
	    sect >= au->sect_at) {
		s.have_dev = s.have_sectors = true;
		s.dev_ios = ios - au->dev_at;
		s.dev_sectors = sect - au->sect_at;
		s.our_ios = au->our_ios;
		s.our_ios_inflight = au->inflight_ios;
		s.our_short = au->short_reads + au->inflight;
		au->dev_at = ios;
		au->sect_at = sect;
	}
	if (!s.interval_ns)
		s.interval_ns = 1;
	count_inflight(au, now);
	s.busy_ns = au->inflight_ns;
	au->inflight_ns = 0;
	enum adaptive_change c = adaptive_tick(&au->ctl, &s);

	tell_source(au);

	set_rate(rl, au->ctl.rate);
	report_change(au, c, old, now);
	au->bytes = au->lat_ns = au->reads = au->our_ios = au->short_reads = 0;
	au->since_ns = now;
}

/* Move the interval / probe state machine on; under rl->lock. */
static void advance(struct ratelimit *rl, uint64_t now)
{
	struct rl_auto *au = rl->autorate;

	switch (au->state) {
	case RL_RUN:
		if (now - au->since_ns < RL_TICK_NS)
			return;
		feed(rl, false, now);
		if (au->have_psi && (++au->tick_no % RL_PROBE_EVERY == RL_PROBE_AT ||
				     adaptive_wants_probe(&au->ctl)))
			au->state = RL_SETTLE;	/* since_ns is now: the settle starts */
		return;
	case RL_SETTLE:
		if (au->inflight && now - au->since_ns < RL_SETTLE_MAX_NS)
			return;
		count_inflight(au, now);
		au->inflight_ns = 0;	/* the settle is no interval of its own */
		au->have_psi = read_stall(au, &au->psi_at);
		au->since_ns = now;
		au->state = au->have_psi && !au->inflight ? RL_PROBE : RL_RUN;
		return;
	case RL_PROBE:
		if (now - au->since_ns < RL_PROBE_NS)
			return;
		feed(rl, true, now);
		au->state = RL_RUN;
		return;
	}
}

void ratelimit_init(struct ratelimit *rl, uint64_t rate, bool adaptive, unsigned depth,
		    void (*report)(void *arg, const char *line), void *arg)
{
	memset(rl, 0, sizeof(*rl));
	pthread_mutex_init(&rl->lock, NULL);
	rl->last_ns = now_ns();
	rl->depth = depth;
	if (adaptive) {
		struct rl_auto *au = xcalloc(1, sizeof(*au));
		struct adaptive_params p = adaptive_defaults;

		p.max = (double)rate;
		p.max_depth = depth ? depth : 1;
		adaptive_init(&au->ctl, &p);
		set_rate(rl, au->ctl.rate);
		au->since_ns = au->start_ns = au->inflight_at = rl->last_ns;
		/* FSCRUB_DEBUG_NO_PSI: as on a kernel without PSI (for the tests
		 * of the device's busy time on machines that have it). */
		au->have_psi = !getenv("FSCRUB_DEBUG_NO_PSI") && read_psi(&au->psi_at);
		au->src = au->have_psi ? RL_SRC_PSI : RL_SRC_NONE;
		au->report = report;
		au->report_arg = arg;
		rl->autorate = au;
		return;
	}
	rl->rate = rate;
	rl->burst = (double)rate / 10;
	rl->tokens = rl->burst;
}

void ratelimit_watch_device(struct ratelimit *rl, unsigned major, unsigned minor)
{
	struct rl_auto *au = rl->autorate;

	if (!au)
		return;
	snprintf(au->stat_path, sizeof(au->stat_path), "/sys/dev/block/%u:%u/stat", major, minor);
	/* FSCRUB_DEBUG_NO_DEVREQS: without the request counts (for the tests
	 * of the other signals, which a competing load would not reach). */
	au->have_dev = !getenv("FSCRUB_DEBUG_NO_DEVREQS") &&
		       read_dev_ios(au, &au->dev_at, &au->sect_at);
	if (au->src == RL_SRC_PSI)
		return;
	au->src = RL_SRC_DEVICE;
	au->have_psi = read_stall(au, &au->psi_at);
	if (!au->have_psi)
		au->src = RL_SRC_NONE;
}

void ratelimit_split_reads(struct ratelimit *rl, uint64_t min_len, uint64_t max_len)
{
	struct rl_auto *au = rl->autorate;
	struct adaptive_params p;

	if (!au)
		return;
	p = au->ctl.p;
	p.max_size = max_len;
	p.min_size = min_len;
	au->req_bytes = min_len;
	adaptive_init(&au->ctl, &p);	/* nothing measured yet: start over */
	set_rate(rl, au->ctl.rate);
}

uint64_t ratelimit_size(struct ratelimit *rl)
{
	uint64_t size;

	if (!rl || !rl->autorate)
		return 0;
	pthread_mutex_lock(&rl->lock);
	size = rl->autorate->ctl.size;
	pthread_mutex_unlock(&rl->lock);
	return size;
}

void ratelimit_destroy(struct ratelimit *rl)
{
	struct rl_auto *au = rl->autorate;

	if (au && au->report) {
		const struct adaptive *a = &au->ctl;
		double secs = (double)(now_ns() - au->start_ns) / 1e9;
		char line[320];

		/* Back-offs by cause, in the words of the back-off lines (which
		 * -v shows at most one a second). */
		snprintf(line, sizeof(line), "--limit auto: %llu bytes in %.1f s, average "
			 "%.1f MiB/s; %llu back-offs (%llu for another load's requests, %llu for "
			 "%s, %llu for read latency), %llu ramp-ups, full speed %.1f MiB/s, "
			 "floor %.2f MiB/s",
			 (unsigned long long)au->total_bytes, secs,
			 secs > 0 ? (double)au->total_bytes / secs / (1 << 20) : 0,
			 a->downs, a->dev_downs, a->downs - a->dev_downs - a->lat_downs,
			 au->src == RL_SRC_DEVICE ? "the device busy with other I/O"
						  : "other tasks stalled on I/O",
			 a->lat_downs, a->ups, a->ceiling / (1 << 20), adaptive_floor(a) / (1 << 20));
		au->report(au->report_arg, line);
	}
	free(au);
	pthread_mutex_destroy(&rl->lock);
}

/* Seconds to wait now before the read may start; under rl->lock. */
static double wait_for(struct ratelimit *rl, uint64_t now)
{
	if (rl->autorate) {
		enum rl_state st;

		advance(rl, now);
		st = rl->autorate->state;
		/* A reader that follows ratelimit_depth() stops by itself during a
		 * settle, and must be free to reap its reads (io_uring's submitter
		 * is the one waiting here): only the probe holds it back. */
		if (st == RL_PROBE || (st == RL_SETTLE && !rl->depth))
			return (double)RL_SLICE_NS / 1e9;
	}
	if (!rl->rate)
		return 0;
	rl->tokens += (double)(now - rl->last_ns) * (double)rl->rate / 1e9;
	if (rl->tokens > rl->burst)
		rl->tokens = rl->burst;
	rl->last_ns = now;
	return rl->tokens < 0 ? -rl->tokens / (double)rl->rate : 0;
}

bool ratelimit_take(struct ratelimit *rl, uint64_t bytes, bool (*stop)(void *), void *arg)
{
	double wait_s;

	if (!rl || (!rl->rate && !rl->autorate))
		return true;
	pthread_mutex_lock(&rl->lock);
	wait_for(rl, now_ns());
	rl->tokens -= (double)bytes;
	/* Wait in slices so that a cancel, a new rate or a probe is seen soon;
	 * the debt is repaid at whatever the rate is meanwhile. */
	while ((wait_s = wait_for(rl, now_ns())) > 0) {
		pthread_mutex_unlock(&rl->lock);
		if (stop && stop(arg))
			return false;
		if (wait_s > (double)RL_SLICE_NS / 1e9)
			wait_s = (double)RL_SLICE_NS / 1e9;
		struct timespec ts = { .tv_sec = (time_t)wait_s,
				       .tv_nsec = (long)((wait_s - floor(wait_s)) * 1e9) };

		nanosleep(&ts, NULL);
		pthread_mutex_lock(&rl->lock);
	}
	if (!rl->rate)
		rl->tokens = 0;		/* unlimited meanwhile: no debt kept */
	if (rl->autorate) {
		count_inflight(rl->autorate, now_ns());
		rl->autorate->inflight++;
		rl->autorate->inflight_ios += requests(rl->autorate, bytes);
	}
	pthread_mutex_unlock(&rl->lock);
	return true;
}

/* A read admitted by ratelimit_take() ended: no longer in flight, its
 * requests ours, one of them maybe short; under rl->lock. */
static void read_ended(struct rl_auto *au, uint64_t bytes)
{
	if (!bytes || !au->req_bytes || bytes % au->req_bytes)
		au->short_reads++;
	count_inflight(au, now_ns());
	if (au->inflight)
		au->inflight--;
	au->inflight_ios -= requests(au, bytes) < au->inflight_ios ? requests(au, bytes)
								       : au->inflight_ios;
	au->our_ios += requests(au, bytes);
}

void ratelimit_note_aside(struct ratelimit *rl, uint64_t bytes)
{
	struct rl_auto *au = rl ? rl->autorate : NULL;

	if (!au)
		return;
	pthread_mutex_lock(&rl->lock);
	read_ended(au, bytes);
	pthread_mutex_unlock(&rl->lock);
}

void ratelimit_note(struct ratelimit *rl, uint64_t bytes, uint64_t lat_ns)
{
	struct rl_auto *au = rl ? rl->autorate : NULL;

	if (!au)
		return;
	pthread_mutex_lock(&rl->lock);
	read_ended(au, bytes);
	au->reads++;
	au->bytes += bytes;
	au->lat_ns += lat_ns;
	au->total_bytes += bytes;
	pthread_mutex_unlock(&rl->lock);
}

unsigned ratelimit_depth(struct ratelimit *rl)
{
	unsigned depth;

	if (!rl)
		return 1;
	if (!rl->autorate)
		return rl->depth ? rl->depth : 1;
	pthread_mutex_lock(&rl->lock);
	advance(rl, now_ns());
	depth = rl->autorate->state == RL_RUN ? rl->autorate->ctl.depth : 0;
	pthread_mutex_unlock(&rl->lock);
	return depth;
}

static int parse_rate(const char *s, uint64_t *rate)
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

int ratelimit_parse(const char *s, uint64_t *rate, bool *adaptive)
{
	uint64_t r = 0;

	if (s && !strncmp(s, "auto", 4) && (!s[4] || s[4] == ':')) {
		if (s[4] && parse_rate(s + 5, &r))
			return -1;
		*rate = r;
		*adaptive = true;
		return 0;
	}
	if (parse_rate(s, &r))
		return -1;
	*rate = r;
	*adaptive = false;
	return 0;
}
