/* SPDX-License-Identifier: MIT */
/*
 * Inside the transport module: the connection's state, shared by
 * transport.c (the data path) and transport_rings.c (the rings' memory
 * and their resizing).  Not for other modules.
 */
#ifndef ROCESHIM_TRANSPORT_IMPL_H
#define ROCESHIM_TRANSPORT_IMPL_H

#include <infiniband/verbs.h>
#include <pthread.h>

#include "send_queue.h"
#include "stream.h"
#include "transport.h"

/*
 * The largest RDMA WRITE: a large send goes out in pieces, so that the
 * peer copies one piece out while the next is still on the wire.
 */
#define WRITE_MAX (64u << 10)

/*
 * Zero-copy writes not yet retired, each a run of stream positions and
 * the program's bytes that hold them.  When they are full, a send stages
 * its bytes instead.
 */
#define DIRECT_RUNS 16

struct direct_run {
	uint64_t pos;
	uint32_t len;
	const uint8_t *src;
};

/* A ring's memory, registered; size 0: none. */
struct ring_mem {
	uint8_t *buf;
	struct ibv_mr *mr;
	uint32_t size;
};

/* Bytes that came after the program shut down both directions. */
enum late_bytes {
	LATE_NONE,
	LATE_UNREPORTED, /* dropped; the reset is still to be read */
	LATE_REPORTED
};

struct transport {
	pthread_mutex_t lock;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct cq_hub *hub; /* its completion hub (cq_hub.h) */
	void *owner;	    /* under cq_hub_lock(): transport_set_owner() */
	struct ibv_cq *cq;
	struct ring_mem rx;	  /* this end's ring: where the peer writes */
	struct ring_mem rx_offer; /* offered to the peer, unanswered */
	struct ring_mem tx;	  /* staging: mirrors the peer's ring offsets */
	struct ring_mem tx_prev;  /* the staging before, for its writes */
	uint64_t tx_prev_until;	  /* writes before here went out of tx_prev */
	uint32_t ring_start;	  /* the rings' first size */
	uint32_t ring_idle;	  /* the size an idle ring shrinks to */
	uint32_t ring_max;	  /* the size they may grow to */
	uint32_t send_depth;
	uint32_t recv_depth;
	uint32_t max_inline;
	uint32_t write_max; /* WRITE_MAX, or a quarter of a smaller ring */
	struct transport_ring_info peer;
	bool connected;

	struct stream s;
	/* Sent past the staging ring's credit: stream positions from
	 * s.tx_staged on, in order (transport_send()). */
	struct send_queue queued;
	bool queue_starved;  /* a chunk could not be had: no room till empty */
	bool credit_waiting; /* out of credit, no credit since */
	int64_t credit_wait_ms; /* since when */
	uint32_t sq_outstanding;
	uint64_t send_completions;
	uint64_t direct_end; /* where the last zero-copy write ends */
	bool tx_shut;
	bool rx_shut; /* the program shut down reading: empty reads end */
	enum late_bytes late; /* bytes came after both directions were shut */
	bool fin_pending;     /* shut, and the FIN waits for staged bytes */
	bool peer_gone;
	bool armed;	 /* an event will come: no arm since the last taken */
	bool notify_all; /* armed for every completion, not only the peer's */
	bool frozen; /* the connection moves to TCP: see transport_freeze() */
	bool peer_closed; /* the peer's kernel socket is closed */
	bool hostile;	  /* the peer broke the protocol: never move it */
	unsigned int direct_count;
	struct direct_run direct[DIRECT_RUNS];

	/* Resizing (transport_rings.c). */
	bool offer_unposted;	  /* rx_offer's pieces wait for send room */
	uint32_t grow_unposted;	  /* a GROW for this size waits for room */
	bool no_grow_unposted;	  /* a NO_GROW waits for room */
	int64_t grow_retry_ms;	  /* after a NO_GROW, no GROW before then */
	uint32_t grow_backoff_ms; /* and how long it waited the last time */
	uint64_t busy_mark;	  /* tx_tail when the traffic was last timed */
	int64_t busy_mark_ms;	  /* and when */
	uint64_t idle_mark;	  /* rx_tail when last looked at */
	int64_t idle_since_ms;	  /* since when it has not moved */
	/* The list of connected transports the progress thread looks at. */
	bool listed;	/* in it */
	bool resizing;	/* has a ring above the idle size, or a resize */
	bool asking;	/* asked for a bigger ring, not yet answered */
	bool forgotten; /* being destroyed: never in that list again */
	bool scanned;	/* the scan holds that list's lock */
	struct transport *list_prev, *list_next;
	transport_rings_fn rings_fn;
	void *rings_ctx;

