// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include "clock.h"
#include "conn.h"
#include "connector.h"
#include "endpoint.h"
#include "fd_room.h"
#include "fd_table.h"
#include "fork_page.h"
#include "handshake.h"
#include "log.h"
#include "progress.h"
#include "readiness.h"
#include "real.h"
#include "sig_restart.h"
#include "stats.h"

enum connector_state {
	CONNECTOR_DIALING, /* the RDMA handshake */
	CONNECTOR_TCP,	   /* the TCP connect of an upgraded one, or before
			      asking again */
	CONNECTOR_DONE
};

struct connector {
	pthread_mutex_t lock;
	const struct config *cfg;
	struct sock *sock; /* its owner: no reference (it frees us) */
	int fd;		   /* the program's fd */
	int dup;	   /* ours, for the background work; -1 once done */
	int dup_number;	   /* the number dup had, kept once it closes */
	int wait_fd;	   /* eventfd, readable once it is over; -1 once
			      it is over and nobody waits on it */
	unsigned int wait_holders; /* those who may wait on wait_fd */
	struct sockaddr_storage addr;
	socklen_t len;
	struct roceshim_stats_endpoint local; /* once TCP connects */
	struct dial *dial;
	struct conn *conn;
	enum roceshim_reason reason;
	enum connector_state state; /* atomic reads */
	int error;		    /* a connect that failed at once */
	bool cancelled;
	bool aborted; /* shutdown() abandoned it: the socket is the kernel's */
	/*
	 * Its upgrade is given up, for tcp_reason: its handshake is
	 * cancelled, and one that completes anyway moves to TCP (keep_tcp()).
	 */
	bool tcp_wanted;
	enum roceshim_reason tcp_reason; /* that of aborted, too */
	bool shared;	 /* another process may hold its socket */
	bool orphaned;	 /* its sock is gone: the last step frees it */
	bool dial_again; /* refused for want of a listener: ask once more */
	bool tcp_up;	 /* its TCP connection is up */
	bool applied;	 /* its result went to the sock and its row */
	int applied_row; /* the row it went to */
	struct progress_watcher watcher; /* dup, while TCP connects */
	unsigned int generation;	 /* fork_generation when started */
};

/*
 * Bumped in each fork child.  A connect still in the background at the
 * fork is the parent's: the child sees its kernel socket, and never
 * takes the lock, which a thread that is not there may hold.
 */
static unsigned int fork_generation FORK_DATA;

/* How long shutdown() waits for an abandoned connect to end. */
#define ABORT_WAIT_MS 1000
/*
 * How long a fork (or exec, or fd passing) waits for a connect whose TCP
 * connect is on its way: past the kernel's first SYN retransmission.
 */
#define SHARE_WAIT_MS 3000

/* Connects of this process still in the background. */
static unsigned int pending_count FORK_DATA;

static bool foreign(const struct connector *c)
{
	return c->generation != fork_generation;
}

void FORK_CODE connector_fork_child(void)
{
	fork_generation++;
	__atomic_store_n(&pending_count, 0, __ATOMIC_RELAXED);
}

bool FORK_CODE connector_any_pending(void)
{
	return __atomic_load_n(&pending_count, __ATOMIC_ACQUIRE);
}

static void dialed(void *arg, enum roceshim_reason reason, struct conn *c,
		   bool no_listener);
static void destroy(struct connector *c);

bool connector_pending(const struct sock *sock)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	return c &&
	       __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != CONNECTOR_DONE &&
	       !foreign(c);
}

bool connector_started(const struct sock *sock)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	return c && !foreign(c);
}

