// SPDX-License-Identifier: MIT
/* Specification of one connection's readiness (src/readiness.c): what its
 * two eventfds say for each state of the transport, the lag that an
 * epoll_wait() reporting an arrival itself may leave, how a drain of the
 * completion hub serves it, when the progress thread watches the hub, how
 * blocking calls sleep, and the end (release, close, a fork child); and
 * what becomes of the epoll registrations a socket had before its
 * connect() (src/readiness_epoll.c), in a real epoll set with a real
 * unconnected TCP socket.  The transport and the hub are test doubles
 * (-Wl,--wrap): the transport's state is set by hand and the hub is an
 * eventfd whose events are all the fixture's transport's, so no verbs are
 * needed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "config.h"
#include "cq_hub.h"
#include "fd_table.h"
#include "readiness_impl.h"
#include "real.h"
#include "sock.h"

/* A transport double: the state readiness reads, and its hub. */
struct transport {
	struct transport_readiness state;
	int channel;		 /* the hub: readable while an event waits */
	void *owner;		 /* transport_set_owner() */
	unsigned int arms;	 /* transport_arm() and _arm_for_read() */
	unsigned int taken;	 /* transport_event_taken() */
	bool readable_after_arm; /* what transport_arm_for_read() finds */
	int queue_opens_in;	 /* when the send queue opens, if closed */
	bool queue_closed;	 /* else it says -1 */
};

/* The hub double: the transport its events are for, and its watch. */
static struct transport *hub_owner;
static struct {
	bool on;
	unsigned int ons;
	unsigned int offs;
} watch;

int __wrap_transport_event_fd(const struct transport *t);
int __wrap_transport_queue_opens_in(struct transport *t);
bool __wrap_transport_writable(struct transport *t);
struct cq_hub *__wrap_transport_hub(const struct transport *t);
unsigned int __wrap_cq_hub_slot(const struct cq_hub *h);
void __wrap_transport_readiness(struct transport *t,
				struct transport_readiness *out);
int __wrap_transport_arm(struct transport *t);
bool __wrap_transport_arm_for_read(struct transport *t);
void __wrap_transport_event_taken(struct transport *t);
void __wrap_transport_set_owner(struct transport *t, void *owner);
void *__wrap_transport_owner(const struct transport *t);
unsigned int __wrap_cq_hub_drain(unsigned int slot, cq_hub_serve_fn serve,
				 void *arg, unsigned int max);
void __wrap_cq_hub_watch(struct cq_hub *h, bool on, cq_hub_serve_fn serve,
			 void *arg);

int __wrap_transport_event_fd(const struct transport *t)
{
	return t->channel;
}

struct cq_hub *__wrap_transport_hub(const struct transport *t)
{
	return (struct cq_hub *)t;
}

/* One hub, in slot 0. */
unsigned int __wrap_cq_hub_slot(const struct cq_hub *h)
{
	(void)h;
	return 0;
}

void __wrap_transport_readiness(struct transport *t,
				struct transport_readiness *out)
{
	*out = t->state;
	out->queue_opens_in =
		!t->state.writable && t->queue_closed ? t->queue_opens_in : -1;
}

int __wrap_transport_queue_opens_in(struct transport *t)
{
	return t->queue_closed ? t->queue_opens_in : -1;
}

bool __wrap_transport_writable(struct transport *t)
{
	return t->state.writable;
}

int __wrap_transport_arm(struct transport *t)
{
	t->arms++;
	return 0;
}

bool __wrap_transport_arm_for_read(struct transport *t)
{
	t->arms++;
	return t->readable_after_arm;
}

void __wrap_transport_event_taken(struct transport *t)
{
	t->taken++;
}

void __wrap_transport_set_owner(struct transport *t, void *owner)
{
	t->owner = owner;
}

void *__wrap_transport_owner(const struct transport *t)
{
	return t->owner;
}

/* The channel is a semaphore eventfd: a read takes one event. */
unsigned int __wrap_cq_hub_drain(unsigned int slot, cq_hub_serve_fn serve,
				 void *arg, unsigned int max)
{
	unsigned int n = 0;
	uint64_t v;

	while (hub_owner && !slot && (!max || n < max) &&
	       read(hub_owner->channel, &v, sizeof(v)) == sizeof(v)) {
		serve(hub_owner, arg);
		n++;
	}
	return n;
}

void __wrap_cq_hub_watch(struct cq_hub *h, bool on, cq_hub_serve_fn serve,
			 void *arg)
{
	(void)h;
	(void)serve;
	(void)arg;
	watch.on = on;
	if (on)
		watch.ons++;
	else
		watch.offs++;
}

struct fixture {
	struct transport t;
	struct readiness *r;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->t.channel = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	f->t.state.writable = true;
	hub_owner = &f->t;
	watch.on = false;
	watch.ons = watch.offs = 0;
	if (f->t.channel < 0 || readiness_create(&f->t, &f->r))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	readiness_close(f->r);
	readiness_destroy(f->r);
	close(f->t.channel);
	hub_owner = NULL;
	free(f);
	return 0;
}

/* What poll() says of fd now, of POLLIN and POLLOUT. */
static short ready(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLOUT };

	assert_true(poll(&pfd, 1, 0) >= 0);
	return pfd.revents & (POLLIN | POLLOUT);
}

static bool in_ready(struct fixture *f)
{
	return ready(readiness_in_fd(f->r)) & POLLIN;
}

