/*
 * Unit tests for adaptive: the --limit auto controller driven by
 * synthetic traces of read latency and I/O pressure.
 *
 * The model device: FULL bytes/s at full speed, NS_PER_BYTE of latency
 * while idle.  A competing load multiplies our latency (it queues ahead
 * of us) and/or stalls other tasks for a share of each interval.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "data/adaptive.h"

#define TICK	250000000ULL		/* ns */
#define FULL	(400.0 * (1 << 20))	/* bytes/s at full speed */
static double model_full = FULL;	/* the device's full speed now */
#define NS_PER_BYTE 2.5

/* The defaults without the slow start: the traces below begin at full
 * speed (the slow start has tests of its own). */
static struct adaptive_params plain;

/* Reads in flight at once: each one's latency includes the others'. */
static double model_depth = 1;

/*
 * One interval of the model: we read min(rate, capacity) bytes at
 * lat_mult times the idle latency; other tasks stall foreign (0..1) of
 * the interval.  probe: the scan paused, read nothing.
 */
static enum adaptive_change step(struct adaptive *a, double lat_mult, double foreign,
				 bool probe)
{
	double cap = model_full / lat_mult;
	double rate = a->rate && a->rate < cap ? a->rate : cap;
	uint64_t bytes = probe ? 0 : (uint64_t)(rate * TICK / 1e9);
	struct adaptive_sample s = {
		.interval_ns = TICK, .bytes = bytes, .reads = bytes ? (bytes >> 20) + 1 : 0,
		.lat_ns = (uint64_t)((double)bytes * NS_PER_BYTE * lat_mult * model_depth),
		.have_psi = true, .probe = probe,
	};
	/* "some" stall: ours (busy share) and theirs overlap at random. */
	double busy = (double)s.lat_ns / TICK > 1 ? 1 : (double)s.lat_ns / TICK;
	double some = busy + foreign - busy * foreign;

	s.psi_stall_us = (uint64_t)(some * TICK / 1000);
	return adaptive_tick(a, &s);
}

/* Warm up at full speed, idle, with one probe: baselines are known. */
static void warm(struct adaptive *a)
{
	adaptive_init(a, &plain);
	for (unsigned i = 0; i <= plain.warmup_ticks; i++)
		assert_int_equal(step(a, 1, 0, false), ADAPTIVE_HOLD);
	assert_int_equal(step(a, 1, 0.02, true), ADAPTIVE_HOLD);
	assert_true(a->rate == 0);
	assert_true(a->ceiling > model_full * 0.99 && a->ceiling < model_full * 1.01);
}

static void test_quiet_stays_unlimited(void **state)
{
	struct adaptive a;

	(void)state;
	warm(&a);
	for (int i = 0; i < 200; i++)
		step(&a, 1.3, 0.05, i % 8 == 0);	/* noise: 1.3x, 5 % others */
	assert_true(a.rate == 0);
	assert_int_equal(a.downs, 0);
}

static void test_latency_rise_backs_off(void **state)
{
	struct adaptive a;

	(void)state;
	warm(&a);
	assert_int_equal(step(&a, 4, 0, false), ADAPTIVE_DOWN);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_LATENCY);
	/* halved from what we really read at 4x latency: FULL / 4 / 2 */
	assert_true(a.rate > FULL / 8 * 0.99 && a.rate < FULL / 8 * 1.01);
	for (int i = 0; i < 20; i++)
		step(&a, 4, 0, false);
	assert_true(a.rate == adaptive_floor(&a));		/* the floor holds */
	assert_int_equal(step(&a, 4, 0, false), ADAPTIVE_HOLD);
}

static void test_pressure_at_full_speed_seen_by_probe(void **state)
{
	struct adaptive a;

	(void)state;
	warm(&a);
	/* At full speed we are busy all the time: a running interval cannot
	 * tell a foreign stall from ours... */
	assert_int_equal(step(&a, 1, 0.9, false), ADAPTIVE_HOLD);
	assert_true(a.rate == 0);
	/* ... the probe can. */
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_DOWN);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_PRESSURE);
	/* Reduced, running intervals see it too and keep backing off. */
	for (int i = 0; i < 12; i++)
		step(&a, 1, 0.9, false);
	assert_true(a.rate == adaptive_floor(&a));
}

