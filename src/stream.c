// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include "ring.h"
#include "stream.h"

/* The offer's five pieces, a bit each (STREAM_OP_ADDR_HI first). */
#define OFFER_PIECES 0x1fu

static void set_tx_limit(struct stream *s)
{
	uint32_t bytes = s->tx_limit_asked;
	uint32_t least = s->tx_size / 4;

	if (!bytes || bytes > s->tx_size)
		bytes = s->tx_size;
	s->tx_limit = bytes < least ? least : bytes;
}

void stream_init(struct stream *s, uint32_t ring_size)
{
	memset(s, 0, sizeof(*s));
	s->tx_size = ring_size;
	s->rx_size = ring_size;
	set_tx_limit(s);
}

void stream_limit_send(struct stream *s, uint32_t bytes)
{
	s->tx_limit_asked = bytes;
	set_tx_limit(s);
}

uint32_t stream_send_window(const struct stream *s, size_t len)
{
	uint64_t unconsumed = s->tx_staged - s->tx_released;
	uint64_t credit =
		unconsumed < s->tx_limit ? s->tx_limit - unconsumed : 0;
	uint64_t staging = ring_free(s->tx_staged, s->tx_completed, s->tx_size);
	uint64_t n = credit < staging ? credit : staging;

	return len < n ? (uint32_t)len : (uint32_t)n;
}

void stream_staged(struct stream *s, uint32_t n)
{
	s->tx_staged += n;
}

uint32_t stream_next_write(const struct stream *s, unsigned int in_flight,
			   uint32_t write_max)
{
	uint64_t len = stream_unsent(s);

	if (in_flight >= STREAM_CORK_DEPTH)
		return 0;
	if (len > write_max)
		len = write_max;
	return ring_contiguous(s->tx_tail, len, s->tx_size);
}

void stream_sent(struct stream *s, uint32_t n)
{
	s->tx_tail += n;
}

void stream_write_completed(struct stream *s, uint64_t end)
{
	if (end > s->tx_completed && end <= s->tx_tail)
		s->tx_completed = end;
}

unsigned int stream_log2(uint32_t size)
{
	return (unsigned int)__builtin_ctz(size);
}

/* The ring size an argument names, or 0 if it names none. */
static uint32_t size_of_log2(uint32_t arg)
{
	if (arg >= 32 || !ring_size_valid(1ull << arg))
		return 0;
	return 1u << arg;
}

/* A piece of an offered ring's address or key. */
static int apply_piece(struct stream *s, enum stream_op op, uint32_t arg)
{
	struct stream_offer *o = &s->tx_offer;

	if (o->size)
		return -EPROTO;
	switch (op) {
	case STREAM_OP_ADDR_HI:
		o->addr = (o->addr & ~(0xffffffull << 40)) | (uint64_t)arg
								     << 40;
		break;
	case STREAM_OP_ADDR_MID:
		o->addr = (o->addr & ~(0xffffffull << 16)) | (uint64_t)arg
								     << 16;
		break;
	case STREAM_OP_ADDR_LO:
		if (arg > 0xffff)
			return -EPROTO;
		o->addr = (o->addr & ~0xffffull) | arg;
		break;
	case STREAM_OP_RKEY_HI:
		if (arg > 0xffff)
			return -EPROTO;
		o->rkey = (o->rkey & 0xffffu) | arg << 16;
		break;
	default: /* STREAM_OP_RKEY_LO */
		if (arg > 0xffff)
			return -EPROTO;
		o->rkey = (o->rkey & ~0xffffu) | arg;
		break;
	}
	o->pieces |= 1u << (op - STREAM_OP_ADDR_HI);
	return 0;
}

/*
 * A control message.  What the peer says as the receiver of this end's
 * stream (an offer, NO_GROW) may come at any time, like credit; what it
 * says as a sender (GROW, SWITCH, DECLINE) only before its FIN.
 */
