/*
 * adaptive: the --limit auto controller; see adaptive.h.
 */
#include "data/adaptive.h"
#include "lib/sorted.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const struct adaptive_params adaptive_defaults = {
	/* 64 KiB/s: one request a second of most disks' largest keeps the
	 * scan moving (5 GiB a day) where nothing better is known. */
	.floor = 64 << 10,
	/* 1 %: a foreground job at iodepth 1 then finds one of our requests
	 * ahead of about 1 % of its reads -- what its p99 can bear.  A fixed
	 * 1 MiB/s was 5-8 % of a 13-25 MB/s device's time and moved it 2x. */
	.floor_share = 0.01,
	/* 3x: our own reads' latency varies with the queue depth we use and
	 * with other tenants by up to about 2x in our measurements; 3x is a
	 * competing load, not noise. */
	.lat_factor = 3.0,
	/* 20 % of the interval: a foreground job that waits on the disk at
	 * all (iodepth 1) stalls for most of it; housekeeping I/O of other
	 * tenants stays under that. */
	.psi_margin = 0.20,
	/* 5 latency windows at full speed (40 reads or more) after the first
	 * set the baseline: their median is robust to one slow or fast one. */
	.warmup_ticks = 5,
	/* 5 quiet intervals (0.5 s at 100 ms) from the floor back to full
	 * speed: with 10, a 4 s pause of the job gave the scan 0.44x of its
	 * idle bandwidth on the test VM's slow device (1.3 s to ramp up). */
	.ramp_steps = 5,
	/* 8 reads: 8 MiB reads finish two to six per 100 ms on a 200 MB/s
	 * device, so one interval's time per byte varies 3x; eight of them
	 * vary by less than half that. */
	.min_reads = 8,
	/* 3 intervals (300 ms): a foreground job's stall share dips below the
	 * margin for an interval now and then (its CPU time, a scheduler
	 * hiccup); three under half the margin, before it comes back above
	 * the margin, are a pause. */
	.quiet_ticks = 3,
	/* 1: the caller sets the reads in flight it uses at full speed, and
	 * the read sizes if it can split its reads. */
	.max_depth = 1,
	.slow_start = true,
	/* 3 requests per 100 ms interval (30 a second): a filesystem's own
	 * journal commits and metadata writeback are a few requests every
	 * few seconds (ext4 commits every 5 s, XFS's log every 30 s at most);
	 * a foreground job that waits on the disk issues hundreds a second. */
	.foreign_ios = 3,
	/* 0.25 %: a job's p99 is its slowest 1 %; those of its reads that wait
	 * behind one of ours join them.  A quarter of that leaves the p99
	 * where it was unless the job's own tail is flat just above it (on
	 * the test VM's null_blk 1.3 % moved it from 4.4 to 7-8 ms). */
	.load_share = 0.0025,
};

static unsigned max_depth(const struct adaptive_params *p)
{
	return p->max_depth ? p->max_depth : 1;
}

static uint64_t min_size(const struct adaptive_params *p)
{
	return p->min_size && p->min_size < p->max_size ? p->min_size : p->max_size;
}

void adaptive_init(struct adaptive *a, const struct adaptive_params *p)
{
	memset(a, 0, sizeof(*a));
	a->p = *p;
	a->rate = p->max;
	/* nothing to grow (one read, not split): no slow start */
	a->starting = p->slow_start && (max_depth(p) > 1 || min_size(p) < p->max_size);
	a->depth = a->starting ? 1 : max_depth(p);
	a->size = a->starting ? min_size(p) : p->max_size;
	a->quiet = p->quiet_ticks;
	a->psi_base = -1;
	a->last_foreign = -1;
}

static bool at_top(const struct adaptive *a)
{
	return a->rate == a->p.max;
}

double adaptive_floor(const struct adaptive *a)
{
	double f = a->best_bw * a->p.floor_share;

	if (f < a->p.floor)
		f = a->p.floor;
	return a->p.max && f > a->p.max ? a->p.max : f;
}

double adaptive_load_floor(const struct adaptive *a)
{
	double f = a->p.load_share * a->load_rate * (double)min_size(&a->p), top = adaptive_floor(a);

	if (!a->p.load_share || !min_size(&a->p))
		return top;
	if (f < a->p.floor)
		f = a->p.floor;
	return f < top ? f : top;
}

