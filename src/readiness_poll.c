// SPDX-License-Identifier: MIT
/*
 * Upgraded connections in poll() and select().  For a kernel socket the
 * kernel's readiness is the truth and these pass straight through.  An
 * upgraded fd becomes four entries of a substituted poll set: its
 * eventfds (out_fd for POLLOUT, once made), its kernel socket (for the
 * POLLERR and POLLHUP that poll always reports: a reset) and its
 * completion hub, which is drained when it fires, as epoll_wait does
 * (connections on one hub share it: the same fd, in several entries).
 * A connection that moves to its kernel socket during the wait wakes it,
 * and the wait starts again with that socket in its place.  select() is
 * carried out as poll() when an upgraded fd is among its sets.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "clock.h"
#include "conn.h"
#include "connector.h"
#include "fd_room.h"
#include "fd_table.h"
#include "hostinfo.h"
#include "poll_wide.h"
#include "readiness_impl.h"
#include "real.h"
#include "wait_time.h"

#define POLL_IN_EVENTS	(POLLIN | POLLRDNORM | POLLPRI | POLLRDHUP)
#define POLL_OUT_EVENTS (POLLOUT | POLLWRNORM)

struct sock *readiness_upgraded_sock(int fd)
{
	struct sock *sock = fd_table_get(fd);

	if (!sock)
		return NULL;
	/* Inherited across fork: its owner moves it to TCP first. */
	if (sock->conn && !conn_alive(sock->conn))
		conn_make_plain(sock->conn, ROCESHIM_DOWNGRADE_FORK);
	if (connector_pending(sock))
		return sock;
	if (!sock->conn || !conn_on_rdma(sock->conn)) {
		sock_put(sock);
		return NULL;
	}
	return sock;
}

enum {
	POLL_IN_FD,
	POLL_OUT_FD,
	POLL_SOCKET,
	POLL_HUB,
	POLL_ENTRIES
};

/*
 * Fills the entries of upgraded r for the program's entry pfd; the caller
 * ends the readiness_poll_begin() with readiness_poll_end().
 */
static void poll_entries(struct pollfd *tmp, const struct pollfd *pfd,
			 struct readiness *r)
{
	struct transport_readiness t;
	bool in = pfd->events & POLL_IN_EVENTS;

	readiness_poll_begin(r);
	/*
	 * POLLRDHUP alone, or POLLHUP, which poll() reports whatever the
	 * entry asks, once this end is shut too: a FIN to come wakes the
	 * hub; one already there leaves in_fd readable for good, and
	 * must answer at once.
	 */
	if (!in) {
		transport_readiness(readiness_transport(r), &t);
		if (pfd->events & POLLRDHUP || t.shut)
			in = t.eof;
	}
	tmp[POLL_IN_FD].fd = readiness_in_fd(r);
	tmp[POLL_IN_FD].events = in ? POLLIN : 0;
	tmp[POLL_OUT_FD].fd = -1;
	tmp[POLL_OUT_FD].events = POLLOUT;
	tmp[POLL_SOCKET].fd = pfd->fd;
	tmp[POLL_SOCKET].events = 0;
	/*
	 * Room to send now: the kernel socket (idle, so writable) says so,
	 * and out_fd need not be made (readiness_make_out_fd()).  If room
	 * runs out meanwhile, the send says EAGAIN, as TCP's may.
	 */
	if (pfd->events & POLL_OUT_EVENTS) {
		tmp[POLL_OUT_FD].fd = readiness_out_fd(r);
		if (tmp[POLL_OUT_FD].fd < 0) {
			transport_readiness(readiness_transport(r), &t);
			if (!t.writable)
				tmp[POLL_OUT_FD].fd = readiness_make_out_fd(r);
		}
		if (tmp[POLL_OUT_FD].fd < 0)
			tmp[POLL_SOCKET].events = POLLOUT;
	}
	tmp[POLL_HUB].fd = readiness_hub_fd(r);
	tmp[POLL_HUB].events = POLLIN;
}

/* Whether an entry's arrivals may be told by the poll() itself. */
static enum readiness_told told_for(const struct pollfd *pfd)
{
	return pfd->events & (POLLIN | POLLRDNORM) ? READINESS_TOLD_POLL
						   : READINESS_TOLD_NOBODY;
}

