// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>

#include "fd_room.h"
#include "fork_page.h"
#include "log.h"
#include "real.h"

/* How far above the soft limit hidden descriptors may go. */
#define HIDE_SPAN 65536

/* Free numbers below the limit that a descriptor needs while it moves. */
#define MOVE_SPARE 4

/*
 * The descriptors a connection may make below the limit, where none can
 * move, before the first is refused: admitted with that much room, it is
 * not refused half-made.
 */
#define CONNECTION_FDS 8

static pthread_mutex_t room_lock FORK_DATA = PTHREAD_MUTEX_INITIALIZER;
/* Held by this thread: fd_room_enter() calls not yet left. */
static __thread unsigned int room_depth;
/* While room_lock is held: the program's limit, and whether it is raised. */
static struct rlimit program_limit;
static bool limit_known, limit_raised;

/* The soft limit raised for descriptors above it; false if it cannot be. */
static bool raised_limit(const struct rlimit *lim, struct rlimit *raised)
{
	if (lim->rlim_cur == RLIM_INFINITY ||
	    lim->rlim_cur > INT_MAX - HIDE_SPAN)
		return false;
	*raised = *lim;
	raised->rlim_cur = lim->rlim_cur + HIDE_SPAN;
	if (lim->rlim_max != RLIM_INFINITY && lim->rlim_max < raised->rlim_cur)
		raised->rlim_cur = lim->rlim_max;
	return raised->rlim_cur > lim->rlim_cur;
}

void fd_room_enter(void)
{
	struct rlimit raised;
	int err;

	if (room_depth++)
		return;
	err = errno;
	pthread_mutex_lock(&room_lock);
	limit_known = !getrlimit(RLIMIT_NOFILE, &program_limit);
	limit_raised = limit_known && raised_limit(&program_limit, &raised) &&
		       !setrlimit(RLIMIT_NOFILE, &raised);
	errno = err;
}

void fd_room_leave(void)
{
	int err;

	if (room_depth > 1) {
		room_depth--;
		return;
	}
	err = errno;
	if (limit_raised && setrlimit(RLIMIT_NOFILE, &program_limit))
		log_warn("cannot restore RLIMIT_NOFILE to %llu: %m",
			 (unsigned long long)program_limit.rlim_cur);
	limit_raised = false;
	pthread_mutex_unlock(&room_lock);
	/* After the unlock: a signal handler in between nests, not locks. */
	room_depth = 0;
	errno = err;
}

bool fd_room_inside(void)
{
	return room_depth > 0;
}

rlim_t fd_room_program_limit(void)
{
	int err = errno;
	rlim_t cur;

	/* Under the lock nobody has the limit raised, except this thread. */
	fd_room_enter();
	cur = limit_known ? program_limit.rlim_cur : RLIM_INFINITY;
	fd_room_leave();
	errno = err;
	return cur;
}

/* Inside: whether number fd leaves spare numbers free below the limit. */
static bool below_limit(int fd, int spare)
{
	if (!limit_known || program_limit.rlim_cur == RLIM_INFINITY)
		return true;
	return (rlim_t)fd + (rlim_t)spare <= program_limit.rlim_cur;
}

/* Inside, with the limit raised: a copy of fd above it, or -1. */
static int copy_above_limit(int fd)
{
	return real.fcntl(fd, F_DUPFD_CLOEXEC, (int)program_limit.rlim_cur);
}

/* The longest step down to a free number below the limit. */
#define TOP_STEP 64

/* Under room_lock: the lowest number the region below the limit reached. */
static int top_floor;

/*
 * Inside, without room above the limit: a copy of fd among the highest
 * free numbers below it, FD_ROOM_SPARE short of it, taken from the top
 * down, so that the program's next descriptors, which take the lowest
 * free numbers, get those they would get without roceshim until the two
 * meet; -1 if there is none above fd.
 */
static int copy_near_limit(int fd)
{
	int top, floor, copy, step = 1;

	if (!limit_known || program_limit.rlim_cur == RLIM_INFINITY ||
	    program_limit.rlim_cur > INT_MAX)
		return -1;
	top = (int)program_limit.rlim_cur - FD_ROOM_SPARE;
	floor = top_floor > 0 && top_floor < top ? top_floor : top - 1;
	/* Steps that double: a free number among the taken in few tries. */
	for (; floor > fd;
	     floor -= step, step = step < TOP_STEP ? 2 * step : step) {
		copy = real.fcntl(fd, F_DUPFD_CLOEXEC, floor);
		if (copy >= 0 && copy < top) {
			top_floor = floor;
			return copy;
		}
		if (copy >= 0)
			real.close(copy);
		else if (errno != EMFILE)
			return -1;
	}
	return -1;
}

bool fd_room(void)
{
	int err = errno, lowest;
	bool room;

	/* A new descriptor takes the lowest free number. */
	lowest = eventfd(0, EFD_CLOEXEC);
	if (lowest < 0) {
		errno = err;
		return false;
	}
	fd_room_enter();
	room = below_limit(lowest, limit_raised
					   ? MOVE_SPARE
					   : FD_ROOM_SPARE + CONNECTION_FDS);
	fd_room_leave();
	real.close(lowest);
	errno = err;
	return room;
}

/* Moves fd above the limit if it can; refuse: whether it may say no. */
static int move_out(int fd, bool refuse)
{
	int err = errno, ret = fd, copy;

	fd_room_enter();
	if (limit_raised && (rlim_t)fd >= program_limit.rlim_cur)
		goto out;
	copy = limit_raised ? copy_above_limit(fd) : copy_near_limit(fd);
	if (copy >= 0) {
		real.close(fd);
		ret = copy;
		goto out;
	}
	if (refuse && !below_limit(fd, FD_ROOM_SPARE))
		ret = -EMFILE;
out:
	fd_room_leave();
	errno = err;
	return ret;
}

int fd_room_hide(int fd)
{
	return move_out(fd, true);
}

int fd_room_keep(int fd)
{
	return move_out(fd, false);
}

int fd_room_eventfd(void)
{
	int err = errno, fd, hidden;

	fd_room_enter();
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	hidden = fd < 0 ? -errno : fd_room_hide(fd);
	if (fd >= 0 && hidden < 0)
		real.close(fd);
	fd_room_leave();
	errno = err;
	return hidden;
}

int fd_room_dup(int fd)
{
	int err = errno, copy = -1;

	fd_room_enter();
	copy = limit_raised ? copy_above_limit(fd) : copy_near_limit(fd);
	if (copy < 0)
		copy = real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (copy < 0)
		copy = -errno;
	fd_room_leave();
	errno = err;
	return copy;
}

/* A fork waits while another thread has the limit raised. */
void FORK_CODE fd_room_fork_prepare(void)
{
	pthread_mutex_lock(&room_lock);
}

void FORK_CODE fd_room_fork_parent(void)
{
	pthread_mutex_unlock(&room_lock);
}

void FORK_CODE fd_room_fork_child(void)
{
	pthread_mutex_unlock(&room_lock);
}