/* Full speed: the rate, the reads in flight and their size all at the top. */
static void full_speed(struct adaptive *a)
{
	a->rate = a->p.max;
	a->depth = max_depth(&a->p);
	a->size = a->p.max_size;
	a->starting = false;
}

static double clamp01(double x)
{
	return x < 0 ? 0 : x > 1 ? 1 : x;
}

/*
 * The foreign stall share of the interval, or -1 if it is not known;
 * *blind: we were too busy to see it (what is returned is then no
 * evidence of quiet).
 */
static double foreign_share(struct adaptive *a, const struct adaptive_sample *s, bool *blind)
{
	double share, busy;

	*blind = !s->have_psi;
	if (!s->have_psi)
		return -1;
	share = clamp01((double)s->psi_stall_us * 1000.0 / (double)s->interval_ns);
	if (s->probe) {
		if (a->psi_base < 0 || share < a->psi_base)
			a->psi_base = share;
		return share;
	}
	/* Stalls of ours and of others overlap: what exceeds our busy share
	 * is surely foreign (an underestimate, never an overestimate).  With
	 * several reads in flight the latencies add up past the interval.
	 * A read that spans intervals keeps the device busy in each of them:
	 * busy_ns counts it there, lat_ns only where it ends. */
	busy = clamp01((double)(s->busy_ns ? s->busy_ns : s->lat_ns) / (double)s->interval_ns);
	*blind = busy >= 1 - a->p.psi_margin;
	return share > busy ? share - busy : 0;
}

static void dev_restart(struct adaptive *a)
{
	a->nr_hist = 1;
	a->resid_hist[0] = a->resid;
	a->ns_hist[0] = a->dev_ns;
}

/*
 * Another load's requests in the interval by their size (adaptive.h): the
 * requests beyond what the sectors moved could fill in requests of
 * p.min_size, less those of ours that may be short.  0 when the sectors
 * or the request size are not known.
 */
static double small_requests(const struct adaptive *a, const struct adaptive_sample *s)
{
	double req = (double)min_size(&a->p), n;

	if (!s->have_sectors || !req)
		return 0;
	n = (double)s->dev_ios - (double)s->dev_sectors * 512 / req - (double)s->our_short;
	return n > 0 ? n : 0;
}

/*
 * The other load's rate for adaptive_load_floor(): the residual's growth
 * over the longest span kept, less our requests in flight, per second;
 * or this interval's small requests per second, whichever is more (both
 * are lower bounds).
 */
static void load_rate(struct adaptive *a, const struct adaptive_sample *s, double small)
{
	unsigned k = a->nr_hist;
	double grew = (double)(a->resid - a->resid_hist[0]) - (double)s->our_ios_inflight;
	double secs = (double)(a->dev_ns - a->ns_hist[0]) / 1e9, r = 0;

	if (k && secs > 0 && grew > 0)
		r = grew / secs;
	if (small * 1e9 / (double)s->interval_ns > r)
		r = small * 1e9 / (double)s->interval_ns;
	a->load_rate = r;
}

/*
 * Another load's requests on the device (adaptive.h): whether, over some
 * span of the last intervals, the residual grew by more than our requests
 * in flight could explain plus p.foreign_ios per interval.  Then
 * a->last_dev_foreign is the largest such lower bound per interval.
 */
static bool dev_foreign(struct adaptive *a, const struct adaptive_sample *s)
{
	bool seen = false;

	a->last_dev_foreign = 0;
	if (!s->have_dev) {
		a->nr_hist = 0;
		return false;
	}
	double small = small_requests(a, s);

	a->resid += (int64_t)s->dev_ios - (int64_t)s->our_ios;
	a->dev_ns += s->interval_ns;
	if (small > a->p.foreign_ios)
		seen = true;
	if (small > a->last_dev_foreign)
		a->last_dev_foreign = small;
	load_rate(a, s, small);
	for (unsigned k = 1; k <= a->nr_hist; k++) {
		int64_t grew = a->resid - a->resid_hist[a->nr_hist - k] -
			       (int64_t)s->our_ios_inflight;

		if (grew > 0 && (double)grew / k > a->last_dev_foreign)
			a->last_dev_foreign = (double)grew / k;
		if ((double)grew > a->p.foreign_ios * k)
			seen = true;
	}
	if (a->nr_hist == ADAPTIVE_DEV_WINDOW) {
		memmove(a->resid_hist, a->resid_hist + 1, sizeof(*a->resid_hist) * (a->nr_hist - 1));
		memmove(a->ns_hist, a->ns_hist + 1, sizeof(*a->ns_hist) * (a->nr_hist - 1));
	} else {
		a->nr_hist++;
	}
	a->resid_hist[a->nr_hist - 1] = a->resid;
	a->ns_hist[a->nr_hist - 1] = a->dev_ns;
	return seen;
}