static void test_recovers_when_quiet(void **state)
{
	struct adaptive a;
	int i;

	(void)state;
	warm(&a);
	for (i = 0; i < 12; i++)
		step(&a, 1, 0.9, i % 8 == 0);
	assert_true(a.rate == adaptive_floor(&a));
	/* A pause: quiet_ticks quiet intervals in a row first... */
	for (i = 1; i < (int)plain.quiet_ticks; i++)
		assert_int_equal(step(&a, 1, 0.02, false), ADAPTIVE_HOLD);
	/* ... then additive: one ceiling / ramp_steps per quiet interval. */
	for (i = 0; i < 50 && a.rate; i++) {
		double before = a.rate;

		assert_int_equal(step(&a, 1, 0.02, false), ADAPTIVE_UP);
		assert_true(a.rate == 0 || a.rate - before < a.ceiling / plain.ramp_steps * 1.01);
	}
	assert_true(a.rate == 0);
	assert_int_equal(i, plain.ramp_steps);
}

static void test_pressure_baseline_is_other_tenants(void **state)
{
	struct adaptive a;

	(void)state;
	adaptive_init(&a, &plain);
	for (unsigned i = 0; i <= plain.warmup_ticks; i++)
		step(&a, 1, 0.08, false);
	step(&a, 1, 0.08, true);	/* 8 % of others, always there */
	for (int i = 0; i < 100; i++)
		step(&a, 1, 0.08 + (i % 3) * 0.07, i % 8 == 0);
	assert_true(a.rate == 0);
	assert_int_equal(step(&a, 1, 0.95, true), ADAPTIVE_DOWN);
}

/*
 * Four reads in flight: at half speed our latencies still add up past the
 * interval, so running intervals cannot see a foreign stall; the rate
 * must not ramp up again between probes, and reaches the floor.
 */
static void test_deep_queue_does_not_ramp_blindly(void **state)
{
	struct adaptive a;
	int i;

	(void)state;
	model_depth = 4;
	warm(&a);
	for (i = 0; i < 60; i++)
		step(&a, 1, 0.9, i % 10 == 0);
	model_depth = 1;
	assert_true(a.rate == adaptive_floor(&a));
	assert_int_equal(a.ups, 0);
	/* and recovers once a probe finds the device quiet */
	step(&a, 1, 0.02, true);
	for (i = 0; i < 20; i++)
		step(&a, 1, 0.02, false);
	assert_true(a.rate == 0);
}

/* A foreground job whose stall share dips for an interval now and then. */
static void test_dips_do_not_ramp(void **state)
{
	struct adaptive a;
	int i;

	(void)state;
	warm(&a);
	for (i = 0; i < 200; i++)
		step(&a, 1, i % 3 == 2 ? 0.05 : i % 3 == 1 ? 0.15 : 0.5, i % 10 == 0);
	assert_true(a.rate == adaptive_floor(&a));
	assert_int_equal(a.ups, 0);
}

/* A load there from the start is not taken for the baseline. */
static void test_load_from_the_start(void **state)
{
	struct adaptive a;

	(void)state;
	adaptive_init(&a, &plain);
	for (unsigned i = 0; i <= plain.warmup_ticks; i++)
		step(&a, 1, 0.9, false);
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_DOWN);
	for (int i = 0; i < 20; i++)
		step(&a, 1, 0.9, i % 8 == 0);
	assert_true(a.rate == adaptive_floor(&a));
}

/* With a maximum (--limit auto:RATE): full speed is that rate. */
static void test_max(void **state)
{
	struct adaptive_params p = plain;
	struct adaptive a;
	int i;

	(void)state;
	p.max = FULL / 8;
	adaptive_init(&a, &p);
	assert_true(a.rate == p.max);
	for (i = 0; i < 8; i++)
		step(&a, 1, 0.02, i == 4);
	assert_true(a.rate == p.max);
	assert_true(a.ceiling <= p.max * 1.01);
	for (i = 0; i < 10; i++)
		step(&a, 1, 0.9, i % 8 == 0);
	assert_true(a.rate == adaptive_floor(&a));
	for (i = 0; i < 20; i++)
		step(&a, 1, 0.02, false);
	assert_true(a.rate == p.max);		/* back, and not above */
}

/*
 * A device that slows down past a capacity: our latency rises in
 * proportion to how far the rate exceeds CAP.  AIMD saws between half
 * the capacity and the capacity plus one step, never to the floor and
 * never unlimited.
 */
static void test_bounded_oscillation(void **state)
{
	const double cap = FULL / 4;
	struct adaptive a;
	double lo = 1e30, hi = 0;

	(void)state;
	warm(&a);
	for (int i = 0; i < 400; i++) {
		double r = a.rate ? a.rate : FULL;
		double mult = r > cap ? 3.5 * r / cap : 1;

		step(&a, mult, 0, false);
		if (i > 40) {
			double now = a.rate ? a.rate : FULL;

			lo = now < lo ? now : lo;
			hi = now > hi ? now : hi;
		}
	}
	assert_true(lo >= cap / 2 * 0.99);
	assert_true(hi <= cap + a.ceiling / plain.ramp_steps * 1.01);
	assert_true(a.downs > 5 && a.downs < 400 / 2);
}

