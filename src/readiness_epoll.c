// SPDX-License-Identifier: MIT
/*
 * Upgraded connections in the program's epoll sets.
 *
 * An upgraded fd is up to three entries in the set, all with the program's
 * epoll_data: its eventfds (in_fd for EPOLLIN and EOF; out_fd for
 * EPOLLOUT, once made: readiness_make_out_fd()) and its kernel socket
 * (for the EPOLLHUP and EPOLLERR that epoll always reports: a reset; and
 * for EPOLLOUT until out_fd is made).  epoll_wait folds the entries that
 * share an epoll_data into one event.  A set that holds upgraded
 * connections also holds their completion hubs (cq_hub.h), each once,
 * edge-triggered, with hub_data() of its slot.  When one fires, the
 * wrapper drains it:
 * each connection with a registration in the set is served (reaped, its
 * eventfds updated) and its readiness put into an event of its own, so
 * the completion wakes the program's epoll_wait directly, not through
 * the progress thread; the others' eventfds wake their own waiters.
 *
 * EPOLLONESHOT: the kernel disarms only the entry that fired, so when
 * epoll_wait reports one of them, the event is completed with what the
 * others would say (the caller may have offered one slot only) and they
 * are disarmed, as the single entry of a plain socket would be: the
 * eventfds by a MOD without events, the kernel socket by removing it (an
 * eventless entry would still report EPOLLHUP); a drain of the hub reports
 * nothing for it until the program's MOD arms it again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "conn.h"
#include "connector.h"
#include "cq_hub.h"
#include "epoll_registry.h"
#include "event_fold.h"
#include "fd_table.h"
#include "fork_page.h"
#include "log.h"
#include "readiness_impl.h"
#include "real.h"
#include "sock.h"
#include "wait_time.h"

/*
 * The epoll_data of a hub's entry: the address of a static of the
 * library, which no registration of the program's carries, one per hub
 * slot.  Never passed on to the program.
 */
static const char hub_tags[CQ_HUB_SLOTS];

static uint64_t hub_data(unsigned int slot)
{
	return (uint64_t)(uintptr_t)&hub_tags[slot];
}

/* The hub slot that data names, or CQ_HUB_SLOTS: not a hub's. */
static unsigned int hub_slot_of(uint64_t data)
{
	uint64_t slot = data - hub_data(0);

	return slot < CQ_HUB_SLOTS ? (unsigned int)slot : CQ_HUB_SLOTS;
}

/*
 * The eventfds say EPOLLIN and EPOLLOUT alone; a TCP socket says
 * EPOLLRDNORM and EPOLLWRNORM with them (tcp_poll()).
 */
#define NORMS	 (EPOLLRDNORM | EPOLLWRNORM)
#define ASKS_IN	 (EPOLLIN | EPOLLRDNORM)
#define ASKS_OUT (EPOLLOUT | EPOLLWRNORM)

static struct {
	pthread_mutex_t lock;
	struct epoll_registry g;
	unsigned int count;    /* atomic: g.live, for the unlocked check */
	unsigned int oneshots; /* atomic: those with EPOLLONESHOT */
	unsigned int rdhups;   /* atomic: those with EPOLLRDHUP */
	unsigned int norms;    /* atomic: EPOLLRDNORM or EPOLLWRNORM */
	unsigned int in_outs;  /* atomic: both readable and writable asked */
	/*
	 * Upgraded registrations begun so far: epoll_wait folds only if any.
	 * Counted before the hub joins a set, since a wait that its entry
	 * wakes must fold it away, never hand its data to the program.
	 */
	unsigned long made; /* atomic */
	/* A fork child whose registry held some at the fork. */
	bool inherited; /* atomic */
} set FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * Copies of the kernel's registrations of TCP sockets not connected yet
 * (readiness.h, readiness_early_*()), under set.lock.  Few at a time: a
 * socket's last only until its connect() or its close.
 */
struct early_reg {
	struct sock *sock;
	int epfd;
	int fd;
	struct epoll_event ev;
};

static struct {
	struct early_reg *v;
	unsigned int count; /* atomic reads: for the unlocked check */
	unsigned int cap;
} early FORK_DATA;

/*
 * Which fds are epoll sets, for readiness_epoll_any_set(), which poll()
 * and select() ask of every fd: read without a lock (a poll() may run in
 * a signal handler).  A bit per fd below SET_BITS; above, a sticky flag.
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

/* owner: the connection's readiness, or the pending sock. */
static struct epoll_reg *find_locked(int epfd, int fd, const void *owner)
{
	return epoll_registry_find(&set.g, epfd, fd, owner);
}

/* Its entries for reading and for writing are two: they may fire apart. */
static bool asks_in_and_out(uint32_t events)
{
	return (events & ASKS_IN) && (events & ASKS_OUT);
}

/*
 * Counts o in set.oneshots, set.rdhups, set.norms and set.in_outs (by 1)
 * or out of them (by -1): events of those registrations need the
 * registry.
 */
static void count_oneshot_locked(const struct epoll_reg *o, int by)
{
	if (o->events & EPOLLONESHOT)
		__atomic_store_n(&set.oneshots, set.oneshots + by,
				 __ATOMIC_RELEASE);
	if (o->events & EPOLLRDHUP)
		__atomic_store_n(&set.rdhups, set.rdhups + by,
				 __ATOMIC_RELEASE);
	if (o->events & NORMS)
		__atomic_store_n(&set.norms, set.norms + by, __ATOMIC_RELEASE);
	if (asks_in_and_out(o->events))
		__atomic_store_n(&set.in_outs, set.in_outs + by,
				 __ATOMIC_RELEASE);
}

static void remove_locked(struct epoll_reg *o)
{
	count_oneshot_locked(o, -1);
	epoll_registry_remove(&set.g, o);
	__atomic_store_n(&set.count, set.g.live, __ATOMIC_RELEASE);
}

/*
 * Records a registration after an ADD or MOD succeeded; false: out of
 * memory.
 */
static bool track_locked(int epfd, int fd, struct readiness *r,
			 struct sock *pending, const struct epoll_event *ev)
{
	const struct epoll_reg val = { .epfd = epfd,
				       .fd = fd,
				       .r = r,
				       .pending = pending,
				       .data = ev->data.u64,
				       .events = ev->events };
	struct epoll_reg *o = find_locked(epfd, fd, epoll_registry_owner(&val));

	if (o) {
		count_oneshot_locked(o, -1);
		epoll_registry_update(&set.g, o, &val);
	} else {
		o = epoll_registry_add(&set.g, &val);
		if (!o)
			return false;
		__atomic_store_n(&set.count, set.g.live, __ATOMIC_RELEASE);
	}
	count_oneshot_locked(o, 1);
	return true;
}

/*
 * Whether r is registered through another fd of its socket only, none
 * through fd in epfd: a dup of the registered fd, the registered one
 * since closed.  The kernel keys its entries by file and fd, so fd has
 * none to change.
 */
