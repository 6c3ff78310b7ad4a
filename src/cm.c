// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>

#include "clock.h"
#include "cm.h"
#include "endpoint.h"
#include "log.h"
#include "policy.h"
#include "real.h"
#include "stats.h"
#include "wire.h"

#define QUEUE_DEPTH	    128
#define MAX_INLINE	    64
#define PENDING_TIMEOUT_MS  30000
#define LINGER_TIMEOUT_MS   2000
#define NEGATIVE_CACHE_SIZE 64
#define TICK_MS		    50
/* The first address resolution attempt; each next one waits twice as long. */
#define RESOLVE_FIRST_ATTEMPT_MS 10

/*
 * A connection this end accepted on the CM, until accept() claims it.  It
 * counts as upgraded only once ESTABLISHED: a client that gave up first
 * (timeout) is on TCP, and so must this end be.
 */
enum pending_state {
	PENDING_ACCEPTED,
	PENDING_ESTABLISHED,
	PENDING_FAILED,
};

struct pending {
	struct roceshim_stats_endpoint source;
	uint16_t port;
	struct conn *conn;
	enum pending_state state;
	int64_t expires_ms;
	struct pending *next;
};

struct closing {
	struct conn *conn;
	int64_t deadline_ms;
	struct closing *next;
};

struct negative {
	struct roceshim_stats_endpoint peer;
	int64_t expires_ms;
};

static struct {
	const struct config *cfg;
	pthread_mutex_t lock;
	pthread_cond_t pending_settled;
	bool started;
	bool disabled;
	struct rdma_event_channel *channel;
	int epfd;
	int wake_fd; /* eventfd: ends the progress thread's untimed wait */
	struct pending *pending;
	struct closing *closing;
	struct negative negative[NEGATIVE_CACHE_SIZE];
	unsigned int negative_next;
} cm = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.pending_settled = PTHREAD_COND_INITIALIZER,
	.epfd = -1,
	.wake_fd = -1,
};

/* Listener ids carry this as their context; connection ids their conn. */
static char listener_tag;
/* wake_fd's epoll tag (the CM channel's is NULL, a connection's its conn). */
static char wake_tag;

static struct transport_config transport_config(void)
{
	struct transport_config tc = {
		.ring_bytes = cm.cfg->ring_kb << 10,
		.queue_depth = QUEUE_DEPTH,
		.max_inline = MAX_INLINE,
	};

	return tc;
}

/*
 * Logs why this end has no queue pair for a connection.  Pinning the two
 * rings is what usually fails: ibv_reg_mr() gives ENOMEM past
 * RLIMIT_MEMLOCK, which the message names.
 */
static void log_no_transport(const char *what, int err)
{
	log_info("cm: %s: no queue pair and rings (%s)%s", what, strerror(-err),
		 err == -ENOMEM ? "; each connection pins twice "
				  "ROCESHIM_RING_KB, within RLIMIT_MEMLOCK"
				: "");
}

static bool same_endpoint(const struct roceshim_stats_endpoint *a,
			  const struct roceshim_stats_endpoint *b)
{
	return a->port == b->port && !memcmp(a->addr, b->addr, 16);
}

/* ---- negative cache --------------------------------------------------- */

static bool negative_cached(const struct roceshim_stats_endpoint *peer)
{
	int64_t now = clock_ms();
	bool hit = false;
	unsigned int i;

	pthread_mutex_lock(&cm.lock);
	for (i = 0; i < NEGATIVE_CACHE_SIZE && !hit; i++)
		hit = cm.negative[i].expires_ms > now &&
		      same_endpoint(&cm.negative[i].peer, peer);
	pthread_mutex_unlock(&cm.lock);
	return hit;
}

