/* SPDX-License-Identifier: MIT */
/*
 * A non-blocking connect() that may upgrade: it returns EINPROGRESS at
 * once, and the RDMA handshake, then the real TCP connect, go on in the
 * background (the progress thread).  Until both are over the socket is
 * pending: calls on it behave as on a TCP socket whose connect is in
 * progress (another connect() gives EALREADY, sends and reads EAGAIN or,
 * on a blocking socket, wait, SO_ERROR 0, poll and epoll report
 * nothing), and then it is either an upgraded connection or a plain TCP
 * socket, with the kernel's own readiness and SO_ERROR.  A refusal for
 * want of a CM listener is asked again once the TCP connection is up
 * (handshake.h), still pending.  A connect that fails at once (a refused
 * port on this host) reports its error through SO_ERROR and the next
 * connect(), as the kernel does for one that fails later.  A blocking
 * connect() interrupted in its kernel connect, past its handshake, goes
 * on the same way (connector_adopt()).
 *
 * Contract: connector_start() and connector_adopt() run in connect(); the
 * others are thread safe.  The connector belongs to its sock, which frees
 * it.
 */
#ifndef ROCESHIM_CONNECTOR_H
#define ROCESHIM_CONNECTOR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <roceshim/stats.h>

#include "config.h"
#include "sock.h"

struct connector;

/*
 * Starts the background connect of sock (fd, non-blocking) to addr.
 * true: it did (the caller returns EINPROGRESS and makes no TCP connect);
 * false: the connect goes on as a plain one, for *reason.
 */
bool connector_start(const struct config *cfg, struct sock *sock, int fd,
		     const struct sockaddr *addr, socklen_t len,
		     enum roceshim_reason *reason);

/*
 * connect() published sock's stats row: a connect already over gives it
 * its result (otherwise the end of the connect does).
 */
void connector_published(struct sock *sock);

/* sock's connect is still in the background. */
bool connector_pending(const struct sock *sock);

/* This process connected sock in the background, whether or not it ended. */
bool connector_started(const struct sock *sock);

/*
 * The error of a connect that failed at once, which SO_ERROR must report
 * (and forget); 0 if none.
 */
int connector_take_error(struct sock *sock);

/*
 * The fd a poll() waits on for sock's connect: readable once it is over.
 * It stays open until connector_wait_release(); -1 if the connect is over
 * (or not this process's), when there is nothing to wait for.  The
 * descriptor goes when the connect is over and nobody holds it.
 */
int connector_wait_hold(struct sock *sock);
void connector_wait_release(struct sock *sock);

/*
 * shutdown(how) while sock's connect is in the background.  If its kernel
 * socket has not connected yet, the connect is abandoned as the kernel
 * abandons one in progress: the kernel's own connect goes out and the
 * shutdown is applied to it at once (SO_ERROR ECONNRESET for a SYN still
 * unanswered, a half-close for a connection the kernel made at once),
 * the socket stays on kernel TCP, and true is returned (the shutdown
 * itself returns 0).  false: its TCP connection is up, and the shutdown
 * applies to the connect's result.  Returns once the connect has ended
 * (within a second).
 */
bool connector_abort(struct sock *sock, int how);

/*
 * The kernel's blocking connect of fd, after its RDMA handshake, failed
 * with EINTR (a handler without SA_RESTART): the connect goes on in the
 * kernel.  Waits for it as long as the handshake's own grace after a
 * signal (handshake_signal_grace_ms()); true if it connected by then,
 * and connect() may report success.  Its error, if it failed, is left
 * for the program to find.
 */
bool connector_settle_interrupted(int fd);

/*
 * The kernel's connect of fd, without waiting: O_NONBLOCK is set around
 * the call, since fd (or a dup of it, which shares the file flags) may be
 * blocking.  connect()'s result and errno.
 */
int connector_kernel_connect(int fd, const struct sockaddr *addr,
			     socklen_t len);

/*
 * A blocking connect whose RDMA handshake made conn, and whose kernel
 * connect a signal then interrupted (EINTR): the kernel goes on with it,
 * so the connection goes on too, in the background as a non-blocking
 * one does, and attaches once TCP connects.  false: it could not (no
 * descriptor or memory); conn is still the caller's.
 */
bool connector_adopt(const struct config *cfg, struct sock *sock, int fd,
		     const struct sockaddr *addr, socklen_t len,
		     struct conn *conn);

/*
 * A blocking call on sock while its connect is in the background waits,
 * as TCP's does, until the connect is over, or for timeout_ms (-1: no
 * limit; the socket's SO_SNDTIMEO or SO_RCVTIMEO): 0, -ETIMEDOUT, or
 * -EINTR when a signal handler interrupted the wait where the kernel
 * would not restart it.
 */
int connector_wait_end(struct sock *sock, int64_t timeout_ms);

/* The program closes the socket: the background connect stops. */
void connector_cancel(struct sock *sock);

/*
 * The program closed fd, one of sock's fds, and other (>= 0) still names
 * it: the connection is attached to other when the connect ends.
 */
void connector_fd_closed(struct sock *sock, int fd, int other);

/* The sock goes: frees its connector. */
void connector_free(struct connector *c);

/*
 * In a fork child: a connect the parent had in the background is the
 * parent's; the child's calls see its kernel socket.
 */
void connector_fork_child(void);

/* Whether this process has a connect in the background. */
bool connector_any_pending(void);

/*
 * Before another process may hold sock (a fork, an exec or spawn that
 * keeps its fd, an fd passed with SCM_RIGHTS), if its connect is in the
 * background: that process sees the kernel socket, so it must be one that
 * the kernel connects, or an upgraded connection made before it shares
 * it.  The connect is waited for, at most 3 s: one still in its RDMA
 * handshake cancels it (reason shared) and its kernel connect goes out
 * once the handshake has ended; one whose handshake completed anyway, or
 * whose TCP connect is on its way, ends upgraded, and the caller moves
 * it.
 */
void connector_share(struct sock *sock);
/*
 * The same for the program's own reason (an option only TCP has): the
 * socket stays the program's alone.
 */
void connector_keep_tcp(struct sock *sock, enum roceshim_reason why);

/*
 * In a fork child, before connector_fork_child(), for fd, a descriptor of
 * sock's, if a connect was in the background as the fork began: closes
 * the child's copies of the descriptors that connect holds, so that the
 * child's close of the socket ends it as over TCP.
 */
void connector_fork_child_release(struct sock *sock, int fd);

#endif /* ROCESHIM_CONNECTOR_H */
