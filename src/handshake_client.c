// SPDX-License-Identifier: MIT
/*
 * The client side of the handshake (a dial), run before the real TCP
 * connect, and the negative cache of peers that did not answer or took
 * no RDMA.  A dial is a state machine driven by the CM's events:
 * synchronously by handshake_connect() on a channel of its own, or by the
 * progress thread for handshake_dial() (a non-blocking connect).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <string.h>

#include "clock.h"
#include "endpoint.h"
#include "fork_page.h"
#include "handshake_impl.h"
#include "log.h"
#include "progress.h"
#include "rdma_stack.h"
#include "real.h"
#include "sig_restart.h"
#include "stats.h"
#include "wire.h"

#define NEGATIVE_CACHE_SIZE 64
/* The first address resolution attempt; each next one waits twice as long. */
#define RESOLVE_FIRST_ATTEMPT_MS 10

struct negative {
	struct roceshim_stats_endpoint peer;
	int64_t expires_ms;
};

/*
 * Peers whose handshake timed out (negative), and peers that answered a
 * handshake (heard): a timeout is remembered only for a peer not heard
 * from lately.  A busy server that answers some handshakes late is slow,
 * not silent, and the connections after it should still try.
 */
static struct {
	pthread_mutex_t lock;
	struct negative entries[NEGATIVE_CACHE_SIZE];
	unsigned int next;
	struct negative heard[NEGATIVE_CACHE_SIZE];
	unsigned int next_heard;
} neg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct negative *find_locked(struct negative *v,
				    const struct roceshim_stats_endpoint *peer);

static bool negative_cached(const struct roceshim_stats_endpoint *peer)
{
	bool hit;

	pthread_mutex_lock(&neg.lock);
	hit = find_locked(neg.entries, peer);
	pthread_mutex_unlock(&neg.lock);
	return hit;
}

/* Under neg.lock: an entry of v for peer that has not expired. */
static struct negative *find_locked(struct negative *v,
				    const struct roceshim_stats_endpoint *peer)
{
	int64_t now = clock_ms();
	unsigned int i;

	for (i = 0; i < NEGATIVE_CACHE_SIZE; i++)
		if (v[i].expires_ms > now && endpoint_equal(&v[i].peer, peer))
			return &v[i];
	return NULL;
}

static void heard_from(const struct config *cfg,
		       const struct roceshim_stats_endpoint *peer)
{
	struct negative *e;

	pthread_mutex_lock(&neg.lock);
	e = find_locked(neg.heard, peer);
	if (!e) {
		e = &neg.heard[neg.next_heard];
		neg.next_heard = (neg.next_heard + 1) % NEGATIVE_CACHE_SIZE;
		e->peer = *peer;
	}
	e->expires_ms = clock_ms() + cfg->negative_cache_s * 1000ll;
	pthread_mutex_unlock(&neg.lock);
}

/*
 * Remembers peer for ROCESHIM_NEGATIVE_CACHE_S: a silent one (timed_out)
 * only if it has not answered another handshake lately; a refusing one
 * always.
 */
static void negative_remember(const struct config *cfg,
			      const struct roceshim_stats_endpoint *peer,
			      bool timed_out)
{
	if (!cfg->negative_cache_s)
		return;
	pthread_mutex_lock(&neg.lock);
	if (timed_out && find_locked(neg.heard, peer)) {
		pthread_mutex_unlock(&neg.lock);
		return;
	}
	neg.entries[neg.next].peer = *peer;
	neg.entries[neg.next].expires_ms =
		clock_ms() + cfg->negative_cache_s * 1000ll;
	neg.next = (neg.next + 1) % NEGATIVE_CACHE_SIZE;
	pthread_mutex_unlock(&neg.lock);
}

/* Whether the program bound the socket to an address of its choice. */
static bool address_chosen(const struct sockaddr_storage *ss)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr !=
		       htonl(INADDR_ANY);
	return memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr, &any6,
		      sizeof(any6));
}

/*
 * Binds, taking a port now: a program that set IP_BIND_ADDRESS_NO_PORT
 * (curl --interface, haproxy's source) left its socket without one until
 * connect(), and the request must name it.
 */
