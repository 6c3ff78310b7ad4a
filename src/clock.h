/* SPDX-License-Identifier: MIT */
/*
 * CLOCK_MONOTONIC in the units that waits use, and what is left of a
 * deadline as a poll() timeout.
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

#endif /* ROCESHIM_CLOCK_H */
