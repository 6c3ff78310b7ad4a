// SPDX-License-Identifier: MIT
#include <limits.h>
#include <pthread.h>

#include "clock.h"
#include "wait_time.h"

int wait_time_ms(const struct timespec *ts)
{
	int64_t ms;

	/* Whole seconds past INT_MAX ms would overflow as milliseconds. */
	if (ts->tv_sec > INT_MAX / 1000)
		return INT_MAX;
	ms = ts->tv_sec * 1000ll + (ts->tv_nsec + 999999) / 1000000;
	if (ms < 0)
		return 0;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

const struct timespec *wait_time_timespec(int timeout_ms, struct timespec *ts)
{
	if (timeout_ms < 0)
		return NULL;
	ts->tv_sec = timeout_ms / 1000;
	ts->tv_nsec = timeout_ms % 1000 * 1000000l;
	return ts;
}

bool wait_time_left(int *timeout_ms, int64_t deadline, struct timespec *ts)
{
	if (*timeout_ms < 0)
		return true;
	if (!*timeout_ms || !(*timeout_ms = clock_ms_left(deadline)))
		return false;
	if (ts)
		wait_time_timespec(*timeout_ms, ts);
	return true;
}

bool wait_time_take_spent(int *timeout_ms, struct timespec *ts,
			  uint64_t spent_us)
{
	int64_t left_ns;

	if (ts) {
		left_ns = ts->tv_sec * 1000000000ll + ts->tv_nsec -
			  (int64_t)spent_us * 1000;
		if (left_ns <= 0)
			return false;
		ts->tv_sec = left_ns / 1000000000;
		ts->tv_nsec = left_ns % 1000000000;
		return true;
	}
	if (*timeout_ms < 0)
		return true;
	if (spent_us >= (uint64_t)*timeout_ms * 1000)
		return false;
	*timeout_ms -= (int)(spent_us / 1000);
	return true;
}

bool wait_time_valid(const struct timespec *ts)
{
	return !ts || (ts->tv_sec >= 0 && ts->tv_nsec >= 0 &&
		       ts->tv_nsec < 1000000000);
}

static sigset_t asynchronous;
static pthread_once_t asynchronous_once = PTHREAD_ONCE_INIT;

static const int faults[] = {
	SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS
};

#define FAULT_COUNT (sizeof(faults) / sizeof(faults[0]))

bool wait_time_fault_signal(int sig)
{
	unsigned int i;

	for (i = 0; i < FAULT_COUNT; i++)
		if (faults[i] == sig)
			return true;
	return false;
}

static void asynchronous_init(void)
{
	unsigned int i;

	sigfillset(&asynchronous);
	for (i = 0; i < FAULT_COUNT; i++)
		sigdelset(&asynchronous, faults[i]);
}

void wait_time_block_signals(sigset_t *old)
{
	pthread_once(&asynchronous_once, asynchronous_init);
	pthread_sigmask(SIG_BLOCK, &asynchronous, old);
}

void wait_time_unblock(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

bool wait_time_signal_pending(const sigset_t *mask)
{
	sigset_t pending;
	int sig;

	if (sigpending(&pending))
		return false;
	for (sig = 1; sig < NSIG; sig++)
		if (sigismember(&pending, sig) == 1 &&
		    sigismember(mask, sig) != 1)
			return true;
	return false;
}
