// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "connector.h"
#include "endpoint.h"
#include "exec_handover.h"
#include "fd_room.h"
#include "fork_page.h"
#include "handshake.h"
#include "log.h"
#include "policy.h"
#include "rdma_stack.h"
#include "readiness.h"
#include "real.h"
#include "reuseport.h"
#include "share.h"
#include "shim.h"
#include "sockopt.h"
#include "stats.h"
#include "track.h"
#include "upgraded.h"

static bool is_tcp(int domain, int type, int protocol)
{
	if (domain != AF_INET && domain != AF_INET6)
		return false;
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM)
		return false;
	return protocol == 0 || protocol == IPPROTO_TCP;
}

void track_socket(int fd, int domain, int type, int protocol)
{
	struct sock *sock;
	int ret;

	if (!is_tcp(domain, type, protocol)) {
		track_other(fd);
		return;
	}
	sock = sock_new(domain);
	if (!sock) {
		log_warn("fd %d: out of memory, socket not tracked", fd);
		track_other(fd);
		return;
	}
	ret = fd_table_install(fd, sock);
	if (ret)
		log_debug("fd %d: not tracked (%s)", fd, strerror(-ret));
	sock_put(sock);
}

void track_inherited_listeners(void)
{
	struct dirent *d;
	struct sock *sock;
	char *end;
	long fd;
	DIR *dir = opendir("/proc/self/fd");

	if (!dir)
		return;
	while ((d = readdir(dir))) {
		fd = strtol(d->d_name, &end, 10);
		if (*end || end == d->d_name || fd < 0 || fd == dirfd(dir) ||
		    fd > INT_MAX)
			continue;
		sock = track_inherited_listener((int)fd);
		if (sock)
			sock_put(sock);
	}
	closedir(dir);
}

void track_other(int fd)
{
	struct sock *stale = fd_table_remove(fd);

	/* fd was closed behind our back (raw syscall, exec); forget it. */
	if (stale)
		sock_put(stale);
}

/*
 * Releases the table's reference on a closed fd's sock.  SO_LINGER {1, 0}
 * resets a TCP connection: no FIN over RDMA either.
 */
static void release_closed(int fd, struct sock *sock)
{
	struct linger lg;
	socklen_t len = sizeof(lg);
	int other = -1;

	if (sock->connector || sock->conn)
		other = fd_table_find(sock, fd);
	if (sock->connector) {
		if (other < 0)
			connector_cancel(sock);
		else
			connector_fd_closed(sock, fd, other);
	}
	if (sock->conn) {
		/* A reference besides this close's: a call in flight. */
		bool in_call =
			other < 0 &&
			__atomic_load_n(&sock->refs, __ATOMIC_ACQUIRE) > 1;

		conn_fd_closing(sock->conn, fd, other, in_call);
	}
	if (other >= 0)
		readiness_fd_gone(sock, fd, other);
	if (sock->conn &&
	    !real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len) &&
	    lg.l_onoff && !lg.l_linger)
		sock->abortive = true;
	sock_put(sock);
}

void track_close(int fd)
{
	struct sock *sock = fd_table_remove(fd);

	if (sock)
		release_closed(fd, sock);
	/*
	 * A descriptor the RDMA libraries close inside fd_room_enter() is
	 * neither a socket the program registered nor its epoll set, and a
	 * fork takes the readiness locks before fd_room's.  A signal
	 * handler's close() there of a set of the program's still counts.
	 */
	if (fd >= 0 && (sock || !fd_room_inside() || readiness_fd_is_set(fd)))
		readiness_fd_closed(fd, fd);
}

void track_close_range(unsigned int first, unsigned int last)
{
	fd_table_remove_range(first, last, release_closed);
	readiness_fd_closed(first, last);
}

void track_dup(int old_fd, int new_fd)
{
	struct sock *sock = shim_lookup(old_fd);

	readiness_fd_dup(old_fd, new_fd);
	if (!sock) {
		track_other(new_fd);
		return;
	}
	if (fd_table_install(new_fd, sock))
		track_other(new_fd);
	sock_put(sock);
}

static void std_stream(int fd);

int track_dup_result(int old_fd, int new_fd)
{
	int err;

	if (new_fd < 0 || !shim_tracking())
		return new_fd;
	err = errno;
	track_dup(old_fd, new_fd);
	if (new_fd <= STDERR_FILENO)
		std_stream(new_fd);
	errno = err;
	return new_fd;
}

int track_fcntl_result(int fd, int cmd, int ret)
{
	if (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC)
		return ret;
	return track_dup_result(fd, ret);
}

static void local_endpoint(int fd, struct roceshim_stats_endpoint *ep)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (real.getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    endpoint_from_sockaddr(ep, (struct sockaddr *)&ss, len))
		memset(ep, 0, sizeof(*ep));
}

static void peer_endpoint(int fd, struct roceshim_stats_endpoint *ep)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (real.getpeername(fd, (struct sockaddr *)&ss, &len) ||
	    endpoint_from_sockaddr(ep, (struct sockaddr *)&ss, len))
		memset(ep, 0, sizeof(*ep));
}

/*
 * A transparent (TPROXY) listener accepts connections for addresses that
 * are not its own (IPV6_TRANSPARENT sets the same flag).
 */
static bool transparent(int fd)
{
	socklen_t len = sizeof(int);
	int on = 1;

	if (real.getsockopt(fd, SOL_IP, IP_TRANSPARENT, &on, &len))
		return true;
	return on != 0;
}

