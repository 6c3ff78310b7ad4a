// SPDX-License-Identifier: MIT
/*
 * The server side of the handshake: CM listeners beside TCP listeners,
 * connect requests, and the connections they bring until accept() claims
 * them.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "endpoint.h"
#include "exec_handover.h"
#include "fork_page.h"
#include "handshake_impl.h"
#include "log.h"
#include "policy.h"
#include "progress.h"
#include "rdma_stack.h"
#include "real.h"
#include "reuseport.h"
#include "share.h"
#include "stats.h"
#include "tcp_diag.h"
#include "wire.h"

/*
 * A connection this end accepted on the CM, until accept() claims it.  It
 * counts as upgraded only once ESTABLISHED: a client that gave up first
 * (timeout) is on TCP, and so must this end be.  An established one waits
 * for accept() as long as its TCP connection may be in the listener's
 * queue: until the listener closes, or, once its client has gone too, for
 * PENDING_GONE_MS.  One that never got established goes after
 * PENDING_TIMEOUT_MS: its client is on TCP.  A listener holds at most
 * PENDING_PER_BACKLOG times its backlog; the requests beyond are refused
 * (those clients use TCP).
 */
#define PENDING_TIMEOUT_MS  30000
#define PENDING_GONE_MS	    600000
#define PENDING_PER_BACKLOG 2
/*
 * A client connects TCP once its side of the RDMA handshake is up.  A
 * listener whose accept queue is full drops that connection's last ACK:
 * the handshake stalls in the listener's SYN queue, or, where the SYN
 * queue overflowed too and SYN cookies answered, leaves no trace there.
 * Over TCP, the client's first bytes, retransmitted, get the connection
 * in once there is room; this client sends its bytes over RDMA, and
 * would wait for ever.  So an established pending whose TCP handshake
 * stalls, or is not seen for STALL_ABSENT_MS, moves to TCP (tcp_diag.h):
 * its queue pair goes, the client's marker rides TCP's retransmissions
 * as its bytes would, and accept() still finds the connection here
 * (settle() keeps it).  A client whose TCP connect is still on its way
 * (its SYN dropped, and retried) moves once it is up.
 */
#define STALL_FIRST_CHECK_MS  500
#define STALL_CHECK_MS	      250
#define STALL_ABSENT_MS	      3000
#define STALL_CHECKS_PER_TICK 16
/*
 * A connection that a fork child claimed keeps its queue pair this long:
 * the child's marker must reach the client before the client sees the
 * disconnect, or the client would take that for a failure of its queue
 * pair (the move is right either way; the recorded cause would not be).
 */
#define PENDING_CLAIMED_MS 1000
enum pending_state {
	PENDING_ACCEPTED,
	PENDING_ESTABLISHED,
	PENDING_FAILED,
	PENDING_CLAIMED, /* a fork child took it: it goes when it expires */
};

struct pending {
	struct roceshim_stats_endpoint source;
	struct roceshim_stats_endpoint
		local; /* this end of its TCP connection */
	uint16_t port;
	struct rdma_cm_id *listener;
	struct conn *conn;
	enum pending_state state;
	int64_t expires_ms; /* -1: until accept() or the listener's close */
	int64_t established_ms;
	int64_t check_ms; /* established: when its TCP handshake is looked at
			     next (check_stalls()); 0: no more */
	bool busy; /* its request is still being decided: accept() waits */
	bool port_shared; /* its listener's port is (SO_REUSEPORT) */
	struct pending *next;
};

/* An established pending due for a look at its TCP handshake. */
struct stall_check {
	struct roceshim_stats_endpoint local;
	struct roceshim_stats_endpoint source;
	struct conn *conn;
};

/* A CM listener's context (handshake_impl.h). */
struct listener {
	const char *tag; /* &handshake_listener_tag */
	int backlog;
	int64_t since_ms; /* when it started to listen */
	/*
	 * SO_REUSEPORT: listeners of other processes may share the port and
	 * claim its connections; the descriptor that names it for them
	 * (reuseport.h), -1 if it does not.
	 */
	int reuseport_name;
	uint64_t inode; /* its TCP listener's socket */
};

/*
 * An accept() that waits for a late second request (handshake.h): the
 * client's TCP source it took, and the listener's port.
 */
struct claim {
	struct roceshim_stats_endpoint source;
	uint16_t port;
	struct claim *next;
};

/*
 * A client refused for want of a CM listener asks again once its TCP
 * connection is up, so only a connection that reached the listener just
 * after it started to listen can be such a client's: an accept() in the
 * first LATE_WINDOW_MS waits up to LATE_WAIT_MS for its request.
 */
#define LATE_WINDOW_MS 1000
#define LATE_WAIT_MS   250

