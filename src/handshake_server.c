// SPDX-License-Identifier: MIT
/*
 * The server side of the handshake: CM listeners beside TCP listeners,
 * connect requests, and the connections they bring until accept() claims
 * them.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "handshake_impl.h"
#include "log.h"
#include "policy.h"
#include "real.h"
#include "share.h"
#include "stats.h"
#include "wire.h"

#define PENDING_TIMEOUT_MS 30000

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

static struct {
	pthread_mutex_t lock;
	pthread_cond_t settled;
	struct pending *list;
} pend = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.settled = PTHREAD_COND_INITIALIZER,
};

static bool same_endpoint(const struct roceshim_stats_endpoint *a,
			  const struct roceshim_stats_endpoint *b)
{
	return a->port == b->port && !memcmp(a->addr, b->addr, 16);
}

/* A client's connect request on one of our listeners; false: refused. */
bool handshake_on_connect_request(const struct config *cfg,
				  struct rdma_cm_event *ev)
{
	struct transport_config tc = handshake_transport_config(cfg);
	struct conn_options opt;
	struct rdma_conn_param param = {
		.rnr_retry_count = HANDSHAKE_RNR_RETRY_COUNT,
		.retry_count = HANDSHAKE_RETRY_COUNT,
	};
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
		stats_malformed_input();
		log_info("cm: malformed connect request refused");
		goto reject;
	}
	/* This end's rules hold too: an excluded peer is refused here. */
	if (policy_decide(cfg, &hello.tcp_source, local_port)) {
		log_debug("cm: connect request refused by the rules");
		goto reject;
	}
	err = transport_create(id, &tc, &t);
	if (err) {
		handshake_log_no_transport("connect request refused", err);
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
	opt = handshake_conn_options(cfg);
	if (!p || conn_create(id, t, &opt, &c)) {
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
	/* A prefork worker that accepts it finds it there. */
	share_pending_set(conn_slot(c), &hello.tcp_source, local_port);
	p->conn = c;
	p->expires_ms = clock_ms() + PENDING_TIMEOUT_MS;
	/* Pending before accept: the client connects TCP only after. */
	pthread_mutex_lock(&pend.lock);
	p->next = pend.list;
	pend.list = p;
	pthread_mutex_unlock(&pend.lock);
	conn_start(c);
	if (rdma_accept(id, &param)) {
		pthread_mutex_lock(&pend.lock);
		if (pend.list == p)
			pend.list = p->next;
		pthread_mutex_unlock(&pend.lock);
		log_info("cm: rdma_accept failed: %s", strerror(errno));
		free(p);
		conn_discard(c);
	}
	return true;
reject:
	if (t)
		transport_destroy(t);
	rdma_reject(id, NULL, 0);
	return false;
}

/* Records how the handshake of c ended if accept() has not claimed it. */
static void settle(struct conn *c, enum pending_state state)
{
	struct pending *p;

	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p; p = p->next) {
		if (p->conn == c && p->state == PENDING_ACCEPTED) {
			p->state = state;
			share_pending_settle(conn_slot(c),
					     state == PENDING_ESTABLISHED
						     ? SHARE_PENDING_ESTABLISHED
						     : SHARE_PENDING_FAILED);
			pthread_cond_broadcast(&pend.settled);
			break;
		}
	}
	pthread_mutex_unlock(&pend.lock);
}

void handshake_on_established(struct conn *c)
{
	settle(c, PENDING_ESTABLISHED);
}

void handshake_on_failed(struct conn *c)
{
	settle(c, PENDING_FAILED);
}

bool handshake_pending_tick(void)
{
	struct pending **pp = &pend.list, *p, *expired = NULL;
	int64_t now = clock_ms();
	bool left;

	pthread_mutex_lock(&pend.lock);
	while ((p = *pp)) {
		if (now >= p->expires_ms) {
			*pp = p->next;
			p->next = expired;
			expired = p;
			continue;
		}
		pp = &p->next;
	}
	left = pend.list;
	pthread_mutex_unlock(&pend.lock);
	while ((p = expired)) {
		expired = p->next;
		log_info("cm: RDMA connection never matched by accept(); "
			 "dropped");
		conn_discard(p->conn);
		free(p);
	}
	return left;
}

