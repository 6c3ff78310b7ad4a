// SPDX-License-Identifier: MIT
/*
 * The CM event channel of established connections and listeners, served
 * by the progress thread, and what both sides of the handshake share.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>

#include "clock.h"
#include "device_watch.h"
#include "fd_room.h"
#include "fork_page.h"
#include "handshake_impl.h"
#include "log.h"
#include "policy.h"
#include "progress.h"
#include "rdma_stack.h"
#include "readiness.h"
#include "real.h"
#include "reuseport.h"
#include "share.h"
#include "stats.h"

char handshake_listener_tag;

/* The channel with what the progress thread needs to serve it. */
struct cm_watch {
	struct progress_watcher w;
	struct rdma_event_channel *ch;
	const struct config *cfg;
};

static struct {
	pthread_mutex_t lock;
	bool started;
	bool disabled;
	struct cm_watch watch;
} hs FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct transport_config handshake_transport_config(const struct config *cfg)
{
	unsigned int start_kb = cfg->ring_start_kb < cfg->ring_kb
					? cfg->ring_start_kb
					: cfg->ring_kb;
	struct transport_config tc = {
		.ring_bytes = start_kb << 10,
		.ring_max = cfg->ring_kb << 10,
		.send_depth = HANDSHAKE_SEND_DEPTH,
		.recv_depth = HANDSHAKE_RECV_DEPTH,
		.max_inline = HANDSHAKE_MAX_INLINE,
	};

	return tc;
}

/* A move to TCP waits for the peer's marker at most this long. */
#define MOVE_TIMEOUT_MIN_MS 5000

struct conn_options handshake_conn_options(const struct config *cfg)
{
	struct conn_options opt = {
		.spin_us = cfg->spin_us,
		.zerocopy_min = (size_t)cfg->zerocopy_kb << 10,
		.pinned_zerocopy_min = (size_t)cfg->pinned_zerocopy_kb << 10,
		.reg_cache_bytes = (size_t)cfg->reg_cache_mb << 20,
		.move_timeout_ms = cfg->connect_timeout_ms > MOVE_TIMEOUT_MIN_MS
					   ? (int)cfg->connect_timeout_ms
					   : MOVE_TIMEOUT_MIN_MS,
	};

	return opt;
}

struct rdma_event_channel *handshake_open_channel(bool refusable)
{
	struct rdma_event_channel *ch;
	int fd = -1;

	fd_room_enter();
	ch = rdmacm.create_event_channel();
	if (ch)
		fd = refusable ? fd_room_hide(ch->fd) : fd_room_keep(ch->fd);
	fd_room_leave();
	if (!ch)
		return NULL;
	if (fd < 0) {
		rdmacm.destroy_event_channel(ch);
		errno = EMFILE;
		return NULL;
	}
	ch->fd = fd;
	return ch;
}

/*
 * Pinning the two rings is what usually fails: ibv.reg_mr() gives ENOMEM
 * past RLIMIT_MEMLOCK, which the message names.
 */
void handshake_log_no_transport(const char *what, int err)
{
	log_info("cm: %s: no queue pair and rings (%s)%s", what, strerror(-err),
		 err == -ENOMEM ? "; each connection pins twice "
				  "ROCESHIM_RING_KB, within RLIMIT_MEMLOCK"
				: "");
}

enum roceshim_reason handshake_reason_of(int err)
{
	struct rlimit lim;

	if (err == -EMFILE || err == -ENFILE)
		return ROCESHIM_REASON_FD_LIMIT;
	/* Under a pinning limit, ENOMEM is nearly always that limit. */
	if (err == -ENOMEM && !getrlimit(RLIMIT_MEMLOCK, &lim) &&
	    lim.rlim_cur != RLIM_INFINITY)
		return ROCESHIM_REASON_MEMLOCK_LIMIT;
	return ROCESHIM_REASON_RESOURCE;
}

/* The conn of a connection id; NULL for listeners and new ids. */
static struct conn *id_conn(struct rdma_cm_id *id)
{
	if (!id->context ||
	    *(const char *const *)id->context == &handshake_listener_tag)
		return NULL;
	return id->context;
}

static void serve_channel(struct progress_watcher *w, uint32_t events)
{
	struct cm_watch *cw = (struct cm_watch *)w;
	struct rdma_cm_event *ev;

	(void)events;
	while (!rdmacm.get_cm_event(cw->ch, &ev)) {
		struct rdma_cm_id *reject_id = NULL;
		struct conn *c = id_conn(ev->id);

		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (!handshake_on_connect_request(cw->cfg, ev))
				reject_id = ev->id;
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c)
				handshake_on_established(c);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			transport_drop_spares(ev->id->verbs);
			if (c) {
				handshake_on_failed(c);
				conn_qp_lost(c, ROCESHIM_DOWNGRADE_DEVICE);
			}
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (c) {
				handshake_on_failed(c);
				conn_qp_lost(c, ROCESHIM_DOWNGRADE_QP_ERROR);
			}
			break;
		default:
			break;
		}
		rdmacm.ack_cm_event(ev);
		if (reject_id)
			rdmacm.destroy_id(reject_id);
	}
	handshake_channel_failed(cw->ch->fd);
}

