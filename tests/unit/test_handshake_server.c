// SPDX-License-Identifier: MIT
/* Specification of the server handshake's answer to a connect request
 * (src/handshake_server.c, handshake_on_connect_request()): every check
 * a hostile or mistaken request meets before this end spends a queue
 * pair on it, the reason a refusal carries back, the accept that names
 * this end's ring, the cap on handshakes a listener lets wait for
 * accept(), and a second request whose TCP connection accept() may have
 * taken already.  The CM is a test double (the `rdmacm` table): a
 * listener is opened through handshake_listen() beside a real TCP
 * listener, and each request is an event the test makes.  The transport
 * and the connection (handshake_doubles.h), the rules, the share region
 * and the kernel's queue (tcp_diag) are doubles too (-Wl,--wrap). */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "endpoint.h"
#include "handshake_doubles.h"
#include "handshake_impl.h"
#include "rdma_stack.h"
#include "real.h"
#include "share.h"
#include "sock.h"
#include "tcp_diag.h"
#include "transport.h"
#include "wire.h"

/* The fewest handshakes a CM listener lets wait, twice its backlog. */
#define PENDING_CAP (2 * 128)

static struct {
	unsigned int accepted;
	uint8_t accept_data[WIRE_ACCEPT_LEN];
	unsigned int rejected;
	uint8_t reject_data[WIRE_REJECT_LEN];
	uint8_t reject_len;
	bool client_gave_up; /* its REJ came while the request waited */
	uint16_t port;	     /* the listener's, in network order */
} cm;

static struct rdma_event_channel shared_channel = { .fd = -1 };

/* The rules, the kernel's queue and the share region. */
static struct {
	enum roceshim_reason policy; /* policy_decide()'s answer */
	int stage;		     /* tcp_diag_stage()'s answer */
	unsigned int shared;	     /* share_pending_set() */
	unsigned int stage_asked;    /* tcp_diag_stage() */
	struct conn *dropped;	     /* conn_drop_qp()'s */
	enum roceshim_downgrade drop_cause;
} around;

static struct config cfg;
static struct sock listener;
static int listen_fd = -1;

/* ---- the CM double ---------------------------------------------------- */

static int fake_create_id(struct rdma_event_channel *ch,
			  struct rdma_cm_id **out, void *context,
			  enum rdma_port_space ps)
{
	(void)ps;
	*out = doubles_new_id(ch, context);
	return 0;
}

static int fake_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id;
	cm.port = ((struct sockaddr_in *)addr)->sin_port;
	return 0;
}

static int fake_listen(struct rdma_cm_id *id, int backlog)
{
	(void)id;
	(void)backlog;
	return 0;
}

static __be16 fake_get_src_port(struct rdma_cm_id *id)
{
	(void)id;
	return cm.port;
}

static int fake_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
	(void)id;
	assert_int_equal(param->private_data_len, WIRE_ACCEPT_LEN);
	memcpy(cm.accept_data, param->private_data, WIRE_ACCEPT_LEN);
	cm.accepted++;
	return 0;
}

static int fake_reject(struct rdma_cm_id *id, const void *data, uint8_t len)
{
	(void)id;
	assert_true(len <= sizeof(cm.reject_data));
	if (len)
		memcpy(cm.reject_data, data, len);
	cm.reject_len = len;
	cm.rejected++;
	return 0;
}