static int bind_with_port(int fd, const struct sockaddr_storage *ss,
			  socklen_t len)
{
	int no_port = 0, off = 0, err = 0;
	socklen_t olen = sizeof(no_port);

	if (real.getsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &no_port,
			    &olen))
		no_port = 0;
	if (no_port)
		real.setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &off,
				sizeof(off));
	if (real.bind(fd, (const struct sockaddr *)ss, len))
		err = -errno;
	if (no_port)
		real.setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT,
				&no_port, sizeof(no_port));
	return err;
}

/* ss (of domain's family) becomes the RDMA route's source, port 0. */
static int route_source(int domain, struct rdma_cm_id *id,
			struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr *src = rdma_get_local_addr(id);

	memset(ss, 0, sizeof(*ss));
	if (domain == AF_INET && src->sa_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		*sin = *(struct sockaddr_in *)src;
		sin->sin_port = 0;
		*len = sizeof(*sin);
	} else if (domain == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

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
		*len = sizeof(*sin6);
	} else {
		return -EAFNOSUPPORT;
	}
	return 0;
}

/*
 * Gives the TCP socket a port of its own, on the address it was bound to,
 * else on the RDMA route's source: the request names that port, and the
 * kernel's connect must come from it.  Whether the socket holds a port is
 * asked of bind() itself (EINVAL: it does), not of getsockname(): a
 * failed connect() gives an automatic port back, getsockname() goes on
 * naming it, and a program may connect the socket again, from another.
 * One bound without a port (IP_BIND_ADDRESS_NO_PORT) gets its port here.
 */
static int bind_to_route_source(int fd, struct rdma_cm_id *id)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int err;

	if (real.getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	if (address_chosen(&ss)) {
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	} else {
		err = route_source(ss.ss_family, id, &ss, &len);
		if (err)
			return err;
	}
	err = bind_with_port(fd, &ss, len);
	return err == -EINVAL ? 0 : err;
}

/*
 * The socket's bound address with port 0; NULL where it is unbound.  A
 * v4-mapped one in its IPv4 form, as the peer is resolved in: the request
 * must come from the TCP source it names.
 */
static struct sockaddr *bound_source(int fd, struct sockaddr_storage *ss)
{
	socklen_t len = sizeof(*ss);

	if (real.getsockname(fd, (struct sockaddr *)ss, &len))
		return NULL;
	sockaddr_unmap_v4(ss);
	if (ss->ss_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		if (sin->sin_addr.s_addr == htonl(INADDR_ANY))
			return NULL;
		sin->sin_port = 0;
		return (struct sockaddr *)ss;
	}
	if (ss->ss_family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr))
			return NULL;
		sin6->sin6_port = 0;
		return (struct sockaddr *)ss;
	}
	return NULL;
}

enum dial_state {
	DIAL_ADDR,    /* resolving the address */
	DIAL_ROUTE,   /* resolving the route */
	DIAL_CONNECT, /* the request is out */
	DIAL_DONE
};

struct dial {
	const struct config *cfg;
	struct rdma_cm_id *id;
	int fd; /* the TCP socket, bound to the route's source */
	struct sockaddr_storage dst;
	struct sockaddr_storage src; /* what the socket was bound to */
	bool bound;
	struct roceshim_stats_endpoint peer;
	struct transport *t;
	struct conn *conn;
	enum dial_state state;
	int64_t deadline;
	int64_t attempt_ms;
	enum roceshim_reason reason;
	bool connected;	  /* its TCP connection is up: a second request */
	bool no_listener; /* refused: nothing listened on the CM */
	/* handshake_dial(): */
	handshake_dial_done_fn *done;
	void *arg;
	bool cancelled; /* atomic */
	bool queued;	/* waits for one of the BG_DIALS */
	struct dial *next;
};

static void dial_finish(struct dial *d, enum roceshim_reason reason)
{
	d->state = DIAL_DONE;
	d->reason = reason;
	/* The conn owns the transport once it exists: dial_end() frees it. */
	if (reason && !d->conn && d->t)
		transport_destroy(d->t);
	d->t = NULL;
}

static enum roceshim_reason resolve_attempt(struct dial *d)
{
	int64_t left = d->deadline - clock_ms();