int connector_take_error(struct sock *sock)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);
	int err = 0;

	if (!c || foreign(c))
		return 0;
	pthread_mutex_lock(&c->lock);
	if (c->state == CONNECTOR_DONE) {
		err = c->error;
		c->error = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

/*
 * Under c->lock: once the connect is over, wait_fd goes with the last
 * who may wait on it.
 */
static void wait_fd_close_locked(struct connector *c)
{
	if (c->state != CONNECTOR_DONE || c->wait_holders || c->wait_fd < 0)
		return;
	real.close(c->wait_fd);
	c->wait_fd = -1;
}

static int wait_fd_hold(struct connector *c)
{
	int fd = -1;

	pthread_mutex_lock(&c->lock);
	if (c->state != CONNECTOR_DONE && c->wait_fd >= 0) {
		c->wait_holders++;
		fd = c->wait_fd;
	}
	pthread_mutex_unlock(&c->lock);
	return fd;
}

static void wait_fd_release(struct connector *c)
{
	pthread_mutex_lock(&c->lock);
	c->wait_holders--;
	wait_fd_close_locked(c);
	pthread_mutex_unlock(&c->lock);
}

int connector_wait_hold(struct sock *sock)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	return c && !foreign(c) ? wait_fd_hold(c) : -1;
}

void connector_wait_release(struct sock *sock)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	if (c && !foreign(c))
		wait_fd_release(c);
}

/* A connector for sock (fd) and addr, not yet published; NULL: *reason. */
static struct connector *connector_new(const struct config *cfg,
				       struct sock *sock, int fd,
				       const struct sockaddr *addr,
				       socklen_t len,
				       enum roceshim_reason *reason)
{
	struct connector *c;

	if (len > sizeof(c->addr)) {
		*reason = ROCESHIM_REASON_UNSUPPORTED;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		*reason = ROCESHIM_REASON_RESOURCE;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->generation = fork_generation;
	c->cfg = cfg;
	c->sock = sock;
	c->fd = fd;
	memcpy(&c->addr, addr, len);
	c->len = len;
	c->wait_fd = fd_room_eventfd();
	/* Ours: the program may close its fd while the work goes on. */
	c->dup = fd_room_dup(fd);
	c->dup_number = c->dup;
	if (c->wait_fd >= 0 && c->dup >= 0)
		return c;
	*reason = c->wait_fd == -EMFILE || c->dup == -EMFILE
			  ? ROCESHIM_REASON_FD_LIMIT
			  : ROCESHIM_REASON_RESOURCE;
	destroy(c);
	return NULL;
}

/* Under c->lock: c is on its way, and sock's from now on. */
static void publish_locked(struct connector *c)
{
	__atomic_add_fetch(&pending_count, 1, __ATOMIC_ACQ_REL);
	__atomic_store_n(&c->sock->connector, c, __ATOMIC_RELEASE);
}

bool connector_start(const struct config *cfg, struct sock *sock, int fd,
		     const struct sockaddr *addr, socklen_t len,
		     enum roceshim_reason *reason)
{
	struct connector *c = connector_new(cfg, sock, fd, addr, len, reason);

