// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "sig_restart.h"

/* A handler ran for sig on this thread only if sig is not blocked here. */
static bool may_have_run(int sig, const sigset_t *blocked,
			 struct sigaction *act)
{
	if (sig == SIGKILL || sig == SIGSTOP || sigismember(blocked, sig) == 1)
		return false;
	/* libc refuses its own signals (SIGCANCEL, SIGSETXID): skipped. */
	if (sigaction(sig, NULL, act))
		return false;
	/* sa_handler and sa_sigaction share their storage. */
	return act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
}

bool sig_restart_allowed(void)
{
	struct sigaction act;
	sigset_t blocked;
	int err = errno, sig;
	bool restart = true;

	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked))
		restart = false;
	for (sig = 1; restart && sig <= SIGRTMAX; sig++)
		if (may_have_run(sig, &blocked, &act) &&
		    !(act.sa_flags & SA_RESTART))
			restart = false;
	errno = err;
	return restart;
}
