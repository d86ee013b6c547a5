/*
 * thread: how fscrub starts its helper threads, and how they wait.
 *
 * SIGINT and SIGTERM only set scrub_cancelled (main.c), which every
 * thread polls; they must be delivered to the main thread.  A helper that
 * took one inside a system call (GETFSMAP, BULKSTAT, poll, a blocking
 * read) would see EINTR there and report a failure where the scan should
 * only stop.  So every thread starts with all signals blocked.
 */
#ifndef FSCRUB_THREAD_H
#define FSCRUB_THREAD_H

#include <pthread.h>

/* pthread_create() of fn(arg) with every signal blocked in it: 0 or an errno. */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/*
 * Timed waits on the monotonic clock.  pthread_cond_timedwait() takes an
 * absolute time, on CLOCK_REALTIME unless the condition variable says
 * otherwise; a step of the wall clock back (NTP, date -s, a virtual
 * machine's clock set again) would then stretch a 250 ms wait by the
 * step, and the progress bar would stall for as long.  A condition
 * variable made by cond_init_monotonic() measures its waits on
 * CLOCK_MONOTONIC; deadline_in() is the time ns from now on that clock.
 */
void cond_init_monotonic(pthread_cond_t *cond);
struct timespec deadline_in(long long ns);

#endif