static bool only_through_another_fd(int epfd, int fd, const struct readiness *r)
{
	const struct epoll_reg *o = NULL;
	bool other = false;

	pthread_mutex_lock(&set.lock);
	if (!find_locked(epfd, fd, r))
		while (!other && (o = epoll_registry_next_owned(&set.g, r, o)))
			other = o->fd != fd;
	pthread_mutex_unlock(&set.lock);
	return other;
}

/*
 * Whether r is in epfd through a registration of another fd: the kernel
 * keys entries by file and fd, so a dup of a registered socket may join
 * the same set, but the connection's eventfds are in it already.
 */
static bool in_set_through_another_fd(int epfd, int fd,
				      const struct readiness *r)
{
	const struct epoll_reg *o = NULL;
	bool other = false;

	pthread_mutex_lock(&set.lock);
	while (!other && (o = epoll_registry_next_owned(&set.g, r, o)))
		other = o->epfd == epfd && o->fd != fd;
	pthread_mutex_unlock(&set.lock);
	return other;
}

static void untrack(int epfd, int fd, const struct readiness *r)
{
	struct epoll_reg *o;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	o = find_locked(epfd, fd, r);
	if (o) {
		/* Out of the registry, a lagging one would stay unsettled. */
		if (o->r)
			readiness_settle(o->r);
		remove_locked(o);
	}
	pthread_mutex_unlock(&set.lock);
}

/*
 * Removes the registrations of r, or with r NULL those in the set epfd,
 * which was closed: the kernel dropped its entries, and a lagging
 * connection must be settled while the registry still knows it.
 */
static struct epoll_reg *next_where(struct readiness *r, int epfd,
				    struct epoll_reg *after)
{
	struct epoll_reg *o = after;

	if (r)
		return epoll_registry_next_owned(&set.g, r, after);
	while ((o = epoll_registry_next(&set.g, o)) && o->epfd != epfd)
		;
	return o;
}

/*
 * epfd may hold no more upgraded registrations on the hub of hub_fd: if
 * so, the hub's entry goes, so that its completions wake that set no more.
 */
static void leave_hub_locked(int epfd, int hub_fd)
{
	const struct epoll_reg *o = NULL;

	while ((o = epoll_registry_next(&set.g, o)))
		if (o->epfd == epfd && o->r && readiness_alive(o->r) &&
		    readiness_hub_fd(o->r) == hub_fd)
			return;
	real.epoll_ctl(epfd, EPOLL_CTL_DEL, hub_fd, NULL);
}

static void leave_hub(int epfd, int hub_fd)
{
	pthread_mutex_lock(&set.lock);
	leave_hub_locked(epfd, hub_fd);
	pthread_mutex_unlock(&set.lock);
}

static void remove_where(struct readiness *r, int epfd)
{
	struct epoll_reg *o, *next;
	int epfd_left;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	for (o = next_where(r, epfd, NULL); o; o = next) {
		next = next_where(r, epfd, o);
		if (!o->r) {
			remove_locked(o);
			continue;
		}
		if (!r)
			readiness_settle(o->r);
		epfd_left = o->epfd;
		remove_locked(o);
		if (r && readiness_alive(r))
			leave_hub_locked(epfd_left, readiness_hub_fd(r));
	}
	pthread_mutex_unlock(&set.lock);
}

bool readiness_epoll_any_set(const struct pollfd *fds, unsigned long nfds)
{
	unsigned long i;

	for (i = 0; i < nfds; i++)
		if (is_set(fds[i].fd))
			return true;
	return false;
}

static void early_remove_locked(unsigned int i)
{
	early.v[i] = early.v[early.count - 1];
	__atomic_store_n(&early.count, early.count - 1, __ATOMIC_RELEASE);
}

