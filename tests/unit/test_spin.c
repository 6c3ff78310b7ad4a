// SPDX-License-Identifier: MIT
/* Specification of the adaptive spin budget (src/spin.c): how long a
 * blocking call polls before it sleeps, after the waits seen so far, and
 * how many threads of a process may poll at once. */
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

static void steady_waits_spin_about_their_time(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 60);

	assert_in_range(spin_budget_us(&p), 100, 125);
}

static void steady_long_waits_within_the_cap_spin_past_them(void **state)
{
	struct spin_policy p = after_waits(CAP, 900, 60);

	assert_in_range(spin_budget_us(&p), 900, CAP);
}

static void uneven_waits_spin_past_the_longer_ones(void **state)
{
	struct spin_policy p;
	int i;

	spin_policy_init(&p, CAP);
	for (i = 0; i < 30; i++) {
		spin_wait_ended(&p, 100);
		spin_wait_ended(&p, 400);
	}
	assert_in_range(spin_budget_us(&p), 400, CAP);
}

static void first_short_wait_sizes_the_budget(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 1);

	assert_int_equal(spin_budget_us(&p), 100 + 4 * 50);
}

static void instant_waits_spin_the_floor(void **state)
{
	struct spin_policy p = after_waits(CAP, 0, 60);

	assert_int_equal(spin_budget_us(&p), SPIN_FLOOR_US);
}

static void budget_never_passes_the_cap(void **state)
{
	struct spin_policy p;
	int i;

	spin_policy_init(&p, CAP);
	for (i = 0; i < 30; i++) {
		spin_wait_ended(&p, 10);
		spin_wait_ended(&p, CAP);
	}
	assert_int_equal(spin_budget_us(&p), CAP);
}

/* A reply the budget missed is timed with the sleep that caught it. */
static void reply_later_than_the_budget_lengthens_it(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 60);

	spin_wait_ended(&p, 600);
	assert_true(spin_budget_us(&p) > 600);
}

static void reply_missed_by_a_wake_past_the_cap_lengthens_it(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 60);

	spin_wait_ended(&p, CAP + 40);
	assert_true(spin_budget_us(&p) > 900);
}

/*
 * Replies that come after reply_us, to waits that poll their budget and
 * then sleep for wake_us more: how many of the last 100 waits the polling
 * caught.
 */
static int caught_of_last_100(struct spin_policy *p, uint64_t reply_us,
			      uint64_t wake_us, int waits)
{
	int i, caught = 0;

	for (i = 0; i < waits; i++) {
		bool timed = spin_time_wait(p);
		bool polled = timed && reply_us <= spin_budget_us(p);

		if (i >= waits - 100)
			caught += polled;
		if (timed)
			spin_wait_ended(p,
					polled ? reply_us : reply_us + wake_us);
	}
	return caught;
}

static void replies_just_under_the_cap_keep_being_caught(void **state)
{
	struct spin_policy p;

	spin_policy_init(&p, CAP);
	assert_true(caught_of_last_100(&p, CAP - 20, 90, 5000) >= 95);
}

static void replies_that_slow_down_below_the_cap_are_caught(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 60);

	assert_true(caught_of_last_100(&p, CAP - 30, 90, 2000) >= 95);
}

static void replies_after_an_idle_spell_are_caught_again(void **state)
{
	struct spin_policy p = after_waits(CAP, 3000000, 20);

	assert_true(caught_of_last_100(&p, CAP - 20, 90, 2000) >= 95);
}

static void replies_later_than_the_cap_are_not_polled_for(void **state)
{
	struct spin_policy p;

	spin_policy_init(&p, CAP);
	assert_int_equal(caught_of_last_100(&p, CAP + 100, 90, 2000), 0);
	assert_int_equal(spin_budget_us(&p), 0);
}

static int probes_of(struct spin_policy *p, int waits)
{
	int i, probes = 0;

	for (i = 0; i < waits; i++) {
		if (!spin_time_wait(p))
			continue;
		probes += spin_budget_us(p) == CAP;
		spin_wait_ended(p, 3000000);
	}
	return probes;
}