/*
 * An answered request is settled by the CM for sure: the REP goes again,
 * each CM response timeout (about 4 s by default), until the RTU comes,
 * and a client that gave up answers it with a REJ.  accept() waits for
 * that outcome through one lost message and its retransmission; only
 * then does it let the queue pair go, which the client learns of by a
 * single REJ that may be lost too.
 */
#define SETTLE_MAX_MS 10000

/*
 * A port whose connections a descendant accepts (a prefork worker
 * claimed one: prefork), or another process takes over before this one
 * wrote to them (a server that forks a handler per connection, or passes
 * each to a worker: handoff), is refused on the CM for this long after
 * the last claim: each of its connections would be set up on RDMA here
 * only to move to TCP in the other process.  The client remembers the
 * refusal (negative cache).
 */
#define ELSEWHERE_MS  30000
#define ELSEWHERE_MAX 16

struct elsewhere {
	uint16_t port;
	enum roceshim_reason why;
	int64_t until_ms;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t settled;
	struct pending *list;
	struct claim *claims;
	struct elsewhere elsewhere[ELSEWHERE_MAX];
} pend FORK_DATA = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.settled = PTHREAD_COND_INITIALIZER,
};

/* The same host, an IPv4 address in either of its forms. */
static bool same_host(const struct roceshim_stats_endpoint *a,
		      const struct roceshim_stats_endpoint *b)
{
	return !memcmp(a->addr, b->addr, 16);
}

/*
 * The request's TCP source must be the host the request came from: a
 * client cannot claim another's TCP connection.
 */
static bool source_is_requester(struct rdma_cm_id *id,
				const struct roceshim_stats_endpoint *source)
{
	struct roceshim_stats_endpoint cm;
	struct sockaddr *sa = rdma_get_peer_addr(id);

	return !endpoint_from_sockaddr(&cm, sa,
				       sa->sa_family == AF_INET
					       ? sizeof(struct sockaddr_in)
					       : sizeof(struct sockaddr_in6)) &&
	       same_host(&cm, source);
}

/*
 * Whether the request's client still waits for an answer.  One that gave
 * up while the request waited here (a loaded progress thread) has sent
 * its REJ, and the CM then holds the id in a state that no queue pair can
 * be set up from (EINVAL): the rings would be pinned for nothing.
 */
static bool client_still_waits(struct rdma_cm_id *id)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT };
	int mask;

	return !rdmacm.init_qp_attr(id, &attr, &mask) || errno != EINVAL;
}

/* This end of the TCP connection that the request on id says it has. */
static int tcp_local(struct rdma_cm_id *id, uint16_t local_port,
		     struct roceshim_stats_endpoint *local)
{
	struct sockaddr *sa = rdma_get_local_addr(id);
	int err;

	err = endpoint_from_sockaddr(local, sa,
				     sa->sa_family == AF_INET
					     ? sizeof(struct sockaddr_in)
					     : sizeof(struct sockaddr_in6));
	local->port = local_port;
	return err;
}

/*
 * A second request, whose TCP connection is up: it may have the
 * connection only while that waits in the listener's queue.  Asked once
 * the pending is listed, so that an accept() from then on waits for the
 * handshake, and one before it shows here as taken.
 */
static bool still_in_queue(const struct pending *p)
{
	int ret = tcp_diag_stage(&p->local, &p->source);

	if (ret < 0)
		log_info("cm: the kernel cannot tell whether a connection "
			 "waits in its listener's queue (%s); it stays on TCP",
			 strerror(-ret));
	return ret == TCP_DIAG_QUEUED;
}

/* Under pend.lock: an accept() waits for source's late request. */
static bool claimed_locked(const struct roceshim_stats_endpoint *source,
			   uint16_t local_port)
{
	const struct claim *k;

	for (k = pend.claims; k; k = k->next)
		if (k->port == local_port && endpoint_equal(&k->source, source))
			return true;
	return false;
}

