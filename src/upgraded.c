// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "conn.h"
#include "connector.h"
#include "cuda_mem.h"
#include "log.h"
#include "real.h"
#include "sockopt.h"
#include "stats.h"
#include "upgraded.h"

/*
 * Urgent data (MSG_OOB) exists only in TCP: a call that sends or reads it
 * moves the connection to its kernel socket first, and goes there.  0, or
 * -ECONNRESET if the connection could not move (the peer is gone).
 */
static int urgent_moves(struct conn *c, int flags)
{
	return flags & MSG_OOB ? conn_make_plain(c, ROCESHIM_DOWNGRADE_URGENT)
			       : 0;
}

/*
 * A MSG_ZEROCOPY send on a socket with SO_ZEROCOPY is reported on the
 * error queue, which only the kernel's TCP fills: it moves the connection
 * to its kernel socket first, as urgent data does.  Without SO_ZEROCOPY
 * the kernel ignores the flag, and so does roceshim.
 */
static int zerocopy_moves(struct conn *c, int fd, int flags)
{
	socklen_t len = sizeof(int);
	int on = 0, err = errno;

	if (!(flags & MSG_ZEROCOPY))
		return 0;
	if (real.getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &on, &len))
		on = 0;
	errno = err;
	return on ? conn_make_plain(c, ROCESHIM_DOWNGRADE_SOCKOPT) : 0;
}

/* The kernel's sendmsg() or recvmsg() of the buffers: bytes or -errno. */
static ssize_t kernel_io(int fd, const struct iovec *iov, int iovcnt, int flags,
			 bool send)
{
	struct msghdr msg = { .msg_iov = (struct iovec *)iov,
			      .msg_iovlen = iovcnt };
	ssize_t ret = send ? real.sendmsg(fd, &msg, flags)
			   : real.recvmsg(fd, &msg, flags);

	return ret < 0 ? -errno : ret;
}

/* kernel_io() on a connection that ended on TCP, counted as TCP's. */
static ssize_t plain_io(struct sock *sock, int fd, const struct iovec *iov,
			int iovcnt, int flags, bool send)
{
	ssize_t ret = kernel_io(fd, iov, iovcnt, flags, send);

	if (ret > 0 && send)
		stats_tcp_tx(sock_row(sock), ret);
	else if (ret > 0 && !(flags & MSG_PEEK))
		stats_tcp_rx(sock_row(sock), ret);
	return ret;
}

/*
 * sock connects in the background, as a TCP connect in progress: a
 * non-blocking call fails with EAGAIN, a blocking one waits for the end,
 * at most the socket's timeout (then EAGAIN).  The connection it ended
 * with, or NULL with *ret the call's result (-EAGAIN, -EINTR, or the
 * kernel's, if it ended on TCP).
 */
static struct conn *connected(struct sock *sock, int fd,
			      const struct iovec *iov, int iovcnt, int flags,
			      bool send, ssize_t *ret)
{
	struct conn *c;

	if (real_call_nonblocking(fd, flags)) {
		*ret = -EAGAIN;
		return NULL;
	}
	*ret = connector_wait_end(
		sock,
		real_socket_timeout_ms(fd, send ? SO_SNDTIMEO : SO_RCVTIMEO));
	if (*ret == -ETIMEDOUT)
		*ret = -EAGAIN;
	if (*ret)
		return NULL;
	c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);
	if (!c)
		*ret = plain_io(sock, fd, iov, iovcnt, flags, send);
	return c;
}

/* Above every user address space Linux gives, 5-level paging included. */
#define USER_ADDRESS_END (UINT64_C(1) << 56)

/*
 * The kernel's checks of the buffers (import_iovec()), made first: each
 * length, then each range (access_ok(): a buffer that runs past the user
 * address space is EFAULT, before any byte moves).  A NULL buffer fails
 * later, where a copy would be made (conn_rdma.c).  -EINVAL, -EFAULT, 0
 * if they hold no byte, 1 if they do.
 */
