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
#include "cq_hub.h"
#include "fork_page.h"
#include "log.h"
#include "progress.h"
#include "rdma_stack.h"
#include "ring.h"
#include "transport_impl.h"

/*
 * After the peer said NO_GROW, a send short of credit asks again no sooner;
 * each NO_GROW in a row doubles the wait, up to GROW_RETRY_MAX_MS.
 */
#define GROW_RETRY_MS	  1000
#define GROW_RETRY_MAX_MS 64000
/* Traffic of RINGS_BUSY_LAPS rings within this long asks for more. */
#define BUSY_WINDOW_MS 1000
/* Rings with something to resize are looked at this often. */
#define SCAN_MS 1000
/*
 * Every connection is reaped now and then, so that a GROW is answered
 * even where nothing else reaps: a program that does not read, or waits
 * elsewhere.  Every REAP_MIN_MS while reaps find completions, and twice
 * as long after each that finds none, up to REAP_MAX_MS, so that an idle
 * process wakes seldom.  For FAST_REAP_MS after a sender of this process
 * asked, at every tick: its receiver may be here, on a thread that waits
 * for it.
 */
#define REAP_MIN_MS  500
#define REAP_MAX_MS  4000
#define FAST_REAP_MS 2000
/* A control message never takes the send queue's last entry: credit's. */
#define CREDIT_ROOM 1
/* An offer is the five pieces of its address and key, then OFFER. */
#define OFFER_WRITES 6

/*
 * The connected transports, which the progress thread looks at (a
 * transport is listed from transport_connect() to transport_destroy()).
 * Lock order: a transport's lock, then this one; the scan only tries
 * the transports' locks.  In a fork child of a process that had begun to
 * use RDMA, which has no progress thread, the list is left alone.
 */
static struct {
	pthread_mutex_t lock;
	struct transport *head;
	unsigned int count;    /* atomic: listed */
	unsigned int resizing; /* atomic: listed with t->resizing */
	int64_t fast_until_ms; /* atomic: reap at every tick until then */
	int64_t next_scan_ms;
	int64_t next_reap_ms;
	int64_t reap_every_ms;
	bool logged_refusal;
	bool forked;
} listed FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

int ring_mem_alloc(struct transport *t, struct ring_mem *rm, uint32_t size,
		   int access)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err;

	if (p == MAP_FAILED)
		return -errno;
	rm->mr = ibv.reg_mr(t->pd, p, size, access);
	/* Spares pin memory that RLIMIT_MEMLOCK may want back. */
	if (!rm->mr && errno == ENOMEM && spare_drop_all())
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
	return (uint64_t)t->rx.size + t->rx_offer.size + t->tx.size +
	       t->tx_prev.size;
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
	if (!__atomic_exchange_n(&listed.logged_refusal, true,
				 __ATOMIC_RELAXED))
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

static bool resizing_locked(const struct transport *t)
{
	return may_resize_locked(t) &&
	       (t->rx.size > t->ring_idle || t->tx.size > t->ring_idle ||
		t->s.tx_asked || rings_pending(t));
}

/* Moves a count of the list by t's flag going from was to now. */
static void count_flag(unsigned int *count, bool was, bool now)
{
	if (was != now)
		__atomic_add_fetch(count, now ? 1 : -1, __ATOMIC_RELAXED);
}

/*
 * Brings t's flags and the list's counts up to date; t's lock is held,
 * and the list's too if the scan is looking at t.
 */
static void track_locked(struct transport *t)
{
	bool resizing = !t->forgotten && resizing_locked(t);
	bool asking = resizing && t->s.tx_asked;

	if (resizing == t->resizing && asking == t->asking)
		return;
	if (!t->scanned)
		pthread_mutex_lock(&listed.lock);
	if (t->listed)
		count_flag(&listed.resizing, t->resizing, resizing);
	if (asking && !t->asking)
		__atomic_store_n(&listed.fast_until_ms,
				 clock_ms() + FAST_REAP_MS, __ATOMIC_RELAXED);
	t->resizing = resizing;
	t->asking = asking;
	if (!t->scanned)
		pthread_mutex_unlock(&listed.lock);
	if (asking)
		progress_wake();
}

void rings_list(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	pthread_mutex_lock(&listed.lock);
	if (!listed.forked && !t->listed && !t->forgotten) {
		t->list_next = listed.head;
		if (listed.head)
			listed.head->list_prev = t;
		listed.head = t;
		t->listed = true;
		__atomic_add_fetch(&listed.count, 1, __ATOMIC_RELAXED);
		count_flag(&listed.resizing, false, t->resizing);
	}
	pthread_mutex_unlock(&listed.lock);
	pthread_mutex_unlock(&t->lock);
	progress_wake();
}