/* EINVAL once the client gave up: the CM holds its id past the request. */
static int fake_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *attr,
			     int *mask)
{
	(void)id;
	(void)attr;
	*mask = 0;
	if (cm.client_gave_up) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

static const char *fake_event_str(enum rdma_cm_event_type event)
{
	(void)event;
	return "event";
}

/* ---- the modules around the handshake --------------------------------- */

struct rdma_event_channel *__wrap_handshake_channel(const struct config *c);
struct rdma_event_channel *__wrap_handshake_channel(const struct config *c)
{
	(void)c;
	return &shared_channel;
}

bool __wrap_handshake_running(void);
bool __wrap_handshake_running(void)
{
	return true;
}

enum roceshim_reason
__wrap_policy_decide(const struct config *c,
		     const struct roceshim_stats_endpoint *peer,
		     uint16_t service_port);
enum roceshim_reason
__wrap_policy_decide(const struct config *c,
		     const struct roceshim_stats_endpoint *peer,
		     uint16_t service_port)
{
	(void)c;
	(void)peer;
	(void)service_port;
	return around.policy;
}

/* Closes the connection and its id. */
struct share_slot *__wrap_conn_slot(struct conn *c);
struct share_slot *__wrap_conn_slot(struct conn *c)
{
	(void)c;
	return NULL;
}

void __wrap_share_pending_set(struct share_slot *slot,
			      const struct roceshim_stats_endpoint *source,
			      uint16_t port);
void __wrap_share_pending_set(struct share_slot *slot,
			      const struct roceshim_stats_endpoint *source,
			      uint16_t port)
{
	(void)slot;
	(void)source;
	(void)port;
	around.shared++;
}

void __wrap_share_pending_settle(struct share_slot *slot,
				 enum share_pending state);
void __wrap_share_pending_settle(struct share_slot *slot,
				 enum share_pending state)
{
	(void)slot;
	(void)state;
}

int __wrap_tcp_diag_stage(const struct roceshim_stats_endpoint *local,
			  const struct roceshim_stats_endpoint *remote);
int __wrap_tcp_diag_stage(const struct roceshim_stats_endpoint *local,
			  const struct roceshim_stats_endpoint *remote)
{
	(void)local;
	(void)remote;
	around.stage_asked++;
	return around.stage;
}

void __wrap_conn_drop_qp(struct conn *c, enum roceshim_downgrade cause);
void __wrap_conn_drop_qp(struct conn *c, enum roceshim_downgrade cause)
{
	around.dropped = c;
	around.drop_cause = cause;
}

void __wrap_progress_wake(void);
void __wrap_progress_wake(void)
{
}

/* ---- fixtures ------------------------------------------------------ */

static int group_setup(void **state)
{
	(void)state;
	real_init();
	rdmacm = (struct rdmacm_api){
		.create_id = fake_create_id,
		.destroy_id = doubles_destroy_id,
		.bind_addr = fake_bind_addr,
		.listen = fake_listen,
		.get_src_port = fake_get_src_port,
		.accept = fake_accept,
		.reject = fake_reject,
		.init_qp_attr = fake_init_qp_attr,
		.event_str = fake_event_str,
	};
	return 0;
}

/* A TCP listener on loopback and its CM listener beside it. */
static int setup(void **state)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	(void)state;
	memset(&cm, 0, sizeof(cm));
	doubles_reset();
	memset(&around, 0, sizeof(around));
	memset(&listener, 0, sizeof(listener));
	config_defaults(&cfg);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(listen_fd >= 0);
	assert_int_equal(bind(listen_fd, (struct sockaddr *)&sin, sizeof(sin)),
			 0);
	assert_int_equal(listen(listen_fd, 8), 0);
	assert_int_equal(handshake_listen(&cfg, &listener, listen_fd, 8, false),
			 ROCESHIM_REASON_NONE);
	assert_non_null(listener.listen_id);
	assert_int_not_equal(cm.port, 0);
	return 0;
}

/* The listener goes, and with it what it accepted on the CM. */
static int teardown(void **state)
{
	(void)state;
	handshake_unlisten(&listener, false);
	handshake_pending_tick();
	close(listen_fd);
	assert_int_equal(doubles.live_ids, 0);
	doubles_reset();
	return 0;
}

