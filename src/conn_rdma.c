// SPDX-License-Identifier: MIT
/*
 * Calls carried over RDMA: TCP's blocking rules on the ring transport,
 * with spinning, zero-copy sends and sleeps on the completion hub.
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "conn_impl.h"
#include "cuda_mem.h"
#include "hostinfo.h"
#include "log.h"
#include "real.h"
#include "send_stall.h"
#include "sig_restart.h"
#include "stats.h"

/*
 * One blocking call's wait, from the moment it first would block until it
 * gets what it waits for: its length sizes the connection's next spins.
 */
struct wait_clock {
	struct spin_policy *policy;
	bool waiting;
	uint64_t start_us; /* 0: this wait is not timed (spin_time_wait()) */
};

static void wait_clock_start(struct wait_clock *w)
{
	if (w->waiting)
		return;
	w->waiting = true;
	if (spin_time_wait(w->policy))
		w->start_us = clock_us();
}

static void wait_clock_stop_at(struct wait_clock *w, uint64_t now)
{
	w->waiting = false;
	if (!w->start_us)
		return;
	spin_wait_ended(w->policy, now - w->start_us);
	w->start_us = 0;
}

/* Called after every transfer: a call that never waited returns at once. */
static inline void wait_clock_stop(struct wait_clock *w)
{
	if (w->waiting)
		wait_clock_stop_at(w, w->start_us ? clock_us() : 0);
}

/*
 * Polls the completion queue for the connection's spin budget, counted
 * from the start of the wait: what comes within it wakes neither this
 * thread nor the progress thread.  The clock is read once per
 * SPIN_POLLS_PER_CLOCK polls: where it is slow (HPET in a guest), a read
 * per poll delayed the detection.  Only while a spin slot is free (spin.h).
 * true: ready (data, EOF, credit or an error, as ready() says), and the
 * wait's clock stopped.
 */
#define SPIN_POLLS_PER_CLOCK 8

static bool spin(struct conn *c, struct wait_clock *w,
		 bool (*ready)(struct transport *))
{
	unsigned int budget = spin_budget_us(w->policy);
	uint64_t now = w->start_us;
	bool got = false;
	int i;

	if (!budget || !now || !spin_slot_take())
		return false;
	while (!got && now < w->start_us + budget) {
		for (i = 0; i < SPIN_POLLS_PER_CLOCK && !got; i++)
			got = ready(c->t);
		if (!got)
			now = clock_us();
	}
	spin_slot_give();
	if (got)
		wait_clock_stop_at(w, now);
	return got;
}

/*
 * Nothing to read and the call will not sleep, or no room to send: is the
 * peer gone?  Its kernel socket knows first when the peer reset
 * (POLLERR): then the transport learns it too, and a read gets what is
 * left, then ECONNRESET (EOF if the peer's RDMA FIN came).  A FIN alone
 * says only that the peer shut down its side.  It may still read, and its
 * RDMA FIN, posted after its last byte, may still be on the way: the
 * peer's shutdown or close lets its writes complete before its kernel
 * socket sends the FIN, but for at most 200 ms.  The RDMA FIN then ends
 * the reads.
 *
 * A sleep does not watch the kernel socket: a peer that resets or goes
 * away also disconnects its queue pair, and the CM's disconnect makes the
 * eventfds ready, which a sleep watches anyway.
 */
static void check_peer(struct conn *c, int tcp_fd)
{
	struct pollfd pfd = { .fd = tcp_fd, .events = POLLIN | POLLRDHUP };

	if (real.poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR)) {
		__atomic_store_n(&c->peer_reset, true, __ATOMIC_RELEASE);
		transport_peer_gone(c->t);
	}
}

/*
 * check_peer() for a read that found nothing, unless something arrived
 * since a call last asked: the peer lived then, and a reset that comes
 * later is seen by the progress thread, which watches the kernel socket
 * (conn_move.c), and by the queue pair's disconnect; either wakes a
 * wait.  A program that reads until EAGAIN after each message (an event
 * loop) so asks the kernel once per quiet spell, not once per message.
 */
