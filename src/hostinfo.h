/* SPDX-License-Identifier: MIT */
/*
 * Facts about this host and process that decide whether RDMA can work,
 * read from /sys and /proc; shared by the library and roceshim-stat
 * --check, so that the check answers as the library decides.
 */
#ifndef ROCESHIM_HOSTINFO_H
#define ROCESHIM_HOSTINFO_H

#include <stdbool.h>

/* Where the kernel lists the verbs devices that libibverbs opens. */
#define HOSTINFO_UVERBS_CLASS "/sys/class/infiniband_verbs"

/*
 * Whether the kernel has a verbs device, asked without loading the RDMA
 * stack: a host without RDMA pays one directory read.
 */
bool hostinfo_has_uverbs(void);

/* Whether this process may lock memory past RLIMIT_MEMLOCK (CAP_IPC_LOCK). */
bool hostinfo_may_lock_without_limit(void);

/*
 * The size of this process's descriptor table (FDSize): no descriptor is
 * at or above it.  -1 if unknown.
 */
int hostinfo_fd_table_size(void);

#endif /* ROCESHIM_HOSTINFO_H */