/* With both locks: t leaves the list (not in a fork child: see listed). */
static void unlist_locked(struct transport *t)
{
	if (!t->listed || listed.forked)
		return;
	if (t->list_prev)
		t->list_prev->list_next = t->list_next;
	else
		listed.head = t->list_next;
	if (t->list_next)
		t->list_next->list_prev = t->list_prev;
	t->list_prev = t->list_next = NULL;
	t->listed = false;
	__atomic_sub_fetch(&listed.count, 1, __ATOMIC_RELAXED);
	count_flag(&listed.resizing, t->resizing, false);
}

/* ---- the receiver of a direction: this end's ring --------------------- */

/* The offer's address and key in five pieces, then OFFER with its size. */
static void post_offer_pieces_locked(struct transport *t)
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

	for (i = 0; i < OFFER_WRITES; i++)
		post_control_locked(t, pieces[i].op, pieces[i].arg);
}

/*
 * Posts the offer when the send queue has room for all of it; only then
 * does the stream take it as made, so that an answer the peer could not
 * yet give is refused as any malformed message is.
 */
static void post_offer_locked(struct transport *t)
{
	if (!t->rx_offer.size || !room_for_locked(t, OFFER_WRITES))
		return;
	post_offer_pieces_locked(t);
	stream_rx_offered(&t->s, t->rx_offer.size);
	t->offer_unposted = false;
}

/* Whether a ring may be offered: none is, posted or not, and no old one
 * holds bytes. */
static bool may_offer_locked(const struct transport *t)
{
	return !t->rx_offer.size && stream_rx_may_offer(&t->s);
}

/* Registers a ring of size bytes and offers it to the peer. */
static int offer_locked(struct transport *t, uint32_t size)
{
	int ret = take_locked(t, &t->rx_offer, size, RING_RX_ACCESS);

	if (ret)
		return ret;
	t->s.rx_wanted = 0;
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

/*
 * SWITCH came: the offered ring is the one the peer writes into now.  The
 * bytes not read yet move to their offsets in it (stream.h says why those
 * are free), and the old ring goes.
 */
static void switched_locked(struct transport *t)
{
	enum transport_ring_event ev = t->rx_offer.size > t->rx.size
					       ? TRANSPORT_RING_GREW
					       : TRANSPORT_RING_SHRANK;
	struct ring_mem old = t->rx;
	uint64_t pos, end = t->s.rx_tail;
	uint32_t n;

	for (pos = t->s.rx_head; pos < end; pos += n) {
		n = ring_contiguous(pos, end - pos, old.size);
		n = ring_contiguous(pos, n, t->rx_offer.size);
		memcpy(t->rx_offer.buf + ring_offset(pos, t->rx_offer.size),
		       old.buf + ring_offset(pos, old.size), n);
	}
	t->rx = t->rx_offer;
	memset(&t->rx_offer, 0, sizeof(t->rx_offer));
	t->idle_since_ms = 0;
	drop_locked(t, &old);
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
	t->grow_backoff_ms = 0;
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
		/*
		 * Shut: the ring will not be used.  Declined before the FIN,
		 * or, once the FIN is out, forgotten by the peer when the FIN
		 * comes (nothing may follow it).
		 */
		if (!t->fin_pending || post_control_locked(t, STREAM_OP_DECLINE,
							   stream_log2(size)))
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
		t->grow_backoff_ms = t->grow_backoff_ms ? t->grow_backoff_ms * 2
							: GROW_RETRY_MS;
		if (t->grow_backoff_ms > GROW_RETRY_MAX_MS)
			t->grow_backoff_ms = GROW_RETRY_MAX_MS;
		t->grow_retry_ms = clock_ms() + t->grow_backoff_ms;
		break;
	default:
		break;
	}
	track_locked(t);
}

/* The peer's FIN came: an offer or a request of its is void. */
static void forget_offer_locked(struct transport *t)
{
	stream_rx_forget_offer(&t->s);
	t->offer_unposted = false;
	drop_locked(t, &t->rx_offer);
}

/* This end is shut: a GROW not posted yet would follow the FIN. */
static void forget_grow_locked(struct transport *t)
{
	t->grow_unposted = 0;
	stream_tx_asked(&t->s, 0);
}

