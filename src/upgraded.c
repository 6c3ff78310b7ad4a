// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"
#include "log.h"
#include "real.h"
#include "stats.h"
#include "upgraded.h"

static bool nonblocking(int fd, int flags)
{
	int fl;

	if (flags & MSG_DONTWAIT)
		return true;
	fl = real.fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* SO_RCVTIMEO or SO_SNDTIMEO in milliseconds; -1 for none. */
static int timeout_ms(int fd, int name)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	long long ms;

	if (real.getsockopt(fd, SOL_SOCKET, name, &tv, &len) ||
	    (!tv.tv_sec && !tv.tv_usec))
		return -1;
	ms = tv.tv_sec * 1000ll + (tv.tv_usec + 999) / 1000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

ssize_t upgraded_send(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags)
{
	bool nonblock = nonblocking(fd, flags);
	ssize_t ret;

	ret = conn_send(sock->conn, fd, iov, iovcnt, nonblock,
			nonblock ? 0 : timeout_ms(fd, SO_SNDTIMEO));
	if (ret > 0) {
		stats_rdma_tx(sock_row(sock), ret);
		return ret;
	}
	if (ret == -EPIPE && !(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	if (ret == -EAGAIN)
		stats_credit_stall(sock_row(sock));
	else if (ret != -EINTR)
		stats_error(sock_row(sock));
	return ret;
}

ssize_t upgraded_recv(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags)
{
	bool nonblock = nonblocking(fd, flags);
	ssize_t ret;

	ret = conn_recv(sock->conn, fd, iov, iovcnt, flags, nonblock,
			nonblock ? 0 : timeout_ms(fd, SO_RCVTIMEO));
	if (ret > 0 && !(flags & MSG_PEEK))
		stats_rdma_rx(sock_row(sock), ret);
	else if (ret < 0 && ret != -EAGAIN && ret != -EINTR)
		stats_error(sock_row(sock));
	if (ret <= 0 && ret != -EAGAIN)
		log_debug("fd %d: rdma read ends: %s", fd,
			  ret ? strerror((int)-ret) : "EOF");
	return ret;
}

int upgraded_finish_connect(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	socklen_t len = sizeof(int);
	int err = 0, ret;

	ret = real.poll(&pfd, 1, timeout_ms);
	if (ret < 0)
		return -errno;
	if (!ret)
		return -ETIMEDOUT;
	if (real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return -errno;
	return -err;
}

int upgraded_shutdown(struct sock *sock, int how)
{
	if (how == SHUT_WR || how == SHUT_RDWR)
		return conn_shutdown_write(sock->conn);
	return 0;
}

int upgraded_readable_bytes(struct sock *sock)
{
	size_t n = conn_readable_bytes(sock->conn);

	return n > INT_MAX ? INT_MAX : (int)n;
}
