/* SPDX-License-Identifier: MIT */
/*
 * roceshim-stat --check: a fabric check for the person setting up RoCE.
 *
 * Contract: check_run() reports, in plain words, what roceshim would find
 * on this host with the caller's environment: the configuration, the RDMA
 * libraries, each verbs device and port (state, link layer, active MTU
 * against its netdev's, ECN and PFC where sysfs shows them), which of the
 * host's addresses have a RoCEv2 GID, and RLIMIT_MEMLOCK against the
 * rings a connection pins.  With a peer it also resolves the rdma_cm
 * route to it, and with a port it makes one real TCP connection to it
 * through the preloaded library (a child process of this tool) and reads
 * from that child's stats whether the connection went on RDMA, or why
 * not.  It returns the exit status: 0 when RDMA can work (for that peer,
 * if one is named), 1 when it cannot.  The libraries are opened with
 * dlopen, so the check runs, and says so, on a host without them.
 */
#ifndef ROCESHIM_TOOLS_CHECK_H
#define ROCESHIM_TOOLS_CHECK_H

/* peer: NULL, "HOST", "HOST:PORT" or "[IPV6]:PORT". */
int check_run(const char *peer);

/*
 * The child's side of the peer probe (roceshim-stat --check-probe HOST
 * PORT), run with the library preloaded: connects, says "connected" or
 * the error on stdout, and holds the connection until stdin ends.
 */
int check_probe_child(const char *host, const char *port);

#endif /* ROCESHIM_TOOLS_CHECK_H */
