// SPDX-License-Identifier: MIT
/* Specification of how long a move to TCP waits for the peer's marker
 * (src/move_wait.c): the move timeout, extended while this end's own
 * marker is stuck on the path, then a last wait sized by the stall, all
 * within MOVE_WAIT_MAX_MS of the move's start. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "move_wait.h"

#define TIMEOUT 5000
#define START	1000000

static struct move_wait started(void)
{
	struct move_wait w;

	move_wait_start(&w, TIMEOUT, START);
	return w;
}

static void wait_ends_one_timeout_after_the_start(void **state)
{
	struct move_wait w = started();

	assert_false(move_wait_late(&w, START + TIMEOUT - 1));
	assert_true(move_wait_late(&w, START + TIMEOUT));
}

static void late_marker_with_own_marker_acknowledged_fails(void **state)
{
	struct move_wait w = started();

	assert_int_equal(move_wait_expired(&w, START + TIMEOUT, 0, 200),
			 MOVE_WAIT_GIVE_UP);
}

static void queued_own_marker_waits_another_timeout(void **state)
{
	struct move_wait w = started();
	int64_t now = START + TIMEOUT;

	assert_int_equal(move_wait_expired(&w, now, 32, 3200),
			 MOVE_WAIT_STALLED);
	assert_false(move_wait_late(&w, now + TIMEOUT - 1));
	assert_true(move_wait_late(&w, now + TIMEOUT));
}

static void marker_carried_after_stall_waits_timeout_and_twice_rto(void **state)
{
	struct move_wait w = started();
	int64_t now = START + TIMEOUT;

	move_wait_expired(&w, now, 32, 1600);
	move_wait_expired(&w, now + TIMEOUT, 32, 6400);
	now += 2 * TIMEOUT;
	assert_int_equal(move_wait_expired(&w, now, 0, 200), MOVE_WAIT_CARRIED);
	assert_false(move_wait_late(&w, now + TIMEOUT + 2 * 6400 - 1));
	assert_true(move_wait_late(&w, now + TIMEOUT + 2 * 6400));
}

static void stall_rto_is_the_largest_seen_not_the_latest(void **state)
{
	struct move_wait w = started();
	int64_t now = START + TIMEOUT;

	move_wait_expired(&w, now, 32, 6400);
	move_wait_expired(&w, now + TIMEOUT, 32, 200);
	now += 2 * TIMEOUT;
	move_wait_expired(&w, now, 0, 200);
	assert_false(move_wait_late(&w, now + TIMEOUT + 2 * 6400 - 1));
}

static void carried_marker_gets_one_last_wait_only(void **state)
{
	struct move_wait w = started();
	int64_t now = START + TIMEOUT;

	move_wait_expired(&w, now, 32, 1000);
	move_wait_expired(&w, now + TIMEOUT, 0, 200);
	assert_int_equal(move_wait_expired(&w, now + 3 * TIMEOUT, 0, 200),
			 MOVE_WAIT_GIVE_UP);
}

static void stall_with_zero_rto_still_counts_as_stall(void **state)
{
	struct move_wait w = started();
	int64_t now = START + TIMEOUT;

	assert_int_equal(move_wait_expired(&w, now, 32, 0), MOVE_WAIT_STALLED);
	assert_int_equal(move_wait_expired(&w, now + TIMEOUT, 0, 0),
			 MOVE_WAIT_CARRIED);
}

static void nothing_extends_past_the_cap(void **state)
{
	struct move_wait w = started();

	assert_int_equal(
		move_wait_expired(&w, START + MOVE_WAIT_MAX_MS, 32, 200),
		MOVE_WAIT_GIVE_UP);
	assert_int_equal(
		move_wait_expired(&w, START + MOVE_WAIT_MAX_MS - 1, 32, 200),
		MOVE_WAIT_STALLED);
}

static void unknown_queue_gives_up(void **state)
{
	struct move_wait w = started();

	assert_int_equal(move_wait_expired(&w, START + TIMEOUT, -1, 200),
			 MOVE_WAIT_GIVE_UP);
}

static void restart_forgets_the_previous_stall(void **state)
{
	struct move_wait w = started();
	int64_t now = START + TIMEOUT;

	move_wait_expired(&w, now, 32, 6400);
	move_wait_start(&w, TIMEOUT, now + 1);
	assert_int_equal(move_wait_expired(&w, now + 1 + TIMEOUT, 0, 200),
			 MOVE_WAIT_GIVE_UP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(wait_ends_one_timeout_after_the_start),
		cmocka_unit_test(
			late_marker_with_own_marker_acknowledged_fails),
		cmocka_unit_test(queued_own_marker_waits_another_timeout),
		cmocka_unit_test(
			marker_carried_after_stall_waits_timeout_and_twice_rto),
		cmocka_unit_test(stall_rto_is_the_largest_seen_not_the_latest),
		cmocka_unit_test(carried_marker_gets_one_last_wait_only),
		cmocka_unit_test(stall_with_zero_rto_still_counts_as_stall),
		cmocka_unit_test(nothing_extends_past_the_cap),
		cmocka_unit_test(unknown_queue_gives_up),
		cmocka_unit_test(restart_forgets_the_previous_stall),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
