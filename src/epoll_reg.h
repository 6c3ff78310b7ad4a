/* SPDX-License-Identifier: MIT */
/*
 * The epoll registrations of upgraded fds.  An upgraded fd is four entries
 * in the program's epoll set, all with the program's epoll_data (see
 * interpose_poll.c): its two eventfds, its kernel socket, and its
 * transport's completion channel, registered for EPOLL_REG_CHANNEL alone.
 * The channel's entry is how a completion wakes the program's epoll_wait
 * directly, not through the progress thread and an eventfd: when an event
 * comes back with EPOLL_REG_CHANNEL, epoll_reg_fired() takes the channel's
 * event, reaps, updates the eventfds and puts the connection's readiness
 * into the event itself.  Level-triggered, the in_fd may then lag (see
 * conn_serve_event()): epoll_wait calls epoll_reg_settle() before it
 * waits, when conn_epoll_wait_begin() says so.
 *
 * EPOLLONESHOT: the kernel disarms only the entry that fired, so when
 * epoll_wait reports one of them this module completes the event with
 * what the others would say (the caller may have offered one slot only)
 * and disarms them, as the single entry of a plain socket would be: the
 * eventfds and the channel by a MOD without events, the kernel socket by
 * removing it (an eventless entry would still report EPOLLHUP).
 *
 * Contract: epoll_reg_track() after an ADD or MOD succeeded (false: out
 * of memory; take the channel out of the set and leave the conn to the
 * progress thread), epoll_reg_untrack() after a DEL, epoll_reg_forget() when
 * the conn is released (it takes the channel out of the program's sets: the
 * channel outlives the fd), epoll_reg_fired() for each event epoll_wait
 * returns. All are thread-safe; epoll_reg_fired() costs two atomic loads for an
 * event without EPOLL_REG_CHANNEL while no EPOLLONESHOT registration
 * exists.
 */
#ifndef ROCESHIM_EPOLL_REG_H
#define ROCESHIM_EPOLL_REG_H

#include <stdbool.h>
#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "conn.h"

/*
 * The event the channel's entry is registered for.  Neither an eventfd nor
 * the kernel socket's entry (registered without it) ever reports it, and
 * it is never passed on to the program.
 */
#define EPOLL_REG_CHANNEL EPOLLRDNORM

bool epoll_reg_track(int epfd, int fd, struct conn *c,
		     const struct epoll_event *ev);
void epoll_reg_untrack(int epfd, int fd);
void epoll_reg_forget(struct conn *c);
/* Settles every registered conn (conn_settle()). */
void epoll_reg_settle(void);
/*
 * Whether any of the nfds fds is an epoll set: a poll() or select() of
 * it waits as epoll_wait() would.  Lock-free: an atomic load per fd.  It
 * knows the sets that epoll_reg_opened() and epoll_reg_dup() were told of
 * (an epoll fd received from another process is not among them).
 */
bool epoll_reg_any_set(const struct pollfd *fds, unsigned long nfds);
/* fd is a new epoll set. */
void epoll_reg_opened(int fd);
/* new_fd is now a duplicate of old_fd. */
void epoll_reg_dup(int old_fd, int new_fd);
/*
 * The fds first..last were closed: the registrations in those that were
 * epoll sets are forgotten, as the kernel forgot their entries.
 */
void epoll_reg_closed(unsigned int first, unsigned int last);
/* pthread_atfork handlers: the registry is consistent in the child. */
void epoll_reg_fork_prepare(void);
void epoll_reg_fork_parent(void);
void epoll_reg_fork_child(void);
/*
 * Completes ev, as described above.  false: it has nothing left to
 * report (only a channel fired, and what it brought is not what the
 * program waits for): drop it.
 */
bool epoll_reg_fired(int epfd, struct epoll_event *ev);

#endif /* ROCESHIM_EPOLL_REG_H */
