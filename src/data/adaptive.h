/*
 * adaptive: the controller behind --limit auto -- from samples of the data
 * scan's own reads and of the system's I/O pressure, the read rate the
 * scan may use next.  Pure: no clock, no files, no threads; the caller
 * (ratelimit.c) measures, calls adaptive_tick() once per interval and
 * applies the rate.  This module calls nothing else of fscrub's.
 *
 * Two signals, each against a baseline of its own:
 *  - latency: nanoseconds per byte of our reads over a window of at
 *    least min_reads reads (a few large reads per interval finish in
 *    bursts), bytes-weighted (a short read at an extent's end counts
 *    less than a full one) and divided by the mean number of our reads
 *    in flight (our own queue is not a slower device: with reads in
 *    flight all the time it is the time per byte read).  The baseline is
 *    the median of the warm-up windows at full speed, the first left out
 *    (a device's cache or a throttle's burst serves it faster than the
 *    device will); then it follows the device in quiet windows at full
 *    speed (at once down, slowly up).  A competing load makes our reads
 *    wait behind its requests.
 *  - pressure: the share of the interval in which some task was stalled
 *    on I/O (/proc/pressure/io "some" total, microseconds).  Our own reads
 *    stall us, so the part that is not ours is estimated two ways: while
 *    the caller holds the scan paused (a probe interval, nothing of ours
 *    in flight) all of it is foreign; while we read, what exceeds our own
 *    busy share (sum of our read latencies / interval) is.  The baseline
 *    is the lowest foreign share a probe has seen (other tenants), at
 *    most 10 %.  Without PSI (a kernel without CONFIG_PSI, psi=0, some
 *    containers) the caller may give the share of the interval in which
 *    the device had requests in flight instead (io_ticks of its stat
 *    file): the same estimates hold, for that device's other users.
 *
 * AIMD: when either signal is above its baseline (latency by lat_factor,
 * pressure by psi_margin) the rate halves, down to floor.  After a quiet
 * interval it grows by ceiling / ramp_steps; after a back-off, only once
 * quiet_ticks intervals could have seen its cause and did not (for
 * pressure a probe, or an interval in which we were busy less than
 * 1 - psi_margin of the time, with a foreign share under half the margin;
 * for latency one full window).  Reaching the
 * ceiling (the best window bandwidth measured at full speed) it becomes
 * unlimited again (or p.max: full speed is then that rate).  Under a
 * steady competing load the rate therefore stays at the floor; under a
 * steady capacity limit it saws between half that limit and the limit
 * plus one step.
 *
 * Reads in flight follow the rate: each back-off halves them (down to
 * one), each step up adds one, and at full speed all p.max_depth are
 * allowed.  A bandwidth cap alone leaves a deep queue of large reads in
 * front of a foreground job's every now and then; one read in flight
 * makes its wait at most one of ours.  So does the read size, where the
 * caller can split its reads (p.max_size): halved by each back-off down
 * to p.min_size (the device's largest request: one read is then one
 * request), doubled by each step up, p.max_size at full speed.
 *
 * Slow start (as TCP's): the scan may begin beside a foreground job that
 * already runs, and a full-speed start puts p.max_depth large reads in
 * front of it before anything was measured.  So it starts with one read
 * in flight of p.min_size, unpaced, and grows -- the read size doubling
 * up to p.max_size, then the reads in flight doubling up to p.max_depth
 * -- one step per interval that shows the device quiet: a probe (or an
 * interval we were not too busy to see other stalls in) with the foreign
 * share under half the margin above its baseline, and the latency not
 * above its own.  While starting it asks for a probe after every interval
 * too busy to tell (adaptive_wants_probe); with nothing of ours queued
 * but one small read, the probe's settle is short.  The first back-off
 * ends the slow start; so does reaching full speed.
 *
 * A third signal, where the caller can count the device's requests:
 * the requests it completed (reads and writes, its stat file) minus the
 * requests of our own reads that completed.  What remains is another
 * load's -- visible at full speed too, where neither PSI nor the busy
 * time can tell another load from our reads (the device is busy with
 * ours all the time) and our latency rises by less than lat_factor (a
 * device that alternates between its waiters).  A device counts a read's
 * requests as they end, we count them when the whole read has ended: the
 * residual (theirs plus the finished part of ours in flight) is exact
 * only to our requests in flight.  So the controller keeps the residual
 * of the last ADAPTIVE_DEV_WINDOW intervals and takes, over each span of
 * k of them, what it grew by less our requests in flight now -- a lower
 * bound of another load's requests, never an overestimate; above
 * p.foreign_ios x k it is another load, and the scan drops to the floor
 * at once (one read of p.min_size), not by halvings.  At the floor our
 * requests in flight are one, and a job's every request shows; at full
 * speed (four reads of 16 requests in flight, say) a job shows once its
 * requests outnumber ours in flight, within a few intervals.  It ramps up
 * after quiet_ticks intervals without that evidence.  The filesystem's
 * own journal and metadata writes count as foreign too: p.foreign_ios is
 * above them.
 *
 * The same counts tell another load's small requests without waiting:
 * where the caller also gives the sectors the device completed, each of
 * our requests but the last of a read fills p.min_size (the device's
 * largest request), so the requests beyond what those sectors could fill
 * -- less one for each read of ours that may have ended in a short one
 * (its length not a multiple of p.min_size, or in flight) -- are surely
 * another load's.  A job's 4 KiB reads
 * show so in the interval they complete, at full speed too, where the
 * residual above needs our requests in flight outnumbered first (six
 * intervals beside 64 of ours).  A load of large requests shows in the
 * residual only.
 *
 * The floor is relative: p.floor_share of the best bandwidth measured
 * (any window, slow start included), never under p.floor: on a 20 MB/s
 * disk 1 MiB/s is 5 % of its time, on a 2 GB/s one 0.05 %.  Under
 * another load's requests it is lower still (adaptive_load_floor): one
 * read of p.min_size, one request, for every 1 / p.load_share of the
 * other load's requests (a lower bound of their rate over the last
 * intervals), never under p.floor nor above the floor above.  A job that
 * waits for each read before the next (iodepth 1) then finds one of ours
 * ahead of at most that share of its reads; its p99 is its slowest 1 %,
 * and each read that waits behind ours can join them.
 */
