// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include "ring.h"
#include "stream.h"

void stream_init(struct stream *s, uint32_t ring_size)
{
	memset(s, 0, sizeof(*s));
	s->ring_size = ring_size;
	s->tx_limit = ring_size;
}

void stream_limit_send(struct stream *s, uint32_t bytes)
{
	uint32_t least = s->ring_size / 4;

	if (bytes < least)
		bytes = least;
	s->tx_limit = bytes < s->ring_size ? bytes : s->ring_size;
}

uint32_t stream_send_window(const struct stream *s, size_t len)
{
	uint64_t unconsumed = s->tx_staged - s->tx_released;
	uint64_t credit =
		unconsumed < s->tx_limit ? s->tx_limit - unconsumed : 0;
	uint64_t staging =
		ring_free(s->tx_staged, s->tx_completed, s->ring_size);
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
	return ring_contiguous(s->tx_tail, len, s->ring_size);
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

int stream_apply_imm(struct stream *s, uint32_t imm)
{
	uint32_t arg = imm & IMM_LEN_MASK;

	if (imm & IMM_CREDIT) {
		if (imm & IMM_FIN || !arg || arg > s->tx_tail - s->tx_released)
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
	if (!arg || stream_available(s) + arg > s->ring_size)
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

	return delta >= s->ring_size / 4 ? IMM_CREDIT | (uint32_t)delta : 0;
}

void stream_credit_sent(struct stream *s)
{
	s->rx_credited = s->rx_head;
}
