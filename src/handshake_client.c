// SPDX-License-Identifier: MIT
/*
 * The client side of the handshake, run by connect() before the real TCP
 * connect, and the negative cache of peers that did not answer.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>

#include "clock.h"
#include "endpoint.h"
#include "handshake_impl.h"
#include "log.h"
#include "real.h"
#include "stats.h"
#include "wire.h"

#define NEGATIVE_CACHE_SIZE 64
/* The first address resolution attempt; each next one waits twice as long. */
#define RESOLVE_FIRST_ATTEMPT_MS 10

struct negative {
	struct roceshim_stats_endpoint peer;
	int64_t expires_ms;
};

static struct {
	pthread_mutex_t lock;
	struct negative entries[NEGATIVE_CACHE_SIZE];
	unsigned int next;
} neg = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool same_endpoint(const struct roceshim_stats_endpoint *a,
			  const struct roceshim_stats_endpoint *b)
{
	return a->port == b->port && !memcmp(a->addr, b->addr, 16);
}

static bool negative_cached(const struct roceshim_stats_endpoint *peer)
{
	int64_t now = clock_ms();
	bool hit = false;
	unsigned int i;

	pthread_mutex_lock(&neg.lock);
	for (i = 0; i < NEGATIVE_CACHE_SIZE && !hit; i++)
		hit = neg.entries[i].expires_ms > now &&
		      same_endpoint(&neg.entries[i].peer, peer);
	pthread_mutex_unlock(&neg.lock);
	return hit;
}

static void negative_remember(const struct config *cfg,
			      const struct roceshim_stats_endpoint *peer)
{
	if (!cfg->negative_cache_s)
		return;
	pthread_mutex_lock(&neg.lock);
	neg.entries[neg.next].peer = *peer;
	neg.entries[neg.next].expires_ms =
		clock_ms() + cfg->negative_cache_s * 1000ll;
	neg.next = (neg.next + 1) % NEGATIVE_CACHE_SIZE;
	pthread_mutex_unlock(&neg.lock);
}

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

static enum roceshim_reason
handshake(const struct config *cfg, int fd, struct rdma_event_channel *ch,
	  struct rdma_cm_id *id, const struct sockaddr *addr, struct conn **out)
{
	struct rdma_conn_param param = {
		.rnr_retry_count = HANDSHAKE_RNR_RETRY_COUNT,
		.retry_count = HANDSHAKE_RETRY_COUNT,
	};
	int64_t deadline = clock_ms() + cfg->connect_timeout_ms;
	struct transport_config tc = handshake_transport_config(cfg);
	struct conn_options opt;
	struct sockaddr_storage ss;
	uint8_t request[WIRE_HELLO_LEN];
	struct transport_ring_info peer;
	struct transport *t = NULL;
	struct rdma_cm_event *ev;
	enum roceshim_reason reason;
	struct wire_hello hello;
	socklen_t len = sizeof(ss);
	int ms = cfg->connect_timeout_ms;
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
		handshake_log_no_transport("connection stays on TCP", err);
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
		stats_malformed_input();
		rdma_ack_cm_event(ev);
		reason = ROCESHIM_REASON_PEER_REJECTED;
		goto fail;
	}
	rdma_ack_cm_event(ev);
	opt = handshake_conn_options(cfg);
	if (conn_create(id, t, &opt, out)) {
		reason = ROCESHIM_REASON_RESOURCE;
		goto fail;
	}
	return ROCESHIM_REASON_NONE;
fail:
	transport_destroy(t);
	return reason;
}

enum roceshim_reason handshake_connect(const struct config *cfg, int fd,
				       const struct sockaddr *addr,
				       socklen_t len, struct conn **out)
{
	struct rdma_event_channel *ch, *shared = handshake_channel(cfg);
	struct roceshim_stats_endpoint peer;
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
	if (!shared)
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
	reason = handshake(cfg, fd, ch, id, addr, out);
	if (reason == ROCESHIM_REASON_NONE) {
		/* From now on its events go to the progress thread. */
		id->context = *out;
		if (rdma_migrate_id(id, shared)) {
			conn_discard(*out);
			reason = ROCESHIM_REASON_RESOURCE;
		} else {
			conn_start(*out);
		}
	} else {
		rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ch);
	/* A refusal costs a round trip; only a silent peer is remembered. */
	if (reason == ROCESHIM_REASON_TIMEOUT)
		negative_remember(cfg, &peer);
	return reason;
}