void rings_progress_locked(struct transport *t)
{
	if (!may_resize_locked(t))
		goto out;
	if (t->s.rx_eof &&
	    (t->s.rx_wanted || t->s.rx_offered || t->rx_offer.size))
		forget_offer_locked(t);
	if (t->tx_shut && t->grow_unposted)
		forget_grow_locked(t);
	if (t->offer_unposted)
		post_offer_locked(t);
	else if (t->s.rx_wanted && may_offer_locked(t))
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
 * An idle ring above the idle size (nothing arrived since the last look,
 * nothing unread, for TRANSPORT_RING_IDLE_MS) is offered back at that
 * size.
 */
static void idle_check_locked(struct transport *t, int64_t now)
{
	uint32_t credit;
	int ret;

	if (!t->idle_since_ms || t->s.rx_tail != t->idle_mark ||
	    stream_available(&t->s)) {
		t->idle_mark = t->s.rx_tail;
		t->idle_since_ms = now;
		return;
	}
	if (now - t->idle_since_ms < TRANSPORT_RING_IDLE_MS ||
	    t->rx.size <= t->ring_idle || !may_resize_locked(t) ||
	    !may_offer_locked(t))
		return;
	/*
	 * Credit goes back a quarter of the ring at a time: what the reader
	 * released since goes first, or the sender, counting those bytes as
	 * still its to keep, would decline the smaller ring.
	 */
	credit = stream_credit_rest(&t->s);
	if (credit) {
		if (!room_for_locked(t, 1 + OFFER_WRITES))
			return;
		if (transport_post_imm_locked(t, credit)) {
			transport_fail_locked(t, -ECONNRESET);
			return;
		}
		stream_credit_sent(&t->s);
	}
	t->idle_since_ms = now;
	ret = offer_locked(t, t->ring_idle);
	if (ret)
		log_debug("rdma: idle ring not shrunk: %s", strerror(-ret));
}

/* Reaps the listed transports (only those resizing, unless all); any? */
static bool reap_listed(bool all, int64_t now)
{
	struct transport *t, *next;
	bool found = false;

	pthread_mutex_lock(&listed.lock);
	for (t = listed.head; t; t = next) {
		next = t->list_next;
		if (!all && !t->resizing)
			continue;
		if (pthread_mutex_trylock(&t->lock))
			continue;
		t->scanned = true;
		if (may_resize_locked(t)) {
			found |= transport_progress_locked(t) > 0;
			idle_check_locked(t, now);
		}
		track_locked(t);
		t->scanned = false;
		pthread_mutex_unlock(&t->lock);
	}
	pthread_mutex_unlock(&listed.lock);
	return found;
}

static int64_t sooner(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/*
 * The progress thread's tick hook: reaps every listed transport when it
 * is time (REAP_MIN_MS and on), or at every tick soon after a sender here
 * asked; looks at those resizing every SCAN_MS.
 */
bool transport_idle_tick(void)
{
	bool fast, reap, scan, found;
	int64_t now, next;

	now = clock_ms();
	next = spare_tick(now);
	if (next >= 0)
		progress_tick_later((int)next);
	if (!__atomic_load_n(&listed.count, __ATOMIC_RELAXED))
		return false;
	fast = now < __atomic_load_n(&listed.fast_until_ms, __ATOMIC_RELAXED);
	reap = fast || now >= listed.next_reap_ms;
	scan = __atomic_load_n(&listed.resizing, __ATOMIC_RELAXED) &&
	       now >= listed.next_scan_ms;
	if (reap || scan) {
		found = reap_listed(reap, now);
		if (reap) {
			listed.reap_every_ms =
				found || !listed.reap_every_ms
					? REAP_MIN_MS
					: sooner(2 * listed.reap_every_ms,
						 REAP_MAX_MS);
			listed.next_reap_ms = now + listed.reap_every_ms;
		}
		if (scan)
			listed.next_scan_ms = now + SCAN_MS;
	}
	if (fast)
		return true;
	next = listed.next_reap_ms;
	if (__atomic_load_n(&listed.resizing, __ATOMIC_RELAXED))
		next = sooner(next, listed.next_scan_ms);
	progress_tick_later((int)(next - now));
	return false;
}

void FORK_CODE transport_fork_child(void)
{
	pthread_mutex_init(&listed.lock, NULL);
	if (rdma_stack_begun())
		listed.forked = true;
	spare_fork_child();
	queue_fork_child();
	cq_hub_fork_child();
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
	pthread_mutex_lock(&listed.lock);
	unlist_locked(t);
	t->forgotten = true;
	pthread_mutex_unlock(&listed.lock);
	pthread_mutex_unlock(&t->lock);
}

void rings_destroy(struct transport *t)
{
	ring_mem_free(&t->rx);
	ring_mem_free(&t->rx_offer);
	ring_mem_free(&t->tx);
	ring_mem_free(&t->tx_prev);
	report_locked(t, TRANSPORT_RINGS_CHANGED);
}
