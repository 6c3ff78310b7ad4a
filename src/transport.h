/* SPDX-License-Identifier: MIT */
/*
 * Transport: a byte stream in each direction over one RC queue pair.
 *
 * Each end owns a receive ring in registered memory that the peer fills
 * with RDMA WRITE WITH IMM; the immediate value tells the receiver how
 * many bytes arrived.  A send copies the bytes into a staging ring and
 * returns; they are posted at once, in pieces of at most 64 KiB, unless
 * several writes are already in flight: then the next completion posts
 * everything staged by then in one write (corking).  A zero-copy send
 * posts its pieces straight from the program's buffer instead (see
 * transport_send_direct()).  Bytes past the credit wait in a send queue
 * in plain memory (send_queue.h), up to a size that grows with the
 * traffic (TRANSPORT_SEND_BUFFER below) or the program's SO_SNDBUF, as
 * they would in TCP's send buffer, and are staged as credit returns;
 * the queue opens once the peer has released nothing
 * for TRANSPORT_QUEUE_OPEN_MS (a peer that keeps up returns credit
 * sooner, and its sender waits for that without a second copy).  The
 * receiver returns space as credits (a
 * zero-length RDMA WRITE WITH IMM), after a quarter of its ring has been
 * consumed.  A zero-length write with the FIN flag ends the stream (the
 * peer reads EOF after the data before it).
 *
 * Rings start small (ring_bytes) and change size with the traffic
 * (stream.h): a sender short of credit asks for four times its ring, up
 * to ring_max at either end, and a receiver whose ring has been idle and
 * empty for TRANSPORT_RING_IDLE_MS offers a ring of
 * TRANSPORT_RING_IDLE_BYTES (or the start, if smaller).
 *
 * Contract: every function is thread safe (one lock per transport) and
 * never blocks, except transport_wait().  Errors are negative errno values:
 * -EAGAIN (no data, no credit), -EPIPE (sending after shutdown),
 * -ECONNRESET (the QP failed or the peer broke the protocol; sticky).
 * Immediate values from the peer are checked before use: one that does not
 * fit the ring's state resets the connection, never corrupts it.
 */
#ifndef ROCESHIM_TRANSPORT_H
#define ROCESHIM_TRANSPORT_H

#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Where the peer may write: exchanged in the connection handshake. */
struct transport_ring_info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t size;
};

struct transport_config {
	uint32_t ring_bytes; /* at the start: a valid ring size (ring.h) */
	uint32_t ring_max;   /* the most: a valid ring size, >= ring_bytes */
	uint32_t send_depth; /* writes posted and not completed, at most */
	uint32_t recv_depth; /* receives posted: the peer's writes not reaped */
	uint32_t max_inline; /* largest message sent inline */
};

struct transport_counters {
	uint64_t tx_bytes;
	uint64_t rx_bytes;
	uint64_t tx_msgs;
	uint64_t rx_msgs;
	uint64_t credit_stalls;	  /* sends that found no credit */
	uint64_t protocol_errors; /* immediates that broke the protocol */
};

struct cq_hub;
struct transport;

/* Creates the PD, CQ, QP (on id) and rings; posts the receives. */
int transport_create(struct rdma_cm_id *id, const struct transport_config *cfg,
		     struct transport **out);
void transport_local_ring(const struct transport *t,
			  struct transport_ring_info *info);
/* Accepts the peer's ring; -EINVAL if its size is not this end's start. */
int transport_connect(struct transport *t,
		      const struct transport_ring_info *peer);

/*
 * The rings' memory, told to fn (with ctx) under the transport's lock on
 * every change, and once at once: sizes now, the bytes registered for
 * them (old and offered rings included while a resize is under way), and
 * what happened.  transport_report_rings() tells it again: after it
 * returns, no call with an older view is under way.  fn must not call
 * the transport.
 */
struct transport_rings {
	uint32_t rx_bytes;     /* this end's ring now */
	uint32_t tx_bytes;     /* the peer's ring, and the staging ring */
	uint64_t pinned_bytes; /* every ring registered now */
};
enum transport_ring_event {
	TRANSPORT_RINGS_CHANGED, /* memory came or went, no resize */
	TRANSPORT_RING_GREW,	 /* this end's ring grew (SWITCH came) */
	TRANSPORT_RING_SHRANK,	 /* this end's ring shrank */
	TRANSPORT_RING_REFUSED	 /* a bigger ring could not be had */
};
typedef void (*transport_rings_fn)(void *ctx, enum transport_ring_event ev,
				   const struct transport_rings *now);
