// SPDX-License-Identifier: MIT
/*
 * Exported wrappers for readiness: poll, select and epoll.  For a kernel
 * TCP socket the kernel's readiness is the truth and these pass straight
 * through.  An upgraded socket's readiness lives in its conn's two
 * eventfds (in_fd: data; out_fd: credit) and, for EOF and resets, in its
 * kernel socket: epoll registers all three in the program's set with the
 * program's epoll_data, beside the completion channel that wakes the
 * program's epoll_wait itself (epoll_reg.h), and poll and select look at
 * them in place of the socket.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "conn.h"
#include "epoll_reg.h"
#include "log.h"
#include "real.h"
#include "shim.h"

/* The conn of fd if it is upgraded (with a sock reference), else NULL. */
static struct sock *upgraded_sock(int fd)
{
	struct sock *sock = shim_lookup(fd);

	if (sock && !sock->conn) {
		sock_put(sock);
		return NULL;
	}
	return sock;
}

#define POLL_IN_EVENTS	(POLLIN | POLLRDNORM | POLLPRI | POLLRDHUP)
#define POLL_OUT_EVENTS (POLLOUT | POLLWRNORM)

/*
 * What only the kernel socket can tell: the peer hung up or reset (no data
 * ever flows on it after the upgrade, so its POLLIN means exactly that).
 */
#define POLL_KERNEL_EVENTS (POLLIN | POLLRDHUP | POLLHUP | POLLERR)