static void negative_remember(const struct roceshim_stats_endpoint *peer)
{
	if (!cm.cfg->negative_cache_s)
		return;
	pthread_mutex_lock(&cm.lock);
	cm.negative[cm.negative_next].peer = *peer;
	cm.negative[cm.negative_next].expires_ms =
		clock_ms() + cm.cfg->negative_cache_s * 1000ll;
	cm.negative_next = (cm.negative_next + 1) % NEGATIVE_CACHE_SIZE;
	pthread_mutex_unlock(&cm.lock);
}

/* ---- progress thread -------------------------------------------------- */

/*
 * Arms c's channel; the progress thread watches it from the moment the
 * program relies on readiness or on corked bytes going out (conn_watch()).
 */
static void start_conn(struct conn *c)
{
	__atomic_store_n(&c->watch_epfd, cm.epfd, __ATOMIC_RELEASE);
	transport_arm(c->t);
	conn_sync(c);
}

static void unwatch_and_destroy(struct conn *c)
{
	real.epoll_ctl(cm.epfd, EPOLL_CTL_DEL, transport_event_fd(c->t), NULL);
	rdma_disconnect(c->id);
	conn_destroy(c);
}

static void count_malformed(void)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (seg)
		__atomic_fetch_add(&seg->global.malformed_input, 1,
				   __ATOMIC_RELAXED);
}

/* A client's connect request on one of our listeners; false: refused. */
static bool on_connect_request(struct rdma_cm_event *ev)
{
	struct transport_config tc = transport_config();
	struct rdma_conn_param param = { .rnr_retry_count = 7,
					 .retry_count = 7 };
	struct rdma_cm_id *id = ev->id;
	uint8_t reply[WIRE_ACCEPT_LEN];
	struct transport_ring_info ring;
	struct transport *t = NULL;
	struct wire_hello hello;
	uint16_t local_port = ntohs(rdma_get_src_port(id));
	struct conn *c = NULL;
	struct pending *p;
	int err;

	if (wire_decode_hello(ev->param.conn.private_data,
			      ev->param.conn.private_data_len, &hello)) {
		count_malformed();
		log_info("cm: malformed connect request refused");
		goto reject;
	}
	/* This end's rules hold too: an excluded peer is refused here. */
	if (policy_decide(cm.cfg, &hello.tcp_source, local_port)) {
		log_debug("cm: connect request refused by the rules");
		goto reject;
	}
	err = transport_create(id, &tc, &t);
	if (err) {
		log_no_transport("connect request refused", err);
		goto reject;
	}
	err = transport_connect(t, &hello.ring);
	if (err) {
		log_info("cm: connect request refused: the client's ring is "
			 "%u KiB, this end's %u KiB (ROCESHIM_RING_KB)",
			 hello.ring.size >> 10, tc.ring_bytes >> 10);
		goto reject;
	}
	p = calloc(1, sizeof(*p));
	if (!p || conn_create(id, t, cm.cfg->spin_us,
			      (size_t)cm.cfg->zerocopy_kb << 10, &c)) {
		log_info("cm: connect request refused: out of memory or fds");
		free(p);
		goto reject;
	}
	transport_local_ring(t, &ring);
	wire_encode_accept(&ring, reply);
	param.private_data = reply;
	param.private_data_len = sizeof(reply);
	id->context = c;
	p->source = hello.tcp_source;
	p->port = local_port;
	p->conn = c;
	p->expires_ms = clock_ms() + PENDING_TIMEOUT_MS;
	/* Pending before accept: the client connects TCP only after. */
	pthread_mutex_lock(&cm.lock);
	p->next = cm.pending;
	cm.pending = p;
	pthread_mutex_unlock(&cm.lock);
	start_conn(c);
	if (rdma_accept(id, &param)) {
		pthread_mutex_lock(&cm.lock);
		if (cm.pending == p)
			cm.pending = p->next;
		pthread_mutex_unlock(&cm.lock);
		log_info("cm: rdma_accept failed: %s", strerror(errno));
		free(p);
		conn_close(c, true);
		unwatch_and_destroy(c);
	}
	return true;
reject:
	if (t)
		transport_destroy(t);
	rdma_reject(id, NULL, 0);
	return false;
}

