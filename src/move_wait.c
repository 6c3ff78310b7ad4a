// SPDX-License-Identifier: MIT
#include "move_wait.h"

void move_wait_start(struct move_wait *w, int timeout_ms, int64_t now_ms)
{
	w->started_ms = now_ms;
	w->deadline_ms = now_ms + timeout_ms;
	w->stall_rto_ms = 0;
	w->timeout_ms = timeout_ms;
}

enum move_wait_verdict move_wait_expired(struct move_wait *w, int64_t now_ms,
					 int queued, int64_t rto_ms)
{
	if (queued < 0 || now_ms - w->started_ms >= MOVE_WAIT_MAX_MS)
		return MOVE_WAIT_GIVE_UP;
	if (queued > 0) {
		if (rto_ms > w->stall_rto_ms)
			w->stall_rto_ms = rto_ms;
		if (w->stall_rto_ms <= 0)
			w->stall_rto_ms = 1;
		w->deadline_ms = now_ms + w->timeout_ms;
		return MOVE_WAIT_STALLED;
	}
	if (!w->stall_rto_ms)
		return MOVE_WAIT_GIVE_UP;
	w->deadline_ms = now_ms + w->timeout_ms + 2 * w->stall_rto_ms;
	w->stall_rto_ms = 0;
	return MOVE_WAIT_CARRIED;
}