/* Makes out_fd, as a wait for room to send would. */
static bool out_ready(struct fixture *f)
{
	return ready(readiness_need_out_fd(f->r)) & POLLOUT;
}

static void arrive(struct fixture *f)
{
	f->t.state.readable = true;
	f->t.state.arrivals++;
}

static void fire_channel(struct fixture *f)
{
	assert_int_equal(write(f->t.channel, &(uint64_t){ 1 }, 8), 8);
}

/* ---- the eventfds --------------------------------------------------- */

static void new_connection_with_credit_is_writable_not_readable(void **state)
{
	struct fixture *f = *state;

	assert_false(in_ready(f));
	assert_true(out_ready(f));
}

static void new_connection_without_credit_is_not_writable(void **state)
{
	struct transport t = { .channel = -1 };
	struct readiness *r;

	assert_int_equal(readiness_create(&t, &r), 0);
	assert_false(ready(readiness_need_out_fd(r)) & POLLOUT);
	readiness_close(r);
	readiness_destroy(r);
}

static void out_fd_is_made_only_when_a_wait_needs_it(void **state)
{
	struct fixture *f = *state;
	int fd;

	f->t.state.writable = false;
	readiness_want(f->r);
	f->t.state.writable = true;
	readiness_sync(f->r);
	assert_int_equal(readiness_out_fd(f->r), -1);
	fd = readiness_need_out_fd(f->r);
	assert_true(fd >= 0);
	assert_int_equal(readiness_need_out_fd(f->r), fd);
	assert_int_equal(readiness_out_fd(f->r), fd);
}

static void send_that_leaves_room_makes_no_out_fd(void **state)
{
	struct fixture *f = *state;

	readiness_want(f->r);
	readiness_after_send(f->r, false);
	assert_int_equal(readiness_out_fd(f->r), -1);
}

static void send_out_of_room_makes_out_fd_once_readiness_is_wanted(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	readiness_after_send(f->r, false);
	assert_int_equal(readiness_out_fd(f->r), -1);
	readiness_want(f->r);
	readiness_after_send(f->r, false);
	assert_true(readiness_out_fd(f->r) >= 0);
	assert_false(ready(readiness_out_fd(f->r)) & POLLOUT);
}

/* Out of credit, the queue opens 20 ms on; its room is there after. */
static void send_out_of_room_with_a_queue_opening_later(struct fixture *f)
{
	f->t.state.writable = false;
	f->t.queue_closed = true;
	f->t.queue_opens_in = 20;
	readiness_want(f->r);
	readiness_after_send(f->r, false);
	f->t.state.writable = true;
	f->t.queue_opens_in = 0;
}

static void out_fd_becomes_writable_once_the_send_queue_opens(void **state)
{
	struct fixture *f = *state;

	send_out_of_room_with_a_queue_opening_later(f);
	assert_false(ready(readiness_out_fd(f->r)) & POLLOUT);
	usleep(30000);
	readiness_idle_tick();
	assert_true(ready(readiness_out_fd(f->r)) & POLLOUT);
}

static void send_queue_opening_is_not_told_before_its_time(void **state)
{
	struct fixture *f = *state;

	send_out_of_room_with_a_queue_opening_later(f);
	readiness_idle_tick();
	assert_false(ready(readiness_out_fd(f->r)) & POLLOUT);
}

static void out_fd_made_late_says_what_the_last_sync_saw(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	readiness_sync(f->r);
	f->t.state.writable = true;
	assert_false(out_ready(f));
	readiness_sync(f->r);
	assert_true(out_ready(f));
}

static void out_fd_made_after_release_is_writable(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	readiness_sync(f->r);
	readiness_release_fds(f->r);
	assert_int_equal(readiness_out_fd(f->r), -1);
	assert_true(out_ready(f));
}

static void out_fd_is_not_made_once_closed(void **state)
{
	struct fixture *f = *state;

	readiness_close(f->r);
	assert_true(readiness_need_out_fd(f->r) < 0);
	assert_int_equal(readiness_out_fd(f->r), -1);
}

static void arrival_makes_in_fd_readable(void **state)
{
	struct fixture *f = *state;

	arrive(f);
	readiness_sync(f->r);
	assert_true(in_ready(f));
}

static void read_of_everything_makes_in_fd_unreadable(void **state)
{
	struct fixture *f = *state;

	arrive(f);
	readiness_sync(f->r);
	f->t.state.readable = false;
	readiness_sync(f->r);
	assert_false(in_ready(f));
}

static void credit_running_out_and_coming_back_toggles_out_fd(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	readiness_sync(f->r);
	assert_false(out_ready(f));
	f->t.state.writable = true;
	readiness_sync(f->r);
	assert_true(out_ready(f));
}

static void every_arrival_is_a_new_edge_on_a_readable_fd(void **state)
{
	struct fixture *f = *state;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	assert_int_equal(
		epoll_ctl(ep, EPOLL_CTL_ADD, readiness_in_fd(f->r), &ev), 0);
	arrive(f);
	readiness_sync(f->r);
	assert_int_equal(epoll_wait(ep, &ev, 1, 0), 1);
	assert_int_equal(epoll_wait(ep, &ev, 1, 0), 0);
	arrive(f);
	readiness_sync(f->r);
	assert_int_equal(epoll_wait(ep, &ev, 1, 0), 1);
	close(ep);
}

static void sync_without_change_raises_no_edge(void **state)
{
	struct fixture *f = *state;

	arrive(f);
	readiness_sync(f->r);
	assert_int_equal(
		readiness_poll_raised(f->r, READINESS_TOLD_NOBODY, NULL), 0);
	assert_false(readiness_has_news(f->r, EPOLLIN | EPOLLOUT));
}