static void log_decision(int fd, const char *what,
			 const struct roceshim_stats_endpoint *peer,
			 enum roceshim_reason reason)
{
	char text[ENDPOINT_STRLEN];

	if (log_level < LOG_LEVEL_DEBUG)
		return;
	endpoint_format(peer, text, sizeof(text));
	if (reason == ROCESHIM_REASON_NONE)
		log_debug("fd %d: %s %s on rdma", fd, what, text);
	else
		log_debug("fd %d: %s %s on tcp (%s)", fd, what, text,
			  roceshim_reason_name(reason));
}

int track_connect_prepare(struct sock *sock, int fd,
			  const struct sockaddr *addr, socklen_t len,
			  enum roceshim_reason *reason)
{
	struct roceshim_stats_endpoint peer;
	struct conn *conn = NULL;
	const char *why;
	int err;

	*reason = ROCESHIM_REASON_NONE;
	/*
	 * A connect in the background: as the kernel's in progress, which a
	 * blocking connect() waits for (one retried after EINTR), at most
	 * SO_SNDTIMEO (then EALREADY, as __inet_stream_connect() says).
	 */
	if (connector_pending(sock)) {
		if (real_call_nonblocking(fd, 0))
			return -EALREADY;
		err = connector_wait_end(
			sock, real_socket_timeout_ms(fd, SO_SNDTIMEO));
		if (err)
			return err == -ETIMEDOUT ? -EALREADY : err;
	}
	err = connector_take_error(sock);
	if (err)
		return -err;
	/* Only the first connect() decides; later calls poll its progress. */
	if (__atomic_load_n(&sock->published, __ATOMIC_ACQUIRE) || sock->conn ||
	    sock->connector)
		return 0;
	if (endpoint_from_sockaddr(&peer, addr, len)) {
		*reason = ROCESHIM_REASON_UNSUPPORTED;
		return 0;
	}
	*reason = policy_decide(&shim_config, &peer, peer.port);
	if (*reason)
		return 0;
	why = sockopt_tcp_only_on(fd, false);
	if (why) {
		log_info("fd %d: %s: the connection stays on TCP", fd, why);
		*reason = ROCESHIM_REASON_UNSUPPORTED;
		return 0;
	}
	if (real_call_nonblocking(fd, 0)) {
		readiness_early_pend(sock);
		if (connector_start(&shim_config, sock, fd, addr, len, reason))
			return -EINPROGRESS;
		readiness_resolve_pending(sock, NULL);
		return 0;
	}
	*reason = handshake_connect(&shim_config, fd, addr, len, 0, &conn,
				    &sock->dial_again);
	if (conn)
		sock->conn = conn;
	return *reason == ROCESHIM_REASON_ABANDONED ? -EINTR : 0;
}

/*
 * A blocking connect refused for want of a CM listener, now connected
 * over TCP: the second request (handshake.h).
 */
static void dial_again(struct sock *sock, int fd, const struct sockaddr *addr,
		       socklen_t len, enum roceshim_reason *reason)
{
	struct conn *conn = NULL;
	bool no_listener;

	sock->dial_again = false;
	if (handshake_connect(&shim_config, fd, addr, len, HANDSHAKE_CONNECTED,
			      &conn, &no_listener))
		return;
	sock->conn = conn;
	*reason = ROCESHIM_REASON_NONE;
}

void track_sndbuf(struct sock *sock, int fd)
{
	int err = errno, bytes = 0;
	socklen_t len = sizeof(bytes);
	struct conn *c;

	if (real.getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &len) ||
	    bytes <= 0) {
		errno = err;
		return;
	}
	__atomic_store_n(&sock->sndbuf, bytes, __ATOMIC_SEQ_CST);
	c = __atomic_load_n(&sock->conn, __ATOMIC_SEQ_CST);
	if (c)
		conn_limit_send(c, bytes);
}

/* Its registrations made before the connect follow it onto RDMA. */
static void upgrade_early(struct sock *sock)
{
	struct readiness *r = conn_readiness(sock->conn);

	if (r && !readiness_released(r))
		readiness_early_upgrade(sock, r);
	else
		readiness_early_forget(sock);
}

/* A new connection takes the program's SO_SNDBUF, if it set one. */
static void attach(struct sock *sock, int fd)
{
	conn_attach(sock->conn, fd, sock_row(sock),
		    __atomic_load_n(&sock->sndbuf, __ATOMIC_SEQ_CST));
}

