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

static void credit_rest_is_every_released_byte_not_yet_credited(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_credit_rest(&s), 0);
	assert_int_equal(stream_apply_imm(&s, RING), 0);
	stream_consumed(&s, RING / 4 + 3);
	stream_credit_sent(&s);
	stream_consumed(&s, 5);
	assert_int_equal(stream_credit_due(&s), 0);
	assert_int_equal(stream_credit_rest(&s), IMM_CREDIT | 5);
	stream_credit_sent(&s);
	assert_int_equal(stream_credit_rest(&s), 0);
}

static void credit_is_due_for_every_byte_once_read_to_the_fin(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, 10), 0);
	assert_int_equal(stream_apply_imm(&s, IMM_FIN), 0);
	stream_consumed(&s, 9);
	assert_int_equal(stream_credit_due(&s), 0);
	stream_consumed(&s, 1);
	assert_int_equal(stream_credit_due(&s), IMM_CREDIT | 10);
	stream_credit_sent(&s);
	assert_int_equal(stream_credit_due(&s), 0);
}

static void no_credit_at_the_fin_after_this_end_sent(void **state)
{
	struct stream s = fresh();

	stream_staged(&s, 1);
	assert_int_equal(stream_apply_imm(&s, 10), 0);
	assert_int_equal(stream_apply_imm(&s, IMM_FIN), 0);
	stream_consumed(&s, 10);
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

/* ---- rings that change size ------------------------------------------- */

#define ADDR 0x00007f123456a000ull
#define RKEY 0x12345678u

/* The five pieces and OFFER of a ring of size bytes at ADDR, key RKEY. */
static void offer(struct stream *s, uint32_t size)
{
	assert_int_equal(
		stream_apply_imm(s, imm_control(STREAM_OP_ADDR_HI, ADDR >> 40)),
		0);
	assert_int_equal(
		stream_apply_imm(s, imm_control(STREAM_OP_ADDR_MID,
						(ADDR >> 16) & 0xffffff)),
		0);
	assert_int_equal(stream_apply_imm(s, imm_control(STREAM_OP_ADDR_LO,
							 ADDR & 0xffff)),
			 0);
	assert_int_equal(
		stream_apply_imm(s, imm_control(STREAM_OP_RKEY_HI, RKEY >> 16)),
		0);
	assert_int_equal(stream_apply_imm(s, imm_control(STREAM_OP_RKEY_LO,
							 RKEY & 0xffff)),
			 0);
	assert_int_equal(stream_apply_imm(s, imm_control(STREAM_OP_OFFER,
							 stream_log2(size))),
			 0);
}

static void a_stalled_sender_asks_for_four_times_its_ring(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_tx_grow_size(&s, 1u << 20), 4 * RING);
	assert_int_equal(stream_tx_grow_size(&s, 2 * RING), 2 * RING);
	assert_int_equal(stream_tx_grow_size(&s, RING), 0);
	stream_tx_asked(&s, 4 * RING);
	assert_int_equal(stream_tx_grow_size(&s, 1u << 20), 0);
	assert_int_equal(
		stream_apply_imm(&s, imm_control(STREAM_OP_NO_GROW, 0)), 0);
	assert_int_equal(stream_tx_grow_size(&s, 1u << 20), 4 * RING);
}

static void a_send_buffer_within_the_ring_asks_for_nothing(void **state)
{
	struct stream s = fresh();

	stream_limit_send(&s, RING);
	assert_int_equal(stream_tx_grow_size(&s, 1u << 20), 0);
	stream_limit_send(&s, RING + 1);
	assert_int_equal(stream_tx_grow_size(&s, 1u << 20), 4 * RING);
}

static void an_offer_assembles_its_address_and_key(void **state)
{
	struct stream s = fresh();

	stream_tx_asked(&s, 4 * RING);
	offer(&s, 4 * RING);
	assert_int_equal(s.tx_offer.size, 4 * RING);
	assert_true(s.tx_offer.addr == ADDR);
	assert_int_equal(s.tx_offer.rkey, RKEY);
	assert_int_equal(s.tx_asked, 0);
}

