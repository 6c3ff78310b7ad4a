// SPDX-License-Identifier: MIT
/* Specification of the stream protocol state (src/stream.c): credits,
 * windows, EOF, and every immediate a hostile peer could send. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ring.h"
#include "stream.h"

#define RING (64u << 10)

static struct stream fresh(void)
{
	struct stream s;

	stream_init(&s, RING);
	return s;
}

/* Stages n bytes and posts them at once. */
static void send_now(struct stream *s, uint32_t n)
{
	stream_staged(s, n);
	stream_sent(s, n);
}

static void data_immediate_makes_bytes_available(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, 1000), 0);
	assert_int_equal(stream_available(&s), 1000);
	stream_consumed(&s, 400);
	assert_int_equal(stream_available(&s), 600);
}

static void send_window_is_the_whole_ring_at_first(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_send_window(&s, 1u << 30), RING);
	assert_int_equal(stream_send_window(&s, 10), 10);
}

static void send_window_waits_for_credit_and_completion(void **state)
{
	struct stream s = fresh();

	send_now(&s, RING);
	assert_int_equal(stream_send_window(&s, 1), 0);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | 1000), 0);
	/* Credit alone is not enough: the staging bytes are still posted. */
	assert_int_equal(stream_send_window(&s, RING), 0);
	stream_write_completed(&s, 800);
	assert_int_equal(stream_send_window(&s, RING), 800);
	stream_write_completed(&s, RING);
	assert_int_equal(stream_send_window(&s, RING), 1000);
}

static void send_limit_bounds_the_bytes_not_yet_consumed(void **state)
{
	struct stream s = fresh();

	stream_limit_send(&s, RING / 2);
	assert_int_equal(stream_send_window(&s, RING), RING / 2);
	send_now(&s, RING / 2);
	stream_write_completed(&s, RING / 2);
	assert_int_equal(stream_send_window(&s, 1), 0);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | RING / 4), 0);
	assert_int_equal(stream_send_window(&s, RING), RING / 4);
}

static void send_limit_is_at_least_the_credit_quantum(void **state)
{
	struct stream s = fresh(), peer = fresh();
	uint32_t window;

	stream_limit_send(&s, 1);
	window = stream_send_window(&s, RING);
	assert_int_equal(window, RING / 4);
	/* A peer that has consumed all of it owes credit: no deadlock. */
	assert_int_equal(stream_apply_imm(&peer, window), 0);
	stream_consumed(&peer, window);
	assert_int_equal(stream_credit_due(&peer), IMM_CREDIT | window);
}

static void send_limit_is_at_most_the_ring(void **state)
{
	struct stream s = fresh();

	stream_limit_send(&s, UINT32_MAX);
	assert_int_equal(stream_send_window(&s, 1u << 30), RING);
}

static void
lowering_the_send_limit_below_the_unconsumed_stops_sends(void **state)
{
	struct stream s = fresh();

	send_now(&s, RING);
	stream_write_completed(&s, RING);
	stream_limit_send(&s, RING / 4);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | RING / 2), 0);
	assert_int_equal(stream_send_window(&s, 1), 0);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | RING / 4), 0);
	assert_int_equal(stream_send_window(&s, 1), 0);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | RING / 4), 0);
	assert_int_equal(stream_send_window(&s, RING), RING / 4);
}

static void completion_beyond_what_was_sent_is_ignored(void **state)
{
	struct stream s = fresh();

	send_now(&s, 100);
	stream_write_completed(&s, 5000);
	assert_int_equal(s.tx_completed, 0);
	stream_write_completed(&s, 100);
	stream_write_completed(&s, 50);
	assert_int_equal(s.tx_completed, 100);
}

static void credit_is_due_after_a_quarter_of_the_ring(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, RING), 0);
	stream_consumed(&s, RING / 4 - 1);
	assert_int_equal(stream_credit_due(&s), 0);
	stream_consumed(&s, 1);
	assert_int_equal(stream_credit_due(&s), IMM_CREDIT | (RING / 4));
	stream_credit_sent(&s);
	assert_int_equal(stream_credit_due(&s), 0);
}

static void fin_gives_eof_after_the_data(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, 10), 0);
	assert_int_equal(stream_apply_imm(&s, IMM_FIN), 0);
	assert_true(s.rx_eof);
	assert_int_equal(stream_available(&s), 10);
}

static void expect_refused(struct stream *s, uint32_t imm)
{
	struct stream before = *s;

	assert_int_equal(stream_apply_imm(s, imm), -EPROTO);
	assert_memory_equal(&before, s, sizeof(before));
}

static void data_beyond_the_ring_is_refused(void **state)
{
	struct stream s = fresh();

	expect_refused(&s, RING + 1);
	assert_int_equal(stream_apply_imm(&s, RING - 5), 0);
	expect_refused(&s, 6);
	expect_refused(&s, IMM_LEN_MASK);
}

static void zero_length_data_is_refused(void **state)
{
	struct stream s = fresh();

	expect_refused(&s, 0);
}

static void credit_for_bytes_never_sent_is_refused(void **state)
{
	struct stream s = fresh();

	expect_refused(&s, IMM_CREDIT | 1);
	send_now(&s, 100);
	expect_refused(&s, IMM_CREDIT | 101);
	expect_refused(&s, IMM_CREDIT);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | 100), 0);
	expect_refused(&s, IMM_CREDIT | 1);
}

static void anything_after_fin_is_refused(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, IMM_FIN), 0);
	expect_refused(&s, IMM_FIN);
	expect_refused(&s, 1);
}

