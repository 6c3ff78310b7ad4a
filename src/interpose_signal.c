// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the calls that install signal handlers:
 * sigaction, and glibc's signal and sysv_signal (which call its sigaction
 * internally, out of a wrapper's sight).  The handlers reach libc
 * unchanged; roceshim only notes which signals got a handler, and with
 * SA_RESTART or not, so that a one-shot handler, already reset when its
 * EINTR is seen, still counts (sig_restart.h).  A vfork child notes
 * nothing: its memory is its parent's.
 */
#include <signal.h>

#include "real.h"
#include "shim.h"
#include "sig_restart.h"

static bool is_handler(__sighandler_t handler)
{
	return handler != SIG_DFL && handler != SIG_IGN && handler != SIG_ERR;
}

SHIM_EXPORT int sigaction(int sig, const struct sigaction *act,
			  struct sigaction *old)
{
	int ret;

	shim_ensure_init();
	ret = real.sigaction(sig, act, old);
	if (!ret && act && !shim_in_vfork_child())
		sig_restart_note(sig, is_handler(act->sa_handler),
				 act->sa_flags & SA_RESTART);
	return ret;
}

/* glibc's signal() has BSD semantics: SA_RESTART. */
SHIM_EXPORT __sighandler_t signal(int sig, __sighandler_t handler)
{
	__sighandler_t ret;

	shim_ensure_init();
	ret = real.signal(sig, handler);
	if (ret != SIG_ERR && !shim_in_vfork_child())
		sig_restart_note(sig, is_handler(handler), true);
	return ret;
}

/* SysV semantics: one-shot, no SA_RESTART. */
SHIM_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t handler)
{
	__sighandler_t ret;

	shim_ensure_init();
	ret = real.sysv_signal(sig, handler);
	if (ret != SIG_ERR && !shim_in_vfork_child())
		sig_restart_note(sig, is_handler(handler), false);
	return ret;
}

/* What a program built for strict ISO C or XPG calls for signal(). */
SHIM_EXPORT __sighandler_t __sysv_signal(int sig, __sighandler_t handler)
{
	return sysv_signal(sig, handler);
}