#ifndef FSCRUB_ADAPTIVE_H
#define FSCRUB_ADAPTIVE_H

#include <stdbool.h>
#include <stdint.h>

/* Most warm-up windows kept (warmup_ticks is at most this). */
#define ADAPTIVE_WARMUP_MAX 16
/* Intervals of the device's residual requests kept (see above): 10 of
 * 100 ms, time for a job's requests to outnumber ours in flight at full
 * speed. */
#define ADAPTIVE_DEV_WINDOW 10

struct adaptive_params {
	double max;		/* bytes/s never gone above; 0 = none (unlimited) */
	double floor;		/* bytes/s never gone below (see floor_share) */
	double floor_share;	/* ... nor below this share of the best bandwidth */
	double lat_factor;	/* back off when latency > lat_factor x baseline */
	double psi_margin;	/* ... or the foreign stall share > baseline + this */
	unsigned warmup_ticks;	/* latency windows at full speed that set the baseline */
	unsigned ramp_steps;	/* quiet intervals from 0 to the ceiling */
	unsigned min_reads;	/* latency is judged over at least this many reads */
	unsigned quiet_ticks;	/* quiet intervals after a back-off before ramping */
	unsigned max_depth;	/* reads in flight at full speed; 0 counts as 1 */
	uint64_t max_size;	/* read size at full speed; 0: the caller's reads
				 * cannot be split (size stays 0) */
	uint64_t min_size;	/* smallest read size (<= max_size; 0 = max_size) */
	bool slow_start;	/* begin at one read of min_size (see above) */
	double foreign_ios;	/* another load's requests per interval above
				 * which the scan drops to the floor */
	double load_share;	/* under another load, our requests at most this
				 * share of its (see above); 0: no such floor */
};

/* The defaults: see adaptive.c for why each value. */
extern const struct adaptive_params adaptive_defaults;

/* What the caller measured over one interval. */
struct adaptive_sample {
	uint64_t interval_ns;	/* > 0 */
	uint64_t reads;		/* reads completed in the interval */
	uint64_t bytes;		/* bytes they read */
	uint64_t lat_ns;	/* sum of their latencies */
	uint64_t busy_ns;	/* our reads' time in flight within the interval,
				 * summed over them (reads that span intervals
				 * counted in each); 0: lat_ns stands for it */
	bool have_psi;		/* psi_stall_us is valid */
	uint64_t psi_stall_us;	/* delta of "some total" over the interval (or
				 * of the device's busy time, see above) */
	bool probe;		/* the scan was paused (nothing of ours in flight) */
	bool have_dev;		/* the three below are valid */
	uint64_t dev_ios;	/* requests the device completed in the interval
				 * (reads and writes, anyone's) */
	uint64_t our_ios;	/* requests of our reads that completed in it */
	uint64_t our_ios_inflight;	/* requests of our reads in flight at its end */
	bool have_sectors;	/* the two below are valid (with have_dev) */
	uint64_t dev_sectors;	/* 512-byte sectors the device completed in it */
	uint64_t our_short;	/* requests of ours in it that may be short of
				 * p.min_size: reads that ended in it with a length
				 * not a multiple of it (or failed), and reads in
				 * flight at its end */
};

enum adaptive_change {
	ADAPTIVE_HOLD,
	ADAPTIVE_DOWN,		/* latency or pressure above baseline: halved */
	ADAPTIVE_UP,		/* quiet: one step up (or unlimited again) */
};

/* Why the last DOWN happened (for -v). */
enum adaptive_cause {
	ADAPTIVE_CAUSE_NONE, ADAPTIVE_CAUSE_LATENCY, ADAPTIVE_CAUSE_PRESSURE,
	ADAPTIVE_CAUSE_DEVICE,	/* another load's requests on the device */
};

