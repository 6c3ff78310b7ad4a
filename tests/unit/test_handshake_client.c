// SPDX-License-Identifier: MIT
/* Specification of the client handshake (src/handshake_client.c) as
 * handshake_connect() runs it: the CM events that take a dial from
 * address to route to request to an upgraded connection, each way it
 * ends on TCP and with which reason, the retries of an address that
 * times out, the hello it sends, the source its TCP socket is bound to,
 * and the negative cache of silent peers.  The CM is a test double that
 * answers each call with the event a test scripts (the `rdmacm` table);
 * the transport and the connection are doubles too (-Wl,--wrap,
 * handshake_doubles.h).  The TCP socket is a real one, which the dial
 * binds. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "config.h"
#include "endpoint.h"
#include "handshake_doubles.h"
#include "handshake.h"
#include "rdma_stack.h"
#include "real.h"
#include "transport.h"
#include "wire.h"

/* IB_CM_REJ_CONSUMER_DEFINED: a listener's own refusal. */
#define REJ_CONSUMER 28
/* No event at all: the peer is silent. */
#define SILENT	   ((enum rdma_cm_event_type) - 1)
#define SCRIPT_MAX 16

/* What the CM double answers to resolve_addr, resolve_route and connect,
 * in the order they are called. */
struct answer {
	enum rdma_cm_event_type event;
	int status;
	const uint8_t *data;
	uint8_t len;
};

static struct {
	struct answer script[SCRIPT_MAX];
	unsigned int scripted;
	unsigned int answered;
	struct rdma_cm_event pending[SCRIPT_MAX];
	unsigned int posted;
	unsigned int taken;
	struct rdma_cm_id *id;
	int create_id_rc;
	int migrate_rc;
	struct rdma_event_channel *migrated_to;
	unsigned int resolve_addr_calls;
	int resolve_timeouts[SCRIPT_MAX];
	struct sockaddr_storage resolve_src;
	bool resolve_src_given;
	struct sockaddr_storage resolve_dst;
	uint8_t hello[WIRE_HELLO_LEN];
	bool hello_sent;
	unsigned int channels_destroyed;
} cm;

/* The dial's own channel (readable while an event waits) and the shared
 * one of the progress thread. */
static int channel_pipe[2] = { -1, -1 };
static struct rdma_event_channel own_channel;
static struct rdma_event_channel shared_channel = { .fd = -1 };
static bool no_shared_channel;
static int open_channel_errno;

static struct config cfg;
static uint8_t accept_data[WIRE_ACCEPT_LEN];
static uint8_t reject_data[WIRE_REJECT_LEN];

static void answer(void)
{
	struct answer *a;
	struct rdma_cm_event *ev;

	assert_true(cm.answered < cm.scripted);
	a = &cm.script[cm.answered++];
	if (a->event == SILENT)
		return;
	ev = &cm.pending[cm.posted++];
	memset(ev, 0, sizeof(*ev));
	ev->id = cm.id;
	ev->event = a->event;
	ev->status = a->status;
	ev->param.conn.private_data = a->data;
	ev->param.conn.private_data_len = a->len;
	assert_int_equal(write(channel_pipe[1], "e", 1), 1);
}

static void script(enum rdma_cm_event_type event, int status,
		   const uint8_t *data, uint8_t len)
{
	assert_true(cm.scripted < SCRIPT_MAX);
	cm.script[cm.scripted++] = (struct answer){ event, status, data, len };
}

