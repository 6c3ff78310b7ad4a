/* SPDX-License-Identifier: MIT */
/*
 * Whether this host can carry RDMA connections at all.
 *
 * Contract: device_status() loads the RDMA stack (rdma_stack.h) and asks
 * libibverbs for its devices, once per process on first use (never at
 * start-up: a program without TCP connections pays for neither), and
 * caches the answer: ROCESHIM_REASON_NONE when there is a device,
 * otherwise NO_RDMA_LIBS or NO_DEVICE.  After NONE the rdma_stack tables
 * may be used.
 */
#ifndef ROCESHIM_DEVICE_H
#define ROCESHIM_DEVICE_H

#include <roceshim/stats.h>

#include "config.h"

enum roceshim_reason device_status(const struct config *cfg);

#endif /* ROCESHIM_DEVICE_H */