static struct wire_hello hello_from(const char *tcp_source, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port) };
	struct wire_hello hello = {
		.ring = { .addr = 8192, .rkey = 9, .size = DOUBLES_RING_SIZE },
	};

	assert_int_equal(inet_pton(AF_INET, tcp_source, &sin.sin_addr), 1);
	assert_int_equal(endpoint_from_sockaddr(&hello.tcp_source,
						(struct sockaddr *)&sin,
						sizeof(sin)),
			 0);
	return hello;
}

/*
 * A request to the listener's address from the client whose CM address
 * is from: whether this end
 * accepted it.  A refused request's id stays the CM's (here, the test's);
 * a taken one is its conn's.
 */
static bool request(const char *from, const void *data, uint8_t len)
{
	struct rdma_cm_event ev = { .event = RDMA_CM_EVENT_CONNECT_REQUEST };
	unsigned int accepted = cm.accepted;
	struct sockaddr_in *local, *peer;
	struct rdma_cm_id *id;

	assert_int_equal(fake_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	local = (struct sockaddr_in *)&id->route.addr.src_addr;
	local->sin_family = AF_INET;
	local->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	peer = (struct sockaddr_in *)&id->route.addr.dst_addr;
	peer->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, from, &peer->sin_addr), 1);
	ev.id = id;
	ev.listen_id = listener.listen_id;
	ev.param.conn.private_data = data;
	ev.param.conn.private_data_len = len;
	if (!handshake_on_connect_request(&cfg, &ev))
		doubles_destroy_id(id);
	return cm.accepted > accepted;
}

static bool send_hello(const struct wire_hello *hello)
{
	uint8_t data[WIRE_HELLO_LEN];

	wire_encode_hello(hello, data);
	return request("127.0.0.1", data, sizeof(data));
}

/* The refusal carried a reason for the client. */
static enum roceshim_reason refusal_reason(void)
{
	enum roceshim_reason reason;

	assert_int_equal(cm.reject_len, WIRE_REJECT_LEN);
	assert_int_equal(
		wire_decode_reject(cm.reject_data, cm.reject_len, &reason), 0);
	return reason;
}

/* ---- accepted ---------------------------------------------------------- */

static void a_well_formed_request_is_accepted_with_this_ends_ring(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50001);
	struct transport_ring_info ring;

	(void)state;
	assert_true(send_hello(&hello));
	assert_int_equal(cm.accepted, 1);
	assert_int_equal(cm.rejected, 0);
	/* The rings start at the client's size. */
	assert_int_equal(doubles.ring_bytes, DOUBLES_RING_SIZE);
	assert_int_equal(wire_decode_accept(cm.accept_data,
					    sizeof(cm.accept_data), &ring),
			 0);
	assert_int_equal(ring.size, DOUBLES_RING_SIZE);
	assert_int_equal(ring.rkey, DOUBLES_RING_RKEY);
}

static void an_accepted_request_waits_for_accept_as_a_started_conn(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50002);

	(void)state;
	assert_true(send_hello(&hello));
	assert_int_equal(doubles.started, 1);
	assert_int_equal(around.shared, 1);
	assert_int_equal(doubles.discarded, 0);
	assert_true(handshake_server_busy());
}

static void a_second_request_whose_connection_waits_is_accepted(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50003);

	(void)state;
	hello.connected = true;
	around.stage = TCP_DIAG_QUEUED;
	assert_true(send_hello(&hello));
	assert_int_equal(cm.accepted, 1);
}

/* ---- a TCP handshake stalled in a full accept queue ------------------- */

/* Longer than the first look at an established one's TCP handshake. */
#define FIRST_LOOK_WAIT_MS 700
/* Longer than the time between two looks. */
#define NEXT_LOOK_WAIT_MS 400
/*
 * Longer than a TCP connection may be missing (its SYN dropped by a full
 * queue, or answered by a cookie whose ACK the queue dropped).
 */
