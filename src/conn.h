/* SPDX-License-Identifier: MIT */
/*
 * An upgraded connection: the transport of one TCP connection, its
 * readiness (readiness.h), and the TCP-like blocking calls on it.
 *
 * Contract: EOF is the kernel socket's to report, with its EPOLLRDHUP in
 * the same event: the peer's kernel FIN follows its RDMA FIN, which is
 * then almost always already here (the peer waits at most 200 ms for its
 * writes; a read that comes before the rest gets EAGAIN or sleeps, never
 * a reset).  A reset is the kernel socket's POLLERR or the CM's
 * disconnect.  A connection inherited across fork is dead in the child:
 * every call fails the way a reset TCP connection does, and nothing
 * touches the parent's queue pair.
 */
#ifndef ROCESHIM_CONN_H
#define ROCESHIM_CONN_H

#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "readiness.h"
#include "transport.h"

struct conn;

/*
 * Takes ownership of id and t.  spin_us: how long a blocking call polls
 * (spin.h); zerocopy_min: the smallest send that goes out of the
 * program's buffer (0: none).
 */
int conn_create(struct rdma_cm_id *id, struct transport *t,
		unsigned int spin_us, size_t zerocopy_min, struct conn **out);
bool conn_alive(const struct conn *c);
struct readiness *conn_readiness(struct conn *c);

/* The handshake completed: the connection may be watched from now on. */
void conn_start(struct conn *c);

/*
 * Socket-like calls with send/recv flags: bytes, or a negative errno.
 * They block as the kernel socket tcp_fd says (O_NONBLOCK, MSG_DONTWAIT,
 * SO_SNDTIMEO/SO_RCVTIMEO: -EAGAIN when it runs out); a call that would
 * block polls the queue pair before it sleeps, for as long as spin.h
 * says.  A send that may block, of a buffer of at least zerocopy_min
 * bytes, writes from that buffer, registered for the call, and returns
 * only once those writes have completed.  tcp_fd is the socket beside the
 * queue pair: its reset tells a call that would block that the peer is
 * gone.
 */
ssize_t conn_send(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags);
ssize_t conn_recv(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags);
int conn_shutdown_write(struct conn *c);
size_t conn_readable_bytes(struct conn *c);

/* The CM says the peer's queue pair is gone. */
void conn_peer_gone(struct conn *c);

/*
 * The program closed the last fd: send FIN (unless abortive), and let the
 * progress thread destroy the connection once the FIN is out (at most
 * 2 s).  conn_reap_tick() is that thread's tick hook.
 */
void conn_release(struct conn *c, bool abortive);
bool conn_reap_tick(void);

/*
 * For a connection that never reached the program (a handshake that
 * failed after conn_create(), or one accept() never claimed): closes it
 * abortively, disconnects its queue pair and frees it, at once.
 */
void conn_discard(struct conn *c);

#endif /* ROCESHIM_CONN_H */
