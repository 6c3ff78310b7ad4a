// SPDX-License-Identifier: MIT
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "epoll_reg.h"
#include "real.h"

struct reg {
	int epfd;
	int fd;
	struct conn *conn;
	uint64_t data;
	uint32_t events; /* the program's interest */
	bool disarmed;	 /* EPOLLONESHOT, fired: nothing until a MOD */
};

static struct {
	pthread_mutex_t lock;
	struct reg *v;
	unsigned int count;    /* atomic for the unlocked check */
	unsigned int oneshots; /* atomic: those with EPOLLONESHOT */
	unsigned int cap;
} set = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Which fds are epoll sets, for epoll_reg_any_set(), which poll() and
 * select() ask of every fd: read without a lock (a poll() may run in a
 * signal handler).  A bit per fd below SET_BITS; above, one sticky flag.
 */
#define SET_BITS 65536
static uint64_t set_bits[SET_BITS / 64]; /* atomic */
static bool high_sets;			 /* atomic */

static bool is_set(int fd)
{
	if (fd < 0)
		return false;
	if (fd >= SET_BITS)
		return __atomic_load_n(&high_sets, __ATOMIC_ACQUIRE);
	return __atomic_load_n(&set_bits[fd / 64], __ATOMIC_ACQUIRE) &
	       (1ull << (fd % 64));
}

static void mark_set(int fd, bool on)
{
	uint64_t bit = 1ull << (fd % 64);

	if (fd < 0)
		return;
	if (fd >= SET_BITS) {
		if (on)
			__atomic_store_n(&high_sets, true, __ATOMIC_RELEASE);
	} else if (on) {
		__atomic_or_fetch(&set_bits[fd / 64], bit, __ATOMIC_RELEASE);
	} else {
		__atomic_and_fetch(&set_bits[fd / 64], ~bit, __ATOMIC_RELEASE);
	}
}

static struct reg *find_locked(int epfd, int fd)
{
	unsigned int i;

	for (i = 0; i < set.count; i++)
		if (set.v[i].epfd == epfd && set.v[i].fd == fd)
			return &set.v[i];
	return NULL;
}

/* Counts o in set.oneshots (by 1) or out of it (by -1). */
static void count_oneshot_locked(const struct reg *o, int by)
{
	if (o->events & EPOLLONESHOT)
		__atomic_store_n(&set.oneshots, set.oneshots + by,
				 __ATOMIC_RELEASE);
}

static void remove_locked(struct reg *o)
{
	count_oneshot_locked(o, -1);
	*o = set.v[set.count - 1];
	__atomic_store_n(&set.count, set.count - 1, __ATOMIC_RELEASE);
}

bool epoll_reg_track(int epfd, int fd, struct conn *c,
		     const struct epoll_event *ev)
{
	struct reg *o;

	pthread_mutex_lock(&set.lock);
	o = find_locked(epfd, fd);
	if (!o && set.count == set.cap) {
		unsigned int cap = set.cap ? 2 * set.cap : 16;
		struct reg *v = realloc(set.v, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&set.lock);
			return false;
		}
		set.v = v;
		set.cap = cap;
	}
	if (o) {
		count_oneshot_locked(o, -1);
	} else {
		o = &set.v[set.count];
		__atomic_store_n(&set.count, set.count + 1, __ATOMIC_RELEASE);
	}
	*o = (struct reg){ .epfd = epfd,
			   .fd = fd,
			   .conn = c,
			   .data = ev->data.u64,
			   .events = ev->events };
	count_oneshot_locked(o, 1);
	pthread_mutex_unlock(&set.lock);
	return true;
}

void epoll_reg_untrack(int epfd, int fd)
{
	struct reg *o;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	o = find_locked(epfd, fd);
	if (o) {
		/* Out of the registry, a lagging conn would stay unsettled. */
		conn_settle(o->conn);
		remove_locked(o);
	}
	pthread_mutex_unlock(&set.lock);
}

/*
 * Removes the registrations of c, or with c NULL those in the set epfd,
 * which was closed: the kernel dropped its entries, and a lagging conn
 * must be settled while the registry still knows it.
 */
static void remove_where(struct conn *c, int epfd)
{
	unsigned int i = 0;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	while (i < set.count) {
		struct reg *o = &set.v[i];

		if (c ? o->conn != c : o->epfd != epfd) {
			i++;
			continue;
		}
		/*
		 * The channel outlives the program's fd (the FIN lingers):
		 * it must not wake the program for an fd it has closed.
		 */
		if (c && conn_alive(c))
			real.epoll_ctl(o->epfd, EPOLL_CTL_DEL,
				       transport_event_fd(c->t), NULL);
		if (!c)
			conn_settle(o->conn);
		remove_locked(o);
	}
	pthread_mutex_unlock(&set.lock);
}

bool epoll_reg_any_set(const struct pollfd *fds, unsigned long nfds)
{
	unsigned long i;

	for (i = 0; i < nfds; i++)
		if (is_set(fds[i].fd))
			return true;
	return false;
}

void epoll_reg_opened(int fd)
{
	mark_set(fd, true);
}

void epoll_reg_dup(int old_fd, int new_fd)
{
	mark_set(new_fd, is_set(old_fd));
}