	if (left <= 0)
		return ROCESHIM_REASON_TIMEOUT;
	if (d->attempt_ms > left)
		d->attempt_ms = left;
	if (rdmacm.resolve_addr(d->id,
				d->bound ? (struct sockaddr *)&d->src : NULL,
				(struct sockaddr *)&d->dst, (int)d->attempt_ms))
		return ROCESHIM_REASON_NO_ROUTE;
	return ROCESHIM_REASON_NONE;
}

/*
 * The route is resolved: the request goes out, naming the TCP source.
 * Everything the connection needs is had first: once the server has
 * accepted, it counts the connection as upgraded, and so must this end.
 */
static enum roceshim_reason send_request(struct dial *d)
{
	struct conn_options opt = handshake_conn_options(d->cfg);
	struct rdma_conn_param param = {
		.rnr_retry_count = HANDSHAKE_RNR_RETRY_COUNT,
		.retry_count = HANDSHAKE_RETRY_COUNT,
	};
	struct transport_config tc = handshake_transport_config(d->cfg);
	uint8_t request[WIRE_HELLO_LEN];
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct wire_hello hello;
	int err;

	if (bind_to_route_source(d->fd, d->id) ||
	    real.getsockname(d->fd, (struct sockaddr *)&ss, &len) ||
	    endpoint_from_sockaddr(&hello.tcp_source, (struct sockaddr *)&ss,
				   len))
		return ROCESHIM_REASON_RESOURCE;
	err = transport_create(d->id, &tc, &d->t);
	if (err) {
		handshake_log_no_transport("connection stays on TCP", err);
		return handshake_reason_of(err);
	}
	err = conn_create(d->id, d->t, &opt, &d->conn);
	if (err) {
		log_info("cm: out of memory or fds; connection stays on TCP");
		return handshake_reason_of(err);
	}
	transport_local_ring(d->t, &hello.ring);
	hello.connected = d->connected;
	wire_encode_hello(&hello, request);
	param.private_data = request;
	param.private_data_len = sizeof(request);
	if (rdmacm.connect(d->id, &param))
		return ROCESHIM_REASON_RESOURCE;
	return ROCESHIM_REASON_NONE;
}

/* The server accepted: its ring. */
static enum roceshim_reason established(struct dial *d,
					struct rdma_cm_event *ev)
{
	struct transport_ring_info peer;

	if (wire_decode_accept(ev->param.conn.private_data,
			       ev->param.conn.private_data_len, &peer) ||
	    transport_connect(d->t, &peer)) {
		stats_malformed_input();
		return ROCESHIM_REASON_PEER_REJECTED;
	}
	d->t = NULL; /* the conn's */
	return ROCESHIM_REASON_NONE;
}

/* Why an unexpected event stops the dial. */
static enum roceshim_reason unexpected(struct dial *d, struct rdma_cm_event *ev)
{
	enum roceshim_reason reason;

	log_debug("cm: %s (status %d) while dialing",
		  rdmacm.event_str(ev->event), ev->status);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return ROCESHIM_REASON_NO_ROUTE;
	case RDMA_CM_EVENT_REJECTED:
		d->no_listener = ev->status == HANDSHAKE_REJ_NO_LISTENER;
		wire_decode_reject(ev->param.conn.private_data,
				   ev->param.conn.private_data_len, &reason);
		return reason;
	default:
		return ROCESHIM_REASON_TIMEOUT;
	}
}

/*
 * One CM event for d.  When the route needs a neighbour that is not
 * resolved yet, rdma_cm asks for it but (Linux 6.1, source bound to
 * another port of the host) looks again only when the attempt times out:
 * short attempts, doubling, up to the deadline.
 */
