/* SPDX-License-Identifier: MIT */
/*
 * Readiness: how an upgraded connection appears to the program's epoll
 * sets, poll() and select(), and how its blocking calls sleep.  This
 * module is the one place that keeps that state, and (with the progress
 * thread's own set) the one place that calls epoll_ctl.
 *
 * Each upgraded connection has eventfds that stand for it: in_fd is
 * readable exactly while the connection has data or an error to report,
 * out_fd, made when something first waits for writability, is writable
 * exactly while a send would not block.  They are kept
 * current only once something relies on them (readiness_want()): a
 * connection driven by blocking calls alone costs no update per message.
 * Completions wake whoever waits through the connection's completion hub
 * (cq_hub.h), a channel it shares with the other connections put on that
 * hub (a device has a few): a blocking call sleeps on it beside in_fd, the
 * program's epoll sets and poll() watch it beside the eventfds, and the
 * progress thread watches it while some connection needs that
 * (readiness_watch()).  Whoever finds it readable drains it, serving each
 * connection it has an event for: so an event for one connection may
 * wake another's waiter, who serves it on the first one's behalf.
 * docs/design.md ("Readiness") has the argument for every rule here.
 *
 * Contract: every function is thread safe.  A readiness object belongs to
 * one connection and lives as long as it.  In a fork child, inherited
 * objects are dead (readiness_alive() false): nothing here touches the
 * parent's hubs or eventfds for them.
 */
#ifndef ROCESHIM_READINESS_H
#define ROCESHIM_READINESS_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "config.h"
#include "transport.h"

struct readiness;

/* ---- one connection ------------------------------------------------- */

int readiness_create(struct transport *t, struct readiness **out);
/* Frees it; its eventfds are closed. */
void readiness_destroy(struct readiness *r);
bool readiness_alive(const struct readiness *r);
/* Closed, or released to its kernel socket: the eventfds serve no more. */
bool readiness_released(const struct readiness *r);

/*
 * The connection is established: arm its queue and bring the eventfds
 * up to date.  Until then nothing watches it.
 */
void readiness_start(struct readiness *r);

/* The transport's state changed: update the eventfds. */
void readiness_sync(struct readiness *r);

/*
 * The program relies on the connection's readiness (epoll, poll,
 * select): from now on the eventfds are kept current, and the queue is
 * armed, so that the hub's entry beside them wakes the program's wait.
 * Sticky; each registration or poll calls it again to arm the queue.
 */
void readiness_want(struct readiness *r);

/*
 * As readiness_want(), and the progress thread watches the hub too: for
 * a waiter the hub does not wake (a send waiting for credit sleeps on
 * out_fd) and for corked bytes, which go out with a completion that
 * someone must reap.  Sticky.
 */
void readiness_watch(struct readiness *r);

/*
 * After a send or a read changed the transport: updates what must be
 * (the eventfds if they are kept; the watch if bytes are corked).
 */
void readiness_after_send(struct readiness *r, bool corked);
void readiness_after_recv(struct readiness *r);

/*
 * poll() or epoll_wait() told the program of the kernel socket's error
 * (POLLERR: the peer's reset, or an error the kernel queued): its next
 * send or read must already act on it, though the progress thread may not
 * have served the socket yet.  The take clears it.
 */
void readiness_error_told(struct readiness *r);
bool readiness_take_error_told(struct readiness *r);

/*
 * Blocking calls: sleep until the connection may be readable (a
 * completion, or the eventfd) or writable (out_fd, which the progress
 * thread keeps), or until deadline (clock_ms(); -1: none).  0, -EAGAIN on
 * timeout, -EINTR.
 */
int readiness_wait_readable(struct readiness *r, int64_t deadline);
int readiness_wait_writable(struct readiness *r, int64_t deadline);
/*
 * Sleeps on the hub, at most timeout_ms, unless done(arg) says that what
 * the caller waits for is there (done() must arm the queue when it says
 * no, like transport_direct_done()).  true: done; false with errno
 * EINTR: a signal ended the sleep.
 */
bool readiness_wait_hub(struct readiness *r, bool (*done)(void *arg), void *arg,
			int timeout_ms);

/* The program closed the connection: its eventfds go now. */
void readiness_close(struct readiness *r);

/*
 * The connection moved to its kernel socket: every epoll registration of
 * it becomes the kernel socket's own, with the program's events and
 * data, and whoever sleeps on its eventfds wakes.
 */