void track_connect(struct sock *sock, int fd, const struct sockaddr *addr,
		   socklen_t len, int ret, int err, enum roceshim_reason reason)
{
	struct roceshim_stats_endpoint local, peer;
	enum roceshim_row_state state;
	struct conn *conn;

	/* A later connect() on the same socket only reports progress. */
	if (__atomic_load_n(&sock->published, __ATOMIC_ACQUIRE)) {
		if (!ret || err == EISCONN)
			track_connect_result(sock, fd, 0);
		else if (err != EALREADY && err != EINPROGRESS)
			track_connect_result(sock, fd, err);
		return;
	}
	if (!ret && sock->dial_again)
		dial_again(sock, fd, addr, len, &reason);
	/*
	 * A signal interrupted the kernel's connect after the handshake: the
	 * kernel goes on with it, and the peer will take the connection on
	 * RDMA, so this end goes on too (connector.h).
	 */
	if (ret && err == EINTR && sock->conn) {
		/* Cleared first: the connector may attach it at once. */
		conn = sock->conn;
		__atomic_store_n(&sock->conn, NULL, __ATOMIC_RELEASE);
		readiness_early_pend(sock);
		if (connector_adopt(&shim_config, sock, fd, addr, len, conn)) {
			err = EINPROGRESS;
		} else {
			readiness_resolve_pending(sock, NULL);
			__atomic_store_n(&sock->conn, conn, __ATOMIC_RELEASE);
		}
	}
	if (ret && err != EINPROGRESS) {
		/* The TCP connection failed: so does the RDMA one. */
		if (sock->conn) {
			conn_release(sock->conn, true);
			sock->conn = NULL;
		}
		return;
	}
	if (endpoint_from_sockaddr(&peer, addr, len))
		return;
	/*
	 * On TCP the local address is left unset: a getsockname() per connect
	 * shows in a connect loop, and roceshim-stat reads it from /proc.
	 */
	if (sock->conn || sock->connector)
		local_endpoint(fd, &local);
	else
		memset(&local, 0, sizeof(local));
	state = ret ? ROCESHIM_ROW_CONNECTING : ROCESHIM_ROW_OPEN;
	sock->connect_reason = reason;
	__atomic_store_n(&sock->connecting, ret != 0, __ATOMIC_RELEASE);
	sock_publish(sock, fd, ROCESHIM_ROLE_ACTIVE, state, reason, &local,
		     &peer);
	/* One in the background logs its decision when it knows it. */
	if (sock->connector) {
		connector_published(sock);
		return;
	}
	if (sock->conn) {
		attach(sock, fd);
		upgrade_early(sock);
	} else {
		readiness_early_forget(sock);
	}
	log_decision(fd, "connect to", &peer, reason);
}

void track_fastopen(struct sock *sock, int fd, const struct sockaddr *addr,
		    socklen_t len, ssize_t ret)
{
	struct roceshim_stats_endpoint peer;
	enum roceshim_reason reason;
	int err = errno;

	/* A signal ends the call, not the kernel's connect. */
	if (!addr || __atomic_load_n(&sock->published, __ATOMIC_ACQUIRE) ||
	    (ret < 0 && err != EINPROGRESS && err != EINTR) ||
	    endpoint_from_sockaddr(&peer, addr, len))
		return;
	reason = policy_decide(&shim_config, &peer, peer.port);
	if (!reason) {
		log_info("fd %d: MSG_FASTOPEN: the connection stays on TCP",
			 fd);
		reason = ROCESHIM_REASON_UNSUPPORTED;
	}
	track_connect(sock, fd, addr, len, ret < 0 ? -1 : 0,
		      ret < 0 ? EINPROGRESS : 0, reason);
	errno = err;
}

void track_connect_result(struct sock *sock, int fd, int so_error)
{
	int err;

	if (!__atomic_load_n(&sock->connecting, __ATOMIC_RELAXED) ||
	    !__atomic_exchange_n(&sock->connecting, 0, __ATOMIC_ACQ_REL))
		return;
	err = errno;
	if (so_error) {
		sock_set_state(sock, ROCESHIM_ROW_FAILED);
		/* connect() logged its decision: say it came to nothing. */
		log_debug("fd %d: connect failed (%s)", fd, strerror(so_error));
	} else {
		stats_count_connected(sock->connect_reason);
		sock_set_state(sock, ROCESHIM_ROW_OPEN);
	}
	errno = err;
}

/* Whether an int socket option is above 0; errno is left as it was. */
static bool option_on(int fd, int level, int name)
{
	int err = errno, val = 0;
	socklen_t len = sizeof(val);
	bool on = !real.getsockopt(fd, level, name, &val, &len) && val > 0;

	errno = err;
	return on;
}

/*
 * TCP_DEFER_ACCEPT: the kernel hands a connection to accept() only once
 * its first bytes came over TCP, and a client on RDMA sends none there:
 * its handshake would expire first.  Such a listener stays on TCP.
 */
static bool defers_accept(int fd)
{
	return option_on(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT);
}

/*
 * SO_REUSEPORT: listeners of other processes may share the port, and the
 * kernel picks which of them accepts each TCP connection, while only one
 * process can hold the port's CM listener.  The others claim what it
 * took (reuseport.h).
 */
static bool shares_port(int fd)
{
	return option_on(fd, SOL_SOCKET, SO_REUSEPORT);
}

/* Why a listener must stay on TCP, or NULL if it need not. */
static const char *listener_tcp_only(int fd)
{
	if (defers_accept(fd))
		return "TCP_DEFER_ACCEPT";
	return sockopt_tcp_only_on(fd, true);
}

/* The CM listener beside fd, unless open already or the port is unbound. */
static enum roceshim_reason
open_cm_listener(struct sock *sock, int fd,
		 const struct roceshim_stats_endpoint *local, int backlog)
{
	if (sock->listen_id)
		return ROCESHIM_REASON_NONE;
	if (!local->port)
		return ROCESHIM_REASON_RESOURCE;
	return handshake_listen(&shim_config, sock, fd, backlog,
				shares_port(fd));
}

/*
 * A listener with SO_REUSEPORT whose port another listener holds: it
 * claims what that one's CM listener took.  The REUSEPORT_JOINED_* bits
 * of the holders it joined.
 */
static unsigned int join_port(int fd, uint16_t port)
{
	unsigned int joined = 0;
	struct stat st;

	if (!fstat(fd, &st))
		joined = reuseport_join(port, (uint64_t)st.st_ino);
	if (!joined)
		log_info("fd %d: SO_REUSEPORT: no RDMA listener on port %u to "
			 "join; the listener stays on TCP",
			 fd, (unsigned int)port);
	else
		log_debug("fd %d: SO_REUSEPORT: claims the RDMA connections "
			  "of the port's holder",
			  fd);
	return joined;
}