/* The usual way to an upgrade: address, route, then the server's accept. */
static void script_route(void)
{
	script(RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	script(RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
}

static void script_accept(void)
{
	script(RDMA_CM_EVENT_ESTABLISHED, 0, accept_data, sizeof(accept_data));
}

/* ---- the CM double ---------------------------------------------------- */

static int fake_create_id(struct rdma_event_channel *ch,
			  struct rdma_cm_id **out, void *context,
			  enum rdma_port_space ps)
{
	struct sockaddr_in *src;
	struct rdma_cm_id *id;

	(void)ps;
	if (cm.create_id_rc)
		return cm.create_id_rc;
	id = doubles_new_id(ch, context);
	/* The route's source: loopback, as rxe's address would be. */
	src = (struct sockaddr_in *)&id->route.addr.src_addr;
	src->sin_family = AF_INET;
	src->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cm.id = id;
	*out = id;
	return 0;
}

static int fake_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src,
			     struct sockaddr *dst, int timeout_ms)
{
	(void)id;
	cm.resolve_timeouts[cm.resolve_addr_calls++] = timeout_ms;
	cm.resolve_src_given = src != NULL;
	if (src)
		memcpy(&cm.resolve_src, src,
		       src->sa_family == AF_INET ? sizeof(struct sockaddr_in)
						 : sizeof(struct sockaddr_in6));
	memcpy(&cm.resolve_dst, dst,
	       dst->sa_family == AF_INET ? sizeof(struct sockaddr_in)
					 : sizeof(struct sockaddr_in6));
	answer();
	return 0;
}

static int fake_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	(void)id;
	assert_true(timeout_ms > 0);
	answer();
	return 0;
}

static int fake_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	(void)id;
	assert_int_equal(param->private_data_len, WIRE_HELLO_LEN);
	memcpy(cm.hello, param->private_data, WIRE_HELLO_LEN);
	cm.hello_sent = true;
	answer();
	return 0;
}

static int fake_get_cm_event(struct rdma_event_channel *ch,
			     struct rdma_cm_event **out)
{
	char byte;

	assert_ptr_equal(ch, &own_channel);
	assert_int_equal(read(ch->fd, &byte, 1), 1);
	assert_true(cm.taken < cm.posted);
	*out = &cm.pending[cm.taken++];
	return 0;
}

static int fake_ack_cm_event(struct rdma_cm_event *ev)
{
	(void)ev;
	return 0;
}

static const char *fake_event_str(enum rdma_cm_event_type event)
{
	(void)event;
	return "event";
}

static int fake_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *ch)
{
	(void)id;
	if (cm.migrate_rc)
		return cm.migrate_rc;
	cm.migrated_to = ch;
	return 0;
}

static void fake_destroy_event_channel(struct rdma_event_channel *ch)
{
	assert_ptr_equal(ch, &own_channel);
	cm.channels_destroyed++;
}

/* ---- the handshake module's other file ---------------------------- */

struct rdma_event_channel *__wrap_handshake_channel(const struct config *c);
struct rdma_event_channel *__wrap_handshake_channel(const struct config *c)
{
	(void)c;
	return no_shared_channel ? NULL : &shared_channel;
}

struct rdma_event_channel *__wrap_handshake_open_channel(bool refusable);
struct rdma_event_channel *__wrap_handshake_open_channel(bool refusable)
{
	assert_true(refusable);
	if (open_channel_errno) {
		errno = open_channel_errno;
		return NULL;
	}
	return &own_channel;
}

/* ---- fixtures ------------------------------------------------------ */

static int group_setup(void **state)
{
	struct transport_ring_info ring = { .addr = 8192,
					    .rkey = 9,
					    .size = DOUBLES_RING_SIZE };

	(void)state;
	real_init();
	rdmacm = (struct rdmacm_api){
		.create_id = fake_create_id,
		.destroy_id = doubles_destroy_id,
		.resolve_addr = fake_resolve_addr,
		.resolve_route = fake_resolve_route,
		.connect = fake_connect,
		.get_cm_event = fake_get_cm_event,
		.ack_cm_event = fake_ack_cm_event,
		.event_str = fake_event_str,
		.migrate_id = fake_migrate_id,
		.destroy_event_channel = fake_destroy_event_channel,
	};
	wire_encode_accept(&ring, accept_data);
	wire_encode_reject(ROCESHIM_REASON_RESOURCE, reject_data);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	memset(&cm, 0, sizeof(cm));
	doubles_reset();
	no_shared_channel = false;
	open_channel_errno = 0;
	config_defaults(&cfg);
	cfg.connect_timeout_ms = 300;
	assert_int_equal(pipe(channel_pipe), 0);
	own_channel.fd = channel_pipe[0];
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	doubles_reset();
	close(channel_pipe[0]);
	close(channel_pipe[1]);
	return 0;
}

/* The peer: loopback at port, which each test picks for its own, as the
 * negative cache outlives a test. */