static void early_forget_fds(unsigned int first, unsigned int last)
{
	unsigned int i;

	if (!__atomic_load_n(&early.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	for (i = 0; i < early.count;) {
		if (((unsigned int)early.v[i].fd >= first &&
		     (unsigned int)early.v[i].fd <= last) ||
		    ((unsigned int)early.v[i].epfd >= first &&
		     (unsigned int)early.v[i].epfd <= last))
			early_remove_locked(i);
		else
			i++;
	}
	pthread_mutex_unlock(&set.lock);
}

/* The fd that roceshim's own calls on o's socket go through. */
static int own_fd(const struct epoll_reg *o)
{
	return o->fd_gone ? o->via : o->fd;
}

static void mark_fd_gone_locked(const void *owner, int fd, int other)
{
	struct epoll_reg *o = NULL;

	while ((o = epoll_registry_next_owned(&set.g, owner, o))) {
		if (own_fd(o) != fd)
			continue;
		o->fd_gone = true;
		o->via = other;
	}
}

void readiness_fd_gone(struct sock *sock, int fd, int other)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	mark_fd_gone_locked(sock, fd, other);
	if (c)
		mark_fd_gone_locked(conn_readiness(c), fd, other);
	pthread_mutex_unlock(&set.lock);
}

void readiness_set_opened(int fd)
{
	mark_set(fd, true);
}

bool readiness_fd_is_set(int fd)
{
	return is_set(fd);
}

void readiness_fd_dup(int old_fd, int new_fd)
{
	mark_set(new_fd, is_set(old_fd));
	/* dup2() closed what new_fd was. */
	if (new_fd >= 0)
		early_forget_fds((unsigned int)new_fd, (unsigned int)new_fd);
}

/* The kernel dropped a closed set's entries: so does the registry. */
static void forget_set(int epfd)
{
	mark_set(epfd, false);
	remove_where(NULL, epfd);
}

void readiness_fd_closed(unsigned int first, unsigned int last)
{
	unsigned int fd;

	early_forget_fds(first, last);
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

/*
 * A connection's move to its kernel socket (readiness_release()) and the
 * program's epoll_ctl() on it exclude each other: a registration of the
 * RDMA side made after the move handed the fd back would leave the
 * kernel socket registered without the program's events.
 */
static pthread_mutex_t move_lock FORK_DATA = PTHREAD_MUTEX_INITIALIZER;

/* What every entry of a registration takes from the program's events. */
#define ENTRY_FLAGS (EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE | EPOLLWAKEUP)

/* The events epoll_ctl(2) takes with EPOLLEXCLUSIVE. */
#define EXCLUSIVE_OK_EVENTS                                                 \
	(EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | \
	 EPOLLEXCLUSIVE)

/*
 * Whether the kernel refuses ev (op ADD or MOD) of a socket with EINVAL:
 * EPOLLEXCLUSIVE with a MOD, or with events it does not take.
 */
static bool exclusive_refused(int op, const struct epoll_event *ev)
{
	return (ev->events & EPOLLEXCLUSIVE) &&
	       (op == EPOLL_CTL_MOD || (ev->events & ~EXCLUSIVE_OK_EVENTS));
}

void FORK_CODE readiness_fork_prepare(void)
{
	pthread_mutex_lock(&move_lock);
	pthread_mutex_lock(&set.lock);
}

void FORK_CODE readiness_fork_parent(void)
{
	pthread_mutex_unlock(&set.lock);
	pthread_mutex_unlock(&move_lock);
}

void FORK_CODE readiness_fork_child(void)
{
	readiness_core_fork_child();
	if (set.g.live)
		__atomic_store_n(&set.inherited, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&set.lock);
	pthread_mutex_unlock(&move_lock);
}

void readiness_epoll_settle_all(void)
{
	struct epoll_reg *o = NULL;

	pthread_mutex_lock(&set.lock);
	while ((o = epoll_registry_next(&set.g, o)))
		if (o->r)
			readiness_settle(o->r);
	pthread_mutex_unlock(&set.lock);
}

void readiness_forget(struct readiness *r)
{
	remove_where(r, -1);
}

void readiness_drop_socket(struct readiness *r, int fd)
{
	struct epoll_reg *o = NULL;

	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	while ((o = epoll_registry_next_owned(&set.g, r, o)))
		if (own_fd(o) == fd)
			real.epoll_ctl(o->epfd, EPOLL_CTL_DEL, fd, NULL);
	pthread_mutex_unlock(&set.lock);
}

void readiness_release(struct readiness *r)
{
	struct epoll_reg *o, *next;
	int epfd;

	pthread_mutex_lock(&move_lock);
	pthread_mutex_lock(&set.lock);
	for (o = epoll_registry_next_owned(&set.g, r, NULL); o; o = next) {
		/* A fired EPOLLONESHOT one stays disarmed, as in disarm(). */
		struct epoll_event ev = { .events = o->disarmed ? EPOLLONESHOT
								: o->events,
					  .data.u64 = o->data };
		int err;

		next = epoll_registry_next_owned(&set.g, r, o);
		real.epoll_ctl(o->epfd, EPOLL_CTL_DEL, readiness_in_fd(r),
			       NULL);
		if (readiness_out_fd(r) >= 0)
			real.epoll_ctl(o->epfd, EPOLL_CTL_DEL,
				       readiness_out_fd(r), NULL);
		/*
		 * A fired EPOLLONESHOT registration lost its socket entry; an
		 * EPOLLEXCLUSIVE one cannot be changed, only made again.  One
		 * whose fd is gone cannot be reached: it is made again through
		 * the dup (the old entry reports what it has all along).
		 */
		err = o->fd_gone ? ENOENT : 0;
		if (!err && real.epoll_ctl(o->epfd, EPOLL_CTL_MOD, o->fd, &ev))
			err = errno;
		if (err == EINVAL)
			real.epoll_ctl(o->epfd, EPOLL_CTL_DEL, o->fd, NULL);
		if (err == ENOENT || err == EINVAL)
			real.epoll_ctl(o->epfd, EPOLL_CTL_ADD, own_fd(o), &ev);
		epfd = o->epfd;
		remove_locked(o);
		/* A fork child leaves the parent's hub in a set they share. */
		if (readiness_alive(r))
			leave_hub_locked(epfd, readiness_hub_fd(r));
	}
	pthread_mutex_unlock(&set.lock);
	readiness_release_fds(r);
	pthread_mutex_unlock(&move_lock);
}

/*
 * The events t says, whatever a registration asks: EPOLLRDHUP once the
 * peer's FIN came, EPOLLHUP once both sides are shut, as TCP reports.
 */
static uint32_t events_of(const struct transport_readiness *t)
{
	return (t->readable ? EPOLLIN : 0) | (t->writable ? EPOLLOUT : 0) |
	       (t->eof ? EPOLLRDHUP : 0) | (t->eof && t->shut ? EPOLLHUP : 0);
}

/*
 * What a TCP socket registered for asked reports of events: EPOLLRDNORM
 * goes with EPOLLIN, EPOLLWRNORM with EPOLLOUT.
 */
static uint32_t as_asked(uint32_t events, uint32_t asked)
{
	if (events & ASKS_IN)
		events |= ASKS_IN;
	if (events & ASKS_OUT)
		events |= ASKS_OUT;
	return events & (asked | EPOLLHUP | EPOLLERR);
}

/* What the entries of o that did not fire would have reported. */
static uint32_t readiness_of(const struct epoll_reg *o)
{
	struct pollfd kernel = { .fd = own_fd(o) };
	struct transport_readiness t;
	uint32_t r;

	transport_readiness(readiness_transport(o->r), &t);
	r = events_of(&t);
	if (real.poll(&kernel, 1, 0) == 1) {
		if (kernel.revents & POLLHUP)
			r |= EPOLLHUP | EPOLLRDHUP;
		if (kernel.revents & POLLERR)
			r |= EPOLLERR;
	}
	return as_asked(r, o->events);
}

/* Whether o is the only registration of its connection. */
static bool sole_locked(const struct epoll_reg *o)
{
	const struct epoll_reg *first;

	first = epoll_registry_next_owned(&set.g, o->r, NULL);
	return !epoll_registry_next_owned(&set.g, o->r, first);
}

/* Where drain_into() puts the events of the connections it serves. */
struct hub_report {
	int epfd;
	struct epoll_event *events;
	int n;
	int max;
};

/* The slot of data's event in h, or a new one; NULL: no room. */
static struct epoll_event *slot_for(struct hub_report *h, uint64_t data)
{
	int i;

	for (i = 0; i < h->n; i++)
		if (h->events[i].data.u64 == data)
			return &h->events[i];
	if (h->n == h->max)
		return NULL;
	h->events[h->n] = (struct epoll_event){ .data.u64 = data };
	return &h->events[h->n];
}

/*
 * A completion for r, whose registrations in h's set report what it
 * brought; false if it has none there.  Level-triggered, that is the
 * connection's readiness now, reported here: if its only registration asks for
 * EPOLLIN, an arrival need not set the eventfd as well (readiness_serve()
 * told). Edge-triggered, it is nothing here: the eventfds that
 * readiness_serve() set report the edge, once, when epoll_wait asks the kernel
 * again.
 */
static bool report_in_set(struct readiness *r, void *arg)
{
	struct hub_report *h = arg;
	struct transport_readiness t;
	struct epoll_reg *o = NULL, *only = NULL;
	struct epoll_event *slot;
	unsigned int in_set = 0;
	bool told;

	pthread_mutex_lock(&set.lock);
	while ((o = epoll_registry_next_owned(&set.g, r, o)))
		if (o->epfd == h->epfd && !o->disarmed) {
			only = o;
			in_set++;
		}
	if (!in_set) {
		pthread_mutex_unlock(&set.lock);
		return false;
	}
	told = in_set == 1 && !(only->events & (EPOLLET | EPOLLONESHOT)) &&
	       (only->events & ASKS_IN) && sole_locked(only) &&
	       slot_for(h, only->data);
	readiness_serve(r, told ? READINESS_TOLD_EPOLL : READINESS_TOLD_NOBODY,
			&t);
	while ((o = epoll_registry_next_owned(&set.g, r, o))) {
		uint32_t bits = as_asked(events_of(&t), o->events);

		if (o->epfd != h->epfd || o->disarmed ||
		    (o->events & EPOLLET) || !bits)
			continue;
		slot = slot_for(h, o->data);
		if (!slot)
			continue;
		if (slot == &h->events[h->n])
			h->n++;
		slot->events |= bits;
	}
	pthread_mutex_unlock(&set.lock);
	return true;
}

/*
 * The hubs of the slots in fired (a bit each) fired in epfd: drains them.
 * Returns how many of events (n of them, room for max) there are now.
 */
static int drain_into(int epfd, uint64_t fired, struct epoll_event *events,
		      int n, int max)
{
	struct hub_report h = {
		.epfd = epfd, .events = events, .n = n, .max = max
	};

	readiness_drain(fired, report_in_set, &h);
	return h.n;
}

/* Disarms the entries of a fired EPOLLONESHOT registration. */
static void disarm(struct epoll_reg *o)
{
	struct epoll_event off = { .events = EPOLLONESHOT,
				   .data.u64 = o->data };

	real.epoll_ctl(o->epfd, EPOLL_CTL_MOD, readiness_in_fd(o->r), &off);
	if (readiness_out_fd(o->r) >= 0)
		real.epoll_ctl(o->epfd, EPOLL_CTL_MOD, readiness_out_fd(o->r),
			       &off);
	/* A gone fd's entry cannot be reached: it reports HUP and ERR. */
	if (!o->fd_gone)
		real.epoll_ctl(o->epfd, EPOLL_CTL_DEL, o->fd, NULL);
	o->disarmed = true;
}

/*
 * In a fork child, an event of a connection that it inherited, in a set
 * it shares with the connection's owner: the child takes the connection
 * over, as its first call on it would (the owner moves it to TCP), and
 * its registrations become the kernel socket's, which reports what the
 * connection brings from then on.
 */
static void adopt_inherited(int fd)
{
	struct sock *sock = fd_table_get(fd);
	struct conn *c;

	if (!sock)
		return;
	c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);
	if (c && !conn_alive(c)) {
		conn_make_plain(c, ROCESHIM_DOWNGRADE_FORK);
		readiness_release(conn_readiness(c));
	}
	sock_put(sock);
}

/* Inherited connections taken over per wake; the next wake takes more. */
#define ADOPT_PER_WAKE 16

/*
 * A hub fired in epfd in a fork child: its parent's, maybe, which only the
 * parent drains, for connections the child inherited in the set.  Each
 * of those is taken over (adopt_inherited()), as an event of its own in
 * the set would have it, so that its kernel socket reports it.
 */
static void adopt_inherited_in(int epfd)
{
	const struct epoll_reg *o = NULL;
	int fds[ADOPT_PER_WAKE];
	unsigned int n = 0, i;
	bool any = false;

	if (!__atomic_load_n(&set.inherited, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&set.lock);
	while (n < ADOPT_PER_WAKE && (o = epoll_registry_next(&set.g, o))) {
		if (!o->r || readiness_alive(o->r))
			continue;
		any = true;
		if (o->epfd == epfd)
			fds[n++] = own_fd(o);
	}
	/* None left in any set: the child's own waits skip this scan. */
	if (!any)
		__atomic_store_n(&set.inherited, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&set.lock);
	for (i = 0; i < n; i++)
		adopt_inherited(fds[i]);
}

/*
 * Completes ev, as described above.  full: the kernel filled every slot,
 * so it may have kept back the other entry of a registration that asks
 * for reading and writing, whose readiness is added, as one socket would
 * report it.  false: it has nothing left to report (it was an inherited
 * connection's, now adopted): drop it.  Costs four atomic loads for an
 * event without EPOLLERR while no EPOLLONESHOT, EPOLLRDHUP, EPOLLRDNORM
 * or EPOLLWRNORM registration exists, nor, when full, one that asks for
 * both.
 */
static bool fired(int epfd, struct epoll_event *ev, bool full)
{
	struct transport_readiness t;
	struct epoll_reg *o = NULL;
	int inherited = -1;

	/* Only these need the registry. */
	if (!(ev->events & EPOLLERR) &&
	    !(full && __atomic_load_n(&set.in_outs, __ATOMIC_ACQUIRE)) &&
	    !__atomic_load_n(&set.oneshots, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&set.rdhups, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&set.norms, __ATOMIC_ACQUIRE))
		return true;
	if (!__atomic_load_n(&set.count, __ATOMIC_ACQUIRE))
		return true;
	pthread_mutex_lock(&set.lock);
	while ((o = epoll_registry_next_with(&set.g, epfd, ev->data.u64, o))) {
		if (o->disarmed || !o->r)
			continue;
		if (!readiness_alive(o->r)) {
			inherited = own_fd(o);
			continue;
		}
		/*
		 * Only the kernel socket's entry reports EPOLLERR: a reset,
		 * which TCP reports readable (the error), writable and hung up.
		 */
		if (ev->events & EPOLLERR) {
			readiness_error_told(o->r);
			ev->events |=
				o->events & (EPOLLIN | EPOLLRDNORM | EPOLLOUT |
					     EPOLLWRNORM | EPOLLRDHUP);
		}
		/* A TCP socket hung up has its read side shut too. */
		if (ev->events & EPOLLHUP)
			ev->events |= o->events & EPOLLRDHUP;
		/* The transport's EOF: EPOLLRDHUP (and EPOLLHUP) with it. */
		if ((o->events & EPOLLRDHUP) && (ev->events & EPOLLIN)) {
			transport_readiness(readiness_transport(o->r), &t);
			ev->events |= events_of(&t) & (EPOLLRDHUP | EPOLLHUP);
		}
		if (o->events & NORMS)
			ev->events = as_asked(ev->events, o->events);
		if ((o->events & EPOLLONESHOT) && ev->events) {
			ev->events |= readiness_of(o);
			disarm(o);
		} else if (full && asks_in_and_out(o->events) &&
			   (!(ev->events & ASKS_IN) ||
			    !(ev->events & ASKS_OUT))) {
			ev->events |= readiness_of(o);
		}
	}
	pthread_mutex_unlock(&set.lock);
	/* Its kernel socket reports it from the next wait on. */
	if (inherited >= 0) {
		adopt_inherited(inherited);
		return false;
	}
	return ev->events;
}

static bool room_to_send(struct readiness *r)
{
	struct transport_readiness t;

	transport_readiness(readiness_transport(r), &t);
	return t.writable;
}

/* o's entry for EPOLLOUT moves from the kernel socket to out_fd. */
static void hand_over_epollout(const struct epoll_reg *o, int out_fd)
{
	const uint32_t flags = o->events & ENTRY_FLAGS;
	struct epoll_event out_ev = { .events = flags | EPOLLOUT,
				      .data.u64 = o->data };
	struct epoll_event tcp_ev = { .events = flags, .data.u64 = o->data };

	real.epoll_ctl(o->epfd, EPOLL_CTL_ADD, out_fd, &out_ev);
	if (o->fd_gone)
		return;
	/* Not MOD: an EPOLLEXCLUSIVE entry cannot be changed. */
	real.epoll_ctl(o->epfd, EPOLL_CTL_DEL, o->fd, NULL);
	real.epoll_ctl(o->epfd, EPOLL_CTL_ADD, o->fd, &tcp_ev);
}

/* Under move_lock: see readiness_make_out_fd(). */
static int make_out_fd_locked(struct readiness *r)
{
	static bool logged;
	struct epoll_reg *o = NULL;
	int fd = readiness_out_fd(r);

	if (fd >= 0)
		return fd;
	fd = readiness_need_out_fd(r);
	if (fd < 0) {
		if (fd != -EBADF &&
		    !__atomic_exchange_n(&logged, true, __ATOMIC_RELAXED))
			log_warn("readiness: no descriptor left for a "
				 "connection's writability (%s): its kernel "
				 "socket stands for it, and may wake a wait "
				 "for room early",
				 strerror(-fd));
		return fd;
	}
	pthread_mutex_lock(&set.lock);
	while ((o = epoll_registry_next_owned(&set.g, r, o)))
		if (!o->disarmed && (o->events & ASKS_OUT))
			hand_over_epollout(o, fd);
	pthread_mutex_unlock(&set.lock);
	return fd;
}

/*
 * Under set.lock.  A fired EPOLLONESHOT registration does not wait: it
 * is armed again through ctl_upgraded(), which finds the kernel socket
 * standing for EPOLLOUT.
 */
bool readiness_epoll_unwatch_out_fd(struct readiness *r, int fd)
{
	struct epoll_reg *o = NULL;

	while ((o = epoll_registry_next_owned(&set.g, r, o)))
		if (!o->disarmed && (o->events & ASKS_OUT))
			return false;
	while ((o = epoll_registry_next_owned(&set.g, r, o)))
		real.epoll_ctl(o->epfd, EPOLL_CTL_DEL, fd, NULL);
	return true;
}

/*
 * Under move_lock: no registration is made, changed or moved meanwhile.
 * Skipped if either lock is busy: the next tick tries again.
 */
void readiness_epoll_give_back_out_fds(int64_t now)
{
	if (pthread_mutex_trylock(&move_lock))
		return;
	/* Tried too: a spinning epoll_wait() takes it every round. */
	if (!pthread_mutex_trylock(&set.lock)) {
		readiness_give_back_out_fds(now);
		pthread_mutex_unlock(&set.lock);
	}
	pthread_mutex_unlock(&move_lock);
}

int readiness_make_out_fd(struct readiness *r)
{
	int fd = readiness_out_fd(r);

	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&move_lock);
	fd = make_out_fd_locked(r);
	pthread_mutex_unlock(&move_lock);
	return fd;
}

/*
 * Registers (or changes, or removes) an upgraded fd as its entries: in_fd,
 * out_fd (until it is made, the kernel socket's entry asks for EPOLLOUT
 * in its stead), the kernel socket; and the set's entry for the hub.
 */
static int ctl_upgraded(int epfd, int op, int fd, struct readiness *r,
			struct epoll_event *ev)
{
	const uint32_t flags = ENTRY_FLAGS;
	struct epoll_event in_ev, out_ev, tcp_ev;
	struct epoll_event hub_ev = { .events = EPOLLIN | EPOLLET,
				      .data.u64 =
					      hub_data(readiness_hub_slot(r)) };
	int in_fd = readiness_in_fd(r), out_fd = readiness_out_fd(r);
	int ch_fd = readiness_hub_fd(r);
	int ret, hub_err = 0;
	bool tracked, hub_joined = false;

	if (op != EPOLL_CTL_DEL && ev && exclusive_refused(op, ev)) {
		errno = EINVAL;
		return -1;
	}
	/* The entries are the socket's: not fd's to change if not its own. */
	if (op != EPOLL_CTL_ADD && only_through_another_fd(epfd, fd, r)) {
		errno = ENOENT;
		return -1;
	}
	if (op == EPOLL_CTL_DEL) {
		ret = real.epoll_ctl(epfd, op, in_fd, NULL);
		if (out_fd >= 0)
			real.epoll_ctl(epfd, op, out_fd, NULL);
		real.epoll_ctl(epfd, op, fd, NULL);
		untrack(epfd, fd, r);
		leave_hub(epfd, ch_fd);
		return ret;
	}
	if (!ev) {
		errno = EFAULT;
		return -1;
	}
	if ((ev->events & ASKS_OUT) && out_fd < 0 && !room_to_send(r))
		out_fd = make_out_fd_locked(r);
	in_ev.events =
		(ev->events & flags) | (ev->events & ASKS_IN ? EPOLLIN : 0);
	out_ev.events =
		(ev->events & flags) | (ev->events & ASKS_OUT ? EPOLLOUT : 0);
	/*
	 * The kernel socket's entry reports only what epoll always does
	 * (EPOLLERR, EPOLLHUP: a reset): what comes there otherwise (the
	 * peer's close, a marker) is the progress thread's to read, and EOF
	 * comes with in_fd after the last byte.
	 */
	tcp_ev.events = ev->events & flags;
	if (out_fd < 0)
		tcp_ev.events |= ev->events & ASKS_OUT;
	in_ev.data = out_ev.data = tcp_ev.data = ev->data;
	/*
	 * The hub joins first: the entries below may wake the program, which
	 * may then close the set, and another file take its number.
	 */
	if (op == EPOLL_CTL_ADD) {
		__atomic_fetch_add(&set.made, 1, __ATOMIC_RELEASE);
		hub_joined =
			!real.epoll_ctl(epfd, EPOLL_CTL_ADD, ch_fd, &hub_ev) ||
			errno == EEXIST;
	}
	ret = real.epoll_ctl(epfd, op, in_fd, &in_ev);
	if (ret)
		return ret;
	if (out_fd >= 0) {
		ret = real.epoll_ctl(epfd, op, out_fd, &out_ev);
		/* Made after this registration was (readiness_need_out_fd()).
		 */
		if (ret && errno == ENOENT && op == EPOLL_CTL_MOD)
			ret = real.epoll_ctl(epfd, EPOLL_CTL_ADD, out_fd,
					     &out_ev);
	}
	if (!ret)
		ret = real.epoll_ctl(epfd, op, fd, &tcp_ev);
	/* A fired EPOLLONESHOT registration lost its kernel socket entry. */
	if (ret && errno == ENOENT && op == EPOLL_CTL_MOD)
		ret = real.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &tcp_ev);
	if (ret && op == EPOLL_CTL_ADD) {
		int err = errno;

		real.epoll_ctl(epfd, EPOLL_CTL_DEL, in_fd, NULL);
		if (out_fd >= 0)
			real.epoll_ctl(epfd, EPOLL_CTL_DEL, out_fd, NULL);
		real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		if (hub_joined)
			leave_hub(epfd, ch_fd);
		errno = err;
	}
	if (ret)
		return ret;
	/*
	 * The hub stays in the set while a connection on it is registered
	 * there (leave_hub_locked(), under the same lock): joined again here,
	 * in case another registration's removal took it out meanwhile.  A
	 * set that is gone by now (it was there when the hub joined) was
	 * closed by the program: nothing waits on it to be served.
	 */
	pthread_mutex_lock(&set.lock);
	tracked = track_locked(epfd, fd, r, NULL, ev);
	if (tracked && op == EPOLL_CTL_ADD &&
	    real.epoll_ctl(epfd, EPOLL_CTL_ADD, ch_fd, &hub_ev) &&
	    errno != EEXIST) {
		hub_err = errno;
		tracked = hub_joined && (hub_err == EBADF || hub_err == EINVAL);
	}
	pthread_mutex_unlock(&set.lock);
	if (!tracked) {
		/* No drain here reports it: its eventfds, kept by the thread.
		 */
		log_warn("epoll: fd %d: %s; the progress thread serves it, "
			 "and EPOLLONESHOT on it may report twice",
			 fd,
			 hub_err ? strerror(hub_err)
				 : "no memory to record its registration");
		readiness_watch(r);
		readiness_keep_out_fd(r);
	}
	/* Armed after the hub joined the set: its next event is seen. */
	readiness_want(r);
	return 0;
}

