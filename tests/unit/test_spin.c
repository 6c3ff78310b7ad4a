// SPDX-License-Identifier: MIT
/* Specification of the adaptive spin budget (src/spin.c): how long a
 * blocking call polls before it sleeps, after the waits seen so far. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "spin.h"

#define CAP 1000u

static struct spin_policy after_waits(unsigned int cap, uint64_t waited_us,
				      int count)
{
	struct spin_policy p;
	int i;

	spin_policy_init(&p, cap);
	for (i = 0; i < count; i++)
		spin_wait_ended(&p, waited_us);
	return p;
}

static void new_connection_spins_the_cap(void **state)
{
	struct spin_policy p = after_waits(CAP, 0, 0);

	assert_int_equal(spin_budget_us(&p), CAP);
}

static void connection_with_short_waits_spins_the_cap(void **state)
{
	struct spin_policy p = after_waits(CAP, 900, 60);

	assert_int_equal(spin_budget_us(&p), CAP);
}

static void waits_averaging_the_cap_stop_spinning(void **state)
{
	struct spin_policy p = after_waits(CAP, CAP + 10, 60);

	assert_int_equal(spin_budget_us(&p), 0);
}

static void zero_cap_never_spins(void **state)
{
	struct spin_policy p = after_waits(0, 5, 20);

	assert_int_equal(spin_budget_us(&p), 0);
}

static void idle_connection_stops_spinning(void **state)
{
	struct spin_policy p = after_waits(CAP, 3000000, 3);

	assert_int_equal(spin_budget_us(&p), 0);
}

static void short_waits_bring_spinning_back_after_idle(void **state)
{
	struct spin_policy p = after_waits(CAP, 3000000, 20);
	int i;

	for (i = 0; i < 12; i++)
		spin_wait_ended(&p, 100);
	assert_int_equal(spin_budget_us(&p), CAP);
}

static void one_idle_wait_does_not_stop_a_busy_connection(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 60);

	spin_wait_ended(&p, 3000000);
	assert_int_equal(spin_budget_us(&p), CAP);
}

static void largest_cap_and_wait_do_not_overflow(void **state)
{
	struct spin_policy p = after_waits(1000000, UINT64_MAX, 100);

	assert_int_equal(spin_budget_us(&p), 0);
	p = after_waits(1000000, 999999, 100);
	assert_int_equal(spin_budget_us(&p), 1000000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(new_connection_spins_the_cap),
		cmocka_unit_test(connection_with_short_waits_spins_the_cap),
		cmocka_unit_test(waits_averaging_the_cap_stop_spinning),
		cmocka_unit_test(zero_cap_never_spins),
		cmocka_unit_test(idle_connection_stops_spinning),
		cmocka_unit_test(short_waits_bring_spinning_back_after_idle),
		cmocka_unit_test(one_idle_wait_does_not_stop_a_busy_connection),
		cmocka_unit_test(largest_cap_and_wait_do_not_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
