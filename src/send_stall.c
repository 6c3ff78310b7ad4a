// SPDX-License-Identifier: MIT
#include "send_stall.h"

int64_t send_stall_wait_until(struct send_stall *s, uint64_t consumed,
			      int64_t now_ms, int64_t deadline_ms)
{
	int64_t until;

	if (!s->waiting || consumed != s->consumed ||
	    now_ms - s->since_ms >= SEND_STALL_MS) {
		s->waiting = true;
		s->since_ms = now_ms;
		s->consumed = consumed;
	}
	until = s->since_ms + SEND_STALL_MS;
	return deadline_ms >= 0 && deadline_ms < until ? deadline_ms : until;
}

bool send_stall_moves(struct send_stall *s, uint64_t consumed,
		      uint64_t unconsumed, size_t left, int64_t now_ms)
{
	if (s->moved || !s->waiting || consumed != s->consumed ||
	    now_ms - s->since_ms < SEND_STALL_MS ||
	    unconsumed + left > SEND_STALL_TCP_BYTES)
		return false;
	s->moved = true;
	return true;
}
