// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "real.h"
#include "spin.h"

/* Written to out_fd, this makes an eventfd unwritable (see eventfd(2)). */
#define EVENTFD_FULL 0xfffffffffffffffeull

unsigned int conn_generation;

/*
 * An arrival that the program's epoll_wait() reports itself
 * (conn_serve_event() told) need not set in_fd, and the read that takes
 * it then need not reset it: two system calls per message on the path
 * Gloo takes.  in_fd lags the data meanwhile, which nothing notices as
 * long as nothing else watches in_fd; whatever starts to is brought up to
 * date (settled) first:
 *   - an epoll_wait() that starts settles every lagging conn
 *     (conn_epoll_wait_begin(), epoll_reg_settle());
 *   - a poll() or select() counts itself on the conn, then syncs it
 *     (conn_poll_begin());
 *   - a blocking read counts itself a waiter, then looks at the ring
 *     under the transport's lock, which the serving thread took to reap
 *     before it looked at the waiters: one of the two sees the other;
 *   - a registration in another set syncs the conn once it is recorded.
 * So a conn lags only while none of those is already asleep: no other
 * thread in an epoll_wait(), nobody polling it, no read waiting on it.
 * Each side publishes before it looks (sequentially consistent atomics
 * for the epoll_wait() count, the sync lock for pollers), so one of the
 * two sees the other.
 */
static unsigned int epoll_waiters; /* threads in the program's epoll_wait() */
static unsigned int lagging;	   /* conns whose in_fd lags */

struct conn_private {
	struct conn pub;
	pthread_mutex_t sync_lock;
	pthread_mutex_t wait_lock;
	/* Under wait_lock: */
	unsigned int waiters;  /* atomic reads: calls asleep on the channel */
	bool watching;	       /* the channel is in the progress thread's set */
	bool readiness_wanted; /* atomic reads: see conn_want_readiness() */
	bool progress_wanted;  /* atomic reads: see conn_watch() */
	bool event_unread;     /* a read woke for an event it left in place */
	/* Under sync_lock: */
	bool in_ready;
	bool in_lag; /* atomic reads: see lagging */
	bool out_ready;
	/* Atomic: the poll() and select() calls watching it. */
	unsigned int pollers;
	/* The transport's arrivals when in_fd was last set. */
	uint64_t arrivals;
	struct spin_policy rx_spin; /* waits for data */
	struct spin_policy tx_spin; /* waits for credit */
	size_t zerocopy_min;	    /* 0: every send is copied */
	bool zerocopy_failed;	    /* atomic: logged once */
};

static struct conn_private *priv(struct conn *c)
{
	return (struct conn_private *)c;
}

int conn_create(struct rdma_cm_id *id, struct transport *t,
		unsigned int spin_us, size_t zerocopy_min, struct conn **out)
{
	struct conn_private *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->pub.in_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	p->pub.out_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (p->pub.in_fd < 0 || p->pub.out_fd < 0) {
		if (p->pub.in_fd >= 0)
			real.close(p->pub.in_fd);
		if (p->pub.out_fd >= 0)
			real.close(p->pub.out_fd);
		free(p);
		return -EMFILE;
	}
	pthread_mutex_init(&p->sync_lock, NULL);
	pthread_mutex_init(&p->wait_lock, NULL);
	p->pub.watch_epfd = -1;
	p->pub.id = id;
	p->pub.t = t;
	p->pub.generation = conn_generation;
	spin_policy_init(&p->rx_spin, spin_us);
	spin_policy_init(&p->tx_spin, spin_us);
	p->zerocopy_min = zerocopy_min;
	/* A fresh out_fd is writable: make it say "no credit" until synced. */
	(void)!real.write(p->pub.out_fd, &(uint64_t){ EVENTFD_FULL }, 8);
	conn_sync(&p->pub);
	*out = &p->pub;
	return 0;
}

static void eventfd_reset(int fd)
{
	uint64_t v;

	(void)!real.read(fd, &v, sizeof(v));
}

static void set_lag(struct conn_private *p, bool on)
{
	if (__atomic_exchange_n(&p->in_lag, on, __ATOMIC_SEQ_CST) != on)
		__atomic_add_fetch(&lagging, on ? 1 : -1, __ATOMIC_SEQ_CST);
}

