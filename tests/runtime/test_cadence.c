/*
 * test_cadence.c - checkpoint.every_steps "auto" (runtime/train/cadence.h):
 * Young/Daly's interval sqrt(2 C M) and its bounds, and M refined by a
 * run's own interruptions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "runtime/train/cadence.h"

static void formula(void **state)
{
	const char *why;

	(void)state;
	/* a 0.5 s stall, an interruption an hour: sqrt(2 * 0.5 * 3600) = 60 s */
	assert_true(fabs(rt_cadence_interval(0.5, 3600, 0.01, &why) - 60.0) < 1e-9);
	assert_string_equal(why, "formula");
	/* four times the cost, or four times M: twice the interval */
	assert_true(fabs(rt_cadence_interval(2.0, 3600, 0.01, &why) - 120.0) < 1e-9);
	assert_true(fabs(rt_cadence_interval(0.5, 14400, 0.01, &why) - 120.0) < 1e-9);
}

static void bounds(void **state)
{
	const char *why;

	(void)state;
	/* a save dearer than M/2: sqrt(2 C M) > M, at most M */
	assert_true(fabs(rt_cadence_interval(800, 1000, 0.01, &why) - 1000) < 1e-9);
	assert_string_equal(why, "at most M");
	/* a save dearer than M itself: never back to back, at least C */
	assert_true(fabs(rt_cadence_interval(5000, 1000, 0.01, &why) - 5000) < 1e-9);
	assert_string_equal(why, "at least a save's cost");
	/* steps longer than the interval: every step */
	assert_true(fabs(rt_cadence_interval(0.01, 100, 3.0, &why) - 3.0) < 1e-9);
	assert_string_equal(why, "at least a step");
}

static void mtbi(void **state)
{
	(void)state;
	/* no history: the site's M */
	assert_true(fabs(rt_cadence_mtbi(3600, 0, 0) - 3600) < 1e-9);
	/* 3 interruptions in 2 hours against a prior of one an hour: 2700 s */
	assert_true(fabs(rt_cadence_mtbi(3600, 3, 7200) - 2700) < 1e-9);
	/* a day without any: rarer than declared */
	assert_true(rt_cadence_mtbi(3600, 0, 86400) > 3600);
	/* nonsense counts and ages count as none */
	assert_true(fabs(rt_cadence_mtbi(3600, -2, -5) - 3600) < 1e-9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(formula),
		cmocka_unit_test(bounds),
		cmocka_unit_test(mtbi),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
