// SPDX-License-Identifier: MIT
#include <errno.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include "fd_room.h"
#include "real.h"

bool fd_room(void)
{
	int err = errno, lowest;
	struct rlimit lim;
	bool room;

	if (getrlimit(RLIMIT_NOFILE, &lim))
		return true;
	if (lim.rlim_cur == RLIM_INFINITY)
		return true;
	/* A new descriptor takes the lowest free number. */
	lowest = eventfd(0, EFD_CLOEXEC);
	if (lowest < 0) {
		errno = err;
		return false;
	}
	room = (rlim_t)lowest + FD_ROOM_SPARE <= lim.rlim_cur;
	real.close(lowest);
	errno = err;
	return room;
}