void handshake_listen(const struct config *cfg, struct sock *sock, int fd)
{
	struct rdma_event_channel *ch = handshake_channel(cfg);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rdma_cm_id *id;

	if (!ch || real.getsockname(fd, (struct sockaddr *)&ss, &len))
		return;
	if (rdma_create_id(ch, &id, &handshake_listener_tag, RDMA_PS_TCP))
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

void handshake_unlisten(struct sock *sock)
{
	/* In a fork child the id is the parent's: leave it alone. */
	if (sock->listen_id && handshake_running())
		rdma_destroy_id(sock->listen_id);
	sock->listen_id = NULL;
}

static struct pending **find(const struct roceshim_stats_endpoint *peer,
			     uint16_t local_port)
{
	struct pending **pp, *p;

	for (pp = &pend.list; (p = *pp); pp = &p->next)
		if (p->port == local_port && same_endpoint(&p->source, peer))
			return pp;
	return NULL;
}

/*
 * The client connects TCP as soon as its side is ESTABLISHED, so its SYN
 * may overtake the RTU that makes this side ESTABLISHED: wait for it, at
 * most the connect timeout, which is as long as the client waits too.
 */
/*
 * In a fork child (a prefork worker) the listener is inherited, and the
 * pending connections are its owner's: a pending one is claimed, and
 * moves to TCP before its first byte.
 */
static void take_inherited(const struct config *cfg,
			   const struct roceshim_stats_endpoint *peer,
			   uint16_t local_port, int fd, bool *moved)
{
	enum share_pending state;

	state = share_pending_claim(peer, local_port, cfg->connect_timeout_ms);
	if (state != SHARE_PENDING_CLAIMED)
		return;
	if (conn_move_unclaimed(fd,
				handshake_conn_options(cfg).move_timeout_ms)) {
		log_warn("fd %d: an RDMA connection accepted in a fork child "
			 "could not move to TCP: reset",
			 fd);
		real.shutdown(fd, SHUT_RDWR);
		return;
	}
	*moved = true;
}

/* The owner: a descendant claimed c, or asks to move it. */
void handshake_on_share_request(void *ctx)
{
	struct conn *c = ctx;
	struct pending **pp, *p;

	if (share_pending_state(conn_slot(c)) != SHARE_PENDING_CLAIMED) {
		conn_on_share_request(c);
		return;
	}
	pthread_mutex_lock(&pend.lock);
	for (pp = &pend.list; (p = *pp); pp = &p->next) {
		if (p->conn == c) {
			*pp = p->next;
			break;
		}
	}
	pthread_mutex_unlock(&pend.lock);
	if (p) {
		conn_discard(c);
		free(p);
	}
}

struct conn *handshake_take_pending(const struct config *cfg,
				    const struct roceshim_stats_endpoint *peer,
				    uint16_t local_port, int fd, bool *moved)
{
	struct timespec deadline;
	struct pending **pp, *p;
	struct conn *c = NULL;
	bool established = false;

	*moved = false;
	if (!handshake_running()) {
		take_inherited(cfg, peer, local_port, fd, moved);
		return NULL;
	}

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += cfg->connect_timeout_ms / 1000;
	deadline.tv_nsec += (cfg->connect_timeout_ms % 1000) * 1000000l;
	if (deadline.tv_nsec >= 1000000000l) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000l;
	}
	pthread_mutex_lock(&pend.lock);
	while ((pp = find(peer, local_port)) &&
	       (*pp)->state == PENDING_ACCEPTED &&
	       !pthread_cond_clockwait(&pend.settled, &pend.lock,
				       CLOCK_MONOTONIC, &deadline))
		;
	if (pp) {
		p = *pp;
		*pp = p->next;
		c = p->conn;
		established = p->state == PENDING_ESTABLISHED &&
			      share_pending_take(conn_slot(c));
		free(p);
	}
	pthread_mutex_unlock(&pend.lock);
	if (c && !established) {
		log_info("cm: RDMA handshake not completed by the client; "
			 "connection stays on TCP");
		conn_release(c, true);
		c = NULL;
	}
	return c;
}

void handshake_server_fork_child(void)
{
	pthread_mutex_init(&pend.lock, NULL);
	pthread_cond_init(&pend.settled, NULL);
}