/* Takes p off the list; an accept() waiting for it goes on without. */
static void unlist_pending(struct pending *p)
{
	struct pending **pp;

	pthread_mutex_lock(&pend.lock);
	for (pp = &pend.list; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	pthread_cond_broadcast(&pend.settled);
	pthread_mutex_unlock(&pend.lock);
}

/*
 * Under pend.lock: port's connections are taken by another process (why).
 * Its entry is renewed, or the oldest (an unused or expired one first)
 * taken.
 */
static void mark_accepted_elsewhere_locked(uint16_t port,
					   enum roceshim_reason why)
{
	struct elsewhere *e, *slot = &pend.elsewhere[0];

	for (e = pend.elsewhere; e < pend.elsewhere + ELSEWHERE_MAX; e++) {
		if (e->port == port) {
			slot = e;
			break;
		}
		if (e->until_ms < slot->until_ms)
			slot = e;
	}
	slot->port = port;
	slot->why = why;
	slot->until_ms = clock_ms() + ELSEWHERE_MS;
}

/* Why port's connections are taken elsewhere, or ROCESHIM_REASON_NONE. */
static enum roceshim_reason accepted_elsewhere(uint16_t port)
{
	enum roceshim_reason why = ROCESHIM_REASON_NONE;
	int64_t now = clock_ms();
	unsigned int i;

	pthread_mutex_lock(&pend.lock);
	for (i = 0; i < ELSEWHERE_MAX && !why; i++)
		if (pend.elsewhere[i].port == port &&
		    pend.elsewhere[i].until_ms > now)
			why = pend.elsewhere[i].why;
	pthread_mutex_unlock(&pend.lock);
	return why;
}

static bool too_many_pending(struct rdma_cm_id *listener)
{
	const struct listener *l = listener->context;
	unsigned int n = 0;
	struct pending *p;

	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p; p = p->next)
		n += p->listener == listener;
	pthread_mutex_unlock(&pend.lock);
	return n >= (unsigned int)l->backlog * PENDING_PER_BACKLOG;
}

/*
 * Whether a listener that shares its port, unknown to the CM listener
 * (a process without roceshim, or one that could not join), might
 * accept the connection: it would treat a client on RDMA as plain TCP.
 */
static bool strangers_listen(struct rdma_cm_id *listener, uint16_t port)
{
	const struct listener *l = listener->context;

	return l->reuseport_name >= 0 && reuseport_strangers(port, l->inode);
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
	uint8_t reply[WIRE_ACCEPT_LEN], refusal[WIRE_REJECT_LEN];
	enum roceshim_reason why = ROCESHIM_REASON_NONE;
	struct transport_ring_info ring;
	struct transport *t = NULL;
	struct roceshim_stats_endpoint local;
	struct wire_hello hello;
	uint16_t local_port = ntohs(rdmacm.get_src_port(id));
	struct conn *c = NULL;
	struct pending *p;
	bool late;
	int err;

	why = accepted_elsewhere(local_port);
	if (why) {
		log_debug("cm: connect request refused: %s",
			  why == ROCESHIM_REASON_PREFORK
				  ? "a worker process accepts this port's "
				    "connections"
			  : why == ROCESHIM_REASON_REUSEPORT
				  ? "another listener on this port accepts "
				    "its connections"
				  : "another process takes this port's "
				    "connections over");
		goto reject;
	}
	if (strangers_listen(ev->listen_id, local_port)) {
		log_info("cm: connect request refused: a socket that did not "
			 "join listens on this port too (SO_REUSEPORT)");
		why = ROCESHIM_REASON_REUSEPORT;
		goto reject;
	}
	if (too_many_pending(ev->listen_id)) {
		log_info("cm: connect request refused: the listener has as "
			 "many handshakes waiting for accept() as it takes");
		goto reject;
	}
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
	if (!source_is_requester(id, &hello.tcp_source)) {
		stats_malformed_input();
		log_info("cm: connect request refused: its TCP source is "
			 "another host");
		goto reject;
	}
	if (tcp_local(id, local_port, &local)) {
		log_info("cm: connect request refused: its address family is "
			 "not TCP's");
		goto reject;
	}
	/* The rings start at the client's size; each end caps their growth. */
	if (hello.ring.size > tc.ring_max) {
		log_info(
			"cm: connect request refused: the client's ring starts "
			"at %u KiB, above this end's ROCESHIM_RING_KB (%u)",
			hello.ring.size >> 10, tc.ring_max >> 10);
		goto reject;
	}
	if (!client_still_waits(id)) {
		log_debug("cm: connect request dropped: its client gave up "
			  "waiting for the answer");
		goto reject;
	}
	tc.ring_bytes = hello.ring.size;
	err = transport_create(id, &tc, &t);
	if (err) {
		handshake_log_no_transport("connect request refused", err);
		why = handshake_reason_of(err);
		goto reject;
	}
	err = transport_connect(t, &hello.ring);
	if (err)
		goto reject;
	p = calloc(1, sizeof(*p));
	opt = handshake_conn_options(cfg);
	opt.accepted_port = local_port;
	err = p ? conn_create(id, t, &opt, &c) : -ENOMEM;
	if (err) {
		log_info("cm: connect request refused: out of memory or fds");
		free(p);
		why = handshake_reason_of(err);
		goto reject;
	}
	transport_local_ring(t, &ring);
	wire_encode_accept(&ring, reply);
	param.private_data = reply;
	param.private_data_len = sizeof(reply);
	id->context = c;
	p->source = hello.tcp_source;
	p->local = local;
	p->port = local_port;
	p->listener = ev->listen_id;
	p->port_shared = ((const struct listener *)ev->listen_id->context)
				 ->reuseport_name >= 0;
	/* A prefork worker that accepts it finds it there. */
	share_pending_set(conn_slot(c), &hello.tcp_source, local_port);
	p->conn = c;
	p->expires_ms = clock_ms() + PENDING_TIMEOUT_MS;
	/*
	 * Pending before accept: the client connects TCP only after.  A late
	 * request that an accept() waits for is listed in the same step as
	 * it is seen, so that the accept() finds it.
	 */
	p->busy = true;
	pthread_mutex_lock(&pend.lock);
	late = hello.connected && claimed_locked(&hello.tcp_source, local_port);
	p->next = pend.list;
	pend.list = p;
	pthread_cond_broadcast(&pend.settled);
	pthread_mutex_unlock(&pend.lock);
	if (hello.connected && !late && !still_in_queue(p)) {
		log_debug("cm: second connect request refused: accept() took "
			  "its TCP connection already");
		unlist_pending(p);
		free(p);
		share_pending_settle(conn_slot(c), SHARE_PENDING_FAILED);
		rdmacm.reject(id, NULL, 0);
		conn_discard(c);
		return true;
	}
	conn_start(c);
	if (rdmacm.accept(id, &param)) {
		unlist_pending(p);
		log_info("cm: rdma_accept failed: %s", strerror(errno));
		free(p);
		conn_discard(c);
		return true;
	}
	pthread_mutex_lock(&pend.lock);
	p->busy = false;
	pthread_cond_broadcast(&pend.settled);
	pthread_mutex_unlock(&pend.lock);
	return true;
reject:
	if (t)
		transport_destroy(t);
	if (why) {
		/* The client records why: this end lacked the resources. */
		wire_encode_reject(why, refusal);
		rdmacm.reject(id, refusal, sizeof(refusal));
	} else {
		rdmacm.reject(id, NULL, 0);
	}
	return false;
}

