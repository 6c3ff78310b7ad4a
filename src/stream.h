/* SPDX-License-Identifier: MIT */
/*
 * The stream protocol's state at one end, without any verbs: what may be
 * sent, what has arrived, and what the peer's immediate values mean.
 * transport.c drives it; the unit tests drive it with hostile input.
 *
 * Immediates: a data length (1..ring size), or IMM_CREDIT with the number
 * of bytes the peer's reader released, or IMM_FIN alone.  An immediate
 * that does not fit the state (more data than the ring holds, credit for
 * bytes never sent, anything after FIN) is refused and changes nothing.
 */
#ifndef ROCESHIM_STREAM_H
#define ROCESHIM_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMM_CREDIT   0x80000000u
#define IMM_FIN	     0x40000000u
#define IMM_LEN_MASK 0x3fffffffu

struct stream {
	uint32_t ring_size;    /* both rings: a valid ring size (ring.h) */
	uint32_t tx_limit;     /* bytes sent and not yet consumed, at most */
	uint64_t tx_staged;    /* bytes copied into the staging ring */
	uint64_t tx_tail;      /* bytes posted to the peer's ring */
	uint64_t tx_released;  /* the peer has consumed up to here */
	uint64_t tx_completed; /* local staging free up to here */
	uint64_t rx_head;      /* consumed from our ring */
	uint64_t rx_tail;      /* arrived in our ring */
	uint64_t rx_credited;  /* rx_head last reported to the peer */
	bool rx_eof;
};

void stream_init(struct stream *s, uint32_t ring_size);

/*
 * Bounds the bytes sent and not yet consumed by the peer, as a TCP
 * socket's send buffer bounds what a send may queue (SO_SNDBUF), between
 * a quarter of the ring and the whole ring (the default): the peer
 * returns credit once a quarter of the ring has been consumed, so a
 * smaller bound would wait for credit that never comes.
 */
void stream_limit_send(struct stream *s, uint32_t bytes);

/*
 * Sending is two steps: bytes are staged (copied into the staging ring,
 * which mirrors the peer's), then posted, perhaps later and together.
 * How many of len bytes may be staged now (credit and staging room).
 */
uint32_t stream_send_window(const struct stream *s, size_t len);
void stream_staged(struct stream *s, uint32_t n);
static inline uint64_t stream_unsent(const struct stream *s)
{
	return s->tx_staged - s->tx_tail;
}

/*
 * Writes in flight at which staged bytes wait, corked, for the next
 * completion, which posts all of them in one write.  They would queue
 * behind the writes in flight anyway; a stream of small sends then costs
 * a doorbell per completion, not one per send.
 */
#define STREAM_CORK_DEPTH 4

/*
 * The length of the next write to post, with in_flight writes not yet
 * completed: the unsent bytes, up to write_max and the ring's end; 0 when
 * nothing is unsent or the stream is corked.
 */
uint32_t stream_next_write(const struct stream *s, unsigned int in_flight,
			   uint32_t write_max);
/* n staged bytes (at most stream_unsent()) were posted. */
void stream_sent(struct stream *s, uint32_t n);
/* The write ending at position end has completed locally. */
void stream_write_completed(struct stream *s, uint64_t end);

/* Applies an immediate from the peer: 0, or -EPROTO (state unchanged). */
int stream_apply_imm(struct stream *s, uint32_t imm);

static inline uint64_t stream_available(const struct stream *s)
{
	return s->rx_tail - s->rx_head;
}

void stream_consumed(struct stream *s, uint32_t n);
/* The credit immediate due now (a quarter of the ring released), or 0. */
uint32_t stream_credit_due(const struct stream *s);
void stream_credit_sent(struct stream *s);

#endif /* ROCESHIM_STREAM_H */
