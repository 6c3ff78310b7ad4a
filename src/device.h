/* SPDX-License-Identifier: MIT */
/*
 * Whether this host can carry RDMA connections at all.
 *
 * Contract: device_status() answers once per process, on first use (never
 * at start-up), and caches the answer: ROCESHIM_REASON_NONE when there is
 * a device, otherwise NO_DEVICE or NO_RDMA_LIBS.  It loads the RDMA stack
 * (rdma_stack.h) only when the kernel lists a verbs device, then asks
 * libibverbs.  After NONE the rdma_stack tables may be used.
 */
#ifndef ROCESHIM_DEVICE_H
#define ROCESHIM_DEVICE_H

#include <roceshim/stats.h>

#include "config.h"

enum roceshim_reason device_status(const struct config *cfg);

#endif /* ROCESHIM_DEVICE_H */
