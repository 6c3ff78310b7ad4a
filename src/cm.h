/* SPDX-License-Identifier: MIT */
/*
 * The connection manager: the RDMA side of connect, listen and accept, and
 * the progress thread that serves every upgraded connection.
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
 * Contract: cm_connect() blocks for at most the connect timeout; a peer
 * whose handshake timed out is remembered (negative cache) so that the
 * next connection to it goes straight to TCP.  In a fork child nothing here
 * touches the parent's RDMA resources: new connections stay on TCP.
 */
#ifndef ROCESHIM_CM_H
#define ROCESHIM_CM_H

#include <sys/socket.h>

#include <roceshim/stats.h>

#include "config.h"
#include "conn.h"
#include "sock.h"

/* The configuration to follow; until it is given, RDMA stays off. */
void cm_configure(const struct config *cfg);

/*
 * The client handshake, before the real connect(): returns
 * ROCESHIM_REASON_NONE with *out set when the connection is upgraded,
 * otherwise the reason it stays on TCP.
 */
enum roceshim_reason cm_connect(int fd, const struct sockaddr *addr,
				socklen_t len, struct conn **out);

/* Opens the CM listener beside TCP listener fd; failure means TCP only. */
void cm_listen(struct sock *sock, int fd);
void cm_unlisten(struct sock *sock);

/*
 * The upgraded connection whose client declared TCP source `peer` to the
 * listener on local_port, or NULL (a peer without roceshim, or one whose
 * handshake did not complete).  Waits, at most the connect timeout, for a
 * handshake still in flight.
 */
struct conn *cm_take_pending(const struct roceshim_stats_endpoint *peer,
			     uint16_t local_port);

/* The program closed c: FIN, then destruction by the progress thread. */
void cm_release(struct conn *c, bool abortive);

/* Fork child: RDMA is off from now on; inherited conns are dead. */
void cm_fork_child(void);

#endif /* ROCESHIM_CM_H */
