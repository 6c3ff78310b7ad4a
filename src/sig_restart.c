// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "real.h"
#include "sig_restart.h"
#include "wait_time.h"

#define SIG_BIT(sig) (UINT64_C(1) << ((sig)-1))

/*
 * Atomic, by signal: the program's last install through a wrapper was a
 * handler (installed_handler), and had SA_RESTART (installed_restart).
 */
static uint64_t installed_handler;
static uint64_t installed_restart;

/* sig's handler as the kernel has it now; false if it has none. */
static bool handler_now(int sig, struct sigaction *act)
{
	/* libc refuses its own signals (SIGCANCEL, SIGSETXID). */
	if (real.sigaction(sig, NULL, act))
		return false;
	/* sa_handler and sa_sigaction share their storage. */
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

static void set_bit(uint64_t *mask, int sig, bool on)
{
	if (on)
		__atomic_or_fetch(mask, SIG_BIT(sig), __ATOMIC_RELAXED);
	else
		__atomic_and_fetch(mask, ~SIG_BIT(sig), __ATOMIC_RELAXED);
}

void sig_restart_note(int sig, bool handler, bool restart)
{
	if (sig < 1 || sig > 64)
		return;
	set_bit(&installed_restart, sig, restart);
	set_bit(&installed_handler, sig, handler);
}

/*
 * Whether sig's handler may have run, and with SA_RESTART: the kernel's
 * disposition decides while it is a handler; once it is not (a one-shot
 * handler reset by its delivery, or one put back outside the wrappers),
 * the last install through a wrapper does, for this one decision.
 */
static bool may_have_run(int sig, bool *restart)
{
	struct sigaction act;

	if (handler_now(sig, &act)) {
		*restart = act.sa_flags & SA_RESTART;
		return true;
	}
	if (!(__atomic_load_n(&installed_handler, __ATOMIC_RELAXED) &
	      SIG_BIT(sig)))
		return false;
	*restart = __atomic_load_n(&installed_restart, __ATOMIC_RELAXED) &
		   SIG_BIT(sig);
	set_bit(&installed_handler, sig, false);
	return true;
}

bool sig_restart_allowed(void)
{
	bool restart = true, handled = false, with_restart;
	sigset_t blocked;
	int err = errno, sig;

	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked))
		restart = false;
	for (sig = 1; restart && sig <= SIGRTMAX && sig <= 64; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP ||
		    wait_time_fault_signal(sig) ||
		    sigismember(&blocked, sig) == 1)
			continue;
		if (may_have_run(sig, &with_restart)) {
			handled = true;
			restart = with_restart;
		}
	}
	errno = err;
	return restart && handled;
}