static void poll_raised_names_what_changed(void **state)
{
	struct fixture *f = *state;
	struct transport_readiness now;

	f->t.state.writable = false;
	readiness_sync(f->r);
	arrive(f);
	f->t.state.writable = true;
	assert_true(readiness_has_news(f->r, EPOLLIN));
	assert_int_equal(
		readiness_poll_raised(f->r, READINESS_TOLD_NOBODY, &now),
		EPOLLIN | EPOLLOUT);
	assert_true(now.readable && now.writable);
}

/* ---- the lag -------------------------------------------------------- */

static void told_arrival_lags_while_nothing_else_watches(void **state)
{
	struct fixture *f = *state;

	readiness_epoll_wait_begin();
	arrive(f);
	readiness_serve(f->r, READINESS_TOLD_EPOLL, NULL);
	readiness_epoll_wait_end();
	assert_false(in_ready(f));
	/* The next epoll_wait() is told to settle it first. */
	assert_true(readiness_epoll_wait_begin());
	readiness_settle(f->r);
	readiness_epoll_wait_end();
	assert_true(in_ready(f));
	assert_false(readiness_epoll_wait_begin());
	readiness_epoll_wait_end();
}

static void
told_arrival_sets_in_fd_while_another_epoll_wait_sleeps(void **state)
{
	struct fixture *f = *state;

	readiness_epoll_wait_begin();
	readiness_epoll_wait_begin();
	arrive(f);
	readiness_serve(f->r, READINESS_TOLD_EPOLL, NULL);
	readiness_epoll_wait_end();
	readiness_epoll_wait_end();
	assert_true(in_ready(f));
}

static void told_arrival_sets_in_fd_while_a_poll_watches(void **state)
{
	struct fixture *f = *state;

	readiness_poll_begin(f->r);
	arrive(f);
	readiness_serve(f->r, READINESS_TOLD_EPOLL, NULL);
	assert_true(in_ready(f));
	readiness_poll_end(f->r);
}

static void poll_begin_settles_a_lagging_connection(void **state)
{
	struct fixture *f = *state;

	arrive(f);
	readiness_serve(f->r, READINESS_TOLD_EPOLL, NULL);
	assert_false(in_ready(f));
	readiness_poll_begin(f->r);
	assert_true(in_ready(f));
	readiness_poll_end(f->r);
}

static void poll_told_arrival_lags_for_its_only_poller(void **state)
{
	struct fixture *f = *state;

	readiness_poll_begin(f->r);
	arrive(f);
	assert_int_equal(readiness_poll_raised(f->r, READINESS_TOLD_POLL, NULL),
			 EPOLLIN);
	assert_false(in_ready(f));
	readiness_poll_end(f->r);
	/* The next poll() settles it before it waits. */
	readiness_poll_begin(f->r);
	assert_true(in_ready(f));
	readiness_poll_end(f->r);
}

static void
poll_told_arrival_sets_in_fd_while_another_poll_watches(void **state)
{
	struct fixture *f = *state;

	readiness_poll_begin(f->r);
	readiness_poll_begin(f->r);
	arrive(f);
	readiness_serve(f->r, READINESS_TOLD_POLL, NULL);
	assert_true(in_ready(f));
	readiness_poll_end(f->r);
	readiness_poll_end(f->r);
}

static void
poll_told_arrival_sets_in_fd_while_an_epoll_wait_sleeps(void **state)
{
	struct fixture *f = *state;

	readiness_epoll_wait_begin();
	readiness_poll_begin(f->r);
	arrive(f);
	readiness_serve(f->r, READINESS_TOLD_POLL, NULL);
	assert_true(in_ready(f));
	readiness_poll_end(f->r);
	readiness_epoll_wait_end();
}

/* ---- the hub -------------------------------------------------------- */

static void
drain_takes_the_event_of_a_connection_nothing_relies_on(void **state)
{
	struct fixture *f = *state;
	unsigned int arms;

	readiness_start(f->r);
	arms = f->t.arms;
	arrive(f);
	fire_channel(f);
	readiness_drain(1, NULL, NULL);
	assert_int_equal(f->t.taken, 1);
	/* Its queue stays unarmed, and its eventfds stale. */
	assert_int_equal(f->t.arms, arms);
	assert_false(in_ready(f));
}

static void drain_serves_a_connection_whose_readiness_is_wanted(void **state)
{
	struct fixture *f = *state;
	unsigned int arms;

	readiness_start(f->r);
	readiness_want(f->r);
	arms = f->t.arms;
	arrive(f);
	fire_channel(f);
	readiness_drain(1, NULL, NULL);
	assert_int_equal(f->t.taken, 1);
	assert_int_equal(f->t.arms, arms + 1);
	assert_true(in_ready(f));
}

static bool report_drain(struct readiness *r, void *arg)
{
	*(struct readiness **)arg = r;
	readiness_serve(r, READINESS_TOLD_NOBODY, NULL);
	return true;
}

static void drain_with_a_report_hands_it_each_connection(void **state)
{
	struct fixture *f = *state;
	struct readiness *reported = NULL;

	readiness_start(f->r);
	fire_channel(f);
	readiness_drain(1, report_drain, &reported);
	assert_ptr_equal(reported, f->r);
}

static bool decline_drain(struct readiness *r, void *arg)
{
	(void)r;
	(void)arg;
	return false;
}