static void idle_connection_probes_one_timed_wait_in_sixteen(void **state)
{
	struct spin_policy p = after_waits(CAP, 3000000, 20);

	assert_int_equal(
		probes_of(&p, 2 * SPIN_TIME_IDLE_EVERY * SPIN_PROBE_EVERY), 2);
}

/* An idle connection, at the start of its next probe's wait. */
static struct spin_policy idle_at_a_probe(void)
{
	struct spin_policy p = after_waits(CAP, 3000000, 20);

	while (!(spin_time_wait(&p) && spin_budget_us(&p) == CAP))
		;
	return p;
}

static void probe_that_catches_its_reply_brings_polling_back(void **state)
{
	struct spin_policy p = idle_at_a_probe();

	spin_wait_ended(&p, 100);
	assert_true(spin_budget_us(&p) > 0);
}

static void probe_that_misses_leaves_the_connection_idle(void **state)
{
	struct spin_policy p = idle_at_a_probe();

	spin_wait_ended(&p, CAP + 40);
	assert_int_equal(spin_budget_us(&p), 0);
}

static void budget_shrinks_back_when_replies_speed_up(void **state)
{
	struct spin_policy p = after_waits(CAP, 600, 60);
	int i;

	for (i = 0; i < 60; i++)
		spin_wait_ended(&p, 50);
	assert_in_range(spin_budget_us(&p), 50, 80);
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
	assert_true(spin_budget_us(&p) >= 100);
}

static void one_idle_wait_leaves_a_busy_connection_budget(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 60);
	unsigned int before = spin_budget_us(&p);

	spin_wait_ended(&p, 3000000);
	assert_int_equal(spin_budget_us(&p), before);
}

static void largest_cap_and_wait_do_not_overflow(void **state)
{
	struct spin_policy p = after_waits(1000000, UINT64_MAX, 100);

	assert_int_equal(spin_budget_us(&p), 0);
	p = after_waits(1000000, 999999, 100);
	assert_int_equal(spin_budget_us(&p), 1000000);
}

static int timed_of(struct spin_policy *p, int waits)
{
	int i, timed = 0;

	for (i = 0; i < waits; i++)
		timed += spin_time_wait(p);
	return timed;
}

static void polling_connection_times_every_wait(void **state)
{
	struct spin_policy p = after_waits(CAP, 100, 60);

	assert_int_equal(timed_of(&p, 8), 8);
}

static void idle_connection_times_one_wait_in_four(void **state)
{
	struct spin_policy p = after_waits(CAP, 3000000, 20);

	assert_int_equal(timed_of(&p, 4 * SPIN_TIME_IDLE_EVERY), 4);
}

static void first_wait_after_idle_is_timed(void **state)
{
	struct spin_policy p = after_waits(CAP, 3000000, 20);

	assert_true(spin_time_wait(&p));
}

static void zero_cap_times_no_wait(void **state)
{
	struct spin_policy p = after_waits(0, 5, 20);

	assert_int_equal(timed_of(&p, 8), 0);
}

/* Only timed waits are reported, as conn.c does. */
static void sampled_short_waits_bring_spinning_back(void **state)
{
	struct spin_policy p = after_waits(CAP, 3000000, 20);
	int i;

	for (i = 0; i < 12 * SPIN_TIME_IDLE_EVERY; i++)
		if (spin_time_wait(&p))
			spin_wait_ended(&p, 100);
	assert_true(spin_budget_us(&p) >= 100);
}

/* Takes every free slot, gives them back, and says how many there were. */
static unsigned int slots_free(void)
{
	unsigned int n = 0, i;

	while (n < 1000 && spin_slot_take())
		n++;
	for (i = 0; i < n; i++)
		spin_slot_give();
	return n;
}

static void one_fewer_spinner_than_cpus(void **state)
{
	spin_slots_init(8);
	assert_int_equal(slots_free(), 7);
}

static void two_cpus_let_one_thread_spin(void **state)
{
	spin_slots_init(2);
	assert_int_equal(slots_free(), 1);
}

