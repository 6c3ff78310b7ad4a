// SPDX-License-Identifier: MIT
/*
 * The move of an upgraded connection to its kernel TCP socket, in the
 * middle of its streams (docs/design.md, "Downgrade").
 *
 * The kernel socket has carried nothing since the handshake, so it can
 * carry everything after the move.  Each end freezes its transport
 * (nothing more is consumed or sent over RDMA) and writes a marker as the
 * first bytes of the socket: how far its program consumed the peer's
 * stream.  Each end then reads the peer's marker and writes what its own
 * program sent past that point, from its staging ring, into the socket;
 * from then on the socket carries both streams, and each end's reads and
 * writes go there.  Nothing is lost (the peer still holds every byte this
 * end has not consumed), nothing is duplicated (each end resumes exactly
 * where the other consumed), and both ends switch at offsets they agree
 * on without a round trip of their own: the marker is the agreement.
 *
 * Either end may start a move; the other joins when the marker arrives
 * (the progress thread watches every upgraded connection's socket).  A
 * peer that closed or reset its socket before its marker came cannot
 * move: this end then reads what its ring holds, then EOF (after the
 * peer's RDMA FIN) or ECONNRESET, and its writes go to the socket, which
 * fails them as TCP does.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "clock.h"
#include "conn_impl.h"
#include "log.h"
#include "real.h"
#include "stats.h"
#include "tcp_info.h"

/* Connections in CONN_MOVING, for the timeout. */
static pthread_mutex_t moving_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conn *moving_list;

static enum conn_path path_of(const struct conn *c)
{
	return __atomic_load_n(&c->path, __ATOMIC_ACQUIRE);
}

static void set_path(struct conn *c, enum conn_path path)
{
	__atomic_store_n(&c->path, path, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&c->moved);
}

static void moving_add(struct conn *c)
{
	pthread_mutex_lock(&moving_lock);
	c->next_moving = moving_list;
	moving_list = c;
	pthread_mutex_unlock(&moving_lock);
	progress_wake();
}

static void moving_remove(struct conn *c)
{
	struct conn **pp;

	pthread_mutex_lock(&moving_lock);
	for (pp = &moving_list; *pp; pp = &(*pp)->next_moving) {
		if (*pp == c) {
			*pp = c->next_moving;
			break;
		}
	}
	pthread_mutex_unlock(&moving_lock);
}

static void log_move(const struct conn *c, const char *what)
{
	log_info("rdma: connection (fd %d) %s (%s)", c->kfd, what,
		 roceshim_downgrade_name(c->cause));
}

/*
 * The move failed: the connection is reset, as a broken TCP one.  The
 * peer gets a TCP reset at once, never an end of stream it could take for
 * a clean close.
 */
static void fail_locked(struct conn *c, const char *why)
{
	log_warn("rdma: connection (fd %d) could not move to TCP (%s): "
		 "reset",
		 c->kfd, why);
	moving_remove(c);
	if (c->kfd >= 0)
		conn_reset_kernel(c->kfd);
	share_publish(c->slot, SHARE_FAILED);
	conn_record_reset(c);
	set_path(c, CONN_FAILED);
	readiness_release(c->r);
}

/*
 * A kernel connection that nobody reads takes in only its receive window:
 * a move waits for no more of the peer's resend than a quarter of its
 * SO_RCVBUF (which reads twice what was set), and at most this
 * (conn_move_caught_up_locked()).
 */
#define CATCH_UP_MAX_BYTES (32u << 10)

static uint64_t catch_up_bytes(int fd, uint64_t resent)
{
	uint64_t most = CATCH_UP_MAX_BYTES;
	socklen_t len = sizeof(int);
	int rcvbuf;

	if (!real.getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len) &&
	    rcvbuf >= 4 && (uint64_t)rcvbuf / 4 < most)
		most = (uint64_t)rcvbuf / 4;
	return resent < most ? resent : most;
}

static void peer_gone_locked(struct conn *c, bool reset);

/*
 * Whether the kernel socket holds a reset, and nothing before it: the
 * reset is left there, for the program's poll, epoll and recv to find (a
 * recv of roceshim's would take it).  POLLERR alone may also be the
 * program's error queue (SO_TIMESTAMPING): the connection must be closed.
 */
