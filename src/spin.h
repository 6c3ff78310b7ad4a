/* SPDX-License-Identifier: MIT */
/*
 * How long a blocking call on an upgraded connection polls its queue pair
 * before it sleeps.
 *
 * Polling pays only when what the call waits for comes soon.  A call polls
 * for up to its budget and stops as soon as what it waits for arrives.
 * The budget adapts to the connection: its recent waits give a smoothed
 * time and its mean deviation, and the budget is the time plus four
 * deviations, as TCP sizes its retransmission timer from the round trip
 * (RFC 6298); at least SPIN_FLOOR_US, at most the cap (ROCESHIM_SPIN_US),
 * and the cap until a wait within it was seen.  A wait up to twice the cap
 * counts as the cap: a reply that came after the budget was timed with
 * the sleep that caught it, and the next budget must grow.  So the
 * default fits a NIC's microseconds and an emulated link's hundreds
 * alike.
 *
 * While the recent waits, short and long, average the cap or more, a
 * connection does not poll: one that idles costs no CPU, however high the
 * cap.  One timed wait in SPIN_PROBE_EVERY of such a connection polls the
 * cap all the same, and if its reply comes within the cap the connection
 * polls again: its replies may have been caught by polling, though the
 * sleeps made every wait look longer.
 *
 * A thread polls only while it holds one of the process's spin slots: one
 * fewer than the CPUs it may run on, and at least one.  Threads that poll
 * past the CPUs would take them from the threads that do the program's
 * work (and from the peer's, on a shared host); a thread without a slot
 * sleeps at once, as with a cap of 0.
 *
 * Contract: any thread may call these at any time.  The average is a hint,
 * updated with relaxed atomics; a lost update costs one poorly sized spin,
 * never correctness.
 */
#ifndef ROCESHIM_SPIN_H
#define ROCESHIM_SPIN_H

#include <stdbool.h>
#include <stdint.h>

struct spin_policy {
	unsigned int cap_us; /* 0: never poll */
	unsigned int avg_us; /* atomic: moving average of recent waits */
	unsigned int waits;  /* atomic: waits asked about spin_time_wait() */
	/*
	 * atomic, in 1/8 µs: the waits within the cap, smoothed, and their
	 * mean deviation
	 */
	unsigned int short_8th_us;
	unsigned int short_dev_8th_us;
	bool short_seen; /* atomic: one such wait was reported */
	bool probe;	 /* atomic: the next wait polls the cap (a probe) */
};

/* The shortest budget once the waits are known. */
#define SPIN_FLOOR_US 20

/* While a connection does not poll, one wait in this many is timed, */
#define SPIN_TIME_IDLE_EVERY 4
/* and one timed wait in this many is a probe. */
#define SPIN_PROBE_EVERY 16

void spin_policy_init(struct spin_policy *p, unsigned int cap_us);
/* Microseconds to poll before sleeping in the next wait. */
unsigned int spin_budget_us(const struct spin_policy *p);
/*
 * Whether to time the wait that starts now (and report it to
 * spin_wait_ended()): every wait while the connection polls, one in
 * SPIN_TIME_IDLE_EVERY while it does not, none with a cap of 0.  Where
 * the clock is a system call (HPET in a guest) a timed wait costs two;
 * a connection that does not poll needs only a sample to notice that its
 * waits got short.
 */
bool spin_time_wait(struct spin_policy *p);
/* A wait ended after waited_us, with the thing it waited for. */
void spin_wait_ended(struct spin_policy *p, uint64_t waited_us);

/*
 * Sizes the spin slots for a process that may run on cpus CPUs.  Without
 * it, the first spin_slot_take() sizes them from the process's affinity.
 */
void spin_slots_init(unsigned int cpus);
/* true: the caller may poll, and must call spin_slot_give() after. */
bool spin_slot_take(void);
void spin_slot_give(void);
/*
 * A thread of roceshim's own that works while the program runs (the
 * progress thread between its waits) occupies a slot as a poller does,
 * though none is free: polling beside it would leave the kernel's work
 * (rxe's, on a host of few CPUs) and the program's no CPU.  Calls pair.
 */
void spin_slot_occupy(void);
void spin_slot_vacate(void);
/* In a fork child: the threads that held slots are gone. */
void spin_fork_child(void);

#endif /* ROCESHIM_SPIN_H */
