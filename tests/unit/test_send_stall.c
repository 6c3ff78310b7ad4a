// SPDX-License-Identifier: MIT
/* Specification of when a blocking send that waits for credit moves its
 * connection to TCP (src/send_stall.c): after SEND_STALL_MS in which the
 * peer consumed nothing, if TCP's buffers would have held the rest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "send_stall.h"

#define START 1000000
#define SMALL (64u << 10)

static void wait_ends_at_the_stall_deadline(void **state)
{
	struct send_stall s = { .waiting = false };

	assert_int_equal(send_stall_wait_until(&s, 0, START, -1),
			 START + SEND_STALL_MS);
}

static void wait_ends_at_the_calls_deadline_if_earlier(void **state)
{
	struct send_stall s = { .waiting = false };

	assert_int_equal(send_stall_wait_until(&s, 0, START, START + 10),
			 START + 10);
}

static void
stall_moves_once_the_peer_consumed_nothing_for_long_enough(void **state)
{
	struct send_stall s = { .waiting = false };

	send_stall_wait_until(&s, 7, START, -1);
	send_stall_wait_until(&s, 7, START + 600, -1);
	assert_false(send_stall_moves(&s, 7, SMALL, SMALL,
				      START + SEND_STALL_MS - 1));
	assert_true(
		send_stall_moves(&s, 7, SMALL, SMALL, START + SEND_STALL_MS));
}

static void consumption_starts_the_stall_again(void **state)
{
	struct send_stall s = { .waiting = false };

	send_stall_wait_until(&s, 7, START, -1);
	assert_false(
		send_stall_moves(&s, 8, SMALL, SMALL, START + SEND_STALL_MS));
	assert_int_equal(send_stall_wait_until(&s, 8, START + 900, -1),
			 START + 900 + SEND_STALL_MS);
	assert_false(
		send_stall_moves(&s, 8, SMALL, SMALL, START + SEND_STALL_MS));
}

static void send_beyond_what_tcp_holds_stays(void **state)
{
	struct send_stall s = { .waiting = false };

	send_stall_wait_until(&s, 0, START, -1);
	assert_false(send_stall_moves(&s, 0, SMALL,
				      SEND_STALL_TCP_BYTES - SMALL + 1,
				      START + SEND_STALL_MS));
	assert_true(send_stall_moves(&s, 0, SMALL, SEND_STALL_TCP_BYTES - SMALL,
				     START + SEND_STALL_MS));
}

static void stall_without_a_move_starts_again(void **state)
{
	struct send_stall s = { .waiting = false };

	send_stall_wait_until(&s, 0, START, -1);
	assert_false(send_stall_moves(&s, 0, SMALL, SEND_STALL_TCP_BYTES,
				      START + SEND_STALL_MS));
	assert_int_equal(
		send_stall_wait_until(&s, 0, START + SEND_STALL_MS, -1),
		START + 2 * SEND_STALL_MS);
}

static void stall_moves_once_per_call(void **state)
{
	struct send_stall s = { .waiting = false };

	send_stall_wait_until(&s, 0, START, -1);
	assert_true(
		send_stall_moves(&s, 0, SMALL, SMALL, START + SEND_STALL_MS));
	send_stall_wait_until(&s, 0, START + SEND_STALL_MS, -1);
	assert_false(send_stall_moves(&s, 0, SMALL, SMALL,
				      START + 2 * SEND_STALL_MS));
}

static void no_move_without_a_wait(void **state)
{
	struct send_stall s = { .waiting = false };

	assert_false(
		send_stall_moves(&s, 0, SMALL, SMALL, START + SEND_STALL_MS));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(wait_ends_at_the_stall_deadline),
		cmocka_unit_test(wait_ends_at_the_calls_deadline_if_earlier),
		cmocka_unit_test(
			stall_moves_once_the_peer_consumed_nothing_for_long_enough),
		cmocka_unit_test(consumption_starts_the_stall_again),
		cmocka_unit_test(send_beyond_what_tcp_holds_stays),
		cmocka_unit_test(stall_without_a_move_starts_again),
		cmocka_unit_test(stall_moves_once_per_call),
		cmocka_unit_test(no_move_without_a_wait),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