/* Whether listener fd is one of the TCP sockets this process tracks. */
static bool listening_tcp(int fd, int *domain)
{
	int type, protocol, listening;
	socklen_t len = sizeof(int);

	return !real.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening,
				&len) &&
	       listening &&
	       !real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, domain, &len) &&
	       !real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) &&
	       !real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) &&
	       is_tcp(*domain, type, protocol);
}

struct sock *track_inherited_listener(int fd)
{
	struct roceshim_stats_endpoint local;
	bool imported = share_imported();
	unsigned int joined = 0;
	struct sock *sock;
	int domain, ret;

	if (!(exec_handover_waiting() || imported ||
	      (shim_tracking() && shares_port(fd))) ||
	    !listening_tcp(fd, &domain))
		return NULL;
	/* One an exec kept shares its port with its old holder's. */
	if (!imported && shares_port(fd)) {
		local_endpoint(fd, &local);
		joined = join_port(fd, local.port);
	}
	sock = sock_new(domain);
	if (!sock)
		return NULL;
	/* Before it is seen: another thread's accept() may find it. */
	sock->imported = imported;
	sock->joined = joined;
	if (joined)
		sock->listen_reason = ROCESHIM_REASON_REUSEPORT;
	ret = fd_table_install(fd, sock);
	sock_put(sock);
	if (ret) {
		log_debug("fd %d: not tracked (%s)", fd, strerror(-ret));
		return NULL;
	}
	return shim_lookup(fd);
}

void track_listen_prepare(struct sock *sock, int fd, int backlog)
{
	struct roceshim_stats_endpoint local;

	local_endpoint(fd, &local);
	if (policy_listener(&shim_config, local.port) != ROCESHIM_REASON_NONE ||
	    listener_tcp_only(fd))
		return;
	open_cm_listener(sock, fd, &local, backlog);
}

void track_listen_failed(struct sock *sock)
{
	if (!__atomic_load_n(&sock->published, __ATOMIC_ACQUIRE))
		handshake_unlisten(sock, false);
}

void track_listen(struct sock *sock, int fd, int backlog)
{
	struct roceshim_stats_endpoint local, none;
	enum roceshim_reason reason;
	const char *why;

	memset(&none, 0, sizeof(none));
	local_endpoint(fd, &local);
	if (local.family && !endpoint_is_wildcard(&local) && !transparent(fd)) {
		sock->bound = local;
		__atomic_store_n(&sock->bound_known, true, __ATOMIC_RELEASE);
	}
	reason = policy_listener(&shim_config, local.port);
	if (reason == ROCESHIM_REASON_NONE && (why = listener_tcp_only(fd))) {
		log_info("fd %d: %s: the listener stays on TCP", fd, why);
		reason = ROCESHIM_REASON_UNSUPPORTED;
	}
	if (reason == ROCESHIM_REASON_NONE)
		reason = open_cm_listener(sock, fd, &local, backlog);
	/*
	 * Whatever kept its own CM listener away, it must claim what the
	 * port's holder took, or the holder takes nothing: unless it takes
	 * no RDMA connection at all (TCP_DEFER_ACCEPT).
	 */
	if (reason != ROCESHIM_REASON_NONE && shares_port(fd) &&
	    !listener_tcp_only(fd))
		__atomic_store_n(&sock->joined, join_port(fd, local.port),
				 __ATOMIC_RELEASE);
	__atomic_store_n(&sock->listen_reason, reason, __ATOMIC_RELEASE);
	sock_publish(sock, fd, ROCESHIM_ROLE_LISTENER, ROCESHIM_ROW_LISTENING,
		     reason, &local, &none);
}

/*
 * Why a connection the listener accepted, and no CM listener took, is on
 * TCP: the listener's own reason when it took none (its clients were
 * refused whatever they offered), else the client offered no RDMA.
 */
static enum roceshim_reason accepted_on_tcp_reason(const struct sock *listener)
{
	enum roceshim_reason why;

	why = __atomic_load_n(&listener->listen_reason, __ATOMIC_ACQUIRE);
	return why != ROCESHIM_REASON_NONE ? why : ROCESHIM_REASON_PEER_TCP;
}

