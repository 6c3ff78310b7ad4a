/* SPDX-License-Identifier: MIT */
/*
 * The handshake: the RDMA side of connect, listen and accept, which
 * decides for each connection, before its first byte, RDMA or TCP.
 *
 * Protocol (docs/design.md): listen() also opens an RDMA CM listener on the
 * same address and port.  connect() first resolves an RDMA route to the
 * peer, binds the TCP socket to the route's source address, and sends a
 * CM connect request whose hello names that TCP source and the client's
 * ring.  The server accepts with its own ring and remembers the connection
 * under the declared TCP source; the client then makes the real TCP
 * connection, and the server's accept() finds it by its peer address.
 * Both ends decide before the first byte; anything short of a completed
 * handshake leaves the connection on TCP with a reason.
 *
 * Contract: each entry point takes the configuration it follows.  The
 * first one to need RDMA starts the CM event channel and the progress
 * thread; if they cannot start, every connection stays on TCP
 * (unsupported).  handshake_connect() blocks for at most the connect
 * timeout; a peer whose handshake timed out, and a port whose listener
 * took no RDMA handshake once the TCP connection was up, are remembered
 * (negative cache) so that the next connection to it goes straight to
 * TCP.  In a fork child nothing here touches the parent's RDMA
 * resources: new connections stay on TCP.
 */
#ifndef ROCESHIM_HANDSHAKE_H
#define ROCESHIM_HANDSHAKE_H

#include <stdbool.h>
#include <sys/socket.h>

#include <roceshim/stats.h>

#include "config.h"
#include "conn.h"
#include "sock.h"

/*
 * A refusal because nothing listened on the CM beside the port
 * (*no_listener): a server without roceshim, or one that opens its
 * listener just now (PyTorch's TCPStore starts while its clients retry).
 * If the TCP connect then succeeds, the client asks once more with
 * HANDSHAKE_CONNECTED: a roceshim server takes that connection over
 * RDMA if accept() has not taken it yet (tcp_diag.h), and refuses it
 * otherwise.
 */
#define HANDSHAKE_CONNECTED 1u

/*
 * How long a blocking connect goes on after a signal handler interrupted
 * it where the kernel would not restart it, in ms (handshake_client.c).
 */
int handshake_signal_grace_ms(void);

/*
 * The client handshake, before the real connect() (or, with
 * HANDSHAKE_CONNECTED, after it): returns ROCESHIM_REASON_NONE with *out
 * set when the connection is upgraded, otherwise the reason it stays on
 * TCP; ROCESHIM_REASON_ABANDONED when a signal handler interrupted it
 * where the kernel's connect would fail with EINTR (sig_restart.h).
 */
enum roceshim_reason handshake_connect(const struct config *cfg, int fd,
				       const struct sockaddr *addr,
				       socklen_t len, unsigned int flags,
				       struct conn **out, bool *no_listener);

/*
 * The client handshake in the background, for a non-blocking connect():
 * done(arg, reason, c, no_listener) is called on the progress thread once
 * it ends, with the upgraded connection (started) when reason is
 * ROCESHIM_REASON_NONE.
 * fd (the caller's own dup of the socket) must stay open until then.
 * Returns ROCESHIM_REASON_NONE with *out set, or the reason it stopped at
 * once (done is not called then).  handshake_dial_cancel(): the caller no
 * longer wants it; done is still called, soon.
 */
struct dial;
typedef void handshake_dial_done_fn(void *arg, enum roceshim_reason reason,
				    struct conn *c, bool no_listener);
enum roceshim_reason handshake_dial(const struct config *cfg, int fd,
				    const struct sockaddr *addr, socklen_t len,
				    unsigned int flags,
				    handshake_dial_done_fn *done, void *arg,
				    struct dial **out);
void handshake_dial_cancel(struct dial *d);