/* A device that serves the first reads from a cache, 4x faster. */
static void test_burst_at_start(void **state)
{
	struct adaptive a;

	(void)state;
	adaptive_init(&a, &plain);
	step(&a, 0.25, 0, false);
	for (int i = 0; i < 100; i++)
		step(&a, i % 2 ? 1.4 : 1, 0.02, i % 10 == 5);
	assert_int_equal(a.downs, 0);
	assert_true(a.rate == 0);
}

/* No PSI: the latency signal alone still works. */
static void test_without_psi(void **state)
{
	struct adaptive a;
	struct adaptive_sample s = { .interval_ns = TICK, .bytes = 100 << 20, .reads = 100,
				     .lat_ns = (uint64_t)(100 << 20) * 2 };

	(void)state;
	adaptive_init(&a, &plain);
	for (unsigned i = 0; i <= plain.warmup_ticks; i++)
		assert_int_equal(adaptive_tick(&a, &s), ADAPTIVE_HOLD);
	assert_int_equal(adaptive_tick(&a, &s), ADAPTIVE_HOLD);
	s.bytes /= 10;			/* a tenth of the bytes, each 20x slower */
	s.reads /= 10;
	s.lat_ns *= 2;
	assert_int_equal(adaptive_tick(&a, &s), ADAPTIVE_DOWN);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_LATENCY);
}

/* Warm up with p (max_depth reads in flight at full speed), one probe. */
static void warm_depth(struct adaptive *a, const struct adaptive_params *p)
{
	adaptive_init(a, p);
	assert_int_equal(a->depth, p->max_depth);
	for (unsigned i = 0; i <= p->warmup_ticks; i++)
		step(a, 1, 0, false);
	step(a, 1, 0.02, true);
	assert_true(a->rate == p->max);
}

/*
 * Reads in flight back off with the rate, to one, and come back as it
 * ramps up: four at full speed, two after the first back-off, one after
 * the second and for as long as the load stays; after the pause, one
 * more per step up, all four once the rate is unlimited again.
 */
static void test_depth_follows_the_rate(void **state)
{
	struct adaptive_params p = plain;
	struct adaptive a;
	unsigned prev;
	int i;

	(void)state;
	p.max_depth = 4;
	warm_depth(&a, &p);
	assert_int_equal(a.depth, 4);
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_DOWN);
	assert_int_equal(a.depth, 2);
	/* Two reads in flight at half speed: too busy to see the load, a probe
	 * out of turn does (ratelimit.c asks for it). */
	model_depth = a.depth;
	assert_int_equal(step(&a, 1, 0.9, false), ADAPTIVE_HOLD);
	assert_true(adaptive_wants_probe(&a));
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_DOWN);
	assert_int_equal(a.depth, 1);
	for (i = 0; i < 40; i++) {
		model_depth = a.depth;
		step(&a, 1, 0.9, i % 10 == 0 || adaptive_wants_probe(&a));
		assert_int_equal(a.depth, 1);
	}
	assert_true(a.rate == adaptive_floor(&a));
	/* Paced by the bucket below full speed, our reads do not overlap. */
	model_depth = 1;
	for (i = 0, prev = a.depth; i < 40 && a.rate; i++) {
		step(&a, 1, 0.02, false);
		assert_true(a.depth >= prev && a.depth <= 4);
		assert_true(a.rate == 0 || a.depth <= prev + 1);
		prev = a.depth;
	}
	model_depth = 1;
	assert_true(a.rate == 0);
	assert_int_equal(a.depth, 4);
}

/* A latency rise halves the reads in flight too. */
static void test_depth_backs_off_on_latency(void **state)
{
	struct adaptive_params p = plain;
	struct adaptive a;

	(void)state;
	p.max_depth = 4;
	warm_depth(&a, &p);
	assert_int_equal(step(&a, 4, 0, false), ADAPTIVE_DOWN);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_LATENCY);
	assert_int_equal(a.depth, 2);
}

/*
 * auto:RATE at the floor (RATE = p.floor): the rate cannot go lower,
 * but the reads in flight still can; then it holds.
 */
