// SPDX-License-Identifier: MIT
/*
 * One connection's readiness: its eventfds, how drains of the completion
 * hub serve it, who watches the hub for it, and the sleeps of its
 * blocking calls.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "clock.h"
#include "cq_hub.h"
#include "fd_room.h"
#include "fork_page.h"
#include "progress.h"
#include "readiness_impl.h"
#include "real.h"
#include "spin.h"
#include "wait_time.h"

/* Written to out_fd, this makes an eventfd unwritable (see eventfd(2)). */
#define EVENTFD_FULL 0xfffffffffffffffeull
/* A send's wait for credit without out_fd (see readiness_need_out_fd()). */
#define OUT_FD_MISSING_NAP_MS 10
/* An out_fd that had room for this long goes back (give_back_locked()). */
#define OUT_FD_IDLE_MS 2000
/* How often the idle tick looks, while some connection holds an out_fd. */
#define OUT_FD_SCAN_MS 1000

/* Bumped in a fork child: readiness of an older generation is dead there. */
static unsigned int generation FORK_DATA;

/*
 * An arrival that the program's epoll_wait() or poll() reports itself
 * (readiness_serve() told) need not set in_fd, and the read that takes it
 * then need not reset it: two system calls per message.  in_fd lags the data
 * meanwhile, which nothing notices as long as nothing else watches in_fd;
 * whatever starts to is brought up to date (settled) first:
 *   - an epoll_wait() that starts settles every lagging connection
 *     (readiness_epoll_wait_begin(), readiness_epoll_settle_all());
 *   - a poll() or select() counts itself on the connection, then syncs it
 *     (readiness_poll_begin());
 *   - a blocking read counts itself a waiter, then looks at the ring
 *     under the transport's lock, which the serving thread took to reap
 *     before it looked at the waiters: one of the two sees the other;
 *   - a registration in another set syncs the connection once it is
 *     recorded.
 * So a connection lags only while none of those is already asleep: no
 * other thread in an epoll_wait(), nobody else polling it (and, for a
 * poll() that tells, no epoll_wait() at all), no read waiting on it.  Each side
 * publishes before it looks (sequentially consistent atomics for the
 * epoll_wait() count, the sync lock for pollers), so one of the two sees the
 * other.
 */
/* Threads in the program's epoll_wait(), and connections whose in_fd lags. */
static unsigned int epoll_waiters FORK_DATA;
static unsigned int lagging FORK_DATA;

struct readiness {
	struct transport *t;
	unsigned int generation;
	int in_fd;
	int out_fd;   /* atomic reads: -1 until readiness_need_out_fd() */
	bool started; /* readiness_start(): the hub may be watched for it */
	int closing;  /* atomic: closed, or released to the kernel socket */
	pthread_mutex_t sync_lock;
	pthread_mutex_t wait_lock;
	/* Under wait_lock: */
	unsigned int waiters; /* atomic reads: calls asleep on the hub */
	bool watching;	      /* counted in the progress thread's watch */
	bool wanted;	      /* atomic reads: see readiness_want() */
	bool progress_wanted; /* atomic reads: see readiness_watch() */
	/* Under sync_lock: */
	bool in_ready;
	bool in_lag; /* atomic reads: see lagging */
	bool out_ready;
	/* Atomic: the poll() and select() calls watching it. */
	unsigned int pollers;
	/* The transport's arrivals when in_fd was last set. */
	uint64_t arrivals;
	/* Atomic: sends asleep on out_fd (readiness_wait_writable()). */
	unsigned int writers;
	/* Under sync_lock: when out_fd was made, or last found no room. */
	int64_t out_used_ms;
	/* Atomic: out_fd stays (readiness_keep_out_fd()). */
	bool out_fd_kept;
	/* In holders while out_fd is held (under holders.lock). */
	struct readiness *holder_next, **holder_prev;
	/* Atomic: see readiness_error_told(). */
	bool error_told;
};

/*
 * The connections that hold an out_fd: the idle tick gives back those
 * that have not needed it for a while (readiness_give_back_out_fds()).
 * Lock order: a connection's sync_lock, then holders.lock; the tick,
 * which takes them the other way round, only tries the sync_lock.
 */
