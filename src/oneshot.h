/* SPDX-License-Identifier: MIT */
/*
 * The EPOLLONESHOT registrations of upgraded fds.  An upgraded fd is three
 * entries in the program's epoll set (see interpose_poll.c); the kernel
 * disarms only the entry that fired, so when epoll_wait reports one of
 * them this module completes the event with what the other two would say
 * (the caller may have offered one slot only) and disarms them, as the
 * single entry of a plain socket would be: the eventfds by a MOD without
 * events, the kernel socket by removing it (an eventless entry would still
 * report EPOLLHUP).
 *
 * Contract: oneshot_track() after an ADD or MOD with EPOLLONESHOT succeeded,
 * oneshot_untrack() after a DEL or a MOD without it, oneshot_forget() when
 * the conn is released, oneshot_fired() for each event epoll_wait returns.
 * All are thread-safe and cost one atomic load while nothing is tracked.
 */
#ifndef ROCESHIM_ONESHOT_H
#define ROCESHIM_ONESHOT_H

#include <stdint.h>
#include <sys/epoll.h>

#include "conn.h"

void oneshot_track(int epfd, int fd, struct conn *c,
		   const struct epoll_event *ev);
void oneshot_untrack(int epfd, int fd);
void oneshot_forget(struct conn *c);
void oneshot_fired(int epfd, struct epoll_event *ev);

#endif /* ROCESHIM_ONESHOT_H */
