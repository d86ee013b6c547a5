/*
 * progress: the -C lines, the terminal bar and the -v status; see
 * progress.h.
 */
#include "scan/progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scan/context.h"
#include "report/report.h"
#include "lib/strbuf.h"
#include "lib/thread.h"

/* fsck frontends expect about two lines a second. */
#define LINE_INTERVAL_MS 500
/* A bar redrawn more often than this flickers and costs terminal time. */
#define BAR_INTERVAL_MS 250
/* -v status lines: often enough to show life, rare enough to read. */
#define STATUS_INTERVAL_MS 10000

struct progress {
	struct scrub_ctx *ctx;
	int fd;				/* -C, or -1 */
	bool tty;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool stop;
	/* the current phase, under lock */
	int phase;
	const char *title, *unit;
	unsigned long long total;
	struct timespec started;
	double last_status;		/* -v's last status line, seconds into the phase */
	atomic_bool bar_drawn;		/* also read by progress_clear_line() */
	bool fd_failed;
	unsigned status_ms;
};

static double since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

static void write_all(struct progress *p, const char *buf, size_t len)
{
	while (len && !p->fd_failed) {
		ssize_t n = write(p->fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* A reader that went away must not stop the scan: stop writing. */
			p->fd_failed = true;
			return;
		}
		buf += n;
		len -= (size_t)n;
	}
}

/* DONE and TOTAL as they are shown: DONE < TOTAL until the phase ends. */
static void shown(const struct progress *p, bool final, unsigned long long *done,
		  unsigned long long *total)
{
	unsigned long long d = atomic_load_explicit(&p->ctx->progress_done,
						    memory_order_relaxed) +
			       atomic_load_explicit(&p->ctx->progress_base, memory_order_relaxed);
	unsigned long long t = p->total;

	if (final) {
		if (!t || d > t)
			t = d ? d : 1;
		d = t;
	} else if (!t || d >= t) {
		t = t > d + 1 ? t : d + 1;
		if (p->total && d >= p->total)
			d = p->total - 1, t = p->total;
	}
	*done = d;
	*total = t;
}

static void emit_line(struct progress *p, bool final)
{
	struct strbuf sb = STRBUF_INIT;
	unsigned long long done, total;

	shown(p, final, &done, &total);
	strbuf_addf(&sb, "%d %llu %llu %s\n", p->phase, done, total, p->ctx->mntpoint);
	write_all(p, sb.buf, sb.len);
	strbuf_release(&sb);
}