/*
 * The upgraded connections of one poll() call, for a drain of the hub: a
 * set larger than POLL_TOLD_MAX is served as for nobody in particular,
 * rather than searched for each event.
 */
#define POLL_TOLD_MAX 64

struct poll_call {
	const struct pollfd *fds;
	struct sock **socks;	  /* the program's upgraded ones */
	struct readiness **began; /* their readiness, once counted */
	nfds_t nfds;
};

/* An event for r, served as told if this call watches it for input. */
static bool report_to_call(struct readiness *r, void *arg)
{
	const struct poll_call *call = arg;
	nfds_t i;

	for (i = 0; i < call->nfds; i++) {
		if (call->began[i] != r)
			continue;
		readiness_serve(r, told_for(&call->fds[i]), NULL);
		return true;
	}
	return false;
}

/*
 * Whether the hub of any upgraded entry fired; then each that did is
 * drained, once for all of its entries.
 */
static bool drain_if_fired(const struct pollfd *tmp,
			   const struct poll_call *call)
{
	uint64_t fired = 0;
	nfds_t i, j = 0;

	for (i = 0; i < call->nfds; i++) {
		if (call->began[i] && tmp[j + POLL_HUB].revents & POLLIN)
			fired |= readiness_hub_bit(call->began[i]);
		j += call->socks[i] ? POLL_ENTRIES : 1;
	}
	if (!fired)
		return false;
	if (call->nfds > POLL_TOLD_MAX)
		readiness_drain(fired, NULL, NULL);
	else
		readiness_drain(fired, report_to_call, (void *)call);
	return true;
}

/*
 * The program's revents for upgraded r from its entries' results.
 * from_transport: the completion queues were polled, or the hubs drained,
 * since the entries were asked, and r's transport says what arrived (an
 * arrival told leaves in_fd unset, whichever entry's hub fired).
 */
static short poll_fold(const struct pollfd *tmp, short ev, struct readiness *r,
		       bool from_transport)
{
	struct transport_readiness t;
	short revents = 0;
	bool arrived = tmp[POLL_IN_FD].revents & POLLIN;

	if (arrived)
		revents |= ev & (POLLIN | POLLRDNORM);
	if ((tmp[POLL_OUT_FD].revents | tmp[POLL_SOCKET].revents) & POLLOUT)
		revents |= ev & POLL_OUT_EVENTS;
	revents |= tmp[POLL_SOCKET].revents & (POLLHUP | POLLERR);
	/* A TCP socket hung up has its read side shut too. */
	if (revents & POLLHUP)
		revents |= ev & POLLRDHUP;
	/* A reset: readable (the error), writable and hung up, as TCP's. */
	if (tmp[POLL_SOCKET].revents & POLLERR) {
		readiness_error_told(r);
		revents |= ev &
			   (POLLIN | POLLRDNORM | POLL_OUT_EVENTS | POLLRDHUP);
	}
	if (!from_transport && !arrived)
		return revents;
	transport_readiness(readiness_transport(r), &t);
	if (from_transport) {
		if (t.readable)
			revents |= ev & (POLLIN | POLLRDNORM);
		if (t.writable)
			revents |= ev & POLL_OUT_EVENTS;
		arrived |= t.readable;
	}
	/*
	 * The transport's EOF: POLLRDHUP with it, and POLLHUP once both
	 * sides are shut, whatever the entry asks, as TCP's.
	 */
	if (arrived) {
		if (t.eof && ev & POLLRDHUP)
			revents |= POLLRDHUP;
		if (t.eof && t.shut)
			revents |= POLLHUP;
	}
	return revents;
}

static struct readiness *readiness_of(struct sock *sock)
{
	return conn_readiness(sock->conn);
}

/*
 * Whether the kernel socket is sock's readiness now: a background connect
 * ended, or the connection moved to TCP, during the wait.
 */
static bool now_plain(struct sock *sock)
{
	struct conn *c = __atomic_load_n(&sock->conn, __ATOMIC_ACQUIRE);

	return !connector_pending(sock) && (!c || !conn_on_rdma(c));
}