struct adaptive {
	struct adaptive_params p;
	double rate;		/* bytes/s; 0 = unlimited; p.max = full speed */
	unsigned depth;		/* reads in flight allowed, 1..p.max_depth (p.max_depth
				 * whenever the rate is full speed, slow start aside) */
	uint64_t size;		/* largest read now, min_size..max_size (0 if
				 * p.max_size is 0) */
	bool starting;		/* in the slow start */
	double best_bw;		/* best window bandwidth seen, any rate */
	double ceiling;		/* best full-speed bandwidth; 0 = not known yet */
	double lat_base;	/* ns per byte; 0 = not known yet */
	double psi_base;	/* foreign stall share, 0..1; < 0 = not known yet */
	unsigned ticks;		/* latency windows seen at full speed */
	double warm[ADAPTIVE_WARMUP_MAX];	/* their latencies, for the median */
	struct adaptive_sample win;	/* reads not judged yet (< min_reads) */
	enum adaptive_cause cause;
	unsigned quiet;		/* intervals since the last back-off that showed
				 * its cause gone (up to p.quiet_ticks) */
	double last_lat;	/* last interval's ns per byte (0: no reads) */
	double last_foreign;	/* last foreign stall share estimate (-1: none) */
	bool last_blind;	/* the last interval could not see foreign stalls */
	int64_t resid;		/* device requests less ours, summed (see above) */
	int64_t resid_hist[ADAPTIVE_DEV_WINDOW];	/* resid after the last intervals,
							 * the newest last */
	unsigned nr_hist;
	double last_dev_foreign;	/* another load's requests per interval, at
					 * least (the last interval's evidence) */
	uint64_t dev_ns;		/* intervals with device counts, summed */
	uint64_t ns_hist[ADAPTIVE_DEV_WINDOW];	/* dev_ns beside each resid_hist */
	double load_rate;		/* another load's requests per second, at
					 * least (for adaptive_load_floor) */
	unsigned long long downs, ups;
	unsigned long long dev_downs;	/* downs for another load's requests */
	unsigned long long lat_downs;	/* downs for our read latency (the rest:
					 * for PSI or the device's busy time) */
};

void adaptive_init(struct adaptive *a, const struct adaptive_params *p);
/* Feed one interval; a->rate and a->depth are for the next one. */
enum adaptive_change adaptive_tick(struct adaptive *a, const struct adaptive_sample *s);
/*
 * Whether the next interval should be a probe out of turn: backed off for
 * pressure, or in the slow start, and too busy to see whether it is there.
 */
bool adaptive_wants_probe(const struct adaptive *a);
/* The rate never gone below now: p.floor_share of best_bw, at least p.floor
 * (at most p.max when there is one). */
double adaptive_floor(const struct adaptive *a);
/* The rate under another load's requests: p.load_share of a->load_rate
 * requests of p.min_size a second, between p.floor and adaptive_floor(). */
double adaptive_load_floor(const struct adaptive *a);

/*
 * The reads at full speed on a device that holds few requests at a time:
 * no more of ours in flight than keep it busy.  Requests beyond what it
 * holds (nr_requests: its tags, or its scheduler's) add no bandwidth, and
 * a foreground job that arrives waits behind them until the scan has seen
 * it and they have drained -- on a device of one tag, four reads of 16
 * requests each ahead of its reads for a quarter of a second.  So at most
 * 2 x nr_requests requests of req bytes (one set served while the other
 * is refilled), in at most two reads (one ends while the other is
 * served): *depth and *size (bytes per read, a multiple of req, at least
 * req) lowered to that; unchanged where *depth x *size is less already,
 * or nr_requests is 0 (not known).  Most disks hold 32 or more.
 */
void adaptive_fit_queue(unsigned long long nr_requests, uint64_t req, unsigned *depth,
			uint64_t *size);

/*
 * The "some" line's total= of /proc/pressure/io's text (NUL-terminated).
 * 0 and *total, or -EINVAL if there is none.
 */
int adaptive_parse_psi(const char *text, uint64_t *total);
/*
 * The requests a block device completed, reads plus writes (the 1st and
 * 5th fields of its /sys/dev/block/M:m/stat text).  0 and *ios, or -EINVAL.
 */
int adaptive_parse_diskstat_ios(const char *text, uint64_t *ios);
/*
 * The same, and the sectors they moved (3rd and 7th fields).  0, *ios and
 * *sectors, or -EINVAL.
 */
int adaptive_parse_diskstat_reqs(const char *text, uint64_t *ios, uint64_t *sectors);
/*
 * The milliseconds a block device had requests in flight (io_ticks, the
 * 10th field) of its /sys/dev/block/M:m/stat text.  0 and *ms, or -EINVAL.
 */
int adaptive_parse_diskstat(const char *text, uint64_t *ms);

#endif
