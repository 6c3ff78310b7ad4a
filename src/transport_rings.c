// SPDX-License-Identifier: MIT
/*
 * The rings' memory, and rings that grow and shrink with the traffic
 * (the protocol is in stream.h, the reasons in docs/design.md, "Rings
 * that grow and shrink").
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "clock.h"
#include "log.h"
#include "progress.h"
#include "rdma_stack.h"
#include "ring.h"
#include "transport_impl.h"

/* After the peer said NO_GROW, a send short of credit asks again no sooner. */
#define GROW_RETRY_MS 1000
/* Traffic of RINGS_BUSY_LAPS rings within this long asks for more. */
#define BUSY_WINDOW_MS 1000
/* Rings with something to resize are looked at this often. */
#define SCAN_MS 1000
/* A control message never takes the send queue's last entry: credit's. */
#define CREDIT_ROOM 1
/* An offer is the five pieces of its address and key, then OFFER. */
#define OFFER_WRITES 6

/*
 * The transports the progress thread looks at: those with a ring above
 * its start, or a resize under way.  A connection idle at both ends has
 * nobody else to reap its completions, and a resize waits for them.
 * Lock order: a transport's lock, then this one; the scan only tries
 * the transports' locks.
 */
static struct {
	pthread_mutex_t lock;
	struct transport *head;
	unsigned int count; /* atomic */
	int64_t next_scan_ms;
	bool logged_refusal;
} sized = { .lock = PTHREAD_MUTEX_INITIALIZER };

int ring_mem_alloc(struct transport *t, struct ring_mem *rm, uint32_t size,
		   int access)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err;

	if (p == MAP_FAILED)
		return -errno;
	rm->mr = ibv.reg_mr(t->pd, p, size, access);
	if (!rm->mr) {
		err = errno ? -errno : -ENOMEM;
		munmap(p, size);
		return err;
	}
	rm->buf = p;
	rm->size = size;
	return 0;
}

void ring_mem_free(struct ring_mem *rm)
{
	if (!rm->size)
		return;
	ibv.dereg_mr(rm->mr);
	munmap(rm->buf, rm->size);
	memset(rm, 0, sizeof(*rm));
}

static uint64_t pinned_bytes(const struct transport *t)
{
	return (uint64_t)t->rx.size + t->rx_prev.size + t->rx_offer.size +
	       t->tx.size + t->tx_prev.size;
}

static void report_locked(struct transport *t, enum transport_ring_event ev)
{
	struct transport_rings now = {
		.rx_bytes = t->rx.size,
		.tx_bytes = t->tx.size,
		.pinned_bytes = pinned_bytes(t),
	};

	if (t->rings_fn)
		t->rings_fn(t->rings_ctx, ev, &now);
}

static int take_locked(struct transport *t, struct ring_mem *rm, uint32_t size,
		       int access)
{
	int ret = ring_mem_alloc(t, rm, size, access);

	if (!ret)
		report_locked(t, TRANSPORT_RINGS_CHANGED);
	return ret;
}

static void drop_locked(struct transport *t, struct ring_mem *rm)
{
	if (!rm->size)
		return;
	ring_mem_free(rm);
	report_locked(t, TRANSPORT_RINGS_CHANGED);
}

/* A bigger ring could not be had: said once per process, counted always. */
static void refused_locked(struct transport *t, uint32_t size, int err)
{
	if (!__atomic_exchange_n(&sized.logged_refusal, true, __ATOMIC_RELAXED))
		log_info("rdma: a ring of %u KiB could not be registered (%s); "
			 "connections keep their rings (RLIMIT_MEMLOCK?)",
			 size >> 10, strerror(-err));
	report_locked(t, TRANSPORT_RING_REFUSED);
}

static bool room_for_locked(const struct transport *t, unsigned int writes)
{
	return t->sq_outstanding + writes + CREDIT_ROOM <= t->send_depth;
}

/* Posts one control message; false if there is no room for it yet. */
static bool post_control_locked(struct transport *t, enum stream_op op,
				uint32_t arg)
{
	if (!room_for_locked(t, 1))
		return false;
	if (transport_post_imm_locked(t, imm_control(op, arg)))
		transport_fail_locked(t, -ECONNRESET);
	return true;
}

