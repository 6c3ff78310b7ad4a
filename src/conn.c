// SPDX-License-Identifier: MIT
/*
 * An upgraded connection's life: creation, the kernel socket beside it,
 * the routing of each call to RDMA or to that socket, and its close.
 */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "clock.h"
#include "conn_impl.h"
#include "fd_room.h"
#include "fork_page.h"
#include "lock_by.h"
#include "log.h"
#include "rdma_stack.h"
#include "real.h"
#include "sig_restart.h"
#include "stats.h"

/*
 * How long a closed connection's FIN may take before it is torn down;
 * with bytes queued, how often it looks whether the peer takes them.
 */
#define LINGER_TIMEOUT_MS 2000
/*
 * How long a closed connection's queued bytes wait on RDMA for a peer
 * that takes none of them before they move to its kernel socket: the
 * peer's program may be busy elsewhere for seconds (a collection, a long
 * computation, a loaded host), where TCP's buffers would simply wait.
 */
#define LINGER_STALLED_MS 10000
/*
 * How long, at most, a closed connection's send queue drains over RDMA to
 * a peer that keeps taking some of it; then its kernel socket takes over.
 */
#define LINGER_DRAINING_MAX_MS 60000
/*
 * How long _exit() waits for a connection's last writes, as a close()
 * does (conn_rdma_wait_writes()).
 */
#define QUICK_EXIT_MS 200
/*
 * How long _exit() waits, all connections together, for those that a fork
 * child may still use to move to TCP (conn_quick_exit()).
 */
#define QUICK_HAND_OVER_MS 1000
/*
 * A close this soon after a fork hands the connection to the child: a
 * forking server closes its copy as soon as fork() returns.  Later, the
 * fork was for something else (a background save), and so is the close.
 */
#define HAND_OVER_CLOSE_MS 1000

/* Bumped before every fork: a connection older than that may be shared. */
static unsigned int conn_fork_epoch FORK_DATA;
/*
 * The epoch of the last fork whose child may hold what was made before
 * it: a vfork carried out as fork stops counting once its child has
 * exec'd (conn_exec_fork_done()).
 */
static unsigned int holding_epoch FORK_DATA;
/* clock_ms() at the last fork. */
static int64_t last_fork_ms FORK_DATA;
/*
 * Orders the two above between threads that fork at once (the forks made
 * through syscall() run no libc lock around their handlers).
 */
static pthread_mutex_t epoch_lock FORK_DATA = PTHREAD_MUTEX_INITIALIZER;
/* This thread's last fork, which conn_exec_fork_done() may undo. */
static __thread struct {
	unsigned int epoch, holding_before;
	int64_t last_fork_before_ms;
} this_fork;

/*
 * Closed connections whose FIN is still on its way, or, moved to TCP,
 * whose backlog is (the bytes that moved with it).
 */
struct closing {
	struct conn *conn;
	int64_t closed_ms;
	int64_t deadline_ms;
	size_t queued_then;    /* its send queue at the last deadline */
	int64_t took_ms;       /* when the peer was last seen taking some */
	uint64_t backlog_left; /* at the last change */
	int64_t stalled_at_ms; /* reset if still backlog_left then */
	struct closing *next;
};

static pthread_mutex_t closing_lock FORK_DATA = PTHREAD_MUTEX_INITIALIZER;
static struct closing *closing_list FORK_DATA;
/* Atomic: entries not yet destroyed. */
static unsigned int closing_count FORK_DATA;
/* Atomic: entries that had a backlog at the last tick. */
static unsigned int closing_writing FORK_DATA;
/* Atomic: conn_closing_drain() calls under way (an exit or exec waits). */
static unsigned int closing_hurried FORK_DATA;
/*
 * Atomic: an _exit() ended the lingers of closed connections with queued
 * bytes; the reap ticks run so far.
 */
static bool closing_cut FORK_DATA;
static unsigned int closing_ticks FORK_DATA;

/*
 * The connections whose kernel socket only roceshim's own dup holds: the
 * program closed its last fd.  A fork child must not hold such a socket.
 * Over TCP it would not, and its copy would keep the connection from
 * ending (no FIN) while it lives.  A fork holds this lock, so that the
 * child's copy of the list names exactly the dups its descriptor table
 * holds, and closes them.
 */
static pthread_mutex_t kept_lock FORK_DATA = PTHREAD_MUTEX_INITIALIZER;
static struct conn *kept_list FORK_DATA;

/*
 * Under c->lock: kfd becomes roceshim's own dup of fd.  fd_room's lock
 * first, as a fork takes them (conn_fork_lock()).
 */
static void keep_socket_locked(struct conn *c, int fd)
{
	fd_room_enter();
	pthread_mutex_lock(&kept_lock);
	c->kfd = fd_room_dup(fd);
	c->kfd_ours = c->kfd >= 0;
	if (c->kfd_ours) {
		c->prev_kept = NULL;
		c->next_kept = kept_list;
		if (kept_list)
			kept_list->prev_kept = c;
		kept_list = c;
	}
	pthread_mutex_unlock(&kept_lock);
	fd_room_leave();
}

/* Under c->lock: closes roceshim's dup. */
static void unkeep_socket_locked(struct conn *c)
{
	pthread_mutex_lock(&kept_lock);
	if (c->prev_kept)
		c->prev_kept->next_kept = c->next_kept;
	else
		kept_list = c->next_kept;
	if (c->next_kept)
		c->next_kept->prev_kept = c->prev_kept;
	real.close(c->kfd);
	pthread_mutex_unlock(&kept_lock);
	c->kfd_ours = false;
	c->kfd_for_call = false;
	c->kfd_for_peer = false;
}

/*
 * Every connection of this process, for the health check: a queue pair
 * whose writes fail (retries exceeded on a broken path) says so in a
 * completion that may wake nobody (Soft-RoCE raises no event for an error
 * completion on a channel armed for solicited ones).  While writes are in
 * flight, a timer looks at each connection once a second.
 */
#define HEALTH_PERIOD_S 1

static struct {
	pthread_mutex_t lock;
	struct conn *list;
	int timer_fd; /* -1 until the first send */
	bool armed;   /* atomic */
	struct progress_watcher watcher;
} live = { .lock = PTHREAD_MUTEX_INITIALIZER, .timer_fd = -1 };

static void live_add(struct conn *c)
{
	pthread_mutex_lock(&live.lock);
	c->prev_live = NULL;
	c->next_live = live.list;
	if (live.list)
		live.list->prev_live = c;
	live.list = c;
	pthread_mutex_unlock(&live.lock);
}

static void live_remove(struct conn *c)
{
	pthread_mutex_lock(&live.lock);
	if (c->prev_live)
		c->prev_live->next_live = c->next_live;
	else if (live.list == c)
		live.list = c->next_live;
	if (c->next_live)
		c->next_live->prev_live = c->prev_live;
	c->prev_live = c->next_live = NULL;
	pthread_mutex_unlock(&live.lock);
}

static void health_arm(bool on)
{
	struct itimerspec its = { .it_value.tv_sec = on ? HEALTH_PERIOD_S : 0,
				  .it_interval.tv_sec =
					  on ? HEALTH_PERIOD_S : 0 };

	timerfd_settime(live.timer_fd, 0, &its, NULL);
}

/*
 * A queue pair that completes none of its posted writes for this long has
 * gone silent: a working one ends its retries with an error completion
 * well before (rdma_cm's defaults: about 7 s), but Soft-RoCE, after a link
 * flap, sometimes never does.  It is disconnected before the move, which
 * puts it in the error state: a write it still held can never land in the
 * peer's ring later (from a buffer the program has had back since).
 */
#define QP_SILENT_MS 30000

/* Under live.lock. */
static bool qp_silent(struct conn *c, int64_t now)
{
	uint64_t done;
	unsigned int posted = transport_posted_writes(c->t, &done);

	if (!posted || done != c->silent_mark || !c->silent_since_ms) {
		c->silent_mark = done;
		c->silent_since_ms = now;
		return false;
	}
	return now - c->silent_since_ms >= QP_SILENT_MS;
}