	if (!c)
		return false;
	/*
	 * Published only once the dial is on its way (a fork walks the
	 * connectors), under c->lock, which the dial's end needs.
	 */
	pthread_mutex_lock(&c->lock);
	*reason =
		handshake_dial(cfg, c->dup, addr, len, 0, dialed, c, &c->dial);
	if (!*reason)
		publish_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (!*reason)
		return true;
	destroy(c);
	return false;
}

/* The decision, as track.c logs those of other connects. */
static void log_decision(const struct connector *c, enum roceshim_reason why)
{
	struct roceshim_stats_endpoint peer;
	char text[ENDPOINT_STRLEN];

	if (log_level < LOG_LEVEL_DEBUG ||
	    endpoint_from_sockaddr(&peer, (struct sockaddr *)&c->addr, c->len))
		return;
	endpoint_format(&peer, text, sizeof(text));
	if (why == ROCESHIM_REASON_NONE)
		log_debug("fd %d: connect to %s on rdma", c->fd, text);
	else
		log_debug("fd %d: connect to %s on tcp (%s)", c->fd, text,
			  roceshim_reason_name(why));
}

static void destroy(struct connector *c)
{
	if (c->wait_fd >= 0)
		real.close(c->wait_fd);
	if (c->dup >= 0)
		real.close(c->dup);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/*
 * Under c->lock, once the connect is over: its result goes to the sock,
 * to its stats row and to its connection, once connect() has published
 * that row (the connect may end before it does).  Whichever of the two
 * comes second does it, or does it again with the row it now has.
 */
static void apply_locked(struct connector *c)
{
	int row;

	if (c->cancelled || c->state != CONNECTOR_DONE ||
	    !__atomic_load_n(&c->sock->published, __ATOMIC_ACQUIRE))
		return;
	row = sock_row(c->sock);
	if (c->applied && c->applied_row == row)
		return;
	c->applied = true;
	c->applied_row = row;
	c->sock->connect_reason = c->reason;
	stats_row_set_reason(row, c->reason);
	stats_row_set_local(row, &c->local);
	if (c->conn)
		conn_attach(
			c->conn, c->fd, row,
			__atomic_load_n(&c->sock->sndbuf, __ATOMIC_SEQ_CST));
}

void connector_published(struct sock *sock)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	apply_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* The local address the kernel gave the socket as it connected. */
static void note_local(struct connector *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (real.getsockname(c->dup, (struct sockaddr *)&ss, &len) ||
	    endpoint_from_sockaddr(&c->local, (struct sockaddr *)&ss, len))
		memset(&c->local, 0, sizeof(c->local));
}

/*
 * Under c->lock: the connect is over, one way or the other.  true: the
 * sock is gone, and the caller frees c once it has unlocked it.
 */
static bool finish_locked(struct connector *c)
{
	struct conn *conn = c->conn;

	if (c->cancelled) {
		if (conn)
			conn_discard(conn);
		conn = c->conn = NULL;
	} else {
		if (c->aborted || (c->tcp_wanted && !conn))
			c->reason = c->tcp_reason;
		else if (c->reason == ROCESHIM_REASON_NONE && !conn)
			c->reason = ROCESHIM_REASON_RESOURCE;
		if (conn)
			__atomic_store_n(&c->sock->conn, conn,
					 __ATOMIC_RELEASE);
		log_decision(c, c->reason);
	}
	if (c->dup >= 0)
		real.close(c->dup);
	c->dup = -1;
	/* Done first: a registration made from now on is made directly. */
	__atomic_store_n(&c->state, CONNECTOR_DONE, __ATOMIC_RELEASE);
	if (!foreign(c))
		__atomic_sub_fetch(&pending_count, 1, __ATOMIC_ACQ_REL);
	apply_locked(c);
	if (!c->cancelled)
		readiness_resolve_pending(c->sock,
					  conn ? conn_readiness(conn) : NULL);
	/* Wakes the poll()s that wait for it; nobody new will. */
	if (c->wait_holders)
		(void)!real.write(c->wait_fd, &(uint64_t){ 1 }, 8);
	wait_fd_close_locked(c);
	return c->orphaned;
}

/*
 * Under c->lock, its TCP connection up after a refusal for want of a CM
 * listener: the second request (handshake.h).  false: it could not start.
 */
static bool dial_again_locked(struct connector *c)
{
	enum roceshim_reason reason;

	c->dial_again = false;
	__atomic_store_n(&c->state, CONNECTOR_DIALING, __ATOMIC_RELEASE);
	reason = handshake_dial(c->cfg, c->dup, (struct sockaddr *)&c->addr,
				c->len, HANDSHAKE_CONNECTED, dialed, c,
				&c->dial);
	if (!reason)
		return true;
	__atomic_store_n(&c->state, CONNECTOR_TCP, __ATOMIC_RELEASE);
	return false;
}

/* The TCP connect is over (progress thread). */
static void tcp_connected(struct progress_watcher *w, uint32_t events)
{
	struct connector *c =
		(struct connector *)((char *)w -
				     __builtin_offsetof(struct connector,
							watcher));
	struct pollfd pfd = { .fd = c->dup, .events = POLLOUT };
	bool orphan, failed;

	(void)events;
	pthread_mutex_lock(&c->lock);
	progress_del(c->dup);
	/* POLLERR, not SO_ERROR, which the program must still find. */
	failed = real.poll(&pfd, 1, 0) != 1 ||
		 (pfd.revents & (POLLERR | POLLHUP));
	if ((failed || c->aborted) && c->conn) {
		conn_discard(c->conn);
		c->conn = NULL;
	}
	c->tcp_up = !failed;
	if (!failed && c->dial_again && !c->cancelled && !c->aborted &&
	    dial_again_locked(c)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	orphan = finish_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (orphan)
		destroy(c);
}

bool connector_settle_interrupted(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int64_t end = clock_ms() + handshake_signal_grace_ms();
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	int left, n;

	do {
		left = clock_ms_left(end);
		n = left ? real.poll(&pfd, 1, left) : 0;
	} while (n < 0 && errno == EINTR);
	/* SO_ERROR would take the error that the program is to find. */
	return n > 0 && !(pfd.revents & (POLLERR | POLLHUP)) &&
	       !real.getpeername(fd, (struct sockaddr *)&peer, &len);
}

int connector_kernel_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int fl = real.fcntl(fd, F_GETFL);
	int ret, err;

	if (fl >= 0 && !(fl & O_NONBLOCK))
		real.fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	ret = real.connect(fd, addr, len);
	err = errno;
	if (fl >= 0 && !(fl & O_NONBLOCK))
		real.fcntl(fd, F_SETFL, fl);
	errno = err;
	return ret;
}

/*
 * A handshake is over (progress thread): the TCP connect goes out, unless
 * this was the second request, made once it was up.
 */
static void dialed(void *arg, enum roceshim_reason reason, struct conn *conn,
		   bool no_listener)
{
	struct connector *c = arg;
	bool orphan = false;
	int ret;

	pthread_mutex_lock(&c->lock);
	c->dial = NULL;
	c->reason = reason;
	c->conn = conn;
	if (c->cancelled || c->tcp_up) {
		orphan = finish_locked(c);
		goto out;
	}
	if (c->aborted) {
		if (conn)
			conn_discard(conn);
		c->conn = NULL;
		orphan = finish_locked(c);
		goto out;
	}
	/* Its kernel connect goes out now, after a cancelled handshake too. */
	c->dial_again = no_listener && !c->tcp_wanted;
	ret = connector_kernel_connect(c->dup, (struct sockaddr *)&c->addr,
				       c->len);
	if (ret)
		c->error = errno;
	note_local(c);
	if (ret && c->error != EINPROGRESS) {
		if (conn)
			conn_discard(conn);
		c->conn = NULL;
		orphan = finish_locked(c);
		goto out;
	}
	c->error = 0;
	c->tcp_up = !ret;
	if (c->tcp_up && c->dial_again && dial_again_locked(c))
		goto out;
	/*
	 * Over TCP the kernel socket connects with its own readiness from
	 * now on; an upgraded one, or one to ask again, must have its TCP
	 * connection first.
	 */
	if ((!conn && !c->dial_again) || c->tcp_up) {
		orphan = finish_locked(c);
		goto out;
	}
	__atomic_store_n(&c->state, CONNECTOR_TCP, __ATOMIC_RELEASE);
	c->watcher.fn = tcp_connected;
	if (progress_add(c->dup, EPOLLOUT | EPOLLONESHOT, &c->watcher)) {
		if (conn)
			conn_discard(conn);
		c->conn = NULL;
		orphan = finish_locked(c);
	}
out:
	pthread_mutex_unlock(&c->lock);
	if (orphan)
		destroy(c);
}

bool connector_adopt(const struct config *cfg, struct sock *sock, int fd,
		     const struct sockaddr *addr, socklen_t len,
		     struct conn *conn)
{
	enum roceshim_reason reason;
	struct connector *c = connector_new(cfg, sock, fd, addr, len, &reason);
	bool ok;

	if (!c)
		return false;
	pthread_mutex_lock(&c->lock);
	c->conn = conn;
	c->reason = ROCESHIM_REASON_NONE;
	c->state = CONNECTOR_TCP;
	note_local(c);
	c->watcher.fn = tcp_connected;
	ok = !progress_add(c->dup, EPOLLOUT | EPOLLONESHOT, &c->watcher);
	if (ok)
		publish_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (!ok)
		destroy(c);
	return ok;
}

/*
 * Until the connect ends, at most ms (-1: no limit).  A signal handler
 * ends the wait, with -EINTR, only where the program's call would fail
 * with EINTR (for_program) and the kernel would not restart it.
 */
static int wait_connect_end(struct connector *c, int64_t ms, bool for_program)
{
	struct pollfd pfd = { .fd = wait_fd_hold(c), .events = POLLIN };
	int64_t deadline = ms < 0 ? -1 : clock_ms() + ms;
	int ret = 0, n;

	if (pfd.fd < 0)
		return 0;
	/* With a socket timeout, a signal ends it (sock_intr_errno()). */
	while ((n = real.poll(&pfd, 1, clock_ms_left(deadline))) < 0 &&
	       errno == EINTR) {
		if (for_program && (ms >= 0 || !sig_restart_allowed())) {
			ret = -EINTR;
			break;
		}
	}
	if (!n)
		ret = -ETIMEDOUT;
	wait_fd_release(c);
	return ret;
}

int connector_wait_end(struct sock *sock, int64_t timeout_ms)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	return c && !foreign(c) ? wait_connect_end(c, timeout_ms, true) : 0;
}

void connector_cancel(struct sock *sock)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	if (!c || foreign(c))
		return;
	pthread_mutex_lock(&c->lock);
	c->cancelled = true;
	readiness_forget_pending(sock);
	if (c->dial)
		handshake_dial_cancel(c->dial);
	/*
	 * As closing a connecting socket does: the SYN goes no further,
	 * unless a fork child holds the socket too.
	 */
	if (c->state == CONNECTOR_TCP && c->dup >= 0 && !c->shared)
		real.shutdown(c->dup, SHUT_RDWR);
	pthread_mutex_unlock(&c->lock);
}