static void drain_serves_what_a_report_declines_as_for_nobody(void **state)
{
	struct fixture *f = *state;

	readiness_start(f->r);
	readiness_want(f->r);
	arrive(f);
	fire_channel(f);
	readiness_drain(1, decline_drain, NULL);
	assert_true(in_ready(f));
}

static void destroyed_connection_is_never_served(void **state)
{
	struct transport t = { .channel = -1, .state.writable = true };
	struct fixture *f = *state;
	struct readiness *r, *reported = NULL;

	assert_int_equal(readiness_create(&t, &r), 0);
	assert_ptr_equal(t.owner, r);
	readiness_close(r);
	readiness_destroy(r);
	assert_null(t.owner);
	t.channel = f->t.channel;
	hub_owner = &t;
	fire_channel(f);
	readiness_drain(1, report_drain, &reported);
	assert_int_equal(t.taken, 1);
	assert_null(reported);
}

/* ---- who watches the hub -------------------------------------------- */

static void watch_before_start_leaves_the_hub_alone(void **state)
{
	struct fixture *f = *state;

	readiness_watch(f->r);
	assert_int_equal(watch.ons, 0);
	readiness_start(f->r);
	assert_true(watch.on);
}

/* The arms that call() makes on a started connection. */
static unsigned int arms_by(struct fixture *f,
			    void (*call)(struct readiness *r))
{
	unsigned int arms;

	readiness_start(f->r);
	arms = f->t.arms;
	call(f->r);
	return f->t.arms - arms;
}

static void want_arms_the_queue_without_the_progress_thread(void **state)
{
	struct fixture *f = *state;

	assert_true(arms_by(f, readiness_want) > 0);
	assert_int_equal(watch.ons, 0);
}

static void corked_send_has_the_progress_thread_watch(void **state)
{
	struct fixture *f = *state;

	readiness_start(f->r);
	readiness_after_send(f->r, true);
	assert_true(watch.on);
}

static void watch_arms_the_queue(void **state)
{
	assert_int_equal(arms_by(*state, readiness_watch), 1);
}

static void destroy_ends_the_watch(void **state)
{
	struct transport t = { .channel = -1, .state.writable = true };
	struct readiness *r;

	(void)state;
	assert_int_equal(readiness_create(&t, &r), 0);
	readiness_start(r);
	readiness_watch(r);
	assert_true(watch.on);
	readiness_close(r);
	readiness_destroy(r);
	assert_false(watch.on);
}

static void send_without_want_keeps_the_eventfds_stale(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	readiness_after_send(f->r, false);
	assert_true(out_ready(f));
	readiness_want(f->r);
	assert_false(out_ready(f));
	f->t.state.writable = true;
	readiness_after_send(f->r, false);
	assert_true(out_ready(f));
}

/* ---- blocking calls ------------------------------------------------- */

static void read_wait_times_out_with_eagain(void **state)
{
	struct fixture *f = *state;

	readiness_start(f->r);
	assert_int_equal(readiness_wait_readable(f->r, clock_ms() + 20),
			 -EAGAIN);
}

static void read_wait_ends_at_once_when_the_arm_finds_data(void **state)
{
	struct fixture *f = *state;

	readiness_start(f->r);
	f->t.readable_after_arm = true;
	assert_int_equal(readiness_wait_readable(f->r, clock_ms() + 5000), 0);
}

static void *fire_later(void *arg)
{
	struct timespec pause = { .tv_nsec = 20 * 1000000 };

	nanosleep(&pause, NULL);
	fire_channel(arg);
	return NULL;
}

static void *arrive_later(void *arg)
{
	struct timespec pause = { .tv_nsec = 20 * 1000000 };

	nanosleep(&pause, NULL);
	arrive(arg);
	fire_channel(arg);
	return NULL;
}

static void read_wait_wakes_on_the_hub(void **state)
{
	struct fixture *f = *state;
	pthread_t th;
	unsigned int arms;

	readiness_start(f->r);
	arms = f->t.arms;
	assert_int_equal(pthread_create(&th, NULL, fire_later, f), 0);
	assert_int_equal(readiness_wait_readable(f->r, clock_ms() + 5000), 0);
	pthread_join(th, NULL);
	/*
	 * It took its event, and goes to its data: nobody relies on the
	 * eventfds, and its next sleep arms the queue.
	 */
	assert_int_equal(f->t.taken, 1);
	assert_int_equal(f->t.arms, arms + 1);
	assert_false(in_ready(f));
}

static void read_wait_serves_its_event_when_readiness_is_wanted(void **state)
{
	struct fixture *f = *state;
	pthread_t th;
	unsigned int arms;

	readiness_start(f->r);
	readiness_want(f->r);
	arms = f->t.arms;
	assert_int_equal(pthread_create(&th, NULL, arrive_later, f), 0);
	assert_int_equal(readiness_wait_readable(f->r, clock_ms() + 5000), 0);
	pthread_join(th, NULL);
	assert_int_equal(f->t.taken, 1);
	assert_int_equal(f->t.arms, arms + 2);
	assert_true(in_ready(f));
}

static void read_wait_resets_a_stale_in_fd_before_it_sleeps(void **state)
{
	struct fixture *f = *state;

	readiness_start(f->r);
	arrive(f);
	readiness_sync(f->r);
	f->t.state.readable = false;
	assert_int_equal(readiness_wait_readable(f->r, clock_ms() + 20),
			 -EAGAIN);
	assert_false(in_ready(f));
}