static void dial_event(struct dial *d, struct rdma_cm_event *ev)
{
	enum roceshim_reason reason = ROCESHIM_REASON_NONE;
	int64_t left;

	switch (d->state) {
	case DIAL_ADDR:
		if (ev->event == RDMA_CM_EVENT_ADDR_RESOLVED) {
			left = d->deadline - clock_ms();
			if (left <= 0)
				reason = ROCESHIM_REASON_TIMEOUT;
			else if (rdmacm.resolve_route(d->id, (int)left))
				reason = ROCESHIM_REASON_NO_ROUTE;
			d->state = DIAL_ROUTE;
		} else if (ev->event == RDMA_CM_EVENT_ADDR_ERROR &&
			   ev->status == -ETIMEDOUT) {
			d->attempt_ms *= 2;
			reason = resolve_attempt(d);
		} else {
			reason = unexpected(d, ev);
		}
		break;
	case DIAL_ROUTE:
		if (ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED) {
			reason = send_request(d);
			d->state = DIAL_CONNECT;
		} else {
			reason = unexpected(d, ev);
		}
		break;
	case DIAL_CONNECT:
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED ||
		    ev->event == RDMA_CM_EVENT_REJECTED)
			heard_from(d->cfg, &d->peer);
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
			reason = established(d, ev);
			if (!reason)
				dial_finish(d, reason);
		} else {
			reason = unexpected(d, ev);
		}
		break;
	default:
		break;
	}
	if (reason)
		dial_finish(d, reason);
}

/*
 * Sets d up for the peer at addr (v4-mapped peers in their IPv4 form:
 * rdma_cm routes them only so).  Returns the reason it stops at once, if
 * it does.
 */
static enum roceshim_reason dial_prepare(struct dial *d,
					 const struct config *cfg, int fd,
					 const struct sockaddr *addr,
					 socklen_t len, unsigned int flags)
{
	d->cfg = cfg;
	d->fd = fd;
	d->connected = flags & HANDSHAKE_CONNECTED;
	d->state = DIAL_ADDR;
	d->attempt_ms = RESOLVE_FIRST_ATTEMPT_MS;
	if (endpoint_from_sockaddr(&d->peer, addr, len) || len > sizeof(d->dst))
		return ROCESHIM_REASON_UNSUPPORTED;
	memcpy(&d->dst, addr, len);
	sockaddr_unmap_v4(&d->dst);
	if (negative_cached(&d->peer))
		return ROCESHIM_REASON_NEGATIVE_CACHE;
	return ROCESHIM_REASON_NONE;
}

/* Starts it: the connect timeout runs from now. */
static enum roceshim_reason
dial_start(struct dial *d, struct rdma_event_channel *ch, void *context)
{
	d->deadline = clock_ms() + d->cfg->connect_timeout_ms;
	d->bound = bound_source(d->fd, &d->src) != NULL;
	if (rdmacm.create_id(ch, &d->id, context, RDMA_PS_TCP)) {
		d->id = NULL;
		return ROCESHIM_REASON_RESOURCE;
	}
	return resolve_attempt(d);
}

/*
 * A dial that ended, its events acknowledged (an id cannot be destroyed
 * before): a silent peer is remembered.  So is a port where nothing
 * listened on the CM once its TCP connection was up: its listener takes
 * no RDMA (a server without roceshim, TCP_DEFER_ACCEPT), and each
 * connect would pay for two refused handshakes; and one whose server
 * refused because its workers accept (prefork), other processes take its
 * connections over (handoff), or other processes' listeners on its port
 * accept them (reuseport).  Another refusal
 * before the TCP connect is not: the server may be starting.
 */
static void dial_end(struct dial *d)
{
	/* One the program gave up on says nothing of the peer. */
	if (d->reason == ROCESHIM_REASON_TIMEOUT &&
	    !__atomic_load_n(&d->cancelled, __ATOMIC_ACQUIRE))
		negative_remember(d->cfg, &d->peer, true);
	else if ((d->reason && d->no_listener && d->connected) ||
		 d->reason == ROCESHIM_REASON_PREFORK ||
		 d->reason == ROCESHIM_REASON_HANDOFF ||
		 d->reason == ROCESHIM_REASON_REUSEPORT)
		negative_remember(d->cfg, &d->peer, false);
	if (!d->reason)
		return;
	if (d->conn)
		conn_discard(d->conn); /* and its id */
	else if (d->id)
		rdmacm.destroy_id(d->id);
	d->conn = NULL;
	d->id = NULL;
}