/*
 * A socket whose connect goes on in the background has no kernel entry
 * yet (an unconnected TCP socket would report EPOLLOUT and EPOLLHUP): its
 * registration waits in the registry, as epoll_ctl would have made it,
 * until readiness_resolve_pending().  -EAGAIN: nothing of sock's waits
 * there, and the change is made directly.
 */
static bool has_pending_locked(const struct sock *sock)
{
	return epoll_registry_next_owned(&set.g, sock, NULL);
}

static int ctl_pending(int epfd, int op, int fd, struct sock *sock,
		       struct epoll_event *ev)
{
	struct epoll_reg *o;
	int ret = 0;

	if (op != EPOLL_CTL_DEL && !ev)
		return -EFAULT;
	pthread_mutex_lock(&set.lock);
	/*
	 * Until readiness_resolve_pending() has taken them, which it does
	 * under move_lock, as held here, registrations made while the
	 * connect was pending stay the registry's, even once it is over.
	 */
	if (!connector_pending(sock) && !has_pending_locked(sock)) {
		ret = -EAGAIN;
		goto out;
	}
	o = find_locked(epfd, fd, sock);
	if (op != EPOLL_CTL_DEL && exclusive_refused(op, ev))
		ret = -EINVAL;
	else if (op == EPOLL_CTL_ADD && o)
		ret = -EEXIST;
	else if (op != EPOLL_CTL_ADD && !o)
		ret = -ENOENT;
	else if (op == EPOLL_CTL_MOD && (o->events & EPOLLEXCLUSIVE))
		ret = -EINVAL;
	else if (op == EPOLL_CTL_DEL)
		remove_locked(o);
	else if (!track_locked(epfd, fd, NULL, sock, ev))
		ret = -ENOMEM;
out:
	pthread_mutex_unlock(&set.lock);
	return ret;
}