static bool late_bytes_check(struct conn *c);

/*
 * The timer: a connection whose queue pair failed moves to TCP; one shut
 * both ways resets once bytes came.
 */
static void health_check(struct progress_watcher *w, uint32_t events)
{
	int64_t now = clock_ms();
	bool busy = false;
	uint64_t ticks;
	struct conn *c;

	(void)w;
	(void)events;
	(void)!real.read(live.timer_fd, &ticks, sizeof(ticks));
	/* Cleared first: a send after this arms the timer again. */
	__atomic_store_n(&live.armed, false, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&live.lock);
	for (c = live.list; c; c = c->next_live) {
		if (__atomic_load_n(&c->late_watch, __ATOMIC_ACQUIRE))
			busy |= late_bytes_check(c);
		if (!conn_on_rdma(c) || !transport_writes_in_flight(c->t))
			continue;
		busy = true;
		if (__atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE))
			continue;
		if (transport_qp_failed(c->t))
			conn_qp_lost(c, ROCESHIM_DOWNGRADE_QP_ERROR);
		else if (qp_silent(c, now))
			conn_drop_qp(c, ROCESHIM_DOWNGRADE_QP_SILENT);
	}
	/*
	 * Under the lock, as health_watch() arms: a watch since the store
	 * above keeps the timer.
	 */
	if (busy)
		__atomic_store_n(&live.armed, true, __ATOMIC_SEQ_CST);
	else if (!__atomic_load_n(&live.armed, __ATOMIC_SEQ_CST))
		health_arm(false);
	pthread_mutex_unlock(&live.lock);
}

/* The health check's timerfd, out of the program's way (fd_room.h). */
static int hidden_timer(void)
{
	int fd, hidden;

	fd_room_enter();
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	hidden = fd < 0 ? -1 : fd_room_keep(fd);
	fd_room_leave();
	return hidden;
}

/* Writes are in flight: the health check runs until none are. */
static void health_watch(void)
{
	if (__atomic_load_n(&live.armed, __ATOMIC_SEQ_CST) ||
	    __atomic_exchange_n(&live.armed, true, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_lock(&live.lock);
	if (live.timer_fd < 0) {
		live.timer_fd = hidden_timer();
		live.watcher.fn = health_check;
		if (live.timer_fd >= 0 &&
		    progress_add(live.timer_fd, EPOLLIN, &live.watcher)) {
			real.close(live.timer_fd);
			live.timer_fd = -1;
		}
	}
	if (live.timer_fd >= 0)
		health_arm(true);
	pthread_mutex_unlock(&live.lock);
}

static bool reset_if_unread(struct conn *c, int fd);
static void on_kernel_event(struct progress_watcher *w, uint32_t events);

/*
 * The transport's rings changed (under its lock): the row shows them,
 * and the process's gauge moves by what it has not been told yet (the
 * segment may appear only after the first connection's rings).
 */
static void rings_changed(void *ctx, enum transport_ring_event ev,
			  const struct transport_rings *now)
{
	static const enum stats_ring_event events[] = {
		[TRANSPORT_RINGS_CHANGED] = STATS_RING_CHANGED,
		[TRANSPORT_RING_GREW] = STATS_RING_GREW,
		[TRANSPORT_RING_SHRANK] = STATS_RING_SHRANK,
		[TRANSPORT_RING_REFUSED] = STATS_RING_REFUSED,
	};
	const struct stats_ring_sizes sizes = {
		.rx_bytes = now->rx_bytes,
		.tx_bytes = now->tx_bytes,
		.pinned_bytes = now->pinned_bytes,
	};
	struct conn *c = ctx;
	int64_t delta = (int64_t)(now->pinned_bytes - c->pinned_told);

	if (stats_rings(__atomic_load_n(&c->row, __ATOMIC_ACQUIRE), events[ev],
			delta, &sizes))
		c->pinned_told = now->pinned_bytes;
}

int conn_create(struct rdma_cm_id *id, struct transport *t,
		const struct conn_options *opt, struct conn **out)
{
	struct conn *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	err = readiness_create(t, &c->r);
	if (err)
		goto fail;
	c->slot = share_slot_new(c);
	if (!c->slot) {
		readiness_destroy(c->r);
		err = -ENOSPC;
		goto fail;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->moved, NULL);
	c->id = id;
	c->t = t;
	spin_policy_init(&c->rx_spin, opt->spin_us);
	spin_policy_init(&c->tx_spin, opt->spin_us);
	c->zerocopy_min = opt->zerocopy_min;
	c->pinned_min = opt->pinned_zerocopy_min;
	c->reg_cache_bytes = opt->reg_cache_bytes;
	c->timeout_ms = opt->move_timeout_ms;
	c->accepted_port = opt->accepted_port;
	c->fork_epoch = __atomic_load_n(&conn_fork_epoch, __ATOMIC_ACQUIRE);
	c->row = -1;
	c->kfd = -1;
	c->kwatch.fn = on_kernel_event;
	transport_on_rings(t, rings_changed, c);
	live_add(c);
	*out = c;
	return 0;
fail:
	free(c);
	return err;
}

bool conn_alive(const struct conn *c)
{
	return readiness_alive(c->r);
}

bool conn_peer_gone(const struct conn *c)
{
	return __atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE);
}

struct readiness *conn_readiness(struct conn *c)
{
	return c->r;
}

void conn_start(struct conn *c)
{
	readiness_start(c->r);
}

static enum conn_path path_of(const struct conn *c)
{
	return __atomic_load_n(&c->path, __ATOMIC_ACQUIRE);
}

/* ---- the kernel socket ----------------------------------------------- */

void conn_watch_kernel_locked(struct conn *c, uint32_t events)
{
	int ret;

	if (c->kfd < 0 || !conn_alive(c))
		return;
	events |= EPOLLONESHOT;
	ret = c->kwatched ? progress_mod(c->kfd, events, &c->kwatch)
			  : progress_add(c->kfd, events, &c->kwatch);
	/* The kernel drops the entry with the socket's last descriptor. */
	if (ret == -ENOENT)
		ret = progress_add(c->kfd, events, &c->kwatch);
	c->kwatched = !ret;
}

static void unwatch_kernel_locked(struct conn *c)
{
	if (c->kwatched)
		progress_del(c->kfd);
	c->kwatched = false;
}

void conn_attach(struct conn *c, int fd, int row, int sndbuf)
{
	bool qp_lost;

	pthread_mutex_lock(&c->lock);
	__atomic_store_n(&c->row, row, __ATOMIC_RELEASE);
	c->kfd = fd;
	/* The peer's close, reset or move shows there first. */
	conn_watch_kernel_locked(c, EPOLLIN | EPOLLRDHUP);
	qp_lost = __atomic_load_n(&c->qp_lost, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&c->lock);
	/* Lost before: the move waited for this socket. */
	if (qp_lost)
		conn_qp_lost(c, ROCESHIM_DOWNGRADE_QP_ERROR);
	transport_report_rings(c->t);
	conn_limit_send(c, sndbuf);
}

/*
 * A connection closed with unread bytes resets, as TCP does: its kernel
 * socket lingers 0, so that the close sends a reset, and no RDMA FIN goes
 * (the caller sees SO_LINGER {1, 0}).  true: it resets.
 */
void conn_reset_on_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

void conn_deliver_on_close(int fd)
{
	struct linger lg = { .l_onoff = 0 };

	real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

void conn_reset_kernel(int fd)
{
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };

	conn_reset_on_close(fd);
	if (real.connect(fd, &unspec, sizeof(unspec)))
		real.shutdown(fd, SHUT_RD);
}

static bool reset_if_unread(struct conn *c, int fd)
{
	if (path_of(c) != CONN_RDMA)
		return false;
	/* Late bytes reset it too, after a FIN (reset_for_late_bytes()). */
	if (transport_late_bytes(c->t))
		real.shutdown(fd, SHUT_WR);
	else if (!transport_available(c->t))
		return false;
	conn_reset_on_close(fd);
	return true;
}

/*
 * Whether the connection still needs its kernel socket once the program's
 * last fd of it here is closed: a fork child may go on with it (conn_release()
 * moves it to TCP), a move under way must finish, and bytes this end sent
 * before a move must still reach the peer.
 */
static bool needs_socket_locked(struct conn *c, bool shared)
{
	switch (path_of(c)) {
	case CONN_RDMA:
		return shared;
	case CONN_MOVING:
		return true;
	case CONN_TCP:
		return c->backlog_from != c->backlog_to ||
		       !conn_move_caught_up_locked(c, clock_ms());
	default:
		return false;
	}
}

/*
 * Whether a connection on RDMA that the program closes keeps its kernel
 * socket until the peer has consumed what this end sent.  A forking
 * server hands a connection to a child before it reads or writes a byte,
 * and the child's move to TCP needs this end, to send those bytes again
 * over TCP: over TCP the kernel delivers them after the close.  A peer
 * that has sent bytes already took part; waiting for every peer would
 * cost each close a round trip.  Bytes still in the send queue need the
 * socket too: if the peer does not take them by the linger's end, they
 * move there (finished()).  Asked only where the socket is not needed
 * otherwise, which on RDMA means no fork child shares it.
 */
static bool lingers_for_peer_locked(struct conn *c)
{
	struct transport_counters tc;

	if (path_of(c) != CONN_RDMA ||
	    __atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE))
		return false;
	transport_counters(c->t, &tc);
	return (!tc.rx_bytes && !transport_peer_took_all(c->t)) ||
	       transport_queued(c->t);
}

