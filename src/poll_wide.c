// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "fd_room.h"
#include "poll_wide.h"
#include "real.h"

/* Poll's event bits are epoll's; the events field is unsigned. */
#define EPOLL_EVENTS(ev) ((uint32_t)(uint16_t)(ev))
#define ALWAYS_REPORTED	 (POLLERR | POLLHUP)
/* An entry whose revents were settled when it was added. */
#define SETTLED ((nfds_t)-1)

struct wide {
	int epfd;
	nfds_t *owner;	/* the entry epoll knows fds[i].fd by */
	uint32_t *mask; /* per owner: what it waits for, then what came */
	struct epoll_event *events;
};

/* The first entry for fds[i].fd: an fd listed twice is added once. */
static nfds_t first_entry(const struct pollfd *fds, nfds_t i)
{
	nfds_t k;

	for (k = 0; k < i; k++)
		if (fds[k].fd == fds[i].fd)
			return k;
	return i;
}

/* Adds entry i, or settles it where epoll cannot watch its fd. */
static int add_entry(struct wide *w, struct pollfd *fds, nfds_t i)
{
	struct epoll_event ev = { .events = EPOLL_EVENTS(fds[i].events),
				  .data.u64 = i };
	nfds_t k;

	w->owner[i] = i;
	w->mask[i] = ev.events;
	/* The set took a number that was free: the program's fd was closed. */
	if (fds[i].fd == w->epfd)
		errno = EBADF;
	else if (!real.epoll_ctl(w->epfd, EPOLL_CTL_ADD, fds[i].fd, &ev))
		return 0;
	switch (errno) {
	case EEXIST:
		k = first_entry(fds, i);
		w->owner[i] = k;
		w->mask[k] |= ev.events;
		ev.events = w->mask[k];
		ev.data.u64 = k;
		if (real.epoll_ctl(w->epfd, EPOLL_CTL_MOD, fds[i].fd, &ev))
			return -errno;
		return 0;
	case EPERM: /* a regular file or directory: poll finds it ready */
		fds[i].revents = fds[i].events &
				 (POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM);
		break;
	case EBADF:
		fds[i].revents = POLLNVAL;
		break;
	default:
		return -errno;
	}
	w->owner[i] = SETTLED;
	return 0;
}

/* Each entry's revents from what came; returns how many have any. */
static int fold(struct wide *w, struct pollfd *fds, nfds_t n, int got)
{
	nfds_t i;
	int k, ready = 0;

	for (i = 0; i < n; i++)
		if (w->owner[i] == i)
			w->mask[i] = 0;
	for (k = 0; k < got; k++)
		w->mask[w->events[k].data.u64] = w->events[k].events;
	for (i = 0; i < n; i++) {
		if (fds[i].fd >= 0 && w->owner[i] != SETTLED)
			fds[i].revents = (short)(w->mask[w->owner[i]] &
						 (EPOLL_EVENTS(fds[i].events) |
						  ALWAYS_REPORTED));
		if (fds[i].revents)
			ready++;
	}
	return ready;
}

int poll_wide(struct pollfd *fds, nfds_t n, int timeout_ms,
	      const sigset_t *sigmask)
{
	struct wide w = {
		.owner = calloc(n + 1, sizeof(*w.owner)),
		.mask = calloc(n + 1, sizeof(*w.mask)),
		.events = calloc(n + 1, sizeof(*w.events)),
	};
	int got, ret = -ENOMEM;
	nfds_t i;

	/* Made even where the program holds every number below its limit. */
	fd_room_enter();
	w.epfd = real.epoll_create1(EPOLL_CLOEXEC);
	if (w.epfd >= 0)
		w.epfd = fd_room_keep(w.epfd);
	fd_room_leave();
	if (!w.owner || !w.mask || !w.events || w.epfd < 0)
		goto out;
	for (i = 0; i < n; i++) {
		fds[i].revents = 0;
		w.owner[i] = SETTLED;
		if (fds[i].fd < 0)
			continue;
		ret = add_entry(&w, fds, i);
		if (ret)
			goto out;
		if (fds[i].revents)
			timeout_ms = 0;
	}
	got = real.epoll_pwait(w.epfd, w.events, (int)n, timeout_ms, sigmask);
	ret = got < 0 ? -errno : fold(&w, fds, n, got);
out:
	if (w.epfd >= 0)
		real.close(w.epfd);
	free(w.owner);
	free(w.mask);
	free(w.events);
	return ret;
}
