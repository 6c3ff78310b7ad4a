// SPDX-License-Identifier: MIT
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "log.h"
#include "oneshot.h"
#include "real.h"

struct oneshot {
	int epfd;
	int fd;
	struct conn *conn;
	uint64_t data;
	uint32_t events; /* the program's interest */
};

static struct {
	pthread_mutex_t lock;
	struct oneshot *v;
	unsigned int count; /* atomic for the unlocked check */
	unsigned int cap;
} set = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct oneshot *find_locked(int epfd, int fd)
{
	unsigned int i;

	for (i = 0; i < set.count; i++)
		if (set.v[i].epfd == epfd && set.v[i].fd == fd)
			return &set.v[i];
	return NULL;
}

static void remove_locked(struct oneshot *o)
{
	*o = set.v[set.count - 1];
	__atomic_store_n(&set.count, set.count - 1, __ATOMIC_RELEASE);
}

void oneshot_track(int epfd, int fd, struct conn *c,
		   const struct epoll_event *ev)
{
	struct oneshot *o;

	pthread_mutex_lock(&set.lock);
	o = find_locked(epfd, fd);
	if (!o && set.count == set.cap) {
		unsigned int cap = set.cap ? 2 * set.cap : 16;
		struct oneshot *v = realloc(set.v, cap * sizeof(*v));

		if (!v) {
			log_warn("epoll: out of memory; EPOLLONESHOT on fd %d "
				 "may report twice",
				 fd);
			goto out;
		}
		set.v = v;
		set.cap = cap;
	}
	if (!o) {
		o = &set.v[set.count];
		__atomic_store_n(&set.count, set.count + 1, __ATOMIC_RELEASE);
	}
	*o = (struct oneshot){ .epfd = epfd,
			       .fd = fd,
			       .conn = c,
			       .data = ev->data.u64,
			       .events = ev->events };
out:
	pthread_mutex_unlock(&set.lock);
}

void oneshot_untrack(int epfd, int fd)
{
	struct oneshot *o;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	o = find_locked(epfd, fd);
	if (o)
		remove_locked(o);
	pthread_mutex_unlock(&set.lock);
}

void oneshot_forget(struct conn *c)
{
	unsigned int i = 0;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	while (i < set.count) {
		if (set.v[i].conn == c)
			remove_locked(&set.v[i]);
		else
			i++;
	}
	pthread_mutex_unlock(&set.lock);
}

/* What the entries of o that did not fire would have reported. */
static uint32_t readiness(const struct oneshot *o)
{
	struct pollfd kernel = { .fd = o->fd, .events = POLLIN | POLLRDHUP };
	struct transport_readiness t;
	uint32_t r = 0;

	transport_readiness(o->conn->t, &t);
	if (t.data_or_error)
		r |= EPOLLIN;
	if (t.writable)
		r |= EPOLLOUT;
	if (real.poll(&kernel, 1, 0) == 1) {
		if (kernel.revents & POLLIN)
			r |= EPOLLIN;
		if (kernel.revents & POLLRDHUP)
			r |= EPOLLRDHUP;
		if (kernel.revents & POLLHUP)
			r |= EPOLLHUP;
		if (kernel.revents & POLLERR)
			r |= EPOLLERR;
	}
	return r & (o->events | EPOLLHUP | EPOLLERR);
}

void oneshot_fired(int epfd, struct epoll_event *ev)
{
	struct epoll_event off = { .events = EPOLLONESHOT, .data = ev->data };
	unsigned int i = 0;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	while (i < set.count) {
		struct oneshot *o = &set.v[i];

		if (o->epfd != epfd || o->data != ev->data.u64) {
			i++;
			continue;
		}
		ev->events |= readiness(o);
		real.epoll_ctl(epfd, EPOLL_CTL_MOD, o->conn->in_fd, &off);
		real.epoll_ctl(epfd, EPOLL_CTL_MOD, o->conn->out_fd, &off);
		real.epoll_ctl(epfd, EPOLL_CTL_DEL, o->fd, NULL);
		remove_locked(o);
	}
	pthread_mutex_unlock(&set.lock);
}