void handshake_channel_failed(int fd)
{
	if (errno != EACCES)
		return;
	progress_del(fd);
	if (policy_stop_rdma(ROCESHIM_REASON_UNSUPPORTED))
		log_info("cm: the process changed its credentials since the "
			 "RDMA connection manager was opened, which the kernel "
			 "refuses now: new connections stay on TCP");
}

/*
 * A write of nothing to a CM channel: the kernel first checks that the
 * process's credentials are those it was opened with (EACCES, and the
 * channel is useless), then finds the command too short (EINVAL).
 */
static bool channel_usable(struct rdma_event_channel *ch)
{
	int err = errno;
	bool usable;

	usable = real.write(ch->fd, NULL, 0) == 0 || errno != EACCES;
	if (!usable)
		handshake_channel_failed(ch->fd);
	errno = err;
	return usable;
}

/* Spare rings stay pinned: the process's gauge counts them. */
static void count_spares(int64_t pinned_delta)
{
	static const struct stats_ring_sizes none;

	stats_rings(-1, STATS_RING_CHANGED, pinned_delta, &none);
}

struct rdma_event_channel *handshake_channel(const struct config *cfg)
{
	struct rdma_event_channel *ch = NULL;

	pthread_mutex_lock(&hs.lock);
	if (hs.started || hs.disabled)
		goto out;
	progress_on_tick(conn_reap_tick);
	progress_on_tick(handshake_pending_tick);
	progress_on_tick(handshake_dial_tick);
	progress_on_tick(transport_idle_tick);
	progress_on_tick(readiness_idle_tick);
	transport_count_spares(count_spares);
	hs.watch.w.fn = serve_channel;
	hs.watch.cfg = cfg;
	hs.watch.ch = handshake_open_channel(false);
	if (!hs.watch.ch || real.fcntl(hs.watch.ch->fd, F_SETFL, O_NONBLOCK) ||
	    !progress_start() ||
	    progress_add(hs.watch.ch->fd, EPOLLIN, &hs.watch.w) ||
	    share_start(handshake_on_share_request)) {
		log_warn("cm: cannot serve the RDMA connection manager; "
			 "TCP only");
		hs.disabled = true;
		goto out;
	}
	hs.started = true;
	device_watch_start();
out:
	if (hs.started && !hs.disabled)
		ch = hs.watch.ch;
	pthread_mutex_unlock(&hs.lock);
	return ch && channel_usable(ch) ? ch : NULL;
}

/*
 * Handshakes under way in this process: dials (from their start to their
 * move onto the shared channel) and listens.  Counted before the policy
 * is asked again, as policy_stop_rdma() stops it before it reads the
 * count: one of the two sees the other.
 */
static unsigned int active;

bool handshake_begin(void)
{
	__atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
	if (!policy_rdma_stopped())
		return true;
	handshake_end();
	return false;
}

void handshake_end(void)
{
	__atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
}

void handshake_quiesce(int timeout_ms)
{
	static const struct timespec pause = { .tv_nsec = 1000000 };
	int64_t deadline = clock_ms() + timeout_ms;

	while ((__atomic_load_n(&active, __ATOMIC_SEQ_CST) ||
		handshake_server_busy()) &&
	       clock_ms() < deadline)
		nanosleep(&pause, NULL);
}

bool handshake_running(void)
{
	bool running;

	pthread_mutex_lock(&hs.lock);
	running = hs.started && !hs.disabled;
	pthread_mutex_unlock(&hs.lock);
	return running;
}

/*
 * The child's copies of the parent's CM channels go: a daemon's parent
 * that exits leaves its CM listeners to the kernel then, which refuses
 * their handshakes, where a copy kept open would leave them taking
 * handshakes that nobody serves (each client waiting for its timeout).
 * A child makes RDMA connections of its own only where its parent never
 * began to load the RDMA stack: nothing of it is then the parent's.  One
 * that shares its parent's descriptors would put its own among them.
 */
void FORK_CODE handshake_fork_child(bool fds_shared)
{
	pthread_mutex_init(&hs.lock, NULL);
	if (!fds_shared && hs.started && !hs.disabled && hs.watch.ch)
		real.close(hs.watch.ch->fd);
	if (fds_shared || rdma_stack_begun())
		hs.disabled = true;
	handshake_server_fork_child();
	reuseport_fork_child(fds_shared);
	handshake_client_fork_child(fds_shared);
	device_watch_fork_child(fds_shared);
}
