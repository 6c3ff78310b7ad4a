/* SPDX-License-Identifier: MIT */
/*
 * What the kernel knows of one TCP connection, asked through sock_diag
 * (NETLINK_SOCK_DIAG, an exact lookup by its four-tuple; see
 * sock_diag(7)): whether it waits in a listener's queue, not yet taken
 * by accept(), which no call on the listener can tell without taking it,
 * and whether its handshake is stuck there.  And, by a dump, which
 * sockets listen on a port.
 *
 * Contract: thread safe, no state; a failure to ask is an error, never a
 * guess.
 */
#ifndef ROCESHIM_TCP_DIAG_H
#define ROCESHIM_TCP_DIAG_H

#include <stdbool.h>
#include <stdint.h>

#include <roceshim/stats.h>

/* Where the kernel's listener holds the TCP connection from remote. */
enum tcp_diag_stage {
	TCP_DIAG_ABSENT,    /* no such connection in its queues */
	TCP_DIAG_HANDSHAKE, /* its handshake waits for the client's ACK */
	/*
	 * Its handshake has waited a retransmission of the SYN-ACK: the
	 * client's ACK was lost, or the listener's full accept queue
	 * dropped it.
	 */
	TCP_DIAG_HANDSHAKE_STALLED,
	TCP_DIAG_QUEUED,   /* established, waiting for accept() */
	TCP_DIAG_ACCEPTED, /* established, with a socket file */
};

/*
 * The stage of the TCP connection from remote to local (an enum
 * tcp_diag_stage), or a negative errno when the kernel cannot be asked
 * or cannot tell (-ENOENT: nothing listens on local's port, or the
 * kernel lacks tcp_diag).
 */
int tcp_diag_stage(const struct roceshim_stats_endpoint *local,
		   const struct roceshim_stats_endpoint *remote);

/*
 * How many TCP sockets listen on port in this network namespace, at any
 * address, besides the one whose inode is except_inode (0: none) and
 * those whose inode known() knows (known may be NULL); or a negative
 * errno when the kernel cannot be asked.
 */
int tcp_diag_listeners(uint16_t port, uint64_t except_inode,
		       bool (*known)(uint64_t inode));

#endif /* ROCESHIM_TCP_DIAG_H */
