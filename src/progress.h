/* SPDX-License-Identifier: MIT */
/*
 * The progress thread: one thread per process, named "roceshim", that
 * serves what the program does not wait for itself: the RDMA connection
 * manager's events, completions of connections that rely on it, and work
 * with a deadline.
 *
 * It sleeps in epoll_wait on a set of its own.  Other modules put file
 * descriptors in that set with a watcher, whose function the thread calls
 * with the events that fired.  It ticks (every PROGRESS_TICK_MS) only
 * while some tick hook says that it has a deadline; otherwise it waits
 * for events, or as long as a hook asked (progress_tick_later()), so that
 * a process whose connections idle wakes seldom, if ever.
 *
 * Contract: progress_start() starts the thread on first use and is
 * idempotent; false means it cannot run (RDMA stays off in this process).
 * Every other function is thread safe, and a no-op before the start or in
 * a fork child (the thread does not exist there).  A watcher must stay
 * valid until progress_del() of its fd has returned, and watcher
 * functions run on the progress thread only.
 */
#ifndef ROCESHIM_PROGRESS_H
#define ROCESHIM_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#define PROGRESS_TICK_MS 50

struct progress_watcher {
	void (*fn)(struct progress_watcher *w, uint32_t events);
};

/* A function the thread calls on each wake-up; true: tick again. */
typedef bool (*progress_tick_fn)(void);
/*
 * From a tick hook that said false: call it again within ms, though
 * nothing else happens (the thread waits for the soonest such time).
 */
void progress_tick_later(int ms);

bool progress_start(void);
bool progress_running(void);

int progress_add(int fd, uint32_t events, struct progress_watcher *w);
int progress_mod(int fd, uint32_t events, struct progress_watcher *w);
void progress_del(int fd);

/*
 * Registers a tick hook (at most PROGRESS_TICK_HOOKS, before the start).
 * progress_wake() ends an untimed wait: call it when a hook that said
 * false now has a deadline.
 */
#define PROGRESS_TICK_HOOKS 5
void progress_on_tick(progress_tick_fn fn);
void progress_wake(void);

/*
 * In a fork child: if the thread ran in the parent, it is gone, and the
 * RDMA resources it served belong to the parent; nothing starts it again.
 */
void progress_fork_child(void);

#endif /* ROCESHIM_PROGRESS_H */
