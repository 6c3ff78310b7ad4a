/* SPDX-License-Identifier: MIT */
/*
 * An upgraded connection: the transport of one TCP connection, and the
 * two eventfds that stand for its readiness in the program's epoll sets
 * and poll arrays.
 *
 * Contract: once the program wants its readiness (conn_want_readiness()),
 * in_fd is readable exactly while it has data or an error to report
 * (except while it lags, see conn_serve_event()), and out_fd is writable
 * exactly while a send would not block; conn_sync() restores that after
 * anything changed the state (a completion, a read, a write).  EOF
 * is the kernel socket's to report, with its EPOLLRDHUP in the same event:
 * the peer's kernel FIN follows its RDMA FIN, which is then almost always
 * already here (the peer waits at most 200 ms for its writes; a read that
 * comes before the rest gets EAGAIN or sleeps, never a reset).  A reset is
 * the kernel socket's POLLERR or the CM's disconnect.
 * A conn inherited across fork is dead in the child: every call fails the
 * way a reset TCP connection does, and nothing touches the parent's queue
 * pair.
 */
#ifndef ROCESHIM_CONN_H
#define ROCESHIM_CONN_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "transport.h"

struct conn {
	struct rdma_cm_id *id;
	struct transport *t;
	int in_fd;
	int out_fd;
	unsigned int generation; /* conn_generation when created */
	int closing;		 /* atomic: the program has closed it */
	/*
	 * Atomic: the progress thread's epoll set, where the transport's
	 * channel goes once conn_watch() was called (-1 until then).
	 */
	int watch_epfd;
};

/* Bumped in a fork child: conns of an older generation are dead there. */
extern unsigned int conn_generation;

/* Takes ownership of id and t. */
int conn_create(struct rdma_cm_id *id, struct transport *t,
		unsigned int spin_us, size_t zerocopy_min, struct conn **out);
static inline bool conn_alive(const struct conn *c)
{
	return c->generation == conn_generation;
}

void conn_sync(struct conn *c);
/* conn_sync() if c's in_fd lags (conn_serve_event()); cheap if not. */
void conn_settle(struct conn *c);

/*
 * The program relies on c's readiness (epoll, poll, select): from now on
 * in_fd and out_fd are kept current, and the channel is armed, so that
 * its entry beside them (epoll_reg.h; poll's substituted set) wakes the
 * program's wait, which then calls conn_serve_event().  Until then
 * nothing keeps them current: a connection driven only by blocking calls
 * costs no thread hand-off and no proxy update per message.  Sticky;
 * each registration or poll calls it again to arm the channel.
 */
void conn_want_readiness(struct conn *c);

/*
 * As conn_want_readiness(), and the progress thread watches c's completions
 * too: for a waiter that the channel does not wake (a send waiting for credit
 * sleeps on out_fd) and for bytes that wait for a completion (corked).  Sticky,
 * cheap once set.
 */
void conn_watch(struct conn *c);

/*
 * c's channel has an event: take it, arm again, reap, sync the fds.
 * r (if not NULL): the readiness the fds were synced from, or on a
 * closed conn the transport's now.
 * told: the caller, an epoll_wait() with c's only registration, reports
 * c's readiness to the program itself.  Then an arrival may leave in_fd
 * unset, lagging the data, if nothing else watches in_fd: no other thread
 * is in an epoll_wait(), no poll() watches c (conn_poll_begin()) and no
 * read sleeps on it.  Whatever watches it next settles it first: the
 * program's read or write of c, conn_poll_begin(), conn_want_readiness(),
 * and every epoll_wait() that starts while some conn lags
 * (conn_epoll_wait_begin()).
 */
void conn_serve_event(struct conn *c, bool told, struct transport_readiness *r);

/*
 * Around each epoll_wait() of the program.  true: some conn's in_fd lags;
 * settle every registered conn (conn_settle()) before the wait.
 */
bool conn_epoll_wait_begin(void);
void conn_epoll_wait_end(void);
/* In a fork child: nothing lags there, and no thread waits. */
void conn_fork_child(void);
/*
 * Around each poll() or select() that watches c: begin counts the call
 * on c, then calls conn_want_readiness().
 */
void conn_poll_begin(struct conn *c);
void conn_poll_end(struct conn *c);

/*
 * Socket-like calls with send/recv flags: bytes, or a negative errno.
 * They block as the kernel socket tcp_fd says (O_NONBLOCK, MSG_DONTWAIT,
 * SO_SNDTIMEO/SO_RCVTIMEO: -EAGAIN when it runs out); a call that would
 * block polls the queue pair before it sleeps, for as long as spin.h
 * says: at most spin_us.  A read then sleeps on the completion channel,
 * which the progress thread leaves alone meanwhile.  A send that may
 * block, of a buffer of at least zerocopy_min bytes (0: none), writes
 * from that buffer, registered for the call, and returns only once those
 * writes have completed.  tcp_fd is the socket beside the queue pair:
 * its hang-up or reset ends a wait, and tells a reader that finds nothing
 * whether the peer is gone.
 */
ssize_t conn_send(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags);
ssize_t conn_recv(struct conn *c, int tcp_fd, const struct iovec *iov,
		  int iovcnt, int flags);
int conn_shutdown_write(struct conn *c);
size_t conn_readable_bytes(struct conn *c);

/*
 * The program closed the last fd: send FIN (unless abortive), and let the
 * progress thread destroy the connection once the FIN is out.
 */
void conn_close(struct conn *c, bool abortive);
/* Frees everything; for the progress thread. */
void conn_destroy(struct conn *c);

#endif /* ROCESHIM_CONN_H */
