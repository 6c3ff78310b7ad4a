/* SPDX-License-Identifier: MIT */
/*
 * The timeouts of the program's waits (poll, select, epoll_wait) that
 * roceshim carries out in more than one step: what is left of one after
 * a step.  A wait never ends before its timeout, as the kernel's do not.
 *
 * Contract: pure functions but for wait_time_left(), which reads the
 * clock; any thread.
 */
#ifndef ROCESHIM_WAIT_TIME_H
#define ROCESHIM_WAIT_TIME_H

#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <time.h>

/* A timespec timeout in whole milliseconds, rounded up; 0 if negative. */
int wait_time_ms(const struct timespec *ts);
/* A timeout in milliseconds as a timespec in *ts; NULL for none (< 0). */
const struct timespec *wait_time_timespec(int timeout_ms, struct timespec *ts);

/*
 * After a wake-up that brought nothing to report: what is left of a wait
 * of *timeout_ms (-1: none) that ends at deadline (clock_ms()), in
 * *timeout_ms and, if ts is given, in *ts.  false: nothing is left.
 */
bool wait_time_left(int *timeout_ms, int64_t deadline, struct timespec *ts);

/*
 * Takes spent_us from a timeout of *timeout_ms (-1: none) or, if ts is
 * given, *ts (ppoll, epoll_pwait2).  false: nothing is left of it.  Only
 * whole milliseconds come off *timeout_ms, so the rest of the wait never
 * ends early.
 */
bool wait_time_take_spent(int *timeout_ms, struct timespec *ts,
			  uint64_t spent_us);

/* Whether the kernel takes ts as a timeout (NULL: none, which it takes). */
bool wait_time_valid(const struct timespec *ts);

/*
 * While a wait polls before it sleeps, a signal handler that ran would
 * go unseen: the kernel's wait would return EINTR after it, and the
 * polling goes on.  So the asynchronous signals are blocked meanwhile
 * (not those a fault raises), *old receives the thread's mask, and every
 * wait made until wait_time_unblock() passes old (or the program's own
 * mask) to the kernel, which delivers what is pending and returns EINTR.
 */
void wait_time_block_signals(sigset_t *old);
void wait_time_unblock(const sigset_t *old);
/* Whether sig is one a fault raises (SIGSEGV and the like). */
bool wait_time_fault_signal(int sig);
/*
 * Whether a signal that mask lets through is pending: a wait with that
 * mask would return EINTR, which epoll_pwait() with no timeout does not.
 */
bool wait_time_signal_pending(const sigset_t *mask);

#endif /* ROCESHIM_WAIT_TIME_H */