static bool kernel_reset_locked(const struct conn *c)
{
	struct pollfd pfd = { .fd = c->kfd };
	struct tcp_info ti = { 0 };
	socklen_t len = sizeof(ti);
	int queued = 0;

	if (real.poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLERR) ||
	    real.getsockopt(c->kfd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
	    ti.tcpi_state != TCP_CLOSE)
		return false;
	return !real.ioctl(c->kfd, SIOCINQ, &queued) && !queued;
}

/*
 * roceshim's own call on the kernel socket failed with err.  The error
 * was the socket's, and is now read: the program must still be told, once
 * (conn.h).
 */
static void kernel_failed_locked(struct conn *c, int err)
{
	if (err != EPIPE)
		__atomic_store_n(&c->taken_error, err, __ATOMIC_RELEASE);
	peer_gone_locked(c, err != EPIPE);
}

/*
 * The peer's socket closed or reset before its marker came: it can take
 * no part.  What the ring holds is still this end's to read (the peer
 * sent it), then EOF if its RDMA FIN came, else ECONNRESET.
 */
static void peer_gone_locked(struct conn *c, bool reset)
{
	if (path_of(c) == CONN_MOVING) {
		moving_remove(c);
		transport_unfreeze(c->t);
		/* A fork child cannot have what only this ring holds. */
		share_publish(c->slot, SHARE_FAILED);
		log_move(c, "lost its peer while it moved to TCP");
	}
	/* Without its queue pair, no RDMA FIN will come either. */
	if (reset || __atomic_load_n(&c->qp_lost, __ATOMIC_ACQUIRE))
		transport_peer_gone(c->t);
	if (reset) {
		__atomic_store_n(&c->peer_reset, true, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&c->peer_closed, true, __ATOMIC_RELEASE);
		transport_peer_closed(c->t);
		/* The peer cannot move any more: the kernel FIN may go. */
		if (c->shut_kernel && c->kfd >= 0)
			real.shutdown(c->kfd, SHUT_WR);
		c->shut_kernel = false;
	}
	set_path(c, CONN_RDMA);
	readiness_sync(c->r);
}

/*
 * A look at the kernel socket while the connection is on RDMA, where none
 * of the program's bytes flow: the peer's marker (KERNEL_BYTES), nothing
 * yet (KERNEL_QUIET), or its close or failure, handled here (a reset may
 * come after a caller's poll() saw none).
 */
enum kernel_peek {
	KERNEL_QUIET,
	KERNEL_BYTES,
	KERNEL_CLOSED,
	KERNEL_FAILED
};

static enum kernel_peek peek_kernel_locked(struct conn *c)
{
	char byte;
	ssize_t n = real.recv(c->kfd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n > 0)
		return KERNEL_BYTES;
	if (!n) {
		peer_gone_locked(c, false);
		return KERNEL_CLOSED;
	}
	if (errno == EAGAIN || errno == EINTR)
		return KERNEL_QUIET;
	kernel_failed_locked(c, errno);
	return KERNEL_FAILED;
}

/*
 * How long the move waits for the peer's marker.  A peer whose program
 * has consumed nothing of this end's stream, while this end's has read
 * nothing of the peer's, may not have accepted the connection yet (a
 * socket-activated server still starting after the activator's exec
 * ended the queue pair): over TCP its client would wait for that
 * accept(), so the move waits as long as a move may.  So does a send that
 * moved because the peer read nothing: a stopped peer (SIGSTOP, a
 * debugger) would keep a TCP sender waiting too.
 */
static int move_timeout(const struct conn *c)
{
	if (c->cause != ROCESHIM_DOWNGRADE_SEND_STALL &&
	    (c->pos.consumed || c->pos.released))
		return c->timeout_ms;
	return move_wait_longest_ms(c->timeout_ms);
}

/* Both markers are out: the socket carries the connection from now on. */
static void finish_locked(struct conn *c, uint64_t from)
{
	moving_remove(c);
	c->backlog_from = from;
	c->backlog_to = c->pos.staged;
	set_path(c, CONN_TCP);
	if (c->rx_shut)
		real.shutdown(c->kfd, SHUT_RD);
	stats_downgrade(__atomic_load_n(&c->row, __ATOMIC_ACQUIRE), c->cause);
	log_move(c, "moved to TCP");
	readiness_release(c->r);
	/* Its registrations would hold the process's cap for nothing. */
	if (__atomic_load_n(&c->pinned, __ATOMIC_ACQUIRE))
		reg_cache_trim(c->pinned);
	conn_move_flush_locked(c);
}