static void test_depth_backs_off_at_the_floor(void **state)
{
	struct adaptive_params p = plain;
	struct adaptive a;

	(void)state;
	p.max_depth = 4;
	p.max = p.floor;
	warm_depth(&a, &p);
	assert_true(a.rate == adaptive_floor(&a));
	assert_int_equal(a.depth, 4);
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_DOWN);
	assert_int_equal(a.depth, 2);
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_DOWN);
	assert_int_equal(a.depth, 1);
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_HOLD);
	assert_true(a.rate == adaptive_floor(&a));
	assert_int_equal(a.downs, 2);
	/* and the load gone, one more read in flight per quiet interval */
	for (int i = 0; i < 10; i++)
		step(&a, 1, 0.02, i == 0);
	assert_true(a.rate == adaptive_floor(&a));
	assert_int_equal(a.depth, 4);
}

/* Without a depth of its own (the per-file reader) it stays one. */
static void test_depth_one_by_default(void **state)
{
	struct adaptive a;

	(void)state;
	warm(&a);
	assert_int_equal(a.depth, 1);
	for (int i = 0; i < 30; i++) {
		step(&a, 1, i < 15 ? 0.9 : 0.02, i % 10 == 0);
		assert_int_equal(a.depth, 1);
	}
}

/*
 * A slow device (16 MiB/s): our one 8 MiB read in flight takes 500 ms,
 * five intervals, and keeps it busy all that time, with no other load.
 * The four intervals in which the read does not end must not take the
 * device's busy time for another load's: busy_ns counts the read there.
 */
static enum adaptive_change slow_tick(struct adaptive *a, int i, bool busy_ns)
{
	bool probe = i % 10 == 9;
	struct adaptive_sample s = { .interval_ns = 100000000, .have_psi = true,
				     .probe = probe };

	if (!probe) {
		s.reads = i % 5 == 4;
		s.bytes = s.reads * (8 << 20);
		s.lat_ns = s.reads * 500000000ULL;
		s.busy_ns = busy_ns ? 100000000 : 0;
		s.psi_stall_us = 100000;	/* the device's busy time: ours */
	}
	return adaptive_tick(a, &s);
}

static void test_read_spanning_intervals_is_ours(void **state)
{
	struct adaptive a;
	int i;

	(void)state;
	adaptive_init(&a, &plain);
	for (i = 0; i < 200; i++)
		assert_int_not_equal(slow_tick(&a, i, true), ADAPTIVE_DOWN);
	assert_true(a.lat_base > 0 && a.psi_base == 0);
	assert_true(a.rate == 0);
	/* without busy_ns (the latencies of the reads that ended stand for
	 * it) the same trace backs off at the first interval without an end */
	adaptive_init(&a, &plain);
	for (i = 0; i < 200 && !a.downs; i++)
		slow_tick(&a, i, false);
	assert_int_equal(a.downs, 1);
}

/* --limit auto on the device reader: four reads in flight of up to 8 MiB,
 * split down to 64 KiB (the device's largest request). */
static struct adaptive_params split_params(void)
{
	struct adaptive_params p = adaptive_defaults;

	p.max_depth = 4;
	p.max_size = 8 << 20;
	p.min_size = 64 << 10;
	return p;
}

/*
 * Slow start on a quiet device: one read of 64 KiB at first; each interval
 * too busy to see other stalls asks for a probe, each quiet probe is one
 * step -- the size doubles to 8 MiB (7 steps), then the reads in flight
 * to 4 (2 steps) -- and never more than one at a time.
 */
static void test_slow_start_on_a_quiet_device(void **state)
{
	struct adaptive_params p = split_params();
	struct adaptive a;
	int steps = 0;

	(void)state;
	adaptive_init(&a, &p);
	assert_true(a.starting);
	assert_int_equal(a.depth, 1);
	assert_true(a.size == 64 << 10);
	for (int i = 0; i < 40 && a.starting; i++) {
		uint64_t size = a.size;
		unsigned depth = a.depth;

		assert_int_equal(step(&a, 1, 0, false), ADAPTIVE_HOLD);	/* busy: blind */
		assert_true(adaptive_wants_probe(&a));
		assert_int_equal(step(&a, 1, 0.02, true), ADAPTIVE_UP);
		steps++;
		assert_true(a.size == (size < p.max_size ? size * 2 : size));
		assert_true(a.depth == (size < p.max_size ? depth : depth * 2));
		assert_true(a.depth == 1 || a.size == p.max_size);	/* size first */
	}
	assert_false(a.starting);
	assert_int_equal(steps, 9);
	assert_true(a.rate == 0 && a.depth == 4 && a.size == p.max_size);
	assert_int_equal(a.downs, 0);
	assert_false(adaptive_wants_probe(&a));
}

/*
 * Slow start beside a job that already runs: the first probe sees it and
 * backs off; the scan never had more than one 64 KiB read in flight, and
 * it goes on down to the floor with that.
 */