static void an_offer_without_all_its_pieces_is_refused(void **state)
{
	struct stream s = fresh();

	expect_refused(&s, imm_control(STREAM_OP_OFFER, stream_log2(RING)));
	assert_int_equal(
		stream_apply_imm(&s, imm_control(STREAM_OP_ADDR_HI, 1)), 0);
	expect_refused(&s, imm_control(STREAM_OP_OFFER, stream_log2(RING)));
}

static void a_second_offer_before_the_answer_is_refused(void **state)
{
	struct stream s = fresh();

	offer(&s, 4 * RING);
	expect_refused(&s, imm_control(STREAM_OP_ADDR_HI, 1));
	expect_refused(&s, imm_control(STREAM_OP_OFFER, stream_log2(RING)));
}

static void pieces_out_of_range_and_invalid_sizes_are_refused(void **state)
{
	struct stream s = fresh();

	expect_refused(&s, imm_control(STREAM_OP_ADDR_LO, 0x10000));
	expect_refused(&s, imm_control(STREAM_OP_RKEY_HI, 0x10000));
	expect_refused(&s, imm_control(STREAM_OP_RKEY_LO, 0x10000));
	expect_refused(&s, imm_control(STREAM_OP_GROW, 11)); /* 2 KiB */
	expect_refused(&s, imm_control(STREAM_OP_GROW, 30)); /* 1 GiB */
	expect_refused(&s, imm_control(STREAM_OP_GROW, 0xffffff));
	expect_refused(&s, imm_control(STREAM_OP_NO_GROW, 1));
	expect_refused(&s, imm_control(0, 0));
	expect_refused(&s, imm_control(IMM_OP_MASK, 0));
}

static void a_grow_request_is_remembered_until_offered(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, imm_control(STREAM_OP_GROW,
							  stream_log2(RING))),
			 0);
	assert_int_equal(s.rx_wanted, 0); /* no bigger than the ring */
	assert_int_equal(
		stream_apply_imm(
			&s, imm_control(STREAM_OP_GROW, stream_log2(4 * RING))),
		0);
	assert_int_equal(s.rx_wanted, 4 * RING);
	assert_true(stream_rx_may_offer(&s));
	stream_rx_offered(&s, 4 * RING);
	assert_int_equal(s.rx_wanted, 0);
	assert_false(stream_rx_may_offer(&s));
}

static void unread_bytes_count_against_the_new_ring(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, RING - 10), 0);
	stream_rx_offered(&s, 4 * RING);
	assert_int_equal(
		stream_apply_imm(&s, imm_control(STREAM_OP_SWITCH,
						 stream_log2(4 * RING))),
		0);
	assert_int_equal(s.rx_size, 4 * RING);
	assert_int_equal(stream_available(&s), RING - 10);
	/* The unread bytes moved to the new ring: it holds the rest. */
	assert_int_equal(stream_apply_imm(&s, 3 * RING + 10), 0);
	expect_refused(&s, 1);
	stream_consumed(&s, 1);
	assert_int_equal(stream_apply_imm(&s, 1), 0);
	assert_true(stream_rx_may_offer(&s));
}

static void a_switch_the_unread_bytes_would_not_fit_is_refused(void **state)
{
	struct stream s;

	stream_init(&s, 4 * RING);
	assert_int_equal(stream_apply_imm(&s, RING + 1), 0);
	stream_rx_offered(&s, RING);
	expect_refused(&s, imm_control(STREAM_OP_SWITCH, stream_log2(RING)));
	stream_consumed(&s, 1);
	assert_int_equal(stream_apply_imm(&s, imm_control(STREAM_OP_SWITCH,
							  stream_log2(RING))),
			 0);
	assert_int_equal(s.rx_size, RING);
}