/* The conn of a connection id; NULL for listeners and new ids. */
static struct conn *id_conn(struct rdma_cm_id *id)
{
	/* A new id keeps its listener's context until it is accepted. */
	if (!id->context || id->context == &listener_tag)
		return NULL;
	return id->context;
}

/* Records how the handshake of c ended if accept() has not claimed it. */
static void settle_pending(struct conn *c, enum pending_state state)
{
	struct pending *p;

	pthread_mutex_lock(&cm.lock);
	for (p = cm.pending; p; p = p->next) {
		if (p->conn == c && p->state == PENDING_ACCEPTED) {
			p->state = state;
			pthread_cond_broadcast(&cm.pending_settled);
			break;
		}
	}
	pthread_mutex_unlock(&cm.lock);
}

static void on_disconnect(struct conn *c)
{
	settle_pending(c, PENDING_FAILED);
	transport_peer_gone(c->t);
	if (!__atomic_load_n(&c->closing, __ATOMIC_ACQUIRE))
		conn_sync(c);
}

static void handle_cm_events(void)
{
	struct rdma_cm_event *ev;

	while (!rdma_get_cm_event(cm.channel, &ev)) {
		struct rdma_cm_id *reject_id = NULL;
		struct conn *c = id_conn(ev->id);

		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			if (!on_connect_request(ev))
				reject_id = ev->id;
			break;
		case RDMA_CM_EVENT_ESTABLISHED:
			if (c)
				settle_pending(c, PENDING_ESTABLISHED);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (c)
				on_disconnect(c);
			break;
		default:
			break;
		}
		rdma_ack_cm_event(ev);
		if (reject_id)
			rdma_destroy_id(reject_id);
	}
}

/* Destroys the closed connections whose FIN is out (or that gave up). */
static void reap_closing(void)
{
	struct closing *list, *cl, *keep = NULL;
	int64_t now = clock_ms();

	pthread_mutex_lock(&cm.lock);
	list = cm.closing;
	cm.closing = NULL;
	pthread_mutex_unlock(&cm.lock);
	while ((cl = list)) {
		list = cl->next;
		if (now >= cl->deadline_ms ||
		    !transport_writes_in_flight(cl->conn->t) ||
		    transport_progress(cl->conn->t)) {
			unwatch_and_destroy(cl->conn);
			free(cl);
			continue;
		}
		cl->next = keep;
		keep = cl;
	}
	if (!keep)
		return;
	pthread_mutex_lock(&cm.lock);
	for (cl = keep; cl->next; cl = cl->next)
		;
	cl->next = cm.closing;
	cm.closing = keep;
	pthread_mutex_unlock(&cm.lock);
}

static void expire_pending(void)
{
	struct pending **pp = &cm.pending, *p, *expired = NULL;
	int64_t now = clock_ms();

	pthread_mutex_lock(&cm.lock);
	while ((p = *pp)) {
		if (now >= p->expires_ms) {
			*pp = p->next;
			p->next = expired;
			expired = p;
			continue;
		}
		pp = &p->next;
	}
	pthread_mutex_unlock(&cm.lock);
	while ((p = expired)) {
		expired = p->next;
		log_info("cm: RDMA connection never matched by accept(); "
			 "dropped");
		conn_close(p->conn, true);
		unwatch_and_destroy(p->conn);
		free(p);
	}
}

/* Whether a handshake waits for accept() or a closed connection lingers. */
static bool deadlines_locked(void)
{
	return cm.pending || cm.closing;
}

/*
 * The progress thread's wait: ticks only while something has a deadline.
 * Otherwise it waits for events alone, so that a process whose
 * connections idle never wakes; cm_release() ends that wait through
 * wake_fd.
 */
static int progress_timeout_ms(void)
{
	bool deadlines;

	pthread_mutex_lock(&cm.lock);
	deadlines = deadlines_locked();
	pthread_mutex_unlock(&cm.lock);
	return deadlines ? TICK_MS : -1;
}