static void check_peer_unless_heard(struct conn *c, int tcp_fd)
{
	uint64_t now = transport_arrivals(c->t);

	if (__atomic_exchange_n(&c->peer_checked_at, now, __ATOMIC_RELAXED) ==
	    now)
		check_peer(c, tcp_fd);
}

/*
 * Whether a call may block, and until when: O_NONBLOCK, MSG_DONTWAIT and
 * SO_RCVTIMEO/SO_SNDTIMEO.  Asked of the kernel socket only once the call
 * would block, so that a call that can proceed makes no extra syscall.
 */
struct blocking {
	struct conn *c;
	int fd;
	int flags;
	int timeout_opt; /* SO_RCVTIMEO or SO_SNDTIMEO */
	bool known;
	bool nonblock;
	int64_t deadline; /* -1: none */
};

/*
 * A wait that a signal handler interrupted before any byte moved: the
 * kernel would restart the call (SA_RESTART, no socket timeout), which
 * reads the socket's flags and timeout again.
 */
static bool restarts(struct blocking *b, ssize_t n, ssize_t total)
{
	if (n != -EINTR || total || b->deadline >= 0 || !sig_restart_allowed())
		return false;
	b->known = false;
	return true;
}

static bool must_not_block(struct blocking *b)
{
	if (b->known)
		return b->nonblock;
	b->known = true;
	b->nonblock = conn_call_nonblocking(b->c, b->fd, b->flags);
	if (!b->nonblock) {
		int64_t ms = conn_call_timeout_ms(b->c, b->fd, b->timeout_opt);

		b->deadline = ms < 0 ? -1 : clock_ms() + ms;
	}
	return b->nonblock;
}

/*
 * The largest piece of a buffer registered at once for a zero-copy send:
 * pinned memory counts against RLIMIT_MEMLOCK, often 8 MiB.
 */
#define ZEROCOPY_CHUNK (4u << 20)

/*
 * How often a send whose zero-copy writes are in flight looks whether the
 * peer has gone: its disconnect raises no completion on this end.
 */
#define ZEROCOPY_RECHECK_MS 100

/*
 * A non-blocking send from pinned memory waits at most this long for
 * credit in all: the peer's reads return it, and a send that returned
 * early would have to copy what the peer has not read (see
 * zerocopy_release()).
 */
#define PINNED_CREDIT_WAIT_MS 2

/* One send's zero-copy state: the piece of its buffer registered now. */
struct zerocopy {
	struct ibv_mr *mr;	 /* NULL: nothing registered */
	struct reg_cache *cache; /* where mr came from; NULL: this send's */
	const uint8_t *base;
	size_t len;
	uint64_t end;	  /* where its last posted write ends */
	bool unavailable; /* registration failed: copy the rest */
	/* Out of credit, with more left than the send queue takes. */
	bool wants_credit;
};

struct direct_wait {
	struct transport *t;
	uint64_t end;
};

static bool direct_done(void *arg)
{
	struct direct_wait *w = arg;

	return transport_direct_done(w->t, w->end);
}

/*
 * Sleeps on the hub until the zero-copy writes have completed: only
 * then may the send return the buffer to the program.  Signals and
 * SO_SNDTIMEO do not end it; a failed queue pair or a peer that has gone
 * does, and takes no more than the fabric's retry timeout to show.
 */
static void zerocopy_release(struct conn *c, struct zerocopy *z)
{
	struct direct_wait w = { .t = c->t, .end = z->end };

	if (!z->mr)
		return;
	while (!readiness_wait_hub(c->r, direct_done, &w, ZEROCOPY_RECHECK_MS))
		;
	/* What the peer has not consumed must stay for a move to TCP. */
	transport_direct_retire(c->t, z->base, z->len);
	if (z->cache)
		reg_cache_put(z->cache, z->mr);
	else
		transport_deregister(z->mr);
	z->mr = NULL;
	z->cache = NULL;
}