void conn_fd_closing(struct conn *c, int fd, int other_fd, bool in_call)
{
	bool shared, needed, lingers = false, reset = false;

	if (!conn_alive(c))
		return;
	pthread_mutex_lock(&c->lock);
	shared = conn_shared(c);
	if (other_fd < 0 && !shared && !in_call)
		reset = reset_if_unread(c, fd);
	if (c->kfd == fd && !c->kfd_ours) {
		unwatch_kernel_locked(c);
		c->kfd = other_fd;
		needed = needs_socket_locked(c, shared);
		if (other_fd < 0 && !needed && !reset)
			lingers = lingers_for_peer_locked(c);
		if (other_fd < 0 && (needed || in_call || lingers)) {
			keep_socket_locked(c, fd);
			c->kfd_for_call = !needed && in_call;
			c->kfd_for_peer = c->kfd_ours && !needed && lingers;
			if (c->kfd_for_peer)
				readiness_drop_socket(c->r, fd);
		}
		if (path_of(c) != CONN_TCP)
			conn_watch_kernel_locked(c, EPOLLIN | EPOLLRDHUP);
		else if (c->backlog_from != c->backlog_to)
			conn_watch_kernel_locked(c, EPOLLOUT);
	}
	pthread_mutex_unlock(&c->lock);
}

/* The program's bytes on the kernel socket; MSG_NOSIGNAL: see below. */
static ssize_t kernel_send(int fd, const struct iovec *iov, int iovcnt,
			   int flags)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov,
			      .msg_iovlen = iovcnt };
	ssize_t n = real.sendmsg(fd, &msg, flags | MSG_NOSIGNAL);

	return n < 0 ? -errno : n;
}

static ssize_t kernel_recv(int fd, const struct iovec *iov, int iovcnt,
			   int flags)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov,
			      .msg_iovlen = iovcnt };
	ssize_t n = real.recvmsg(fd, &msg, flags);

	return n < 0 ? -errno : n;
}

/* ---- fork children ---------------------------------------------------- */

/*
 * How long past its longest wait for the peer's marker the owner's move
 * may take to say how it ended: its tick, and the resend of what it
 * staged, come after.
 */
#define SHARE_REPLY_SLACK_MS 2000

/*
 * A connection inherited across fork is its owner's: this process asks the
 * owner to move it to the kernel socket, which both then share as they
 * would over TCP (share.h).  It waits longer than the owner's move may
 * (twice its first wait, which a stall on the path may extend by about
 * as much): a descendant that gave up first would take for reset a
 * connection the owner then moves.  staying: this process goes on with
 * it, and its stats show it (a process about to exec or exit publishes
 * none: a segment named after it would outlive it).  0, or -EINTR when a
 * signal handler interrupted the wait (the request stands).
 */
static int claim_inherited(struct conn *c, bool staying)
{
	int longest = move_wait_longest_ms(c->timeout_ms);
	enum conn_path path = path_of(c), was;
	enum share_state state;

	/*
	 * On TCP at the fork, the owner may not have written the bytes that
	 * moved with it yet: they go first, and only the owner has them.
	 */
	if (path == CONN_FAILED ||
	    (path == CONN_TCP && c->backlog_from == c->backlog_to))
		return 0;
	state = share_request(c->slot, 2 * longest + SHARE_REPLY_SLACK_MS);
	if (state < SHARE_TCP)
		return -EINTR;
	c->backlog_from = c->backlog_to = 0;
	c->shut_kernel = false;
	if (state != SHARE_TCP)
		conn_record_reset(c);
	was = __atomic_exchange_n(&c->path,
				  state == SHARE_TCP ? CONN_TCP : CONN_FAILED,
				  __ATOMIC_ACQ_REL);
	if (staying)
		stats_row_claimed(__atomic_load_n(&c->row, __ATOMIC_ACQUIRE),
				  state == SHARE_TCP && was != CONN_TCP);
	return 0;
}

struct share_slot *conn_slot(struct conn *c)
{
	return c->slot;
}

/* The owner: a descendant asked about c (progress thread). */
void conn_on_share_request(struct conn *c)
{
	pthread_mutex_lock(&c->lock);
	conn_move_begin_locked(c, ROCESHIM_DOWNGRADE_FORK);
	/* It cannot move (its peer is gone): the descendant need not wait. */
	if (path_of(c) == CONN_RDMA)
		share_publish(c->slot, SHARE_FAILED);
	pthread_mutex_unlock(&c->lock);
}

uint16_t conn_handed_over_port(struct conn *c)
{
	struct transport_counters sent;

	if (!c->accepted_port || path_of(c) != CONN_RDMA)
		return 0;
	transport_counters(c->t, &sent);
	return sent.tx_bytes ? 0 : c->accepted_port;
}

/* ---- the calls -------------------------------------------------------- */

/*
 * Waits until a move is over; -EAGAIN if the call must not block, or when
 * it took longer than the socket's timeout.
 */
static int wait_moved(struct conn *c, int fd, int flags, int opt)
{
	int64_t deadline = -1, ms;
	struct timespec ts;

	if (real_call_nonblocking(fd, flags)) {
		/* A move the progress thread is ending ends under the lock. */
		pthread_mutex_lock(&c->lock);
		pthread_mutex_unlock(&c->lock);
		return path_of(c) == CONN_MOVING ? -EAGAIN : 0;
	}
	ms = real_socket_timeout_ms(fd, opt);
	if (ms >= 0)
		deadline = clock_ms() + ms;
	pthread_mutex_lock(&c->lock);
	while (path_of(c) == CONN_MOVING) {
		int left = clock_ms_left(deadline);

		if (!left)
			break;
		if (left < 0) {
			pthread_cond_wait(&c->moved, &c->lock);
			continue;
		}
		clock_timespec_in(CLOCK_REALTIME, left, &ts);
		pthread_cond_timedwait(&c->moved, &c->lock, &ts);
	}
	pthread_mutex_unlock(&c->lock);
	return path_of(c) == CONN_MOVING ? -EAGAIN : 0;
}

/*
 * Before the program's bytes go to the kernel socket, the bytes that
 * moved with the connection must have gone: 0, or -EAGAIN for a call
 * that must not block.
 */
static int backlog_out(struct conn *c, int fd, int flags)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	bool empty;

	for (;;) {
		pthread_mutex_lock(&c->lock);
		empty = conn_move_flush_locked(c);
		pthread_mutex_unlock(&c->lock);
		if (empty)
			return 0;
		if (real_call_nonblocking(fd, flags))
			return -EAGAIN;
		if (real.poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return -errno;
	}
}

/*
 * The program was told of the kernel socket's error (readiness.h): this
 * call looks at the socket as the progress thread would, so that a reset
 * the program saw holds for it already.  true: it looked (once a call).
 */
