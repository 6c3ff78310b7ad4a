/* SPDX-License-Identifier: MIT */
/*
 * A mutex taken by a deadline, for the paths that may run in a signal
 * handler (_exit()): the handler may have interrupted the lock's holder
 * on its own thread, and such a path must give up, not wait for ever.
 *
 * Contract: any thread; true with m held, false (m not held) once
 * deadline_ms (of clock_ms()) has passed.
 */
#ifndef ROCESHIM_LOCK_BY_H
#define ROCESHIM_LOCK_BY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "clock.h"

static inline bool lock_by(pthread_mutex_t *m, int64_t deadline_ms)
{
	static const struct timespec pause = { .tv_nsec = 50000 };

	while (pthread_mutex_trylock(m)) {
		if (clock_ms() >= deadline_ms)
			return false;
		nanosleep(&pause, NULL);
	}
	return true;
}

#endif /* ROCESHIM_LOCK_BY_H */
