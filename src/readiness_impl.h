/* SPDX-License-Identifier: MIT */
/*
 * Inside the readiness module: what readiness_epoll.c and readiness_poll.c
 * use of one connection's readiness (readiness.c).  Not for other modules.
 */
#ifndef ROCESHIM_READINESS_IMPL_H
#define ROCESHIM_READINESS_IMPL_H

#include "readiness.h"

int readiness_in_fd(const struct readiness *r);
/*
 * out_fd: -1 until made.  Most connections never run out of room to
 * send, and a writable connection's kernel socket (idle, so writable)
 * can stand for it in the program's epoll sets and polls.  So out_fd is
 * made only when a send leaves a connection whose readiness is wanted
 * without room, or a wait needs it; from then on it stands for EPOLLOUT
 * in every registration of the connection.
 */
int readiness_out_fd(const struct readiness *r);
/* Makes out_fd alone (readiness_make_out_fd() does the rest): fd, -errno. */
int readiness_need_out_fd(struct readiness *r);
/*
 * out_fd goes back once it is idle: the connection has had room to send
 * for a while (OUT_FD_IDLE_MS), no poll() or send waits on it, and
 * readiness_epoll_unwatch_out_fd() says that no epoll registration waits
 * for EPOLLOUT.  From then on the kernel socket stands for EPOLLOUT
 * again, until a send runs out of room once more.  Called with the epoll
 * registrations locked (readiness_epoll_give_back_out_fds()).  now:
 * clock_ms().
 */
void readiness_give_back_out_fds(int64_t now);
/*
 * With the epoll registrations locked: false if a live registration of r
 * waits for EPOLLOUT; else takes fd, r's out_fd, out of every set of r's
 * registrations and says true.
 */
bool readiness_epoll_unwatch_out_fd(struct readiness *r, int fd);
/*
 * Some connection holds an out_fd, and descriptors have not run short
 * (an out_fd that could not be made): the idle tick has work.
 */
bool readiness_out_fds_held(void);
/*
 * r's out_fd stays for good: an epoll registration that the registry
 * could not record may rely on it (readiness_epoll.c).
 */
void readiness_keep_out_fd(struct readiness *r);
/*
 * readiness_give_back_out_fds() with the epoll registrations locked
 * (readiness_epoll.c); skipped if a registration is being moved.
 */
void readiness_epoll_give_back_out_fds(int64_t now);
/*
 * Makes out_fd if it is not made yet, and has it take EPOLLOUT over from
 * the kernel socket in every registration (readiness_epoll.c): the fd, or
 * -errno.  Called with none of the connection's locks held.
 */
int readiness_make_out_fd(struct readiness *r);
/* r's completion hub: its fd, and its slot (cq_hub.h). */
int readiness_hub_fd(const struct readiness *r);
unsigned int readiness_hub_slot(const struct readiness *r);
/* r's hub among those readiness_drain() takes. */
uint64_t readiness_hub_bit(const struct readiness *r);
struct transport *readiness_transport(const struct readiness *r);

/*
 * The hub (cq_hub.h) had an event for r, taken: arm again, reap, sync the
 * eventfds.  out (if not NULL): the readiness the eventfds were synced
 * from, or on a closed connection the transport's now.
 * told: the caller reports the connection's readiness to the program
 * itself (enum readiness_told).  Then an arrival may leave in_fd unset,
 * lagging the data, if nothing else watches in_fd: no other thread is in
 * an epoll_wait() (for a poll() that tells, none at all), no other poll()
 * watches it and no read sleeps on it.  Whatever watches it next settles
 * it first.
 */
enum readiness_told {
	READINESS_TOLD_NOBODY,
	/* An epoll_wait() with the connection's only registration there. */
	READINESS_TOLD_EPOLL,
	/* A poll() or select() that watches it, once, for input. */
	READINESS_TOLD_POLL
};
void readiness_serve(struct readiness *r, enum readiness_told told,
		     struct transport_readiness *out);