/* Whether the transport may resize at all now. */
static bool may_resize_locked(const struct transport *t)
{
	return t->connected && !t->error && !t->frozen && !t->peer_gone;
}

/* ---- the list the progress thread looks at --------------------------- */

static bool wants_scan_locked(const struct transport *t)
{
	return !t->forgotten && may_resize_locked(t) &&
	       (t->rx.size > t->ring_start || t->tx.size > t->ring_start ||
		t->s.tx_asked || rings_pending(t));
}

static void unlink_locked(struct transport *t)
{
	if (t->grown_prev)
		t->grown_prev->grown_next = t->grown_next;
	else
		sized.head = t->grown_next;
	if (t->grown_next)
		t->grown_next->grown_prev = t->grown_prev;
	t->grown_prev = t->grown_next = NULL;
	__atomic_sub_fetch(&sized.count, 1, __ATOMIC_RELAXED);
}

/*
 * Puts t in the list, or takes it out, as it needs; t's lock is held,
 * and the list's too if the scan is looking at t.
 */
static void track_locked(struct transport *t)
{
	bool want = wants_scan_locked(t);

	if (want == t->grown)
		return;
	if (!t->scanned)
		pthread_mutex_lock(&sized.lock);
	if (want) {
		t->grown_next = sized.head;
		if (sized.head)
			sized.head->grown_prev = t;
		sized.head = t;
		__atomic_add_fetch(&sized.count, 1, __ATOMIC_RELAXED);
	} else {
		unlink_locked(t);
	}
	if (!t->scanned)
		pthread_mutex_unlock(&sized.lock);
	t->grown = want;
	if (want)
		progress_wake();
}

/* ---- the receiver of a direction: this end's ring --------------------- */

static void post_offer_locked(struct transport *t)
{
	uint64_t addr = (uintptr_t)t->rx_offer.buf;
	uint32_t rkey = t->rx_offer.mr->rkey;
	const struct {
		enum stream_op op;
		uint32_t arg;
	} pieces[OFFER_WRITES] = {
		{ STREAM_OP_ADDR_HI, (uint32_t)(addr >> 40) & IMM_ARG_MASK },
		{ STREAM_OP_ADDR_MID, (uint32_t)(addr >> 16) & IMM_ARG_MASK },
		{ STREAM_OP_ADDR_LO, (uint32_t)addr & 0xffff },
		{ STREAM_OP_RKEY_HI, rkey >> 16 },
		{ STREAM_OP_RKEY_LO, rkey & 0xffff },
		{ STREAM_OP_OFFER, stream_log2(t->rx_offer.size) },
	};
	unsigned int i;

	if (!room_for_locked(t, OFFER_WRITES))
		return;
	for (i = 0; i < OFFER_WRITES; i++)
		post_control_locked(t, pieces[i].op, pieces[i].arg);
	t->offer_unposted = false;
}

/* Registers a ring of size bytes and offers it to the peer. */
static int offer_locked(struct transport *t, uint32_t size)
{
	int ret = take_locked(t, &t->rx_offer, size, RING_RX_ACCESS);

	if (ret)
		return ret;
	stream_rx_offered(&t->s, size);
	t->offer_unposted = true;
	post_offer_locked(t);
	return 0;
}

/* The peer asked for a bigger ring: offer one, or say NO_GROW. */
static void answer_grow_locked(struct transport *t)
{
	uint32_t size =
		t->s.rx_wanted < t->ring_max ? t->s.rx_wanted : t->ring_max;
	int ret;

	t->s.rx_wanted = 0;
	if (size > t->rx.size) {
		ret = offer_locked(t, size);
		if (!ret)
			return;
		refused_locked(t, size, ret);
	}
	t->no_grow_unposted = true;
}

/* SWITCH came: the offered ring is the one the peer writes into now. */
static void switched_locked(struct transport *t)
{
	enum transport_ring_event ev = t->rx_offer.size > t->rx.size
					       ? TRANSPORT_RING_GREW
					       : TRANSPORT_RING_SHRANK;

	t->rx_prev = t->rx;
	t->rx = t->rx_offer;
	memset(&t->rx_offer, 0, sizeof(t->rx_offer));
	t->idle_since_ms = 0;
	if (stream_rx_prev_done(&t->s))
		drop_locked(t, &t->rx_prev);
	report_locked(t, ev);
}

