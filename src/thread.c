/*
 * thread: starting helper threads with signals blocked; see thread.h.
 */
#include "thread.h"

#include <signal.h>

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	/* The new thread inherits the mask in force when it is created. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}
