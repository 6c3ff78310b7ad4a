// SPDX-License-Identifier: MIT
#include <errno.h>
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

ssize_t upgraded_send(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags)
{
	bool kernel;
	ssize_t ret = conn_send(sock->conn, fd, iov, iovcnt, flags, &kernel);

	if (ret > 0) {
		if (kernel)
			stats_tcp_tx(sock_row(sock), ret);
		else
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
	bool kernel;
	ssize_t ret = conn_recv(sock->conn, fd, iov, iovcnt, flags, &kernel);

	if (ret > 0 && !(flags & MSG_PEEK) && kernel)
		stats_tcp_rx(sock_row(sock), ret);
	else if (ret > 0 && !(flags & MSG_PEEK))
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

int upgraded_shutdown(struct sock *sock, int fd, int how)
{
	return conn_shutdown(sock->conn, fd, how);
}

int upgraded_readable_bytes(struct sock *sock, int fd)
{
	return conn_readable_bytes(sock->conn, fd);
}