void transport_on_rings(struct transport *t, transport_rings_fn fn, void *ctx);
void transport_report_rings(struct transport *t);

/*
 * A ring idle this long (nothing arrived, nothing unread) shrinks to
 * TRANSPORT_RING_IDLE_BYTES: a connection starts with room for its first
 * burst, and an idle one holds little.  transport_idle_tick() is the progress
 * thread's tick hook that looks for such rings and reaps every connection now
 * and then, so that a request for a bigger ring is answered where nothing else
 * reaps (progress.h); true while a connection is listed.
 */
#define TRANSPORT_RING_IDLE_MS	  5000
#define TRANSPORT_RING_IDLE_BYTES (16u << 10)
bool transport_idle_tick(void);
/* In a fork child, which has no progress thread: the list is not its. */
void transport_fork_child(void);

/*
 * A destroyed transport's protection domain and first rings are kept a
 * while for the next one on the device (transport_spare.c), still pinned:
 * fn learns each change in the bytes they pin.  transport_drop_spares():
 * the device of verbs is going; its spares go first.
 */
void transport_count_spares(void (*fn)(int64_t pinned_delta));
void transport_drop_spares(struct ibv_context *verbs);

/* The bytes of iov. */
static inline size_t iov_bytes(const struct iovec *iov, int iovcnt)
{
	size_t len = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	return len;
}

/*
 * What the send queue holds at most, unless the program set SO_SNDBUF:
 * as TCP's send buffer grows with its window, twice what the connection
 * has put in the peer's ring so far, from about what a new kernel TCP
 * connection's buffer takes (TRANSPORT_SEND_BUFFER) to
 * TRANSPORT_SEND_BUFFER_MAX.  The most stays below tcp_wmem's 4 MiB, so
 * that a stalled blocking send may still move to TCP (send_stall.h).  A
 * queue grows past the first size only while the process's queues hold
 * less than TRANSPORT_QUEUED_MAX together.
 */
#define TRANSPORT_SEND_BUFFER	  (256u << 10)
#define TRANSPORT_SEND_BUFFER_MAX (2u << 20)
#define TRANSPORT_QUEUED_MAX	  (64u << 20)
#define TRANSPORT_QUEUE_OPEN_MS	  50

/*
 * Stages what it can of the bytes of iov after the first skip of them,
 * and queues what the send queue has room for of the rest.  *corked:
 * whether staged or queued bytes now wait for a completion or credit.
 */
ssize_t transport_send(struct transport *t, const struct iovec *iov, int iovcnt,
		       size_t skip, bool *corked);
/* buf NULL: the bytes are taken without a copy (MSG_TRUNC). */
ssize_t transport_recv(struct transport *t, void *buf, size_t len);
/*
 * A peek at the bytes from skip past the next unread one: what there is
 * of len, 0 at the end of the stream, -EAGAIN while nothing is there yet.
 */
ssize_t transport_peek_at(struct transport *t, void *buf, size_t len,
			  uint64_t skip);

/*
 * Zero-copy sending, for a send that may wait until its writes complete:
 * they go out of the program's buffer, registered for the purpose, not
 * out of the staging ring.  transport_register() registers len bytes at
 * buf (NULL: they cannot be; stage them instead).  transport_send_direct()
 * posts what credit allows of len bytes at buf, all within mr, and returns
 * how many; -EAGAIN: no credit; -ENOBUFS: staged bytes must go out first,
 * stage these too; other errors as transport_send().  The bytes must stay
 * registered and unchanged until transport_direct_done() says that the
 * writes up to *end completed, or that they no longer matter (the
 * transport failed, the peer is gone).  transport_direct_done() reaps and
 * arms the channel, like transport_arm(): if it says no, the completion
 * raises an event.
 */
struct ibv_mr *transport_register(struct transport *t, const void *buf,
				  size_t len);
ssize_t transport_send_direct(struct transport *t, struct ibv_mr *mr,
			      const void *buf, size_t len, uint64_t *end);
bool transport_direct_done(struct transport *t, uint64_t end);
/*
 * Whether the send queue is open and has room for len bytes now: within
 * the size the traffic has grown it to if grown, else within the size it
 * has before.  A blocking zero-copy send out of credit copies no more
 * than that into it, and waits for credit instead; one that must not
 * block may take what writability promised.
 */