/* dup's own TCP connect is over, one way or the other. */
static bool tcp_connect_over(int dup)
{
	struct pollfd pfd = { .fd = dup, .events = POLLOUT };

	return real.poll(&pfd, 1, 0) == 1;
}

bool connector_abort(struct sock *sock, int how)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);
	bool abort;

	if (!c || foreign(c))
		return false;
	pthread_mutex_lock(&c->lock);
	abort = c->state != CONNECTOR_DONE && !c->tcp_up && !c->aborted &&
		c->dup >= 0 && (c->dial || !tcp_connect_over(c->dup));
	if (abort) {
		/*
		 * The kernel's own connect goes out from the same socket and
		 * the shutdown meets it where it stands: a SYN still
		 * unanswered is abandoned (ECONNRESET, POLLERR|POLLHUP,
		 * EPIPE), a connection already made is shut as asked.
		 * Either way the socket is the kernel's from now on, and a
		 * handshake that completes anyway is dropped.
		 */
		c->aborted = true;
		c->tcp_reason = ROCESHIM_REASON_ABANDONED;
		if (c->dial) {
			(void)connector_kernel_connect(
				c->dup, (struct sockaddr *)&c->addr, c->len);
			handshake_dial_cancel(c->dial);
		}
		real.shutdown(c->dup, how);
	} else if (c->state != CONNECTOR_DONE && c->dial) {
		handshake_dial_cancel(c->dial);
	}
	pthread_mutex_unlock(&c->lock);
	/* The progress thread ends it at once; a call after sees the end. */
	(void)wait_connect_end(c, ABORT_WAIT_MS, false);
	return abort;
}