/* ---- pinned memory ---------------------------------------------------- */

/*
 * The registration cache's cap, unless configured: half of
 * RLIMIT_MEMLOCK, which the rings count against too, or 1 GiB where
 * the process may lock memory without limit.
 */
#define REG_CACHE_UNLIMITED_BYTES (1ul << 30)

/* Set before the first cache is made (twice at worst, alike). */
static void set_budget_once(size_t configured)
{
	static bool done;
	struct rlimit rl;
	size_t budget = configured;

	if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		return;
	if (!budget) {
		if (getrlimit(RLIMIT_MEMLOCK, &rl) ||
		    rl.rlim_cur == RLIM_INFINITY ||
		    hostinfo_may_lock_without_limit())
			budget = REG_CACHE_UNLIMITED_BYTES;
		else
			budget = rl.rlim_cur / 2;
	}
	reg_cache_set_budget(budget);
	__atomic_store_n(&done, true, __ATOMIC_RELEASE);
}

static void *register_pinned(void *ctx, void *addr, size_t len)
{
	return transport_register(ctx, addr, len);
}

static void deregister_pinned(void *mr)
{
	transport_deregister(mr);
}

/* The connection's registration cache, made on first use; NULL: none. */
static struct reg_cache *pinned_cache(struct conn *c)
{
	static const struct reg_cache_ops ops = { .reg = register_pinned,
						  .dereg = deregister_pinned };
	struct reg_cache *rc = __atomic_load_n(&c->pinned, __ATOMIC_ACQUIRE);
	struct reg_cache *none = NULL;