static void sleeping_read_keeps_the_progress_thread_off_the_hub(void **state)
{
	struct fixture *f = *state;

	readiness_start(f->r);
	readiness_watch(f->r);
	assert_true(watch.on);
	assert_int_equal(readiness_wait_readable(f->r, clock_ms() + 10),
			 -EAGAIN);
	/* Taken out for the sleep, put back after it. */
	assert_int_equal(watch.offs, 1);
	assert_true(watch.on);
}

static void *credit_later(void *arg)
{
	struct fixture *f = arg;
	struct timespec pause = { .tv_nsec = 20 * 1000000 };

	nanosleep(&pause, NULL);
	f->t.state.writable = true;
	readiness_sync(f->r);
	return NULL;
}

static void send_wait_wakes_when_credit_comes(void **state)
{
	struct fixture *f = *state;
	pthread_t th;

	f->t.state.writable = false;
	readiness_sync(f->r);
	assert_int_equal(pthread_create(&th, NULL, credit_later, f), 0);
	assert_int_equal(readiness_wait_writable(f->r, clock_ms() + 5000), 0);
	pthread_join(th, NULL);
}

static void send_wait_without_credit_times_out(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	assert_int_equal(readiness_wait_writable(f->r, clock_ms() + 20),
			 -EAGAIN);
}

/* ---- the end -------------------------------------------------------- */

static void release_makes_both_eventfds_ready_for_good(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	readiness_sync(f->r);
	readiness_release_fds(f->r);
	assert_true(readiness_released(f->r));
	assert_true(in_ready(f));
	assert_true(out_ready(f));
	f->t.state.readable = false;
	readiness_sync(f->r);
	assert_true(in_ready(f));
	assert_true(out_ready(f));
}

static void close_closes_the_eventfds_and_no_sync_writes_after(void **state)
{
	struct fixture *f = *state;
	int in_fd = readiness_in_fd(f->r);
	struct rlimit lim;
	int reused;

	readiness_close(f->r);
	assert_int_equal(fcntl(in_fd, F_GETFD), -1);
	/*
	 * Another file takes the number (which may lie above the soft
	 * limit): a sync must leave it alone.
	 */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &lim), 0);
	lim.rlim_cur = lim.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	reused = eventfd(0, EFD_NONBLOCK);
	if (reused != in_fd) {
		assert_int_equal(dup2(reused, in_fd), in_fd);
		close(reused);
		reused = in_fd;
	}
	arrive(f);
	readiness_sync(f->r);
	assert_int_equal(ready(reused), POLLOUT);
	close(reused);
}

static void fork_child_sees_inherited_readiness_dead(void **state)
{
	struct fixture *f = *state;
	unsigned int ons = watch.ons;

	readiness_start(f->r);
	readiness_core_fork_child();
	assert_false(readiness_alive(f->r));
	arrive(f);
	readiness_sync(f->r);
	readiness_watch(f->r);
	assert_false(in_ready(f));
	assert_int_equal(watch.ons, ons);
}

/* ---- giving out_fd back ---------------------------------------------- */

/* The idle tick's look, a minute from now: out_fd is as idle as can be. */
static void give_back_a_minute_later(void)
{
	readiness_epoll_give_back_out_fds(clock_ms() + 60000);
}

/* Whether ep's fdinfo lists an entry for fd. */
static bool set_lists(int ep, int fd)
{
	char path[64], line[256], want[32];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", ep);
	snprintf(want, sizeof(want), "tfd: %8d ", fd);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		found |= !strncmp(line, want, strlen(want));
	fclose(f);
	return found;
}

static void idle_out_fd_with_room_is_given_back(void **state)
{
	struct fixture *f = *state;
	int fd = readiness_make_out_fd(f->r);

	assert_true(fd >= 0);
	assert_true(readiness_out_fds_held());
	give_back_a_minute_later();
	assert_int_equal(readiness_out_fd(f->r), -1);
	assert_false(readiness_out_fds_held());
	assert_true(fcntl(fd, F_GETFD) < 0 && errno == EBADF);
}

static void out_fd_without_room_is_kept(void **state)
{
	struct fixture *f = *state;

	f->t.state.writable = false;
	readiness_sync(f->r);
	assert_true(readiness_make_out_fd(f->r) >= 0);
	give_back_a_minute_later();
	assert_true(readiness_out_fd(f->r) >= 0);
	assert_false(out_ready(f));
}

static void out_fd_used_lately_is_kept(void **state)
{
	struct fixture *f = *state;

	assert_true(readiness_make_out_fd(f->r) >= 0);
	readiness_epoll_give_back_out_fds(clock_ms());
	assert_true(readiness_out_fd(f->r) >= 0);
}

static void out_fd_a_poll_watches_is_kept(void **state)
{
	struct fixture *f = *state;

	assert_true(readiness_make_out_fd(f->r) >= 0);
	readiness_poll_begin(f->r);
	give_back_a_minute_later();
	assert_true(readiness_out_fd(f->r) >= 0);
	readiness_poll_end(f->r);
	give_back_a_minute_later();
	assert_int_equal(readiness_out_fd(f->r), -1);
}

static void out_fd_kept_for_good_stays(void **state)
{
	struct fixture *f = *state;

	assert_true(readiness_make_out_fd(f->r) >= 0);
	readiness_keep_out_fd(f->r);
	give_back_a_minute_later();
	assert_true(readiness_out_fd(f->r) >= 0);
}