/* ---- the sender of a direction: the staging ring ---------------------- */

/*
 * Moves the staging ring to the offered size and says SWITCH: the bytes
 * that must be kept (the peer may not have consumed them, or they are
 * not posted yet) are copied to their places in the new one.  Writes in
 * flight still read the old one, which goes once they have completed.
 */
static void switch_locked(struct transport *t)
{
	uint32_t size = t->s.tx_offer.size;
	struct ring_mem fresh = { 0 };
	uint64_t pos;
	uint32_t n;
	int ret;

	ret = ring_mem_alloc(t, &fresh, size, RING_TX_ACCESS);
	if (ret) {
		refused_locked(t, size, ret);
		if (post_control_locked(t, STREAM_OP_DECLINE,
					stream_log2(size)))
			stream_tx_declined(&t->s);
		return;
	}
	for (pos = t->s.tx_released; pos < t->s.tx_staged; pos += n) {
		n = ring_contiguous(pos, t->s.tx_staged - pos, t->tx.size);
		n = ring_contiguous(pos, n, size);
		memcpy(fresh.buf + ring_offset(pos, size),
		       t->tx.buf + ring_offset(pos, t->tx.size), n);
	}
	post_control_locked(t, STREAM_OP_SWITCH, stream_log2(size));
	t->tx_prev = t->tx;
	t->tx_prev_until = t->s.tx_tail;
	t->tx = fresh;
	t->peer = (struct transport_ring_info){ .addr = t->s.tx_offer.addr,
						.rkey = t->s.tx_offer.rkey,
						.size = size };
	stream_tx_switched(&t->s);
	transport_set_write_max(t);
	t->busy_mark = t->s.tx_tail;
	t->busy_mark_ms = clock_ms();
	report_locked(t, TRANSPORT_RINGS_CHANGED);
	if (t->s.tx_completed >= t->tx_prev_until)
		drop_locked(t, &t->tx_prev);
}

/* An offer came: take it when nothing stands in the way, or decline. */
static void take_offer_locked(struct transport *t)
{
	uint32_t size = t->s.tx_offer.size;

	if (t->tx_shut) {
		/* The FIN is out or due: nothing may follow it. */
		stream_tx_declined(&t->s);
		return;
	}
	/* Zero-copy writes are placed by the old ring; one switch at once. */
	if (t->direct_count || t->s.tx_completed < t->direct_end ||
	    t->tx_prev.size)
		return;
	if (size > t->ring_max || !stream_tx_fits(&t->s, size)) {
		/* A stream that does not fit a smaller ring keeps its own. */
		if (post_control_locked(t, STREAM_OP_DECLINE,
					stream_log2(size)))
			stream_tx_declined(&t->s);
		return;
	}
	if (room_for_locked(t, 1))
		switch_locked(t);
}

/* ---- the entry points ------------------------------------------------- */

void rings_on_control_locked(struct transport *t, enum stream_op op)
{
	switch (op) {
	case STREAM_OP_SWITCH:
		switched_locked(t);
		break;
	case STREAM_OP_DECLINE:
		drop_locked(t, &t->rx_offer);
		t->idle_since_ms = 0;
		break;
	case STREAM_OP_NO_GROW:
		t->grow_retry_ms = clock_ms() + GROW_RETRY_MS;
		break;
	default:
		break;
	}
	track_locked(t);
}

void rings_progress_locked(struct transport *t)
{
	if (!may_resize_locked(t))
		goto out;
	if (t->rx_prev.size && stream_rx_prev_done(&t->s))
		drop_locked(t, &t->rx_prev);
	if (t->offer_unposted)
		post_offer_locked(t);
	else if (t->s.rx_wanted && stream_rx_may_offer(&t->s))
		answer_grow_locked(t);
	if (t->no_grow_unposted && post_control_locked(t, STREAM_OP_NO_GROW, 0))
		t->no_grow_unposted = false;
	if (t->tx_prev.size && t->s.tx_completed >= t->tx_prev_until)
		drop_locked(t, &t->tx_prev);
	if (t->grow_unposted &&
	    post_control_locked(t, STREAM_OP_GROW,
				stream_log2(t->grow_unposted)))
		t->grow_unposted = 0;
	if (t->s.tx_offer.size)
		take_offer_locked(t);
out:
	track_locked(t);
}