static void test_slow_start_meets_a_running_job(void **state)
{
	struct adaptive_params p = split_params();
	struct adaptive a;

	(void)state;
	adaptive_init(&a, &p);
	assert_int_equal(step(&a, 1, 0.9, false), ADAPTIVE_HOLD);
	assert_true(adaptive_wants_probe(&a));
	assert_int_equal(step(&a, 1, 0.9, true), ADAPTIVE_DOWN);
	assert_false(a.starting);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_PRESSURE);
	for (int i = 0; i < 40; i++) {
		step(&a, 1, 0.9, i % 10 == 0 || adaptive_wants_probe(&a));
		assert_int_equal(a.depth, 1);
		assert_true(a.size == p.min_size);
	}
	assert_true(a.rate == adaptive_floor(&a));
	assert_int_equal(a.ups, 0);
	/* the job gone: back to full speed, all four reads of 8 MiB */
	for (int i = 0; i < 30 && a.rate; i++)
		step(&a, 1, 0.02, i == 0);
	assert_true(a.rate == 0 && a.depth == 4 && a.size == p.max_size);
}

/* A latency rise during the slow start ends it too (once there is a baseline). */
static void test_slow_start_latency(void **state)
{
	struct adaptive_params p = split_params();
	struct adaptive a;
	int i;

	(void)state;
	p.quiet_ticks = 100;		/* (no ramp-up after the back-off here) */
	adaptive_init(&a, &p);
	for (i = 0; i < 3; i++) {
		step(&a, 1, 0, false);
		step(&a, 1, 0.02, true);
	}
	for (i = 0; i < 6 && !a.lat_base; i++)
		step(&a, 1, 0, false);
	assert_true(a.lat_base > 0 && a.starting && a.downs == 0);
	assert_int_equal(step(&a, 4, 0, false), ADAPTIVE_DOWN);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_LATENCY);
	assert_false(a.starting);
	assert_int_equal(a.depth, 1);
}

/*
 * The floor is 1 % of the best bandwidth measured, not a fixed 1 MiB/s:
 * 4 MiB/s on a 400 MiB/s device, 164 KiB/s on a 16 MiB/s one (where
 * 1 MiB/s was 6 % of its time), and never under 64 KiB/s.
 */
static double floor_after_load(double full)
{
	struct adaptive a;

	model_full = full;
	warm(&a);
	for (int i = 0; i < 40; i++)
		step(&a, 1, 0.9, i % 10 == 0);
	model_full = FULL;
	return a.rate;
}

static void test_floor_is_relative(void **state)
{
	(void)state;
	assert_true(floor_after_load(FULL) > FULL / 100 * 0.99);
	assert_true(floor_after_load(FULL) < FULL / 100 * 1.01);
	assert_true(floor_after_load(16 << 20) < (16 << 20) / 100 * 1.01);
	assert_true(floor_after_load(16 << 20) > (16 << 20) / 100 * 0.99);
	assert_true(floor_after_load(1 << 20) == 64 << 10);
}

static void test_parse_psi(void **state)
{
	uint64_t t = 0;

	(void)state;
	assert_int_equal(adaptive_parse_psi("some avg10=9.56 avg60=5.06 avg300=4.88 total=609341640\n"
					    "full avg10=2.89 avg60=2.16 avg300=1.93 total=263146900\n",
					    &t), 0);
	assert_true(t == 609341640ULL);
	assert_int_equal(adaptive_parse_psi("full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
					    "some avg10=0.00 avg60=0.00 avg300=0.00 total=7", &t), 0);
	assert_true(t == 7);
	assert_int_equal(adaptive_parse_psi("", &t), -22);
	assert_int_equal(adaptive_parse_psi("some avg10=1.00\nfull total=3\n", &t), -22);
	assert_int_equal(adaptive_parse_psi("some total=x\n", &t), -22);
}

static void test_parse_diskstat(void **state)
{
	uint64_t ms = 0;

	(void)state;
	/* 17 fields (6.x), io_ticks is the 10th */
	assert_int_equal(adaptive_parse_diskstat("    1620        0   138394      486        0        0"
						 "        0        0        0      812      486"
						 "        0        0        0        0        0"
						 "        0\n", &ms), 0);
	assert_true(ms == 812);
	assert_int_equal(adaptive_parse_diskstat("1 2 3 4 5 6 7 8 9 10 11\n", &ms), 0);
	assert_true(ms == 10);
	assert_int_equal(adaptive_parse_diskstat("1 2 3 4 5 6 7 8 9\n", &ms), -22);
	assert_int_equal(adaptive_parse_diskstat("", &ms), -22);
	assert_int_equal(adaptive_parse_diskstat("1 2 3 x 5 6 7 8 9 10 11", &ms), -22);
	assert_true(ms == 10);		/* not clobbered on failure */
}

