/* SPDX-License-Identifier: MIT */
/*
 * Socket calls on an upgraded fd, with TCP's semantics: blocking or not
 * (O_NONBLOCK, MSG_DONTWAIT), SO_RCVTIMEO and SO_SNDTIMEO, MSG_PEEK and
 * MSG_WAITALL, EPIPE with SIGPIPE unless MSG_NOSIGNAL, and the stats.
 * A call with MSG_OOB moves the connection to TCP first: urgent data
 * exists only there.  MSG_TRUNC discards what it reads (the buffer may
 * be NULL); MSG_ERRQUEUE reads the kernel socket's error queue.
 *
 * Contract: the sock has a conn.  Results are bytes or a negative errno;
 * the exported wrappers turn those into -1 and errno.
 */
#ifndef ROCESHIM_UPGRADED_H
#define ROCESHIM_UPGRADED_H

#include <sys/types.h>
#include <sys/uio.h>

#include "conn.h"
#include "connector.h"
#include "sock.h"

/*
 * Whether roceshim carries the socket's calls: an upgraded connection not
 * yet plain, or a connect in the background.
 */
static inline bool upgraded_carried(struct sock *sock)
{
	return (sock->conn && !conn_is_plain(sock->conn)) ||
	       (sock->connector && connector_pending(sock));
}

/*
 * Whether upgraded_carried() may say yes: two loads and no call, for the
 * kernel-TCP path to ask first.
 */
static inline bool upgraded_maybe(struct sock *sock)
{
	return __atomic_load_n(&sock->conn, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&sock->connector, __ATOMIC_RELAXED);
}

ssize_t upgraded_send(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags);
ssize_t upgraded_recv(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags);
/*
 * read(), readv() and preadv2(): as upgraded_recv(), but a read of
 * nothing returns 0 at once, where a recv() of nothing waits for a byte.
 */
ssize_t upgraded_read(struct sock *sock, int fd, const struct iovec *iov,
		      int iovcnt, int flags);
/* shutdown(): SHUT_WR sends FIN after the queued data. */
int upgraded_shutdown(struct sock *sock, int fd, int how);
/*
 * FIONREAD, SIOCOUTQ or SIOCOUTQNSD, as request names: the count, or
 * -ENOTCONN where the kernel socket alone has the answer (a connection
 * that has moved to it and owes it nothing).
 */
int upgraded_queue_bytes(struct sock *sock, int fd, unsigned long request);
/*
 * After a recvmsg() that read ret >= 0 bytes into msg: the control
 * messages that the kernel's would carry (MSG_CTRUNC where msg has no
 * room for them), msg_controllen their length: with SO_TIMESTAMP or
 * SO_TIMESTAMPNS on and bytes read, the receive timestamp; with TCP_INQ
 * on, TCP_CM_INQ.  errno is left as it was.
 */
void upgraded_put_control(struct sock *sock, int fd, struct msghdr *msg,
			  ssize_t ret);
/*
 * Moves sock's connection to its kernel socket (conn_make_plain()) for
 * cause; -EAGAIN while its connect is still in the background.
 */
int upgraded_make_plain(struct sock *sock, enum roceshim_downgrade cause);
/*
 * The same, and waits until what this end had sent over RDMA and its
 * peer's program had not read yet is written to the kernel socket
 * (conn_hand_over()), whether or not the socket blocks.
 */
int upgraded_hand_over(struct sock *sock, enum roceshim_downgrade cause);
/* conn_kernel_ready() of sock's connection; 0 without one. */
int upgraded_kernel_ready(struct sock *sock, int fd);
/* conn_take_error() of sock's connection; 0 without one. */
int upgraded_take_error(struct sock *sock);

#endif /* ROCESHIM_UPGRADED_H */
