// SPDX-License-Identifier: MIT
#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include "fork_page.h"
#include "spin.h"

/* The weight of the newest wait in the averages: 1/2^AVG_SHIFT. */
#define AVG_SHIFT 3
/* The weight of the newest deviation in the mean deviation: 1/2^DEV_SHIFT. */
#define DEV_SHIFT 2

static unsigned int slots;		/* atomic: 0 until sized */
static unsigned int spinning FORK_DATA; /* atomic: slots taken */

void spin_policy_init(struct spin_policy *p, unsigned int cap_us)
{
	p->cap_us = cap_us;
	p->avg_us = 0;
	p->waits = 0;
	p->short_8th_us = 0;
	p->short_dev_8th_us = 0;
	p->short_seen = false;
	p->probe = false;
}

unsigned int spin_budget_us(const struct spin_policy *p)
{
	unsigned int avg = __atomic_load_n(&p->avg_us, __ATOMIC_RELAXED);
	uint64_t budget;

	if (avg >= p->cap_us)
		return __atomic_load_n(&p->probe, __ATOMIC_RELAXED) ? p->cap_us
								    : 0;
	if (!__atomic_load_n(&p->short_seen, __ATOMIC_ACQUIRE))
		return p->cap_us;
	budget = (__atomic_load_n(&p->short_8th_us, __ATOMIC_RELAXED) +
		  4 * (uint64_t)__atomic_load_n(&p->short_dev_8th_us,
						__ATOMIC_RELAXED)) /
		 8;
	if (budget < SPIN_FLOOR_US)
		budget = SPIN_FLOOR_US;
	return budget < p->cap_us ? (unsigned int)budget : p->cap_us;
}

bool spin_time_wait(struct spin_policy *p)
{
	unsigned int n;

	if (!p->cap_us)
		return false;
	if (spin_budget_us(p))
		return true;
	n = __atomic_fetch_add(&p->waits, 1, __ATOMIC_RELAXED);
	if (n % SPIN_TIME_IDLE_EVERY)
		return false;
	if (n / SPIN_TIME_IDLE_EVERY % SPIN_PROBE_EVERY == SPIN_PROBE_EVERY - 1)
		__atomic_store_n(&p->probe, true, __ATOMIC_RELAXED);
	return true;
}

/*
 * The first short wait sets the time, and half of it as the deviation;
 * it is marked seen last, so that a reader never takes the zeroes for it.
 */
static void short_wait_ended(struct spin_policy *p, uint64_t waited_us)
{
	bool seen = __atomic_load_n(&p->short_seen, __ATOMIC_ACQUIRE);
	int64_t avg = __atomic_load_n(&p->short_8th_us, __ATOMIC_RELAXED);
	int64_t dev = __atomic_load_n(&p->short_dev_8th_us, __ATOMIC_RELAXED);
	int64_t sample = (int64_t)waited_us * 8;
	int64_t err = sample - avg;

	if (seen) {
		avg += err / (1 << AVG_SHIFT);
		dev += ((err < 0 ? -err : err) - dev) / (1 << DEV_SHIFT);
	} else {
		avg = sample;
		dev = sample / 2;
	}
	__atomic_store_n(&p->short_8th_us, (unsigned int)avg, __ATOMIC_RELAXED);
	__atomic_store_n(&p->short_dev_8th_us, (unsigned int)dev,
			 __ATOMIC_RELAXED);
	if (!seen)
		__atomic_store_n(&p->short_seen, true, __ATOMIC_RELEASE);
}

void spin_wait_ended(struct spin_policy *p, uint64_t waited_us)
{
	/*
	 * A long idle counts as four times the cap: three in a row stop the
	 * polling, one among short waits does not, and a dozen short waits
	 * (timed ones: about 48 waits in all) bring it back, as does a
	 * probe that caught its reply.
	 */
	uint64_t limit = 4 * (uint64_t)p->cap_us;
	int64_t sample = (int64_t)(waited_us < limit ? waited_us : limit);
	int64_t avg = __atomic_load_n(&p->avg_us, __ATOMIC_RELAXED);
	bool probe = __atomic_exchange_n(&p->probe, false, __ATOMIC_RELAXED);

	if (probe && waited_us <= p->cap_us)
		avg = sample;
	else
		avg += (sample - avg) / (1 << AVG_SHIFT);
	__atomic_store_n(&p->avg_us, (unsigned int)avg, __ATOMIC_RELAXED);
	if (waited_us <= 2 * (uint64_t)p->cap_us)
		short_wait_ended(p,
				 waited_us < p->cap_us ? waited_us : p->cap_us);
}

void spin_slots_init(unsigned int cpus)
{
	__atomic_store_n(&slots, cpus > 2 ? cpus - 1 : 1, __ATOMIC_RELAXED);
}

/* The CPUs this process may run on: its affinity mask, not the machine. */
static unsigned int usable_cpus(void)
{
	cpu_set_t set;
	long online;

	/* The main thread's: the thread asking may be pinned to one CPU. */
	if (!sched_getaffinity(getpid(), sizeof(set), &set) &&
	    CPU_COUNT(&set) > 0)
		return (unsigned int)CPU_COUNT(&set);
	online = sysconf(_SC_NPROCESSORS_ONLN);
	return online > 0 ? (unsigned int)online : 1;
}

bool spin_slot_take(void)
{
	unsigned int limit = __atomic_load_n(&slots, __ATOMIC_RELAXED);
	unsigned int taken = __atomic_load_n(&spinning, __ATOMIC_RELAXED);

	/* Sized on first use: a process that never polls asks nothing. */
	if (!limit) {
		int err = errno;

		spin_slots_init(usable_cpus());
		errno = err;
		limit = __atomic_load_n(&slots, __ATOMIC_RELAXED);
	}
	do {
		if (taken >= limit)
			return false;
	} while (!__atomic_compare_exchange_n(&spinning, &taken, taken + 1,
					      true, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	return true;
}

void spin_slot_give(void)
{
	__atomic_sub_fetch(&spinning, 1, __ATOMIC_RELEASE);
}

void spin_slot_occupy(void)
{
	__atomic_add_fetch(&spinning, 1, __ATOMIC_ACQUIRE);
}

void spin_slot_vacate(void)
{
	spin_slot_give();
}

void FORK_CODE spin_fork_child(void)
{
	__atomic_store_n(&spinning, 0, __ATOMIC_RELAXED);
}