static void out_fd_closed_with_its_connection_is_no_longer_held(void **state)
{
	struct fixture *f = *state;

	assert_true(readiness_make_out_fd(f->r) >= 0);
	readiness_close(f->r);
	assert_false(readiness_out_fds_held());
}

static void
send_out_of_room_after_the_give_back_makes_out_fd_again(void **state)
{
	struct fixture *f = *state;

	readiness_want(f->r);
	assert_true(readiness_make_out_fd(f->r) >= 0);
	give_back_a_minute_later();
	f->t.state.writable = false;
	readiness_after_send(f->r, false);
	assert_true(readiness_out_fd(f->r) >= 0);
	assert_false(ready(readiness_out_fd(f->r)) & POLLOUT);
}

/* ---- registrations made before connect() --------------------------- */

/* An unconnected TCP socket, tracked, in a new epoll set for EPOLLIN. */
struct early {
	struct sock *sock;
	int fd;
	int ep;
};

static const struct config rdma_on = { .enabled = true, .rdma = true };

static void early_open_for(struct early *e, uint64_t data, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };

	e->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	e->ep = epoll_create1(EPOLL_CLOEXEC);
	e->sock = sock_new(AF_INET);
	assert_true(e->fd >= 0 && e->ep >= 0 && e->sock);
	readiness_set_opened(e->ep);
	assert_int_equal(fd_table_install(e->fd, e->sock), 0);
	assert_int_equal(
		readiness_epoll_ctl(&rdma_on, e->ep, EPOLL_CTL_ADD, e->fd, &ev),
		0);
}

static void early_open(struct early *e, uint64_t data)
{
	early_open_for(e, data, EPOLLIN);
}

static void early_close(struct early *e)
{
	struct sock *sock = fd_table_remove(e->fd);

	readiness_fd_closed((unsigned int)e->fd, (unsigned int)e->fd);
	readiness_fd_closed((unsigned int)e->ep, (unsigned int)e->ep);
	close(e->fd);
	close(e->ep);
	sock_put(sock);
	sock_put(e->sock);
}

/* Whether the kernel holds fd's own registration in ep. */
static bool kernel_holds(int ep, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0)
		return true;
	assert_int_equal(errno, ENOENT);
	return false;
}

static void registration_before_connect_follows_an_upgrade(void **state)
{
	struct fixture *f = *state;
	struct epoll_event got[4];
	uint32_t events = 0;
	struct early e;
	int i, n;

	early_open(&e, 5);
	readiness_early_upgrade(e.sock, f->r);
	arrive(f);
	readiness_sync(f->r);
	/* The connection's entries, as the wrapper would fold them. */
	n = epoll_wait(e.ep, got, 4, 0);
	assert_true(n >= 1);
	for (i = 0; i < n; i++) {
		assert_int_equal(got[i].data.u64, 5);
		events |= got[i].events;
	}
	assert_true(events & EPOLLIN);
	/* It is in_fd that says so, not the kernel socket. */
	assert_true(epoll_ctl(e.ep, EPOLL_CTL_ADD, readiness_in_fd(f->r),
			      &got[0]) < 0 &&
		    errno == EEXIST);
	early_close(&e);
}

/* ---- the first upgraded registration ------------------------------ */

/* A thread in the wrapper's epoll_wait on a set, from go until done. */
struct waiter {
	int ep;
	int n;
	struct epoll_event ev[4];
	sem_t go;
	sem_t done;
};

static struct waiter *waiter;
static int (*kernel_epoll_ctl)(int, int, int, struct epoll_event *);

static void *wait_in_set(void *arg)
{
	struct waiter *w = arg;

	sem_wait(&w->go);
	w->n = readiness_epoll_wait(&rdma_on, w->ep, w->ev, 4, 2000, NULL, NULL,
				    READINESS_EPOLL_WAIT);
	sem_post(&w->done);
	return NULL;
}

/*
 * The kernel's epoll_ctl, stepping the waiter through an upgrade of an
 * early registration: it starts waiting once the socket's own entry has
 * left the set, and the upgrade stops right after the hub joins the set
 * until the waiter returns (at most 300 ms), the connection's entries not
 * in the set yet.
 */
static int epoll_ctl_stepping_the_waiter(int epfd, int op, int fd,
					 struct epoll_event *ev)
{
	int ret = kernel_epoll_ctl(epfd, op, fd, ev);
	struct timespec until;

	if (op == EPOLL_CTL_DEL && fd != hub_owner->channel) {
		sem_post(&waiter->go);
	} else if (op == EPOLL_CTL_ADD && fd == hub_owner->channel) {
		clock_timespec_in(CLOCK_REALTIME, 300, &until);
		if (!sem_timedwait(&waiter->done, &until))
			sem_post(&waiter->done);
	}
	return ret;
}

/*
 * The hub's entry may wake a thread that sleeps in the set before the
 * process has any upgraded registration: that wait still folds it away
 * and reports the connection, never the hub's epoll_data (a program that
 * keeps pointers there would follow it).  What it reports of the
 * connection (here an unconnected socket's EPOLLHUP too) is for the tests
 * below.
 */
static void first_registration_never_hands_the_hub_to_a_waiter(void **state)
{
	struct fixture *f = *state;
	struct waiter w = { .n = -1 };
	pthread_t thread;
	struct early e;

	early_open(&e, 5);
	w.ep = e.ep;
	assert_int_equal(sem_init(&w.go, 0, 0), 0);
	assert_int_equal(sem_init(&w.done, 0, 0), 0);
	arrive(f);
	fire_channel(f);
	assert_int_equal(pthread_create(&thread, NULL, wait_in_set, &w), 0);
	waiter = &w;
	kernel_epoll_ctl = real.epoll_ctl;
	real.epoll_ctl = epoll_ctl_stepping_the_waiter;
	readiness_early_upgrade(e.sock, f->r);
	real.epoll_ctl = kernel_epoll_ctl;
	waiter = NULL;
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.ev[0].data.u64, 5);
	sem_destroy(&w.go);
	sem_destroy(&w.done);
	early_close(&e);
}