static void flags_together_or_fin_with_length_are_refused(void **state)
{
	struct stream s = fresh();

	send_now(&s, 100);
	expect_refused(&s, IMM_CREDIT | IMM_FIN | 10);
	expect_refused(&s, IMM_FIN | 10);
}

static void window_counts_staged_bytes_not_yet_posted(void **state)
{
	struct stream s = fresh();

	stream_staged(&s, 1000);
	assert_int_equal(stream_unsent(&s), 1000);
	assert_int_equal(stream_send_window(&s, RING), RING - 1000);
}

static void credit_for_bytes_staged_but_not_posted_is_refused(void **state)
{
	struct stream s = fresh();

	stream_staged(&s, 100);
	stream_sent(&s, 60);
	expect_refused(&s, IMM_CREDIT | 61);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | 60), 0);
}

static void next_write_is_everything_unsent_when_idle(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_next_write(&s, 0, 4096), 0);
	stream_staged(&s, 3000);
	assert_int_equal(stream_next_write(&s, 0, 4096), 3000);
	assert_int_equal(stream_next_write(&s, STREAM_CORK_DEPTH - 1, 4096),
			 3000);
}

static void next_write_is_at_most_write_max(void **state)
{
	struct stream s = fresh();

	stream_staged(&s, 10000);
	assert_int_equal(stream_next_write(&s, 0, 4096), 4096);
	stream_sent(&s, 4096);
	assert_int_equal(stream_next_write(&s, 1, 4096), 4096);
	stream_sent(&s, 4096);
	assert_int_equal(stream_next_write(&s, 2, 4096), 10000 - 8192);
}

static void next_write_stops_at_the_rings_end(void **state)
{
	struct stream s = fresh();

	send_now(&s, RING - 100);
	stream_write_completed(&s, RING - 100);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | (RING - 100)), 0);
	stream_staged(&s, 300);
	assert_int_equal(stream_next_write(&s, 0, 4096), 100);
	stream_sent(&s, 100);
	assert_int_equal(stream_next_write(&s, 1, 4096), 200);
}

static void next_write_waits_while_cork_depth_writes_are_in_flight(void **state)
{
	struct stream s = fresh();

	stream_staged(&s, 10);
	assert_int_equal(stream_next_write(&s, STREAM_CORK_DEPTH, 4096), 0);
	stream_staged(&s, 20);
	assert_int_equal(stream_next_write(&s, STREAM_CORK_DEPTH - 1, 4096),
			 30);
}

/* Random immediates from a hostile peer, with the local side sending and
 * consuming in between: the invariants hold whatever is accepted. */
static void random_immediates_never_break_the_invariants(void **state)
{
	struct stream s = fresh();
	unsigned int seed = 12345, refused = 0, i;

	for (i = 0; i < 200000; i++) {
		uint32_t r = rand_r(&seed);
		uint32_t imm = (uint32_t)rand_r(&seed) << 1 ^ r;

		/* Bias towards plausible values so both paths are taken. */
		if (r % 4 == 0)
			imm = r % (RING + 2);
		else if (r % 4 == 1)
			imm = IMM_CREDIT | r % (RING + 2);
		if (stream_apply_imm(&s, imm))
			refused++;
		if (r % 3 == 0)
			stream_staged(&s, stream_send_window(&s, r % 9000));
		if (r % 7 == 0)
			stream_sent(&s, stream_next_write(&s, r % 6, 4096));
		if (r % 5 == 0)
			stream_write_completed(&s, s.tx_tail);
		if (r % 2 == 0)
			stream_consumed(&s, stream_available(&s) / 2);
		if (stream_credit_due(&s))
			stream_credit_sent(&s);
		assert_true(stream_available(&s) <= RING);
		assert_true(s.tx_released <= s.tx_tail);
		assert_true(s.tx_tail <= s.tx_staged);
		assert_true(s.tx_staged - s.tx_released <= RING);
		assert_true(s.tx_completed <= s.tx_tail);
		assert_true(s.rx_credited <= s.rx_head);
	}
	assert_true(refused > 0 && refused < i);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(data_immediate_makes_bytes_available),
		cmocka_unit_test(send_window_is_the_whole_ring_at_first),
		cmocka_unit_test(send_window_waits_for_credit_and_completion),
		cmocka_unit_test(send_limit_bounds_the_bytes_not_yet_consumed),
		cmocka_unit_test(send_limit_is_at_least_the_credit_quantum),
		cmocka_unit_test(send_limit_is_at_most_the_ring),
		cmocka_unit_test(
			lowering_the_send_limit_below_the_unconsumed_stops_sends),
		cmocka_unit_test(completion_beyond_what_was_sent_is_ignored),
		cmocka_unit_test(credit_is_due_after_a_quarter_of_the_ring),
		cmocka_unit_test(fin_gives_eof_after_the_data),
		cmocka_unit_test(data_beyond_the_ring_is_refused),
		cmocka_unit_test(zero_length_data_is_refused),
		cmocka_unit_test(credit_for_bytes_never_sent_is_refused),
		cmocka_unit_test(anything_after_fin_is_refused),
		cmocka_unit_test(flags_together_or_fin_with_length_are_refused),
		cmocka_unit_test(window_counts_staged_bytes_not_yet_posted),
		cmocka_unit_test(
			credit_for_bytes_staged_but_not_posted_is_refused),
		cmocka_unit_test(next_write_is_everything_unsent_when_idle),
		cmocka_unit_test(next_write_is_at_most_write_max),
		cmocka_unit_test(next_write_stops_at_the_rings_end),
		cmocka_unit_test(
			next_write_waits_while_cork_depth_writes_are_in_flight),
		cmocka_unit_test(random_immediates_never_break_the_invariants),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