static struct sockaddr_in peer_at(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port) };

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sin;
}

static int tcp_socket(int domain)
{
	int fd = socket(domain, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	return fd;
}

/* handshake_connect() from a new unbound IPv4 socket to loopback:port. */
static enum roceshim_reason dial(uint16_t port, unsigned int flags,
				 struct conn **out, bool *no_listener)
{
	struct sockaddr_in peer = peer_at(port);
	enum roceshim_reason reason;
	int fd = tcp_socket(AF_INET);

	reason = handshake_connect(&cfg, fd, (struct sockaddr *)&peer,
				   sizeof(peer), flags, out, no_listener);
	close(fd);
	return reason;
}

/* The dial ended on TCP and left nothing behind. */
static void assert_nothing_left(struct conn *out)
{
	assert_null(out);
	assert_int_equal(doubles.live_ids, 0);
	assert_int_equal(doubles.started, 0);
	assert_int_equal(cm.channels_destroyed, 1);
}

/* ---- the way to an upgrade ---------------------------------------- */

static void a_route_and_an_accept_upgrade_the_connection(void **state)
{
	struct conn *out = NULL;
	bool no_listener = true;

	(void)state;
	script_route();
	script_accept();
	assert_int_equal(dial(40001, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	assert_ptr_equal(out, doubles.last);
	assert_int_equal(doubles.started, 1);
	assert_false(no_listener);
	assert_int_equal(cm.answered, 3);
	doubles_destroy_id(doubles.last->id);
}

static void the_upgraded_id_moves_to_the_shared_channel(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script_accept();
	assert_int_equal(dial(40002, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	assert_ptr_equal(cm.migrated_to, &shared_channel);
	assert_ptr_equal(cm.id->context, doubles.last);
	assert_int_equal(cm.channels_destroyed, 1);
	doubles_destroy_id(doubles.last->id);
}

static void the_hello_names_the_sockets_source_and_ring(void **state)
{
	struct sockaddr_in peer = peer_at(40003), bound;
	socklen_t len = sizeof(bound);
	struct roceshim_stats_endpoint source;
	struct wire_hello hello;
	struct conn *out = NULL;
	bool no_listener;
	int fd = tcp_socket(AF_INET);

	(void)state;
	script_route();
	script_accept();
	assert_int_equal(handshake_connect(&cfg, fd, (struct sockaddr *)&peer,
					   sizeof(peer), 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	/* The socket is bound to the route's source, with a port. */
	assert_int_equal(getsockname(fd, (struct sockaddr *)&bound, &len), 0);
	assert_int_equal(bound.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_not_equal(bound.sin_port, 0);
	assert_int_equal(wire_decode_hello(cm.hello, sizeof(cm.hello), &hello),
			 0);
	assert_int_equal(
		endpoint_from_sockaddr(&source, (struct sockaddr *)&bound, len),
		0);
	assert_true(endpoint_equal(&hello.tcp_source, &source));
	assert_int_equal(hello.ring.size, DOUBLES_RING_SIZE);
	assert_false(hello.connected);
	close(fd);
	doubles_destroy_id(doubles.last->id);
}

static void a_second_request_says_its_tcp_connection_is_up(void **state)
{
	struct wire_hello hello;
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script_accept();
	assert_int_equal(dial(40004, HANDSHAKE_CONNECTED, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	assert_int_equal(wire_decode_hello(cm.hello, sizeof(cm.hello), &hello),
			 0);
	assert_true(hello.connected);
	doubles_destroy_id(doubles.last->id);
}

static void a_socket_the_program_bound_keeps_its_address(void **state)
{
	struct sockaddr_in peer = peer_at(40005), own = peer_at(0), after;
	socklen_t len = sizeof(own);
	struct conn *out = NULL;
	bool no_listener;
	int fd = tcp_socket(AF_INET);

	(void)state;
	assert_int_equal(bind(fd, (struct sockaddr *)&own, sizeof(own)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&own, &len), 0);
	script_route();
	script_accept();
	assert_int_equal(handshake_connect(&cfg, fd, (struct sockaddr *)&peer,
					   sizeof(peer), 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	/* The address resolves from the bound address, its port left out. */
	assert_true(cm.resolve_src_given);
	assert_int_equal(cm.resolve_src.ss_family, AF_INET);
	assert_int_equal(((struct sockaddr_in *)&cm.resolve_src)->sin_port, 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&after, &len), 0);
	assert_int_equal(after.sin_port, own.sin_port);
	close(fd);
	doubles_destroy_id(doubles.last->id);
}

static void an_unbound_socket_resolves_from_any_source(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script_accept();
	assert_int_equal(dial(40006, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	assert_false(cm.resolve_src_given);
	doubles_destroy_id(doubles.last->id);
}

static void a_v4_mapped_peer_resolves_in_its_ipv4_form(void **state)
{
	struct sockaddr_in6 peer = { .sin6_family = AF_INET6,
				     .sin6_port = htons(40007) };
	struct sockaddr_in *dst = (struct sockaddr_in *)&cm.resolve_dst;
	struct conn *out = NULL;
	bool no_listener;
	int fd = tcp_socket(AF_INET6);

	(void)state;
	assert_int_equal(
		inet_pton(AF_INET6, "::ffff:127.0.0.1", &peer.sin6_addr), 1);
	script_route();
	script_accept();
	assert_int_equal(handshake_connect(&cfg, fd, (struct sockaddr *)&peer,
					   sizeof(peer), 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	assert_int_equal(dst->sin_family, AF_INET);
	assert_int_equal(dst->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_equal(dst->sin_port, htons(40007));
	close(fd);
	doubles_destroy_id(doubles.last->id);
}

static void an_address_that_times_out_is_tried_again_twice_as_long(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script(RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT, NULL, 0);
	script(RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT, NULL, 0);
	script_route();
	script_accept();
	assert_int_equal(dial(40008, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	assert_int_equal(cm.resolve_addr_calls, 3);
	assert_int_equal(cm.resolve_timeouts[1], 2 * cm.resolve_timeouts[0]);
	assert_int_equal(cm.resolve_timeouts[2], 2 * cm.resolve_timeouts[1]);
	doubles_destroy_id(doubles.last->id);
}

/* ---- the ways it ends on TCP ---------------------------------------- */

static void a_rejection_by_no_listener_says_there_is_none(void **state)
{
	struct conn *out = NULL;
	bool no_listener = false;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_REJECTED, 8, NULL, 0);
	assert_int_equal(dial(40101, 0, &out, &no_listener),
			 ROCESHIM_REASON_PEER_REJECTED);
	assert_true(no_listener);
	assert_int_equal(doubles.discarded, 1);
	assert_nothing_left(out);
}

static void a_listeners_refusal_gives_its_reason(void **state)
{
	struct conn *out = NULL;
	bool no_listener = true;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_REJECTED, REJ_CONSUMER, reject_data,
	       sizeof(reject_data));
	assert_int_equal(dial(40102, 0, &out, &no_listener),
			 ROCESHIM_REASON_RESOURCE);
	assert_false(no_listener);
	assert_nothing_left(out);
}

static void a_refusal_with_a_reason_of_another_kind_is_a_rejection(void **state)
{
	static const uint8_t garbage[WIRE_REJECT_LEN] = { 1, 2, 3 };
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_REJECTED, REJ_CONSUMER, garbage, sizeof(garbage));
	assert_int_equal(dial(40103, 0, &out, &no_listener),
			 ROCESHIM_REASON_PEER_REJECTED);
	assert_nothing_left(out);
}

static void a_malformed_accept_is_refused_and_counted(void **state)
{
	static const uint8_t garbage[WIRE_ACCEPT_LEN] = { 0x52, 0x53 };
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_ESTABLISHED, 0, garbage, sizeof(garbage));
	assert_int_equal(dial(40104, 0, &out, &no_listener),
			 ROCESHIM_REASON_PEER_REJECTED);
	assert_int_equal(doubles.malformed, 1);
	assert_int_equal(doubles.discarded, 1);
	assert_nothing_left(out);
}

static void a_ring_this_end_cannot_take_is_refused_and_counted(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	doubles.connect_rc = -EINVAL;
	script_route();
	script_accept();
	assert_int_equal(dial(40105, 0, &out, &no_listener),
			 ROCESHIM_REASON_PEER_REJECTED);
	assert_int_equal(doubles.malformed, 1);
	assert_nothing_left(out);
}

static void an_address_error_means_no_route(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script(RDMA_CM_EVENT_ADDR_ERROR, -EHOSTUNREACH, NULL, 0);
	assert_int_equal(dial(40106, 0, &out, &no_listener),
			 ROCESHIM_REASON_NO_ROUTE);
	assert_false(cm.hello_sent);
	assert_nothing_left(out);
}

static void a_route_error_means_no_route(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script(RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
	script(RDMA_CM_EVENT_ROUTE_ERROR, -ENETUNREACH, NULL, 0);
	assert_int_equal(dial(40107, 0, &out, &no_listener),
			 ROCESHIM_REASON_NO_ROUTE);
	assert_nothing_left(out);
}

static void an_event_out_of_turn_ends_the_dial_as_silence(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
	assert_int_equal(dial(40108, 0, &out, &no_listener),
			 ROCESHIM_REASON_TIMEOUT);
	assert_nothing_left(out);
}

static void a_silent_peer_times_out_at_the_connect_timeout(void **state)
{
	struct conn *out = NULL;
	bool no_listener;
	int64_t start = clock_ms(), took;

	(void)state;
	script_route();
	script(SILENT, 0, NULL, 0);
	assert_int_equal(dial(40109, 0, &out, &no_listener),
			 ROCESHIM_REASON_TIMEOUT);
	took = clock_ms() - start;
	assert_true(took >= 250 && took < 2000);
	assert_int_equal(doubles.discarded, 1);
	assert_nothing_left(out);
}

static void a_silent_peer_goes_straight_to_tcp_next_time(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(SILENT, 0, NULL, 0);
	assert_int_equal(dial(40110, 0, &out, &no_listener),
			 ROCESHIM_REASON_TIMEOUT);
	assert_int_equal(dial(40110, 0, &out, &no_listener),
			 ROCESHIM_REASON_NEGATIVE_CACHE);
	assert_int_equal(cm.resolve_addr_calls, 1);
	assert_null(out);
}

static void a_refusing_peer_is_asked_again_next_time(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_REJECTED, 8, NULL, 0);
	script_route();
	script_accept();
	assert_int_equal(dial(40111, 0, &out, &no_listener),
			 ROCESHIM_REASON_PEER_REJECTED);
	assert_int_equal(dial(40111, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	doubles_destroy_id(doubles.last->id);
}

static void
a_port_that_refuses_once_tcp_is_up_goes_straight_to_tcp(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_REJECTED, 8, NULL, 0);
	assert_int_equal(dial(40114, HANDSHAKE_CONNECTED, &out, &no_listener),
			 ROCESHIM_REASON_PEER_REJECTED);
	assert_int_equal(dial(40114, 0, &out, &no_listener),
			 ROCESHIM_REASON_NEGATIVE_CACHE);
	assert_int_equal(cm.resolve_addr_calls, 1);
	assert_null(out);
}

static void
a_listeners_own_refusal_once_tcp_is_up_is_not_remembered(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_REJECTED, REJ_CONSUMER, reject_data,
	       sizeof(reject_data));
	script_route();
	script_accept();
	dial(40115, HANDSHAKE_CONNECTED, &out, &no_listener);
	assert_int_equal(dial(40115, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	doubles_destroy_id(doubles.last->id);
}

static void a_peer_heard_from_lately_is_slow_not_silent(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	script_route();
	script(RDMA_CM_EVENT_REJECTED, 8, NULL, 0);
	script_route();
	script(SILENT, 0, NULL, 0);
	script_route();
	script_accept();
	dial(40112, 0, &out, &no_listener);
	assert_int_equal(dial(40112, 0, &out, &no_listener),
			 ROCESHIM_REASON_TIMEOUT);
	assert_int_equal(dial(40112, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	doubles_destroy_id(doubles.last->id);
}

static void without_a_negative_cache_a_silent_peer_is_asked_again(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	cfg.negative_cache_s = 0;
	script_route();
	script(SILENT, 0, NULL, 0);
	script_route();
	script_accept();
	dial(40113, 0, &out, &no_listener);
	assert_int_equal(dial(40113, 0, &out, &no_listener),
			 ROCESHIM_REASON_NONE);
	doubles_destroy_id(doubles.last->id);
}

/* ---- resources ------------------------------------------------------ */

static void no_cm_in_this_process_means_unsupported(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	no_shared_channel = true;
	assert_int_equal(dial(40201, 0, &out, &no_listener),
			 ROCESHIM_REASON_UNSUPPORTED);
	assert_int_equal(cm.resolve_addr_calls, 0);
}

static void no_channel_at_the_fd_limit_means_fd_limit(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	open_channel_errno = EMFILE;
	assert_int_equal(dial(40202, 0, &out, &no_listener),
			 ROCESHIM_REASON_FD_LIMIT);
	assert_int_equal(cm.resolve_addr_calls, 0);
}

static void no_id_means_resource(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	cm.create_id_rc = -1;
	assert_int_equal(dial(40203, 0, &out, &no_listener),
			 ROCESHIM_REASON_RESOURCE);
	assert_nothing_left(out);
}

static void no_queue_pair_at_the_fd_limit_means_fd_limit(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	doubles.create_rc = -EMFILE;
	script_route();
	assert_int_equal(dial(40204, 0, &out, &no_listener),
			 ROCESHIM_REASON_FD_LIMIT);
	assert_false(cm.hello_sent);
	assert_nothing_left(out);
}

static void no_connection_leaves_no_transport_behind(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	doubles.conn_create_rc = -ENFILE;
	script_route();
	assert_int_equal(dial(40205, 0, &out, &no_listener),
			 ROCESHIM_REASON_FD_LIMIT);
	assert_int_equal(doubles.destroyed, 1);
	assert_false(cm.hello_sent);
	assert_nothing_left(out);
}

static void a_failed_move_to_the_shared_channel_discards_it(void **state)
{
	struct conn *out = NULL;
	bool no_listener;

	(void)state;
	cm.migrate_rc = -1;
	script_route();
	script_accept();
	assert_int_equal(dial(40206, 0, &out, &no_listener),
			 ROCESHIM_REASON_RESOURCE);
	assert_int_equal(doubles.discarded, 1);
	assert_nothing_left(out);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(a_route_and_an_accept_upgrade_the_connection),
		T(the_upgraded_id_moves_to_the_shared_channel),
		T(the_hello_names_the_sockets_source_and_ring),
		T(a_second_request_says_its_tcp_connection_is_up),
		T(a_socket_the_program_bound_keeps_its_address),
		T(an_unbound_socket_resolves_from_any_source),
		T(a_v4_mapped_peer_resolves_in_its_ipv4_form),
		T(an_address_that_times_out_is_tried_again_twice_as_long),
		T(a_rejection_by_no_listener_says_there_is_none),
		T(a_listeners_refusal_gives_its_reason),
		T(a_refusal_with_a_reason_of_another_kind_is_a_rejection),
		T(a_malformed_accept_is_refused_and_counted),
		T(a_ring_this_end_cannot_take_is_refused_and_counted),
		T(an_address_error_means_no_route),
		T(a_route_error_means_no_route),
		T(an_event_out_of_turn_ends_the_dial_as_silence),
		T(a_silent_peer_times_out_at_the_connect_timeout),
		T(a_silent_peer_goes_straight_to_tcp_next_time),
		T(a_refusing_peer_is_asked_again_next_time),
		T(a_peer_heard_from_lately_is_slow_not_silent),
		T(a_port_that_refuses_once_tcp_is_up_goes_straight_to_tcp),
		T(a_listeners_own_refusal_once_tcp_is_up_is_not_remembered),
		T(without_a_negative_cache_a_silent_peer_is_asked_again),
		T(no_cm_in_this_process_means_unsupported),
		T(no_channel_at_the_fd_limit_means_fd_limit),
		T(no_id_means_resource),
		T(no_queue_pair_at_the_fd_limit_means_fd_limit),
		T(no_connection_leaves_no_transport_behind),
		T(a_failed_move_to_the_shared_channel_discards_it),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