/* A timespec timeout in whole milliseconds, rounded up. */
static int timespec_ms(const struct timespec *ts)
{
	int64_t ms = ts->tv_sec * 1000ll + (ts->tv_nsec + 999999) / 1000000;

	if (ms < 0)
		return 0;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/*
 * After a wake-up that brought nothing to report: what is left of a wait
 * of *timeout_ms (-1: none) that ends at deadline, in *timeout_ms and, if
 * ts is given, in *ts.  false: nothing is left.
 */
static bool wait_left(int *timeout_ms, int64_t deadline, struct timespec *ts)
{
	if (*timeout_ms < 0)
		return true;
	if (!*timeout_ms || !(*timeout_ms = clock_ms_left(deadline)))
		return false;
	if (ts) {
		ts->tv_sec = *timeout_ms / 1000;
		ts->tv_nsec = *timeout_ms % 1000 * 1000000l;
	}
	return true;
}

/*
 * The entries of an upgraded fd in a substituted poll set: its two
 * eventfds, the kernel socket (watched only for hang-up and error, which
 * the TCP connection beside the queue pair reports as TCP would), and its
 * completion channel, whose event the caller serves, as epoll_wait does.
 */
enum {
	POLL_IN_FD,
	POLL_OUT_FD,
	POLL_SOCKET,
	POLL_CHANNEL,
	POLL_ENTRIES
};

/*
 * Fills the entries of upgraded sock for the program's entry pfd; the
 * caller ends the conn_poll_begin() with conn_poll_end().
 */
static void poll_entries(struct pollfd *tmp, const struct pollfd *pfd,
			 struct sock *sock)
{
	struct conn *c = sock->conn;

	conn_poll_begin(c);
	tmp[POLL_IN_FD].fd = c->in_fd;
	tmp[POLL_IN_FD].events = pfd->events & POLL_IN_EVENTS ? POLLIN : 0;
	tmp[POLL_OUT_FD].fd = c->out_fd;
	tmp[POLL_OUT_FD].events = pfd->events & POLL_OUT_EVENTS ? POLLOUT : 0;
	tmp[POLL_SOCKET].fd = pfd->fd;
	tmp[POLL_SOCKET].events = pfd->events & (POLLIN | POLLRDHUP);
	tmp[POLL_CHANNEL].fd = transport_event_fd(c->t);
	tmp[POLL_CHANNEL].events = POLLIN;
}

/*
 * The program's revents for upgraded sock from its entries' results,
 * after serving its channel if that fired.
 */
static short poll_fold(const struct pollfd *tmp, short ev, struct sock *sock)
{
	struct transport_readiness t;
	short revents = 0, r;

	if (tmp[POLL_IN_FD].revents & POLLIN)
		revents |= ev & (POLLIN | POLLRDNORM);
	if (tmp[POLL_OUT_FD].revents & POLLOUT)
		revents |= ev & POLL_OUT_EVENTS;
	r = tmp[POLL_SOCKET].revents & POLL_KERNEL_EVENTS;
	if (r & POLLIN)
		r = (r & ~POLLIN) | (ev & (POLLIN | POLLRDNORM));
	revents |= r;
	if (tmp[POLL_CHANNEL].revents & POLLIN) {
		conn_serve_event(sock->conn, false, &t);
		if (t.data_or_error)
			revents |= ev & (POLLIN | POLLRDNORM);
		if (t.writable)
			revents |= ev & POLL_OUT_EVENTS;
	}
	return revents;
}

/*
 * poll() over a set where some fds are upgraded: each of those becomes its
 * POLL_ENTRIES entries, and their results fold back into the program's
 * entry.  When only channels fired, and brought nothing the program
 * waits for, the wait goes on for what is left of its timeout.
 */
static int poll_substituted(struct pollfd *fds, nfds_t nfds,
			    struct sock **socks, const struct timespec *tmo,
			    const sigset_t *sigmask, int timeout_ms, bool ppoll)
{
	struct pollfd *tmp = calloc(POLL_ENTRIES * nfds + 1, sizeof(*tmp));
	const struct timespec no_wait = { 0 };
	struct timespec left;
	int64_t deadline = -1;
	nfds_t i, j = 0, k;
	int ret, ready = 0;
	bool dead = false;

	if (!tmp)
		return -ENOMEM;
	for (i = 0; i < nfds; i++) {
		if (!socks[i]) {
			tmp[j++] = fds[i];
			continue;
		}
		if (conn_alive(socks[i]->conn)) {
			poll_entries(&tmp[j], &fds[i], socks[i]);
		} else {
			/* Ignored entries: its result is known. */
			for (k = 0; k < POLL_ENTRIES; k++)
				tmp[j + k].fd = -1;
			dead = true;
		}
		j += POLL_ENTRIES;
	}
	if (ppoll)
		timeout_ms = tmo ? timespec_ms(tmo) : -1;
	if (dead) {
		tmo = &no_wait;
		timeout_ms = 0;
	}
	if (timeout_ms > 0)
		deadline = clock_ms() + timeout_ms;
	for (;;) {
		ret = ppoll ? real.ppoll(tmp, j, tmo, sigmask)
			    : real.poll(tmp, j, timeout_ms);
		if (ret < 0) {
			ret = -errno;
			goto out;
		}
		ready = 0;
		for (i = 0, j = 0; i < nfds; i++) {
			short ev = fds[i].events;

			if (!socks[i]) {
				fds[i].revents = tmp[j++].revents;
			} else if (!conn_alive(socks[i]->conn)) {
				/* Inherited across fork: as a reset socket. */
				j += POLL_ENTRIES;
				fds[i].revents = (ev & (POLLIN | POLLRDNORM |
							POLL_OUT_EVENTS)) |
						 POLLERR | POLLHUP;
			} else {
				fds[i].revents =
					poll_fold(&tmp[j], ev, socks[i]);
				j += POLL_ENTRIES;
			}
			if (fds[i].revents)
				ready++;
		}
		/* Only channels fired: wait for what is left. */
		if (ready || !ret ||
		    !wait_left(&timeout_ms, deadline, tmo ? &left : NULL))
			break;
		if (tmo)
			tmo = &left;
	}
	ret = ready;
out:
	for (i = 0; i < nfds; i++)
		if (socks[i] && conn_alive(socks[i]->conn))
			conn_poll_end(socks[i]->conn);
	free(tmp);
	return ret;
}

/* Looks up every fd; returns true if any is upgraded (socks filled). */
static bool find_upgraded(struct pollfd *fds, nfds_t nfds, struct sock ***out)
{
	struct sock **socks = NULL;
	nfds_t i;

	if (!shim_config.enabled)
		return false;
	for (i = 0; i < nfds; i++) {
		struct sock *sock;

		if (fds[i].fd < 0)
			continue;
		sock = upgraded_sock(fds[i].fd);
		if (!sock)
			continue;
		if (!socks)
			socks = calloc(nfds, sizeof(*socks));
		if (!socks) {
			sock_put(sock);
			continue;
		}
		socks[i] = sock;
	}
	*out = socks;
	return socks != NULL;
}

static int poll_unnested(struct pollfd *fds, nfds_t nfds,
			 const struct timespec *tmo, const sigset_t *sigmask,
			 int timeout_ms, bool ppoll)
{
	struct sock **socks;
	nfds_t i;
	int ret;

	if (!find_upgraded(fds, nfds, &socks))
		return ppoll ? real.ppoll(fds, nfds, tmo, sigmask)
			     : real.poll(fds, nfds, timeout_ms);
	ret = poll_substituted(fds, nfds, socks, tmo, sigmask, timeout_ms,
			       ppoll);
	for (i = 0; i < nfds; i++)
		if (socks[i])
			sock_put(socks[i]);
	free(socks);
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

/*
 * An epoll set watched by poll() or select() is waited on as
 * epoll_wait() would: counted, and settled first (conn_serve_event()).
 * Otherwise an event that epoll_wait() reported and the program left unread
 * would not make the set readable.
 */
static bool nested_wait_begin(bool nested)
{
	if (nested && conn_epoll_wait_begin())
		epoll_reg_settle();
	return nested;
}

static void nested_wait_end(bool nested)
{
	if (nested)
		conn_epoll_wait_end();
}

static int poll_any(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		    const sigset_t *sigmask, int timeout_ms, bool ppoll)
{
	bool nested = nested_wait_begin(shim_config.rdma &&
					epoll_reg_any_set(fds, nfds));
	int ret;

	ret = poll_unnested(fds, nfds, tmo, sigmask, timeout_ms, ppoll);
	nested_wait_end(nested);
	return ret;
}

int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo,
		const sigset_t *ss, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	shim_ensure_init();
	return poll_any(fds, nfds, NULL, NULL, timeout, false);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		      const struct timespec *tmo, const sigset_t *sigmask)
{
	shim_ensure_init();
	return poll_any(fds, nfds, tmo, sigmask, 0, true);
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

/* Any upgraded fd among the first nfds of the three sets? */
static bool sets_have_upgraded(int nfds, fd_set *rd, fd_set *wr, fd_set *ex)
{
	int fd;

	if (!shim_config.enabled)
		return false;
	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		struct sock *sock;

		if (!(rd && FD_ISSET(fd, rd)) && !(wr && FD_ISSET(fd, wr)) &&
		    !(ex && FD_ISSET(fd, ex)))
			continue;
		sock = upgraded_sock(fd);
		if (sock) {
			sock_put(sock);
			return true;
		}
	}
	return false;
}

/* Any epoll set among the first nfds of the three sets (see poll_any())? */
static bool sets_have_epoll_set(int nfds, fd_set *rd, fd_set *wr, fd_set *ex)
{
	struct pollfd pfd;

	if (!shim_config.rdma)
		return false;
	for (pfd.fd = 0; pfd.fd < nfds && pfd.fd < FD_SETSIZE; pfd.fd++)
		if (((rd && FD_ISSET(pfd.fd, rd)) ||
		     (wr && FD_ISSET(pfd.fd, wr)) ||
		     (ex && FD_ISSET(pfd.fd, ex))) &&
		    epoll_reg_any_set(&pfd, 1))
			return true;
	return false;
}

/* select() as poll(), so that upgraded fds are substituted. */
static int select_as_poll(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			  const struct timespec *tmo, const sigset_t *sigmask)
{
	struct pollfd pfds[FD_SETSIZE];
	nfds_t n = 0, i;
	int fd, ret;

	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		short events = 0;

		if (rd && FD_ISSET(fd, rd))
			events |= POLLIN;
		if (wr && FD_ISSET(fd, wr))
			events |= POLLOUT;
		if (ex && FD_ISSET(fd, ex))
			events |= POLLPRI;
		if (events) {
			pfds[n].fd = fd;
			pfds[n++].events = events;
		}
	}
	ret = poll_any(pfds, n, tmo, sigmask, 0, true);
	if (ret < 0)
		return ret;
	if (rd)
		FD_ZERO(rd);
	if (wr)
		FD_ZERO(wr);
	if (ex)
		FD_ZERO(ex);
	ret = 0;
	for (i = 0; i < n; i++) {
		short r = pfds[i].revents;

		if (rd && r & (POLLIN | POLLHUP | POLLERR))
			FD_SET(pfds[i].fd, rd), ret++;
		if (wr && r & (POLLOUT | POLLERR))
			FD_SET(pfds[i].fd, wr), ret++;
		if (ex && r & POLLPRI)
			FD_SET(pfds[i].fd, ex), ret++;
	}
	return ret;
}