static void one_cpu_still_lets_one_thread_spin(void **state)
{
	spin_slots_init(1);
	assert_int_equal(slots_free(), 1);
}

static void spinner_beyond_the_slots_is_refused(void **state)
{
	spin_slots_init(3);
	assert_true(spin_slot_take());
	assert_true(spin_slot_take());
	assert_false(spin_slot_take());
	spin_slot_give();
	spin_slot_give();
}

static void slot_given_back_is_taken_again(void **state)
{
	spin_slots_init(2);
	assert_true(spin_slot_take());
	spin_slot_give();
	assert_true(spin_slot_take());
	spin_slot_give();
}

static void fork_child_starts_with_every_slot_free(void **state)
{
	spin_slots_init(4);
	assert_true(spin_slot_take());
	spin_fork_child();
	assert_int_equal(slots_free(), 3);
}

static void working_progress_thread_refuses_a_poller(void **state)
{
	spin_slots_init(2);
	spin_slot_occupy();
	assert_false(spin_slot_take());
	spin_slot_vacate();
	assert_true(spin_slot_take());
	spin_slot_give();
}

static void progress_thread_works_though_every_slot_is_taken(void **state)
{
	spin_slots_init(2);
	assert_true(spin_slot_take());
	spin_slot_occupy();
	spin_slot_give();
	assert_false(spin_slot_take());
	spin_slot_vacate();
	assert_int_equal(slots_free(), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(new_connection_spins_the_cap),
		cmocka_unit_test(steady_waits_spin_about_their_time),
		cmocka_unit_test(
			steady_long_waits_within_the_cap_spin_past_them),
		cmocka_unit_test(uneven_waits_spin_past_the_longer_ones),
		cmocka_unit_test(first_short_wait_sizes_the_budget),
		cmocka_unit_test(instant_waits_spin_the_floor),
		cmocka_unit_test(budget_never_passes_the_cap),
		cmocka_unit_test(reply_later_than_the_budget_lengthens_it),
		cmocka_unit_test(budget_shrinks_back_when_replies_speed_up),
		cmocka_unit_test(
			reply_missed_by_a_wake_past_the_cap_lengthens_it),
		cmocka_unit_test(replies_just_under_the_cap_keep_being_caught),
		cmocka_unit_test(
			replies_that_slow_down_below_the_cap_are_caught),
		cmocka_unit_test(replies_after_an_idle_spell_are_caught_again),
		cmocka_unit_test(replies_later_than_the_cap_are_not_polled_for),
		cmocka_unit_test(
			idle_connection_probes_one_timed_wait_in_sixteen),
		cmocka_unit_test(
			probe_that_catches_its_reply_brings_polling_back),
		cmocka_unit_test(probe_that_misses_leaves_the_connection_idle),
		cmocka_unit_test(waits_averaging_the_cap_stop_spinning),
		cmocka_unit_test(zero_cap_never_spins),
		cmocka_unit_test(idle_connection_stops_spinning),
		cmocka_unit_test(short_waits_bring_spinning_back_after_idle),
		cmocka_unit_test(one_idle_wait_leaves_a_busy_connection_budget),
		cmocka_unit_test(largest_cap_and_wait_do_not_overflow),
		cmocka_unit_test(polling_connection_times_every_wait),
		cmocka_unit_test(idle_connection_times_one_wait_in_four),
		cmocka_unit_test(first_wait_after_idle_is_timed),
		cmocka_unit_test(zero_cap_times_no_wait),
		cmocka_unit_test(sampled_short_waits_bring_spinning_back),
		cmocka_unit_test(one_fewer_spinner_than_cpus),
		cmocka_unit_test(two_cpus_let_one_thread_spin),
		cmocka_unit_test(one_cpu_still_lets_one_thread_spin),
		cmocka_unit_test(spinner_beyond_the_slots_is_refused),
		cmocka_unit_test(slot_given_back_is_taken_again),
		cmocka_unit_test(fork_child_starts_with_every_slot_free),
		cmocka_unit_test(working_progress_thread_refuses_a_poller),
		cmocka_unit_test(
			progress_thread_works_though_every_slot_is_taken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