	if (rc)
		return rc;
	set_budget_once(c->reg_cache_bytes);
	rc = reg_cache_create(&ops, c->t);
	if (!rc)
		return NULL;
	if (!__atomic_compare_exchange_n(&c->pinned, &none, rc, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		reg_cache_destroy(rc);
		return none;
	}
	return rc;
}

/*
 * After a registration failed, the connection copies pinned memory for
 * this long before it tries again: each try may cost a pinning.
 */
#define PINNED_RETRY_MS 1000

/*
 * z takes the cached registration of the pinned buffer at buf, or of its
 * first ZEROCOPY_CHUNK bytes (a quarter of the cache's cap at most).
 */
static bool zerocopy_pinned(struct conn *c, struct zerocopy *z,
			    const struct mem_info *info, const uint8_t *buf,
			    size_t len)
{
	struct reg_cache *rc = pinned_cache(c);
	size_t chunk = reg_cache_budget() / 4;
	int err = -ENOMEM;

	if (chunk > ZEROCOPY_CHUNK)
		chunk = ZEROCOPY_CHUNK;
	if (len > chunk)
		len = chunk;
	z->mr = rc && len ? reg_cache_get(rc, info->start, info->size,
					  info->buffer_id, buf, len, &err)
			  : NULL;
	if (!z->mr) {
		__atomic_store_n(&c->pinned_retry_ms,
				 clock_ms() + PINNED_RETRY_MS,
				 __ATOMIC_RELAXED);
		log_info(
			"rdma: pinned buffer of %zu bytes not registered (%s): "
			"copying",
			len, strerror(-err));
		return false;
	}
	log_debug("rdma: pinned send of %zu bytes, registration cached", len);
	z->cache = rc;
	z->base = buf;
	z->len = len;
	z->end = 0;
	return true;
}

/*
 * Sends from the len bytes at buf without copying them, from the piece of
 * the buffer registered now or the next one; -ENOBUFS: copy them instead.
 * info: what buf is (pinned: its registration is cached).
 */
static ssize_t send_zerocopy(struct conn *c, struct zerocopy *z,
			     const struct mem_info *info, const uint8_t *buf,
			     size_t len)
{
	ssize_t n;

	if (!z->mr || buf < z->base || buf >= z->base + z->len) {
		zerocopy_release(c, z);
		if (info->cls == ROCESHIM_MEM_PINNED) {
			if (!zerocopy_pinned(c, z, info, buf, len))
				return -ENOBUFS;
			goto post;
		}
		if (z->unavailable)
			return -ENOBUFS;
		z->len = len < ZEROCOPY_CHUNK ? len : ZEROCOPY_CHUNK;
		z->base = buf;
		z->mr = transport_register(c->t, buf, z->len);
		if (!z->mr) {
			if (!__atomic_exchange_n(&c->zerocopy_failed, true,
						 __ATOMIC_RELAXED))
				log_info("rdma: zero-copy send of %zu bytes "
					 "refused (%s): copying instead",
					 z->len, strerror(errno));
			z->unavailable = true;
			return -ENOBUFS;
		}
		log_debug("rdma: zero-copy send of %zu bytes", z->len);
		z->end = 0;
	}
post:
	if (len > (size_t)(z->base + z->len - buf))
		len = z->base + z->len - buf;
	n = transport_send_direct(c->t, z->mr, buf, len, &z->end);
	if (n > 0 && z->cache)
		stats_mem_event(STATS_MEM_ZEROCOPY_TX, n);
	return n;
}

/*
 * Whether the len bytes at p go out without a copy: from pinned memory of
 * at least pinned_min bytes, or on a socket that may block, from host
 * memory (pinned too) of at least zerocopy_min.  Managed memory is
 * copied: its pages may move.  *info: what p is.
 */
static bool goes_direct(struct conn *c, struct blocking *b, const uint8_t *p,
			size_t len, struct mem_info *info)
{
	bool big = c->zerocopy_min && len >= c->zerocopy_min;
	bool pinned_big = c->pinned_min && len >= c->pinned_min;

	info->cls = ROCESHIM_MEM_PAGEABLE;
	if (!big && !pinned_big)
		return false;
	if (cuda_mem_active())
		cuda_mem_classify(p, info);
	if (info->cls == ROCESHIM_MEM_PINNED) {
		/*
		 * No id, no way to tell a reallocation; or a registration
		 * failed a moment ago.
		 */
		if (!info->buffer_id ||
		    clock_ms() < __atomic_load_n(&c->pinned_retry_ms,
						 __ATOMIC_RELAXED))
			return false;
		if (pinned_big)
			return true;
	} else if (info->cls != ROCESHIM_MEM_PAGEABLE) {
		return false;
	}
	return big && !must_not_block(b);
}

/*
 * Sends some of the bytes of iov after the first skip: those of a buffer
 * that goes_direct() straight from it, the others by copying; bytes
 * before such a buffer go first.
 */
static ssize_t send_some(struct conn *c, struct zerocopy *z, struct blocking *b,
			 const struct iovec *iov, int iovcnt, size_t skip,
			 bool *corked)
{
	struct mem_info info;
	size_t off = skip;
	ssize_t n;
	int i = 0, big;

	z->wants_credit = false;
	while (i < iovcnt && off >= iov[i].iov_len)
		off -= iov[i++].iov_len;
	if ((!c->zerocopy_min && !c->pinned_min) || i == iovcnt)
		return transport_send(c->t, iov, iovcnt, skip, corked);
	for (big = i; big < iovcnt; big++, off = 0)
		if (goes_direct(c, b, (const uint8_t *)iov[big].iov_base + off,
				iov[big].iov_len - off, &info))
			break;
	if (big == iovcnt)
		return transport_send(c->t, iov, iovcnt, skip, corked);
	if (big > i)
		return transport_send(c->t, iov, big, skip, corked);
	n = send_zerocopy(c, z, &info, (const uint8_t *)iov[i].iov_base + off,
			  iov[i].iov_len - off);
	/* Out of credit: TCP's send buffer would take the rest now. */
	if (n == -EAGAIN) {
		if (transport_queue_takes(c->t, iov_bytes(iov, iovcnt) - skip,
					  must_not_block(b)))
			n = -ENOBUFS;
		else
			z->wants_credit = true;
	}
	if (n != -ENOBUFS) {
		*corked = false;
		return n;
	}
	return transport_send(c->t, iov, iovcnt, skip, corked);
}

/*
 * How many of iov's buffers, from the first, are in host memory: the
 * kernel's copy stops with EFAULT at the first in GPU memory (or NULL),
 * having moved the bytes before it.  Such a buffer is never read or
 * written here, nor registered: with a peer-memory module loaded, a
 * registration of it would succeed where TCP fails.
 */
static int host_memory(const struct iovec *iov, int iovcnt)
{
	bool cuda = cuda_mem_active_now();
	int i;

	for (i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		if (!iov[i].iov_base ||
		    (cuda &&
		     cuda_mem_class(iov[i].iov_base) == ROCESHIM_MEM_DEVICE))
			break;
	}
	return i;
}

/*
 * A read into buf, or, where buf is GPU memory or NULL, what the kernel's
 * would find before its copy fails: data (then EFAULT), EOF, an error, or
 * nothing yet.
 */
static ssize_t recv_into(struct conn *c, bool device, uint8_t *buf, size_t len,
			 bool peek, uint64_t peeked)
{
	uint8_t probe;
	ssize_t n;

	if (!device)
		return peek ? transport_peek_at(c->t, buf, len, peeked)
			    : transport_recv(c->t, buf, len);
	n = transport_peek_at(c->t, &probe, 1, peek ? peeked : 0);
	if (n <= 0)
		return n;
	if (buf)
		stats_mem_event(STATS_MEM_DEVICE_REFUSED, 1);
	return -EFAULT;
}

/*
 * A send whose first bytes are in GPU memory (or NULL): the kernel
 * refuses it with EFAULT when it would copy them, after a failed
 * connection's error, and once there is room (a full socket blocks, or
 * says EAGAIN).
 */
static ssize_t send_device(struct conn *c, struct blocking *b,
			   const void *first)
{
	bool corked;
	ssize_t n;

	for (;;) {
		n = transport_send(c->t, NULL, 0, 0, &corked);
		if (n < 0)
			return n;
		if (transport_writable(c->t))
			break;
		if (must_not_block(b))
			return -EAGAIN;
		n = readiness_wait_writable(c->r, b->deadline);
		if (n)
			return n;
	}
	if (first)
		stats_mem_event(STATS_MEM_DEVICE_REFUSED, 1);
	return -EFAULT;
}

/*
 * A send of at most SEND_WHOLE_MAX bytes keeps the connection's other
 * sends out until it has staged all of them: the kernel copies such a
 * send into its buffers in one piece when they have room
 * (tcp_sendmsg_locked()), and with their megabytes another send lands
 * among its bytes only when they are full, where a ring of some KiB fills
 * often.  A larger send waits for a small one to end, and lets small ones
 * in between its pieces, as the kernel's does.
 *
 * A send kept out naps while there is credit (which wakes no wait), and
 * sleeps for credit otherwise.  A new small send lets those that wait go
 * first: a thread that sends without pause would otherwise take every
 * turn.  A holder that stages nothing for SEND_TURN_STALE_MS while there
 * is credit has left its call without ending it (a signal handler that
 * jumped out of it): its turn is over.
 */
#define SEND_WHOLE_MAX	   (64u << 10)
#define SEND_TURN_STALE_MS 100
static const struct timespec send_turn_nap = { .tv_nsec = 50000 };

/* What a thread's sends hold the turn with. */
static __thread char thread_tag;

struct turn_wait {
	bool waiting;	    /* counted in c->turn_waiters */
	const void *holder; /* the holder it saw last */
	unsigned int turns; /* c->turns then */
	int64_t credit_ms;  /* since when the holder had credit; 0: not yet */
};

/*
 * Whether a send may stage now: 1 if it took the turn (a small one), 0 if
 * it may without (a large one while nobody has the turn, or a send of a
 * signal handler on the thread whose send it interrupted), -1 if it must
 * wait for another thread's send, or, a new small one, for those waiting.
 */
static int take_turn(struct conn *c, bool small, struct turn_wait *tw)
{
	const void *holder = __atomic_load_n(&c->sending, __ATOMIC_ACQUIRE);
	unsigned int turns;

	if (holder == &thread_tag)
		return 0;
	if (!small)
		return holder ? -1 : 0;
	if (!holder &&
	    (tw->waiting ||
	     !__atomic_load_n(&c->turn_waiters, __ATOMIC_ACQUIRE)) &&
	    __atomic_compare_exchange_n(&c->sending, &holder, &thread_tag,
					false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&c->turns, 1, __ATOMIC_RELAXED);
		return 1;
	}
	turns = __atomic_load_n(&c->turns, __ATOMIC_RELAXED);
	if (holder != tw->holder || turns != tw->turns) {
		tw->holder = holder;
		tw->turns = turns;
		tw->credit_ms = 0;
	}
	return -1;
}

static void count_waiting(struct conn *c, struct turn_wait *tw, bool waiting)
{
	if (tw->waiting == waiting)
		return;
	tw->waiting = waiting;
	if (waiting)
		__atomic_add_fetch(&c->turn_waiters, 1, __ATOMIC_ACQ_REL);
	else
		__atomic_sub_fetch(&c->turn_waiters, 1, __ATOMIC_ACQ_REL);
}

/* Unless a send found the turn left and ended it (wait_turn()). */
static void end_turn(struct conn *c)
{
	const void *mine = &thread_tag;

	__atomic_compare_exchange_n(&c->sending, &mine, NULL, false,
				    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/*
 * The turn is another send's: 0 once this one may try again, -EAGAIN if
 * it must not block (or its timeout ran out), -EINTR for a signal.
 */
static int wait_turn(struct conn *c, struct blocking *b, struct turn_wait *tw,
		     bool small)
{
	const void *holder = tw->holder;
	int64_t now;

	if (must_not_block(b) ||
	    (b->deadline >= 0 && clock_ms() >= b->deadline))
		return -EAGAIN;
	count_waiting(c, tw, small);
	if (!transport_writable(c->t)) {
		tw->credit_ms = 0;
		return readiness_wait_writable(c->r, b->deadline);
	}
	now = clock_ms();
	if (!tw->credit_ms)
		tw->credit_ms = now;
	if (holder && now - tw->credit_ms >= SEND_TURN_STALE_MS) {
		__atomic_compare_exchange_n(&c->sending, &holder, NULL, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		return 0;
	}
	return nanosleep(&send_turn_nap, NULL) ? -EINTR : 0;
}

static bool direct_credit(void *t)
{
	return transport_direct_credit(t);
}

/*
 * A send waits for room: in the send queue (readiness_wait_writable()),
 * or, a zero-copy send with more left than the queue takes, for credit.
 * Writability does not say when credit comes: such a send sleeps on the
 * hub instead, a while at a time.  0 once it may try again, -EAGAIN at
 * the deadline, -EINTR for a signal.
 */
static int wait_for_room(struct conn *c, const struct zerocopy *z,
			 int64_t deadline)
{
	int left;

	if (!z->wants_credit)
		return readiness_wait_writable(c->r, deadline);
	left = clock_ms_left(deadline);
	if (!left)
		return -EAGAIN;
	if (left < 0 || left > ZEROCOPY_RECHECK_MS)
		left = ZEROCOPY_RECHECK_MS;
	errno = 0;
	if (readiness_wait_hub(c->r, direct_credit, c->t, left))
		return 0;
	if (errno == EINTR)
		return -EINTR;
	return clock_ms_left(deadline) ? 0 : -EAGAIN;
}

/*
 * A blocking send waits for room: 0 once it may try again, as it also
 * may once the wait has started the connection's move to TCP because the
 * peer consumed nothing (send_stall.h); otherwise as wait_for_room().
 */
static int wait_writable_or_stalled(struct conn *c, struct blocking *b,
				    const struct zerocopy *z,
				    struct send_stall *stall, size_t left)
{
	uint64_t unconsumed;
	uint64_t consumed = transport_peer_consumed(c->t, &unconsumed);
	int64_t until =
		send_stall_wait_until(stall, consumed, clock_ms(), b->deadline);
	int n = wait_for_room(c, z, until);

	if (n != -EAGAIN || until == b->deadline)
		return n;
	consumed = transport_peer_consumed(c->t, &unconsumed);
	if (send_stall_moves(stall, consumed, unconsumed, left, clock_ms())) {
		log_info("rdma: connection (fd %d): the peer read nothing "
			 "for %d ms; moving to TCP, whose buffers take more",
			 b->fd, SEND_STALL_MS);
		conn_move_start(c, ROCESHIM_DOWNGRADE_SEND_STALL);
	}
	return 0;
}

ssize_t conn_rdma_send(struct conn *c, int tcp_fd, const struct iovec *iov,
		       int iovcnt, int flags)
{
	struct blocking b = {
		.c = c, .fd = tcp_fd, .flags = flags, .timeout_opt = SO_SNDTIMEO
	};
	struct wait_clock w = { .policy = &c->tx_spin };
	struct zerocopy z = { .mr = NULL };
	bool corked = false;
	int64_t credit_deadline = -1; /* a non-blocking pinned send's */
	ssize_t total = 0, n;
	size_t len;
	struct turn_wait tw = { .waiting = false };
	struct send_stall stall = { .waiting = false };
	bool small, took_turn = false;
	int host, turn;

	host = host_memory(iov, iovcnt);
	if (host < iovcnt && !iov_bytes(iov, host))
		return send_device(c, &b, iov[host].iov_base);
	iovcnt = host;
	len = iov_bytes(iov, iovcnt); /* to stage before returning */
	small = len <= SEND_WHOLE_MAX;
	for (;;) {
		turn = take_turn(c, small, &tw);
		if (turn < 0) {
			n = wait_turn(c, &b, &tw, small);
			if (!n || restarts(&b, n, total))
				continue;
			break;
		}
		if (turn > 0)
			count_waiting(c, &tw, false);
		took_turn |= turn;
		n = send_some(c, &z, &b, iov, iovcnt, total, &corked);
		if (n == -EAGAIN) {
			check_peer(c, tcp_fd);
			n = send_some(c, &z, &b, iov, iovcnt, total, &corked);
		}
		if (n > 0) {
			wait_clock_stop(&w);
			total += n;
			if ((size_t)total == len)
				break;
			continue;
		}
		if (n != -EAGAIN)
			break;
		/* Non-blocking: a pinned send waits a little for credit. */
		if (must_not_block(&b)) {
			if (credit_deadline < 0)
				credit_deadline =
					clock_ms() + PINNED_CREDIT_WAIT_MS;
			if (!z.cache || clock_ms() >= credit_deadline ||
			    wait_for_room(c, &z, credit_deadline))
				break;
			continue;
		}
		wait_clock_start(&w);
		if (spin(c, &w,
			 z.wants_credit ? transport_direct_credit
					: transport_writable))
			continue;
		n = wait_writable_or_stalled(c, &b, &z, &stall, len - total);
		if (restarts(&b, n, total))
			continue;
		if (n)
			break;
	}
	count_waiting(c, &tw, false);
	if (took_turn)
		end_turn(c);
	wait_clock_stop(&w);
	zerocopy_release(c, &z);
	readiness_after_send(c->r, corked);
	return total ? total : n;
}

/*
 * A recv() of nothing: TCP's reports an error, or waits once for a byte,
 * the end, its timeout or a signal, and then returns 0 (tcp_recvmsg());
 * EAGAIN if it must not block.
 */
static ssize_t recv_nothing(struct conn *c, struct blocking *b)
{
	uint8_t probe;
	ssize_t n;

	n = transport_peek_at(c->t, &probe, 1, 0);
	if (n == -EAGAIN) {
		check_peer(c, b->fd);
		n = transport_peek_at(c->t, &probe, 1, 0);
	}
	if (n != -EAGAIN)
		return n < 0 ? n : 0;
	if (must_not_block(b))
		return -EAGAIN;
	n = readiness_wait_readable(c->r, b->deadline);
	readiness_after_recv(c->r);
	return n == -EXDEV ? n : 0;
}

/*
 * A MSG_PEEK|MSG_WAITALL read that has some of its bytes waits for more
 * in ticks of 1 ms: the bytes it peeked keep the socket readable.  0, or
 * -EAGAIN at the socket's timeout, -EINTR for a signal.
 */
static int wait_more_peeked(struct blocking *b)
{
	static const struct timespec tick = { .tv_nsec = 1000000 };

	if (b->deadline >= 0 && clock_ms() >= b->deadline)
		return -EAGAIN;
	return nanosleep(&tick, NULL) ? -errno : 0;
}

ssize_t conn_rdma_recv(struct conn *c, int tcp_fd, const struct iovec *iov,
		       int iovcnt, int flags)
{
	struct blocking b = {
		.c = c, .fd = tcp_fd, .flags = flags, .timeout_opt = SO_RCVTIMEO
	};
	bool peek = flags & MSG_PEEK;
	bool waitall = flags & MSG_WAITALL;
	/* TCP takes the bytes without a copy: the buffers may be NULL. */
	bool discard = flags & MSG_TRUNC;
	struct wait_clock w = { .policy = &c->rx_spin };
	ssize_t total = 0, n = 0;
	size_t off = 0;
	int i = 0, host;

	if (!iov_bytes(iov, iovcnt))
		return recv_nothing(c, &b);
	host = discard ? iovcnt : host_memory(iov, iovcnt);
	while (i < iovcnt) {
		uint8_t *base =
			discard ? NULL : (uint8_t *)iov[i].iov_base + off;
		size_t want = iov[i].iov_len - off;

		if (!want) {
			i++;
			off = 0;
			continue;
		}
		n = recv_into(c, i >= host, base, want, peek, total);
		if (n == -EAGAIN && (!total || waitall) && must_not_block(&b)) {
			/* Before giving up: is the peer gone? */
			check_peer_unless_heard(c, tcp_fd);
			n = recv_into(c, i >= host, base, want, peek, total);
		}
		if (n > 0) {
			wait_clock_stop(&w);
			off += n;
			total += n;
			/*
			 * A short read took all there was: only MSG_WAITALL
			 * waits for more.
			 */
			if ((size_t)n < want && !waitall)
				break;
			continue;
		}
		if (n != -EAGAIN || (total && !waitall) || must_not_block(&b))
			break;
		if (peek && total) {
			/* What it peeked keeps the socket readable. */
			n = wait_more_peeked(&b);
			if (n)
				break;
			continue;
		}
		wait_clock_start(&w);
		if (spin(c, &w, transport_readable))
			continue;
		n = readiness_wait_readable(c->r, b.deadline);
		if (restarts(&b, n, total))
			continue;
		if (n)
			break;
	}
	wait_clock_stop(&w);
	readiness_after_recv(c->r);
	return total ? total : n;
}

/*
 * Lets a FIN complete before the caller's kernel socket sends its own:
 * the peer must find the RDMA FIN already there when TCP says "closed".
 * A peer that let its queue pair go (it closed first) reads nothing more,
 * and the writes to it would only complete when they time out.
 */
void conn_rdma_wait_writes(struct conn *c)
{
	struct timespec pause = { .tv_nsec = 50000 };
	int64_t deadline = clock_ms() + 200;

	while (transport_writes_in_flight(c->t) && clock_ms() < deadline &&
	       !__atomic_load_n(&c->qp_lost, __ATOMIC_ACQUIRE) &&
	       !transport_progress(c->t))
		nanosleep(&pause, NULL);
}