static void *progress_main(void *arg)
{
	struct epoll_event evs[32];
	uint64_t wakes;
	sigset_t all;

	(void)arg;
	/* Signals are the program's business, not this thread's. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		int n = real.epoll_wait(cm.epfd, evs, 32,
					progress_timeout_ms());
		int i;

		for (i = 0; i < n; i++) {
			void *tag = evs[i].data.ptr;
			struct conn *c = tag;

			if (!tag) {
				handle_cm_events();
				continue;
			}
			if (tag == &wake_tag) {
				/* Non-blocking: drained, or already drained. */
				(void)real.read(cm.wake_fd, &wakes,
						sizeof(wakes));
				continue;
			}
			conn_serve_event(c, false, NULL);
		}
		reap_closing();
		expire_pending();
	}
	return NULL;
}

/* Starts the channel and the progress thread on first use. */
static bool cm_start(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct epoll_event wake = { .events = EPOLLIN, .data.ptr = &wake_tag };
	pthread_t thread;
	bool ok;

	pthread_mutex_lock(&cm.lock);
	if (cm.started || cm.disabled || !cm.cfg)
		goto out;
	cm.channel = rdma_create_event_channel();
	cm.epfd = real.epoll_create1(EPOLL_CLOEXEC);
	cm.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!cm.channel || cm.epfd < 0 || cm.wake_fd < 0 ||
	    real.fcntl(cm.channel->fd, F_SETFL, O_NONBLOCK) ||
	    real.epoll_ctl(cm.epfd, EPOLL_CTL_ADD, cm.channel->fd, &ev) ||
	    real.epoll_ctl(cm.epfd, EPOLL_CTL_ADD, cm.wake_fd, &wake) ||
	    pthread_create(&thread, NULL, progress_main, NULL)) {
		log_warn("cm: cannot start the RDMA progress thread; TCP only");
		cm.disabled = true;
		goto out;
	}
	/* So that top -H, ps -L and perf show whose thread it is. */
	pthread_setname_np(thread, "roceshim");
	pthread_detach(thread);
	cm.started = true;
out:
	ok = cm.started && !cm.disabled;
	pthread_mutex_unlock(&cm.lock);
	return ok;
}

/* ---- client side ------------------------------------------------------ */

/* Waits for the next event on ch; NULL on timeout. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch,
					int64_t deadline)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int64_t left = deadline - clock_ms();

	if (left <= 0 || real.poll(&pfd, 1, (int)left) <= 0)
		return NULL;
	return rdma_get_cm_event(ch, &ev) ? NULL : ev;
}

/* Waits for `want`; returns the reason the handshake stops otherwise. */
static enum roceshim_reason expect(struct rdma_event_channel *ch,
				   enum rdma_cm_event_type want,
				   int64_t deadline, struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev = next_event(ch, deadline);
	enum roceshim_reason reason;

	if (!ev) {
		log_debug("cm: no %s in time", rdma_event_str(want));
		return ROCESHIM_REASON_TIMEOUT;
	}
	if (ev->event == want) {
		*out = ev;
		return ROCESHIM_REASON_NONE;
	}
	log_debug("cm: %s (status %d) instead of %s", rdma_event_str(ev->event),
		  ev->status, rdma_event_str(want));
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		reason = ROCESHIM_REASON_NO_ROUTE;
		break;
	case RDMA_CM_EVENT_REJECTED:
		reason = ROCESHIM_REASON_PEER_REJECTED;
		break;
	default:
		reason = ROCESHIM_REASON_TIMEOUT;
		break;
	}
	rdma_ack_cm_event(ev);
	return reason;
}

/*
 * Resolves dst with short attempts, doubling up to the deadline.  When the
 * route needs a neighbour that is not resolved yet, rdma_cm asks for it but
 * (Linux 6.1, source bound to another port of the host) looks again only
 * when the attempt times out: one long attempt would always time out.
 */