/*
 * How long a blocking connect's handshake goes on after a signal handler
 * interrupted it where the kernel would not restart the connect.  The
 * kernel's connect to a live peer on the route is over in well under a
 * millisecond, so a signal rarely finds it waiting; the handshake takes
 * longer, and a program with a fast timer (a handler without SA_RESTART)
 * that takes EINTR for a failure and connects again would find every
 * attempt interrupted.  A handshake that ends within the grace goes on as
 * if nothing had happened; one that does not is abandoned (EINTR).
 *
 * The grace is twice what this process's handshakes have taken lately,
 * at least SIGNAL_GRACE_MIN_MS, and doubles with each handshake in a row
 * that a signal ended, up to SIGNAL_GRACE_MAX_MS: where handshakes are
 * slow (a loaded host, an emulated device), a fixed grace would end every
 * attempt; the doubling lets the next one through however slow they got.
 */
#define SIGNAL_GRACE_MIN_MS 100
#define SIGNAL_GRACE_MAX_MS 2000

static struct {
	unsigned int avg_ms;	  /* atomic: moving average of handshakes */
	unsigned int interrupted; /* atomic: ended by a signal, in a row */
} handshake_time;

int handshake_signal_grace_ms(void)
{
	unsigned int avg =
		__atomic_load_n(&handshake_time.avg_ms, __ATOMIC_RELAXED);
	unsigned int row =
		__atomic_load_n(&handshake_time.interrupted, __ATOMIC_RELAXED);
	unsigned int grace = 2 * avg;

	if (grace < SIGNAL_GRACE_MIN_MS)
		grace = SIGNAL_GRACE_MIN_MS;
	grace <<= row < 5 ? row : 5;
	return grace < SIGNAL_GRACE_MAX_MS ? grace : SIGNAL_GRACE_MAX_MS;
}

/* A blocking handshake ended after took_ms; interrupted: by a signal. */
static void handshake_timed(int64_t took_ms, bool interrupted)
{
	unsigned int avg;

	if (interrupted) {
		__atomic_add_fetch(&handshake_time.interrupted, 1,
				   __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&handshake_time.interrupted, 0, __ATOMIC_RELAXED);
	if (took_ms > SIGNAL_GRACE_MAX_MS)
		took_ms = SIGNAL_GRACE_MAX_MS;
	avg = __atomic_load_n(&handshake_time.avg_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&handshake_time.avg_ms,
			 (3 * avg + (unsigned int)took_ms) / 4,
			 __ATOMIC_RELAXED);
}

/*
 * Waits for the next event on ch; NULL on timeout, or (*interrupted) when
 * a signal handler interrupted the wait where the kernel would not
 * restart a connect (may_restart false: a send timeout is set) and no
 * event came in the grace after the first such signal.  *grace_end: that
 * grace's end, -1 before the first.
 */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch,
					int64_t deadline, bool may_restart,
					int64_t *grace_end, bool *interrupted)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int64_t until;
	int left, n;

	for (;;) {
		until = *grace_end >= 0 && *grace_end < deadline ? *grace_end
								 : deadline;
		left = clock_ms_left(until);
		n = left ? real.poll(&pfd, 1, left) : 0;
		if (n >= 0 || errno != EINTR)
			break;
		if (*grace_end < 0 && !(may_restart && sig_restart_allowed()))
			*grace_end = clock_ms() + handshake_signal_grace_ms();
	}
	/* Or its deadline came first: the connect must still end now. */
	*interrupted = !n && *grace_end >= 0;
	if (n <= 0)
		return NULL;
	return rdmacm.get_cm_event(ch, &ev) ? NULL : ev;
}

static enum roceshim_reason connect_now(const struct config *cfg, int fd,
					const struct sockaddr *addr,
					socklen_t len, unsigned int flags,
					struct conn **out, bool *no_listener)
{
	struct rdma_event_channel *ch, *shared = handshake_channel(cfg);
	struct dial d = { .id = NULL };
	struct rdma_cm_event *ev;
	enum roceshim_reason reason;
	/* SO_SNDTIMEO bounds a connect and stops its restart (signal(7)). */
	bool may_restart = real_socket_timeout_ms(fd, SO_SNDTIMEO) < 0,
	     interrupted;
	int64_t grace_end = -1, start = clock_ms();

