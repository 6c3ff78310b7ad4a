/* SPDX-License-Identifier: MIT */
/*
 * Per-connection transport decision.
 *
 * Contract: policy_decide() returns ROCESHIM_REASON_NONE when the
 * connection may go over RDMA, otherwise the reason it stays on kernel
 * TCP.  It is deterministic for a given configuration and peer, so both
 * ends of a connection reach the same verdict from the same rules.
 */
#ifndef ROCESHIM_POLICY_H
#define ROCESHIM_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include <roceshim/stats.h>

#include "config.h"

enum roceshim_reason policy_decide(const struct config *cfg,
				   const struct roceshim_stats_endpoint *peer,
				   uint16_t service_port);

/*
 * Why a listener on port cannot accept RDMA connections (the rules exclude
 * every peer on that port; the RDMA path is off: ROCESHIM_RDMA; the RDMA
 * libraries are missing; no device), or NONE if it can.  Both calls load
 * the RDMA stack only when the rules admit the connection and the path
 * is on.
 */
enum roceshim_reason policy_listener(const struct config *cfg, uint16_t port);

/*
 * The process gives up RDMA for good: its credentials changed (the kernel
 * refuses its writes to an RDMA descriptor opened before, setuid() and
 * the like: why is ROCESHIM_REASON_UNSUPPORTED), or it set up io_uring,
 * which reads and writes sockets behind roceshim's back
 * (ROCESHIM_REASON_IO_URING).  From policy_stop_rdma() on, both calls
 * above say the first why given.  true: this call stopped it, an earlier
 * one had not.
 */
bool policy_stop_rdma(enum roceshim_reason why);
bool policy_rdma_stopped(void);

#endif /* ROCESHIM_POLICY_H */