static enum roceshim_reason resolve_address(struct rdma_event_channel *ch,
					    struct rdma_cm_id *id,
					    struct sockaddr *src,
					    const struct sockaddr *dst,
					    int64_t deadline)
{
	int64_t attempt_ms = RESOLVE_FIRST_ATTEMPT_MS;
	enum rdma_cm_event_type type;
	struct rdma_cm_event *ev;
	int64_t left;
	int status;

	while ((left = deadline - clock_ms()) > 0) {
		if (attempt_ms > left)
			attempt_ms = left;
		if (rdma_resolve_addr(id, src, (struct sockaddr *)dst,
				      (int)attempt_ms))
			return ROCESHIM_REASON_NO_ROUTE;
		ev = next_event(ch, deadline);
		if (!ev)
			break;
		type = ev->event;
		status = ev->status;
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_ADDR_RESOLVED)
			return ROCESHIM_REASON_NONE;
		if (type != RDMA_CM_EVENT_ADDR_ERROR || status != -ETIMEDOUT) {
			log_debug("cm: %s (status %d) resolving the address",
				  rdma_event_str(type), status);
			return ROCESHIM_REASON_NO_ROUTE;
		}
		attempt_ms *= 2;
	}
	log_debug("cm: address not resolved in time");
	return ROCESHIM_REASON_TIMEOUT;
}

/* Binds an unbound TCP socket to the RDMA route's source address. */
static int bind_to_route_source(int fd, struct rdma_cm_id *id)
{
	struct sockaddr_storage ss;
	struct sockaddr *src = rdma_get_local_addr(id);
	socklen_t len = sizeof(ss);
	int domain;

	if (real.getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	domain = ss.ss_family;
	if ((domain == AF_INET && ((struct sockaddr_in *)&ss)->sin_port) ||
	    (domain == AF_INET6 && ((struct sockaddr_in6 *)&ss)->sin6_port))
		return 0; /* the program bound it itself */
	memset(&ss, 0, sizeof(ss));
	if (domain == AF_INET && src->sa_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		*sin = *(struct sockaddr_in *)src;
		sin->sin_port = 0;
		len = sizeof(*sin);
	} else if (domain == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		if (src->sa_family == AF_INET) {
			sin6->sin6_addr.s6_addr[10] = 0xff;
			sin6->sin6_addr.s6_addr[11] = 0xff;
			memcpy(&sin6->sin6_addr.s6_addr[12],
			       &((struct sockaddr_in *)src)->sin_addr, 4);
		} else {
			sin6->sin6_addr =
				((struct sockaddr_in6 *)src)->sin6_addr;
			sin6->sin6_scope_id =
				((struct sockaddr_in6 *)src)->sin6_scope_id;
		}
		len = sizeof(*sin6);
	} else {
		return -EAFNOSUPPORT;
	}
	return real.bind(fd, (struct sockaddr *)&ss, len) ? -errno : 0;
}

/*
 * The socket's bound address with port 0; NULL where it is unbound, or
 * bound to a v4-mapped address (the peer is then resolved in its IPv4
 * form, which an IPv6 source cannot go with).
 */
static struct sockaddr *bound_source(int fd, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);

	if (real.getsockname(fd, (struct sockaddr *)ss, &len))
		return NULL;
	if (ss->ss_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		if (sin->sin_addr.s_addr == htonl(INADDR_ANY))
			return NULL;
		sin->sin_port = 0;
		return (struct sockaddr *)ss;
	}
	if (ss->ss_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr) ||
		    IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr))
			return NULL;
		sin6->sin6_port = 0;
		return (struct sockaddr *)ss;
	}
	return NULL;
}