/* The kernel dropped a closed set's entries: so does the registry. */
static void forget_set(int epfd)
{
	mark_set(epfd, false);
	remove_where(NULL, epfd);
}

void epoll_reg_closed(unsigned int first, unsigned int last)
{
	unsigned int fd;

	for (fd = first; fd <= last && fd < SET_BITS; fd++) {
		/* A word at a time where no bit is set. */
		if (!(fd % 64) &&
		    !__atomic_load_n(&set_bits[fd / 64], __ATOMIC_ACQUIRE)) {
			fd += 63;
			continue;
		}
		if (is_set((int)fd))
			forget_set((int)fd);
	}
}

void epoll_reg_fork_prepare(void)
{
	pthread_mutex_lock(&set.lock);
}

void epoll_reg_fork_parent(void)
{
	pthread_mutex_unlock(&set.lock);
}

void epoll_reg_fork_child(void)
{
	pthread_mutex_unlock(&set.lock);
}

void epoll_reg_settle(void)
{
	unsigned int i;

	pthread_mutex_lock(&set.lock);
	for (i = 0; i < set.count; i++)
		conn_settle(set.v[i].conn);
	pthread_mutex_unlock(&set.lock);
}

void epoll_reg_forget(struct conn *c)
{
	remove_where(c, -1);
}

/* EPOLLIN and EPOLLOUT as t says, whatever a registration asks. */
static uint32_t events_of(const struct transport_readiness *t)
{
	return (t->data_or_error ? EPOLLIN : 0) | (t->writable ? EPOLLOUT : 0);
}

/* EPOLLIN and EPOLLOUT as o's transport says now. */
static uint32_t transport_events(const struct reg *o)
{
	struct transport_readiness t;

	transport_readiness(o->conn->t, &t);
	return events_of(&t);
}

/* What the entries of o that did not fire would have reported. */
static uint32_t readiness(const struct reg *o)
{
	struct pollfd kernel = { .fd = o->fd, .events = POLLIN | POLLRDHUP };
	uint32_t r = transport_events(o);

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

/* Whether o is the only registration of its conn. */
static bool sole_locked(const struct reg *o)
{
	unsigned int i;

	for (i = 0; i < set.count; i++)
		if (set.v[i].conn == o->conn && &set.v[i] != o)
			return false;
	return true;
}

/*
 * o's channel fired: what the completion brought.  Level-triggered, that
 * is the connection's readiness now, reported here: if o asks for EPOLLIN
 * and is the conn's only registration, an arrival need not set the
 * eventfd as well (conn_serve_event() told).  Edge-triggered, it is
 * nothing here: the eventfds that conn_serve_event() set report the edge,
 * once, when epoll_wait asks the kernel again.  A conn inherited across
 * fork is dead here (its channel fires only through an epoll set shared
 * with the parent): it reports as a reset socket, as poll() does.
 */
static uint32_t serve_channel(const struct reg *o)
{
	struct transport_readiness t;
	bool told;

	if (!conn_alive(o->conn))
		return (o->events & (EPOLLIN | EPOLLOUT)) | EPOLLERR | EPOLLHUP;
	told = !(o->events & (EPOLLET | EPOLLONESHOT)) &&
	       (o->events & EPOLLIN) && sole_locked(o);
	conn_serve_event(o->conn, told, &t);
	if (o->events & EPOLLET)
		return 0;
	return events_of(&t) & o->events;
}

/* Disarms the entries of a fired EPOLLONESHOT registration. */
static void disarm(struct reg *o)
{
	struct epoll_event off = { .events = EPOLLONESHOT,
				   .data.u64 = o->data };

	real.epoll_ctl(o->epfd, EPOLL_CTL_MOD, o->conn->in_fd, &off);
	real.epoll_ctl(o->epfd, EPOLL_CTL_MOD, o->conn->out_fd, &off);
	real.epoll_ctl(o->epfd, EPOLL_CTL_MOD, transport_event_fd(o->conn->t),
		       &off);
	real.epoll_ctl(o->epfd, EPOLL_CTL_DEL, o->fd, NULL);
	o->disarmed = true;
}

bool epoll_reg_fired(int epfd, struct epoll_event *ev)
{
	uint32_t channel = ev->events & EPOLL_REG_CHANNEL;
	bool ours = false;
	unsigned int i;

	/* Only a channel or an EPOLLONESHOT registration needs the set. */
	if (!channel && !__atomic_load_n(&set.oneshots, __ATOMIC_ACQUIRE))
		return true;
	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return true;
	ev->events &= ~EPOLL_REG_CHANNEL;
	pthread_mutex_lock(&set.lock);
	for (i = 0; i < set.count; i++) {
		struct reg *o = &set.v[i];

		if (o->epfd != epfd || o->data != ev->data.u64 || o->disarmed)
			continue;
		ours = true;
		if (channel)
			ev->events |= serve_channel(o);
		if ((o->events & EPOLLONESHOT) && ev->events) {
			ev->events |= readiness(o);
			disarm(o);
		}
	}
	pthread_mutex_unlock(&set.lock);
	/* Not an upgraded fd's: the bit is a plain fd's own EPOLLRDNORM. */
	if (!ours)
		ev->events |= channel;
	return ev->events;
}
