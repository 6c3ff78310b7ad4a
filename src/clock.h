/* SPDX-License-Identifier: MIT */
/*
 * CLOCK_MONOTONIC in the units that waits use, what is left of a
 * deadline as a poll() timeout, and a deadline as a timespec; and the
 * wall clock in milliseconds since 1970, for times shown to people.
 *
 * Contract: any thread, any time; no state.
 */
#ifndef ROCESHIM_CLOCK_H
#define ROCESHIM_CLOCK_H

#include <limits.h>
#include <stdint.h>
#include <time.h>

static inline int64_t clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t clock_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline uint64_t clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * What is left until deadline (of clock_ms(); -1: none) as a poll()
 * timeout: -1 for none, 0 once it has passed.
 */
static inline int clock_ms_left(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - clock_ms();
	if (left <= 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

/* A deadline ms from now on clock id, for the timed waits of pthreads. */
static inline void clock_timespec_in(clockid_t id, int64_t ms,
				     struct timespec *ts)
{
	clock_gettime(id, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += ms % 1000 * 1000000l;
	if (ts->tv_nsec >= 1000000000l) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000l;
	}
}

#endif /* ROCESHIM_CLOCK_H */
