/* SPDX-License-Identifier: MIT */
/*
 * Whether a blocking socket call that a signal handler interrupted would
 * have been restarted by the kernel.  The kernel restarts recv(), send()
 * and their kin when the handler has SA_RESTART and the socket has no
 * timeout for that direction (signal(7)); roceshim's own waits (poll())
 * are never restarted, so it decides for them.
 *
 * Contract: call it at once after the wait returned EINTR, on the thread
 * that waited.  Which signal interrupted is not known, so the answer is
 * true only when every handler that could have run on this thread (its
 * signal unblocked here, its disposition a function) has SA_RESTART;
 * otherwise false, and the call fails with EINTR.  errno is left as it
 * was.  Thread safe.
 */
#ifndef ROCESHIM_SIG_RESTART_H
#define ROCESHIM_SIG_RESTART_H

#include <stdbool.h>

bool sig_restart_allowed(void);

#endif /* ROCESHIM_SIG_RESTART_H */
