/* SPDX-License-Identifier: MIT */
/*
 * A send queue: the bytes a program sent past the peer's ring, held in
 * plain memory until credit lets them into the staging ring.
 *
 * Kernel TCP takes megabytes from a sender whose peer is not reading (its
 * send buffer, up to tcp_wmem's largest, besides the peer's receive
 * buffer); an RDMA ring takes what its credit allows.  A program that
 * waits for writability before it reads would wait for ever where TCP
 * returns.  The queue is that send buffer: first in, first out, in chunks
 * that come as bytes are queued and go as they leave, so that an idle
 * connection holds none.
 *
 * Contract: not thread safe (the transport's lock guards it); never
 * blocks.  send_queue_push() takes what fits max and memory allows.
 */
#ifndef ROCESHIM_SEND_QUEUE_H
#define ROCESHIM_SEND_QUEUE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Bytes a chunk holds: one staging write at most, and a cheap malloc. */
#define SEND_QUEUE_CHUNK (64u << 10)

struct send_queue_chunk;

struct send_queue {
	struct send_queue_chunk *head, *tail;
	size_t head_off; /* bytes of head already gone */
	size_t tail_len; /* bytes in tail */
	size_t len;	 /* bytes queued */
};

static inline size_t send_queue_len(const struct send_queue *q)
{
	return q->len;
}

/*
 * Appends the bytes of iov after its first skip, so long as the queue
 * holds at most max; returns how many it took (fewer if memory ran out).
 */
size_t send_queue_push(struct send_queue *q, const struct iovec *iov,
		       int iovcnt, size_t skip, size_t max);
/*
 * The longest run of queued bytes that starts off bytes past the first
 * and lies in one chunk: *p points at it; 0 if off is past the end.
 */
size_t send_queue_piece(const struct send_queue *q, size_t off,
			const uint8_t **p);
/* The first n queued bytes (at most all) are gone. */
void send_queue_drop(struct send_queue *q, size_t n);
void send_queue_clear(struct send_queue *q);

#endif /* ROCESHIM_SEND_QUEUE_H */