static int apply_control(struct stream *s, uint32_t imm)
{
	enum stream_op op = imm_op(imm);
	uint32_t arg = imm & IMM_ARG_MASK, size = size_of_log2(arg);

	switch (op) {
	case STREAM_OP_GROW:
		if (s->rx_eof || !size)
			return -EPROTO;
		if (size > s->rx_size && size > s->rx_wanted)
			s->rx_wanted = size;
		return 0;
	case STREAM_OP_SWITCH:
		/* The bytes not yet read move to the new ring: they fit. */
		if (s->rx_eof || !s->rx_offered || size != s->rx_offered ||
		    stream_available(s) > size)
			return -EPROTO;
		s->rx_size = s->rx_offered;
		s->rx_offered = 0;
		return 0;
	case STREAM_OP_DECLINE:
		if (s->rx_eof || !s->rx_offered || size != s->rx_offered)
			return -EPROTO;
		s->rx_offered = 0;
		return 0;
	case STREAM_OP_ADDR_HI:
	case STREAM_OP_ADDR_MID:
	case STREAM_OP_ADDR_LO:
	case STREAM_OP_RKEY_HI:
	case STREAM_OP_RKEY_LO:
		return apply_piece(s, op, arg);
	case STREAM_OP_OFFER:
		if (s->tx_offer.size || s->tx_offer.pieces != OFFER_PIECES ||
		    !size)
			return -EPROTO;
		s->tx_offer.size = size;
		s->tx_offer.pieces = 0;
		s->tx_asked = 0;
		return 0;
	case STREAM_OP_NO_GROW:
		if (arg)
			return -EPROTO;
		s->tx_asked = 0;
		return 0;
	default:
		return -EPROTO;
	}
}

int stream_apply_imm(struct stream *s, uint32_t imm)
{
	uint32_t arg = imm & IMM_LEN_MASK;

	if (imm_is_control(imm))
		return apply_control(s, imm);
	if (imm & IMM_CREDIT) {
		if (!arg || arg > s->tx_tail - s->tx_released)
			return -EPROTO;
		s->tx_released += arg;
		return 0;
	}
	if (s->rx_eof)
		return -EPROTO;
	if (imm & IMM_FIN) {
		if (arg)
			return -EPROTO;
		s->rx_eof = true;
		return 0;
	}
	if (!arg || stream_available(s) + arg > s->rx_size)
		return -EPROTO;
	s->rx_tail += arg;
	return 0;
}

void stream_consumed(struct stream *s, uint32_t n)
{
	s->rx_head += n;
}

uint32_t stream_credit_due(const struct stream *s)
{
	uint64_t delta = s->rx_head - s->rx_credited;

	if (delta && s->rx_eof && !stream_available(s) && !s->tx_staged)
		return IMM_CREDIT | (uint32_t)delta;
	return delta >= s->rx_size / 4 ? IMM_CREDIT | (uint32_t)delta : 0;
}

uint32_t stream_credit_rest(const struct stream *s)
{
	uint64_t delta = s->rx_head - s->rx_credited;

	return delta ? IMM_CREDIT | (uint32_t)delta : 0;
}

void stream_credit_sent(struct stream *s)
{
	s->rx_credited = s->rx_head;
}

bool stream_rx_may_offer(const struct stream *s)
{
	return !s->rx_offered && !s->rx_eof;
}

void stream_rx_offered(struct stream *s, uint32_t size)
{
	s->rx_offered = size;
	s->rx_wanted = 0;
}

void stream_rx_forget_offer(struct stream *s)
{
	s->rx_offered = 0;
	s->rx_wanted = 0;
}

uint32_t stream_tx_grow_size(const struct stream *s, uint32_t max)
{
	uint32_t want;

	if (s->tx_asked || s->tx_offer.size || s->tx_size >= max)
		return 0;
	if (s->tx_limit_asked && s->tx_limit_asked <= s->tx_size)
		return 0;
	want = s->tx_size * 4;
	return want < max ? want : max;
}

void stream_tx_asked(struct stream *s, uint32_t size)
{
	s->tx_asked = size;
}

bool stream_tx_fits(const struct stream *s, uint32_t size)
{
	uint64_t from = s->tx_released < s->tx_completed ? s->tx_released
							 : s->tx_completed;

	return s->tx_staged - from <= size;
}

void stream_tx_switched(struct stream *s)
{
	s->tx_size = s->tx_offer.size;
	memset(&s->tx_offer, 0, sizeof(s->tx_offer));
	set_tx_limit(s);
}

void stream_tx_declined(struct stream *s)
{
	memset(&s->tx_offer, 0, sizeof(s->tx_offer));
}
