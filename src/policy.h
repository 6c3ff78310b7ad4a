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
 * The kernel refuses a process's writes to an RDMA descriptor opened
 * before its credentials changed (setuid() and the like): from
 * policy_stop_rdma() on, both calls above say ROCESHIM_REASON_UNSUPPORTED.
 * true: this call stopped it, an earlier one had not.
 */
bool policy_stop_rdma(void);
bool policy_rdma_stopped(void);

#endif /* ROCESHIM_POLICY_H */