void track_accept(struct sock *listener, int fd,
		  const struct sockaddr *peer_addr, socklen_t peer_len)
{
	struct roceshim_stats_endpoint local, peer;
	enum roceshim_reason reason;
	enum roceshim_downgrade moved = ROCESHIM_DOWNGRADE_NONE;
	unsigned int joined;
	int64_t since;
	struct sock *sock;

	sock = sock_new(listener->domain);
	if (!sock) {
		log_warn("fd %d: out of memory, connection not tracked", fd);
		track_other(fd);
		return;
	}
	if (fd_table_install(fd, sock))
		goto out;
	__atomic_store_n(&sock->sndbuf,
			 __atomic_load_n(&listener->sndbuf, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELAXED);
	if (__atomic_load_n(&listener->bound_known, __ATOMIC_ACQUIRE))
		local = listener->bound;
	else
		local_endpoint(fd, &local);
	if (!peer_addr || endpoint_from_sockaddr(&peer, peer_addr, peer_len))
		peer_endpoint(fd, &peer);
	/* The client decided: a pending RDMA connection must be taken. */
	since = __atomic_load_n(&listener->listen_id, __ATOMIC_ACQUIRE)
			? listener->listen_since_ms
			: -1;
	joined = __atomic_load_n(&listener->joined, __ATOMIC_ACQUIRE);
	if (since < 0 && __atomic_load_n(&listener->imported, __ATOMIC_ACQUIRE))
		handshake_take_inherited(&shim_config, &peer, local.port, fd,
					 &moved);
	else if (since < 0 && (joined & REUSEPORT_JOINED_OTHER))
		handshake_take_joined(&shim_config, &peer, local.port, fd,
				      &moved);
	/* Its holder is this process: it takes the connection as its own. */
	else if (since >= 0 || joined ||
		 __atomic_load_n(&listener->orphans, __ATOMIC_ACQUIRE) ||
		 exec_handover_waiting())
		sock->conn = handshake_take_pending(&shim_config, since, &peer,
						    local.port, fd, &moved);
	reason = policy_decide(&shim_config, &peer, local.port);
	if (sock->conn || moved)
		reason = ROCESHIM_REASON_NONE;
	else if (reason == ROCESHIM_REASON_NONE)
		reason = accepted_on_tcp_reason(listener);
	sock_publish(sock, fd, ROCESHIM_ROLE_PASSIVE, ROCESHIM_ROW_OPEN, reason,
		     &local, &peer);
	if (sock->conn)
		attach(sock, fd);
	if (moved)
		stats_downgrade(sock_row(sock), moved);
	log_decision(fd, "accepted from", &peer, reason);
	/* Taken by a CM listener before the credentials changed. */
	if (sock->conn && policy_rdma_stopped())
		conn_make_plain(sock->conn, ROCESHIM_DOWNGRADE_CREDENTIALS);
	/* Or before the listener got an option the socket inherited. */
	else if (sock->conn && since < 0)
		track_option(sock, fd);
out:
	sock_put(sock);
}

static bool is_error(ssize_t ret, int err)
{
	return ret < 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR;
}

void track_tx(struct sock *sock, ssize_t ret, int err)
{
	if (ret > 0) {
		/* Data moved: a non-blocking connect has completed. */
		if (__atomic_load_n(&sock->connecting, __ATOMIC_RELAXED))
			track_connect_result(sock, -1, 0);
		stats_tcp_tx(sock_row(sock), ret);
	} else if (is_error(ret, err)) {
		stats_error(sock_row(sock));
	}
}

void track_rx(struct sock *sock, ssize_t ret, int err)
{
	if (ret > 0) {
		if (__atomic_load_n(&sock->connecting, __ATOMIC_RELAXED))
			track_connect_result(sock, -1, 0);
		stats_tcp_rx(sock_row(sock), ret);
	} else if (is_error(ret, err)) {
		stats_error(sock_row(sock));
	}
}

/* What a whole-process event asks of each upgraded connection. */
struct leaving {
	enum roceshim_downgrade cause;
	bool all;	 /* every one, or those an exec would keep */
	bool spawn_dups; /* and those named in spawn file actions */
	bool exec;	 /* this process's image goes (conn_leave()) */
};

/*
 * Whether the other process keeps fd: the new image keeps the fds without
 * FD_CLOEXEC (and posix_spawn's dups).
 */
static bool kept(int fd, const struct sock *sock, const struct leaving *how)
{
	int fl;

	if (how->all || (how->spawn_dups && sock->spawn_dup))
		return true;
	fl = real.fcntl(fd, F_GETFD);
	return fl < 0 || !(fl & FD_CLOEXEC);
}

static void hand_over_conn(struct conn *c, const struct leaving *how)
{
	if (how->exec)
		conn_leave(c, how->cause);
	else
		conn_hand_over(c, how->cause);
}

static void leave(int fd, struct sock *sock, void *arg)
{
	const struct leaving *how = arg;
	struct conn *c;

	/* A connect in the background ends first, and may end on RDMA. */
	if (__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE) &&
	    kept(fd, sock, how))
		connector_share(sock);
	c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);
	if (!c)
		return;
	/* Moved: what moved with it goes out first, kept or not. */
	if (conn_alive(c) && !conn_on_rdma(c)) {
		if (!conn_is_plain(c))
			hand_over_conn(c, how);
		return;
	}
	/*
	 * A fork child that execs leaves the fds it does not keep to their
	 * owner.  An owner that shares a connection with its fork children
	 * goes away with its exec, so that connection moves whatever its
	 * flags.
	 */
	if (!(conn_alive(c) && conn_shared(c)) && !kept(fd, sock, how))
		return;
	hand_over_conn(c, how);
}

/* Whether a walk for upgraded connections can find one. */
static bool may_have_rdma(void)
{
	return shim_tracking() && rdma_stack_loaded();
}

/* Or a share region to hand on (share_import()). */
static bool may_hand_over(void)
{
	return shim_tracking() && (rdma_stack_loaded() || share_imported());
}

/*
 * The listeners an exec keeps, and the connections their CM listeners
 * took that accept() has not: handed over to the new image.
 */
struct handover_walk {
	struct leaving how;
	struct exec_handover list;
	size_t room;
	const void **keys; /* the CM listeners listed (sock->orphans_key) */
	size_t key_count;
	bool listening; /* a kept listener had a CM listener */
	/*
	 * A kept listener's CM listener is another process's: the share
	 * region that lists what it took goes with the exec (the imported
	 * one, for a listener that came over an exec itself).
	 */
	bool share_region, share_imported;
	bool truncated; /* more connections than one exec hands over */
	bool short_of_memory;
};