static enum roceshim_reason handshake(int fd, struct rdma_event_channel *ch,
				      struct rdma_cm_id *id,
				      const struct sockaddr *addr,
				      struct conn **out)
{
	struct rdma_conn_param param = { .rnr_retry_count = 7,
					 .retry_count = 7 };
	int64_t deadline = clock_ms() + cm.cfg->connect_timeout_ms;
	struct transport_config tc = transport_config();
	struct sockaddr_storage ss;
	uint8_t request[WIRE_HELLO_LEN];
	struct transport_ring_info peer;
	struct transport *t = NULL;
	struct rdma_cm_event *ev;
	enum roceshim_reason reason;
	struct wire_hello hello;
	socklen_t len = sizeof(ss);
	int ms = cm.cfg->connect_timeout_ms;
	struct sockaddr_storage src;
	int err;

	reason =
		resolve_address(ch, id, bound_source(fd, &src), addr, deadline);
	if (reason)
		return reason;
	if (rdma_resolve_route(id, ms))
		return ROCESHIM_REASON_NO_ROUTE;
	reason = expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, &ev);
	if (reason)
		return reason;
	rdma_ack_cm_event(ev);
	if (bind_to_route_source(fd, id) ||
	    real.getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    endpoint_from_sockaddr(&hello.tcp_source, (struct sockaddr *)&ss,
				   len))
		return ROCESHIM_REASON_RESOURCE;
	err = transport_create(id, &tc, &t);
	if (err) {
		log_no_transport("connection stays on TCP", err);
		return ROCESHIM_REASON_RESOURCE;
	}
	transport_local_ring(t, &hello.ring);
	wire_encode_hello(&hello, request);
	param.private_data = request;
	param.private_data_len = sizeof(request);
	if (rdma_connect(id, &param)) {
		reason = ROCESHIM_REASON_RESOURCE;
		goto fail;
	}
	reason = expect(ch, RDMA_CM_EVENT_ESTABLISHED, deadline, &ev);
	if (reason)
		goto fail;
	if (wire_decode_accept(ev->param.conn.private_data,
			       ev->param.conn.private_data_len, &peer) ||
	    transport_connect(t, &peer)) {
		count_malformed();
		rdma_ack_cm_event(ev);
		reason = ROCESHIM_REASON_PEER_REJECTED;
		goto fail;
	}
	rdma_ack_cm_event(ev);
	if (conn_create(id, t, cm.cfg->spin_us,
			(size_t)cm.cfg->zerocopy_kb << 10, out)) {
		reason = ROCESHIM_REASON_RESOURCE;
		goto fail;
	}
	return ROCESHIM_REASON_NONE;
fail:
	transport_destroy(t);
	return reason;
}

enum roceshim_reason cm_connect(int fd, const struct sockaddr *addr,
				socklen_t len, struct conn **out)
{
	struct roceshim_stats_endpoint peer;
	struct rdma_event_channel *ch;
	enum roceshim_reason reason;
	struct sockaddr_in mapped;
	struct rdma_cm_id *id;

	if (endpoint_from_sockaddr(&peer, addr, len))
		return ROCESHIM_REASON_UNSUPPORTED;
	/* rdma_cm routes a v4-mapped peer only in its IPv4 form. */
	if (peer.family == AF_INET6 && endpoint_is_v4_mapped(&peer)) {
		memset(&mapped, 0, sizeof(mapped));
		mapped.sin_family = AF_INET;
		mapped.sin_port = htons(peer.port);
		memcpy(&mapped.sin_addr, peer.addr + 12, 4);
		addr = (struct sockaddr *)&mapped;
	}
	if (!cm_start())
		return ROCESHIM_REASON_UNSUPPORTED;
	if (negative_cached(&peer))
		return ROCESHIM_REASON_NEGATIVE_CACHE;
	/* A channel of its own: the handshake's events are ours alone. */
	ch = rdma_create_event_channel();
	if (!ch)
		return ROCESHIM_REASON_RESOURCE;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		rdma_destroy_event_channel(ch);
		return ROCESHIM_REASON_RESOURCE;
	}
	reason = handshake(fd, ch, id, addr, out);
	if (reason == ROCESHIM_REASON_NONE) {
		/* From now on its events go to the progress thread. */
		id->context = *out;
		if (rdma_migrate_id(id, cm.channel)) {
			conn_destroy(*out);
			reason = ROCESHIM_REASON_RESOURCE;
		} else {
			start_conn(*out);
		}
	} else {
		rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ch);
	/* A refusal costs a round trip; only a silent peer is remembered. */
	if (reason == ROCESHIM_REASON_TIMEOUT)
		negative_remember(&peer);
	return reason;
}