/* The kernel's revents for pfd now: a connection moved to its socket. */
static short kernel_revents(const struct pollfd *pfd)
{
	struct pollfd now = { .fd = pfd->fd, .events = pfd->events };

	return real.poll(&now, 1, 0) == 1 ? now.revents : 0;
}

/*
 * Waits on a substituted set of n entries, made of the program's nfds.
 * poll() refuses more entries than RLIMIT_NOFILE: the program's own set
 * was within it (or the kernel refuses the program too), so one that grew
 * past it by substitution is waited on as poll_wide() does.
 */
static int wait_entries(struct pollfd *tmp, nfds_t n, nfds_t nfds,
			int timeout_ms, const struct timespec *ts,
			const sigset_t *sigmask, bool ppoll)
{
	rlim_t limit;
	int ret, err;

	ret = ppoll ? real.ppoll(tmp, n, ts, sigmask)
		    : real.poll(tmp, n, timeout_ms);
	if (ret >= 0)
		return ret;
	err = errno;
	if (err != EINVAL)
		return -err;
	limit = fd_room_program_limit();
	if (n <= limit || nfds > limit)
		return -err;
	if (!ppoll)
		return poll_wide(tmp, n, timeout_ms, NULL);
	if (!wait_time_valid(ts))
		return -EINVAL;
	return poll_wide(tmp, n, ts ? wait_time_ms(ts) : -1, sigmask);
}

/*
 * Before the wait sleeps, the completion queues of the upgraded entries
 * are polled, as epoll_wait() does (readiness_epoll.c): READINESS_SPIN_ROUNDS
 * rounds, or until one raised what its entry asks for, or until
 * w->end_us.  true: one did, and its transport says so (its eventfd may
 * lag: told); false: none did, and w->seen_us is now.
 */
static bool spin_rounds(struct readiness **began, const struct pollfd *fds,
			nfds_t nfds, struct wait_spin *w)
{
	unsigned int round, polled = 0;
	bool fresh = false; /* w->seen_us was read after the last poll */
	uint32_t want;
	nfds_t i;

	for (round = 0; round < READINESS_SPIN_ROUNDS; round++) {
		for (i = 0; i < nfds; i++) {
			if (!began[i])
				continue;
			want = (fds[i].events & POLL_IN_EVENTS ? EPOLLIN : 0) |
			       (fds[i].events & POLL_OUT_EVENTS ? EPOLLOUT : 0);
			if (want && readiness_poll_raised(
					    began[i], told_for(&fds[i]), NULL) &
					    want)
				return true;
			fresh = false;
			if (++polled < READINESS_SPIN_POLLS_PER_CLOCK)
				continue;
			polled = 0;
			fresh = true;
			w->seen_us = clock_us();
			if (w->seen_us >= w->end_us)
				return false;
		}
	}
	if (!fresh)
		w->seen_us = clock_us();
	return false;
}

/*
 * poll() over a set where some fds are upgraded: each of those becomes its
 * POLL_ENTRIES entries, and their results fold back into the program's
 * entry.  When only hubs fired, and brought nothing the program
 * waits for, the wait goes on for what is left of its timeout.  -EXDEV:
 * a connection moved to its kernel socket, or a background connect
 * ended, and nothing is ready: wait again, with the fds looked up anew.
 * While the thread's spin budget lasts (spin_us: the cap), the set is
 * asked without sleeping, between rounds of polling; from then on, the
 * asynchronous signals are blocked but in each wait, which is a ppoll()
 * with the program's mask or the thread's own (wait_time.h).
 */