/* select() and pselect() without upgraded fds: see poll_any(). */
static int select_plain(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			struct timeval *timeout)
{
	bool nested = nested_wait_begin(sets_have_epoll_set(nfds, rd, wr, ex));
	int ret = real.select(nfds, rd, wr, ex, timeout);

	nested_wait_end(nested);
	return ret;
}

static int pselect_plain(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			 const struct timespec *timeout,
			 const sigset_t *sigmask)
{
	bool nested = nested_wait_begin(sets_have_epoll_set(nfds, rd, wr, ex));
	int ret = real.pselect(nfds, rd, wr, ex, timeout, sigmask);

	nested_wait_end(nested);
	return ret;
}

SHIM_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
		       struct timeval *timeout)
{
	struct timespec ts;

	shim_ensure_init();
	if (!sets_have_upgraded(nfds, rd, wr, ex))
		return select_plain(nfds, rd, wr, ex, timeout);
	if (timeout) {
		ts.tv_sec = timeout->tv_sec;
		ts.tv_nsec = timeout->tv_usec * 1000;
	}
	return select_as_poll(nfds, rd, wr, ex, timeout ? &ts : NULL, NULL);
}

SHIM_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			const struct timespec *timeout, const sigset_t *sigmask)
{
	shim_ensure_init();
	if (!sets_have_upgraded(nfds, rd, wr, ex))
		return pselect_plain(nfds, rd, wr, ex, timeout, sigmask);
	return select_as_poll(nfds, rd, wr, ex, timeout, sigmask);
}