	if (!shared)
		return ROCESHIM_REASON_UNSUPPORTED;
	/* A channel of its own: the handshake's events are ours alone. */
	ch = handshake_open_channel(true);
	if (!ch)
		return errno == EMFILE ? ROCESHIM_REASON_FD_LIMIT
				       : ROCESHIM_REASON_RESOURCE;
	reason = dial_prepare(&d, cfg, fd, addr, len, flags);
	if (!reason)
		reason = dial_start(&d, ch, NULL);
	if (reason)
		dial_finish(&d, reason);
	while (d.state != DIAL_DONE) {
		ev = next_event(ch, d.deadline, may_restart, &grace_end,
				&interrupted);
		if (!ev) {
			log_debug("cm: %s", interrupted
						    ? "a signal ended the wait"
						    : "no answer in time");
			dial_finish(&d, interrupted ? ROCESHIM_REASON_ABANDONED
						    : ROCESHIM_REASON_TIMEOUT);
			break;
		}
		dial_event(&d, ev);
		rdmacm.ack_cm_event(ev);
		if (d.state == DIAL_DONE)
			handshake_timed(clock_ms() - start, false);
	}
	if (d.reason == ROCESHIM_REASON_ABANDONED)
		handshake_timed(0, true);
	if (!d.reason) {
		/* From now on its events go to the progress thread. */
		d.id->context = d.conn;
		if (rdmacm.migrate_id(d.id, shared)) {
			d.reason = ROCESHIM_REASON_RESOURCE;
		} else {
			conn_start(d.conn);
			*out = d.conn;
		}
	}
	dial_end(&d);
	rdmacm.destroy_event_channel(ch);
	*no_listener = d.no_listener;
	return d.reason;
}

enum roceshim_reason handshake_connect(const struct config *cfg, int fd,
				       const struct sockaddr *addr,
				       socklen_t len, unsigned int flags,
				       struct conn **out, bool *no_listener)
{
	enum roceshim_reason reason;

	if (!handshake_begin())
		return ROCESHIM_REASON_UNSUPPORTED;
	reason = connect_now(cfg, fd, addr, len, flags, out, no_listener);
	handshake_end();
	return reason;
}

/* ---- dials in the background ------------------------------------------ */

/*
 * The channel of background dials, and those in flight.  At most
 * BG_DIALS run at once, the others wait their turn (queued) before their
 * timeout starts: a burst of connects in one event loop would otherwise
 * share the progress thread so thinly that none finished in time.
 */
#define BG_DIALS 32

static struct {
	pthread_mutex_t lock;
	struct rdma_event_channel *ch;
	struct progress_watcher watcher;
	struct dial *list;
	unsigned int running;
	bool failed;
} bg = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Under bg.lock: removes d from the list. */
static void unlist_locked(struct dial *d)
{
	struct dial **pp;

	for (pp = &bg.list; *pp; pp = &(*pp)->next) {
		if (*pp == d) {
			*pp = d->next;
			return;
		}
	}
}

static void bg_end(struct dial *d);

/* Under bg.lock: the queued dials whose turn has come. */
static struct dial *next_queued_locked(void)
{
	struct dial *d, *next = NULL;

	if (bg.running >= BG_DIALS)
		return NULL;
	/* The list is newest first: the oldest queued goes first. */
	for (d = bg.list; d; d = d->next)
		if (d->queued)
			next = d;
	if (next) {
		next->queued = false;
		bg.running++;
	}
	return next;
}

/* Starts the queued dials that may run now (progress thread). */
static void start_queued(void)
{
	enum roceshim_reason reason;
	struct dial *d;

	for (;;) {
		pthread_mutex_lock(&bg.lock);
		d = next_queued_locked();
		reason = d ? dial_start(d, bg.ch, d) : ROCESHIM_REASON_NONE;
		pthread_mutex_unlock(&bg.lock);
		if (!d)
			return;
		if (reason) {
			dial_finish(d, reason);
			bg_end(d);
		}
	}
}

/* A background dial ended: its owner learns how (progress thread). */
static void bg_end(struct dial *d)
{
	struct rdma_event_channel *shared = handshake_channel(d->cfg);

	pthread_mutex_lock(&bg.lock);
	unlist_locked(d);
	if (!d->queued)
		bg.running--;
	pthread_mutex_unlock(&bg.lock);
	if (!d->reason) {
		d->id->context = d->conn;
		if (!shared || rdmacm.migrate_id(d->id, shared)) {
			d->reason = ROCESHIM_REASON_RESOURCE;
		} else {
			conn_start(d->conn);
		}
	}
	dial_end(d);
	d->done(d->arg, d->reason, d->conn, d->no_listener);
	free(d);
	handshake_end();
	start_queued();
}