#define ABSENT_WAIT_MS 3300

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* An accepted request whose client's side is established: its conn. */
static struct conn *established_pending(uint16_t port)
{
	struct wire_hello hello = hello_from("127.0.0.1", port);
	struct conn *c;

	assert_true(send_hello(&hello));
	c = doubles.last;
	handshake_on_established(c);
	return c;
}

static void a_stalled_tcp_handshake_lets_the_queue_pair_go(void **state)
{
	struct conn *c = established_pending(50011);

	(void)state;
	around.stage = TCP_DIAG_HANDSHAKE_STALLED;
	sleep_ms(FIRST_LOOK_WAIT_MS);
	handshake_pending_tick();
	assert_ptr_equal(around.dropped, c);
	assert_int_equal(around.drop_cause, ROCESHIM_DOWNGRADE_ACCEPT_QUEUE);
	/* accept() still finds it: its marker comes over TCP. */
	assert_int_equal(doubles.discarded, 0);
}

static void a_tcp_handshake_is_not_looked_at_before_it_had_time(void **state)
{
	(void)state;
	established_pending(50012);
	around.stage = TCP_DIAG_HANDSHAKE_STALLED;
	handshake_pending_tick();
	assert_int_equal(around.stage_asked, 0);
	assert_null(around.dropped);
}

static void a_connection_waiting_in_the_queue_keeps_its_queue_pair(void **state)
{
	(void)state;
	established_pending(50013);
	around.stage = TCP_DIAG_QUEUED;
	sleep_ms(FIRST_LOOK_WAIT_MS);
	handshake_pending_tick();
	assert_int_equal(around.stage_asked, 1);
	/* Queued for good: it is not looked at again. */
	sleep_ms(NEXT_LOOK_WAIT_MS);
	handshake_pending_tick();
	assert_int_equal(around.stage_asked, 1);
	assert_null(around.dropped);
}

static void a_tcp_handshake_not_there_yet_is_looked_at_again(void **state)
{
	struct conn *c = established_pending(50014);

	(void)state;
	around.stage = TCP_DIAG_ABSENT;
	sleep_ms(FIRST_LOOK_WAIT_MS);
	handshake_pending_tick();
	assert_null(around.dropped);
	around.stage = TCP_DIAG_HANDSHAKE_STALLED;
	sleep_ms(NEXT_LOOK_WAIT_MS);
	handshake_pending_tick();
	assert_ptr_equal(around.dropped, c);
}

static void
a_tcp_connection_not_seen_for_long_lets_the_queue_pair_go(void **state)
{
	struct conn *c = established_pending(50016);

	(void)state;
	around.stage = TCP_DIAG_ABSENT;
	sleep_ms(ABSENT_WAIT_MS);
	handshake_pending_tick();
	assert_ptr_equal(around.dropped, c);
	assert_int_equal(around.drop_cause, ROCESHIM_DOWNGRADE_ACCEPT_QUEUE);
}

static void a_connection_whose_queue_pair_failed_is_not_looked_at(void **state)
{
	struct conn *c = established_pending(50015);

	(void)state;
	handshake_on_failed(c);
	around.stage = TCP_DIAG_HANDSHAKE_STALLED;
	sleep_ms(FIRST_LOOK_WAIT_MS);
	handshake_pending_tick();
	assert_int_equal(around.stage_asked, 0);
	assert_null(around.dropped);
}

/* ---- refused ---------------------------------------------------------- */

static void a_malformed_request_is_refused_and_counted(void **state)
{
	static const uint8_t garbage[WIRE_HELLO_LEN] = { 0x52, 0x53, 0x48 };

	(void)state;
	assert_false(request("127.0.0.1", garbage, sizeof(garbage)));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(cm.reject_len, 0);
	assert_int_equal(doubles.malformed, 1);
	assert_int_equal(doubles.conns, 0);
}

static void a_request_without_private_data_is_refused(void **state)
{
	(void)state;
	assert_false(request("127.0.0.1", NULL, 0));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(doubles.malformed, 1);
}