static int iov_check(const struct iovec *iov, int iovcnt)
{
	int i, bytes = 0;

	if (iovcnt < 0 || iovcnt > UIO_MAXIOV)
		return -EINVAL;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX)
			return -EINVAL;
		bytes |= iov[i].iov_len != 0;
	}
	for (i = 0; i < iovcnt; i++)
		if (iov[i].iov_len > USER_ADDRESS_END ||
		    (uint64_t)(uintptr_t)iov[i].iov_base >
			    USER_ADDRESS_END - iov[i].iov_len)
			return -EFAULT;
	return bytes;
}

static void count_bytes(struct sock *sock, ssize_t bytes, bool send,
			bool kernel)
{
	if (send && kernel)
		stats_tcp_tx(sock_row(sock), bytes);
	else if (send)
		stats_rdma_tx(sock_row(sock), bytes);
	else if (kernel)
		stats_tcp_rx(sock_row(sock), bytes);
	else
		stats_rdma_rx(sock_row(sock), bytes);
}

static ssize_t send_or_recv(struct sock *sock, struct conn *c, int fd,
			    const struct iovec *iov, int iovcnt, int flags,
			    bool send)
{
	bool kernel;
	ssize_t n = send ? conn_send(c, fd, iov, iovcnt, flags, &kernel)
			 : conn_recv(c, fd, iov, iovcnt, flags, &kernel);

	if (n > 0)
		count_bytes(sock, n, send, kernel);
	return n;
}

/*
 * A blocking send, or a blocking MSG_WAITALL read, that the connection's
 * move to TCP cut short after done bytes: the rest goes on over TCP, as
 * the kernel's call would have gone on.  The bytes of the rest it moved;
 * an error or the end of the stream ends it quietly, as the kernel's call
 * returns what it moved before one (tcp_sendmsg(), tcp_recvmsg()).
 */
static ssize_t rest_over_tcp(struct sock *sock, struct conn *c, int fd,
			     const struct iovec *iov, int iovcnt, int flags,
			     size_t done, bool send)
{
	struct iovec part;
	ssize_t n, more = 0;
	int i = 0;

	if (!conn_moving_or_moved(c) || real_call_nonblocking(fd, flags))
		return 0;
	while (i < iovcnt && done >= iov[i].iov_len)
		done -= iov[i++].iov_len;
	if (i < iovcnt && done) {
		part.iov_base = (char *)iov[i].iov_base + done;
		part.iov_len = iov[i].iov_len - done;
		n = send_or_recv(sock, c, fd, &part, 1, flags, send);
		if (n <= 0 || (size_t)n < part.iov_len)
			return n > 0 ? n : 0;
		more = n;
		i++;
	}
	if (i < iovcnt) {
		n = send_or_recv(sock, c, fd, iov + i, iovcnt - i, flags, send);
		if (n > 0)
			more += n;
	}
	return more;
}

ssize_t upgraded_send(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);
	bool kernel;
	ssize_t ret;

	ret = iov_check(iov, iovcnt);
	if (ret < 0)
		return ret;
	if (!c) {
		c = connected(sock, fd, iov, iovcnt, flags, true, &ret);
		if (!c)
			return ret;
	}
	ret = urgent_moves(c, flags);
	if (!ret)
		ret = zerocopy_moves(c, fd, flags);
	/*
	 * A connection whose peer closed or reset does not move: conn_send()
	 * gives its kernel socket the send, flags and all, as any send then.
	 */
	if (ret == -ECONNRESET && conn_peer_gone(c))
		ret = 0;
	if (ret)
		return ret;
	cuda_mem_call_begin();
	ret = conn_send(c, fd, iov, iovcnt, flags, &kernel);

	if (ret > 0) {
		count_bytes(sock, ret, true, kernel);
		if (!kernel)
			ret += rest_over_tcp(sock, c, fd, iov, iovcnt, flags,
					     ret, true);
		cuda_mem_count(true, iov, iovcnt, ret);
		return ret;
	}
	if (ret == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	if (ret == -EAGAIN)
		stats_credit_stall(sock_row(sock));
	else if (ret < 0 && ret != -EINTR)
		stats_error(sock_row(sock));
	return ret;
}

