// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the calls that install signal handlers:
 * sigaction, and glibc's signal and sysv_signal (which call its sigaction
 * internally, out of a wrapper's sight).  The handlers reach libc
 * unchanged; roceshim only notes which ones lack SA_RESTART, so that a
 * one-shot handler (SA_RESETHAND), already reset when its EINTR is seen,
 * still counts (sig_restart.h).
 */
#include <signal.h>

#include "real.h"
#include "shim.h"
#include "sig_restart.h"

SHIM_EXPORT int sigaction(int sig, const struct sigaction *act,
			  struct sigaction *old)
{
	int ret;

	shim_ensure_init();
	ret = real.sigaction(sig, act, old);
	if (!ret && act)
		sig_restart_note(sig);
	return ret;
}

SHIM_EXPORT __sighandler_t signal(int sig, __sighandler_t handler)
{
	__sighandler_t ret;

	shim_ensure_init();
	ret = real.signal(sig, handler);
	if (ret != SIG_ERR)
		sig_restart_note(sig);
	return ret;
}

/* SysV semantics: one-shot, no SA_RESTART. */
SHIM_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t handler)
{
	__sighandler_t ret;

	shim_ensure_init();
	ret = real.sysv_signal(sig, handler);
	if (ret != SIG_ERR)
		sig_restart_note(sig);
	return ret;
}

/* What a program built for strict ISO C or XPG calls for signal(). */
SHIM_EXPORT __sighandler_t __sysv_signal(int sig, __sighandler_t handler)
{
	return sysv_signal(sig, handler);
}
