// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for the calls that install signal handlers:
 * sigaction, and glibc's signal and sysv_signal (which call its sigaction
 * internally, out of a wrapper's sight).  The handlers reach libc
 * unchanged; roceshim only notes which signals got a handler, and with
 * SA_RESTART or not, so that a one-shot handler, already reset when its
 * EINTR is seen, still counts (sig_restart.h).  A vfork child notes
 * nothing: its memory is its parent's.
 *
 * These wrappers do nothing else, and start nothing of roceshim's: a
 * runtime loaded before it (AddressSanitizer's) installs its handlers
 * through them while it starts, before any other function may run.  So
 * they find the next definitions themselves.
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>

#include "shim.h"
#include "sig_restart.h"

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef __sighandler_t (*signal_fn)(int, __sighandler_t);

/* The next definition of name, looked up once; NULL if there is none. */
static void *next(void **slot, const char *name)
{
	void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (!fn) {
		fn = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, fn, __ATOMIC_RELEASE);
	}
	return fn;
}

static bool is_handler(__sighandler_t handler)
{
	return handler != SIG_DFL && handler != SIG_IGN && handler != SIG_ERR;
}

SHIM_EXPORT int sigaction(int sig, const struct sigaction *act,
			  struct sigaction *old)
{
	static void *slot;
	sigaction_fn next_sigaction = (sigaction_fn)next(&slot, "sigaction");
	int ret;

	if (!next_sigaction) {
		errno = ENOSYS;
		return -1;
	}
	ret = next_sigaction(sig, act, old);
	if (!ret && act && !shim_in_vfork_child())
		sig_restart_note(sig, is_handler(act->sa_handler),
				 act->sa_flags & SA_RESTART);
	return ret;
}

/* Installs handler with next_signal (named name); restart: its flag. */
static __sighandler_t install(void **slot, const char *name, int sig,
			      __sighandler_t handler, bool restart)
{
	signal_fn next_signal = (signal_fn)next(slot, name);
	__sighandler_t ret;

	if (!next_signal) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	ret = next_signal(sig, handler);
	if (ret != SIG_ERR && !shim_in_vfork_child())
		sig_restart_note(sig, is_handler(handler), restart);
	return ret;
}

/* glibc's signal() has BSD semantics: SA_RESTART. */
SHIM_EXPORT __sighandler_t signal(int sig, __sighandler_t handler)
{
	static void *slot;

	return install(&slot, "signal", sig, handler, true);
}

/* SysV semantics: one-shot, no SA_RESTART. */
SHIM_EXPORT __sighandler_t sysv_signal(int sig, __sighandler_t handler)
{
	static void *slot;

	return install(&slot, "sysv_signal", sig, handler, false);
}

/* What a program built for strict ISO C or XPG calls for signal(). */
SHIM_EXPORT __sighandler_t __sysv_signal(int sig, __sighandler_t handler)
{
	return sysv_signal(sig, handler);
}