static int poll_substituted(struct pollfd *fds, nfds_t nfds,
			    struct sock **socks, int timeout_ms,
			    const struct timespec *ts, const sigset_t *sigmask,
			    bool ppoll, unsigned int spin_us)
{
	const struct timespec zero = { 0 };
	struct timespec step;
	struct wait_spin w = { .start_us = 0 };
	struct pollfd *tmp = calloc(POLL_ENTRIES * nfds + 1, sizeof(*tmp));
	/* The readiness of each upgraded one, counted as polled. */
	struct readiness **began = calloc(nfds + 1, sizeof(*began));
	/* Each background connect whose wait_fd is held. */
	bool *held = calloc(nfds + 1, sizeof(*held));
	const struct timespec *tmo = ts;
	struct poll_call call = {
		.fds = fds, .socks = socks, .began = began, .nfds = nfds
	};
	struct timespec left;
	int64_t deadline = -1;
	nfds_t i, j = 0, k;
	int ret, ready = 0;
	bool moved, from_transport, polled = false;

	if (!tmp || !began || !held) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < nfds; i++) {
		if (!socks[i]) {
			tmp[j++] = fds[i];
			continue;
		}
		if (socks[i]->conn) {
			began[i] = readiness_of(socks[i]);
			poll_entries(&tmp[j], &fds[i], began[i]);
		} else {
			/* A background connect: nothing until it ends. */
			for (k = 0; k < POLL_ENTRIES; k++)
				tmp[j + k].fd = -1;
			tmp[j].fd = connector_wait_hold(socks[i]);
			tmp[j].events = POLLIN;
			held[i] = tmp[j].fd >= 0;
			/* It ended since it was looked up: look again. */
			if (!held[i]) {
				ret = -EXDEV;
				goto out;
			}
		}
		j += POLL_ENTRIES;
	}
	if (timeout_ms > 0)
		deadline = clock_ms() + timeout_ms;
	if (readiness_spin_begin(&w, spin_us, timeout_ms,
				 wait_time_valid(ts)) &&
	    !sigmask)
		sigmask = &w.old;
	for (;;) {
		/* Found by polling: folded from the transports, not asked. */
		if (polled)
			ret = 0;
		else if (w.spinning)
			ret = wait_entries(tmp, j, nfds, 0, &zero, sigmask,
					   true);
		else if (w.blocked)
			ret = wait_entries(
				tmp, j, nfds, timeout_ms,
				tmo ? tmo
				    : wait_time_timespec(timeout_ms, &step),
				sigmask, true);
		else
			ret = wait_entries(tmp, j, nfds, timeout_ms, tmo,
					   sigmask, ppoll);
		if (ret < 0)
			goto out;
		ready = 0;
		moved = false;
		/* Found by polling, or drained: the transports say. */
		from_transport = polled || drain_if_fired(tmp, &call);
		for (i = 0, j = 0; i < nfds; i++) {
			if (!socks[i]) {
				fds[i].revents = tmp[j++].revents;
			} else if (now_plain(socks[i])) {
				fds[i].revents = kernel_revents(&fds[i]);
				moved = true;
				j += POLL_ENTRIES;
			} else if (!began[i]) {
				/* Upgraded now: substituted when it starts
				 * again. */
				fds[i].revents = 0;
				moved |= !connector_pending(socks[i]);
				j += POLL_ENTRIES;
			} else {
				fds[i].revents =
					poll_fold(&tmp[j], fds[i].events,
						  began[i], from_transport);
				j += POLL_ENTRIES;
			}
			if (fds[i].revents)
				ready++;
		}
		if (!ready && moved) {
			ret = -EXDEV;
			goto out;
		}
		polled = false;
		if (w.spinning && !ready) {
			if (spin_rounds(began, fds, nfds, &w)) {
				/* What the last wait said is stale now. */
				for (k = 0; k < j; k++)
					tmp[k].revents = 0;
				polled = true;
				continue;
			}
			if (w.seen_us < w.end_us)
				continue;
			readiness_spin_stop(&w);
			if (tmo)
				left = *tmo;
			if (!wait_time_take_spent(&timeout_ms,
						  tmo ? &left : NULL,
						  w.seen_us - w.start_us))
				break;
			if (tmo)
				tmo = &left;
			continue;
		}
		/* Only hubs fired: wait for what is left. */
		if (ready || !ret ||
		    !wait_time_left(&timeout_ms, deadline, tmo ? &left : NULL))
			break;
		if (tmo)
			tmo = &left;
	}
	ret = ready;
out:
	readiness_spin_end(&w, ret);
	for (i = 0; began && i < nfds; i++)
		if (began[i])
			readiness_poll_end(began[i]);
	for (i = 0; held && i < nfds; i++)
		if (held[i])
			connector_wait_release(socks[i]);
	free(held);
	free(began);
	free(tmp);
	return ret;
}

