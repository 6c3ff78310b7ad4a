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
 * SA_RESTART, and at least one is there.  A handler counts as the kernel
 * has it now; a signal whose handler is gone counts once more as the
 * program last installed it, since a one-shot handler (SA_RESETHAND) is
 * reset before its EINTR is seen.
 *
 * Contract: thread safe; errno is left as it was.  sig_restart_allowed()
 * is called at once after a wait returned EINTR, on the thread that
 * waited.  sig_restart_note() is async-signal-safe.
 */
#ifndef ROCESHIM_SIG_RESTART_H
#define ROCESHIM_SIG_RESTART_H

#include <stdbool.h>

bool sig_restart_allowed(void);

/*
 * The program installed a disposition for sig (interpose_signal.c): a
 * handler or not, with SA_RESTART or not.
 */
void sig_restart_note(int sig, bool handler, bool restart);

#endif /* ROCESHIM_SIG_RESTART_H */
