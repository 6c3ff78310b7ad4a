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

struct ibv_context;

enum roceshim_reason device_status(const struct config *cfg);

/*
 * After NONE: every device's context, opened where it was not, its
 * descriptors out of the program's way (fd_room.h) unless the program
 * loaded librdmacm itself.  librdmacm closes none of these contexts, not
 * even one whose device went away, until device_release() of the list;
 * NULL when it cannot list them.
 */
struct ibv_context **device_hold(void);
void device_release(struct ibv_context **devs);

#endif /* ROCESHIM_DEVICE_H */