/*
 * The connect must end on kernel TCP, for why, and is waited for, at most
 * 3 s (past the first retransmission of its SYN).  One still in its RDMA
 * handshake cancels it, and its kernel connect goes out once the
 * handshake has ended: not before, since one that completes anyway is
 * the server's RDMA connection once accept() takes it.  So such a
 * connection is kept, as one whose TCP connect was on its way, and the
 * caller moves it.  shared: another process may hold the socket from now
 * on.
 */
static void keep_tcp(struct sock *sock, enum roceshim_reason why, bool shared)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);
	bool wait;

	if (!c || foreign(c))
		return;
	pthread_mutex_lock(&c->lock);
	wait = c->state != CONNECTOR_DONE && !c->aborted && !c->cancelled;
	if (shared)
		c->shared = true;
	if (wait && !c->tcp_wanted) {
		c->tcp_wanted = true;
		c->tcp_reason = why;
		/* One waiting for its TCP connect to ask again asks no more. */
		c->dial_again = false;
		if (c->dial)
			handshake_dial_cancel(c->dial);
	}
	pthread_mutex_unlock(&c->lock);
	if (wait)
		(void)wait_connect_end(c, SHARE_WAIT_MS, false);
}

void connector_share(struct sock *sock)
{
	keep_tcp(sock, ROCESHIM_REASON_SHARED, true);
}