/* upgraded_recv(), its buffers checked. */
static ssize_t recv_checked(struct sock *sock, int fd, const struct iovec *iov,
			    int iovcnt, int flags)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);
	bool kernel;
	ssize_t ret;

	/*
	 * MSG_ERRQUEUE reads the kernel socket's error queue, which the RDMA
	 * stream never fills: TCP's answer, EAGAIN while it is empty.
	 */
	if (flags & MSG_ERRQUEUE)
		return kernel_io(fd, iov, iovcnt, flags, false);
	if (!c) {
		c = connected(sock, fd, iov, iovcnt, flags, false, &ret);
		if (!c)
			return ret;
	}
	ret = urgent_moves(c, flags);
	if (ret)
		return ret;
	cuda_mem_call_begin();
	ret = conn_recv(c, fd, iov, iovcnt, flags, &kernel);

	if (ret > 0 && !(flags & MSG_PEEK)) {
		count_bytes(sock, ret, false, kernel);
		if (!kernel &&
		    (flags & (MSG_WAITALL | MSG_TRUNC)) == MSG_WAITALL)
			ret += rest_over_tcp(sock, c, fd, iov, iovcnt, flags,
					     ret, false);
		if (!(flags & MSG_TRUNC))
			cuda_mem_count(false, iov, iovcnt, ret);
	} else if (ret < 0 && ret != -EAGAIN && ret != -EINTR) {
		stats_error(sock_row(sock));
	}
	if (ret <= 0 && ret != -EAGAIN)
		log_debug("fd %d: rdma read ends: %s", fd,
			  ret ? strerror((int)-ret) : "EOF");
	return ret;
}

ssize_t upgraded_recv(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags)
{
	int ret = iov_check(iov, iovcnt);

	return ret < 0 ? ret : recv_checked(sock, fd, iov, iovcnt, flags);
}

ssize_t upgraded_read(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags)
{
	int ret = iov_check(iov, iovcnt);

	/* A read of nothing returns 0 at once on a socket (sock_read_iter()).
	 */
	return ret <= 0 ? ret : recv_checked(sock, fd, iov, iovcnt, flags);
}

int upgraded_shutdown(struct sock *sock, int fd, int how)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	return c ? conn_shutdown(c, fd, how) : -ENOTCONN;
}

int upgraded_make_plain(struct sock *sock, enum roceshim_downgrade cause)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	return c ? conn_make_plain(c, cause) : -EAGAIN;
}

int upgraded_hand_over(struct sock *sock, enum roceshim_downgrade cause)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	return c ? conn_hand_over(c, cause) : -EAGAIN;
}

int upgraded_kernel_ready(struct sock *sock, int fd)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	return c ? conn_kernel_ready(c, fd) : 0;
}

int upgraded_take_error(struct sock *sock)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	return c ? conn_take_error(c) : 0;
}

int upgraded_queue_bytes(struct sock *sock, int fd, unsigned long request)
{
	switch (request) {
	case FIONREAD:
		return conn_readable_bytes(sock->conn, fd);
	case SIOCOUTQ:
		return conn_unacked_bytes(sock->conn, fd, false);
	case SIOCOUTQNSD:
		return conn_unacked_bytes(sock->conn, fd, true);
	default:
		return -ENOTCONN;
	}
}

/*
 * An option's value as the kernel socket has it, kept in *cache (-1:
 * not read yet): read once with read_option(fd), and a setsockopt()
 * meanwhile has the last word.  errno may change.
 */
