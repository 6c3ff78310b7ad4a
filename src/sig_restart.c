// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#include "real.h"
#include "sig_restart.h"
#include "wait_time.h"

#define SIG_BIT(sig) (UINT64_C(1) << ((sig)-1))

/* Atomic: signals the program last gave a handler without SA_RESTART. */
static uint64_t installed_without_restart;

/* sig's handler as the kernel has it now; false if it has none. */
static bool handler_now(int sig, struct sigaction *act)
{
	/* libc refuses its own signals (SIGCANCEL, SIGSETXID). */
	if (real.sigaction(sig, NULL, act))
		return false;
	/* sa_handler and sa_sigaction share their storage. */
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

void sig_restart_note(int sig)
{
	struct sigaction act;
	int err = errno;

	if (sig < 1 || sig > 64)
		return;
	if (handler_now(sig, &act) && !(act.sa_flags & SA_RESTART))
		__atomic_or_fetch(&installed_without_restart, SIG_BIT(sig),
				  __ATOMIC_RELAXED);
	else
		__atomic_and_fetch(&installed_without_restart, ~SIG_BIT(sig),
				   __ATOMIC_RELAXED);
	errno = err;
}

bool sig_restart_allowed(void)
{
	uint64_t without =
		__atomic_load_n(&installed_without_restart, __ATOMIC_RELAXED);
	bool restart = true, handled = false;
	struct sigaction act;
	sigset_t blocked;
	int err = errno, sig;

	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked))
		restart = false;
	for (sig = 1; restart && sig <= SIGRTMAX && sig <= 64; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP ||
		    wait_time_fault_signal(sig) ||
		    sigismember(&blocked, sig) == 1)
			continue;
		if (without & SIG_BIT(sig)) {
			restart = false;
		} else if (handler_now(sig, &act)) {
			handled = true;
			restart = act.sa_flags & SA_RESTART;
		}
	}
	errno = err;
	return restart && handled;
}