void rings_stalled_locked(struct transport *t)
{
	uint32_t size;

	if (!may_resize_locked(t) || t->tx_shut || t->grow_unposted)
		return;
	size = stream_tx_grow_size(&t->s, t->ring_max);
	if (!size || (t->grow_retry_ms && clock_ms() < t->grow_retry_ms))
		return;
	t->grow_retry_ms = 0;
	stream_tx_asked(&t->s, size);
	t->grow_unposted = size;
	if (post_control_locked(t, STREAM_OP_GROW, stream_log2(size)))
		t->grow_unposted = 0;
	track_locked(t);
}

void rings_traffic_locked(struct transport *t)
{
	int64_t now = clock_ms();

	if (now - t->busy_mark_ms < BUSY_WINDOW_MS)
		rings_stalled_locked(t);
	t->busy_mark = t->s.tx_tail;
	t->busy_mark_ms = now;
}

/*
 * An idle ring above its start (nothing arrived since the last look,
 * nothing unread, for TRANSPORT_RING_IDLE_MS) is offered back at its
 * start size.
 */
static void idle_check_locked(struct transport *t, int64_t now)
{
	int ret;

	if (!t->idle_since_ms || t->s.rx_tail != t->idle_mark ||
	    stream_available(&t->s)) {
		t->idle_mark = t->s.rx_tail;
		t->idle_since_ms = now;
		return;
	}
	if (now - t->idle_since_ms < TRANSPORT_RING_IDLE_MS ||
	    t->rx.size <= t->ring_start || !may_resize_locked(t) ||
	    !stream_rx_may_offer(&t->s))
		return;
	t->idle_since_ms = now;
	ret = offer_locked(t, t->ring_start);
	if (ret)
		log_debug("rdma: idle ring not shrunk: %s", strerror(-ret));
}

bool transport_idle_tick(void)
{
	struct transport *t, *next;
	int64_t now;

	if (!__atomic_load_n(&sized.count, __ATOMIC_RELAXED))
		return false;
	now = clock_ms();
	if (now < sized.next_scan_ms)
		return true;
	sized.next_scan_ms = now + SCAN_MS;
	pthread_mutex_lock(&sized.lock);
	for (t = sized.head; t; t = next) {
		next = t->grown_next;
		if (pthread_mutex_trylock(&t->lock))
			continue;
		t->scanned = true;
		transport_progress_locked(t);
		idle_check_locked(t, now);
		track_locked(t);
		t->scanned = false;
		pthread_mutex_unlock(&t->lock);
	}
	pthread_mutex_unlock(&sized.lock);
	return __atomic_load_n(&sized.count, __ATOMIC_RELAXED) > 0;
}

void transport_on_rings(struct transport *t, transport_rings_fn fn, void *ctx)
{
	pthread_mutex_lock(&t->lock);
	t->rings_fn = fn;
	t->rings_ctx = ctx;
	report_locked(t, TRANSPORT_RINGS_CHANGED);
	pthread_mutex_unlock(&t->lock);
}

void transport_report_rings(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	report_locked(t, TRANSPORT_RINGS_CHANGED);
	pthread_mutex_unlock(&t->lock);
}

/*
 * Under t's lock, which a scan that looks at t holds: once this returns,
 * no scan looks at t again.
 */
void rings_forget(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	if (t->grown) {
		pthread_mutex_lock(&sized.lock);
		unlink_locked(t);
		pthread_mutex_unlock(&sized.lock);
		t->grown = false;
	}
	t->forgotten = true;
	pthread_mutex_unlock(&t->lock);
}

void rings_destroy(struct transport *t)
{
	ring_mem_free(&t->rx);
	ring_mem_free(&t->rx_prev);
	ring_mem_free(&t->rx_offer);
	ring_mem_free(&t->tx);
	ring_mem_free(&t->tx_prev);
	report_locked(t, TRANSPORT_RINGS_CHANGED);
}
