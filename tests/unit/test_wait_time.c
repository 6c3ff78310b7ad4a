// SPDX-License-Identifier: MIT
/*
 * Specification of what is left of a program's wait after a step of it
 * (src/wait_time.c): timeouts never end early, and an infinite one stays
 * infinite.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "clock.h"
#include "wait_time.h"

static void timespec_rounds_up_to_whole_milliseconds(void **state)
{
	struct timespec ts = { .tv_sec = 1, .tv_nsec = 1 };

	assert_int_equal(wait_time_ms(&ts), 1001);
}

static void negative_timespec_is_no_wait(void **state)
{
	struct timespec ts = { .tv_sec = -1 };

	assert_int_equal(wait_time_ms(&ts), 0);
}

/* A timeout of centuries, which ppoll() takes, overflows nothing. */
static void timespec_of_centuries_is_the_longest_wait(void **state)
{
	struct timespec ts = { .tv_sec = INT64_MAX / 1000 + 1 };

	assert_int_equal(wait_time_ms(&ts), INT_MAX);
}

static void spent_takes_only_whole_milliseconds(void **state)
{
	int timeout = 10;

	assert_true(wait_time_take_spent(&timeout, NULL, 1999));
	assert_int_equal(timeout, 9);
}

static void spent_below_a_millisecond_leaves_the_timeout(void **state)
{
	int timeout = 1;

	assert_true(wait_time_take_spent(&timeout, NULL, 999));
	assert_int_equal(timeout, 1);
}

static void spent_whole_timeout_leaves_nothing(void **state)
{
	int timeout = 2;

	assert_false(wait_time_take_spent(&timeout, NULL, 2000));
}

static void infinite_timeout_stays_infinite(void **state)
{
	int timeout = -1;

	assert_true(wait_time_take_spent(&timeout, NULL, 5000000));
	assert_int_equal(timeout, -1);
}

static void spent_comes_off_a_timespec_exactly(void **state)
{
	struct timespec ts = { .tv_sec = 1, .tv_nsec = 500 };
	int timeout = 1001;

	assert_true(wait_time_take_spent(&timeout, &ts, 250));
	assert_int_equal(ts.tv_sec, 0);
	assert_int_equal(ts.tv_nsec, 999750500);
}

static void spent_whole_timespec_leaves_nothing(void **state)
{
	struct timespec ts = { .tv_nsec = 200000 };
	int timeout = 1;

	assert_false(wait_time_take_spent(&timeout, &ts, 200));
}

static void left_of_a_passed_deadline_is_nothing(void **state)
{
	int timeout = 50;

	assert_false(wait_time_left(&timeout, clock_ms() - 1, NULL));
}

static void left_fills_the_timespec(void **state)
{
	struct timespec ts = { 0 };
	int timeout = 5000;

	assert_true(wait_time_left(&timeout, clock_ms() + 3000, &ts));
	assert_in_range(timeout, 2900, 3000);
	assert_int_equal(ts.tv_sec * 1000 + ts.tv_nsec / 1000000, timeout);
}

static void left_of_an_infinite_wait_is_infinite(void **state)
{
	int timeout = -1;

	assert_true(wait_time_left(&timeout, -1, NULL));
	assert_int_equal(timeout, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(timespec_rounds_up_to_whole_milliseconds),
		cmocka_unit_test(negative_timespec_is_no_wait),
		cmocka_unit_test(timespec_of_centuries_is_the_longest_wait),
		cmocka_unit_test(spent_takes_only_whole_milliseconds),
		cmocka_unit_test(spent_below_a_millisecond_leaves_the_timeout),
		cmocka_unit_test(spent_whole_timeout_leaves_nothing),
		cmocka_unit_test(infinite_timeout_stays_infinite),
		cmocka_unit_test(spent_comes_off_a_timespec_exactly),
		cmocka_unit_test(spent_whole_timespec_leaves_nothing),
		cmocka_unit_test(left_of_a_passed_deadline_is_nothing),
		cmocka_unit_test(left_fills_the_timespec),
		cmocka_unit_test(left_of_an_infinite_wait_is_infinite),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