/* Records how the handshake of c ended if accept() has not claimed it. */
static void settle(struct conn *c, enum pending_state state)
{
	struct pending *p;

	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p; p = p->next) {
		if (p->conn == c && p->state == PENDING_ESTABLISHED &&
		    state == PENDING_FAILED) {
			/* Its TCP connection may still be accepted. */
			if (p->expires_ms)
				p->expires_ms = clock_ms() + PENDING_GONE_MS;
			p->check_ms = 0;
			break;
		}
		if (p->conn == c && p->state == PENDING_ACCEPTED) {
			p->state = state;
			/* 0: its listener closed, it is being dropped. */
			if (state == PENDING_ESTABLISHED && p->expires_ms)
				p->expires_ms = -1;
			if (state == PENDING_ESTABLISHED) {
				p->established_ms = clock_ms();
				p->check_ms = p->established_ms +
					      STALL_FIRST_CHECK_MS;
			}
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

/* Under pend.lock: the pending that check was made for, if still listed. */
static struct pending *find_checked(const struct stall_check *check)
{
	struct pending *p;

	for (p = pend.list; p; p = p->next)
		if (p->conn == check->conn && p->state == PENDING_ESTABLISHED &&
		    endpoint_equal(&p->source, &check->source))
			return p;
	return NULL;
}

/* Under pend.lock: a full accept queue holds p's TCP connection back. */
static void let_go_of_rdma(struct pending *p)
{
	static bool told;

	if (!__atomic_exchange_n(&told, true, __ATOMIC_RELAXED))
		log_info("cm: a listener's full accept queue holds back the "
			 "TCP connection of a connection upgraded to RDMA: "
			 "such connections move to TCP, whose retransmissions "
			 "get them in as they would without roceshim");
	p->check_ms = 0;
	conn_drop_qp(p->conn, ROCESHIM_DOWNGRADE_ACCEPT_QUEUE);
}

/*
 * The TCP handshakes of the established pendings due for a look: at most
 * STALL_CHECKS_PER_TICK, asked of the kernel outside the lock.
 */
static void check_stalls(int64_t now)
{
	struct stall_check due[STALL_CHECKS_PER_TICK];
	unsigned int n = 0, i;
	struct pending *p;
	int stage;

	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p && n < STALL_CHECKS_PER_TICK; p = p->next) {
		if (p->state != PENDING_ESTABLISHED || !p->check_ms ||
		    now < p->check_ms)
			continue;
		p->check_ms = now + STALL_CHECK_MS;
		due[n].local = p->local;
		due[n].source = p->source;
		due[n++].conn = p->conn;
	}
	pthread_mutex_unlock(&pend.lock);
	for (i = 0; i < n; i++) {
		stage = tcp_diag_stage(&due[i].local, &due[i].source);
		/* Its ACK still to come: look again later. */
		if (stage == TCP_DIAG_HANDSHAKE)
			continue;
		pthread_mutex_lock(&pend.lock);
		p = find_checked(&due[i]);
		if (p && (stage == TCP_DIAG_HANDSHAKE_STALLED ||
			  (stage == TCP_DIAG_ABSENT &&
			   now - p->established_ms >= STALL_ABSENT_MS)))
			let_go_of_rdma(p);
		else if (p && stage != TCP_DIAG_ABSENT)
			p->check_ms = 0; /* queued, taken, or not to be known */
		pthread_mutex_unlock(&pend.lock);
	}
}

bool handshake_pending_tick(void)
{
	struct pending **pp = &pend.list, *p, *expired = NULL;
	int64_t now = clock_ms();
	bool left;

	pthread_mutex_lock(&pend.lock);
	while ((p = *pp)) {
		if (p->expires_ms >= 0 && now >= p->expires_ms) {
			*pp = p->next;
			p->next = expired;
			expired = p;
			continue;
		}
		pp = &p->next;
	}
	left = pend.list;
	pthread_mutex_unlock(&pend.lock);
	if (left)
		check_stalls(now);
	while ((p = expired)) {
		expired = p->next;
		if (p->state != PENDING_CLAIMED)
			log_info("cm: RDMA connection dropped: accept() never "
				 "took it, or its listener closed");
		conn_discard(p->conn);
		free(p);
	}
	return left;
}

/* The fewest handshakes a CM listener lets wait for the progress thread. */
#define LISTEN_BACKLOG_MIN 128

/*
 * An IPv6 listener with IPV6_V6ONLY takes no IPv4 connection, and an IPv4
 * listener may hold the same port (nginx's default "listen 80" beside
 * "listen [::]:80"): its CM listener must take none either, or it would
 * take the IPv4 one's handshakes.  1 for such a listener, else 0.
 */
static int v6_only(int fd, const struct sockaddr_storage *ss)
{
	int on = 0;
	socklen_t len = sizeof(on);

	if (ss->ss_family != AF_INET6 ||
	    real.getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, &len))
		return 0;
	return on ? 1 : 0;
}