static struct {
	pthread_mutex_t lock;
	struct readiness *head;
	unsigned int count; /* atomic reads */
} holders FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * An out_fd could not be made (no descriptor left): those held stay, or
 * a connection that gave its own back might find none when it runs out
 * of room again, and its kernel socket, which stands for it then, may
 * report EPOLLOUT early.
 */
static bool out_fd_scarce FORK_DATA;

/*
 * When the progress thread next looks for connections whose send queue
 * has opened (transport_queue_opens_in()), which no completion tells; 0:
 * no look is due.  Atomic.
 */
static int64_t queue_look_ms FORK_DATA;

/* Under holders.lock. */
static void holder_unlink_locked(struct readiness *r)
{
	if (r->holder_next)
		r->holder_next->holder_prev = r->holder_prev;
	*r->holder_prev = r->holder_next;
	r->holder_prev = NULL;
	__atomic_sub_fetch(&holders.count, 1, __ATOMIC_RELAXED);
}

/* Under r's sync_lock, with its out_fd just made: true if the first. */
static bool holder_add(struct readiness *r)
{
	bool first;

	pthread_mutex_lock(&holders.lock);
	r->holder_next = holders.head;
	if (holders.head)
		holders.head->holder_prev = &r->holder_next;
	r->holder_prev = &holders.head;
	holders.head = r;
	first = !__atomic_fetch_add(&holders.count, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&holders.lock);
	return first;
}

/* Once it returns, no tick looks at r. */
static void holder_remove(struct readiness *r)
{
	if (!readiness_alive(r))
		return;
	pthread_mutex_lock(&holders.lock);
	if (r->holder_prev)
		holder_unlink_locked(r);
	pthread_mutex_unlock(&holders.lock);
}

/*
 * The progress thread drains a hub it watches (readiness_watch()) with
 * this, for nobody in particular.
 */
static void serve_event(void *cq_context, void *arg);
struct drain {
	readiness_report_fn report;
	void *arg;
	struct readiness *self; /* a waiter that drains: served by its own */
};
static struct drain progress_drain;

int readiness_create(struct transport *t, struct readiness **out)
{
	struct readiness *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->in_fd = fd_room_eventfd();
	r->out_fd = -1;
	if (r->in_fd < 0) {
		free(r);
		return -EMFILE;
	}
	pthread_mutex_init(&r->sync_lock, NULL);
	pthread_mutex_init(&r->wait_lock, NULL);
	r->t = t;
	r->generation = generation;
	transport_set_owner(t, r);
	readiness_sync(r);
	*out = r;
	return 0;
}

void readiness_destroy(struct readiness *r)
{
	/* No drain serves it from here on, nor watches the hub for it. */
	if (readiness_alive(r)) {
		transport_set_owner(r->t, NULL);
		if (r->watching)
			cq_hub_watch(transport_hub(r->t), false, serve_event,
				     &progress_drain);
	}
	holder_remove(r);
	if (r->in_fd >= 0)
		real.close(r->in_fd);
	if (r->out_fd >= 0)
		real.close(r->out_fd);
	pthread_mutex_destroy(&r->sync_lock);
	pthread_mutex_destroy(&r->wait_lock);
	free(r);
}

bool readiness_alive(const struct readiness *r)
{
	return r->generation == generation;
}

void readiness_error_told(struct readiness *r)
{
	__atomic_store_n(&r->error_told, true, __ATOMIC_RELEASE);
}

bool readiness_take_error_told(struct readiness *r)
{
	return __atomic_load_n(&r->error_told, __ATOMIC_ACQUIRE) &&
	       __atomic_exchange_n(&r->error_told, false, __ATOMIC_ACQ_REL);
}

bool readiness_released(const struct readiness *r)
{
	return __atomic_load_n(&r->closing, __ATOMIC_ACQUIRE);
}

int readiness_in_fd(const struct readiness *r)
{
	return r->in_fd;
}

/*
 * Sequentially consistent: a poller or a writer counts itself, then loads
 * out_fd; the idle tick takes it, then looks at those counts
 * (give_back_locked()).  One of the two sees the other.
 */
