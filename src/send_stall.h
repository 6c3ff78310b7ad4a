/* SPDX-License-Identifier: MIT */
/*
 * When a blocking send that waits for credit moves its connection to TCP.
 *
 * Kernel TCP's buffers take megabytes that the peer's program has not
 * read; an RDMA ring takes at most ROCESHIM_RING_KB.  A program that sends
 * that much before it reads the other end in the same thread, or two
 * peers that both send before they read, would wait for ever on RDMA and
 * not on TCP.  So a blocking send that has waited SEND_STALL_MS while the
 * peer's program consumed nothing moves the connection to TCP, whose
 * buffers then take the rest, if what it still has to send and what the
 * peer has not consumed fit what TCP's buffers would have held.  A peer
 * that reads keeps it on RDMA, if it returns credit (a quarter of its
 * ring consumed) at least once in that time.
 *
 * Contract: pure state and arithmetic on the caller's clock (ms) and the
 * transport's counts; one struct send_stall per call.
 */
#ifndef ROCESHIM_SEND_STALL_H
#define ROCESHIM_SEND_STALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEND_STALL_MS 1000
/* tcp_wmem's largest send buffer by default. */
#define SEND_STALL_TCP_BYTES (4u << 20)

struct send_stall {
	bool waiting;
	bool moved;	   /* a move was started: once per call */
	int64_t since_ms;  /* the peer consumed nothing since */
	uint64_t consumed; /* how much it had consumed then */
};

/*
 * The send is about to wait, the peer having consumed consumed bytes of
 * the stream so far: until when, given the call's own deadline (-1: none).
 * A stall that has run its course without a move starts again.
 */
int64_t send_stall_wait_until(struct send_stall *s, uint64_t consumed,
			      int64_t now_ms, int64_t deadline_ms);

/*
 * The wait ended without credit: whether the connection moves now, with
 * unconsumed bytes of this end's stream not consumed by the peer and left
 * bytes of the call still to send.  True at most once.
 */
bool send_stall_moves(struct send_stall *s, uint64_t consumed,
		      uint64_t unconsumed, size_t left, int64_t now_ms);

#endif /* ROCESHIM_SEND_STALL_H */