static void bg_events(struct progress_watcher *w, uint32_t events)
{
	struct rdma_cm_event *ev;
	struct dial *d;

	(void)w;
	(void)events;
	while (!rdmacm.get_cm_event(bg.ch, &ev)) {
		d = ev->id->context;
		dial_event(d, ev);
		rdmacm.ack_cm_event(ev);
		if (d->state == DIAL_DONE)
			bg_end(d);
	}
	handshake_channel_failed(bg.ch->fd);
}

bool handshake_dial_tick(void)
{
	int64_t now = clock_ms();
	struct dial *d, *late;
	bool left;

	do {
		late = NULL;
		pthread_mutex_lock(&bg.lock);
		for (d = bg.list; d && !late; d = d->next)
			if ((!d->queued && now >= d->deadline) ||
			    __atomic_load_n(&d->cancelled, __ATOMIC_ACQUIRE))
				late = d;
		pthread_mutex_unlock(&bg.lock);
		if (late) {
			dial_finish(late, ROCESHIM_REASON_TIMEOUT);
			bg_end(late);
		}
	} while (late);
	pthread_mutex_lock(&bg.lock);
	left = bg.list;
	pthread_mutex_unlock(&bg.lock);
	return left;
}

/* A fork child dials nothing: its copy of the channel goes (handshake.c). */
void FORK_CODE handshake_client_fork_child(bool fds_shared)
{
	if (!bg.ch)
		return;
	if (!fds_shared)
		real.close(bg.ch->fd);
	bg.ch = NULL;
	bg.failed = true;
}

/* Under bg.lock: the background channel, opened on first use. */
static bool bg_channel_locked(void)
{
	if (bg.ch || bg.failed)
		return bg.ch;
	bg.ch = handshake_open_channel(false);
	bg.watcher.fn = bg_events;
	if (!bg.ch || real.fcntl(bg.ch->fd, F_SETFL, O_NONBLOCK) ||
	    progress_add(bg.ch->fd, EPOLLIN, &bg.watcher)) {
		bg.failed = true;
		if (bg.ch)
			rdmacm.destroy_event_channel(bg.ch);
		bg.ch = NULL;
	}
	return bg.ch;
}

enum roceshim_reason handshake_dial(const struct config *cfg, int fd,
				    const struct sockaddr *addr, socklen_t len,
				    unsigned int flags,
				    handshake_dial_done_fn *done, void *arg,
				    struct dial **out)
{
	enum roceshim_reason reason = ROCESHIM_REASON_UNSUPPORTED;
	struct dial *d;

	if (!handshake_begin())
		return reason;
	if (!handshake_channel(cfg))
		goto out;
	reason = ROCESHIM_REASON_RESOURCE;
	d = calloc(1, sizeof(*d));
	if (!d)
		goto out;
	d->done = done;
	d->arg = arg;
	reason = dial_prepare(d, cfg, fd, addr, len, flags);
	pthread_mutex_lock(&bg.lock);
	if (!reason && !bg_channel_locked())
		reason = ROCESHIM_REASON_UNSUPPORTED;
	if (!reason) {
		d->queued = bg.running >= BG_DIALS;
		if (!d->queued) {
			reason = dial_start(d, bg.ch, d);
			bg.running += !reason;
		}
	}
	if (!reason) {
		d->next = bg.list;
		bg.list = d;
	}
	pthread_mutex_unlock(&bg.lock);
	if (reason) {
		dial_finish(d, reason);
		dial_end(d);
		free(d);
		goto out;
	}
	/* A tick finds it if it takes too long; bg_end() ends it. */
	progress_wake();
	*out = d;
	return ROCESHIM_REASON_NONE;
out:
	handshake_end();
	return reason;
}

void handshake_dial_cancel(struct dial *d)
{
	__atomic_store_n(&d->cancelled, true, __ATOMIC_RELEASE);
	progress_wake();
}