/* Looks up every fd; returns true if any is upgraded (socks filled). */
static bool find_upgraded(const struct config *cfg, struct pollfd *fds,
			  nfds_t nfds, struct sock ***out)
{
	struct sock **socks = NULL;
	nfds_t i;

	if (!cfg->enabled)
		return false;
	for (i = 0; i < nfds; i++) {
		struct sock *sock;

		if (fds[i].fd < 0)
			continue;
		sock = readiness_upgraded_sock(fds[i].fd);
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

static int poll_unnested(const struct config *cfg, struct pollfd *fds,
			 nfds_t nfds, int timeout_ms, const struct timespec *ts,
			 const sigset_t *sigmask, bool ppoll)
{
	int64_t deadline = timeout_ms > 0 ? clock_ms() + timeout_ms : -1;
	struct timespec left;
	struct sock **socks;
	nfds_t i;
	int ret;

	for (;;) {
		if (!find_upgraded(cfg, fds, nfds, &socks))
			return ppoll ? real.ppoll(fds, nfds, ts, sigmask)
				     : real.poll(fds, nfds, timeout_ms);
		ret = poll_substituted(fds, nfds, socks, timeout_ms, ts,
				       sigmask, ppoll, cfg->spin_us);
		for (i = 0; i < nfds; i++)
			if (socks[i])
				sock_put(socks[i]);
		free(socks);
		if (ret != -EXDEV)
			break;
		if (!wait_time_left(&timeout_ms, deadline, ts ? &left : NULL))
			return 0;
		if (ts)
			ts = &left;
	}
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

/*
 * An epoll set watched by poll() or select() is waited on as epoll_wait()
 * would: counted, and settled first.  Otherwise an event that epoll_wait()
 * reported and the program left unread would not make the set readable.
 */
static bool nested_wait_begin(bool nested)
{
	if (nested && readiness_epoll_wait_begin())
		readiness_epoll_settle_all();
	return nested;
}

static void nested_wait_end(bool nested)
{
	if (nested)
		readiness_epoll_wait_end();
}

int readiness_poll(const struct config *cfg, struct pollfd *fds, nfds_t nfds,
		   int timeout_ms, const struct timespec *ts,
		   const sigset_t *sigmask, bool ppoll)
{
	bool nested = nested_wait_begin(cfg->rdma &&
					readiness_epoll_any_set(fds, nfds));
	int ret;

	if (ppoll)
		timeout_ms = ts ? wait_time_ms(ts) : -1;
	ret = poll_unnested(cfg, fds, nfds, timeout_ms, ts, sigmask, ppoll);
	nested_wait_end(nested);
	return ret;
}

/*
 * The kernel's select() takes sets of nfds bits, as many as the process
 * may have descriptors, where FD_SETSIZE (and FD_ISSET(), checked against
 * it) stops at 1024: the sets are read and written here as the kernel
 * does, as arrays of longs (core_sys_select()).
 */
#define SET_WORD_BITS (8 * (int)sizeof(unsigned long))

static bool fd_in(const fd_set *set, int fd)
{
	const unsigned long *w = (const unsigned long *)set;

	return set && (w[fd / SET_WORD_BITS] >> (fd % SET_WORD_BITS) & 1);
}

static void fd_put(fd_set *set, int fd)
{
	unsigned long *w = (unsigned long *)set;

	w[fd / SET_WORD_BITS] |= 1ul << (fd % SET_WORD_BITS);
}

/* Clears the words that hold the first nfds bits, as the kernel writes. */
static void set_clear(fd_set *set, int nfds)
{
	if (set)
		memset(set, 0,
		       (size_t)(nfds + SET_WORD_BITS - 1) / SET_WORD_BITS *
			       sizeof(unsigned long));
}

/* Whether fd is in any of the three sets. */
static bool in_sets(int fd, fd_set *rd, fd_set *wr, fd_set *ex)
{
	return fd_in(rd, fd) || fd_in(wr, fd) || fd_in(ex, fd);
}

/* Any upgraded fd among the first nfds of the three sets? */
static bool sets_have_upgraded(const struct config *cfg, int nfds, fd_set *rd,
			       fd_set *wr, fd_set *ex)
{
	int fd;

	if (!cfg->enabled)
		return false;
	for (fd = 0; fd < nfds; fd++) {
		struct sock *sock;

		if (!in_sets(fd, rd, wr, ex))
			continue;
		sock = readiness_upgraded_sock(fd);
		if (sock) {
			sock_put(sock);
			return true;
		}
	}
	return false;
}

/* Any epoll set among the first nfds of the three sets? */
static bool sets_have_epoll_set(const struct config *cfg, int nfds, fd_set *rd,
				fd_set *wr, fd_set *ex)
{
	struct pollfd pfd;

	if (!cfg->rdma)
		return false;
	for (pfd.fd = 0; pfd.fd < nfds; pfd.fd++)
		if (in_sets(pfd.fd, rd, wr, ex) &&
		    readiness_epoll_any_set(&pfd, 1))
			return true;
	return false;
}

/*
 * select() as poll(), so that upgraded fds are substituted.  A closed fd
 * in a set fails it with EBADF, its sets untouched, as the kernel's does.
 */
static int select_as_poll(const struct config *cfg, int nfds, fd_set *rd,
			  fd_set *wr, fd_set *ex, const struct timespec *ts,
			  const sigset_t *sigmask)
{
	struct pollfd few[FD_SETSIZE], *pfds = few;
	nfds_t n = 0, i;
	int fd, ret;

	if (nfds > FD_SETSIZE) {
		pfds = calloc((size_t)nfds, sizeof(*pfds));
		if (!pfds) {
			errno = ENOMEM;
			return -1;
		}
	}
	for (fd = 0; fd < nfds; fd++) {
		short events = 0;

		if (fd_in(rd, fd))
			events |= POLLIN;
		if (fd_in(wr, fd))
			events |= POLLOUT;
		if (fd_in(ex, fd))
			events |= POLLPRI;
		if (events) {
			pfds[n].fd = fd;
			pfds[n++].events = events;
		}
	}
	ret = readiness_poll(cfg, pfds, n, 0, ts, sigmask, true);
	for (i = 0; ret > 0 && i < n; i++)
		if (pfds[i].revents & POLLNVAL) {
			errno = EBADF;
			ret = -1;
		}
	if (ret < 0)
		goto out;
	set_clear(rd, nfds);
	set_clear(wr, nfds);
	set_clear(ex, nfds);
	ret = 0;
	for (i = 0; i < n; i++) {
		short r = pfds[i].revents;

		if (rd && r & (POLLIN | POLLHUP | POLLERR))
			fd_put(rd, pfds[i].fd), ret++;
		if (wr && r & (POLLOUT | POLLERR))
			fd_put(wr, pfds[i].fd), ret++;
		if (ex && r & POLLPRI)
			fd_put(ex, pfds[i].fd), ret++;
	}
out:
	if (pfds != few)
		free(pfds);
	return ret;
}

/*
 * The bits of the sets that the kernel reads: no more than its descriptor
 * table holds (core_sys_select()), which may be fewer than the caller's
 * nfds, and the caller's sets no longer.
 */
static int select_width(int nfds)
{
	int size;

	if (nfds <= FD_SETSIZE)
		return nfds;
	size = hostinfo_fd_table_size();
	if (size < 0)
		return FD_SETSIZE;
	return size < nfds ? size : nfds;
}

int readiness_select(const struct config *cfg, int nfds, fd_set *rd, fd_set *wr,
		     fd_set *ex, struct timeval *tv, const struct timespec *ts,
		     const sigset_t *sigmask, bool pselect)
{
	int width = select_width(nfds);
	struct timespec tv_ts;
	bool nested;
	int ret;

	if (sets_have_upgraded(cfg, width, rd, wr, ex)) {
		if (!pselect) {
			ts = NULL;
			if (tv) {
				tv_ts.tv_sec = tv->tv_sec;
				tv_ts.tv_nsec = tv->tv_usec * 1000;
				ts = &tv_ts;
			}
		}
		return select_as_poll(cfg, width, rd, wr, ex, ts, sigmask);
	}
	/* select() itself, so that it still updates *tv as Linux does. */
	nested = nested_wait_begin(sets_have_epoll_set(cfg, width, rd, wr, ex));
	if (pselect)
		ret = real.pselect(nfds, rd, wr, ex, ts, sigmask);
	else
		ret = real.select(nfds, rd, wr, ex, tv);
	nested_wait_end(nested);
	return ret;
}