/*
 * The peer's kernel socket closed cleanly, so it can take no part in a
 * move.  None is needed once the program has read the peer's stream up to
 * its FIN: the kernel socket then says what TCP's would (EOF, and the
 * peer's reset to a write), to this process and its descendants alike.
 * Otherwise the ring holds what only this process can read: it stays on
 * RDMA, and a descendant that asks is told of a reset.
 */
static void move_after_peer_closed_locked(struct conn *c,
					  enum roceshim_downgrade cause)
{
	bool tx_shut;

	if (!transport_read_to_fin(c->t))
		return;
	/*
	 * This call's cause: one that conn_qp_lost() gave before (the peer's
	 * disconnect) started no move.
	 */
	c->cause = cause;
	transport_freeze(c->t, &c->pos, &tx_shut);
	/* What the peer did not consume, it would not take over TCP either. */
	finish_locked(c, c->pos.staged);
}

/*
 * Whether the peer's kernel socket closed before the move began; if so,
 * the move is over, made without the peer where it can be.  Not in
 * _exit(), which may run in a signal handler: that takes the readiness
 * locks, which the interrupted thread may hold.
 */
static bool peer_left_locked(struct conn *c, enum roceshim_downgrade cause)
{
	bool closed = __atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE);

	if (cause == ROCESHIM_DOWNGRADE_EXIT)
		return closed;
	/* The progress thread may not have seen the close yet. */
	if (!closed) {
		switch (peek_kernel_locked(c)) {
		case KERNEL_FAILED:
			return true;
		case KERNEL_CLOSED:
			closed = true;
			break;
		default:
			break;
		}
	}
	if (closed)
		move_after_peer_closed_locked(c, cause);
	return closed;
}

void conn_move_begin_locked(struct conn *c, enum roceshim_downgrade cause)
{
	struct wire_marker m = { 0 };
	uint8_t buf[WIRE_MARKER_LEN];
	bool tx_shut;
	ssize_t n;

	if (path_of(c) != CONN_RDMA || !conn_alive(c) || c->kfd < 0 ||
	    __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE))
		return;
	if (kernel_reset_locked(c)) {
		peer_gone_locked(c, true);
		return;
	}
	if (peer_left_locked(c, cause))
		return;
	/* The first cause holds: conn_qp_lost() may have given one. */
	if (c->cause == ROCESHIM_DOWNGRADE_NONE)
		c->cause = cause;
	m.cause = c->cause;
	set_path(c, CONN_MOVING);
	share_publish(c->slot, SHARE_MOVING);
	transport_freeze(c->t, &c->pos, &tx_shut);
	m.resume = c->pos.consumed;
	m.sent = c->pos.staged;
	wire_encode_marker(&m, buf);
	move_wait_start(&c->wait, move_timeout(c), clock_ms());
	moving_add(c);
	/* The socket has carried nothing: 32 bytes always fit. */
	n = real.send(c->kfd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n != (ssize_t)sizeof(buf)) {
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
			kernel_failed_locked(c, errno);
		else
			fail_locked(c, "cannot write the marker");
		return;
	}
	log_debug("rdma: fd %d moves to TCP: consumed %llu, sent %llu", c->kfd,
		  (unsigned long long)m.resume, (unsigned long long)m.sent);
	conn_watch_kernel_locked(c, EPOLLIN | EPOLLRDHUP);
}

/* A fork child writes to the socket once told: after the backlog. */
static void publish_tcp_locked(struct conn *c)
{
	if (share_state(c->slot) < SHARE_TCP)
		share_publish(c->slot, SHARE_TCP);
}

bool conn_move_flush_locked(struct conn *c)
{
	struct msghdr msg = { .msg_iovlen = 0 };
	struct iovec iov[2];
	ssize_t n;
	int pieces;

	while (c->backlog_from < c->backlog_to) {
		pieces = transport_staged_iov(c->t, c->backlog_from,
					      c->backlog_to, iov);
		/* Never a FIN after part of the stream: a reset. */
		if (pieces < 0 || c->kfd < 0) {
			conn_move_reset_locked(c, "its bytes are gone");
			return true;
		}
		msg.msg_iov = iov;
		msg.msg_iovlen = pieces;
		n = real.sendmsg(c->kfd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			c->backlog_from += n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			conn_watch_kernel_locked(c, EPOLLOUT);
			return false;
		}
		/* The peer is gone: nobody will read them. */
		if (n < 0 && errno != EPIPE)
			__atomic_store_n(&c->taken_error, errno,
					 __ATOMIC_RELEASE);
		c->backlog_from = c->backlog_to;
	}
	if (c->reset_until_flushed && path_of(c) == CONN_TCP && c->kfd >= 0) {
		conn_deliver_on_close(c->kfd);
		c->reset_until_flushed = false;
	}
	if (c->shut_kernel && c->kfd >= 0)
		real.shutdown(c->kfd, SHUT_WR);
	c->shut_kernel = false;
	if (path_of(c) == CONN_TCP)
		publish_tcp_locked(c);
	return true;
}