static void registration_for_epollin_makes_no_out_fd(void **state)
{
	struct fixture *f = *state;
	struct early e;

	early_open(&e, 5);
	readiness_early_upgrade(e.sock, f->r);
	assert_int_equal(readiness_out_fd(f->r), -1);
	early_close(&e);
}

/* The events that e's set reports now, folded. */
static uint32_t early_events(struct early *e)
{
	struct epoll_event got[4];
	uint32_t events = 0;
	int i, n;

	n = epoll_wait(e->ep, got, 4, 0);
	for (i = 0; i < n; i++)
		events |= got[i].events;
	return events;
}

static void registration_for_epollout_with_room_makes_no_out_fd(void **state)
{
	struct fixture *f = *state;
	struct early e;

	early_open_for(&e, 6, EPOLLIN | EPOLLOUT);
	readiness_early_upgrade(e.sock, f->r);
	assert_int_equal(readiness_out_fd(f->r), -1);
	assert_true(early_events(&e) & EPOLLOUT);
	early_close(&e);
}

static void registration_for_epollout_without_room_adds_out_fd(void **state)
{
	struct fixture *f = *state;
	struct epoll_event again = { .events = EPOLLOUT };
	struct early e;

	f->t.state.writable = false;
	early_open_for(&e, 6, EPOLLIN | EPOLLOUT);
	readiness_early_upgrade(e.sock, f->r);
	assert_true(readiness_out_fd(f->r) >= 0);
	assert_true(epoll_ctl(e.ep, EPOLL_CTL_ADD, readiness_out_fd(f->r),
			      &again) < 0 &&
		    errno == EEXIST);
	assert_false(early_events(&e) & EPOLLOUT);
	early_close(&e);
}

static void send_that_runs_out_of_room_hands_epollout_to_out_fd(void **state)
{
	struct fixture *f = *state;
	struct early e;

	early_open_for(&e, 6, EPOLLIN | EPOLLOUT);
	readiness_early_upgrade(e.sock, f->r);
	f->t.state.writable = false;
	readiness_after_send(f->r, false);
	assert_true(readiness_out_fd(f->r) >= 0);
	assert_false(early_events(&e) & EPOLLOUT);
	f->t.state.writable = true;
	readiness_sync(f->r);
	assert_true(early_events(&e) & EPOLLOUT);
	early_close(&e);
}

static void out_fd_of_a_registration_for_epollout_is_kept(void **state)
{
	struct fixture *f = *state;
	struct early e;

	f->t.state.writable = false;
	early_open_for(&e, 6, EPOLLIN | EPOLLOUT);
	readiness_early_upgrade(e.sock, f->r);
	f->t.state.writable = true;
	readiness_sync(f->r);
	give_back_a_minute_later();
	assert_true(readiness_out_fd(f->r) >= 0);
	assert_true(early_events(&e) & EPOLLOUT);
	early_close(&e);
}

static void out_fd_given_back_leaves_the_sets_of_the_registrations(void **state)
{
	struct fixture *f = *state;
	struct early e;
	int fd;

	f->t.state.writable = false;
	readiness_sync(f->r);
	fd = readiness_make_out_fd(f->r);
	early_open(&e, 5);
	readiness_early_upgrade(e.sock, f->r);
	assert_true(set_lists(e.ep, fd));
	f->t.state.writable = true;
	readiness_sync(f->r);
	give_back_a_minute_later();
	assert_int_equal(readiness_out_fd(f->r), -1);
	assert_false(set_lists(e.ep, fd));
	early_close(&e);
}

static void registration_before_connect_stays_the_kernels_on_tcp(void **state)
{
	struct early e;

	(void)state;
	early_open(&e, 5);
	readiness_early_forget(e.sock);
	assert_true(kernel_holds(e.ep, e.fd));
	/* Nothing is left to move: a later upgrade leaves it alone. */
	readiness_early_pend(e.sock);
	assert_true(kernel_holds(e.ep, e.fd));
	early_close(&e);
}

static void
registration_before_connect_waits_out_a_background_connect(void **state)
{
	struct early e;

	(void)state;
	early_open(&e, 5);
	readiness_early_pend(e.sock);
	assert_false(kernel_holds(e.ep, e.fd));
	readiness_resolve_pending(e.sock, NULL);
	assert_true(kernel_holds(e.ep, e.fd));
	early_close(&e);
}

static void registration_changed_before_connect_moves_as_changed(void **state)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = 6 }, got;
	struct early e;

	(void)state;
	early_open(&e, 5);
	assert_int_equal(
		readiness_epoll_ctl(&rdma_on, e.ep, EPOLL_CTL_MOD, e.fd, &ev),
		0);
	readiness_early_pend(e.sock);
	readiness_resolve_pending(e.sock, NULL);
	/* An unconnected socket is writable (and hung up) to the kernel. */
	assert_int_equal(epoll_wait(e.ep, &got, 1, 0), 1);
	assert_int_equal(got.data.u64, 6);
	assert_true(got.events & EPOLLOUT);
	early_close(&e);
}