void connector_keep_tcp(struct sock *sock, enum roceshim_reason why)
{
	keep_tcp(sock, why, false);
}

/* Whether a and b name the same socket. */
static bool same_file(int a, int b)
{
	struct stat sa, sb;

	return !fstat(a, &sa) && !fstat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Whether fd is one of the program's tracked descriptors. */
static bool program_fd(int fd)
{
	struct sock *sock = fd_table_get(fd);

	if (sock)
		sock_put(sock);
	return sock;
}

void connector_fork_child_release(struct sock *sock, int fd)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);
	int dup;

	/* Still the parent's generation: connector_fork_child() comes next. */
	if (!c || foreign(c))
		return;
	/*
	 * The kernel copies the descriptor table before the memory, and the
	 * parent's progress thread may close dup between the two: then the
	 * child holds a copy that its memory says is closed.  Or closed
	 * before the table was copied, its number taken by another of
	 * roceshim's descriptors.  So the number is closed only if it still
	 * names the program's socket.
	 */
	dup = c->dup_number;
	if (dup >= 0 && dup != fd && !program_fd(dup) && same_file(dup, fd))
		real.close(dup);
	c->dup = -1;
	if (c->state != CONNECTOR_DONE && c->wait_fd >= 0) {
		real.close(c->wait_fd);
		c->wait_fd = -1;
	}
}

void connector_fd_closed(struct sock *sock, int fd, int other)
{
	struct connector *c =
		__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE);

	if (!c || foreign(c))
		return;
	pthread_mutex_lock(&c->lock);
	if (c->fd == fd)
		c->fd = other;
	pthread_mutex_unlock(&c->lock);
}

void connector_free(struct connector *c)
{
	bool done;

	/* The parent's, in a fork child: its memory is all that is left. */
	if (foreign(c))
		return;
	pthread_mutex_lock(&c->lock);
	c->cancelled = true;
	readiness_forget_pending(c->sock);
	done = c->state == CONNECTOR_DONE;
	/* Still in the background: the progress thread frees it at the end. */
	c->orphaned = !done;
	if (c->dial)
		handshake_dial_cancel(c->dial);
	pthread_mutex_unlock(&c->lock);
	if (done)
		destroy(c);
}