/* Under sync_lock: whether in_fd may lag now (see lagging). */
static bool lag_unwatched(struct conn_private *p)
{
	set_lag(p, true);
	if (__atomic_load_n(&epoll_waiters, __ATOMIC_SEQ_CST) <= 1 &&
	    !__atomic_load_n(&p->pollers, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&p->waiters, __ATOMIC_SEQ_CST))
		return true;
	set_lag(p, false);
	return false;
}

/*
 * told: see conn_serve_event().  out (if not NULL): the readiness the fds
 * were set from.  false: nothing was synced (closed, or dead in a fork
 * child), and out is untouched.
 */
static bool sync_fds(struct conn *c, bool told, struct transport_readiness *out)
{
	struct conn_private *p = priv(c);
	struct transport_readiness r = { .corked = false };
	bool lag;

	if (!conn_alive(c))
		return false;
	/* Serialised: two threads must not set the fds in the wrong order. */
	pthread_mutex_lock(&p->sync_lock);
	/*
	 * Closed: its fd numbers may already belong to other files.
	 * (conn_close() cleared the lag under this lock.)
	 */
	if (__atomic_load_n(&c->closing, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&p->sync_lock);
		return false;
	}
	transport_readiness(c->t, &r);
	lag = r.data_or_error && !p->in_ready && told && lag_unwatched(p);
	/* Every arrival is a new edge for EPOLLET, even on a readable fd. */
	if (r.data_or_error && !lag &&
	    (!p->in_ready || r.arrivals != p->arrivals))
		(void)!real.write(c->in_fd, &(uint64_t){ 1 }, 8);
	else if (!r.data_or_error && p->in_ready)
		eventfd_reset(c->in_fd);
	set_lag(p, lag);
	p->in_ready = r.data_or_error && !lag;
	p->arrivals = r.arrivals;
	if (r.writable != p->out_ready) {
		eventfd_reset(c->out_fd);
		if (!r.writable)
			(void)!real.write(c->out_fd,
					  &(uint64_t){ EVENTFD_FULL }, 8);
		p->out_ready = r.writable;
	}
	pthread_mutex_unlock(&p->sync_lock);
	/* Corked bytes go out with a completion that someone must reap. */
	if (r.corked)
		conn_watch(c);
	if (out)
		*out = r;
	return true;
}

void conn_sync(struct conn *c)
{
	sync_fds(c, false, NULL);
}

void conn_settle(struct conn *c)
{
	if (__atomic_load_n(&priv(c)->in_lag, __ATOMIC_SEQ_CST))
		sync_fds(c, false, NULL);
}

bool conn_epoll_wait_begin(void)
{
	__atomic_add_fetch(&epoll_waiters, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&lagging, __ATOMIC_SEQ_CST);
}

void conn_epoll_wait_end(void)
{
	__atomic_sub_fetch(&epoll_waiters, 1, __ATOMIC_SEQ_CST);
}

void conn_fork_child(void)
{
	__atomic_store_n(&lagging, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&epoll_waiters, 0, __ATOMIC_SEQ_CST);
}

void conn_poll_begin(struct conn *c)
{
	__atomic_add_fetch(&priv(c)->pollers, 1, __ATOMIC_SEQ_CST);
	conn_want_readiness(c);
}

void conn_poll_end(struct conn *c)
{
	__atomic_sub_fetch(&priv(c)->pollers, 1, __ATOMIC_SEQ_CST);
}

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
 * Puts c's channel into the progress thread's epoll set or takes it out.
 * Out, not EPOLL_CTL_MOD to no events: the kernel adds EPOLLERR and
 * EPOLLHUP to every MOD, and a channel's wake-up carries no event mask,
 * so an entry "disabled" that way still woke the progress thread for
 * every completion (one needless context switch per message).
 */
static void watch_channel(struct conn *c, bool on)
{
	int epfd = __atomic_load_n(&c->watch_epfd, __ATOMIC_ACQUIRE);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	if (epfd >= 0)
		real.epoll_ctl(epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL,
			       transport_event_fd(c->t), &ev);
}

/*
 * The progress thread watches the channel while something relies on it
 * (conn_watch()), except while a read sleeps there: one completion then
 * wakes one thread, and the reader contends with nobody for the transport.
 */