static void stop_kept_listener(int fd, struct sock *sock, void *arg)
{
	struct handover_walk *w = arg;

	if (!__atomic_load_n(&sock->listen_id, __ATOMIC_ACQUIRE) ||
	    !kept(fd, sock, &w->how))
		return;
	handshake_unlisten(sock, true);
	w->listening = true;
}

static void hand_over(const struct roceshim_stats_endpoint *source,
		      uint16_t port, void *arg)
{
	struct handover_walk *w = arg;
	struct exec_handover_entry *e;
	size_t room;

	if (w->list.count == EXEC_HANDOVER_MAX) {
		w->truncated = true;
		return;
	}
	if (w->list.count == w->room) {
		room = w->room ? 2 * w->room : 16;
		if (room > EXEC_HANDOVER_MAX)
			room = EXEC_HANDOVER_MAX;
		e = realloc(w->list.entries, room * sizeof(*e));
		if (!e) {
			w->short_of_memory = true;
			return;
		}
		w->list.entries = e;
		w->room = room;
	}
	e = &w->list.entries[w->list.count++];
	e->source = *source;
	e->local_port = port;
	e->claimed = false;
}

/* Whether key is listed already (a listener has several fds), or now. */
static bool listed_before(struct handover_walk *w, const void *key)
{
	const void **keys;
	size_t i;

	for (i = 0; i < w->key_count; i++)
		if (w->keys[i] == key)
			return true;
	keys = realloc(w->keys, (w->key_count + 1) * sizeof(*keys));
	if (keys) {
		keys[w->key_count++] = key;
		w->keys = keys;
	}
	return false;
}

static void list_kept_listener(int fd, struct sock *sock, void *arg)
{
	struct handover_walk *w = arg;
	const void *key;

	if (!__atomic_load_n(&sock->orphans, __ATOMIC_ACQUIRE) ||
	    !kept(fd, sock, &w->how))
		return;
	key = __atomic_load_n(&sock->orphans_key, __ATOMIC_RELAXED);
	if (key && !listed_before(w, key))
		handshake_pending_each(key, hand_over, w);
}

/*
 * A kept listener whose CM listener stays with another process: its
 * owner's, or, for a spawn, this one's.
 */
static void note_foreign_listener(int fd, struct sock *sock, void *arg)
{
	struct handover_walk *w = arg;
	bool imported = __atomic_load_n(&sock->imported, __ATOMIC_ACQUIRE);

	/* Listeners first: kept() asks the kernel. */
	if (!imported && !__atomic_load_n(&sock->listen_id, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&sock->orphans, __ATOMIC_ACQUIRE))
		return;
	if (!kept(fd, sock, &w->how))
		return;
	if (imported)
		w->share_imported = true;
	else
		w->share_region = w->how.spawn_dups || !handshake_running();
}

/*
 * vars (count of them) first in envp, with roceshim preloaded; envp if it
 * cannot be, the vars then freed and the exported region closed.
 */
static char **env_with(char *const envp[], char *vars[], size_t count)
{
	char **env = NULL;
	Dl_info self;
	size_t i;

	if (!count)
		return (char **)envp;
	if (!dladdr((void *)track_exec, &self))
		self.dli_fname = NULL;
	env = exec_handover_env(envp, vars, count, self.dli_fname);
	if (env)
		return env;
	for (i = 0; i < count; i++)
		free(vars[i]);
	share_export_close();
	log_warn("out of memory: the exec hands no RDMA connection that waits "
		 "for accept() to the new program");
	return (char **)envp;
}

/* The variable that hands w's connections over; NULL if none. */
static char *handover_var(struct handover_walk *w)
{
	char *var;

	if (w->truncated)
		log_warn("more than %d RDMA connections wait for accept(): "
			 "the exec resets those beyond",
			 EXEC_HANDOVER_MAX);
	if (!w->list.count)
		return NULL;
	w->list.pid = getpid();
	w->list.deadline_ms = clock_ms() + EXEC_HANDOVER_MS;
	var = exec_handover_encode(&w->list);
	if (!var || w->short_of_memory)
		log_warn("out of memory: RDMA connections that wait for "
			 "accept() are reset by the exec");
	else
		log_info("the exec hands %zu RDMA connections that wait for "
			 "accept() to the new program",
			 w->list.count);
	return var;
}

/*
 * The environment that gives the new image what w found: the connections
 * to hand over, and the share region of a kept listener whose CM
 * listener stays with another process.
 */
static char **walk_env(char *const envp[], struct handover_walk *w)
{
	char *vars[2];
	size_t count = 0;

	vars[count] = handover_var(w);
	if (vars[count])
		count++;
	if (w->share_region || w->share_imported) {
		vars[count] = share_export(w->share_imported);
		if (vars[count])
			count++;
	}
	return env_with(envp, vars, count);
}

char **track_exec(char *const envp[])
{
	struct handover_walk w = { .how = { .cause = ROCESHIM_DOWNGRADE_EXEC,
					    .exec = true } };
	char **env;

	if (!may_hand_over()) {
		shim_vfork_exec_ready();
		return (char **)envp;
	}
	/*
	 * Only the process that serves the handshakes took any: a fork
	 * child's pending connections are its owner's.
	 */
	if (handshake_running()) {
		fd_table_for_each(stop_kept_listener, &w);
		if (w.listening)
			handshake_quiesce((int)shim_config.connect_timeout_ms +
					  1000);
		/* Also those of an exec that failed before. */
		fd_table_for_each(list_kept_listener, &w);
	}
	fd_table_for_each(note_foreign_listener, &w);
	fd_table_for_each(leave, &w.how);
	conn_closing_drain();
	env = walk_env(envp, &w);
	share_export_inherit();
	free(w.list.entries);
	free(w.keys);
	shim_vfork_exec_ready();
	return env;
}

