// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for _exit() and _Exit(): the process ends at once,
 * and no exit handler runs, roceshim's (shim.c) included.  The kernel's
 * close of a TCP socket still gives the peer every byte sent and a FIN,
 * but an RDMA connection's last writes would die with the process, and
 * its peer would read a reset: so each connection the process owns on
 * RDMA ends first, as at exit() (track_quick_exit()).  _exit() is often
 * called from a signal handler, or in a fork child: nothing here waits
 * for a lock past a deadline (lock_by.h), and a vfork child, which shares
 * its parent's memory, only exits.
 */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "real.h"
#include "shim.h"
#include "stats.h"
#include "track.h"

/* How long the stats segment's lock may be waited for. */
#define QUICK_STATS_MS 50

static __attribute__((noreturn)) void exit_after_rdma(int status)
{
	if (shim_tracking()) {
		track_quick_exit();
		stats_shutdown(clock_ms() + QUICK_STATS_MS);
	}
	real_init();
	if (real.exit_now)
		real.exit_now(status);
	for (;;)
		real.syscall(SYS_exit_group, status);
}

SHIM_EXPORT void _exit(int status)
{
	exit_after_rdma(status);
}

SHIM_EXPORT void _Exit(int status)
{
	exit_after_rdma(status);
}