/*
 * Takes one of sock's pending registrations out of the registry, into
 * *out.  One at a time, so that nothing is allocated: this runs in fork
 * handlers too (connector_share()), where an allocator may be locked.
 */
static bool take_one_pending(struct sock *sock, struct epoll_reg *out)
{
	struct epoll_reg *o;

	pthread_mutex_lock(&set.lock);
	o = epoll_registry_next_owned(&set.g, sock, NULL);
	if (o) {
		*out = *o;
		remove_locked(o);
	}
	pthread_mutex_unlock(&set.lock);
	return o;
}

void readiness_forget_pending(struct sock *sock)
{
	struct epoll_reg o;

	while (take_one_pending(sock, &o))
		;
}

/*
 * Under move_lock: a connection the peer moved to TCP before this ran
 * (readiness_released()) takes plain registrations of its kernel socket.
 */
void readiness_resolve_pending(struct sock *sock, struct readiness *r)
{
	struct epoll_event ev;
	struct epoll_reg o;

	pthread_mutex_lock(&move_lock);
	if (r && readiness_released(r))
		r = NULL;
	while (take_one_pending(sock, &o)) {
		ev.events = o.events;
		ev.data.u64 = o.data;
		/*
		 * Its fd closed meanwhile: the entry the kernel would have kept
		 * under the number is made through the dup.
		 */
		if (r)
			ctl_upgraded(o.epfd, EPOLL_CTL_ADD, own_fd(&o), r, &ev);
		else
			real.epoll_ctl(o.epfd, EPOLL_CTL_ADD, own_fd(&o), &ev);
	}
	pthread_mutex_unlock(&move_lock);
}