/*
 * The device's request counts (adaptive.h's third signal).  The model
 * device serves our reads' requests (DEV_REQ bytes each) in order: the
 * device counts each request as it ends, we count a read's requests when
 * its last one has ended.  job: another load's requests in the interval.
 */
#define DEV_REQ (64 << 10)
static uint64_t dev_pending;	/* our requests ended, of reads not ended yet */
/* Give the sectors too (the size signal); the job's requests are JOB_REQ bytes. */
static bool dev_sectors;
static uint64_t job_req = 4096;

static enum adaptive_change dev_step(struct adaptive *a, double lat_mult, uint64_t job)
{
	double rate = a->rate && a->rate < FULL / lat_mult ? a->rate : FULL / lat_mult;
	uint64_t bytes = (uint64_t)(rate * TICK / 1e9), per_read = a->size / DEV_REQ;
	uint64_t reqs = bytes / DEV_REQ + (bytes % DEV_REQ != 0), ours;

	dev_pending += reqs;
	ours = dev_pending / per_read * per_read;	/* (reads of the size now) */
	dev_pending -= ours;

	struct adaptive_sample s = {
		.interval_ns = TICK, .bytes = ours * DEV_REQ, .reads = ours / per_read,
		.lat_ns = (uint64_t)((double)ours * DEV_REQ * NS_PER_BYTE * lat_mult),
		.have_psi = true, .psi_stall_us = TICK / 1000,	/* busy all along: blind */
		.have_dev = true, .dev_ios = reqs + job, .our_ios = ours,
		.our_ios_inflight = a->depth * per_read,
		/* our reads are whole requests: only those in flight may be short */
		.have_sectors = dev_sectors, .our_short = a->depth,
		.dev_sectors = (reqs * DEV_REQ + job * job_req) / 512,
	};
	return adaptive_tick(a, &s);
}

static void dev_params(struct adaptive_params *p)
{
	*p = plain;
	p->max_depth = 4;
	p->max_size = 1 << 20;
	p->min_size = DEV_REQ;
	dev_pending = 0;
	dev_sectors = false;
	job_req = 4096;
}

/*
 * A job that arrives while the scan reads at full speed: our latency
 * rises 1.4x only and the scan is too busy to see PSI stalls, no probe
 * comes -- the job's requests on the device send the scan to the floor
 * (one read of one request) within a few intervals, it stays there
 * while the job runs, and goes back to full speed once the job stops.
 */
static void test_device_requests_at_full_speed(void **state)
{
	struct adaptive_params p;
	struct adaptive a;
	int i;

	(void)state;
	dev_params(&p);
	adaptive_init(&a, &p);
	for (i = 0; i < 40; i++)	/* quiet: our own requests are no load */
		assert_int_equal(dev_step(&a, 1, 0), ADAPTIVE_HOLD);
	assert_true(a.rate == 0);
	for (i = 0; i < 6 && a.rate == 0; i++)
		dev_step(&a, 1.4, 30);
	/* 120 requests a second of the job's: 0.3 of ours, under p.floor */
	assert_true(a.rate > 0 && a.rate == adaptive_load_floor(&a));
	assert_true(a.rate == adaptive_defaults.floor);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_DEVICE);
	assert_int_equal(a.depth, 1);
	assert_true(a.size == DEV_REQ);
	for (i = 0; i < 40; i++)	/* the job runs on: no ramp-up */
		assert_int_not_equal(dev_step(&a, 1.4, 30), ADAPTIVE_UP);
	assert_true(a.rate == adaptive_load_floor(&a));
	for (i = 0; i < 12 && a.rate != 0; i++)	/* it stops */
		dev_step(&a, 1, 0);
	assert_true(a.rate == 0);
	assert_int_equal(a.depth, 4);
}

/*
 * The filesystem's own journal commits and writeback -- a few requests
 * now and then -- do not make the scan back off.
 */
static void test_device_requests_noise(void **state)
{
	struct adaptive_params p;
	struct adaptive a;

	(void)state;
	dev_params(&p);
	adaptive_init(&a, &p);
	for (int i = 0; i < 200; i++)
		dev_step(&a, 1, i % 20 == 0 ? 3 : i % 7 == 0 ? 1 : 0);
	assert_true(a.rate == 0);
	assert_int_equal(a.downs, 0);
}