static void update_watch_locked(struct conn *c)
{
	struct conn_private *p = priv(c);
	bool want = p->progress_wanted && !p->waiters;

	if (want == p->watching)
		return;
	watch_channel(c, want);
	p->watching = want;
}

/* conn_want_readiness() or conn_watch() was called: sticky. */
static bool proxies_kept(struct conn *c)
{
	return __atomic_load_n(&priv(c)->readiness_wanted, __ATOMIC_ACQUIRE);
}

void conn_want_readiness(struct conn *c)
{
	struct conn_private *p = priv(c);

	if (!conn_alive(c))
		return;
	if (!proxies_kept(c)) {
		pthread_mutex_lock(&p->wait_lock);
		__atomic_store_n(&p->readiness_wanted, true, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&p->wait_lock);
	}
	/* Whatever comes next raises an event; what came before is synced. */
	transport_arm(c->t);
	conn_sync(c);
}

void conn_watch(struct conn *c)
{
	struct conn_private *p = priv(c);

	/* A fork child must not touch the parent's epoll set. */
	if (!conn_alive(c) ||
	    __atomic_load_n(&p->progress_wanted, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&p->wait_lock);
	__atomic_store_n(&p->readiness_wanted, true, __ATOMIC_RELEASE);
	__atomic_store_n(&p->progress_wanted, true, __ATOMIC_RELEASE);
	update_watch_locked(c);
	pthread_mutex_unlock(&p->wait_lock);
	/* What came before the watch raised no event it will see. */
	conn_sync(c);
}

void conn_serve_event(struct conn *c, bool told, struct transport_readiness *r)
{
	transport_handle_event(c->t);
	if (!sync_fds(c, told, r) && r)
		transport_readiness(c->t, r);
}

/*
 * After a send changed the transport's state.  Until the program wants
 * the connection's readiness, nothing reads its proxy fds
 * (conn_want_readiness() syncs them first), and only corked bytes need
 * anything: someone to reap the completion that sends them.  A read
 * never corks bytes: it syncs only if the proxies are kept.  (The other
 * order, readiness wanted meanwhile, is safe: both sides take the
 * transport's lock between their store and their load.)
 */
static void sync_after_send(struct conn *c, bool corked)
{
	if (proxies_kept(c))
		conn_sync(c);
	else if (corked)
		conn_watch(c);
}

/*
 * Enters a sleep on the channel.  An event that an earlier read woke for
 * is taken now, before the sleep, and not on the way from the wake-up to
 * the program: that read went straight to the data.
 */
static void waiter_enter(struct conn *c)
{
	struct conn_private *p = priv(c);

	pthread_mutex_lock(&p->wait_lock);
	__atomic_add_fetch(&p->waiters, 1, __ATOMIC_SEQ_CST);
	update_watch_locked(c);
	if (p->event_unread) {
		transport_take_event(c->t);
		p->event_unread = false;
	}
	pthread_mutex_unlock(&p->wait_lock);
}

/*
 * Leaves it; woke: the channel had an event.  Without it
 * (conn_want_readiness()), the event stays unread, and the channel unarmed,
 * until the next sleep.  With it, the last one out takes it and arms again
 * first: a readable channel back in the progress thread's set would wake that
 * thread at once, to contend with this reader for the transport.
 */
static void waiter_leave(struct conn *c, bool woke)
{
	struct conn_private *p = priv(c);

	pthread_mutex_lock(&p->wait_lock);
	if (woke)
		p->event_unread = true;
	if (!__atomic_sub_fetch(&p->waiters, 1, __ATOMIC_SEQ_CST)) {
		if (p->readiness_wanted && p->event_unread) {
			transport_handle_event(c->t);
			p->event_unread = false;
		}
		update_watch_locked(c);
	}
	pthread_mutex_unlock(&p->wait_lock);
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
 * away also disconnects its queue pair (its close does, and so does its
 * kernel when it dies), and the CM's disconnect makes the proxy fds
 * ready, which a sleep watches anyway.  A socket in the sleep's poll set
 * cost every wake-up one more wait-queue entry to remove, between the
 * arrival and the program.
 */
static void check_peer(struct conn *c, int tcp_fd)
{
	struct pollfd pfd = { .fd = tcp_fd, .events = POLLIN | POLLRDHUP };

	if (real.poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR))
		transport_peer_gone(c->t);
}

/*
 * A send waiting for credit sleeps on the proxy fd, which the progress
 * thread makes writable: in a bulk transfer its reaping and credit
 * handling overlap the sender's copying (1 KiB stream in the fabric:
 * 9.4 MB/s, 6.5 when the sender slept on the channel too).  Returns 0,
 * -EAGAIN on timeout, -EINTR.
 */
static int wait_writable(struct conn *c, int64_t deadline)
{
	struct pollfd pfd = { .fd = c->out_fd, .events = POLLOUT };
	int timeout, ret;

	/* The progress thread makes out_fd writable when credit comes. */
	conn_watch(c);
	/* A stale proxy state would end the sleep at once. */
	conn_sync(c);
	timeout = clock_ms_left(deadline);
	if (!timeout)
		return -EAGAIN;
	ret = real.poll(&pfd, 1, timeout);
	if (ret < 0)
		return -errno;
	return ret ? 0 : -EAGAIN;
}

/*
 * A read sleeps on the completion channel itself: the completion wakes it
 * directly, not through the progress thread and the proxy fd (1 B
 * ping-pong in the fabric: 260 us one way, 490 us through the progress
 * thread).  The proxy fd still ends the sleep if the progress thread saw
 * the arrival first, or the CM's disconnect came (see check_peer()).
 * Returns 0 (data may be there), -EAGAIN on timeout, -EINTR.
 */
static int wait_readable(struct conn *c, int64_t deadline)
{
	struct pollfd pfd[2] = {
		{ .fd = transport_event_fd(c->t), .events = POLLIN },
		{ .fd = c->in_fd, .events = POLLIN },
	};
	int timeout, ret = 0;

	if (proxies_kept(c))
		conn_sync(c);
	timeout = clock_ms_left(deadline);
	if (!timeout)
		return -EAGAIN;
	waiter_enter(c);
	/* Armed, and reaped after the arm: what comes next raises an event. */
	if (transport_arm_for_read(c->t))
		goto out;
	ret = real.poll(pfd, 2, timeout);
	if (ret < 0) {
		ret = -errno;
		goto out;
	}
	ret = ret ? 0 : -EAGAIN;
out:
	waiter_leave(c, !ret && pfd[0].revents);
	return ret;
}

/*
 * Whether a call may block, and until when: O_NONBLOCK, MSG_DONTWAIT and
 * SO_RCVTIMEO/SO_SNDTIMEO.  Asked of the kernel socket only once the call
 * would block, so that a call that can proceed makes no extra syscall.
 */
struct blocking {
	int fd;
	int flags;
	int timeout_opt; /* SO_RCVTIMEO or SO_SNDTIMEO */
	bool known;
	bool nonblock;
	int64_t deadline; /* -1: none */
};

/* The socket's timeout option in milliseconds; -1 for none. */
static int64_t timeout_ms(int fd, int name)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (real.getsockopt(fd, SOL_SOCKET, name, &tv, &len) ||
	    (!tv.tv_sec && !tv.tv_usec))
		return -1;
	return tv.tv_sec * 1000ll + (tv.tv_usec + 999) / 1000;
}