void track_exec_failed(char *const envp[], char **env)
{
	int err = errno;

	share_export_close();
	if (env != (char **)envp)
		exec_handover_env_free(env);
	errno = err;
}

static void note_rdma_state(int fd, struct sock *sock, void *arg)
{
	bool *found = arg;

	(void)fd;
	if (__atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE) ||
	    sock->listen_id || sock->imported)
		*found = true;
}

bool track_vfork_safe(void)
{
	bool found = false;

	if (may_hand_over())
		fd_table_for_each(note_rdma_state, &found);
	return !found;
}

void track_spawn(void)
{
	struct leaving how = { .cause = ROCESHIM_DOWNGRADE_EXEC,
			       .spawn_dups = true };

	if (may_have_rdma())
		fd_table_for_each(leave, &how);
}

char **track_spawn_env(char *const envp[])
{
	struct handover_walk w = { .how = { .cause = ROCESHIM_DOWNGRADE_EXEC,
					    .spawn_dups = true } };
	char **env = (char **)envp;
	int err = errno;

	if (!may_hand_over())
		return env;
	fd_table_for_each(note_foreign_listener, &w);
	fd_table_for_each(leave, &w.how);
	env = walk_env(envp, &w);
	errno = err;
	return env;
}

void track_spawn_done(char *const envp[], char **env)
{
	track_exec_failed(envp, env);
}

static void connect_before_fork(int fd, struct sock *sock, void *arg)
{
	if (__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE) &&
	    kept(fd, sock, arg))
		connector_share(sock);
}

/*
 * Whether this thread's fork began with a connect in the background: the
 * child's memory may say none is, its copy of the descriptor table still
 * holding one's descriptors (connector_fork_child_release()).
 */
static __thread bool connecting_at_fork;

void FORK_CODE track_fork_prepare(bool for_exec)
{
	/* A child that only execs keeps no fd with FD_CLOEXEC. */
	struct leaving how = { .cause = ROCESHIM_DOWNGRADE_FORK,
			       .all = !for_exec };
	int err = errno;

	connecting_at_fork = shim_tracking() && connector_any_pending();
	if (connecting_at_fork)
		fd_table_for_each(connect_before_fork, &how);
	errno = err;
}

static void connect_in_child(int fd, struct sock *sock, void *arg)
{
	(void)arg;
	if (__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE))
		connector_fork_child_release(sock, fd);
}

void FORK_CODE track_fork_child(bool fds_shared)
{
	int err = errno;

	/* Or one began while the fork's handlers ran. */
	if (!fds_shared && (connecting_at_fork || connector_any_pending()))
		fd_table_for_each(connect_in_child, NULL);
	errno = err;
}

void track_daemon(void)
{
	struct leaving how = { .cause = ROCESHIM_DOWNGRADE_FORK, .all = true };

	if (!may_have_rdma())
		return;
	fd_table_for_each(leave, &how);
	conn_closing_drain();
}

/* For a change of credentials: the CM listeners go first. */
static void give_up_listener(int fd, struct sock *sock, void *arg)
{
	(void)fd;
	(void)arg;
	if (__atomic_load_n(&sock->listen_id, __ATOMIC_ACQUIRE))
		handshake_unlisten(sock, true);
}

/*
 * Then, the handshakes under way over, what is on RDMA moves.  A connect
 * in the background ends first, on TCP or on RDMA, so that leave() finds
 * its connection.
 */
static void give_up_rdma(int fd, struct sock *sock, void *arg)
{
	if (__atomic_load_n(&sock->connector, __ATOMIC_ACQUIRE))
		connector_share(sock);
	leave(fd, sock, arg);
}

/*
 * A socket dup'd onto fd 0, 1 or 2 is read and written by libc's stdin,
 * stdout and stderr, whose calls stay inside libc where no wrapper sees
 * them: it moves to its kernel socket.
 */
static void std_stream(int fd)
{
	struct leaving how = { .cause = ROCESHIM_DOWNGRADE_STDIO, .all = true };
	struct sock *sock;

	if (!may_have_rdma())
		return;
	sock = shim_lookup(fd);
	if (!sock)
		return;
	give_up_rdma(fd, sock, &how);
	sock_put(sock);
}

void track_option(struct sock *sock, int fd)
{
	int err = errno;
	const char *why;
	struct conn *c;

	if (__atomic_load_n(&sock->listen_id, __ATOMIC_ACQUIRE)) {
		why = listener_tcp_only(fd);
		if (why) {
			log_info("fd %d: %s: the listener stays on TCP", fd,
				 why);
			handshake_unlisten(sock, true);
			__atomic_store_n(&sock->listen_reason,
					 ROCESHIM_REASON_UNSUPPORTED,
					 __ATOMIC_RELEASE);
			stats_row_set_reason(sock_row(sock),
					     ROCESHIM_REASON_UNSUPPORTED);
		}
	} else if (upgraded_carried(sock) &&
		   (why = sockopt_tcp_only_on(fd, false))) {
		log_info("fd %d: %s: the connection moves to TCP", fd, why);
		/* A connect in the background ends first, on TCP if it can. */
		if (connector_pending(sock))
			connector_keep_tcp(sock, ROCESHIM_REASON_UNSUPPORTED);
		/*
		 * The move is started, not waited for, as setsockopt() never
		 * waits: the peer may not have accepted the connection yet,
		 * and answers only then.  One inherited across a fork is
		 * its owner's to move.
		 */
		c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);
		if (c && !conn_alive(c))
			conn_make_plain(c, ROCESHIM_DOWNGRADE_SOCKOPT);
		else if (c)
			conn_move_start(c, ROCESHIM_DOWNGRADE_SOCKOPT);
	}
	errno = err;
}

