/*
 * thread: how fscrub starts its helper threads.
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

#endif