/*
 * Opens the CM listener beside TCP listener fd, with at least its listen
 * backlog.  port_shared: fd has SO_REUSEPORT, and this process holds the
 * port for the listeners that may share it (reuseport.h).  Failure means
 * TCP only, for the reason returned: unsupported where this process
 * serves no RDMA handshake (a fork child), resource where the CM refused
 * the listener, reuseport where the port is not this process's to hold.
 */
enum roceshim_reason handshake_listen(const struct config *cfg,
				      struct sock *sock, int fd, int backlog,
				      bool port_shared);
/*
 * The CM listener goes.  listener_stays: the TCP listener goes on
 * listening, so the connections its CM listener took still wait for
 * accept() (sock->orphans, sock->orphans_key) a while; otherwise they go
 * with it (unless the process has forked: a prefork worker may still
 * accept them).
 */
void handshake_unlisten(struct sock *sock, bool listener_stays);
/*
 * Calls fn with the client's TCP source and the listener's port of each
 * connection that the CM listener of sock->orphans_key took, established,
 * and that accept() has not taken yet.  fn must not call this module.
 */
void handshake_pending_each(const void *orphans_key,
			    void (*fn)(const struct roceshim_stats_endpoint *,
				       uint16_t, void *),
			    void *arg);

/*
 * The upgraded connection whose client declared TCP source `peer` to the
 * listener on local_port, which accept() returned as fd, or
 * NULL (a peer without roceshim, or one whose handshake did not
 * complete).  Waits, at most the connect timeout, for a handshake still
 * in flight.  In the first second of a listener (listen_since_ms, of
 * clock_ms(); -1 where its CM listener is gone), a connection without
 * one waits up to 250 ms for a client's second request (the listen race
 * above).  A connection that another process accepted on the CM (in a
 * fork child, the owner's; one an exec handed over, exec_handover.h) is
 * moved to TCP before its first byte, and *moved says why.
 */
struct conn *handshake_take_pending(const struct config *cfg,
				    int64_t listen_since_ms,
				    const struct roceshim_stats_endpoint *peer,
				    uint16_t local_port, int fd,
				    enum roceshim_downgrade *moved);
/*
 * Another process takes over a connection that this one accepted on port
 * and never wrote to (conn_handed_over_port(); 0: none): a descendant
 * asked for it, goes on with it after this one closed it, or it was sent
 * with SCM_RIGHTS.  The server hands its connections over, so its port
 * refuses handshakes for a while (reason handoff), and they start on TCP
 * instead of moving there.
 */
void handshake_port_handed_over(uint16_t port);
/*
 * As handshake_take_pending(), for a listener whose CM listener is
 * another process's (sock->imported): the connection, if that process
 * took it on the CM, moves to TCP before its first byte.
 */
void handshake_take_inherited(const struct config *cfg,
			      const struct roceshim_stats_endpoint *peer,
			      uint16_t local_port, int fd,
			      enum roceshim_downgrade *moved);
/*
 * As handshake_take_inherited(), for a listener that shares its port
 * (SO_REUSEPORT) with another listener's CM listener, whose region this
 * process joined (reuseport.h).
 */
void handshake_take_joined(const struct config *cfg,
			   const struct roceshim_stats_endpoint *peer,
			   uint16_t local_port, int fd,
			   enum roceshim_downgrade *moved);
/* Whether this process serves RDMA handshakes (a fork child does not). */
bool handshake_running(void);
/*
 * After policy_stop_rdma(), or once the CM listeners that matter are gone
 * (an exec): waits, at most timeout_ms, until no handshake
 * of this process is under way, so that each has ended on TCP or on RDMA
 * before the caller moves what is on RDMA.
 */
void handshake_quiesce(int timeout_ms);

/*
 * Fork child: RDMA is off from now on, and the child's copies of the CM
 * channels are closed, unless it shares the parent's descriptor table
 * (fds_shared: a clone with CLONE_FILES), where they are the parent's.
 */
void handshake_fork_child(bool fds_shared);

#endif /* ROCESHIM_HANDSHAKE_H */
