/* SPDX-License-Identifier: MIT */
/*
 * poll() over more entries than the kernel's poll() takes.  poll() refuses
 * a set of more entries than RLIMIT_NOFILE (EINVAL), and a substituted
 * set holds several entries for each upgraded fd, so a program polling a
 * few hundred upgraded connections would be refused where over TCP it is
 * not.  poll_wide() waits on the same entries through an epoll set made
 * for the call, which has no such bound.
 *
 * Contract: the results are poll()'s: each entry's revents (POLLNVAL for
 * a closed fd, always ready for one epoll cannot watch, such as a regular
 * file; an fd listed twice gets each entry's own events), and the number
 * of entries with any.  timeout_ms as poll()'s; sigmask, when not NULL,
 * is in force during the wait as ppoll()'s.  Errors are negative errno
 * values.  Thread safe.
 */
#ifndef ROCESHIM_POLL_WIDE_H
#define ROCESHIM_POLL_WIDE_H

#include <poll.h>
#include <signal.h>

int poll_wide(struct pollfd *fds, nfds_t n, int timeout_ms,
	      const sigset_t *sigmask);

#endif /* ROCESHIM_POLL_WIDE_H */