static bool catch_up_with_told_error(struct conn *c)
{
	if (!readiness_take_error_told(c->r))
		return false;
	pthread_mutex_lock(&c->lock);
	conn_move_kernel_event_locked(c, EPOLLIN);
	pthread_mutex_unlock(&c->lock);
	return true;
}

/*
 * A call failed because the queue pair did (not the peer): the connection
 * moves to TCP, and the call goes on there.
 */
static bool qp_failed(struct conn *c, ssize_t n)
{
	if ((n != -ECONNRESET && n != -EPIPE) ||
	    __atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE) ||
	    !transport_qp_failed(c->t))
		return false;
	conn_qp_lost(c, ROCESHIM_DOWNGRADE_QP_ERROR);
	return path_of(c) != CONN_RDMA;
}

/*
 * On TCP, before the program's bytes go to the kernel socket: a reset that
 * a flush of the backlog read, then the backlog itself.
 */
static int kernel_ready(struct conn *c, int fd, int flags)
{
	int err = conn_take_error(c);

	return err ? -err : backlog_out(c, fd, flags);
}

/*
 * A call on a connection inherited across fork claims it first.  A signal
 * handler that interrupts the wait ends a call that may fail with EINTR
 * (interruptible) as the kernel would end it, unless the kernel would
 * restart it; any other call waits on.
 */
static int claim_if_inherited(struct conn *c, bool interruptible)
{
	int err;

	if (conn_alive(c))
		return 0;
	while ((err = claim_inherited(c, true)))
		if (interruptible && !sig_restart_allowed())
			return err;
	return 0;
}

/*
 * c->call_opts[]: what a blocking call asks of the kernel socket, as the
 * kernel last answered.  The high half of each word counts the program's
 * changes, so that an answer the kernel gave before a change is not
 * recorded after it; the low half is OPT_UNKNOWN, or the value plus
 * OPT_BIAS.
 */
#define OPT_UNKNOWN    0
#define OPT_BIAS       2 /* a timeout of -1 (none) is 1 */
#define OPT_VALUE_MASK UINT64_C(0xffffffff)
#define OPT_CHANGE     (UINT64_C(1) << 32)

/* true, and *value, if the kernel's answer is known. */
static bool opt_known(struct conn *c, enum conn_call_opt opt, uint64_t *seen,
		      int64_t *value)
{
	*seen = __atomic_load_n(&c->call_opts[opt], __ATOMIC_ACQUIRE);
	if ((*seen & OPT_VALUE_MASK) == OPT_UNKNOWN)
		return false;
	*value = (int64_t)(*seen & OPT_VALUE_MASK) - OPT_BIAS;
	return true;
}