void readiness_release(struct readiness *r);

/*
 * The progress thread's tick hook (progress_on_tick()): gives back the
 * eventfd for writability of connections that have not needed it for a
 * while (docs/design.md, "Readiness").
 */
bool readiness_idle_tick(void);

/* ---- the program's waits -------------------------------------------- */

enum readiness_wait_kind {
	READINESS_EPOLL_WAIT,
	READINESS_EPOLL_PWAIT,
	READINESS_EPOLL_PWAIT2
};

/*
 * epoll_ctl and the epoll_wait family, poll/ppoll and select/pselect,
 * as the process's configuration cfg says (ROCESHIM_ENABLE, ROCESHIM_RDMA),
 * with libc's return convention (-1 and errno).  timeout_ms is the
 * timeout of epoll_wait, epoll_pwait and poll (-1: none); ts that of
 * epoll_pwait2, ppoll and pselect (NULL: none); select's tv is updated in
 * place as Linux does.
 */
int readiness_epoll_ctl(const struct config *cfg, int epfd, int op, int fd,
			struct epoll_event *ev);
int readiness_epoll_wait(const struct config *cfg, int epfd,
			 struct epoll_event *events, int maxevents,
			 int timeout_ms, const struct timespec *ts,
			 const sigset_t *sigmask,
			 enum readiness_wait_kind kind);
int readiness_poll(const struct config *cfg, struct pollfd *fds, nfds_t nfds,
		   int timeout_ms, const struct timespec *ts,
		   const sigset_t *sigmask, bool ppoll);
int readiness_select(const struct config *cfg, int nfds, fd_set *rd, fd_set *wr,
		     fd_set *ex, struct timeval *tv, const struct timespec *ts,
		     const sigset_t *sigmask, bool pselect);

/* fd is a new epoll set; new_fd duplicates old_fd; first..last closed. */
void readiness_set_opened(int fd);
void readiness_fd_dup(int old_fd, int new_fd);
void readiness_fd_closed(unsigned int first, unsigned int last);
/*
 * Whether fd may be an epoll set of the program's (without a lock; true
 * for any number past those tracked one by one once a set was there).
 */
bool readiness_fd_is_set(int fd);

/*
 * fd of sock was closed while other keeps the socket open: the
 * registrations made through fd (by its pending connect, or its
 * connection) stay, as the kernel's entries do, and what roceshim does to
 * the socket for them goes through other from now on.
 */
struct sock;
void readiness_fd_gone(struct sock *sock, int fd, int other);

/*
 * The connection's last fd is closed: its registrations are forgotten, and
 * a set left without connections on the hub loses the hub's entry.
 */
void readiness_forget(struct readiness *r);

/*
 * The program closes fd, its last of the socket, and roceshim keeps a dup
 * of it where TCP would not: the kernel entries that fd's registrations
 * put in epoll sets go now, as the kernel's close would take them.
 */
void readiness_drop_socket(struct readiness *r, int fd);

/*
 * A connect in the background (connector.h) ended: the epoll
 * registrations made meanwhile, which waited in the registry, become the
 * kernel socket's (r NULL) or the upgraded connection's.
 * readiness_forget_pending(): it was cancelled (the program closed it).
 */
struct sock;
void readiness_resolve_pending(struct sock *sock, struct readiness *r);
void readiness_forget_pending(struct sock *sock);

/*
 * Registrations of a TCP socket made before its connect() are the
 * kernel's, on the socket itself; roceshim keeps a copy of each until the
 * first connect() decides (at most one per set and fd).  Then, exactly
 * one of:
 * - readiness_early_pend(): a connect goes on in the background; they
 *   leave the kernel and wait in the registry with those made meanwhile
 *   (readiness_resolve_pending() ends them, readiness_forget_pending()
 *   drops them);
 * - readiness_early_upgrade(): a blocking connect ended on RDMA; they
 *   become r's, as if the program had made them now;
 * - readiness_early_forget(): the connection is the kernel's; so are
 *   they.
 */
void readiness_early_pend(struct sock *sock);
void readiness_early_upgrade(struct sock *sock, struct readiness *r);
void readiness_early_forget(struct sock *sock);

/* pthread_atfork handlers. */
void readiness_fork_prepare(void);
void readiness_fork_parent(void);
void readiness_fork_child(void);

#endif /* ROCESHIM_READINESS_H */