/* The port of a bound IPv4 or IPv6 address. */
static uint16_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static enum roceshim_reason listen_now(const struct config *cfg,
				       struct sock *sock, int fd, int backlog,
				       bool port_shared)
{
	struct rdma_event_channel *ch = handshake_channel(cfg);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct listener *l;
	struct rdma_cm_id *id;
	struct stat st;
	int afonly;

	if (backlog < LISTEN_BACKLOG_MIN)
		backlog = LISTEN_BACKLOG_MIN;
	if (!ch)
		return ROCESHIM_REASON_UNSUPPORTED;
	if (real.getsockname(fd, (struct sockaddr *)&ss, &len))
		return ROCESHIM_REASON_RESOURCE;
	afonly = v6_only(fd, &ss);
	/* Dual-stack servers (Java's) bind IPv4 addresses so. */
	sockaddr_unmap_v4(&ss);
	l = calloc(1, sizeof(*l));
	if (!l)
		return ROCESHIM_REASON_RESOURCE;
	l->tag = &handshake_listener_tag;
	l->backlog = backlog;
	l->since_ms = clock_ms();
	l->reuseport_name = -1;
	if (port_shared) {
		if (fstat(fd, &st)) {
			free(l);
			return ROCESHIM_REASON_RESOURCE;
		}
		l->inode = (uint64_t)st.st_ino;
		l->reuseport_name = reuseport_hold(port_of(&ss), l->inode);
		if (l->reuseport_name < 0) {
			log_debug("fd %d: SO_REUSEPORT: the port is not this "
				  "process's to hold (%s)",
				  fd, strerror(-l->reuseport_name));
			free(l);
			return ROCESHIM_REASON_REUSEPORT;
		}
	}
	if (rdmacm.create_id(ch, &id, l, RDMA_PS_TCP)) {
		reuseport_release(l->reuseport_name);
		free(l);
		return ROCESHIM_REASON_RESOURCE;
	}
	if ((afonly &&
	     rdmacm.set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
			       &afonly, sizeof(afonly))) ||
	    rdmacm.bind_addr(id, (struct sockaddr *)&ss) ||
	    rdmacm.listen(id, backlog)) {
		int err = errno;

		log_debug("fd %d: no RDMA listener beside it (%s)", fd,
			  strerror(err));
		rdmacm.destroy_id(id);
		reuseport_release(l->reuseport_name);
		free(l);
		/*
		 * Another listener on the port, not listening yet when it was
		 * checked, holds it: it named the port first, and this one
		 * joins it after its own listen().
		 */
		return port_shared && err == EADDRINUSE
			       ? ROCESHIM_REASON_REUSEPORT
			       : ROCESHIM_REASON_RESOURCE;
	}
	sock->listen_since_ms = l->since_ms;
	__atomic_store_n(&sock->listen_id, id, __ATOMIC_RELEASE);
	return ROCESHIM_REASON_NONE;
}

