/* SPDX-License-Identifier: MIT */
/*
 * The local address of a connection the library left unset, from /proc.
 *
 * The library does not ask the kernel for the local address of a
 * connection that it carries over TCP and that the process opened itself
 * (a getsockname() per connect shows in a connect loop); the kernel still
 * knows it while the socket is open.
 *
 * Contract: proc_local_fill() sets, in each open row of a live process's
 * snapshot whose local endpoint is unset, the local address of the TCP
 * socket that /proc/PID/fd/FD names, as /proc/PID/net/tcp and tcp6 give
 * it, provided the socket's remote address is the row's peer.  Rows it
 * cannot resolve (the fd moved on, no permission, the process gone) stay
 * unset.  It reads only /proc, and trusts nothing it reads there.
 */
#ifndef ROCESHIM_TOOLS_PROC_LOCAL_H
#define ROCESHIM_TOOLS_PROC_LOCAL_H

#include "segment.h"

void proc_local_fill(struct snapshot *snap);

#endif /* ROCESHIM_TOOLS_PROC_LOCAL_H */