/* Without the device's counts, nothing of this signal is used. */
static void test_device_requests_absent(void **state)
{
	struct adaptive a;
	struct adaptive_sample s = { .interval_ns = TICK, .have_dev = false, .dev_ios = 1000 };

	(void)state;
	adaptive_init(&a, &plain);
	for (int i = 0; i < 20; i++)
		assert_int_equal(adaptive_tick(&a, &s), ADAPTIVE_HOLD);
	assert_true(a.rate == 0);
}

/*
 * With the sectors, a job of small requests that arrives at full speed is
 * seen in the interval its requests complete: by the requests the sectors
 * cannot fill.  Without them, the residual needs our 64 requests in flight
 * outnumbered first.
 */
static void test_device_small_requests_at_once(void **state)
{
	struct adaptive_params p;
	struct adaptive a;
	int i;

	(void)state;
	for (int sectors = 0; sectors <= 1; sectors++) {
		dev_params(&p);
		dev_sectors = sectors;
		adaptive_init(&a, &p);
		for (i = 0; i < 40; i++)
			assert_int_equal(dev_step(&a, 1, 0), ADAPTIVE_HOLD);
		assert_int_equal(dev_step(&a, 1.4, 20), sectors ? ADAPTIVE_DOWN : ADAPTIVE_HOLD);
		if (sectors) {
			assert_int_equal(a.cause, ADAPTIVE_CAUSE_DEVICE);
			assert_int_equal(a.depth, 1);
			/* 20 x 15/16 of a request beyond the sectors, less 4 of ours */
			assert_true(a.last_dev_foreign > 14.7 && a.last_dev_foreign < 14.8);
		}
	}
	/* a load of whole requests is not seen by its size (the residual sees it) */
	dev_params(&p);
	dev_sectors = true;
	job_req = DEV_REQ;
	adaptive_init(&a, &p);
	for (i = 0; i < 40; i++)
		dev_step(&a, 1, 0);
	assert_int_equal(dev_step(&a, 1.4, 20), ADAPTIVE_HOLD);
}

/*
 * Our own short requests are no other load: reads whose last request is
 * short (an extent's end) and the bisecting 4 KiB re-reads after a media
 * error, counted as ours -- 200 of them in an interval, full speed or at
 * the floor.
 */
static void test_our_short_requests_are_ours(void **state)
{
	struct adaptive_params p;
	struct adaptive a;

	(void)state;
	dev_params(&p);
	adaptive_init(&a, &p);
	for (int i = 0; i < 60; i++) {
		uint64_t rereads = i % 10 == 5 ? 200 : 0;
		/* 8 reads of 1 MiB less 4 KiB: 16 requests each, the last short */
		uint64_t reqs = 8 * 16 + rereads;
		struct adaptive_sample s = {
			.interval_ns = TICK, .reads = 8, .bytes = 8 * ((1 << 20) - 4096),
			.lat_ns = 8 * ((1 << 20) - 4096) * 2,
			.have_dev = true, .dev_ios = reqs, .our_ios = reqs,
			.our_ios_inflight = a.depth * 16,
			.have_sectors = true, .our_short = 8 + rereads + a.depth,
			.dev_sectors = (8 * ((1 << 20) - 4096) + rereads * 4096) / 512,
		};

		assert_int_not_equal(adaptive_tick(&a, &s), ADAPTIVE_DOWN);
	}
	assert_int_equal(a.downs, 0);
	assert_true(a.rate == 0);
}

/*
 * Under another load the floor follows its request rate: one request of
 * ours (64 KiB) for each 400 of its (load_share 0.25 %), never under
 * p.floor nor above the relative floor (1 % of 400 MiB/s here).
 */
static double load_floor_after(uint64_t job)
{
	struct adaptive_params p;
	struct adaptive a;

	dev_params(&p);
	dev_sectors = true;
	adaptive_init(&a, &p);
	for (int i = 0; i < 40; i++)
		dev_step(&a, 1, 0);
	for (int i = 0; i < 20; i++)
		dev_step(&a, 1.4, job);
	assert_int_equal(a.cause, ADAPTIVE_CAUSE_DEVICE);
	assert_true(a.rate == adaptive_load_floor(&a));
	assert_true(a.rate <= adaptive_floor(&a));
	return a.rate;
}

static void test_load_floor_follows_the_load(void **state)
{
	/* its requests per second, times the share, times our request */
	double per_s = 2000 / (TICK / 1e9), want = per_s * 0.0025 * DEV_REQ;

	(void)state;
	assert_true(load_floor_after(2000) > want * 0.99);	/* 1.25 MiB/s */
	assert_true(load_floor_after(2000) < want * 1.01);
	assert_true(load_floor_after(100) == adaptive_defaults.floor);	/* 64 KiB/s */
	assert_true(load_floor_after(20000) > FULL / 100 * 0.99);	/* the cap */
	assert_true(load_floor_after(20000) < FULL / 100 * 1.01);
}