/*
 * The fds of some hubs (readiness_hub_fd()) are readable: takes every
 * event each holds.  hubs has a bit per hub slot (readiness_hub_bit()).
 * Each connection's event goes to report(r, arg), which serves
 * it with readiness_serve() and says true, or says false (not its
 * business): then, or with report NULL, it is served as for nobody in
 * particular (told nobody, and only if something relies on it).
 */
typedef bool (*readiness_report_fn)(struct readiness *r, void *arg);
void readiness_drain(uint64_t hubs, readiness_report_fn report, void *arg);
/* readiness_sync() if in_fd lags; cheap if not. */
void readiness_settle(struct readiness *r);
/*
 * Syncs the eventfds from the transport, whose completion queue this
 * polls, without the hub's event; told as for readiness_serve().
 * Returns what changed: EPOLLIN for a new arrival (data, EOF or an
 * error), EPOLLOUT for room to send; out: the readiness now.
 */
uint32_t readiness_poll_raised(struct readiness *r, enum readiness_told told,
			       struct transport_readiness *out);
/*
 * Polls the transport: whether it has what want asks for (EPOLLIN,
 * EPOLLOUT) that the eventfds did not say when last synced.  A hint, read
 * without the sync lock, that readiness_poll_raised() settles.
 */
bool readiness_has_news(struct readiness *r, uint32_t want);

/*
 * Around each epoll_wait() of the program (and each poll() or select() of
 * an epoll set).  true: some connection lags; settle every registered one
 * before the wait.
 */
bool readiness_epoll_wait_begin(void);
void readiness_epoll_wait_end(void);
/*
 * Around each poll() or select() that watches r: begin counts the call,
 * then calls readiness_want().
 */
void readiness_poll_begin(struct readiness *r);
void readiness_poll_end(struct readiness *r);

/* Wakes every sleeper for good (readiness_release()). */
void readiness_release_fds(struct readiness *r);

/* In a fork child: inherited readiness is dead, nothing lags or waits. */
void readiness_core_fork_child(void);

/* Epoll registrations (readiness_epoll.c) for readiness_poll.c. */
bool readiness_epoll_any_set(const struct pollfd *fds, unsigned long nfds);
void readiness_epoll_settle_all(void);

/* The sock of fd if it is upgraded, with a reference; else NULL. */
struct sock *readiness_upgraded_sock(int fd);

/*
 * A wait in epoll_wait(), poll() or select() that may poll the completion
 * queues of the upgraded connections it waits on before it sleeps, by the
 * calling thread's own spin policy (spin.h), capped at cap_us.
 */
struct wait_spin {
	uint64_t start_us; /* 0: the wait is not timed */
	uint64_t end_us;   /* when the polling ends */
	uint64_t seen_us;  /* the clock when the polling last read it */
	bool spinning;	   /* polling: a spin slot is held */
	bool blocked;	   /* the asynchronous signals are blocked; old */
	sigset_t old;	   /* the thread's mask before */
};
/*
 * For a wait of timeout_ms that may poll (its arguments let it): true if
 * it polls until end_us, holding a spin slot, with the asynchronous
 * signals blocked (wait_time_block_signals()); every wait it then makes
 * passes the program's mask or old.
 */
bool readiness_spin_begin(struct wait_spin *w, unsigned int cap_us,
			  int timeout_ms, bool may);
/* The polling is over: the slot goes, the signals stay blocked. */
void readiness_spin_stop(struct wait_spin *w);
/*
 * The wait is over with ret (< 0: an error): the signals come back, and a
 * timed wait's length sizes the thread's next ones.  One that ends while
 * it still polls is timed by seen_us: the polling reads the clock only
 * now and then (READINESS_SPIN_POLLS_PER_CLOCK), as it is a system call
 * in a guest.
 */
void readiness_spin_end(struct wait_spin *w, int ret);
/* Rounds of polling between two looks at the kernel's own entries. */
#define READINESS_SPIN_ROUNDS 4
/*
 * A polling wait reads the clock once per READINESS_SPIN_ROUNDS rounds,
 * or sooner once it has polled this many connections since: a set of
 * many would otherwise overrun its budget by rounds of all of them.
 */
#define READINESS_SPIN_POLLS_PER_CLOCK 8

#endif /* ROCESHIM_READINESS_IMPL_H */