void conn_move_reset_locked(struct conn *c, const char *why)
{
	log_warn("rdma: connection (fd %d) could not write what moved with "
		 "it to TCP (%s): reset",
		 c->kfd, why);
	c->backlog_from = c->backlog_to;
	c->shut_kernel = false;
	if (c->kfd < 0)
		return;
	conn_reset_kernel(c->kfd);
	publish_tcp_locked(c);
}

bool conn_move_shut_write_locked(struct conn *c)
{
	/* Read here, under the lock: a move may have ended since the call. */
	if (path_of(c) == CONN_TCP) {
		if (conn_move_flush_locked(c))
			return true;
	} else if (__atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) ||
		   __atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE)) {
		return true;
	}
	c->shut_kernel = true;
	return false;
}

/* Reads the peer's marker as it comes; acts once it is whole. */
static void read_marker_locked(struct conn *c)
{
	struct wire_marker m;
	uint64_t from;
	ssize_t n;

	while (c->marker_len < WIRE_MARKER_LEN) {
		if (kernel_reset_locked(c)) {
			peer_gone_locked(c, true);
			return;
		}
		n = real.recv(c->kfd, c->marker + c->marker_len,
			      WIRE_MARKER_LEN - c->marker_len, MSG_DONTWAIT);
		if (n > 0) {
			c->marker_len += n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			kernel_failed_locked(c, errno);
			return;
		}
		if (!n) {
			peer_gone_locked(c, false);
			return;
		}
		conn_watch_kernel_locked(c, EPOLLIN | EPOLLRDHUP);
		return;
	}
	if (wire_decode_marker(c->marker, c->marker_len, &m) ||
	    wire_marker_resend_from(&m, &c->pos, &from)) {
		stats_malformed_input();
		fail_locked(c, "the peer's marker does not fit");
		return;
	}
	/* The peer let the queue pair go for this: so did this end. */
	if (c->cause == ROCESHIM_DOWNGRADE_QP_ERROR &&
	    m.cause == ROCESHIM_DOWNGRADE_ACCEPT_QUEUE)
		c->cause = m.cause;
	/* What the peer resends: what it sent past this end's reads. */
	if (m.sent > c->pos.consumed) {
		c->catch_up_until_ms = clock_ms() + c->timeout_ms;
		__atomic_store_n(
			&c->catch_up_to,
			WIRE_MARKER_LEN +
				catch_up_bytes(c->kfd,
					       m.sent - c->pos.consumed),
			__ATOMIC_RELAXED);
	}
	finish_locked(c, from);
}

bool conn_move_caught_up_locked(struct conn *c, int64_t now_ms)
{
	struct pollfd pfd = { .fd = c->kfd, .events = POLLRDHUP };
	uint64_t got;

	if (!c->catch_up_to)
		return true;
	/* The socket has carried the marker, then the resend, then more. */
	if (c->kfd < 0 || now_ms >= c->catch_up_until_ms ||
	    tcp_info_bytes_received(c->kfd, &got) || got >= c->catch_up_to ||
	    (real.poll(&pfd, 1, 0) == 1 &&
	     (pfd.revents & (POLLERR | POLLHUP | POLLRDHUP))))
		__atomic_store_n(&c->catch_up_to, 0, __ATOMIC_RELAXED);
	return !c->catch_up_to;
}

/*
 * What the kernel socket says while the connection is on RDMA: nothing
 * flows there, so anything is the peer's doing.
 */
static void kernel_news_locked(struct conn *c)
{
	struct pollfd pfd = { .fd = c->kfd, .events = POLLIN | POLLRDHUP };

	if (real.poll(&pfd, 1, 0) != 1) {
		conn_watch_kernel_locked(c, EPOLLIN | EPOLLRDHUP);
		return;
	}
	/* Left for the program to read: poll() does not clear it. */
	if (pfd.revents & POLLERR) {
		peer_gone_locked(c, true);
		return;
	}
	switch (peek_kernel_locked(c)) {
	case KERNEL_BYTES:
		conn_move_begin_locked(c, ROCESHIM_DOWNGRADE_PEER);
		if (path_of(c) == CONN_MOVING)
			read_marker_locked(c);
		break;
	case KERNEL_QUIET:
		conn_watch_kernel_locked(c, EPOLLIN | EPOLLRDHUP);
		break;
	default:
		break;
	}
}