/* Upgraded registrations made so far: epoll_wait merges only if any. */
static unsigned long upgraded_registrations;

/*
 * Registers (or changes, or removes) an upgraded fd as four entries with
 * the program's epoll_data: its two eventfds for EPOLLIN and EPOLLOUT,
 * the kernel socket itself for what only it can tell: the peer hung up or
 * reset (its EPOLLIN and EPOLLRDHUP, and the EPOLLHUP and EPOLLERR that
 * epoll always reports; no data flows on it after the upgrade), and the
 * completion channel for EPOLL_REG_CHANNEL, level-triggered whatever the
 * program asked: epoll_reg_fired() serves every event it reports.  A conn
 * inherited across fork gets no channel entry: nothing may serve it here.
 */
static int epoll_ctl_upgraded(int epfd, int op, int fd, struct conn *c,
			      struct epoll_event *ev)
{
	const uint32_t flags =
		EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE | EPOLLWAKEUP;
	struct epoll_event in_ev, out_ev, tcp_ev, ch_ev;
	int ch_fd = transport_event_fd(c->t);
	bool alive = conn_alive(c);
	int ret;

	if (op == EPOLL_CTL_DEL) {
		ret = real.epoll_ctl(epfd, op, c->in_fd, NULL);
		real.epoll_ctl(epfd, op, c->out_fd, NULL);
		real.epoll_ctl(epfd, op, fd, NULL);
		if (alive)
			real.epoll_ctl(epfd, op, ch_fd, NULL);
		epoll_reg_untrack(epfd, fd);
		return ret;
	}
	if (!ev) {
		errno = EFAULT;
		return -1;
	}
	in_ev.events = (ev->events & flags) | (ev->events & EPOLLIN);
	out_ev.events = (ev->events & flags) | (ev->events & EPOLLOUT);
	tcp_ev.events =
		(ev->events & flags) | (ev->events & (EPOLLIN | EPOLLRDHUP));
	ch_ev.events = EPOLL_REG_CHANNEL |
		       (ev->events & (EPOLLEXCLUSIVE | EPOLLWAKEUP));
	in_ev.data = out_ev.data = tcp_ev.data = ch_ev.data = ev->data;
	ret = real.epoll_ctl(epfd, op, c->in_fd, &in_ev);
	if (ret)
		return ret;
	ret = real.epoll_ctl(epfd, op, c->out_fd, &out_ev);
	if (!ret)
		ret = real.epoll_ctl(epfd, op, fd, &tcp_ev);
	/* A fired EPOLLONESHOT registration lost its kernel socket entry. */
	if (ret && errno == ENOENT && op == EPOLL_CTL_MOD)
		ret = real.epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &tcp_ev);
	if (!ret && alive)
		ret = real.epoll_ctl(epfd, op, ch_fd, &ch_ev);
	if (ret && op == EPOLL_CTL_ADD) {
		int err = errno;

		real.epoll_ctl(epfd, EPOLL_CTL_DEL, c->in_fd, NULL);
		real.epoll_ctl(epfd, EPOLL_CTL_DEL, c->out_fd, NULL);
		real.epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		errno = err;
	}
	if (ret)
		return ret;
	if (op == EPOLL_CTL_ADD)
		__atomic_fetch_add(&upgraded_registrations, 1,
				   __ATOMIC_RELAXED);
	if (!epoll_reg_track(epfd, fd, c, ev) && alive) {
		/* Nothing could serve the channel here: let the thread. */
		log_warn("epoll: out of memory; fd %d is served by the "
			 "progress thread, and EPOLLONESHOT on it may report "
			 "twice",
			 fd);
		real.epoll_ctl(epfd, EPOLL_CTL_DEL, ch_fd, NULL);
		conn_watch(c);
	}
	/* Armed after the channel joined the set: its next event is seen. */
	conn_want_readiness(c);
	return 0;
}