static void credit_follows_the_new_ring_size(void **state)
{
	struct stream s = fresh();

	stream_rx_offered(&s, 4 * RING);
	assert_int_equal(
		stream_apply_imm(&s, imm_control(STREAM_OP_SWITCH,
						 stream_log2(4 * RING))),
		0);
	assert_int_equal(stream_apply_imm(&s, 2 * RING), 0);
	stream_consumed(&s, RING / 4);
	assert_int_equal(stream_credit_due(&s), 0);
	stream_consumed(&s, 3 * RING / 4);
	assert_int_equal(stream_credit_due(&s), IMM_CREDIT | RING);
}

static void switch_or_decline_of_no_offer_is_refused(void **state)
{
	struct stream s = fresh();

	expect_refused(&s, imm_control(STREAM_OP_SWITCH, stream_log2(RING)));
	expect_refused(&s, imm_control(STREAM_OP_DECLINE, stream_log2(RING)));
	stream_rx_offered(&s, 4 * RING);
	expect_refused(&s, imm_control(STREAM_OP_SWITCH, stream_log2(RING)));
	expect_refused(&s,
		       imm_control(STREAM_OP_DECLINE, stream_log2(2 * RING)));
	assert_int_equal(
		stream_apply_imm(&s, imm_control(STREAM_OP_DECLINE,
						 stream_log2(4 * RING))),
		0);
	assert_int_equal(s.rx_size, RING);
	assert_true(stream_rx_may_offer(&s));
}

static void the_peers_fin_forgets_an_offer_and_a_request(void **state)
{
	struct stream s = fresh();

	assert_int_equal(
		stream_apply_imm(
			&s, imm_control(STREAM_OP_GROW, stream_log2(4 * RING))),
		0);
	stream_rx_offered(&s, 4 * RING);
	assert_int_equal(
		stream_apply_imm(&s, imm_control(STREAM_OP_GROW,
						 stream_log2(16 * RING))),
		0);
	assert_int_equal(stream_apply_imm(&s, IMM_FIN), 0);
	stream_rx_forget_offer(&s);
	assert_int_equal(s.rx_offered, 0);
	assert_int_equal(s.rx_wanted, 0);
	assert_int_equal(s.rx_size, RING);
	assert_false(stream_rx_may_offer(&s));
}

static void a_sender_may_not_resize_after_its_fin(void **state)
{
	struct stream s = fresh();

	stream_rx_offered(&s, 4 * RING);
	assert_int_equal(stream_apply_imm(&s, IMM_FIN), 0);
	expect_refused(&s,
		       imm_control(STREAM_OP_SWITCH, stream_log2(4 * RING)));
	expect_refused(&s, imm_control(STREAM_OP_GROW, stream_log2(4 * RING)));
	assert_false(stream_rx_may_offer(&s));
}

static void a_receiver_may_offer_after_its_fin(void **state)
{
	struct stream s = fresh();

	assert_int_equal(stream_apply_imm(&s, IMM_FIN), 0);
	offer(&s, 4 * RING);
	assert_int_equal(
		stream_apply_imm(&s, imm_control(STREAM_OP_NO_GROW, 0)), 0);
}

static void the_sender_switch_takes_the_offered_size(void **state)
{
	struct stream s = fresh();

	stream_limit_send(&s, 2 * RING);
	assert_int_equal(s.tx_limit, RING);
	send_now(&s, RING);
	offer(&s, 4 * RING);
	assert_true(stream_tx_fits(&s, 4 * RING));
	stream_tx_switched(&s);
	assert_int_equal(s.tx_size, 4 * RING);
	assert_int_equal(s.tx_limit, 2 * RING);
	assert_int_equal(s.tx_offer.size, 0);
	stream_write_completed(&s, RING);
	assert_int_equal(stream_send_window(&s, 1u << 30), RING);
	assert_int_equal(stream_next_write(&s, 0, 1u << 20), 0);
}

/*
 * Credit goes back a quarter of the ring at a time; an idle ring offered
 * back at its start, with the rest of the credit sent first, fits.
 */