static void a_request_naming_another_hosts_tcp_source_is_refused(void **state)
{
	struct wire_hello hello = hello_from("10.9.9.9", 50004);

	(void)state;
	assert_false(send_hello(&hello));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(doubles.malformed, 1);
	assert_int_equal(doubles.conns, 0);
}

static void a_peer_this_ends_rules_exclude_is_refused(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50005);

	(void)state;
	around.policy = ROCESHIM_REASON_EXCLUDED;
	assert_false(send_hello(&hello));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(cm.reject_len, 0);
	assert_int_equal(doubles.malformed, 0);
}

static void a_ring_above_this_ends_maximum_is_refused(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50006);

	(void)state;
	cfg.ring_kb = 32;
	cfg.ring_start_kb = 4;
	assert_false(send_hello(&hello));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(doubles.conns, 0);
}

static void no_queue_pair_refuses_with_the_reason(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50007);

	(void)state;
	doubles.create_rc = -EMFILE;
	assert_false(send_hello(&hello));
	assert_int_equal(refusal_reason(), ROCESHIM_REASON_FD_LIMIT);
}

static void
a_request_whose_client_gave_up_is_refused_without_rings(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50009);

	(void)state;
	cm.client_gave_up = true;
	assert_false(send_hello(&hello));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(doubles.ring_bytes, 0);
	assert_int_equal(doubles.conns, 0);
	assert_int_equal(cm.accepted, 0);
}

static void a_ring_the_transport_cannot_take_is_refused(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50008);

	(void)state;
	doubles.connect_rc = -EINVAL;
	assert_false(send_hello(&hello));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(doubles.destroyed, 1);
	assert_int_equal(doubles.conns, 0);
}

static void
a_second_request_whose_connection_was_accepted_is_refused(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50009);

	(void)state;
	hello.connected = true;
	around.stage = TCP_DIAG_ACCEPTED;
	assert_false(send_hello(&hello));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(cm.accepted, 0);
	assert_int_equal(doubles.discarded, 1);
	assert_false(handshake_server_busy());
}

static void a_listener_lets_twice_its_backlog_wait_for_accept(void **state)
{
	struct wire_hello hello = hello_from("127.0.0.1", 50010);
	unsigned int i;

	(void)state;
	for (i = 0; i < PENDING_CAP; i++)
		assert_true(send_hello(&hello));
	assert_false(send_hello(&hello));
	assert_int_equal(cm.rejected, 1);
	assert_int_equal(doubles.conns, PENDING_CAP);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(a_well_formed_request_is_accepted_with_this_ends_ring),
		T(an_accepted_request_waits_for_accept_as_a_started_conn),
		T(a_second_request_whose_connection_waits_is_accepted),
		T(a_malformed_request_is_refused_and_counted),
		T(a_request_without_private_data_is_refused),
		T(a_request_naming_another_hosts_tcp_source_is_refused),
		T(a_peer_this_ends_rules_exclude_is_refused),
		T(a_ring_above_this_ends_maximum_is_refused),
		T(no_queue_pair_refuses_with_the_reason),
		T(a_request_whose_client_gave_up_is_refused_without_rings),
		T(a_ring_the_transport_cannot_take_is_refused),
		T(a_second_request_whose_connection_was_accepted_is_refused),
		T(a_listener_lets_twice_its_backlog_wait_for_accept),
		T(a_stalled_tcp_handshake_lets_the_queue_pair_go),
		T(a_tcp_handshake_is_not_looked_at_before_it_had_time),
		T(a_connection_waiting_in_the_queue_keeps_its_queue_pair),
		T(a_tcp_handshake_not_there_yet_is_looked_at_again),
		T(a_tcp_connection_not_seen_for_long_lets_the_queue_pair_go),
		T(a_connection_whose_queue_pair_failed_is_not_looked_at),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
