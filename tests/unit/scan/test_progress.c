/*
 * Unit tests for progress_estimate(), the progress line's arithmetic: the
 * rate is this run's items over this run's time, and a resumed run's
 * percentage and ETA count what the stopped runs did (base) as done, so the
 * time it was stopped is in neither.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scan/progress.h"

static void test_fresh_run(void **unused)
{
	struct progress_figures f;

	(void)unused;
	progress_estimate(0, 250, 1000, 10, &f);
	assert_true(f.rate == 25);
	assert_true(f.percent == 25);
	assert_true(f.eta == 30);		/* 750 left at 25/s */
}

/*
 * Stopped at 600 of 1000 after an hour, resumed: 100 more in 10 s.  The
 * hour is not in the rate (10/s, not 700 / 3610 s), the 600 not in what is
 * left (300 at 10/s: 30 s).
 */
static void test_resumed_run(void **unused)
{
	struct progress_figures f;

	(void)unused;
	progress_estimate(600, 100, 1000, 10, &f);
	assert_true(f.rate == 10);
	assert_true(f.percent == 70);
	assert_true(f.eta == 30);
}

static void test_unknown(void **unused)
{
	struct progress_figures f;

	(void)unused;
	progress_estimate(600, 0, 1000, 10, &f);	/* nothing read yet: no rate, no ETA */
	assert_true(f.rate == 0 && f.eta < 0);
	assert_true(f.percent == 60);
	progress_estimate(0, 100, 0, 10, &f);		/* no total */
	assert_true(f.eta < 0 && f.percent == 0);
	progress_estimate(900, 200, 1000, 10, &f);	/* past the total: nothing left */
	assert_true(f.eta == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fresh_run),
		cmocka_unit_test(test_resumed_run),
		cmocka_unit_test(test_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