/* ---- server side ------------------------------------------------------ */

void cm_listen(struct sock *sock, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rdma_cm_id *id;

	if (!cm_start() || real.getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	if (rdma_create_id(cm.channel, &id, &listener_tag, RDMA_PS_TCP))
		return;
	if (rdma_bind_addr(id, (struct sockaddr *)&ss) ||
	    rdma_listen(id, 128)) {
		log_debug("fd %d: no RDMA listener beside it (%s)", fd,
			  strerror(errno));
		rdma_destroy_id(id);
		return;
	}
	sock->listen_id = id;
}

void cm_unlisten(struct sock *sock)
{
	if (sock->listen_id && !cm.disabled)
		rdma_destroy_id(sock->listen_id);
	sock->listen_id = NULL;
}

static struct pending **find_pending(const struct roceshim_stats_endpoint *peer,
				     uint16_t local_port)
{
	struct pending **pp, *p;

	for (pp = &cm.pending; (p = *pp); pp = &p->next)
		if (p->port == local_port && same_endpoint(&p->source, peer))
			return pp;
	return NULL;
}

/*
 * The client connects TCP as soon as its side is ESTABLISHED, so its SYN
 * may overtake the RTU that makes this side ESTABLISHED: wait for it, at
 * most the connect timeout, which is as long as the client waits too.
 */
struct conn *cm_take_pending(const struct roceshim_stats_endpoint *peer,
			     uint16_t local_port)
{
	struct timespec deadline;
	struct pending **pp, *p;
	struct conn *c = NULL;
	bool established;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += cm.cfg->connect_timeout_ms / 1000;
	deadline.tv_nsec += (cm.cfg->connect_timeout_ms % 1000) * 1000000l;
	if (deadline.tv_nsec >= 1000000000l) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000l;
	}
	pthread_mutex_lock(&cm.lock);
	while ((pp = find_pending(peer, local_port)) &&
	       (*pp)->state == PENDING_ACCEPTED &&
	       !pthread_cond_clockwait(&cm.pending_settled, &cm.lock,
				       CLOCK_MONOTONIC, &deadline))
		;
	if (pp) {
		p = *pp;
		*pp = p->next;
		c = p->conn;
		established = p->state == PENDING_ESTABLISHED;
		free(p);
	}
	pthread_mutex_unlock(&cm.lock);
	if (c && !established) {
		log_info("cm: RDMA handshake not completed by the client; "
			 "connection stays on TCP");
		cm_release(c, true);
		c = NULL;
	}
	return c;
}

void cm_release(struct conn *c, bool abortive)
{
	uint64_t one = 1;
	struct closing *cl;
	bool untimed;

	conn_close(c, abortive);
	if (!conn_alive(c))
		return; /* a fork child: the parent owns the resources */
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return;
	cl->conn = c;
	cl->deadline_ms = clock_ms() + LINGER_TIMEOUT_MS;
	pthread_mutex_lock(&cm.lock);
	untimed = !deadlines_locked();
	cl->next = cm.closing;
	cm.closing = cl;
	pthread_mutex_unlock(&cm.lock);
	/* The progress thread may wait without a tick: the linger needs one. */
	if (untimed)
		(void)real.write(cm.wake_fd, &one, sizeof(one));
}

void cm_configure(const struct config *cfg)
{
	cm.cfg = cfg;
}

void cm_fork_child(void)
{
	cm.disabled = true;
	conn_generation++;
	pthread_mutex_init(&cm.lock, NULL);
	pthread_cond_init(&cm.pending_settled, NULL);
}