static struct early_reg *early_find_locked(int epfd, int fd)
{
	unsigned int i;

	for (i = 0; i < early.count; i++)
		if (early.v[i].epfd == epfd && early.v[i].fd == fd)
			return &early.v[i];
	return NULL;
}

/*
 * After the kernel made a change to a socket not connected yet: the copy
 * follows it.  Out of memory, the copy is not made, and that connection
 * keeps the kernel's registration as it did before copies were kept.
 */
static void early_note(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct early_reg *e, *v;
	struct sock *sock;

	if (op != EPOLL_CTL_ADD) {
		if (!__atomic_load_n(&early.count, __ATOMIC_ACQUIRE))
			return;
		pthread_mutex_lock(&set.lock);
		e = early_find_locked(epfd, fd);
		if (e && op == EPOLL_CTL_DEL)
			early_remove_locked((unsigned int)(e - early.v));
		else if (e)
			e->ev = *ev;
		pthread_mutex_unlock(&set.lock);
		return;
	}
	sock = fd_table_get(fd);
	if (!sock)
		return;
	if (__atomic_load_n(&sock->published, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE) ||
	    connector_started(sock))
		goto out;
	pthread_mutex_lock(&set.lock);
	e = early_find_locked(epfd, fd);
	if (!e && early.count == early.cap) {
		v = realloc(early.v, (early.cap * 2 + 8) * sizeof(*v));
		if (v) {
			early.v = v;
			early.cap = early.cap * 2 + 8;
		}
	}
	if (!e && early.count < early.cap) {
		e = &early.v[early.count];
		__atomic_store_n(&early.count, early.count + 1,
				 __ATOMIC_RELEASE);
	}
	if (e)
		*e = (struct early_reg){ sock, epfd, fd, *ev };
	pthread_mutex_unlock(&set.lock);
out:
	sock_put(sock);
}