/* The kernel answered value, since seen; kept unless too large to hold. */
static void opt_learned(struct conn *c, enum conn_call_opt opt, uint64_t seen,
			int64_t value)
{
	if (value + OPT_BIAS > (int64_t)OPT_VALUE_MASK)
		return;
	__atomic_compare_exchange_n(&c->call_opts[opt], &seen,
				    seen | (uint64_t)(value + OPT_BIAS), false,
				    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/*
 * Only an answer the kernel gave is kept: fd may have stopped naming the
 * socket (another thread closed it), and a guess would outlive the call.
 */
bool conn_call_nonblocking(struct conn *c, int fd, int msg_flags)
{
	int err = errno;
	uint64_t seen;
	bool asked;
	int64_t on;

	if (msg_flags & MSG_DONTWAIT)
		return true;
	if (opt_known(c, CONN_OPT_NONBLOCK, &seen, &on))
		return on;
	on = real_file_nonblocking(fd, &asked);
	errno = err;
	if (asked)
		opt_learned(c, CONN_OPT_NONBLOCK, seen, on);
	return on;
}

int64_t conn_call_timeout_ms(struct conn *c, int fd, int name)
{
	enum conn_call_opt opt =
		name == SO_SNDTIMEO ? CONN_OPT_SNDTIMEO : CONN_OPT_RCVTIMEO;
	uint64_t seen;
	int64_t ms;
	bool asked;

	if (opt_known(c, opt, &seen, &ms))
		return ms;
	ms = real_socket_timeout(fd, name, &asked);
	if (asked)
		opt_learned(c, opt, seen, ms);
	return ms;
}

void conn_call_opt_changing(struct conn *c)
{
	if (!conn_alive(c))
		while (claim_inherited(c, false))
			;
}

void conn_call_opt_set(struct conn *c, enum conn_call_opt opt)
{
	uint64_t seen = __atomic_load_n(&c->call_opts[opt], __ATOMIC_ACQUIRE);

	while (!__atomic_compare_exchange_n(
		&c->call_opts[opt], &seen,
		(seen & ~OPT_VALUE_MASK) + OPT_CHANGE, false, __ATOMIC_ACQ_REL,
		__ATOMIC_ACQUIRE))
		;
}

ssize_t conn_send(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags, bool *kernel)
{
	bool caught_up = false;
	ssize_t n;
	int err;

	*kernel = true;
	err = claim_if_inherited(c, true);
	if (err)
		return err;
	for (;;) {
		*kernel = true;
		switch (path_of(c)) {
		case CONN_RDMA:
			if (!caught_up && catch_up_with_told_error(c)) {
				caught_up = true;
				continue;
			}
			if (conn_peer_gone(c)) {
				err = conn_take_error(c);
				return err ? -err
					   : kernel_send(tcp_fd, iov, iovcnt,
							 flags);
			}
			*kernel = false;
			n = conn_rdma_send(c, tcp_fd, iov, iovcnt, flags);
			if (n == -EXDEV || qp_failed(c, n))
				continue;
			if (n > 0)
				health_watch();
			/* The peer went away: as TCP says, from the socket. */
			if (n == -EPIPE && conn_peer_gone(c))
				continue;
			return n;
		case CONN_MOVING:
			err = wait_moved(c, tcp_fd, flags, SO_SNDTIMEO);
			if (err)
				return err;
			continue;
		case CONN_TCP:
			n = kernel_ready(c, tcp_fd, flags);
			if (n)
				return n;
			n = kernel_send(tcp_fd, iov, iovcnt, flags);
			if ((n == -EPIPE || n == -ECONNRESET) &&
			    (err = conn_take_error(c)))
				return -err;
			return n;
		default:
			err = conn_take_error(c);
			return err ? -err : -EPIPE;
		}
	}
}

int conn_take_error(struct conn *c)
{
	return __atomic_exchange_n(&c->taken_error, 0, __ATOMIC_ACQ_REL);
}

void conn_record_reset(struct conn *c)
{
	int none = 0;

	__atomic_compare_exchange_n(&c->taken_error, &none, ECONNRESET, false,
				    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/*
 * Bytes came after the program shut down both directions on RDMA: TCP
 * resets the connection then (transport_late_bytes()).  The kernel socket
 * sends a FIN, then resets (conn_reset_kernel() would send no FIN, and
 * leave SO_LINGER changed): the peer's socket, reset after its peer's FIN,
 * fails its writes with EPIPE, as TCP's does.  From then on the kernel
 * socket's error is the one record of the reset, for whoever reads it
 * first (the program's getsockopt, send or read).  take_error: a read
 * takes it, and gets -error, or 0 if it was read already.
 */
static int reset_for_late_bytes(struct conn *c, bool take_error)
{
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	int err = ECONNRESET;
	socklen_t len = sizeof(err);

	pthread_mutex_lock(&c->lock);
	if (__atomic_exchange_n(&c->late_watch, false, __ATOMIC_ACQ_REL) &&
	    c->kfd >= 0 && path_of(c) == CONN_RDMA) {
		real.shutdown(c->kfd, SHUT_WR);
		real.connect(c->kfd, &unspec, sizeof(unspec));
	}
	if (take_error && c->kfd >= 0 &&
	    real.getsockopt(c->kfd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = ECONNRESET;
	pthread_mutex_unlock(&c->lock);
	readiness_sync(c->r);
	return -err;
}

/*
 * Whether bytes may still come that TCP would reset for: the program shut
 * down both directions on RDMA, and the peer has neither sent its FIN nor
 * gone.
 */
static bool late_bytes_possible(struct conn *c)
{
	struct transport_readiness tr;

	if (path_of(c) != CONN_RDMA || conn_peer_gone(c))
		return false;
	transport_readiness(c->t, &tr);
	/* The end of reading without the peer's FIN: this end shut it. */
	return tr.shut && tr.eof && !tr.fin;
}

/* Under live.lock, for the health check: true while it still watches. */
static bool late_bytes_check(struct conn *c)
{
	if (transport_late_bytes(c->t)) {
		reset_for_late_bytes(c, false);
		return false;
	}
	if (late_bytes_possible(c))
		return true;
	__atomic_store_n(&c->late_watch, false, __ATOMIC_RELEASE);
	return false;
}

/* Both directions shut on RDMA: the health check looks for late bytes. */
static void watch_late_bytes(struct conn *c)
{
	if (!late_bytes_possible(c))
		return;
	__atomic_store_n(&c->late_watch, true, __ATOMIC_RELEASE);
	health_watch();
}

/*
 * A reset peer: its error is reported once, by the kernel socket or by
 * the record of it that roceshim took, and the reads after it find the
 * end of the stream, as on TCP.  The kernel socket of a connection on
 * RDMA carries none of the program's bytes: what it holds before the
 * reset is the marker of a move the peer could not finish, and is thrown
 * away.
 */
static ssize_t recv_after_reset(struct conn *c, int tcp_fd,
				const struct iovec *iov, int iovcnt, int flags)
{
	uint8_t discard[WIRE_MARKER_LEN];
	int err = conn_take_error(c);
	ssize_t n;

	if (err)
		return -err;
	do
		n = real.recv(tcp_fd, discard, sizeof(discard), MSG_DONTWAIT);
	while (n > 0);
	if (n < 0 && errno != EAGAIN && errno != EINTR)
		return -errno;
	if (!n)
		return 0;
	return kernel_recv(tcp_fd, iov, iovcnt, flags);
}

/*
 * Just after a move, the peer's resend of what this end had not consumed
 * is on its way.  A non-blocking read that finds none of it waits for it
 * (a blocking one waits in the kernel): poll() may have told the program
 * of bytes in the ring that the move then took back, and over TCP those
 * would still be there to read (a program that reads EAGAIN after POLLIN
 * may take it for the end, as ncat does).  true: read again.  Once the
 * resend has come, or the move's timeout passed, the connection is plain
 * (conn_is_plain()).
 */
static bool resend_comes(struct conn *c, int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLRDHUP };
	int64_t until;
	bool coming;

	if (!__atomic_load_n(&c->catch_up_to, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&c->lock);
	coming = !conn_move_caught_up_locked(c, clock_ms());
	until = c->catch_up_until_ms;
	pthread_mutex_unlock(&c->lock);
	if (coming)
		real.poll(&pfd, 1, clock_ms_left(until));
	return coming;
}

ssize_t conn_recv(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags, bool *kernel)
{
	bool caught_up = false;
	ssize_t n;
	int err;

	*kernel = true;
	err = claim_if_inherited(c, true);
	if (err)
		return err;
	for (;;) {
		*kernel = true;
		switch (path_of(c)) {
		case CONN_RDMA:
			if (!caught_up && catch_up_with_told_error(c)) {
				caught_up = true;
				continue;
			}
			*kernel = false;
			n = conn_rdma_recv(c, tcp_fd, iov, iovcnt, flags);
			if (n == -EXDEV || qp_failed(c, n))
				continue;
			if (n == -ECONNRESET && transport_late_bytes(c->t))
				return reset_for_late_bytes(c, true);
			if (n == -ECONNRESET &&
			    __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE)) {
				*kernel = true;
				return recv_after_reset(c, tcp_fd, iov, iovcnt,
							flags);
			}
			return n;
		case CONN_MOVING:
			err = wait_moved(c, tcp_fd, flags, SO_RCVTIMEO);
			if (err)
				return err;
			continue;
		case CONN_TCP:
			err = conn_take_error(c);
			if (err)
				return -err;
			n = kernel_recv(tcp_fd, iov, iovcnt, flags);
			/* The progress thread's flush may read the reset. */
			if (!n && (err = conn_take_error(c)))
				return -err;
			if (n == -EAGAIN &&
			    real_call_nonblocking(tcp_fd, flags) &&
			    resend_comes(c, tcp_fd))
				continue;
			/* The resend came: the connection is plain again. */
			if (n > 0 && __atomic_load_n(&c->catch_up_to,
						     __ATOMIC_RELAXED)) {
				pthread_mutex_lock(&c->lock);
				conn_move_caught_up_locked(c, clock_ms());
				pthread_mutex_unlock(&c->lock);
			}
			return n;
		default:
			/* As after a TCP reset: the error once, then EOF. */
			return -conn_take_error(c);
		}
	}
}

int conn_shutdown(struct conn *c, int fd, int how)
{
	bool to_kernel, on_rdma;
	int ret = 0;

	claim_if_inherited(c, false);
	if (how != SHUT_WR) {
		/*
		 * On RDMA, the kernel socket's read side is where the peer's
		 * close, reset or move shows: it is shut only once the
		 * connection is on TCP (conn_move.c).
		 */
		pthread_mutex_lock(&c->lock);
		on_rdma = conn_on_rdma(c);
		if (on_rdma) {
			c->rx_shut = true;
			transport_shutdown_read(c->t);
		}
		pthread_mutex_unlock(&c->lock);
		if (on_rdma)
			readiness_sync(c->r);
		else if (real.shutdown(fd, SHUT_RD))
			return -errno;
	}
	if (how == SHUT_RD) {
		watch_late_bytes(c);
		return 0;
	}
	switch (path_of(c)) {
	case CONN_RDMA:
	case CONN_MOVING:
		ret = transport_shutdown(c->t);
		conn_rdma_wait_writes(c);
		readiness_sync(c->r);
		break;
	case CONN_TCP:
		break;
	default:
		return -ENOTCONN;
	}
	/*
	 * The kernel socket's FIN waits while the connection may still move:
	 * the markers and the bytes that move with it go there.
	 */
	pthread_mutex_lock(&c->lock);
	to_kernel = conn_move_shut_write_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (to_kernel && real.shutdown(fd, SHUT_WR))
		return -errno;
	watch_late_bytes(c);
	return ret == -EXDEV ? 0 : ret;
}

int conn_readable_bytes(struct conn *c, int fd)
{
	size_t n;
	int k;

	claim_if_inherited(c, false);
	if (path_of(c) == CONN_TCP)
		return real.ioctl(fd, FIONREAD, &k) ? 0 : k;
	if (path_of(c) != CONN_RDMA)
		return 0;
	n = transport_available(c->t);
	return n > INT_MAX ? INT_MAX : (int)n;
}

/*
 * Bytes a move to TCP still owes the kernel socket: while it moves, all
 * the peer may not have consumed (the resend starts where it says it
 * did); after, the resend not written yet.
 */
static uint64_t move_owes(struct conn *c)
{
	uint64_t owed = 0;

	pthread_mutex_lock(&c->lock);
	if (path_of(c) == CONN_MOVING)
		owed = c->pos.staged - c->pos.released;
	else if (path_of(c) == CONN_TCP)
		owed = c->backlog_to - c->backlog_from;
	pthread_mutex_unlock(&c->lock);
	return owed;
}

int conn_unacked_bytes(struct conn *c, int fd, bool unsent_only)
{
	unsigned long request = unsent_only ? SIOCOUTQNSD : SIOCOUTQ;
	uint64_t n;
	size_t unsent;
	int kernel;

	claim_if_inherited(c, false);
	if (path_of(c) == CONN_RDMA) {
		n = transport_unacked(c->t, &unsent);
		if (unsent_only)
			n = unsent;
	} else {
		n = move_owes(c);
		if (!n)
			return -ENOTCONN;
		if (!real.ioctl(fd, request, &kernel) && kernel > 0)
			n += (uint64_t)kernel;
	}
	return n > INT_MAX ? INT_MAX : (int)n;
}

/* tcp_inq_hint()'s count of bytes unread, with or after the stream's end. */
static int inq_count(int bytes, bool fin, bool done)
{
	if (fin && bytes < INT_MAX)
		return bytes + 1;
	return !bytes && (fin || done) ? 1 : bytes;
}

/*
 * The kernel socket's states after the peer's FIN; CLOSE may follow a
 * reset as well, so it counts as the end only.
 */
static void kernel_stream_end(int fd, bool *fin, bool *done)
{
	struct tcp_info info;
	socklen_t len = sizeof(info);

	*fin = *done = false;
	if (real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len))
		return;
	switch (info.tcpi_state) {
	case TCP_CLOSE_WAIT:
	case TCP_LAST_ACK:
	case TCP_CLOSING:
	case TCP_TIME_WAIT:
		*fin = true;
		break;
	case TCP_CLOSE:
		*done = true;
		break;
	default:
		break;
	}
}

int conn_inq_hint(struct conn *c, int fd)
{
	struct transport_readiness tr;
	bool fin, done;
	int n;

	if (c && path_of(c) == CONN_RDMA) {
		n = conn_readable_bytes(c, fd);
		transport_readiness(c->t, &tr);
		return inq_count(n, tr.fin, tr.failed);
	}
	/* Moving: the kernel socket may hold the peer's marker, not bytes. */
	if (c && path_of(c) != CONN_TCP)
		return 0;
	if (real.ioctl(fd, FIONREAD, &n))
		n = 0;
	kernel_stream_end(fd, &fin, &done);
	return inq_count(n, fin, done);
}

void conn_limit_send(struct conn *c, int bytes)
{
	if (bytes <= 0)
		return;
	transport_limit_send(c->t, (uint32_t)bytes);
	readiness_sync(c->r);
}

bool conn_on_rdma(const struct conn *c)
{
	enum conn_path path = path_of(c);

	return path == CONN_RDMA || path == CONN_MOVING;
}

bool conn_moving_or_moved(const struct conn *c)
{
	enum conn_path path = path_of(c);

	return path == CONN_MOVING || path == CONN_TCP;
}

bool conn_shared(const struct conn *c)
{
	return c->fork_epoch <
	       __atomic_load_n(&holding_epoch, __ATOMIC_ACQUIRE);
}

bool conn_forked(void)
{
	return __atomic_load_n(&conn_fork_epoch, __ATOMIC_ACQUIRE) != 0;
}

void conn_exit(struct conn *c, int fd)
{
	if (conn_shared(c) || path_of(c) != CONN_RDMA) {
		conn_leave(c, ROCESHIM_DOWNGRADE_EXIT);
		return;
	}
	pthread_mutex_lock(&c->lock);
	reset_if_unread(c, fd);
	pthread_mutex_unlock(&c->lock);
	/* The peer reads EOF after the last byte, as when the kernel closes. */
	if (transport_available(c->t) || transport_shutdown(c->t))
		return;
	conn_rdma_wait_writes(c);
	/* Bytes only this end holds: TCP's buffers deliver them after exit. */
	if (transport_queued(c->t))
		conn_leave(c, ROCESHIM_DOWNGRADE_EXIT);
}

int conn_kernel_ready(struct conn *c, int fd)
{
	if (path_of(c) == CONN_TCP)
		return kernel_ready(c, fd, 0);
	return -conn_take_error(c);
}

bool conn_is_plain(struct conn *c)
{
	return path_of(c) == CONN_TCP && c->backlog_from == c->backlog_to &&
	       !__atomic_load_n(&c->catch_up_to, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&c->taken_error, __ATOMIC_ACQUIRE);
}

void conn_move_start(struct conn *c, enum roceshim_downgrade cause)
{
	pthread_mutex_lock(&c->lock);
	conn_move_begin_locked(c, cause);
	pthread_mutex_unlock(&c->lock);
}

/*
 * After a move: waits until the first of the peer's resend is in (see
 * conn_move_caught_up_locked()) and, with backlog_too, until this end's
 * backlog is written, as the process or the staging ring may go next.  A
 * peer that takes none of the backlog for the move's timeout gets a reset
 * rather than a stream with a hole.
 */
static void wait_moved_out_locked(struct conn *c, bool backlog_too,
				  int64_t deadline)
{
	static const struct timespec pause = { .tv_nsec = 1000000 };
	uint64_t left = UINT64_MAX;
	int64_t now, stalled_at = 0;
	bool written;

	while (path_of(c) == CONN_TCP) {
		written = !backlog_too || conn_move_flush_locked(c);
		now = clock_ms();
		if ((conn_move_caught_up_locked(c, now) && written) ||
		    (deadline >= 0 && now >= deadline))
			return;
		if (c->backlog_to - c->backlog_from != left) {
			left = c->backlog_to - c->backlog_from;
			stalled_at = now + c->timeout_ms;
		} else if (!written && now >= stalled_at) {
			conn_move_reset_locked(c, "the peer took none of it");
			return;
		}
		pthread_mutex_unlock(&c->lock);
		nanosleep(&pause, NULL);
		pthread_mutex_lock(&c->lock);
	}
}

/*
 * This process's own connection moves, and the call waits for it (see
 * wait_moved_out_locked()), at most until deadline (of clock_ms(); -1:
 * none).  With a deadline, the lock too is given up then: _exit() may
 * run in a signal handler that interrupted its holder.  Whether it is on
 * TCP at the end, with its backlog in the socket if backlog_too.
 */
static bool move_own(struct conn *c, enum roceshim_downgrade cause,
		     bool backlog_too, int64_t deadline)
{
	struct timespec until = { 0 };
	bool out;

	if (deadline < 0) {
		pthread_mutex_lock(&c->lock);
	} else {
		if (!lock_by(&c->lock, deadline))
			return false;
		clock_timespec_in(CLOCK_MONOTONIC, clock_ms_left(deadline),
				  &until);
	}
	conn_move_begin_locked(c, cause);
	while (path_of(c) == CONN_MOVING) {
		if (deadline < 0)
			pthread_cond_wait(&c->moved, &c->lock);
		else if (pthread_cond_clockwait(&c->moved, &c->lock,
						CLOCK_MONOTONIC, &until))
			break;
	}
	wait_moved_out_locked(c, backlog_too, deadline);
	out = path_of(c) == CONN_TCP &&
	      (!backlog_too || conn_move_flush_locked(c));
	pthread_mutex_unlock(&c->lock);
	return out;
}

/* staying: see claim_inherited(). */
static int move_to_kernel(struct conn *c, enum roceshim_downgrade cause,
			  bool backlog_too, bool staying)
{
	if (!conn_alive(c)) {
		while (claim_inherited(c, staying))
			;
	} else {
		move_own(c, cause, backlog_too, -1);
	}
	switch (path_of(c)) {
	case CONN_TCP:
		return 0;
	case CONN_RDMA:
		/* The peer is gone: nothing more will cross it anyway. */
		return -ECONNRESET;
	default:
		return -ECONNRESET;
	}
}

int conn_make_plain(struct conn *c, enum roceshim_downgrade cause)
{
	return move_to_kernel(c, cause, false, true);
}

int conn_hand_over(struct conn *c, enum roceshim_downgrade cause)
{
	return move_to_kernel(c, cause, true, true);
}

int conn_leave(struct conn *c, enum roceshim_downgrade cause)
{
	return move_to_kernel(c, cause, true, false);
}

int64_t conn_quick_exit_deadline(void)
{
	return clock_ms() + QUICK_HAND_OVER_MS;
}

void conn_quick_exit(struct conn *c, int fd, int64_t hand_over_by)
{
	if (!conn_alive(c) || path_of(c) != CONN_RDMA)
		return;
	/* As conn_leave(), given up at hand_over_by. */
	if (conn_shared(c)) {
		move_own(c, ROCESHIM_DOWNGRADE_EXIT, true, hand_over_by);
		return;
	}
	switch (transport_finish_by(c->t, clock_ms() + QUICK_EXIT_MS)) {
	case -ECONNRESET:
		conn_reset_on_close(fd);
		break;
	case -EINPROGRESS:
		/*
		 * Bytes only this end holds: TCP's buffers deliver them.  If
		 * they are not all there in time, the end is a reset, not a
		 * FIN after part of them.
		 */
		if (!move_own(c, ROCESHIM_DOWNGRADE_EXIT, true, hand_over_by))
			conn_reset_on_close(fd);
		break;
	default:
		break;
	}
}

/* ---- events ----------------------------------------------------------- */

/* The kernel socket has something: the peer closed, reset or moves. */
static void on_kernel_event(struct progress_watcher *w, uint32_t events)
{
	struct conn *c =
		(struct conn *)((char *)w -
				__builtin_offsetof(struct conn, kwatch));

	/*
	 * The oneshot entry is disarmed, not gone: kwatched stays, so that
	 * a re-arm modifies it and the end deletes it.
	 */
	pthread_mutex_lock(&c->lock);
	conn_move_kernel_event_locked(c, events);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Under c->lock, the queue pair gone and the kernel socket known: the
 * connection moves to TCP, unless the peer closed it (eof: its RDMA FIN
 * came).
 */
static void follow_lost_qp_locked(struct conn *c, enum roceshim_downgrade cause,
				  bool eof)
{
	bool gone;

	/*
	 * What the kernel socket holds says more: the peer's marker (it
	 * moved, and let its queue pair go), its close or its reset.
	 */
	if (path_of(c) == CONN_RDMA && !c->released)
		conn_move_kernel_event_locked(c, EPOLLIN);
	gone = __atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE);
	/*
	 * Its close already here, or its reset: nothing to move.  Its RDMA
	 * FIN: the peer closed, and its kernel FIN, on its way, ends this
	 * connection as a TCP close would.
	 */
	if (path_of(c) == CONN_RDMA && !gone && !eof && !c->released)
		conn_move_begin_locked(c, cause);
	else if (gone || c->released)
		transport_peer_gone(c->t);
}

/* The peer's RDMA FIN, which may be among the completions not yet reaped. */
static bool peer_finished(struct conn *c)
{
	struct transport_readiness tr;

	transport_progress(c->t);
	transport_readiness(c->t, &tr);
	return tr.eof;
}

void conn_qp_lost(struct conn *c, enum roceshim_downgrade cause)
{
	bool eof = peer_finished(c);

	pthread_mutex_lock(&c->lock);
	__atomic_store_n(&c->qp_lost, true, __ATOMIC_RELEASE);
	/*
	 * The first cause holds.  Without a socket yet (accept() has not
	 * taken it, or its TCP connect is on its way), conn_attach() moves
	 * it.
	 */
	if (c->cause == ROCESHIM_DOWNGRADE_NONE)
		c->cause = cause;
	if (c->kfd >= 0 || c->released)
		follow_lost_qp_locked(c, c->cause, eof);
	pthread_mutex_unlock(&c->lock);
	readiness_sync(c->r);
}

void conn_drop_qp(struct conn *c, enum roceshim_downgrade cause)
{
	rdmacm.disconnect(c->id);
	conn_qp_lost(c, cause);
}

/* ---- the end ---------------------------------------------------------- */

static void conn_destroy(struct conn *c)
{
	live_remove(c);
	pthread_mutex_lock(&c->lock);
	unwatch_kernel_locked(c);
	if (c->kfd_ours)
		unkeep_socket_locked(c);
	c->kfd = -1;
	pthread_mutex_unlock(&c->lock);
	share_slot_free(c->slot);
	readiness_destroy(c->r);
	if (c->pinned)
		reg_cache_destroy(c->pinned);
	transport_destroy(c->t);
	rdmacm.destroy_id(c->id);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->moved);
	free(c);
}

void conn_discard(struct conn *c)
{
	readiness_close(c->r);
	rdmacm.disconnect(c->id);
	conn_destroy(c);
}

/* Under c->lock: the socket kept for the peer (kfd_for_peer) closes now. */
static void let_peer_go_locked(struct conn *c)
{
	unwatch_kernel_locked(c);
	unkeep_socket_locked(c);
	c->kfd = -1;
}

uint16_t conn_release(struct conn *c, bool abortive)
{
	uint16_t handed_over = 0;
	struct closing *cl;
	bool shared;

	readiness_forget(c->r);
	readiness_close(c->r);
	if (!conn_alive(c))
		return 0; /* a fork child: the owner has the resources */
	pthread_mutex_lock(&c->lock);
	c->released = true;
	/* Kept for a call that has returned: closed as the last fd would be. */
	if (c->kfd_for_call && reset_if_unread(c, c->kfd))
		abortive = true;
	/* A reset goes at once, and ends everything for the peer. */
	if (abortive && c->kfd_for_peer && path_of(c) == CONN_RDMA)
		let_peer_go_locked(c);
	/* A fork child may go on with it: over TCP, without this process. */
	shared = c->kfd_ours && !c->kfd_for_call && !c->kfd_for_peer &&
		 path_of(c) == CONN_RDMA;
	if (shared) {
		if (clock_ms() - last_fork_ms <= HAND_OVER_CLOSE_MS)
			handed_over = conn_handed_over_port(c);
		conn_move_begin_locked(c, ROCESHIM_DOWNGRADE_FORK);
	}
	pthread_mutex_unlock(&c->lock);
	if (!shared && path_of(c) == CONN_RDMA && !abortive) {
		transport_shutdown(c->t);
		conn_rdma_wait_writes(c);
	}
	cl = calloc(1, sizeof(*cl));
	if (!cl) {
		/* Never reaped: at least the kernel's FIN goes. */
		pthread_mutex_lock(&c->lock);
		if (c->kfd_for_peer && path_of(c) == CONN_RDMA)
			let_peer_go_locked(c);
		pthread_mutex_unlock(&c->lock);
		return handed_over;
	}
	cl->conn = c;
	cl->closed_ms = clock_ms();
	cl->deadline_ms = cl->closed_ms + LINGER_TIMEOUT_MS;
	cl->took_ms = cl->closed_ms;
	if (path_of(c) == CONN_RDMA)
		cl->queued_then = transport_queued(c->t);
	__atomic_add_fetch(&closing_count, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&closing_lock);
	cl->next = closing_list;
	closing_list = cl;
	pthread_mutex_unlock(&closing_lock);
	/* The progress thread may wait without a tick: the linger needs one. */
	progress_wake();
	return handed_over;
}

void conn_closing_drain(void)
{
	static const struct timespec pause = { .tv_nsec = 1000000 };
	int64_t deadline = clock_ms() + LINGER_TIMEOUT_MS;

	__atomic_add_fetch(&closing_hurried, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&closing_count, __ATOMIC_ACQUIRE) &&
	       (clock_ms() < deadline ||
		__atomic_load_n(&closing_writing, __ATOMIC_ACQUIRE))) {
		progress_wake();
		nanosleep(&pause, NULL);
	}
	__atomic_sub_fetch(&closing_hurried, 1, __ATOMIC_RELEASE);
}

void conn_closing_quick_exit(int64_t by)
{
	static const struct timespec pause = { .tv_nsec = 1000000 };
	unsigned int ticks;

	/* Moves begun with no time left would only end in resets. */
	if (!__atomic_load_n(&closing_count, __ATOMIC_ACQUIRE) ||
	    clock_ms() >= by)
		return;
	__atomic_add_fetch(&closing_hurried, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&closing_cut, true, __ATOMIC_RELEASE);
	ticks = __atomic_load_n(&closing_ticks, __ATOMIC_ACQUIRE);
	/* A tick that saw the cut says what is still being written. */
	while (clock_ms() < by &&
	       (__atomic_load_n(&closing_ticks, __ATOMIC_ACQUIRE) - ticks < 2 ||
		__atomic_load_n(&closing_writing, __ATOMIC_ACQUIRE))) {
		progress_wake();
		nanosleep(&pause, NULL);
	}
}

/*
 * Under c->lock, for a closed connection on TCP: writes what it can of the
 * backlog; true once it is out.  A peer that takes none of it for the
 * move's timeout gets a reset, as in wait_moved_out_locked().
 */
static bool closed_backlog_out_locked(struct closing *cl, int64_t now)
{
	struct conn *c = cl->conn;
	uint64_t left;

	if (conn_move_flush_locked(c))
		return true;
	left = c->backlog_to - c->backlog_from;
	if (left != cl->backlog_left) {
		cl->backlog_left = left;
		cl->stalled_at_ms = now + c->timeout_ms;
		return false;
	}
	if (now < cl->stalled_at_ms)
		return false;
	conn_move_reset_locked(c, "the peer took none of it");
	return true;
}

/*
 * A closed connection's linger ended, or its queue pair failed, with
 * bytes in its send queue (the peer reads slowly, or not at all): they
 * move with the connection to its kernel socket, whose buffers deliver
 * them after the close, as TCP's would.  Until they are all in it, the
 * socket lingers 0: a process that ends first resets the connection
 * rather than end it with a FIN after part of them.  true if the move
 * began.
 */
static bool move_queued(struct conn *c, enum roceshim_downgrade cause)
{
	bool moving = false;

	pthread_mutex_lock(&c->lock);
	if (c->kfd_for_peer) {
		/* Before the marker goes: the process may end right after. */
		conn_reset_on_close(c->kfd);
		conn_move_begin_locked(c, cause);
		moving = path_of(c) != CONN_RDMA;
		c->reset_until_flushed = moving;
		if (!moving)
			conn_deliver_on_close(c->kfd);
	}
	pthread_mutex_unlock(&c->lock);
	return moving;
}

/*
 * At a closed connection's deadline, with queued bytes: they stay on RDMA
 * while the peer takes some, or has taken none for less than
 * LINGER_STALLED_MS, and the linger starts again, as TCP's buffers
 * deliver after a close for as long as the peer reads.  Not while an exit
 * or exec waits for the closed connections: their bytes move to the
 * kernel socket, whose buffers outlive the process.
 */
static void linger_while_draining(struct closing *cl, size_t queued,
				  int64_t now)
{
	bool took = queued < cl->queued_then;
	int64_t stalled_until;

	if (took) {
		cl->queued_then = queued;
		cl->took_ms = now;
	}
	stalled_until = cl->took_ms + LINGER_STALLED_MS;
	if (now >= stalled_until ||
	    now - cl->closed_ms >= LINGER_DRAINING_MAX_MS ||
	    __atomic_load_n(&closing_hurried, __ATOMIC_ACQUIRE))
		return;
	cl->deadline_ms = now + LINGER_TIMEOUT_MS;
	if (cl->deadline_ms > stalled_until)
		cl->deadline_ms = stalled_until;
	log_debug("rdma: closed connection (fd %d): %zu bytes queued, its "
		  "peer %s; it lingers on",
		  cl->conn->kfd, queued,
		  took ? "still reads" : "is busy elsewhere");
}

/*
 * Whether a closed connection is done: its FIN out (and, where it kept
 * its socket for the peer, its bytes taken), or its move over and its
 * backlog written.  *writing: whether a backlog is left.
 */
static bool finished(struct closing *cl, int64_t now, bool *writing)
{
	struct conn *c = cl->conn;
	bool done, failed, cut;
	size_t queued;

	*writing = false;
	switch (path_of(c)) {
	case CONN_MOVING:
		/* Its backlog is known once it moved; the move is bounded. */
		*writing = true;
		return false;
	case CONN_TCP:
		pthread_mutex_lock(&c->lock);
		*writing = !closed_backlog_out_locked(cl, now);
		done = !*writing && conn_move_caught_up_locked(c, now);
		pthread_mutex_unlock(&c->lock);
		return done;
	case CONN_RDMA:
		failed = transport_progress(c->t) ||
			 __atomic_load_n(&c->qp_lost, __ATOMIC_ACQUIRE);
		queued = transport_queued(c->t);
		cut = __atomic_load_n(&closing_cut, __ATOMIC_ACQUIRE);
		if (queued && !failed && now >= cl->deadline_ms)
			linger_while_draining(cl, queued, now);
		if (queued && (failed || now >= cl->deadline_ms || cut)) {
			*writing = move_queued(
				c, failed ? ROCESHIM_DOWNGRADE_QP_ERROR
					  : ROCESHIM_DOWNGRADE_SEND_STALL);
			return !*writing;
		}
		if (failed || now >= cl->deadline_ms)
			return true;
		/* Until they move or go, an exit waits for them. */
		*writing = queued != 0;
		if (queued || transport_writes_in_flight(c->t)) {
			/* An _exit() waits for its last writes too. */
			*writing = *writing || cut;
			return false;
		}
		/* FIN out: it may wait on for a peer that may move. */
		pthread_mutex_lock(&c->lock);
		done = !c->kfd_for_peer ||
		       __atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) ||
		       __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE) ||
		       transport_peer_took_all(c->t);
		pthread_mutex_unlock(&c->lock);
		return done;
	default:
		return true;
	}
}