enum roceshim_reason handshake_listen(const struct config *cfg,
				      struct sock *sock, int fd, int backlog,
				      bool port_shared)
{
	enum roceshim_reason reason;

	if (!handshake_begin())
		return ROCESHIM_REASON_UNSUPPORTED;
	reason = listen_now(cfg, sock, fd, backlog, port_shared);
	handshake_end();
	return reason;
}

/*
 * Whether a handshake a CM listener answered still waits for its end:
 * its request being decided, or the client's last word.
 */
bool handshake_server_busy(void)
{
	struct pending *p;
	bool busy = false;

	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p && !busy; p = p->next)
		busy = p->busy || p->state == PENDING_ACCEPTED;
	pthread_mutex_unlock(&pend.lock);
	return busy;
}

void handshake_unlisten(struct sock *sock, bool listener_stays)
{
	struct rdma_cm_id *id;
	struct pending *p;
	struct listener *l;
	bool port_shared;
	int64_t until;

	/*
	 * Before the id goes: an accept() on another thread that finds no
	 * id then finds the orphans (track_accept()).
	 */
	if (listener_stays) {
		__atomic_store_n(
			&sock->orphans_key,
			__atomic_load_n(&sock->listen_id, __ATOMIC_ACQUIRE),
			__ATOMIC_RELAXED);
		__atomic_store_n(&sock->orphans, true, __ATOMIC_RELEASE);
	}
	/* Taken once: threads may stop the same listener at once. */
	id = __atomic_exchange_n(&sock->listen_id, NULL, __ATOMIC_ACQ_REL);
	/* In a fork child the id is the parent's: leave it alone. */
	if (!id || !handshake_running())
		return;
	l = id->context;
	rdmacm.destroy_id(id);
	port_shared = l->reuseport_name >= 0;
	reuseport_release(l->reuseport_name);
	free(l);
	/*
	 * The kernel resets the TCP connections in its queue: these go too,
	 * on the progress thread, which may be serving their events now.
	 * A fork child (a prefork worker), or a worker spawned with the
	 * listener, may still hold the listening socket and accept them:
	 * after a fork or such a spawn they live on a while.  So they do
	 * when the listener itself stays, and only its CM listener goes,
	 * and when other processes' listeners share its port.
	 */
	until = conn_forked() || share_exported() || listener_stays ||
				port_shared
			? clock_ms() + PENDING_TIMEOUT_MS
			: 0;
	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p; p = p->next)
		if (p->listener == id &&
		    (p->expires_ms < 0 || p->expires_ms > until))
			p->expires_ms = until;
	pthread_mutex_unlock(&pend.lock);
	progress_wake();
}

void handshake_pending_each(const void *orphans_key,
			    void (*fn)(const struct roceshim_stats_endpoint *,
				       uint16_t, void *),
			    void *arg)
{
	struct pending *p;

	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p; p = p->next)
		if (p->listener == orphans_key && p->expires_ms != 0 &&
		    p->state == PENDING_ESTABLISHED)
			fn(&p->source, p->port, arg);
	pthread_mutex_unlock(&pend.lock);
}

static struct pending **find(const struct roceshim_stats_endpoint *peer,
			     uint16_t local_port)
{
	struct pending **pp, *p;

	for (pp = &pend.list; (p = *pp); pp = &p->next)
		if (p->port == local_port && p->expires_ms != 0 &&
		    p->state != PENDING_CLAIMED &&
		    endpoint_equal(&p->source, peer))
			return pp;
	return NULL;
}

/*
 * Another process accepted fd's connection on the CM, or this one let it
 * go before it was established here: it moves to TCP before its first
 * byte.
 */
static void move_unclaimed(const struct config *cfg, int fd,
			   enum roceshim_downgrade cause,
			   enum roceshim_downgrade *moved)
{
	int err;