bool transport_queue_takes(struct transport *t, size_t len, bool grown);
/*
 * A connection out of credit, its send queue closed and empty: in how
 * many ms the queue opens, and the connection becomes writable with no
 * completion to tell (0: now); -1 for any other state.
 */
int transport_queue_opens_in(struct transport *t);
/*
 * Whether a zero-copy send may post now (credit, nothing staged or
 * queued before it) or must look again (an error, a move); reaps and
 * arms as transport_direct_done().  Writability says only that the send
 * queue has room.
 */
bool transport_direct_credit(struct transport *t);
void transport_deregister(struct ibv_mr *mr);
/*
 * The program's send buffer size (SO_SNDBUF, as the kernel reports it):
 * bytes sent and not yet read by the peer stay within it in the ring
 * (stream.h), and so do the bytes in the send queue.
 */
void transport_limit_send(struct transport *t, uint32_t bytes);
/* No more sending; the peer reads EOF once it has the data staged before. */
int transport_shutdown(struct transport *t);
/*
 * For a process that ends without exit(): transport_shutdown(), then a
 * wait until every write, the FIN last, has completed, by deadline_ms
 * (of clock_ms()); its lock is taken by the deadline too (lock_by.h).
 * 0: done; -ECONNRESET: the program left bytes unread, so nothing was
 * sent (a close resets such a connection); -EINPROGRESS: bytes wait in
 * the send queue for a peer that has not read them, and the FIN behind
 * them; -ETIMEDOUT: the deadline passed; or the transport's error.
 */
int transport_finish_by(struct transport *t, int64_t deadline_ms);
/*
 * No more reading, as TCP's SHUT_RD: a read that finds nothing returns EOF
 * at once, and the connection reads as at its end (readable, RDHUP).
 */
void transport_shutdown_read(struct transport *t);
/*
 * Whether bytes came after the program shut down both directions (its
 * SHUT_RD and SHUT_WR), not counting what came before either shutdown.
 * TCP drops such bytes and resets the connection (RFC 1122, 4.2.2.13).
 * The transport drops them too, and a read that finds nothing else fails
 * once with ECONNRESET, then ends.  Telling the peer is the caller's: it
 * resets the kernel socket.  Reaps completions first.
 */
bool transport_late_bytes(struct transport *t);

/*
 * The connection moves to its kernel TCP socket (docs/design.md,
 * "Downgrade").  transport_freeze() stops it: from now on nothing is
 * consumed, staged or posted (sends and reads give -EXDEV, blocking calls
 * find it "ready" and must look at the connection), and the bytes of
 * this end's stream that the peer may not have consumed stay in the
 * staging ring, zero-copy ones included, or in the send queue.  *pos
 * says where both streams stand, *tx_shut whether the program shut down
 * its side; -EALREADY if it was frozen before (pos is still filled).
 * transport_staged_iov() gives the first of the bytes of positions
 * [from, to), staged or queued, in at most two pieces (returns how many;
 * -EINVAL if none is asked for, or they are not all held).
 */
struct wire_positions;
int transport_freeze(struct transport *t, struct wire_positions *pos,
		     bool *tx_shut);
int transport_staged_iov(struct transport *t, uint64_t from, uint64_t to,
			 struct iovec iov[2]);

/*
 * A zero-copy send is done with buf: the bytes it wrote from there that
 * the peer has not consumed are copied into the staging ring (so that
 * they can be sent again over TCP) and forgotten.
 */
void transport_direct_retire(struct transport *t, const void *buf, size_t len);

/*
 * The queue pair failed (a completion with an error: retries exceeded, the
 * device gone), not the peer: the connection may still go on over TCP.
 */
bool transport_qp_failed(struct transport *t);

/* The peer's kernel socket is closed: sends go there, to fail as TCP's. */
void transport_peer_closed(struct transport *t);
/*
 * The move stopped short (the peer closed its socket before its marker
 * came): the ring's bytes are the program's to read again.
 */
void transport_unfreeze(struct transport *t);

/*
 * The peer's connection is gone (CM disconnect).  Reads return what is
 * left, then EOF if the peer had sent FIN, else ECONNRESET; sends EPIPE.
 */
void transport_peer_gone(struct transport *t);

/* Reaps completions; returns 0 or the sticky error. */
int transport_progress(struct transport *t);
/*
 * Sleeps until a completion arrives: 0, -ETIMEDOUT or an error.  For a
 * process without readiness (tests): it takes the events of every
 * transport on its hub, and serves none.
 */