/* The reads at full speed on a device of few tags: just enough in flight. */
static void test_fit_queue(void **state)
{
	unsigned depth;
	uint64_t size;

	(void)state;
	depth = 4, size = 1 << 20;		/* one tag (the test VM's null_blk) */
	adaptive_fit_queue(1, 64 << 10, &depth, &size);
	assert_int_equal(depth, 2);
	assert_true(size == 64 << 10);
	depth = 4, size = 1 << 20;		/* 8 tags: 1 MiB in two reads */
	adaptive_fit_queue(8, 64 << 10, &depth, &size);
	assert_int_equal(depth, 2);
	assert_true(size == 512 << 10);
	depth = 1, size = 1 << 20;		/* -b: one read, of two requests */
	adaptive_fit_queue(1, 64 << 10, &depth, &size);
	assert_int_equal(depth, 1);
	assert_true(size == 128 << 10);
	depth = 4, size = 1 << 20;		/* 128 tags (loop, most disks): as it was */
	adaptive_fit_queue(128, 64 << 10, &depth, &size);
	assert_int_equal(depth, 4);
	assert_true(size == 1 << 20);
	adaptive_fit_queue(0, 64 << 10, &depth, &size);	/* not known */
	assert_int_equal(depth, 4);
	assert_true(size == 1 << 20);
}

static void test_parse_diskstat_reqs(void **state)
{
	uint64_t ios = 0, sect = 0;

	(void)state;
	assert_int_equal(adaptive_parse_diskstat_reqs("    1620        0   138394      486       40"
						      "        0      320        0        0      812\n",
						      &ios, &sect), 0);
	assert_true(ios == 1660 && sect == 138714);
	assert_int_equal(adaptive_parse_diskstat_reqs("1 2 3 4 5 6\n", &ios, &sect), -22);
	assert_true(ios == 1660 && sect == 138714);	/* not clobbered on failure */
}

static void test_parse_diskstat_ios(void **state)
{
	uint64_t ios = 0;

	(void)state;
	assert_int_equal(adaptive_parse_diskstat_ios("    1620        0   138394      486       40"
						     "        0        0        0        0      812\n",
						     &ios), 0);
	assert_true(ios == 1660);
	assert_int_equal(adaptive_parse_diskstat_ios("1 2 3 4\n", &ios), -22);
	assert_true(ios == 1660);	/* not clobbered on failure */
}

int main(void)
{
	plain = adaptive_defaults;
	plain.slow_start = false;

	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quiet_stays_unlimited),
		cmocka_unit_test(test_latency_rise_backs_off),
		cmocka_unit_test(test_pressure_at_full_speed_seen_by_probe),
		cmocka_unit_test(test_recovers_when_quiet),
		cmocka_unit_test(test_pressure_baseline_is_other_tenants),
		cmocka_unit_test(test_deep_queue_does_not_ramp_blindly),
		cmocka_unit_test(test_dips_do_not_ramp),
		cmocka_unit_test(test_load_from_the_start),
		cmocka_unit_test(test_max),
		cmocka_unit_test(test_bounded_oscillation),
		cmocka_unit_test(test_burst_at_start),
		cmocka_unit_test(test_without_psi),
		cmocka_unit_test(test_depth_follows_the_rate),
		cmocka_unit_test(test_depth_backs_off_on_latency),
		cmocka_unit_test(test_depth_backs_off_at_the_floor),
		cmocka_unit_test(test_depth_one_by_default),
		cmocka_unit_test(test_read_spanning_intervals_is_ours),
		cmocka_unit_test(test_slow_start_on_a_quiet_device),
		cmocka_unit_test(test_slow_start_meets_a_running_job),
		cmocka_unit_test(test_slow_start_latency),
		cmocka_unit_test(test_floor_is_relative),
		cmocka_unit_test(test_parse_psi),
		cmocka_unit_test(test_parse_diskstat),
		cmocka_unit_test(test_device_requests_at_full_speed),
		cmocka_unit_test(test_device_requests_noise),
		cmocka_unit_test(test_device_requests_absent),
		cmocka_unit_test(test_parse_diskstat_ios),
		cmocka_unit_test(test_device_small_requests_at_once),
		cmocka_unit_test(test_our_short_requests_are_ours),
		cmocka_unit_test(test_load_floor_follows_the_load),
		cmocka_unit_test(test_parse_diskstat_reqs),
		cmocka_unit_test(test_fit_queue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
