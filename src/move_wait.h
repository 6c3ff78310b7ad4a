/* SPDX-License-Identifier: MIT */
/*
 * How long a connection that moves to TCP waits for the peer's marker
 * (conn_move.c).
 *
 * The wait starts with the move timeout (ROCESHIM_CONNECT_TIMEOUT_MS, at
 * least 5 s: handshake_conn_options()).  When it runs out and this end's
 * own marker is still queued on the kernel connection (a link flap, a
 * lossy path), the kernel is still trying, as it would for any TCP byte:
 * the wait starts again, and remembers the
 * largest retransmission timeout the stall reached.  Once the path carried
 * the marker, the peer's marker, stalled on the same path, gets another
 * timeout and twice that retransmission timeout.  Never beyond
 * MOVE_WAIT_MAX_MS from the move's start: an exec, an exit or a fork
 * child may be waiting for the move.
 *
 * Contract: pure state and arithmetic on the caller's clock; the caller
 * serialises calls on one struct move_wait.
 */
#ifndef ROCESHIM_MOVE_WAIT_H
#define ROCESHIM_MOVE_WAIT_H

#include <stdbool.h>
#include <stdint.h>

#define MOVE_WAIT_MAX_MS 60000

struct move_wait {
	int64_t started_ms;
	int64_t deadline_ms;  /* the peer's marker must have come by then */
	int64_t stall_rto_ms; /* > 0: the path stalled this end's marker */
	int timeout_ms;
};

enum move_wait_verdict {
	MOVE_WAIT_GIVE_UP, /* the move has failed */
	MOVE_WAIT_STALLED, /* this end's marker is still queued: wait on */
	MOVE_WAIT_CARRIED, /* it went out after a stall: the peer's may come */
};

void move_wait_start(struct move_wait *w, int timeout_ms, int64_t now_ms);

/* The first wait of a move that may wait longest, for timeout_ms. */
static inline int move_wait_longest_ms(int timeout_ms)
{
	return timeout_ms > MOVE_WAIT_MAX_MS ? timeout_ms : MOVE_WAIT_MAX_MS;
}

static inline bool move_wait_late(const struct move_wait *w, int64_t now_ms)
{
	return now_ms >= w->deadline_ms;
}

/*
 * The deadline has passed.  queued: bytes of this end the kernel
 * connection has not had acknowledged (SIOCOUTQ), or -1 when that cannot
 * be known; rto_ms: its retransmission timeout.  A verdict other than
 * MOVE_WAIT_GIVE_UP sets a new deadline.
 */
enum move_wait_verdict move_wait_expired(struct move_wait *w, int64_t now_ms,
					 int queued, int64_t rto_ms);

#endif /* ROCESHIM_MOVE_WAIT_H */
