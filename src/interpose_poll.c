// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for readiness: poll, select and epoll.  Everything
 * they do for upgraded connections is in the readiness module; a vfork
 * child's calls go straight to libc, since its memory is its parent's.
 */
#include <errno.h>

#include "readiness.h"
#include "real.h"
#include "shim.h"

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		const sigset_t *ss, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

/*
 * A call that succeeds leaves errno as the program had it, as the
 * kernel's do, whatever roceshim's own calls met on the way.
 */
static int kept_errno(int ret, int entry)
{
	if (ret >= 0)
		errno = entry;
	return ret;
}

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	int entry = errno;

	shim_ensure_init();
	if (shim_in_vfork_child())
		return real.poll(fds, nfds, timeout);
	return kept_errno(readiness_poll(&shim_config, fds, nfds, timeout, NULL,
					 NULL, false),
			  entry);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		      const struct timespec *tmo, const sigset_t *sigmask)
{
	int entry = errno;

	shim_ensure_init();
	if (shim_in_vfork_child())
		return real.ppoll(fds, nfds, tmo, sigmask);
	return kept_errno(
		readiness_poll(&shim_config, fds, nfds, 0, tmo, sigmask, true),
		entry);
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
	int entry = errno;

	shim_ensure_init();
	if (shim_in_vfork_child())
		return real.select(nfds, rd, wr, ex, timeout);
	return kept_errno(readiness_select(&shim_config, nfds, rd, wr, ex,
					   timeout, NULL, NULL, false),
			  entry);
}

SHIM_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			const struct timespec *timeout, const sigset_t *sigmask)
{
	int entry = errno;

	shim_ensure_init();
	if (shim_in_vfork_child())
		return real.pselect(nfds, rd, wr, ex, timeout, sigmask);
	return kept_errno(readiness_select(&shim_config, nfds, rd, wr, ex, NULL,
					   timeout, sigmask, true),
			  entry);
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int entry = errno;

	shim_ensure_init();
	if (shim_in_vfork_child())
		return real.epoll_ctl(epfd, op, fd, ev);
	return kept_errno(readiness_epoll_ctl(&shim_config, epfd, op, fd, ev),
			  entry);
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
			   int timeout)
{
	int entry = errno;

	shim_ensure_init();
	if (shim_in_vfork_child())
		return real.epoll_wait(epfd, events, maxevents, timeout);
	return kept_errno(readiness_epoll_wait(&shim_config, epfd, events,
					       maxevents, timeout, NULL, NULL,
					       READINESS_EPOLL_WAIT),
			  entry);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
			    int timeout, const sigset_t *sigmask)
{
	int entry = errno;

	shim_ensure_init();
	if (shim_in_vfork_child())
		return real.epoll_pwait(epfd, events, maxevents, timeout,
					sigmask);
	return kept_errno(readiness_epoll_wait(&shim_config, epfd, events,
					       maxevents, timeout, NULL,
					       sigmask, READINESS_EPOLL_PWAIT),
			  entry);
}

SHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events,
			     int maxevents, const struct timespec *timeout,
			     const sigset_t *sigmask)
{
	int entry = errno;

	shim_ensure_init();
	if (!real.epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	if (shim_in_vfork_child())
		return real.epoll_pwait2(epfd, events, maxevents, timeout,
					 sigmask);
	return kept_errno(readiness_epoll_wait(&shim_config, epfd, events,
					       maxevents, 0, timeout, sigmask,
					       READINESS_EPOLL_PWAIT2),
			  entry);
}