static bool too_slow(const struct adaptive *a, double lat)
{
	return a->lat_base > 0 && lat > 0 && lat > a->p.lat_factor * a->lat_base;
}

/* A probe's share counts as other tenants' steady I/O only up to 10 %: a
 * foreground job that runs from the start must not become the baseline. */
#define PSI_BASE_MAX 0.10

static bool above_base(const struct adaptive *a, double foreign, double margin)
{
	double base = a->psi_base < PSI_BASE_MAX ? a->psi_base : PSI_BASE_MAX;

	return foreign >= 0 && a->psi_base >= 0 && foreign > base + margin;
}

static bool too_busy(const struct adaptive *a, double foreign)
{
	return above_base(a, foreign, a->p.psi_margin);
}

static enum adaptive_change back_off(struct adaptive *a, double bw, enum adaptive_cause why)
{
	double cur = a->rate, floor = adaptive_floor(a);
	unsigned depth = a->depth > 1 ? a->depth / 2 : 1;
	uint64_t size = a->size / 2 > min_size(&a->p) ? a->size / 2 : min_size(&a->p);

	a->cause = why;
	a->quiet = 0;
	a->starting = false;
	if (at_top(a))		/* full speed: halve what the device did */
		cur = bw > 0 && (bw < a->ceiling || !a->ceiling) ? bw : a->ceiling;
	cur = cur / 2 > floor ? cur / 2 : floor;
	if (a->rate && cur >= a->rate && depth == a->depth && size == a->size)
		return ADAPTIVE_HOLD;		/* at the floor, one small read already */
	if (!a->rate || cur < a->rate)
		a->rate = cur;
	a->depth = depth;
	a->size = size;
	a->downs++;
	if (why == ADAPTIVE_CAUSE_LATENCY)
		a->lat_downs++;
	return ADAPTIVE_DOWN;
}

/*
 * Another load's requests: to the floor with one read of the smallest
 * size at once -- the evidence is not a noisy latency, and each halving
 * would cost the job another interval behind our reads.  The floor is
 * the one that load's rate sets (adaptive_load_floor), followed as long
 * as it goes on; "there" already if at most the floor without it.
 */
static enum adaptive_change drop_to_floor(struct adaptive *a)
{
	double floor = adaptive_load_floor(a);

	a->cause = ADAPTIVE_CAUSE_DEVICE;
	a->quiet = 0;
	a->starting = false;
	bool there = a->rate && a->rate <= adaptive_floor(a) && a->depth == 1 &&
		     a->size == min_size(&a->p);

	dev_restart(a);		/* what was seen is acted on: judge anew */
	a->rate = floor;	/* (up to it if the floor rose meanwhile) */
	a->depth = 1;
	a->size = min_size(&a->p);
	if (there)
		return ADAPTIVE_HOLD;
	a->downs++;
	a->dev_downs++;
	return ADAPTIVE_DOWN;
}

static enum adaptive_change ramp_up(struct adaptive *a)
{
	double step = a->ceiling ? a->ceiling / a->p.ramp_steps : adaptive_floor(a);

	if (at_top(a) && a->depth == max_depth(&a->p) && a->size == a->p.max_size)
		return ADAPTIVE_HOLD;
	if (a->depth < max_depth(&a->p))
		a->depth++;
	a->size = a->size * 2 < a->p.max_size ? a->size * 2 : a->p.max_size;
	if (!at_top(a)) {	/* (at the top already when --limit auto:RATE is the floor) */
		a->rate += step;
		if (!a->ceiling || a->rate >= a->ceiling || (a->p.max && a->rate >= a->p.max))
			full_speed(a);
	}
	a->ups++;
	return ADAPTIVE_UP;
}