	err = conn_move_unclaimed(fd, cause,
				  handshake_conn_options(cfg).move_timeout_ms);
	if (err) {
		log_warn("fd %d: an RDMA connection that %s took could not "
			 "move to TCP (%s): reset",
			 fd,
			 cause == ROCESHIM_DOWNGRADE_EXEC
				 ? "the process before an exec"
			 : cause == ROCESHIM_DOWNGRADE_FORK ? "a parent process"
							    : "this process",
			 strerror(-err));
		conn_reset_kernel(fd);
		return;
	}
	*moved = cause;
}

/*
 * Whether the first bytes that come on fd within timeout_ms are a move
 * marker: a plain client's own bytes, EOF, or silence are not.
 */
static bool marker_comes(int fd, int timeout_ms)
{
	struct wire_marker none = { 0 };
	uint8_t want[WIRE_MARKER_LEN], got[WIRE_MARKER_LEN];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct timespec tick = { 0, 1000000 };
	int64_t deadline = clock_ms() + timeout_ms;
	ssize_t n = 0;
	int left;

	/* Its magic and version lead: a prefix of them is enough to say no. */
	wire_encode_marker(&none, want);
	while ((left = clock_ms_left(deadline)) > 0) {
		if (real.poll(&pfd, 1, left) < 0 && errno != EINTR)
			return false;
		n = real.recv(fd, got, sizeof(got), MSG_PEEK | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return false;
		if (n > 0 && memcmp(got, want, n < 5 ? (size_t)n : 5))
			return false;
		if (n == (ssize_t)sizeof(got))
			return true;
		/* A part of it: the rest follows at once. */
		if (n > 0)
			nanosleep(&tick, NULL);
	}
	return false;
}

/*
 * The listener is inherited (a prefork worker's, or one that came over an
 * exec), and the pending connections are its owner's: a pending one is
 * claimed, and moves to TCP before its first byte.  One whose owner is
 * gone may be a stale entry that this client's source happens to match:
 * it moves only if its client's marker comes (a client whose server died
 * before accept() moves at once).
 */
static void take_inherited(const struct config *cfg,
			   const struct roceshim_stats_endpoint *peer,
			   uint16_t local_port, int fd,
			   enum roceshim_downgrade cause,
			   enum roceshim_downgrade *moved)
{
	bool orphan;

	if (share_pending_claim(peer, local_port, cfg->connect_timeout_ms,
				&orphan) != SHARE_PENDING_CLAIMED)
		return;
	if (orphan && !marker_comes(fd, (int)cfg->connect_timeout_ms)) {
		log_info("fd %d: the RDMA connection listed for this client is "
			 "gone with its server; plain TCP",
			 fd);
		return;
	}
	move_unclaimed(cfg, fd, cause, moved);
}

/*
 * One an exec handed over first, else one the share regions list, which
 * moves for cause.
 */
static void take_elsewhere(const struct config *cfg,
			   const struct roceshim_stats_endpoint *peer,
			   uint16_t local_port, int fd,
			   enum roceshim_downgrade cause,
			   enum roceshim_downgrade *moved)
{
	*moved = ROCESHIM_DOWNGRADE_NONE;
	if (exec_handover_claim(peer, local_port))
		move_unclaimed(cfg, fd, ROCESHIM_DOWNGRADE_EXEC, moved);
	else
		take_inherited(cfg, peer, local_port, fd, cause, moved);
}

void handshake_take_inherited(const struct config *cfg,
			      const struct roceshim_stats_endpoint *peer,
			      uint16_t local_port, int fd,
			      enum roceshim_downgrade *moved)
{
	take_elsewhere(cfg, peer, local_port, fd, ROCESHIM_DOWNGRADE_EXEC,
		       moved);
}

void handshake_take_joined(const struct config *cfg,
			   const struct roceshim_stats_endpoint *peer,
			   uint16_t local_port, int fd,
			   enum roceshim_downgrade *moved)
{
	take_elsewhere(cfg, peer, local_port, fd, ROCESHIM_DOWNGRADE_REUSEPORT,
		       moved);
}

void handshake_port_handed_over(uint16_t port)
{
	if (!port)
		return;
	pthread_mutex_lock(&pend.lock);
	mark_accepted_elsewhere_locked(port, ROCESHIM_REASON_HANDOFF);
	pthread_mutex_unlock(&pend.lock);
}

/* The owner: a descendant claimed c, or asks to move it. */
void handshake_on_share_request(void *ctx)
{
	struct conn *c = ctx;
	struct pending *p;

	if (share_pending_state(conn_slot(c)) != SHARE_PENDING_CLAIMED) {
		handshake_port_handed_over(conn_handed_over_port(c));
		conn_on_share_request(c);
		return;
	}
	pthread_mutex_lock(&pend.lock);
	for (p = pend.list; p; p = p->next) {
		if (p->conn == c) {
			p->state = PENDING_CLAIMED;
			p->expires_ms = clock_ms() + PENDING_CLAIMED_MS;
			mark_accepted_elsewhere_locked(
				p->port, p->port_shared
						 ? ROCESHIM_REASON_REUSEPORT
						 : ROCESHIM_REASON_PREFORK);
			break;
		}
	}
	pthread_mutex_unlock(&pend.lock);
}

/*
 * Under pend.lock, no request from peer listed: waits, at most until
 * deadline, for a late one.
 */
static void await_late_request(const struct roceshim_stats_endpoint *peer,
			       uint16_t local_port,
			       const struct timespec *deadline)
{
	struct claim k = { .source = *peer, .port = local_port }, **kp;

	k.next = pend.claims;
	pend.claims = &k;
	while (!find(peer, local_port) &&
	       !pthread_cond_clockwait(&pend.settled, &pend.lock,
				       CLOCK_MONOTONIC, deadline))
		;
	for (kp = &pend.claims; *kp != &k; kp = &(*kp)->next)
		;
	*kp = k.next;
}

struct conn *handshake_take_pending(const struct config *cfg,
				    int64_t listen_since_ms,
				    const struct roceshim_stats_endpoint *peer,
				    uint16_t local_port, int fd,
				    enum roceshim_downgrade *moved)
{
	struct timespec deadline, late;
	struct pending **pp, *p;
	struct conn *c = NULL;
	bool established = false, timed_out = false, answered = false;

	*moved = ROCESHIM_DOWNGRADE_NONE;
	if (exec_handover_claim(peer, local_port)) {
		move_unclaimed(cfg, fd, ROCESHIM_DOWNGRADE_EXEC, moved);
		return NULL;
	}
	if (!handshake_running()) {
		take_inherited(cfg, peer, local_port, fd,
			       ROCESHIM_DOWNGRADE_FORK, moved);
		return NULL;
	}

	clock_timespec_in(CLOCK_MONOTONIC, LATE_WAIT_MS, &late);
	pthread_mutex_lock(&pend.lock);
	if (listen_since_ms >= 0 && !find(peer, local_port) &&
	    clock_ms() - listen_since_ms < LATE_WINDOW_MS)
		await_late_request(peer, local_port, &late);
	/*
	 * From now: a late request was listed after its client's timer
	 * started, so this end waits at least as long as the client.
	 */
	clock_timespec_in(CLOCK_MONOTONIC,
			  cfg->connect_timeout_ms > SETTLE_MAX_MS
				  ? cfg->connect_timeout_ms
				  : SETTLE_MAX_MS,
			  &deadline);
	/*
	 * The client connects TCP as soon as its side is ESTABLISHED, so its
	 * SYN may overtake the RTU that makes this side ESTABLISHED: wait for
	 * the CM's outcome (SETTLE_MAX_MS), not for a timer that a loaded
	 * progress thread may outlast.
	 */
	for (;;) {
		pp = find(peer, local_port);
		if (!pp || (!(*pp)->busy &&
			    ((*pp)->state != PENDING_ACCEPTED || timed_out)))
			break;
		/* Its request is being decided: that ends soon, either way. */
		if ((*pp)->busy)
			pthread_cond_wait(&pend.settled, &pend.lock);
		else if (pthread_cond_clockwait(&pend.settled, &pend.lock,
						CLOCK_MONOTONIC, &deadline))
			timed_out = true;
	}
	if (pp) {
		p = *pp;
		*pp = p->next;
		c = p->conn;
		established = p->state == PENDING_ESTABLISHED &&
			      share_pending_take(conn_slot(c));
		answered = p->state == PENDING_ACCEPTED;
		free(p);
	}
	pthread_mutex_unlock(&pend.lock);
	if (c && !established) {
		conn_release(c, true);
		c = NULL;
		if (!answered) {
			log_info("cm: RDMA handshake not completed by the "
				 "client; connection stays on TCP");
		} else if (marker_comes(fd, handshake_conn_options(cfg)
						    .move_timeout_ms)) {
			log_info("cm: the client's side of an RDMA handshake "
				 "this end gave up on was up; the connection "
				 "moves to TCP");
			move_unclaimed(cfg, fd, ROCESHIM_DOWNGRADE_QP_ERROR,
				       moved);
		} else {
			log_info("cm: no outcome of an answered RDMA "
				 "handshake in time, nor the client's marker; "
				 "connection stays on TCP");
		}
	}
	return c;
}

void FORK_CODE handshake_server_fork_child(void)
{
	pthread_mutex_init(&pend.lock, NULL);
	pthread_cond_init(&pend.settled, NULL);
	/* Waits of the parent's threads, which are not here. */
	pend.claims = NULL;
}