	int error; /* sticky negative errno */
	struct transport_counters counters;
};

/* The largest write: WRITE_MAX, or a quarter of a smaller ring. */
static inline void transport_set_write_max(struct transport *t)
{
	t->write_max =
		t->s.tx_size / 4 < WRITE_MAX ? t->s.tx_size / 4 : WRITE_MAX;
}

/* The connection breaks (transport.c). */
void transport_fail_locked(struct transport *t, int err);
/* Posts a write of no bytes that carries imm alone (transport.c). */
int transport_post_imm_locked(struct transport *t, uint32_t imm);
/* Reaps every completion there is (transport.c); returns how many. */
int transport_progress_locked(struct transport *t);

/* ---- transport_rings.c ---------------------------------------------- */

/* Maps and registers a ring of size bytes; access: the MR's flags. */
int ring_mem_alloc(struct transport *t, struct ring_mem *rm, uint32_t size,
		   int access);
void ring_mem_free(struct ring_mem *rm);
#define RING_RX_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define RING_TX_ACCESS IBV_ACCESS_LOCAL_WRITE

/* A control message from the peer was applied to the stream: act on it. */
void rings_on_control_locked(struct transport *t, enum stream_op op);
/*
 * Whatever resizing waits for an event that came (send room, a
 * completion, a read that emptied the old ring): does it.  Cheap when
 * nothing waits.
 */
void rings_progress_locked(struct transport *t);
/*
 * A send found no credit, or this end's writes have gone round the ring
 * several times lately (rings_traffic_locked(), when
 * rings_busy_traffic() says so): ask for a bigger ring if that would
 * help.  A ring much smaller than the traffic costs a credit message for
 * every quarter of it, and writes of a quarter of it at most.
 */
void rings_stalled_locked(struct transport *t);
void rings_traffic_locked(struct transport *t);
#define RINGS_BUSY_LAPS 4
static inline bool rings_busy_traffic(const struct transport *t)
{
	return t->s.tx_tail - t->busy_mark >=
	       (uint64_t)RINGS_BUSY_LAPS * t->tx.size;
}
/* transport_connect(): the progress thread looks at t from now on. */
void rings_list(struct transport *t);
/*
 * transport_destroy(): first the progress thread stops looking at t
 * (before its queues go), then every ring goes.
 */
void rings_forget(struct transport *t);
void rings_destroy(struct transport *t);

/* ---- transport_spare.c ---------------------------------------------- */

/*
 * spare_take(): a spare domain with first rings of ring_bytes on verbs
 * becomes t's pd, rx and tx; false when there is none.  spare_keep(): from
 * t, whose queue pair is gone, its pd, rx and tx become a spare (t's are
 * then cleared); false when they do not fit.  spare_tick(): frees the
 * spares kept too long; returns the ms until the next one is, -1 for
 * none.  spare_drop_all(): frees every spare; whether there was any.
 */
bool spare_take(struct transport *t, struct ibv_context *verbs,
		uint32_t ring_bytes);
bool spare_keep(struct transport *t);
int spare_tick(int64_t now);
bool spare_drop_all(void);
void spare_fork_child(void);
/* In a fork child: the parent's send queues are none of its own. */
void queue_fork_child(void);

/* Whether resizing has anything waiting (cheap: on every read). */
static inline bool rings_pending(const struct transport *t)
{
	return t->s.rx_wanted || t->s.tx_offer.size || t->tx_prev.size ||
	       t->offer_unposted || t->grow_unposted || t->no_grow_unposted;
}

#endif /* ROCESHIM_TRANSPORT_IMPL_H */
