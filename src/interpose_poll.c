// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for readiness: poll, select and epoll.  While every
 * connection is on kernel TCP, the kernel's readiness is the truth and
 * these pass straight through; they are the seam where upgraded
 * connections will substitute their own readiness.
 */
#include <errno.h>

#include "real.h"
#include "shim.h"

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		const sigset_t *ss, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	shim_ensure_init();
	return real.poll(fds, nfds, timeout);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		      const struct timespec *tmo, const sigset_t *sigmask)
{
	shim_ensure_init();
	return real.ppoll(fds, nfds, tmo, sigmask);
}

SHIM_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
			   size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return poll(fds, nfds, timeout);
}

SHIM_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			    const struct timespec *tmo, const sigset_t *ss,
			    size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return ppoll(fds, nfds, tmo, ss);
}

SHIM_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		       struct timeval *timeout)
{
	shim_ensure_init();
	return real.select(nfds, rd, wr, ex, timeout);
}

SHIM_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			const struct timespec *timeout, const sigset_t *sigmask)
{
	shim_ensure_init();
	return real.pselect(nfds, rd, wr, ex, timeout, sigmask);
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	shim_ensure_init();
	return real.epoll_ctl(epfd, op, fd, ev);
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
			   int timeout)
{
	shim_ensure_init();
	return real.epoll_wait(epfd, events, maxevents, timeout);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
			    int timeout, const sigset_t *sigmask)
{
	shim_ensure_init();
	return real.epoll_pwait(epfd, events, maxevents, timeout, sigmask);
}

SHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events,
			     int maxevents, const struct timespec *timeout,
			     const sigset_t *sigmask)
{
	shim_ensure_init();
	if (!real.epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	return real.epoll_pwait2(epfd, events, maxevents, timeout, sigmask);
}