static int option_once(int *cache, int fd, int (*read_option)(int fd))
{
	int value = __atomic_load_n(cache, __ATOMIC_RELAXED);
	int unknown = -1;

	if (value >= 0)
		return value;
	value = read_option(fd);
	if (!__atomic_compare_exchange_n(cache, &unknown, value, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		value = unknown;
	return value;
}

/* TCP_INQ as the kernel has it; off where it cannot say. */
static int tcp_inq_of(int fd)
{
	socklen_t len = sizeof(int);
	int on;

	if (real.getsockopt(fd, IPPROTO_TCP, TCP_INQ, &on, &len))
		on = 0;
	return on;
}

/* Where a recvmsg()'s control messages go, as the kernel fills them. */
struct control_out {
	struct msghdr *msg;
	unsigned char *at;
	size_t room, used;
};

/*
 * As the kernel's put_cmsg(): one control message, truncated to the room
 * left (MSG_CTRUNC), or none where not even its header fits.
 */
static void put_control(struct control_out *out, int level, int type,
			const void *data, size_t len)
{
	struct cmsghdr head = { .cmsg_level = level, .cmsg_type = type };
	size_t whole = CMSG_LEN(len), space = CMSG_SPACE(len);

	if (!out->at || out->room < sizeof(head)) {
		out->msg->msg_flags |= MSG_CTRUNC;
		return;
	}
	if (out->room < whole) {
		out->msg->msg_flags |= MSG_CTRUNC;
		whole = out->room;
	}
	head.cmsg_len = whole;
	memcpy(out->at, &head, sizeof(head));
	memcpy(CMSG_DATA((struct cmsghdr *)out->at), data,
	       whole - sizeof(head));
	if (space > out->room)
		space = out->room;
	out->at += space;
	out->room -= space;
	out->used += space;
}

/*
 * The receive timestamp of kernel TCP's tcp_recv_timestamp(), in the
 * form the socket asked for: the time of the call, which is when the
 * bytes were taken from the ring (the kernel's is when they arrived).
 */
static void put_rx_timestamp(struct control_out *out, int form)
{
	struct timespec now;
	int64_t wide[2];

	clock_gettime(CLOCK_REALTIME, &now);
	switch (form) {
	case SO_TIMESTAMP_OLD: {
		struct timeval tv = { .tv_sec = now.tv_sec,
				      .tv_usec = now.tv_nsec / 1000 };

		put_control(out, SOL_SOCKET, form, &tv, sizeof(tv));
		break;
	}
	case SO_TIMESTAMPNS_OLD:
		put_control(out, SOL_SOCKET, form, &now, sizeof(now));
		break;
	case SO_TIMESTAMP_NEW:
		wide[0] = now.tv_sec;
		wide[1] = now.tv_nsec / 1000;
		put_control(out, SOL_SOCKET, form, wide, sizeof(wide));
		break;
	case SO_TIMESTAMPNS_NEW:
		wide[0] = now.tv_sec;
		wide[1] = now.tv_nsec;
		put_control(out, SOL_SOCKET, form, wide, sizeof(wide));
		break;
	}
}

void upgraded_put_control(struct sock *sock, int fd, struct msghdr *msg,
			  ssize_t ret)
{
	struct control_out out = { .msg = msg,
				   .at = msg->msg_control,
				   .room = msg->msg_controllen };
	int err = errno, form;

	/* As tcp_recvmsg(): the timestamp of bytes read, then TCP_INQ. */
	form = ret > 0 ? option_once(&sock->rx_timestamp, fd,
				     sockopt_rx_timestamp_on)
		       : 0;
	if (form)
		put_rx_timestamp(&out, form);
	if (option_once(&sock->tcp_inq, fd, tcp_inq_of)) {
		int inq = conn_inq_hint(
			__atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE), fd);

		put_control(&out, SOL_TCP, TCP_CM_INQ, &inq, sizeof(inq));
	}
	msg->msg_controllen = out.used;
	errno = err;
}
