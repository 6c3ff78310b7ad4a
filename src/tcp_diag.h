/* SPDX-License-Identifier: MIT */
/*
 * What the kernel knows of one TCP connection, asked through sock_diag
 * (NETLINK_SOCK_DIAG, an exact lookup by its four-tuple; see
 * sock_diag(7)): whether it waits in a listener's queue, not yet taken
 * by accept(), which no call on the listener can tell without taking it.
 *
 * Contract: thread safe, no state; a failure to ask is an error, never a
 * guess.
 */
#ifndef ROCESHIM_TCP_DIAG_H
#define ROCESHIM_TCP_DIAG_H

#include <roceshim/stats.h>

/*
 * The established TCP connection from remote to local: 1 while it waits
 * for accept() (no socket file yet), 0 once accepted or if there is no
 * such connection, or a negative errno when the kernel cannot be asked.
 */
int tcp_diag_unaccepted(const struct roceshim_stats_endpoint *local,
			const struct roceshim_stats_endpoint *remote);

#endif /* ROCESHIM_TCP_DIAG_H */
