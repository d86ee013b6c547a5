/* Unit tests for thread.c: helper threads start with every signal blocked. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "thread.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_signals_blocked_in_the_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