/* Destroys the closed connections that are done. */
bool conn_reap_tick(void)
{
	struct closing *list, *cl, *keep = NULL;
	int64_t now = clock_ms();
	unsigned int writing_count = 0;
	bool writing;

	pthread_mutex_lock(&closing_lock);
	list = closing_list;
	closing_list = NULL;
	pthread_mutex_unlock(&closing_lock);
	while ((cl = list)) {
		list = cl->next;
		if (finished(cl, now, &writing)) {
			rdmacm.disconnect(cl->conn->id);
			conn_destroy(cl->conn);
			free(cl);
			__atomic_sub_fetch(&closing_count, 1, __ATOMIC_RELEASE);
			continue;
		}
		writing_count += writing;
		cl->next = keep;
		keep = cl;
	}
	__atomic_store_n(&closing_writing, writing_count, __ATOMIC_RELEASE);
	__atomic_add_fetch(&closing_ticks, 1, __ATOMIC_RELEASE);
	if (!keep)
		return conn_move_tick();
	pthread_mutex_lock(&closing_lock);
	for (cl = keep; cl->next; cl = cl->next)
		;
	cl->next = closing_list;
	closing_list = keep;
	pthread_mutex_unlock(&closing_lock);
	conn_move_tick();
	return true;
}

void FORK_CODE conn_fork_prepare(void)
{
	pthread_mutex_lock(&epoch_lock);
	this_fork.holding_before = holding_epoch;
	this_fork.last_fork_before_ms = last_fork_ms;
	this_fork.epoch =
		__atomic_add_fetch(&conn_fork_epoch, 1, __ATOMIC_ACQ_REL);
	__atomic_store_n(&holding_epoch, this_fork.epoch, __ATOMIC_RELEASE);
	last_fork_ms = clock_ms();
	pthread_mutex_unlock(&epoch_lock);
}