void conn_move_kernel_event_locked(struct conn *c, uint32_t events)
{
	(void)events;
	if (c->kfd < 0)
		return;
	switch (path_of(c)) {
	case CONN_RDMA:
		if (!__atomic_load_n(&c->peer_closed, __ATOMIC_ACQUIRE) &&
		    !__atomic_load_n(&c->peer_reset, __ATOMIC_ACQUIRE))
			kernel_news_locked(c);
		break;
	case CONN_MOVING:
		read_marker_locked(c);
		break;
	case CONN_TCP:
		conn_move_flush_locked(c);
		break;
	default:
		break;
	}
}

/*
 * The peer's marker is late (move_wait.h): true to wait until the new
 * deadline.  SIOCOUTQ counts what is not yet acknowledged, sent or not:
 * with this host's own link down the marker is not even sent.
 */
static bool marker_stalled_locked(struct conn *c, int64_t now)
{
	struct tcp_info ti = { 0 };
	socklen_t len = sizeof(ti);
	int queued = 0;

	if (c->kfd < 0 || real.ioctl(c->kfd, SIOCOUTQ, &queued) ||
	    real.getsockopt(c->kfd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
	    len < offsetof(struct tcp_info, tcpi_rto) + sizeof(ti.tcpi_rto))
		queued = -1;
	switch (move_wait_expired(&c->wait, now, queued, ti.tcpi_rto / 1000)) {
	case MOVE_WAIT_STALLED:
		return true;
	case MOVE_WAIT_CARRIED:
		log_info("rdma: connection (fd %d): the path carried its "
			 "marker again; waiting for the peer's",
			 c->kfd);
		return true;
	default:
		return false;
	}
}

bool conn_move_tick(void)
{
	int64_t now = clock_ms();
	struct conn *c, *late = NULL;
	bool left;

	pthread_mutex_lock(&moving_lock);
	for (c = moving_list; c; c = c->next_moving)
		if (move_wait_late(&c->wait, now))
			late = c;
	left = moving_list;
	pthread_mutex_unlock(&moving_lock);
	/*
	 * One a tick: the list may change under the lock dropped here.  A
	 * marker that came since its event was served ends the move first.
	 */
	if (late) {
		pthread_mutex_lock(&late->lock);
		if (path_of(late) == CONN_MOVING)
			read_marker_locked(late);
		if (path_of(late) == CONN_MOVING &&
		    !marker_stalled_locked(late, now))
			fail_locked(late, "the peer's marker did not come");
		pthread_mutex_unlock(&late->lock);
	}
	return left;
}

/* Waits until fd is ready for events, until deadline; 0 or -errno. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int left = clock_ms_left(deadline);
	int n;

	if (!left)
		return -ETIMEDOUT;
	n = real.poll(&pfd, 1, left);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	return n ? 0 : -ETIMEDOUT;
}

int conn_move_unclaimed(int fd, enum roceshim_downgrade cause, int timeout_ms)
{
	struct wire_marker m = { .cause = cause }, peer;
	const struct wire_positions none = { 0 };
	int64_t deadline = clock_ms() + timeout_ms;
	uint8_t buf[WIRE_MARKER_LEN];
	size_t done = 0;
	uint64_t from;
	ssize_t n;
	int err;

	wire_encode_marker(&m, buf);
	while (done < sizeof(buf)) {
		n = real.send(fd, buf + done, sizeof(buf) - done,
			      MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			done += n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		err = wait_fd(fd, POLLOUT, deadline);
		if (err)
			return err;
	}
	for (done = 0; done < sizeof(buf);) {
		n = real.recv(fd, buf + done, sizeof(buf) - done, MSG_DONTWAIT);
		if (n > 0) {
			done += n;
			continue;
		}
		if (!n)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		err = wait_fd(fd, POLLIN, deadline);
		if (err)
			return err;
	}
	/* Nothing crossed: the peer must resume at 0. */
	if (wire_decode_marker(buf, sizeof(buf), &peer) ||
	    wire_marker_resend_from(&peer, &none, &from)) {
		stats_malformed_input();
		return -EPROTO;
	}
	return 0;
}