/*
 * An upgraded fd's entries may come back as up to four events with the
 * same epoll_data: fold them into one, as one socket would report, serve
 * a channel that fired, and disarm the rest of a fired EPOLLONESHOT
 * registration.  An event left with nothing to report is dropped.
 */
static int merge_events(int epfd, struct epoll_event *events, int n)
{
	int i, j, out = 0, kept = 0;

	if (n <= 0 ||
	    !__atomic_load_n(&upgraded_registrations, __ATOMIC_RELAXED))
		return n;
	for (i = 0; i < n; i++) {
		for (j = 0; j < out; j++) {
			if (events[j].data.u64 == events[i].data.u64) {
				events[j].events |= events[i].events;
				break;
			}
		}
		if (j == out)
			events[out++] = events[i];
	}
	for (i = 0; i < out; i++)
		if (epoll_reg_fired(epfd, &events[i]))
			events[kept++] = events[i];
	return kept;
}

enum epoll_wait_kind {
	WAIT,
	PWAIT,
	PWAIT2
};

/*
 * The epoll_wait family: waits again, for what is left of the timeout,
 * when every event was a channel's that brought nothing to report, as
 * the kernel does for an entry that turns out not ready.  timeout_ms: -1
 * for none; for PWAIT2, ts is the same timeout (NULL for none), and is
 * updated in place.
 */
static int epoll_wait_rewaiting(int epfd, struct epoll_event *events,
				int maxevents, int timeout_ms,
				struct timespec *ts, const sigset_t *sigmask,
				enum epoll_wait_kind kind)
{
	int64_t deadline = timeout_ms > 0 ? clock_ms() + timeout_ms : -1;
	int n;

	for (;;) {
		switch (kind) {
		case WAIT:
			n = real.epoll_wait(epfd, events, maxevents,
					    timeout_ms);
			break;
		case PWAIT:
			n = real.epoll_pwait(epfd, events, maxevents,
					     timeout_ms, sigmask);
			break;
		case PWAIT2:
			n = real.epoll_pwait2(epfd, events, maxevents, ts,
					      sigmask);
			break;
		}
		if (n <= 0)
			return n;
		n = merge_events(epfd, events, n);
		if (n || !wait_left(&timeout_ms, deadline, ts))
			return n;
	}
}

/*
 * Counted for conn_serve_event(): while another thread waits in here, a
 * conn's in_fd must not lag, and a wait that starts settles those that do.
 */
static int epoll_wait_merged(int epfd, struct epoll_event *events,
			     int maxevents, int timeout_ms, struct timespec *ts,
			     const sigset_t *sigmask, enum epoll_wait_kind kind)
{
	int n;

	if (!shim_config.rdma)
		return epoll_wait_rewaiting(epfd, events, maxevents, timeout_ms,
					    ts, sigmask, kind);
	if (conn_epoll_wait_begin())
		epoll_reg_settle();
	n = epoll_wait_rewaiting(epfd, events, maxevents, timeout_ms, ts,
				 sigmask, kind);
	conn_epoll_wait_end();
	return n;
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct sock *sock;
	int ret;

	shim_ensure_init();
	sock = shim_config.enabled ? upgraded_sock(fd) : NULL;
	if (!sock)
		return real.epoll_ctl(epfd, op, fd, ev);
	ret = epoll_ctl_upgraded(epfd, op, fd, sock->conn, ev);
	sock_put(sock);
	return ret;
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *events, int maxevents,
			   int timeout)
{
	shim_ensure_init();
	return epoll_wait_merged(epfd, events, maxevents, timeout, NULL, NULL,
				 WAIT);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *events, int maxevents,
			    int timeout, const sigset_t *sigmask)
{
	shim_ensure_init();
	return epoll_wait_merged(epfd, events, maxevents, timeout, NULL,
				 sigmask, PWAIT);
}

SHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event *events,
			     int maxevents, const struct timespec *timeout,
			     const sigset_t *sigmask)
{
	struct timespec left;

	shim_ensure_init();
	if (!real.epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	if (timeout)
		left = *timeout;
	return epoll_wait_merged(epfd, events, maxevents,
				 timeout ? timespec_ms(timeout) : -1,
				 timeout ? &left : NULL, sigmask, PWAIT2);
}