static void an_idle_shrink_fits_once_all_credit_is_back(void **state)
{
	struct stream t, r;
	unsigned int i;

	stream_init(&t, 8 * RING);
	stream_init(&r, 8 * RING);
	for (i = 0; i < 5; i++) {
		send_now(&t, 30 * RING / 16);
		stream_write_completed(&t, t.tx_tail);
		assert_int_equal(stream_apply_imm(&r, 30 * RING / 16), 0);
		stream_consumed(&r, 30 * RING / 16);
		if (stream_credit_due(&r)) {
			assert_int_equal(
				stream_apply_imm(&t, stream_credit_due(&r)), 0);
			stream_credit_sent(&r);
		}
	}
	assert_false(stream_tx_fits(&t, RING));
	assert_int_equal(stream_apply_imm(&t, stream_credit_rest(&r)), 0);
	stream_credit_sent(&r);
	assert_true(stream_tx_fits(&t, RING));
}

static void a_smaller_ring_fits_only_the_bytes_to_keep(void **state)
{
	struct stream s = fresh();

	send_now(&s, RING / 2);
	assert_false(stream_tx_fits(&s, RING / 4));
	assert_true(stream_tx_fits(&s, RING / 2));
	stream_write_completed(&s, RING / 2);
	assert_int_equal(stream_apply_imm(&s, IMM_CREDIT | (RING / 2 - 100)),
			 0);
	assert_true(stream_tx_fits(&s, RING / 4));
	stream_staged(&s, RING / 4);
	assert_false(stream_tx_fits(&s, RING / 4));
}

/*
 * Both ends of one direction as the transport drives them, with the
 * immediates in flight in order, completions that lag, random traffic
 * and random resizes (offers, declines, idle shrinks): no immediate of a
 * correct end is ever refused, and neither ring ever holds more than its
 * size.
 */
struct wire_model {
	uint32_t imms[4096];
	unsigned int head, tail;
};

static void model_post(struct wire_model *w, uint32_t imm)
{
	w->imms[w->tail++ % 4096] = imm;
}

static void model_deliver(struct wire_model *w, struct stream *to,
			  unsigned int n)
{
	while (n-- && w->head != w->tail)
		assert_int_equal(
			stream_apply_imm(to, w->imms[w->head++ % 4096]), 0);
}

static void post_offer_model(struct wire_model *w, struct stream *r,
			     uint32_t size)
{
	stream_rx_offered(r, size);
	model_post(w, imm_control(STREAM_OP_ADDR_HI, 0));
	model_post(w, imm_control(STREAM_OP_ADDR_MID, 0));
	model_post(w, imm_control(STREAM_OP_ADDR_LO, 0));
	model_post(w, imm_control(STREAM_OP_RKEY_HI, 0));
	model_post(w, imm_control(STREAM_OP_RKEY_LO, 0));
	model_post(w, imm_control(STREAM_OP_OFFER, stream_log2(size)));
}