static void registration_removed_before_connect_is_not_moved(void **state)
{
	struct early e;

	(void)state;
	early_open(&e, 5);
	assert_int_equal(
		readiness_epoll_ctl(&rdma_on, e.ep, EPOLL_CTL_DEL, e.fd, NULL),
		0);
	readiness_early_pend(e.sock);
	readiness_resolve_pending(e.sock, NULL);
	assert_false(kernel_holds(e.ep, e.fd));
	early_close(&e);
}

static void registration_of_a_closed_set_is_not_moved(void **state)
{
	struct early e;
	int other;

	(void)state;
	early_open(&e, 5);
	close(e.ep);
	readiness_fd_closed((unsigned int)e.ep, (unsigned int)e.ep);
	/* A new set with the closed one's number holds nothing of fd. */
	other = epoll_create1(EPOLL_CLOEXEC);
	assert_int_equal(other, e.ep);
	readiness_early_pend(e.sock);
	readiness_resolve_pending(e.sock, NULL);
	assert_false(kernel_holds(other, e.fd));
	early_close(&e);
}

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* First: no upgraded registration may have been made before. */
		CASE(first_registration_never_hands_the_hub_to_a_waiter),
		CASE(new_connection_with_credit_is_writable_not_readable),
		CASE(new_connection_without_credit_is_not_writable),
		CASE(out_fd_is_made_only_when_a_wait_needs_it),
		CASE(send_that_leaves_room_makes_no_out_fd),
		CASE(send_out_of_room_makes_out_fd_once_readiness_is_wanted),
		CASE(out_fd_made_late_says_what_the_last_sync_saw),
		CASE(out_fd_becomes_writable_once_the_send_queue_opens),
		CASE(send_queue_opening_is_not_told_before_its_time),
		CASE(out_fd_made_after_release_is_writable),
		CASE(out_fd_is_not_made_once_closed),
		CASE(arrival_makes_in_fd_readable),
		CASE(read_of_everything_makes_in_fd_unreadable),
		CASE(credit_running_out_and_coming_back_toggles_out_fd),
		CASE(every_arrival_is_a_new_edge_on_a_readable_fd),
		CASE(sync_without_change_raises_no_edge),
		CASE(poll_raised_names_what_changed),
		CASE(told_arrival_lags_while_nothing_else_watches),
		CASE(told_arrival_sets_in_fd_while_another_epoll_wait_sleeps),
		CASE(told_arrival_sets_in_fd_while_a_poll_watches),
		CASE(poll_begin_settles_a_lagging_connection),
		CASE(poll_told_arrival_lags_for_its_only_poller),
		CASE(poll_told_arrival_sets_in_fd_while_another_poll_watches),
		CASE(poll_told_arrival_sets_in_fd_while_an_epoll_wait_sleeps),
		CASE(drain_takes_the_event_of_a_connection_nothing_relies_on),
		CASE(drain_serves_a_connection_whose_readiness_is_wanted),
		CASE(drain_with_a_report_hands_it_each_connection),
		CASE(drain_serves_what_a_report_declines_as_for_nobody),
		CASE(destroyed_connection_is_never_served),
		CASE(watch_before_start_leaves_the_hub_alone),
		CASE(want_arms_the_queue_without_the_progress_thread),
		CASE(corked_send_has_the_progress_thread_watch),
		CASE(watch_arms_the_queue),
		CASE(destroy_ends_the_watch),
		CASE(send_without_want_keeps_the_eventfds_stale),
		CASE(read_wait_times_out_with_eagain),
		CASE(read_wait_ends_at_once_when_the_arm_finds_data),
		CASE(read_wait_wakes_on_the_hub),
		CASE(read_wait_serves_its_event_when_readiness_is_wanted),
		CASE(read_wait_resets_a_stale_in_fd_before_it_sleeps),
		CASE(sleeping_read_keeps_the_progress_thread_off_the_hub),
		CASE(send_wait_wakes_when_credit_comes),
		CASE(send_wait_without_credit_times_out),
		CASE(release_makes_both_eventfds_ready_for_good),
		CASE(close_closes_the_eventfds_and_no_sync_writes_after),
		CASE(idle_out_fd_with_room_is_given_back),
		CASE(out_fd_without_room_is_kept),
		CASE(out_fd_used_lately_is_kept),
		CASE(out_fd_a_poll_watches_is_kept),
		CASE(out_fd_kept_for_good_stays),
		CASE(out_fd_closed_with_its_connection_is_no_longer_held),
		CASE(send_out_of_room_after_the_give_back_makes_out_fd_again),
		CASE(registration_before_connect_follows_an_upgrade),
		CASE(registration_for_epollin_makes_no_out_fd),
		CASE(registration_for_epollout_with_room_makes_no_out_fd),
		CASE(registration_for_epollout_without_room_adds_out_fd),
		CASE(send_that_runs_out_of_room_hands_epollout_to_out_fd),
		CASE(out_fd_of_a_registration_for_epollout_is_kept),
		CASE(out_fd_given_back_leaves_the_sets_of_the_registrations),
		CASE(registration_before_connect_stays_the_kernels_on_tcp),
		CASE(registration_before_connect_waits_out_a_background_connect),
		CASE(registration_changed_before_connect_moves_as_changed),
		CASE(registration_removed_before_connect_is_not_moved),
		CASE(registration_of_a_closed_set_is_not_moved),
		/* Last: the process's readiness is a fork child's after it. */
		CASE(fork_child_sees_inherited_readiness_dead),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