/* A quiet interval at full speed: the latency baseline follows the device. */
static void follow_latency(struct adaptive *a, double lat)
{
	if (!at_top(a) || lat <= 0 || !a->lat_base)
		return;		/* (no baseline yet: the warm-up sets it) */
	if (lat < a->lat_base)
		a->lat_base = lat;
	else
		a->lat_base += (lat - a->lat_base) / 16;	/* slowly: a drift, not a load */
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* A warm-up window's latency; after the last, the baseline is their median. */
static void warm_up(struct adaptive *a, double lat)
{
	unsigned n = a->p.warmup_ticks < ADAPTIVE_WARMUP_MAX ? a->p.warmup_ticks
							      : ADAPTIVE_WARMUP_MAX;

	if (a->ticks++ == 0)
		return;		/* the first window: a cache's or a throttle's burst */
	a->warm[a->ticks - 2] = lat;
	if (a->ticks - 1 < n)
		return;
	sort_items(a->warm, n, sizeof(*a->warm), cmp_double);
	a->lat_base = a->warm[n / 2];
}

/*
 * Nanoseconds per byte of service: the reads' latency per byte, divided
 * by the mean number of them in flight (Little: the sum of latencies over
 * the interval).  Our own queue (several reads at once, or a device at
 * its capacity) then does not count as a slower device: with reads in
 * flight all the time it is the interval's time per byte read.
 */
static double service_ns_per_byte(const struct adaptive_sample *s)
{
	double inflight = (double)s->lat_ns / (double)s->interval_ns;

	if (!s->bytes)
		return 0;
	return (double)s->lat_ns / (double)s->bytes / (inflight > 1 ? inflight : 1);
}

/* A window closes after a second even with fewer reads: at low rates the
 * reads do not queue behind each other, each one's latency is the
 * device's, and the signal must not wait a minute for eight of them. */
#define WINDOW_MAX_NS 1000000000ULL

/*
 * Add the interval to the latency window: once it is full, its ns per
 * byte and (*bw) its bandwidth; else 0.
 */
static double window_latency(struct adaptive *a, const struct adaptive_sample *s, double *bw)
{
	double lat;

	*bw = 0;
	if (s->probe)
		return 0;
	a->win.interval_ns += s->interval_ns;
	a->win.reads += s->reads;
	a->win.bytes += s->bytes;
	a->win.lat_ns += s->lat_ns;
	if (!a->win.reads || (a->win.reads < a->p.min_reads && a->win.interval_ns < WINDOW_MAX_NS))
		return 0;
	lat = service_ns_per_byte(&a->win);
	*bw = (double)a->win.bytes * 1e9 / (double)a->win.interval_ns;
	memset(&a->win, 0, sizeof(a->win));
	return lat;
}

/*
 * Slow start: an interval that shows the device quiet -- we could see
 * other stalls (a probe, or not too busy) and they are under half the
 * margin above the baseline a probe set; without any pressure source, a
 * full latency window (too_slow() judged it already).
 */
static bool start_quiet(const struct adaptive *a, const struct adaptive_sample *s,
			double foreign, bool blind, double lat)
{
	if (!s->have_psi)
		return lat > 0;
	return !blind && a->psi_base >= 0 && !above_base(a, foreign, a->p.psi_margin / 2);
}

/* One step of the slow start: the read size doubles, then the reads in flight. */
static enum adaptive_change start_step(struct adaptive *a)
{
	if (a->size < a->p.max_size)
		a->size = a->size * 2 < a->p.max_size ? a->size * 2 : a->p.max_size;
	else if (a->depth < max_depth(&a->p))
		a->depth = a->depth * 2 < max_depth(&a->p) ? a->depth * 2 : max_depth(&a->p);
	if (a->size == a->p.max_size && a->depth == max_depth(&a->p))
		a->starting = false;
	a->ups++;
	return ADAPTIVE_UP;
}

enum adaptive_change adaptive_tick(struct adaptive *a, const struct adaptive_sample *s)
{
	bool was_top = at_top(a);
	double win_bw, lat = window_latency(a, s, &win_bw);
	double bw = (double)s->bytes * 1e9 / (double)s->interval_ns;
	bool blind;
	double foreign = foreign_share(a, s, &blind);
	bool dev_load = dev_foreign(a, s);

	a->last_lat = lat;
	a->last_foreign = foreign;
	a->last_blind = blind;
	if (was_top && win_bw > a->ceiling)
		a->ceiling = win_bw;
	if (win_bw > a->best_bw)
		a->best_bw = win_bw;
	if (dev_load)
		return drop_to_floor(a);
	if (was_top && lat > 0 && a->ticks <= a->p.warmup_ticks) {
		warm_up(a, lat);
		if (!a->starting)
			return too_busy(a, foreign) ? back_off(a, 0, ADAPTIVE_CAUSE_PRESSURE)
						    : ADAPTIVE_HOLD;
	}
	if (too_busy(a, foreign))
		return back_off(a, bw, ADAPTIVE_CAUSE_PRESSURE);

	if (too_slow(a, lat))
		return back_off(a, win_bw, ADAPTIVE_CAUSE_LATENCY);
	if (!s->probe)
		follow_latency(a, lat);
	if (a->starting)
		return start_quiet(a, s, foreign, blind, lat) ? start_step(a) : ADAPTIVE_HOLD;
	/* After a back-off, ramp up only on evidence that its cause is gone. */
	if (a->quiet < a->p.quiet_ticks) {
		if (a->cause == ADAPTIVE_CAUSE_LATENCY && lat > 0)
			a->quiet = a->p.quiet_ticks;
		else if (a->cause == ADAPTIVE_CAUSE_DEVICE && s->have_dev)
			a->quiet++;	/* (no other load's requests: dev_load) */
		else if (a->cause == ADAPTIVE_CAUSE_PRESSURE && !blind &&
			 !above_base(a, foreign, a->p.psi_margin / 2))
			a->quiet++;	/* (between half the margin and it: neither) */
		if (a->quiet < a->p.quiet_ticks)
			return ADAPTIVE_HOLD;
	}
	return ramp_up(a);
}

bool adaptive_wants_probe(const struct adaptive *a)
{
	if (a->starting)
		return a->last_blind;
	return a->cause == ADAPTIVE_CAUSE_PRESSURE && a->quiet < a->p.quiet_ticks &&
	       a->last_blind && a->rate > adaptive_floor(a);
}

void adaptive_fit_queue(unsigned long long nr_requests, uint64_t req, unsigned *depth,
			uint64_t *size)
{
	uint64_t want = 2 * nr_requests * req;

	if (!nr_requests || !req || want >= (uint64_t)*depth * *size)
		return;
	if (*depth > 2)
		*depth = 2;
	*size = want / *depth / req * req;
	if (*size < req)
		*size = req;
}

int adaptive_parse_psi(const char *text, uint64_t *total)
{
	for (const char *line = text; line && *line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (strncmp(line, "some ", 5))
			continue;
		const char *t = strstr(line, " total=");
		const char *eol = strchr(line, '\n');
		char *end;

		if (!t || (eol && t > eol))
			return -EINVAL;
		errno = 0;
		unsigned long long v = strtoull(t + 7, &end, 10);

		if (errno || end == t + 7)
			return -EINVAL;
		*total = v;
		return 0;
	}
	return -EINVAL;
}

/* Fields 1..n of a stat file's text into v[0..n-1]; 0 or -EINVAL. */
static int diskstat_fields(const char *text, unsigned long long *v, int n)
{
	const char *p = text;

	for (int field = 0; field < n; field++) {
		char *end;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		v[field] = strtoull(p, &end, 10);
		if (errno)
			return -EINVAL;
		p = end;
	}
	return 0;
}

int adaptive_parse_diskstat(const char *text, uint64_t *ms)
{
	unsigned long long v[10];

	if (diskstat_fields(text, v, 10))
		return -EINVAL;
	*ms = v[9];
	return 0;
}

int adaptive_parse_diskstat_reqs(const char *text, uint64_t *ios, uint64_t *sectors)
{
	unsigned long long v[7];

	if (diskstat_fields(text, v, 7))
		return -EINVAL;
	*ios = v[0] + v[4];
	*sectors = v[2] + v[6];
	return 0;
}

int adaptive_parse_diskstat_ios(const char *text, uint64_t *ios)
{
	unsigned long long v[5];

	if (diskstat_fields(text, v, 5))
		return -EINVAL;
	*ios = v[0] + v[4];
	return 0;
}