int transport_wait(struct transport *t, int timeout_ms);
/*
 * Events: the transport's completion queue is on one of its device's
 * completion hubs (cq_hub.h), with the transport as its cq_context.
 * transport_arm() arms the queue unless an event is still to come, and reaps:
 * after it, any completion not yet reaped raises an event on the hub, whose fd
 * transport_event_fd() gives.  A drain that takes the event calls
 * transport_event_taken() before anything else.  The queue raises one for
 * every message from the peer (data, credit, FIN), but for this end's own
 * write completions only while it waits for them: corked bytes, a FIN to
 * post, or staging room to get back.
 */
int transport_event_fd(const struct transport *t);
/* That hub (cq_hub_slot() names it to cq_hub_drain()). */
struct cq_hub *transport_hub(const struct transport *t);
int transport_arm(struct transport *t);
/* transport_arm(), then transport_readable(), under one lock. */
bool transport_arm_for_read(struct transport *t);
void transport_event_taken(struct transport *t);
/*
 * Who serves the transport's events (its connection's readiness); NULL:
 * nobody, the drain only takes them.  Set under cq_hub_lock(), so that
 * after transport_set_owner(t, NULL) no drain serves the old owner.
 */
void transport_set_owner(struct transport *t, void *owner);
void *transport_owner(const struct transport *t);
/*
 * Writes not yet completed, posted or still to post (a FIN, say); while
 * bytes wait in the send queue, only the posted ones: the rest waits for
 * the peer's reader.
 */
unsigned int transport_writes_in_flight(struct transport *t);
/*
 * Bytes in the send queue, waiting for credit: only this end has them
 * (0 once the peer has gone).
 */
size_t transport_queued(struct transport *t);

/*
 * Writes posted to the queue pair and not yet completed, and how many
 * writes have completed so far (a count that only grows).
 */
unsigned int transport_posted_writes(struct transport *t,
				     uint64_t *completions);

/*
 * The peer has consumed every byte this end sent (its reader's credit
 * comes once it has read up to this end's FIN), or can take no more: its
 * connection is gone, or this one failed.
 */
bool transport_peer_took_all(struct transport *t);

/*
 * How many bytes of this end's stream the peer has consumed (a count that
 * only grows), and in *unconsumed, how many sent it has not.
 */
uint64_t transport_peer_consumed(struct transport *t, uint64_t *unconsumed);

/*
 * Grows with every arrival (data, the peer's FIN, a failure), as
 * transport_readiness()'s arrivals; the completion queue is not polled.
 */
uint64_t transport_arrivals(struct transport *t);
/* Bytes that a read would return now. */
size_t transport_available(struct transport *t);
/*
 * What this end has taken from its program that the peer's ring does not
 * hold yet, as SIOCOUTQ counts what the peer has not acknowledged: bytes
 * queued, staged, or written but not completed (a failed write never
 * completes, as a reset leaves TCP's count).  *unsent: those no write
 * carries yet (SIOCOUTQNSD).
 */
size_t transport_unacked(struct transport *t, size_t *unsent);

/*
 * The peer's FIN came and the program has read every byte before it:
 * nothing of the peer's stream is left here, nor can more come.  False
 * while a reset is still to report (late bytes) or the peer broke the
 * protocol.
 */
bool transport_read_to_fin(struct transport *t);

/* Data, EOF or an error to report. */
bool transport_readable(struct transport *t);
/*
 * Credit, or room in the open send queue (as TCP's send buffer reports
 * it: at most two thirds taken), or an error to report.
 */
bool transport_writable(struct transport *t);

/* What readiness reporting needs, seen in one look. */
struct transport_readiness {
	bool readable;	    /* data, EOF or an error to report */
	bool writable;	    /* transport_writable() */
	bool eof;	    /* the peer's FIN came, or this end shut reading */
	bool fin;	    /* the peer's FIN came */
	bool failed;	    /* the connection failed: nothing more comes */
	bool shut;	    /* this end's program shut down its side */
	uint64_t arrivals;  /* grows with every arrival (data, FIN, failure) */
	bool corked;	    /* staged bytes wait for a completion to go out */
	int queue_opens_in; /* transport_queue_opens_in() */
};
void transport_readiness(struct transport *t, struct transport_readiness *out);
void transport_counters(struct transport *t, struct transport_counters *out);

void transport_destroy(struct transport *t);

#endif /* ROCESHIM_TRANSPORT_H */