static bool must_not_block(struct blocking *b)
{
	int fl;

	if (b->known)
		return b->nonblock;
	b->known = true;
	fl = b->flags & MSG_DONTWAIT ? O_NONBLOCK : real.fcntl(b->fd, F_GETFL);
	b->nonblock = fl >= 0 && (fl & O_NONBLOCK);
	if (!b->nonblock) {
		int64_t ms = timeout_ms(b->fd, b->timeout_opt);

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

/* One send's zero-copy state: the piece of its buffer registered now. */
struct zerocopy {
	struct ibv_mr *mr; /* NULL: nothing registered */
	const uint8_t *base;
	size_t len;
	uint64_t end;	  /* where its last posted write ends */
	bool unavailable; /* registration failed: copy the rest */
};

/*
 * Sleeps on the channel until the zero-copy writes have completed: only
 * then may the send return the buffer to the program.  Signals and
 * SO_SNDTIMEO do not end it; a failed queue pair or a peer that has gone
 * does, and takes no more than the fabric's retry timeout to show.  An
 * arrival that wakes it goes on to the proxy fd at once: the progress
 * thread, which would do that, leaves the channel alone meanwhile.
 */
static void wait_zerocopy_done(struct conn *c, uint64_t end)
{
	struct pollfd pfd = { .fd = transport_event_fd(c->t),
			      .events = POLLIN };
	bool done;

	for (;;) {
		waiter_enter(c);
		done = transport_direct_done(c->t, end);
		pfd.revents = 0;
		if (!done)
			real.poll(&pfd, 1, ZEROCOPY_RECHECK_MS);
		waiter_leave(c, pfd.revents);
		if (done)
			return;
		if (pfd.revents && proxies_kept(c))
			conn_sync(c);
	}
}

static void zerocopy_release(struct conn *c, struct zerocopy *z)
{
	if (!z->mr)
		return;
	wait_zerocopy_done(c, z->end);
	transport_deregister(z->mr);
	z->mr = NULL;
}

/*
 * Sends from the len bytes at buf without copying them, from the piece of
 * the buffer registered now or the next one; -ENOBUFS: copy them instead.
 */
static ssize_t send_zerocopy(struct conn *c, struct zerocopy *z,
			     const uint8_t *buf, size_t len)
{
	if (!z->mr || buf < z->base || buf >= z->base + z->len) {
		zerocopy_release(c, z);
		if (z->unavailable)
			return -ENOBUFS;
		z->len = len < ZEROCOPY_CHUNK ? len : ZEROCOPY_CHUNK;
		z->base = buf;
		z->mr = transport_register(c->t, buf, z->len);
		if (!z->mr) {
			if (!__atomic_exchange_n(&priv(c)->zerocopy_failed,
						 true, __ATOMIC_RELAXED))
				log_info("rdma: zero-copy send of %zu bytes "
					 "refused (%s): copying instead",
					 z->len, strerror(errno));
			z->unavailable = true;
			return -ENOBUFS;
		}
		log_debug("rdma: zero-copy send of %zu bytes", z->len);
		z->end = 0;
	}
	if (len > (size_t)(z->base + z->len - buf))
		len = z->base + z->len - buf;
	return transport_send_direct(c->t, z->mr, buf, len, &z->end);
}

/*
 * Sends some of the bytes of iov after the first skip: those of a buffer
 * of at least zerocopy_min bytes straight from it, on a socket that may
 * block, the others by copying; bytes before such a buffer go first.
 */
static ssize_t send_some(struct conn *c, struct zerocopy *z, struct blocking *b,
			 const struct iovec *iov, int iovcnt, size_t skip,
			 bool *corked)
{
	size_t min = priv(c)->zerocopy_min, off = skip;
	ssize_t n;
	int i = 0, big;

	while (i < iovcnt && off >= iov[i].iov_len)
		off -= iov[i++].iov_len;
	if (!min || i == iovcnt)
		return transport_send(c->t, iov, iovcnt, skip, corked);
	for (big = i; big < iovcnt; big++, off = 0)
		if (iov[big].iov_len - off >= min)
			break;
	if (big == iovcnt || must_not_block(b))
		return transport_send(c->t, iov, iovcnt, skip, corked);
	if (big > i)
		return transport_send(c->t, iov, big, skip, corked);
	n = send_zerocopy(c, z, (const uint8_t *)iov[i].iov_base + off,
			  iov[i].iov_len - off);
	if (n != -ENOBUFS) {
		*corked = false;
		return n;
	}
	return transport_send(c->t, iov, iovcnt, skip, corked);
}

ssize_t conn_send(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags)
{
	struct blocking b = { .fd = tcp_fd,
			      .flags = flags,
			      .timeout_opt = SO_SNDTIMEO };
	struct wait_clock w = { .policy = &priv(c)->tx_spin };
	size_t len = iov_bytes(iov, iovcnt); /* to stage before returning */
	struct zerocopy z = { .mr = NULL };
	bool corked = false;
	ssize_t total = 0, n;

	if (!conn_alive(c))
		return -EPIPE;
	for (;;) {
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
		if (n != -EAGAIN || must_not_block(&b))
			break;
		wait_clock_start(&w);
		if (spin(c, &w, transport_writable))
			continue;
		n = wait_writable(c, b.deadline);
		if (n)
			break;
	}
	wait_clock_stop(&w);
	zerocopy_release(c, &z);
	sync_after_send(c, corked);
	return total ? total : n;
}

ssize_t conn_recv(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags)
{
	struct blocking b = { .fd = tcp_fd,
			      .flags = flags,
			      .timeout_opt = SO_RCVTIMEO };
	bool peek = flags & MSG_PEEK;
	bool waitall = (flags & MSG_WAITALL) && !peek;
	struct wait_clock w = { .policy = &priv(c)->rx_spin };
	ssize_t total = 0, n = 0;
	size_t off = 0;
	int i = 0;

	if (!conn_alive(c))
		return -ECONNRESET;
	/* A peek looks at the start of the stream: one buffer at a time. */
	if (peek && iovcnt > 1)
		iovcnt = 1;
	while (i < iovcnt) {
		uint8_t *base = (uint8_t *)iov[i].iov_base + off;
		size_t want = iov[i].iov_len - off;

		if (!want) {
			i++;
			off = 0;
			continue;
		}
		n = transport_recv(c->t, base, want, peek);
		if (n == -EAGAIN && (!total || waitall) && must_not_block(&b)) {
			/* Before giving up: is the peer gone? */
			check_peer(c, tcp_fd);
			n = transport_recv(c->t, base, want, peek);
		}
		if (n > 0) {
			wait_clock_stop(&w);
			off += n;
			total += n;
			/*
			 * A short read took all there was: only MSG_WAITALL
			 * waits for more.
			 */
			if (peek || ((size_t)n < want && !waitall))
				break;
			continue;
		}
		if (n != -EAGAIN || (total && !waitall) || must_not_block(&b))
			break;
		wait_clock_start(&w);
		if (spin(c, &w, transport_readable))
			continue;
		n = wait_readable(c, b.deadline);
		if (n)
			break;
	}
	wait_clock_stop(&w);
	if (proxies_kept(c))
		conn_sync(c);
	return total ? total : n;
}

/*
 * Lets a FIN complete before the caller's kernel socket sends its own:
 * the peer must find the RDMA FIN already there when TCP says "closed".
 */
static void wait_writes_done(struct conn *c)
{
	struct timespec pause = { .tv_nsec = 50000 };
	int64_t deadline = clock_ms() + 200;

	while (transport_writes_in_flight(c->t) && clock_ms() < deadline &&
	       !transport_progress(c->t))
		nanosleep(&pause, NULL);
}

int conn_shutdown_write(struct conn *c)
{
	int ret;

	if (!conn_alive(c))
		return -ENOTCONN;
	ret = transport_shutdown(c->t);
	wait_writes_done(c);
	conn_sync(c);
	return ret;
}

size_t conn_readable_bytes(struct conn *c)
{
	return conn_alive(c) ? transport_available(c->t) : 0;
}

void conn_close(struct conn *c, bool abortive)
{
	struct conn_private *p = priv(c);
	bool alive = conn_alive(c);

	/*
	 * Under the sync lock: no conn_sync() may write to the fds after this.
	 * A fork child skips it: conn_sync() never runs there, and the lock
	 * may have been held by a thread that does not exist in the child.
	 */
	if (alive)
		pthread_mutex_lock(&p->sync_lock);
	__atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
	/* A fork child's count of lagging conns starts again at 0. */
	if (alive)
		set_lag(p, false);
	real.close(c->in_fd);
	real.close(c->out_fd);
	c->in_fd = c->out_fd = -1;
	if (alive)
		pthread_mutex_unlock(&p->sync_lock);
	if (alive && !abortive) {
		transport_shutdown(c->t);
		wait_writes_done(c);
	}
}

void conn_destroy(struct conn *c)
{
	if (c->in_fd >= 0)
		real.close(c->in_fd);
	if (c->out_fd >= 0)
		real.close(c->out_fd);
	transport_destroy(c->t);
	rdma_destroy_id(c->id);
	pthread_mutex_destroy(&priv(c)->sync_lock);
	pthread_mutex_destroy(&priv(c)->wait_lock);
	free(priv(c));
}