void conn_exec_fork_done(void)
{
	pthread_mutex_lock(&epoch_lock);
	/* Another fork since then may hold them: it still counts. */
	if (holding_epoch == this_fork.epoch) {
		__atomic_store_n(&holding_epoch, this_fork.holding_before,
				 __ATOMIC_RELEASE);
		last_fork_ms = this_fork.last_fork_before_ms;
	}
	pthread_mutex_unlock(&epoch_lock);
}

void FORK_CODE conn_fork_lock(void)
{
	pthread_mutex_lock(&kept_lock);
}

void FORK_CODE conn_fork_parent(void)
{
	pthread_mutex_unlock(&kept_lock);
}

void FORK_CODE conn_fork_child(bool fds_shared)
{
	const struct conn *c;

	pthread_mutex_init(&epoch_lock, NULL);
	/* Copies of sockets the program closed: never the child's. */
	for (c = kept_list; c && !fds_shared; c = c->next_kept)
		real.close(c->kfd);
	kept_list = NULL;
	pthread_mutex_init(&kept_lock, NULL);
	/* The parent's closed connections: it finishes them, not the child. */
	pthread_mutex_init(&closing_lock, NULL);
	closing_list = NULL;
	__atomic_store_n(&closing_count, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&closing_hurried, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&closing_cut, false, __ATOMIC_RELEASE);
}