/*
 * The process gives up RDMA (policy_stop_rdma()): its CM listeners go,
 * then, the handshakes under way over, every connection on RDMA moves to
 * TCP with cause.  Leaves errno.
 */
static void give_up_all(enum roceshim_downgrade cause)
{
	struct leaving how = { .cause = cause, .all = true };

	fd_table_for_each(give_up_listener, NULL);
	handshake_quiesce((int)shim_config.connect_timeout_ms + 1000);
	fd_table_for_each(give_up_rdma, &how);
	conn_closing_drain();
}

void track_credentials_change(void)
{
	int err = errno;

	/*
	 * Only the process that serves the handshakes holds descriptors the
	 * change makes useless.  A fork child's connections and CM listeners
	 * are its owner's, who moves an inherited connection when the child
	 * uses it and hands it those its listeners took
	 * (handshake_take_pending()); the child itself makes none.
	 */
	if (!may_have_rdma() || !handshake_running() ||
	    !policy_stop_rdma(ROCESHIM_REASON_UNSUPPORTED))
		goto out;
	log_info("the process changes its credentials: the kernel refuses "
		 "its RDMA descriptors from now on, so its connections move "
		 "to TCP and new ones stay there");
	give_up_all(ROCESHIM_DOWNGRADE_CREDENTIALS);
out:
	errno = err;
}

void track_io_uring(void)
{
	struct leaving how = { .cause = ROCESHIM_DOWNGRADE_IO_URING,
			       .all = true };
	int err = errno;

	if (!policy_stop_rdma(ROCESHIM_REASON_IO_URING) || !may_have_rdma())
		goto out;
	log_info("the process sets up io_uring, which reads and writes "
		 "sockets without roceshim: its connections move to TCP and "
		 "new ones stay there (io_uring)");
	/* A fork child claims what it inherited, as at its first call. */
	if (handshake_running())
		give_up_all(ROCESHIM_DOWNGRADE_IO_URING);
	else
		fd_table_for_each(give_up_rdma, &how);
out:
	errno = err;
}

void track_spawn_dup(int fd)
{
	struct sock *sock = shim_lookup(fd);

	if (sock) {
		sock->spawn_dup = true;
		sock_put(sock);
	}
}

static void quick_end(int fd, struct sock *sock, void *arg)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);
	const int64_t *hand_over_by = arg;

	if (c)
		conn_quick_exit(c, fd, *hand_over_by);
}

void track_quick_exit(void)
{
	int64_t hand_over_by;

	if (!may_have_rdma())
		return;
	hand_over_by = conn_quick_exit_deadline();
	fd_table_for_each(quick_end, &hand_over_by);
	conn_closing_quick_exit(hand_over_by);
}

/*
 * At exit: what a fork child may still use goes over TCP, the rest ends.
 * So does a connection with a stream of libc's: libc flushes it after
 * every exit handler, this one included.
 */
static void end(int fd, struct sock *sock, void *arg)
{
	(void)arg;
	if (!sock->conn || !conn_alive(sock->conn) || conn_is_plain(sock->conn))
		return;
	if (__atomic_load_n(&sock->stdio_stream, __ATOMIC_ACQUIRE))
		conn_make_plain(sock->conn, ROCESHIM_DOWNGRADE_STDIO);
	else
		conn_exit(sock->conn, fd);
}

void track_exit(void)
{
	if (!may_have_rdma())
		return;
	fd_table_for_each(end, NULL);
	conn_closing_drain();
}

/*
 * A listener sent to another process, whose accept() cannot take the
 * connections this process's CM listener accepts: it accepts no more.
 */
static void listener_passed(int fd, struct sock *sock)
{
	log_info("fd %d: a listener sent to another process takes its new "
		 "connections over TCP",
		 fd);
	handshake_unlisten(sock, true);
}

/* A connection on RDMA sent to another process, which goes on with it. */
static void passing_connection(struct sock *sock)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	if (c && conn_alive(c) && conn_on_rdma(c))
		handshake_port_handed_over(conn_handed_over_port(c));
}

void track_fds_passed(const struct msghdr *msg)
{
	struct leaving how = { .cause = ROCESHIM_DOWNGRADE_FD_PASSED,
			       .all = true };
	struct cmsghdr *cm;
	unsigned int i, n;
	int fd;

	if (!shim_tracking() || !msg->msg_control)
		return;
	for (cm = CMSG_FIRSTHDR(msg); cm;
	     cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET ||
		    cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len < CMSG_LEN(0))
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			struct sock *sock;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(fd));
			sock = shim_lookup(fd);
			if (!sock)
				continue;
			if (__atomic_load_n(&sock->listen_id, __ATOMIC_ACQUIRE))
				listener_passed(fd, sock);
			else
				passing_connection(sock);
			leave(fd, sock, &how);
			sock_put(sock);
		}
	}
}
