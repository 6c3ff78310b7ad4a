// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "fd_room.h"
#include "fork_page.h"
#include "log.h"
#include "progress.h"
#include "real.h"
#include "spin.h"

#define EVENTS_PER_WAIT 32

static struct {
	pthread_mutex_t lock;
	bool started;
	bool disabled;
	int epfd;
	int wake_fd; /* eventfd: ends the thread's untimed wait */
	unsigned int hook_count;
	progress_tick_fn hooks[PROGRESS_TICK_HOOKS];
	int later_ms; /* the thread only: progress_tick_later()'s, or -1 */
} pg FORK_DATA = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.epfd = -1,
	.wake_fd = -1,
};

/* wake_fd's watcher: drains the eventfd. */
static void drain_wake(struct progress_watcher *w, uint32_t events)
{
	uint64_t wakes;

	(void)w;
	(void)events;
	/* Non-blocking: drained, or already drained. */
	(void)!real.read(pg.wake_fd, &wakes, sizeof(wakes));
}

static struct progress_watcher wake_watcher = { .fn = drain_wake };

/*
 * Runs every hook; returns how long the next wait may be: a tick if any
 * hook has a deadline, else the soonest progress_tick_later(), else -1.
 */
static int run_hooks(void)
{
	bool tick = false;
	unsigned int i;

	pg.later_ms = -1;
	for (i = 0; i < pg.hook_count; i++)
		tick |= pg.hooks[i]();
	return tick ? PROGRESS_TICK_MS : pg.later_ms;
}

void progress_tick_later(int ms)
{
	if (ms < 0)
		ms = 0;
	if (pg.later_ms < 0 || ms < pg.later_ms)
		pg.later_ms = ms;
}

static void *progress_main(void *arg)
{
	struct epoll_event evs[EVENTS_PER_WAIT];
	int wait_ms = -1;
	sigset_t all;

	(void)arg;
	/* Signals are the program's business, not this thread's. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		int n = real.epoll_wait(pg.epfd, evs, EVENTS_PER_WAIT, wait_ms);
		int i;

		spin_slot_occupy();
		for (i = 0; i < n; i++) {
			struct progress_watcher *w = evs[i].data.ptr;

			w->fn(w, evs[i].events);
		}
		wait_ms = run_hooks();
		spin_slot_vacate();
	}
	return NULL;
}

/*
 * The thread's epoll set and wake-up eventfd, out of the program's way
 * where they can be (fd_room_keep()).
 */
static bool make_fds(void)
{
	fd_room_enter();
	pg.epfd = real.epoll_create1(EPOLL_CLOEXEC);
	if (pg.epfd >= 0)
		pg.epfd = fd_room_keep(pg.epfd);
	pg.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pg.wake_fd >= 0)
		pg.wake_fd = fd_room_keep(pg.wake_fd);
	fd_room_leave();
	return pg.epfd >= 0 && pg.wake_fd >= 0;
}

bool progress_start(void)
{
	struct epoll_event wake = { .events = EPOLLIN,
				    .data.ptr = &wake_watcher };
	pthread_t thread;
	bool ok;

	pthread_mutex_lock(&pg.lock);
	if (pg.started || pg.disabled)
		goto out;
	if (!make_fds() ||
	    real.epoll_ctl(pg.epfd, EPOLL_CTL_ADD, pg.wake_fd, &wake) ||
	    pthread_create(&thread, NULL, progress_main, NULL)) {
		log_warn("cannot start the RDMA progress thread; TCP only");
		pg.disabled = true;
		goto out;
	}
	/* So that top -H, ps -L and perf show whose thread it is. */
	pthread_setname_np(thread, "roceshim");
	pthread_detach(thread);
	__atomic_store_n(&pg.started, true, __ATOMIC_RELEASE);
out:
	ok = pg.started && !pg.disabled;
	pthread_mutex_unlock(&pg.lock);
	return ok;
}

bool progress_running(void)
{
	return __atomic_load_n(&pg.started, __ATOMIC_ACQUIRE) && !pg.disabled;
}

static int ctl(int op, int fd, uint32_t events, struct progress_watcher *w)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (!progress_running())
		return -ESRCH;
	return real.epoll_ctl(pg.epfd, op, fd, &ev) ? -errno : 0;
}

int progress_add(int fd, uint32_t events, struct progress_watcher *w)
{
	return ctl(EPOLL_CTL_ADD, fd, events, w);
}

int progress_mod(int fd, uint32_t events, struct progress_watcher *w)
{
	return ctl(EPOLL_CTL_MOD, fd, events, w);
}

void progress_del(int fd)
{
	if (progress_running())
		real.epoll_ctl(pg.epfd, EPOLL_CTL_DEL, fd, NULL);
}

void progress_on_tick(progress_tick_fn fn)
{
	pthread_mutex_lock(&pg.lock);
	if (pg.hook_count < PROGRESS_TICK_HOOKS)
		pg.hooks[pg.hook_count++] = fn;
	pthread_mutex_unlock(&pg.lock);
}

void progress_wake(void)
{
	uint64_t one = 1;

	if (progress_running())
		(void)!real.write(pg.wake_fd, &one, sizeof(one));
}

void FORK_CODE progress_fork_child(void)
{
	pthread_mutex_init(&pg.lock, NULL);
	if (pg.started)
		pg.disabled = true;
}