static void resizing_under_random_traffic_keeps_both_ends_agreed(void **state)
{
	struct stream t, r;
	struct wire_model to_r = { 0 }, to_t = { 0 };
	unsigned int seed = 4242, i, switches = 0, shrinks = 0;
	const uint32_t start = 4u << 10, max = 256u << 10;

	stream_init(&t, start);
	stream_init(&r, start);
	for (i = 0; i < 300000; i++) {
		uint32_t x = rand_r(&seed), n, size;

		switch (x % 9) {
		case 0: /* the program sends */
			stream_staged(&t, stream_send_window(&t, x % 20000));
			break;
		case 1: /* a write goes out */
			n = stream_next_write(&t, 0, t.tx_size / 4);
			if (n) {
				stream_sent(&t, n);
				model_post(&to_r, n);
			}
			/* Completions come later at times, in order. */
			if (x % 4)
				stream_write_completed(&t, t.tx_tail);
			else
				stream_write_completed(
					&t, (t.tx_completed + t.tx_tail) / 2);
			break;
		case 2: /* the program reads; credit goes back */
			stream_consumed(&r, stream_available(&r) * (x % 3) / 2);
			if (stream_credit_due(&r)) {
				model_post(&to_t, stream_credit_due(&r));
				stream_credit_sent(&r);
			}
			break;
		case 3: /* a stalled sender asks */
			size = stream_tx_grow_size(&t, max);
			if (size && !stream_send_window(&t, 1)) {
				stream_tx_asked(&t, size);
				model_post(&to_r,
					   imm_control(STREAM_OP_GROW,
						       stream_log2(size)));
			}
			break;
		case 4: /* the receiver answers, or shrinks when idle */
			if (!stream_rx_may_offer(&r))
				break;
			if (r.rx_wanted) {
				size = r.rx_wanted < max ? r.rx_wanted : max;
				post_offer_model(&to_t, &r, size);
			} else if (x % 7 == 0 && r.rx_size > start &&
				   !stream_available(&r)) {
				/* As the idle check does: all credit first. */
				if (stream_credit_rest(&r)) {
					model_post(&to_t,
						   stream_credit_rest(&r));
					stream_credit_sent(&r);
				}
				post_offer_model(&to_t, &r, start);
			}
			break;
		case 5: /* the sender switches or declines */
			if (!t.tx_offer.size)
				break;
			size = t.tx_offer.size;
			if (stream_tx_fits(&t, size) && x % 4) {
				model_post(&to_r,
					   imm_control(STREAM_OP_SWITCH,
						       stream_log2(size)));
				shrinks += size < t.tx_size;
				stream_tx_switched(&t);
				switches++;
			} else {
				model_post(&to_r,
					   imm_control(STREAM_OP_DECLINE,
						       stream_log2(size)));
				stream_tx_declined(&t);
			}
			break;
		case 6:
			model_deliver(&to_r, &r, x % 5);
			break;
		case 7:
			model_deliver(&to_t, &t, x % 5);
			break;
		default:
			if (r.rx_wanted > r.rx_size && !stream_rx_may_offer(&r))
				break;
			if (r.rx_wanted && r.rx_wanted <= r.rx_size) {
				r.rx_wanted = 0;
				model_post(&to_t,
					   imm_control(STREAM_OP_NO_GROW, 0));
			}
			break;
		}
		assert_true(t.tx_staged - t.tx_released <= t.tx_size);
		assert_true(r.rx_tail - r.rx_head <= r.rx_size);
		assert_true(r.rx_head <= r.rx_tail);
	}
	assert_true(switches > 100);
	assert_true(shrinks > 0);
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
		cmocka_unit_test(
			credit_is_due_for_every_byte_once_read_to_the_fin),
		cmocka_unit_test(no_credit_at_the_fin_after_this_end_sent),
		cmocka_unit_test(
			credit_rest_is_every_released_byte_not_yet_credited),
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
		cmocka_unit_test(a_stalled_sender_asks_for_four_times_its_ring),
		cmocka_unit_test(
			a_send_buffer_within_the_ring_asks_for_nothing),
		cmocka_unit_test(an_offer_assembles_its_address_and_key),
		cmocka_unit_test(an_offer_without_all_its_pieces_is_refused),
		cmocka_unit_test(a_second_offer_before_the_answer_is_refused),
		cmocka_unit_test(
			pieces_out_of_range_and_invalid_sizes_are_refused),
		cmocka_unit_test(a_grow_request_is_remembered_until_offered),
		cmocka_unit_test(unread_bytes_count_against_the_new_ring),
		cmocka_unit_test(
			a_switch_the_unread_bytes_would_not_fit_is_refused),
		cmocka_unit_test(credit_follows_the_new_ring_size),
		cmocka_unit_test(switch_or_decline_of_no_offer_is_refused),
		cmocka_unit_test(the_peers_fin_forgets_an_offer_and_a_request),
		cmocka_unit_test(a_sender_may_not_resize_after_its_fin),
		cmocka_unit_test(a_receiver_may_offer_after_its_fin),
		cmocka_unit_test(the_sender_switch_takes_the_offered_size),
		cmocka_unit_test(a_smaller_ring_fits_only_the_bytes_to_keep),
		cmocka_unit_test(an_idle_shrink_fits_once_all_credit_is_back),
		cmocka_unit_test(
			resizing_under_random_traffic_keeps_both_ends_agreed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
