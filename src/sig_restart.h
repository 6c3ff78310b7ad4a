/* SPDX-License-Identifier: MIT */
/*
 * Whether a blocking socket call that a signal handler interrupted would
 * have been restarted by the kernel.  The kernel restarts recv(), send()
 * and their kin when the handler has SA_RESTART and the socket has no
 * timeout for that direction (signal(7)); roceshim's own waits (poll())
 * are never restarted, so it decides for them.
 *
 * Which signal interrupted is not known, so the answer is true only when
 * every handler that could have run on this thread (its signal unblocked
 * here, not one the kernel raises only on a faulting thread) has
 * SA_RESTART, both as the kernel has them now and as the program
 * installed them (a one-shot handler is reset before its EINTR is seen),
 * and at least one such handler is there; otherwise the call fails with
 * EINTR.
 *
 * Contract: thread safe; errno is left as it was.  sig_restart_allowed()
 * is called at once after a wait returned EINTR, on the thread that
 * waited.  sig_restart_note() is async-signal-safe.
 */
#ifndef ROCESHIM_SIG_RESTART_H
#define ROCESHIM_SIG_RESTART_H

#include <stdbool.h>

bool sig_restart_allowed(void);

/* The program installed a disposition for sig (interpose_signal.c). */
void sig_restart_note(int sig);

#endif /* ROCESHIM_SIG_RESTART_H */