static void format_eta(struct strbuf *sb, double seconds)
{
	unsigned long s = seconds > 0 && seconds < 1e7 ? (unsigned long)(seconds + 0.5) : 0;

	if (s >= 3600)
		strbuf_addf(sb, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
	else
		strbuf_addf(sb, "%lu:%02lu", s / 60, s % 60);
}

void progress_estimate(unsigned long long base, unsigned long long done,
		       unsigned long long total, double elapsed, struct progress_figures *out)
{
	unsigned long long all = base + done;

	out->rate = elapsed > 0 ? (double)done / elapsed : 0;
	out->percent = total ? 100.0 * (double)all / (double)total : 0;
	out->eta = -1;
	if (total && out->rate > 0)
		out->eta = all < total ? (double)(total - all) / out->rate : 0;
}

/* "Phase 3: Scan all inodes ...  45.2%  12345/s  ETA 0:12" */
static void describe(struct progress *p, struct strbuf *sb)
{
	unsigned long long done, total;
	unsigned long long base = atomic_load_explicit(&p->ctx->progress_base,
						       memory_order_relaxed);
	struct progress_figures fig;

	shown(p, false, &done, &total);
	progress_estimate(base, done > base ? done - base : 0, total, since(&p->started), &fig);
	strbuf_addf(sb, "Phase %d: %s", p->phase, p->title);
	if (p->total) {
		strbuf_addf(sb, " %5.1f%%", fig.percent);
		strbuf_addf(sb, " %llu/%llu %s", done, total, p->unit);
	} else {
		strbuf_addf(sb, " %llu %s", done, p->unit);
	}
	strbuf_addf(sb, " %.0f/s", fig.rate);
	if (p->total && fig.eta >= 0) {
		strbuf_addstr(sb, " ETA ");
		format_eta(sb, fig.eta);
	}
}

static void draw_bar(struct progress *p)
{
	struct strbuf sb = STRBUF_INIT;

	strbuf_addstr(&sb, "\r");
	describe(p, &sb);
	strbuf_addstr(&sb, "\033[K");
	write_all(p, sb.buf, sb.len);
	p->bar_drawn = true;
	strbuf_release(&sb);
}

static void erase_bar(struct progress *p)
{
	if (p->bar_drawn)
		write_all(p, "\r\033[K", 4);
	p->bar_drawn = false;
}

static void print_status(struct progress *p)
{
	struct strbuf sb = STRBUF_INIT;

	describe(p, &sb);
	report_verbose(p->ctx, "%s", sb.buf);
	strbuf_release(&sb);
}

static void *progress_main(void *arg)
{
	struct progress *p = arg;
	unsigned interval = p->fd < 0 ? p->status_ms : p->tty ? BAR_INTERVAL_MS : LINE_INTERVAL_MS;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec until = deadline_in((long long)interval * 1000000LL);

		pthread_cond_timedwait(&p->wake, &p->lock, &until);
		if (p->stop || !p->phase)
			continue;
		if (p->fd >= 0 && p->tty)
			draw_bar(p);
		else if (p->fd >= 0)
			emit_line(p, false);
		if (p->ctx->opt.verbose && since(&p->started) - p->last_status >= p->status_ms / 1e3) {
			p->last_status = since(&p->started);
			if (p->tty)
				erase_bar(p);
			print_status(p);
		}
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* The report core's handle on the reporter (report.h), defined at the end. */
static const struct report_sink progress_sink;

int progress_start(struct scrub_ctx *ctx)
{
	struct progress *p;
	const char *knob = getenv("FSCRUB_DEBUG_STATUS_MS");
	int err;

	if (ctx->opt.progress_fd < 0 && !ctx->opt.verbose)
		return 0;
	p = xcalloc(1, sizeof(*p));
	p->ctx = ctx;
	p->fd = ctx->opt.progress_fd;
	p->tty = p->fd >= 0 && isatty(p->fd);
	/* Test knob: a shorter -v status interval, so tests need no long scans. */
	p->status_ms = knob && atoi(knob) > 0 ? (unsigned)atoi(knob) : STATUS_INTERVAL_MS;
	pthread_mutex_init(&p->lock, NULL);
	cond_init_monotonic(&p->wake);
	err = thread_start(&p->thread, progress_main, p);
	if (err) {
		free(p);
		return -err;
	}
	report_add_sink(ctx, &progress_sink, p);
	return 0;
}

void progress_phase(struct scrub_ctx *ctx, int phase, const char *title,
		    unsigned long long total, const char *unit)
{
	struct progress *p = report_sink_data(ctx, &progress_sink);

	atomic_store(&ctx->progress_done, 0);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->phase = phase;
	p->title = title;
	p->unit = unit;
	p->total = total;
	clock_gettime(CLOCK_MONOTONIC, &p->started);
	/*
	 * Counted from this phase's start: kept from the phase before, a
	 * long phase 3 (3 s) hid every status line of a phase 5 shorter
	 * than it (seen in CI under load).
	 */
	p->last_status = 0;
	if (p->fd >= 0 && !p->tty)
		emit_line(p, false);	/* every phase shows up, however short */
	pthread_mutex_unlock(&p->lock);
}

void progress_phase_end(struct scrub_ctx *ctx)
{
	struct progress *p = report_sink_data(ctx, &progress_sink);

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	/* A phase a signal or -a stopped did not get to its end: its last line says how far. */
	if (p->fd >= 0 && !p->tty && p->phase)
		emit_line(p, !scrub_should_stop(p->ctx));
	p->phase = 0;
	pthread_mutex_unlock(&p->lock);
}

/* Findings are about to be printed on the terminal: clear the bar's line. */
static void progress_clear_line(struct scrub_ctx *ctx, void *data)
{
	struct progress *p = data;

	(void)ctx;
	/*
	 * No lock: the reporter may hold it while printing a status line
	 * through report.c.  A racing redraw only costs one ugly line.
	 */
	if (p->tty && p->bar_drawn && write(p->fd, "\r\033[K", 4) == 4)
		p->bar_drawn = false;
}

/* Stop the reporter and erase the bar. */
static void progress_stop(struct scrub_ctx *ctx, void *data)
{
	struct progress *p = data;

	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	if (p->tty)
		erase_bar(p);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	report_remove_sink(ctx, &progress_sink);
	free(p);
}

static const struct report_sink progress_sink = {
	.name = "progress",
	.text_line = progress_clear_line,
	.stop = progress_stop,
};