/* Brings queue_look_ms forward to due; true if it did. */
static bool queue_look_by(int64_t due)
{
	int64_t at = __atomic_load_n(&queue_look_ms, __ATOMIC_ACQUIRE);

	do {
		if (at && at <= due)
			return false;
	} while (!__atomic_compare_exchange_n(&queue_look_ms, &at, due, false,
					      __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	return true;
}

/*
 * out_fd says there is no room: if the connection's send queue opens
 * later (the peer's reader stalls), whoever waits on it must learn it
 * then.  Asked wherever out_fd is made or synced without room, so that
 * a connection is listed in holders before its look comes.
 */
static void look_when_queue_opens(int ms)
{
	if (ms >= 0 && queue_look_by(clock_ms() + ms))
		progress_wake();
}

int readiness_out_fd(const struct readiness *r)
{
	return __atomic_load_n(&r->out_fd, __ATOMIC_SEQ_CST);
}

/*
 * As the sync lock last left out_ready; once released
 * (readiness_release_fds()), writable for good.
 */
int readiness_need_out_fd(struct readiness *r)
{
	int fd = readiness_out_fd(r);
	bool first = false;

	if (fd >= 0)
		return fd;
	if (!readiness_alive(r))
		return -EBADF;
	fd = fd_room_eventfd();
	if (fd < 0) {
		__atomic_store_n(&out_fd_scarce, true, __ATOMIC_RELAXED);
		return fd;
	}
	pthread_mutex_lock(&r->sync_lock);
	if (r->in_fd < 0 || r->out_fd >= 0) {
		/* Closed, or another thread made it first. */
		real.close(fd);
		fd = r->in_fd < 0 ? -EBADF : r->out_fd;
	} else {
		if (!r->out_ready &&
		    !__atomic_load_n(&r->closing, __ATOMIC_ACQUIRE))
			(void)!real.write(fd, &(uint64_t){ EVENTFD_FULL }, 8);
		__atomic_store_n(&r->out_fd, fd, __ATOMIC_RELEASE);
		r->out_used_ms = clock_ms();
		first = holder_add(r);
	}
	pthread_mutex_unlock(&r->sync_lock);
	/* The tick that gives it back must come, though nothing else does. */
	if (first)
		progress_wake();
	if (fd >= 0 && !__atomic_load_n(&r->out_ready, __ATOMIC_RELAXED))
		look_when_queue_opens(transport_queue_opens_in(r->t));
	return fd;
}

bool readiness_out_fds_held(void)
{
	return __atomic_load_n(&holders.count, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&out_fd_scarce, __ATOMIC_RELAXED);
}

void readiness_keep_out_fd(struct readiness *r)
{
	__atomic_store_n(&r->out_fd_kept, true, __ATOMIC_RELEASE);
}

/*
 * Under r's sync_lock: gives r's out_fd back if it is idle (see
 * readiness_give_back_out_fds()).
 */
static bool give_back_locked(struct readiness *r, int64_t now)
{
	int fd = r->out_fd;

	if (fd < 0 || !r->out_ready ||
	    __atomic_load_n(&r->closing, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&r->out_fd_kept, __ATOMIC_ACQUIRE) ||
	    now - r->out_used_ms < OUT_FD_IDLE_MS)
		return false;
	/* Taken, then the users looked at: see readiness_out_fd(). */
	__atomic_store_n(&r->out_fd, -1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&r->pollers, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&r->writers, __ATOMIC_SEQ_CST) ||
	    !readiness_epoll_unwatch_out_fd(r, fd)) {
		__atomic_store_n(&r->out_fd, fd, __ATOMIC_SEQ_CST);
		return false;
	}
	real.close(fd);
	return true;
}

static void eventfd_reset(int fd)
{
	uint64_t v;

	(void)!real.read(fd, &v, sizeof(v));
}

/* Under r's sync_lock: out_fd follows the transport's writability. */
static void sync_out_locked(struct readiness *r, bool writable)
{
	if (!writable && r->out_fd >= 0)
		r->out_used_ms = clock_ms();
	if (writable != r->out_ready && r->out_fd >= 0) {
		eventfd_reset(r->out_fd);
		if (!writable)
			(void)!real.write(r->out_fd,
					  &(uint64_t){ EVENTFD_FULL }, 8);
	}
	r->out_ready = writable;
}

/*
 * The progress thread's look: every connection waited on for room whose
 * send queue has opened becomes writable.  Returns the ms until the next
 * opens, -1 for none.  A connection busy syncing is looked at again soon.
 */
static int open_queues(void)
{
	struct readiness *r;
	int next = -1, ms;

	pthread_mutex_lock(&holders.lock);
	for (r = holders.head; r; r = r->holder_next) {
		if (__atomic_load_n(&r->out_ready, __ATOMIC_RELAXED))
			continue;
		if (pthread_mutex_trylock(&r->sync_lock)) {
			ms = PROGRESS_TICK_MS;
		} else {
			ms = -1;
			if (!__atomic_load_n(&r->closing, __ATOMIC_ACQUIRE) &&
			    !r->out_ready) {
				ms = transport_queue_opens_in(r->t);
				if (!ms)
					sync_out_locked(
						r, transport_writable(r->t));
			}
			pthread_mutex_unlock(&r->sync_lock);
		}
		if (ms > 0 && (next < 0 || ms < next))
			next = ms;
	}
	pthread_mutex_unlock(&holders.lock);
	return next;
}

/* The progress thread's part of the send queues' opening. */
static void queue_look_tick(int64_t now)
{
	int64_t at = __atomic_load_n(&queue_look_ms, __ATOMIC_ACQUIRE);
	int next;

	if (!at)
		return;
	if (now >= at &&
	    __atomic_compare_exchange_n(&queue_look_ms, &at, 0, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		next = open_queues();
		if (next >= 0)
			queue_look_by(now + next);
	}
	at = __atomic_load_n(&queue_look_ms, __ATOMIC_ACQUIRE);
	if (at)
		progress_tick_later((int)(at > now ? at - now : 0));
}

bool readiness_idle_tick(void)
{
	static int64_t next_scan_ms;
	int64_t now = clock_ms();

	queue_look_tick(now);
	if (!readiness_out_fds_held())
		return false;
	if (now >= next_scan_ms) {
		readiness_epoll_give_back_out_fds(now);
		next_scan_ms = now + OUT_FD_SCAN_MS;
	}
	progress_tick_later((int)(next_scan_ms - now));
	return false;
}

void readiness_give_back_out_fds(int64_t now)
{
	struct readiness *r, *next;

	pthread_mutex_lock(&holders.lock);
	for (r = holders.head; r; r = next) {
		next = r->holder_next;
		if (pthread_mutex_trylock(&r->sync_lock))
			continue;
		if (give_back_locked(r, now))
			holder_unlink_locked(r);
		pthread_mutex_unlock(&r->sync_lock);
	}
	pthread_mutex_unlock(&holders.lock);
}

int readiness_hub_fd(const struct readiness *r)
{
	/* In a fork child, the parent's hub is nobody's to name. */
	return readiness_alive(r) ? transport_event_fd(r->t) : -1;
}

unsigned int readiness_hub_slot(const struct readiness *r)
{
	return cq_hub_slot(transport_hub(r->t));
}

_Static_assert(CQ_HUB_SLOTS <= 64, "readiness_drain() has a bit per hub");

uint64_t readiness_hub_bit(const struct readiness *r)
{
	return 1ull << readiness_hub_slot(r);
}

struct transport *readiness_transport(const struct readiness *r)
{
	return r->t;
}

static void set_lag(struct readiness *r, bool on)
{
	if (__atomic_exchange_n(&r->in_lag, on, __ATOMIC_SEQ_CST) != on)
		__atomic_add_fetch(&lagging, on ? 1 : -1, __ATOMIC_SEQ_CST);
}

/*
 * Under sync_lock: whether in_fd may lag now (see lagging), told by told,
 * which is itself one of the epoll_wait() or poll() calls counted.
 */
static bool lag_unwatched(struct readiness *r, enum readiness_told told)
{
	unsigned int epolls = told == READINESS_TOLD_EPOLL;
	unsigned int polls = told == READINESS_TOLD_POLL;

	set_lag(r, true);
	if (__atomic_load_n(&epoll_waiters, __ATOMIC_SEQ_CST) <= epolls &&
	    __atomic_load_n(&r->pollers, __ATOMIC_SEQ_CST) <= polls &&
	    !__atomic_load_n(&r->waiters, __ATOMIC_SEQ_CST))
		return true;
	set_lag(r, false);
	return false;
}

/*
 * What tr says that the eventfds did not when last synced: EPOLLIN for a
 * new arrival, EPOLLOUT for room to send.  Read without the sync lock, a
 * hint (readiness_has_news()); under it, the truth (sync_fds()).
 */
static uint32_t news(const struct readiness *r,
		     const struct transport_readiness *tr)
{
	uint32_t n = 0;

	if (tr->readable &&
	    (!__atomic_load_n(&r->in_ready, __ATOMIC_RELAXED) ||
	     tr->arrivals != __atomic_load_n(&r->arrivals, __ATOMIC_RELAXED)))
		n |= EPOLLIN;
	if (tr->writable && !__atomic_load_n(&r->out_ready, __ATOMIC_RELAXED))
		n |= EPOLLOUT;
	return n;
}

/*
 * told: see readiness_serve().  out (if not NULL): the readiness the fds
 * were set from.  raised (if not NULL): EPOLLIN for a new arrival (in_fd
 * got an edge, or lags it), EPOLLOUT if out_fd became writable.  false:
 * nothing was synced (closed, or dead in a fork child), and out and
 * raised are untouched.
 */
static bool sync_fds(struct readiness *r, enum readiness_told told,
		     struct transport_readiness *out, uint32_t *raised)
{
	struct transport_readiness tr = { .corked = false };
	uint32_t edges;
	bool lag;

	if (!readiness_alive(r))
		return false;
	/* Serialised: two threads must not set the fds in the wrong order. */
	pthread_mutex_lock(&r->sync_lock);
	/*
	 * Closed: its fd numbers may already belong to other files.
	 * (readiness_close() cleared the lag under this lock.)
	 */
	if (__atomic_load_n(&r->closing, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&r->sync_lock);
		return false;
	}
	transport_readiness(r->t, &tr);
	edges = news(r, &tr);
	lag = tr.readable && !r->in_ready && told != READINESS_TOLD_NOBODY &&
	      lag_unwatched(r, told);
	/* Every arrival is a new edge for EPOLLET, even on a readable fd. */
	if (edges & EPOLLIN) {
		if (!lag)
			(void)!real.write(r->in_fd, &(uint64_t){ 1 }, 8);
	} else if (!tr.readable && r->in_ready) {
		eventfd_reset(r->in_fd);
	}
	set_lag(r, lag);
	r->in_ready = tr.readable && !lag;
	r->arrivals = tr.arrivals;
	sync_out_locked(r, tr.writable);
	pthread_mutex_unlock(&r->sync_lock);
	if (!tr.writable && readiness_out_fd(r) >= 0)
		look_when_queue_opens(tr.queue_opens_in);
	/* Corked bytes go out with a completion that someone must reap. */
	if (tr.corked)
		readiness_watch(r);
	if (out)
		*out = tr;
	if (raised)
		*raised = edges;
	return true;
}

void readiness_sync(struct readiness *r)
{
	sync_fds(r, READINESS_TOLD_NOBODY, NULL, NULL);
}

void readiness_settle(struct readiness *r)
{
	if (__atomic_load_n(&r->in_lag, __ATOMIC_SEQ_CST))
		sync_fds(r, READINESS_TOLD_NOBODY, NULL, NULL);
}

/* Sized on a thread's first wait: the configuration is read by then. */
static __thread struct spin_policy wait_spin;
static __thread bool wait_spin_sized;

bool readiness_spin_begin(struct wait_spin *w, unsigned int cap_us,
			  int timeout_ms, bool may)
{
	uint64_t budget;

	if (!wait_spin_sized) {
		spin_policy_init(&wait_spin, cap_us);
		wait_spin_sized = true;
	}
	w->start_us = 0;
	w->spinning = w->blocked = false;
	if (!timeout_ms || !may || !spin_time_wait(&wait_spin))
		return false;
	w->start_us = w->seen_us = clock_us();
	budget = spin_budget_us(&wait_spin);
	if (timeout_ms > 0 && budget > (uint64_t)timeout_ms * 1000)
		budget = (uint64_t)timeout_ms * 1000;
	w->end_us = w->start_us + budget;
	if (!budget || !spin_slot_take())
		return false;
	wait_time_block_signals(&w->old);
	w->spinning = w->blocked = true;
	return true;
}

void readiness_spin_stop(struct wait_spin *w)
{
	if (w->spinning)
		spin_slot_give();
	w->spinning = false;
}

void readiness_spin_end(struct wait_spin *w, int ret)
{
	bool polled_to_end = w->spinning;

	readiness_spin_stop(w);
	if (w->blocked)
		wait_time_unblock(&w->old);
	if (w->start_us && ret >= 0)
		spin_wait_ended(&wait_spin,
				(polled_to_end ? w->seen_us : clock_us()) -
					w->start_us);
}

bool readiness_has_news(struct readiness *r, uint32_t want)
{
	struct transport_readiness tr;

	if (!readiness_alive(r))
		return false;
	transport_readiness(r->t, &tr);
	return news(r, &tr) & want;
}

uint32_t readiness_poll_raised(struct readiness *r, enum readiness_told told,
			       struct transport_readiness *out)
{
	uint32_t raised = 0;

	return sync_fds(r, told, out, &raised) ? raised : 0;
}

bool readiness_epoll_wait_begin(void)
{
	__atomic_add_fetch(&epoll_waiters, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&lagging, __ATOMIC_SEQ_CST);
}

void readiness_epoll_wait_end(void)
{
	__atomic_sub_fetch(&epoll_waiters, 1, __ATOMIC_SEQ_CST);
}

void readiness_poll_begin(struct readiness *r)
{
	__atomic_add_fetch(&r->pollers, 1, __ATOMIC_SEQ_CST);
	readiness_want(r);
}

void readiness_poll_end(struct readiness *r)
{
	__atomic_sub_fetch(&r->pollers, 1, __ATOMIC_SEQ_CST);
}

/*
 * The progress thread watches the hub while some connection on it relies
 * on that (readiness_watch()), and none of its own calls sleeps there: a
 * completion for it then wakes its reader, who serves it.
 */
static void update_watch_locked(struct readiness *r)
{
	bool want = r->progress_wanted && !r->waiters;

	/* Until the start, a watch asked for waits for it. */
	if (!r->started || want == r->watching)
		return;
	cq_hub_watch(transport_hub(r->t), want, serve_event, &progress_drain);
	r->watching = want;
}

/* readiness_want() or readiness_watch() was called: sticky. */
static bool kept(struct readiness *r)
{
	return __atomic_load_n(&r->wanted, __ATOMIC_ACQUIRE);
}

void readiness_start(struct readiness *r)
{
	pthread_mutex_lock(&r->wait_lock);
	r->started = true;
	update_watch_locked(r);
	pthread_mutex_unlock(&r->wait_lock);
	transport_arm(r->t);
	readiness_sync(r);
}

void readiness_want(struct readiness *r)
{
	if (!readiness_alive(r))
		return;
	if (!kept(r)) {
		pthread_mutex_lock(&r->wait_lock);
		__atomic_store_n(&r->wanted, true, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&r->wait_lock);
	}
	/* Whatever comes next raises an event; what came before is synced. */
	transport_arm(r->t);
	readiness_sync(r);
}

void readiness_watch(struct readiness *r)
{
	/* A fork child must not touch the parent's epoll set. */
	if (!readiness_alive(r) ||
	    __atomic_load_n(&r->progress_wanted, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&r->wait_lock);
	__atomic_store_n(&r->wanted, true, __ATOMIC_RELEASE);
	__atomic_store_n(&r->progress_wanted, true, __ATOMIC_RELEASE);
	update_watch_locked(r);
	pthread_mutex_unlock(&r->wait_lock);
	/*
	 * What came before the watch raised no event it will see, and a
	 * read that took its own event left the queue unarmed: arm it (after
	 * wanted is stored, so that a drain taking an event now serves it).
	 */
	transport_arm(r->t);
	readiness_sync(r);
}

void readiness_serve(struct readiness *r, enum readiness_told told,
		     struct transport_readiness *out)
{
	transport_arm(r->t);
	if (!sync_fds(r, told, out, NULL) && out)
		transport_readiness(r->t, out);
}

/*
 * An event for r that nobody in particular waits for: served if anything
 * relies on its eventfds or sleeps for it.  Otherwise its queue stays
 * unarmed: a connection driven by blocking calls alone arms it again on
 * its next sleep, and costs nothing meanwhile.
 */
static void serve_quietly(struct readiness *r)
{
	if (kept(r) || __atomic_load_n(&r->waiters, __ATOMIC_SEQ_CST))
		readiness_serve(r, READINESS_TOLD_NOBODY, NULL);
}

static void serve_event(void *cq_context, void *arg)
{
	struct transport *t = cq_context;
	const struct drain *d = arg;
	struct readiness *r;

	transport_event_taken(t);
	r = transport_owner(t);
	if (!r || !readiness_alive(r))
		return;
	/* The waiter goes to its data; another sleeping with it must wake. */
	if (r == d->self &&
	    __atomic_load_n(&r->waiters, __ATOMIC_SEQ_CST) == 1 && !kept(r))
		return;
	if (!d->report || !d->report(r, d->arg))
		serve_quietly(r);
}

void readiness_drain(uint64_t hubs, readiness_report_fn report, void *arg)
{
	struct drain d = { .report = report, .arg = arg };

	for (; hubs; hubs &= hubs - 1)
		cq_hub_drain((unsigned int)__builtin_ctzll(hubs), serve_event,
			     &d, 0);
}

/* A blocking call woke on its hub: one event, its own or another's. */
static void drain_as_waiter(struct readiness *r)
{
	struct drain d = { .self = r };

	cq_hub_drain(readiness_hub_slot(r), serve_event, &d, 1);
}

/*
 * Until the program wants the readiness, nothing reads the eventfds
 * (readiness_want() syncs them first), and only corked bytes need
 * anything: someone to reap the completion that sends them.  (The other
 * order, readiness wanted meanwhile, is safe: both sides take the
 * transport's lock between their store and their load.)
 */
void readiness_after_send(struct readiness *r, bool corked)
{
	struct transport_readiness tr;

	if (!kept(r)) {
		if (corked)
			readiness_watch(r);
		return;
	}
	readiness_sync(r);
	/* Out of room: only out_fd can say when there is room again. */
	if (readiness_out_fd(r) < 0) {
		transport_readiness(r->t, &tr);
		if (!tr.writable)
			readiness_make_out_fd(r);
	}
}

/* A read never corks bytes: it syncs only if the eventfds are kept. */
void readiness_after_recv(struct readiness *r)
{
	if (kept(r))
		readiness_sync(r);
}

/*
 * Enters a sleep on the hub.  Counted before the sleep arms the queue: a
 * drain that takes the event then sees the count, and serves it (see
 * serve_quietly()), which wakes the sleeper through in_fd.
 */
static void waiter_enter(struct readiness *r)
{
	pthread_mutex_lock(&r->wait_lock);
	__atomic_add_fetch(&r->waiters, 1, __ATOMIC_SEQ_CST);
	update_watch_locked(r);
	pthread_mutex_unlock(&r->wait_lock);
}

static void waiter_leave(struct readiness *r)
{
	pthread_mutex_lock(&r->wait_lock);
	if (!__atomic_sub_fetch(&r->waiters, 1, __ATOMIC_SEQ_CST))
		update_watch_locked(r);
	pthread_mutex_unlock(&r->wait_lock);
}

/*
 * A send waiting for credit sleeps on out_fd, which the progress thread
 * makes writable: in a bulk transfer its reaping and credit handling
 * overlap the sender's copying (docs/performance.md).
 */
int readiness_wait_writable(struct readiness *r, int64_t deadline)
{
	struct pollfd pfd = { .events = POLLOUT };
	int timeout, ret;

	/* Counted first: the idle tick leaves out_fd alone meanwhile. */
	__atomic_add_fetch(&r->writers, 1, __ATOMIC_SEQ_CST);
	pfd.fd = readiness_make_out_fd(r);
	/* The progress thread makes out_fd writable when credit comes. */
	readiness_watch(r);
	/* A stale eventfd would end the sleep at once. */
	readiness_sync(r);
	timeout = clock_ms_left(deadline);
	if (!timeout) {
		ret = -EAGAIN;
		goto out;
	}
	/* No descriptor to be had: look again now and then. */
	if (pfd.fd < 0) {
		if (timeout < 0 || timeout > OUT_FD_MISSING_NAP_MS)
			timeout = OUT_FD_MISSING_NAP_MS;
		ret = real.poll(NULL, 0, timeout) < 0 ? -errno : 0;
		goto out;
	}
	ret = real.poll(&pfd, 1, timeout);
	if (ret < 0)
		ret = -errno;
	else
		ret = ret ? 0 : -EAGAIN;
out:
	__atomic_sub_fetch(&r->writers, 1, __ATOMIC_SEQ_CST);
	return ret;
}

/*
 * A read sleeps on the hub itself: the completion wakes it directly, not
 * through the progress thread and the eventfd.  in_fd still ends the
 * sleep if another thread took the event first, or the CM's disconnect
 * came.
 */
int readiness_wait_readable(struct readiness *r, int64_t deadline)
{
	struct pollfd pfd[2] = {
		{ .fd = transport_event_fd(r->t), .events = POLLIN },
		{ .fd = r->in_fd, .events = POLLIN },
	};
	int timeout, ret = 0;

	/* A stale eventfd would end the sleep at once. */
	if (kept(r) || __atomic_load_n(&r->in_ready, __ATOMIC_RELAXED))
		readiness_sync(r);
	timeout = clock_ms_left(deadline);
	if (!timeout)
		return -EAGAIN;
	waiter_enter(r);
	/* Armed, and reaped after the arm: what comes next raises an event. */
	if (transport_arm_for_read(r->t))
		goto out;
	ret = real.poll(pfd, 2, timeout);
	if (ret < 0) {
		ret = -errno;
		goto out;
	}
	ret = ret ? 0 : -EAGAIN;
	if (!ret && pfd[0].revents)
		drain_as_waiter(r);
out:
	waiter_leave(r);
	return ret;
}

/*
 * An arrival that wakes it goes on to the eventfd at once: the progress
 * thread, which would do that, leaves the hub alone meanwhile.
 */
bool readiness_wait_hub(struct readiness *r, bool (*done)(void *arg), void *arg,
			int timeout_ms)
{
	struct pollfd pfd = { .fd = transport_event_fd(r->t),
			      .events = POLLIN };
	bool ok;

	waiter_enter(r);
	ok = done(arg);
	if (!ok && real.poll(&pfd, 1, timeout_ms) > 0)
		drain_as_waiter(r);
	waiter_leave(r);
	if (!ok && pfd.revents && kept(r))
		readiness_sync(r);
	return ok;
}

/*
 * Makes the eventfds ready for good, so that whoever sleeps on them wakes
 * and finds the connection on its kernel socket; no sync touches them
 * after this.
 */
void readiness_release_fds(struct readiness *r)
{
	if (!readiness_alive(r))
		return;
	pthread_mutex_lock(&r->sync_lock);
	if (!__atomic_load_n(&r->closing, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&r->closing, 1, __ATOMIC_RELEASE);
		set_lag(r, false);
		(void)!real.write(r->in_fd, &(uint64_t){ 1 }, 8);
		if (r->out_fd >= 0)
			eventfd_reset(r->out_fd);
	}
	pthread_mutex_unlock(&r->sync_lock);
}

void readiness_close(struct readiness *r)
{
	bool alive = readiness_alive(r);

	/*
	 * Under the sync lock: no sync may write to the fds after this.  A
	 * fork child skips it: syncs never run there, and the lock may have
	 * been held by a thread that does not exist in the child.
	 */
	if (alive)
		pthread_mutex_lock(&r->sync_lock);
	__atomic_store_n(&r->closing, 1, __ATOMIC_RELEASE);
	/* A fork child's count of lagging connections starts again at 0. */
	if (alive)
		set_lag(r, false);
	if (r->in_fd >= 0)
		real.close(r->in_fd);
	if (r->out_fd >= 0)
		real.close(r->out_fd);
	r->in_fd = r->out_fd = -1;
	holder_remove(r);
	if (alive)
		pthread_mutex_unlock(&r->sync_lock);
}

void FORK_CODE readiness_core_fork_child(void)
{
	generation++;
	/* Inherited holders are dead: holder_remove() leaves them be. */
	pthread_mutex_init(&holders.lock, NULL);
	holders.head = NULL;
	holders.count = 0;
	__atomic_store_n(&lagging, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&epoll_waiters, 0, __ATOMIC_SEQ_CST);
}