/* Takes one of sock's copies out, into *out. */
static bool take_one_early(struct sock *sock, struct early_reg *out)
{
	unsigned int i;
	bool found = false;

	if (!__atomic_load_n(&early.count, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&set.lock);
	for (i = 0; i < early.count && !found; i++) {
		if (early.v[i].sock == sock) {
			*out = early.v[i];
			early_remove_locked(i);
			found = true;
		}
	}
	pthread_mutex_unlock(&set.lock);
	return found;
}

void readiness_early_pend(struct sock *sock)
{
	struct early_reg e;
	bool kept;

	pthread_mutex_lock(&move_lock);
	while (take_one_early(sock, &e)) {
		/* Gone from the kernel (its set closed meanwhile): nothing. */
		if (real.epoll_ctl(e.epfd, EPOLL_CTL_DEL, e.fd, NULL))
			continue;
		pthread_mutex_lock(&set.lock);
		kept = track_locked(e.epfd, e.fd, NULL, sock, &e.ev);
		pthread_mutex_unlock(&set.lock);
		if (!kept)
			real.epoll_ctl(e.epfd, EPOLL_CTL_ADD, e.fd, &e.ev);
	}
	pthread_mutex_unlock(&move_lock);
}

void readiness_early_upgrade(struct sock *sock, struct readiness *r)
{
	struct early_reg e;

	pthread_mutex_lock(&move_lock);
	while (take_one_early(sock, &e)) {
		if (real.epoll_ctl(e.epfd, EPOLL_CTL_DEL, e.fd, NULL))
			continue;
		if (ctl_upgraded(e.epfd, EPOLL_CTL_ADD, e.fd, r, &e.ev)) {
			log_warn("epoll: fd %d made before its connect, cannot "
				 "follow it onto RDMA (%s); its events come "
				 "late",
				 e.fd, strerror(errno));
			real.epoll_ctl(e.epfd, EPOLL_CTL_ADD, e.fd, &e.ev);
		}
	}
	pthread_mutex_unlock(&move_lock);
}

void readiness_early_forget(struct sock *sock)
{
	struct early_reg e;

	while (take_one_early(sock, &e))
		;
}

/*
 * The sock of fd, with a reference, if its registrations may be an
 * upgraded connection's: a pending connect, or a connection of this
 * process, whatever its path.  A connection that has just moved to TCP
 * keeps its entries until readiness_release() turns them into the
 * kernel socket's: until then a DEL must remove all of them, or the release
 * would add back the entry the program removed.
 */
static struct sock *registered_sock(int fd)
{
	struct sock *sock = fd_table_get(fd);

	if (!sock)
		return NULL;
	if (sock->conn && !conn_alive(sock->conn)) {
		sock_put(sock);
		return readiness_upgraded_sock(fd);
	}
	if (sock->conn || connector_started(sock))
		return sock;
	sock_put(sock);
	return NULL;
}

int readiness_epoll_ctl(const struct config *cfg, int epfd, int op, int fd,
			struct epoll_event *ev)
{
	struct sock *sock = cfg->enabled ? registered_sock(fd) : NULL;
	struct readiness *r;
	int ret;

	if (!sock) {
		ret = real.epoll_ctl(epfd, op, fd, ev);
		if (!ret && cfg->enabled && cfg->rdma)
			early_note(epfd, op, fd, ev);
		return ret;
	}
	/*
	 * Under move_lock, as the end of a background connect hands its
	 * pending registrations on: a change is made either to them or
	 * after them, never lost between the two.
	 */
	pthread_mutex_lock(&move_lock);
	ret = ctl_pending(epfd, op, fd, sock, ev);
	if (ret == -EAGAIN) {
		r = sock->conn ? conn_readiness(sock->conn) : NULL;
		if (r && op == EPOLL_CTL_ADD && !readiness_released(r) &&
		    in_set_through_another_fd(epfd, fd, r)) {
			pthread_mutex_unlock(&move_lock);
			conn_make_plain(sock->conn,
					ROCESHIM_DOWNGRADE_EPOLL_DUP);
			/* In a fork child, as adopt_inherited() does. */
			if (!conn_alive(sock->conn))
				readiness_release(r);
			pthread_mutex_lock(&move_lock);
		}
		if (!r || readiness_released(r))
			ret = real.epoll_ctl(epfd, op, fd, ev);
		else
			ret = ctl_upgraded(epfd, op, fd, r, ev);
	} else if (ret) {
		errno = -ret;
		ret = -1;
	}
	pthread_mutex_unlock(&move_lock);
	sock_put(sock);
	return ret;
}

/*
 * An upgraded fd's entries may come back as up to three events with the
 * same epoll_data: fold them into one, as one socket would report, drain
 * a hub that fired (its events join these, up to max in all), and disarm
 * the rest of a fired EPOLLONESHOT registration.  If the kernel filled
 * every slot, it may have kept some entries back: each event gets what
 * its registration's other entries say too.  An event left with nothing
 * to report is dropped.
 */
static int fold_events(int epfd, struct epoll_event *events, int n, int max)
{
	int i, out, kept = 0;
	bool full = n == max;
	uint64_t hubs = 0;
	unsigned int slot;

	if (n <= 0 || !__atomic_load_n(&set.made, __ATOMIC_ACQUIRE))
		return n;
	out = event_fold(events, n);
	for (i = 0; i < out; i++) {
		slot = hub_slot_of(events[i].data.u64);
		if (slot < CQ_HUB_SLOTS)
			hubs |= 1ull << slot;
		else
			events[kept++] = events[i];
	}
	if (hubs)
		adopt_inherited_in(epfd);
	out = hubs ? drain_into(epfd, hubs, events, kept, max) : kept;
	kept = 0;
	for (i = 0; i < out; i++)
		if (fired(epfd, &events[i], full))
			events[kept++] = events[i];
	return kept;
}

/* The program's call itself, with timeout_ms, or ts for epoll_pwait2. */
static int wait_once(int epfd, struct epoll_event *events, int maxevents,
		     int timeout_ms, const struct timespec *ts,
		     const sigset_t *sigmask, enum readiness_wait_kind kind)
{
	switch (kind) {
	case READINESS_EPOLL_WAIT:
		return real.epoll_wait(epfd, events, maxevents, timeout_ms);
	case READINESS_EPOLL_PWAIT:
		return real.epoll_pwait(epfd, events, maxevents, timeout_ms,
					sigmask);
	default:
		return real.epoll_pwait2(epfd, events, maxevents, ts, sigmask);
	}
}

/*
 * Waits again, for what is left of the timeout, when every event was a
 * hub's that brought nothing to report, as the kernel does for an entry
 * that turns out not ready.
 */
static int wait_folded(int epfd, struct epoll_event *events, int maxevents,
		       int timeout_ms, const struct timespec *ts,
		       const sigset_t *sigmask, enum readiness_wait_kind kind)
{
	int64_t deadline = timeout_ms > 0 ? clock_ms() + timeout_ms : -1;
	struct timespec left;
	int n;

	if (ts)
		left = *ts;
	for (;;) {
		n = wait_once(epfd, events, maxevents, timeout_ms,
			      ts ? &left : NULL, sigmask, kind);
		if (n <= 0)
			return n;
		n = fold_events(epfd, events, n, maxevents);
		if (n ||
		    !wait_time_left(&timeout_ms, deadline, ts ? &left : NULL))
			return n;
	}
}

/*
 * A wait on a set that holds upgraded connections first polls their
 * completion queues, as a blocking read does (spin.h): what arrives within
 * the budget is reported without the completion hub's wake-up, which
 * costs the waiter a sleep and the kernel a wake-up.  The budget is the
 * waiting thread's (readiness_spin_begin()), and it polls only while it
 * holds a spin slot.  The set itself is asked every READINESS_SPIN_ROUNDS
 * rounds, for its other entries.
 *
 * One round over epfd's upgraded connections: 1 if one raised what the
 * program waits for, 0 if none did, -1 if the set holds none.  A
 * level-triggered registration is reported in *ev, as a drain of the hub
 * would (report_in_set()); otherwise ev->events is 0, and the
 * eventfds, now set, report it.  *polled counts the connections polled.
 */
static int spin_round(int epfd, struct epoll_event *ev, unsigned int *polled)
{
	struct transport_readiness t;
	struct epoll_reg *o = NULL;
	enum readiness_told told;
	int found = -1;
	bool level;

	pthread_mutex_lock(&set.lock);
	while ((o = epoll_registry_next(&set.g, o))) {
		uint32_t want = (o->events & ASKS_IN ? EPOLLIN : 0) |
				(o->events & ASKS_OUT ? EPOLLOUT : 0);

		if (o->epfd != epfd || !o->r || o->disarmed || !want ||
		    !readiness_alive(o->r) || readiness_released(o->r))
			continue;
		found = 0;
		(*polled)++;
		if (!readiness_has_news(o->r, want))
			continue;
		level = !(o->events & (EPOLLET | EPOLLONESHOT));
		told = level && (want & EPOLLIN) && sole_locked(o)
			       ? READINESS_TOLD_EPOLL
			       : READINESS_TOLD_NOBODY;
		if (!(readiness_poll_raised(o->r, told, &t) & want))
			continue;
		found = 1;
		ev->data.u64 = o->data;
		ev->events = level ? as_asked(events_of(&t), o->events) : 0;
		break;
	}
	pthread_mutex_unlock(&set.lock);
	return found;
}

/* The set's own events after the first of events, folded with it. */
static int ask_set(int epfd, struct epoll_event *events, int maxevents,
		   int first, const sigset_t *sigmask,
		   enum readiness_wait_kind kind)
{
	const struct timespec zero = { 0 };
	int n = 0;

	if (first < maxevents)
		n = wait_once(epfd, events + first, maxevents - first, 0, &zero,
			      sigmask, kind);
	if (n < 0 && !first)
		return n;
	return fold_events(epfd, events, first + (n > 0 ? n : 0), maxevents);
}

/*
 * Polls until w->end_us: the events the set then reports
 * (folded), 0 if none came, or -1 with errno (EINTR: a signal that
 * sigmask lets through).  The set is asked in the first round, which
 * also checks the program's arguments as the kernel does; an event found
 * by polling after it goes first in events, and the set's own fill the
 * rest.
 */
static int spin_wait(int epfd, struct epoll_event *events, int maxevents,
		     const sigset_t *sigmask, enum readiness_wait_kind kind,
		     struct wait_spin *w)
{
	unsigned int round, polled = 0;
	struct epoll_event found_ev;
	int found, first, n;

	for (round = 0;; round++) {
		found = spin_round(epfd, &found_ev, &polled);
		if (found < 0)
			return 0;
		/* Nothing goes into events before the kernel has checked it. */
		first = found && found_ev.events && round;
		if (found || round % READINESS_SPIN_ROUNDS == 0) {
			if (first)
				events[0] = found_ev;
			n = ask_set(epfd, events, maxevents, first, sigmask,
				    kind);
			if (n)
				return n;
			/* The wait that sleeps then returns EINTR at once. */
			if (wait_time_signal_pending(sigmask))
				return 0;
		}
		if (polled < READINESS_SPIN_POLLS_PER_CLOCK &&
		    round % READINESS_SPIN_ROUNDS != READINESS_SPIN_ROUNDS - 1)
			continue;
		polled = 0;
		w->seen_us = clock_us();
		if (w->seen_us >= w->end_us)
			return 0;
	}
}

/*
 * While it polls, the thread blocks the asynchronous signals: each wait
 * after that is an epoll_pwait or epoll_pwait2 with the program's mask,
 * or the thread's own.
 */
static int wait_spinning(const struct config *cfg, int epfd,
			 struct epoll_event *events, int maxevents,
			 int timeout_ms, const struct timespec *ts,
			 const sigset_t *sigmask, enum readiness_wait_kind kind)
{
	struct timespec left;
	struct wait_spin w;
	int n = 0;

	if (readiness_spin_begin(&w, cfg->spin_us, timeout_ms,
				 maxevents > 0 && wait_time_valid(ts))) {
		if (!sigmask)
			sigmask = &w.old;
		if (kind == READINESS_EPOLL_WAIT)
			kind = READINESS_EPOLL_PWAIT;
		n = spin_wait(epfd, events, maxevents, sigmask, kind, &w);
		if (!n)
			readiness_spin_stop(&w);
	}
	if (!n) {
		if (ts)
			left = *ts;
		if (!w.blocked ||
		    wait_time_take_spent(&timeout_ms, ts ? &left : NULL,
					 w.seen_us - w.start_us))
			n = wait_folded(epfd, events, maxevents, timeout_ms,
					ts ? &left : NULL, sigmask, kind);
	}
	readiness_spin_end(&w, n);
	return n;
}

/*
 * Counted: while another thread waits in here, a connection's in_fd must
 * not lag, and a wait that starts settles those that do.
 */
int readiness_epoll_wait(const struct config *cfg, int epfd,
			 struct epoll_event *events, int maxevents,
			 int timeout_ms, const struct timespec *ts,
			 const sigset_t *sigmask, enum readiness_wait_kind kind)
{
	int n;

	if (kind == READINESS_EPOLL_PWAIT2)
		timeout_ms = ts ? wait_time_ms(ts) : -1;
	if (!cfg->rdma)
		return wait_folded(epfd, events, maxevents, timeout_ms, ts,
				   sigmask, kind);
	if (readiness_epoll_wait_begin())
		readiness_epoll_settle_all();
	if (__atomic_load_n(&set.made, __ATOMIC_RELAXED))
		n = wait_spinning(cfg, epfd, events, maxevents, timeout_ms, ts,
				  sigmask, kind);
	else
		n = wait_folded(epfd, events, maxevents, timeout_ms, ts,
				sigmask, kind);
	readiness_epoll_wait_end();
	return n;
}
