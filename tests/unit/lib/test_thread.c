/*
 * Unit tests for thread.c: helper threads start with every signal blocked;
 * timed waits are measured on the monotonic clock.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <time.h>

#include "lib/thread.h"

/* The thread's own mask, as it found it on starting. */
static void *read_mask(void *arg)
{
	sigset_t *out = arg;

	pthread_sigmask(SIG_BLOCK, NULL, out);
	return NULL;
}

static void test_signals_blocked_in_the_thread(void **state)
{
	sigset_t mine, theirs, after;
	pthread_t t;

	(void)state;
	sigemptyset(&mine);
	pthread_sigmask(SIG_SETMASK, &mine, NULL);
	assert_int_equal(thread_start(&t, read_mask, &theirs), 0);
	pthread_join(t, NULL);
	assert_true(sigismember(&theirs, SIGINT));
	assert_true(sigismember(&theirs, SIGTERM));
	assert_true(sigismember(&theirs, SIGUSR1));
	/* The caller's own mask is as it was: the main thread still takes them. */
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	assert_false(sigismember(&after, SIGINT));
	assert_false(sigismember(&after, SIGTERM));
}

static long long mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void test_deadline_in_is_normalised(void **state)
{
	long long before = mono_ns();
	struct timespec t = deadline_in(1999999999LL);

	(void)state;
	assert_true(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L);
	assert_true((long long)t.tv_sec * 1000000000LL + t.tv_nsec >= before + 1999999999LL);
}

/*
 * The monotonic clock counts from boot: as a CLOCK_REALTIME deadline, 100 ms
 * after its now is decades past, and a wait on a condition variable that
 * used the wall clock would end at once.  One that uses the monotonic
 * clock waits (at least) the 100 ms.
 */
static void test_waits_follow_the_monotonic_clock(void **state)
{
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond;
	long long began = mono_ns();
	struct timespec until = deadline_in(100000000LL);
	int err;

	(void)state;
	cond_init_monotonic(&cond);
	pthread_mutex_lock(&lock);
	do
		err = pthread_cond_timedwait(&cond, &lock, &until);
	while (err == 0);	/* a spurious wake-up */
	pthread_mutex_unlock(&lock);
	pthread_cond_destroy(&cond);
	assert_int_equal(err, ETIMEDOUT);
	assert_true(mono_ns() - began >= 100000000LL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signals_blocked_in_the_thread),
		cmocka_unit_test(test_deadline_in_is_normalised),
		cmocka_unit_test(test_waits_follow_the_monotonic_clock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
