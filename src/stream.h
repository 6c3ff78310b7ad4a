/* SPDX-License-Identifier: MIT */
/*
 * The stream protocol's state at one end, without any verbs: what may be
 * sent, what has arrived, what the peer's immediate values mean, and
 * where each direction's ring stands while it is resized.  transport.c
 * drives it; the unit tests drive it with hostile input.
 *
 * Immediates: a data length (1..ring size), or IMM_CREDIT with the number
 * of bytes the peer's reader released, or IMM_FIN alone, or a control
 * message (both flags: an op and its argument, below).  An immediate
 * that does not fit the state (more data than the ring holds, credit for
 * bytes never sent, data after FIN, an answer to no question) is refused
 * and changes nothing.
 *
 * Each direction's ring belongs to its receiver, and the sender's staging
 * ring mirrors it (the same size, the same offsets).  Either can change
 * size mid-stream (docs/design.md, "Rings that grow and shrink"):
 *   - the sender, short of credit, asks for a bigger ring (GROW);
 *   - the receiver registers a ring and names it (the address and key in
 *     five pieces, then OFFER with its size), or says NO_GROW; an idle
 *     receiver offers a smaller one on its own;
 *   - the sender moves its staging to the offered size and says SWITCH:
 *     its writes after that immediate go to the new ring, at offsets
 *     taken modulo the new size; or it says DECLINE.
 * The connection is ordered, so every write before SWITCH has landed in
 * the old ring when SWITCH comes, and every write after it lands in the
 * new one.  The receiver then copies the bytes it has not read yet to
 * their offsets in the new ring and frees the old one: the sender writes
 * no further than one ring past what the reader released, so those
 * offsets are free, and a SWITCH to a ring that the unread bytes would
 * not fit is refused.  One offer at a time per direction.
 */
#ifndef ROCESHIM_STREAM_H
#define ROCESHIM_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IMM_CREDIT   0x80000000u
#define IMM_FIN	     0x40000000u
#define IMM_LEN_MASK 0x3fffffffu

#define IMM_CONTROL  (IMM_CREDIT | IMM_FIN)
#define IMM_OP_SHIFT 24
#define IMM_OP_MASK  0x3fu
#define IMM_ARG_MASK 0x00ffffffu

enum stream_op {
	/* From the sender of a direction to its receiver. */
	STREAM_OP_GROW = 1,    /* arg: log2 of the ring size that would help */
	STREAM_OP_SWITCH = 2,  /* arg: log2 of the offered size, now in use */
	STREAM_OP_DECLINE = 3, /* arg: log2 of the offered size, not taken */
	/* From the receiver of a direction to its sender. */
	STREAM_OP_ADDR_HI = 8,	/* arg: bits 63..40 of the offered ring */
	STREAM_OP_ADDR_MID = 9, /* arg: bits 39..16 */
	STREAM_OP_ADDR_LO = 10, /* arg: bits 15..0 */
	STREAM_OP_RKEY_HI = 11, /* arg: bits 31..16 of its rkey */
	STREAM_OP_RKEY_LO = 12, /* arg: bits 15..0 */
	STREAM_OP_OFFER = 13,	/* arg: log2 of its size; the pieces are all */
	STREAM_OP_NO_GROW = 14	/* the ring stays as it is for now */
};

/* The immediate of control message op with argument arg. */
static inline uint32_t imm_control(enum stream_op op, uint32_t arg)
{
	return IMM_CONTROL | (uint32_t)op << IMM_OP_SHIFT |
	       (arg & IMM_ARG_MASK);
}

static inline bool imm_is_control(uint32_t imm)
{
	return (imm & IMM_CONTROL) == IMM_CONTROL;
}

static inline enum stream_op imm_op(uint32_t imm)
{
	return (enum stream_op)(imm >> IMM_OP_SHIFT & IMM_OP_MASK);
}

/* A ring the peer offered for this end's writes. */
struct stream_offer {
	uint64_t addr;
	uint32_t rkey;
	uint32_t size;	/* 0 until OFFER completes it */
	uint8_t pieces; /* which of the five pieces came (bit per op) */
};

struct stream {
	uint32_t tx_size;	 /* the peer's ring (and the staging ring) */
	uint32_t tx_limit;	 /* bytes sent and not yet consumed, at most */
	uint32_t tx_limit_asked; /* the program's SO_SNDBUF; 0: none */
	uint32_t tx_asked;	 /* a GROW for this size is unanswered */
	uint64_t tx_staged;	 /* bytes copied into the staging ring */
	uint64_t tx_tail;	 /* bytes posted to the peer's ring */
	uint64_t tx_released;	 /* the peer has consumed up to here */
	uint64_t tx_completed;	 /* local staging free up to here */
	struct stream_offer tx_offer;

	uint32_t rx_size;     /* this end's ring the peer writes into now */
	uint32_t rx_offered;  /* a ring offered, unanswered: its size */
	uint32_t rx_wanted;   /* the peer asked for this size, not offered */
	uint64_t rx_head;     /* consumed from our ring */
	uint64_t rx_tail;     /* arrived in our ring */
	uint64_t rx_credited; /* rx_head last reported to the peer */
	bool rx_eof;
};

void stream_init(struct stream *s, uint32_t ring_size);

/*
 * Bounds the bytes sent and not yet consumed by the peer, as a TCP
 * socket's send buffer bounds what a send may queue (SO_SNDBUF), between
 * a quarter of the ring and the whole ring (the default): the peer
 * returns credit once a quarter of the ring has been consumed, so a
 * smaller bound would wait for credit that never comes.  The bound
 * follows the ring when it changes size.
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
/*
 * The credit immediate due now, or 0: a quarter of the ring released, or
 * every byte before the peer's FIN when this end has sent nothing (a
 * sender that closed before it received a byte waits to learn that its
 * bytes are taken: conn.c).
 */
uint32_t stream_credit_due(const struct stream *s);
/* The credit immediate for every byte released and not yet credited, or 0. */
uint32_t stream_credit_rest(const struct stream *s);
void stream_credit_sent(struct stream *s);

/* ---- resizing: the receiver's side ----------------------------------- */

/* Whether a ring may be offered now: none is, and the peer's FIN is not in. */
bool stream_rx_may_offer(const struct stream *s);
/* A ring of size bytes was offered (its pieces and OFFER posted). */
void stream_rx_offered(struct stream *s, uint32_t size);
/*
 * The peer's FIN came: nothing can answer an offer or use a bigger ring
 * any more, so the offer and any request are forgotten.
 */
void stream_rx_forget_offer(struct stream *s);

/* ---- resizing: the sender's side ------------------------------------- */

/*
 * The ring size to ask the peer for, at most max, after a send found no
 * credit: 4 times the ring while the ring, not SO_SNDBUF, bounds the
 * window and no question is open; 0 for none.
 */
uint32_t stream_tx_grow_size(const struct stream *s, uint32_t max);
void stream_tx_asked(struct stream *s, uint32_t size);
/*
 * Whether the staging ring's bytes that must be kept (not yet both
 * consumed by the peer and completed here) fit a ring of size bytes.
 */
bool stream_tx_fits(const struct stream *s, uint32_t size);
/*
 * The offered ring is in use from the current tail on (SWITCH posted),
 * or was declined: the offer is forgotten.
 */
void stream_tx_switched(struct stream *s);
void stream_tx_declined(struct stream *s);

/* log2 of a valid ring size. */
unsigned int stream_log2(uint32_t size);

#endif /* ROCESHIM_STREAM_H */
