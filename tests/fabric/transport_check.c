// SPDX-License-Identifier: MIT
/*
 * transport_check: the ring transport (src/transport.c) between two real
 * RDMA devices.  A server thread listens with rdma_cm on one address, a
 * client thread connects from the other, the rings are exchanged in the
 * CM private data (src/wire.c), and each test moves data and checks it byte for
 *byte.
 *
 *	transport_check SERVER_ADDR CLIENT_ADDR [PORT]
 *
 * Prints "ok NAME" or "FAIL NAME: why" per test, measured figures as
 * "# ..." lines, and "N passed, N failed" last; exits 0 iff all passed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "rdma_stack.h"
#include "real.h"
#include "transport.h"
#include "wire.h"

#define RING_BYTES    (256u << 10)
#define QUEUE_DEPTH   64
#define MAX_INLINE    64
#define WAIT_MS	      10000
#define CM_TIMEOUT_MS 5000

struct end {
	struct rdma_event_channel *channel;
	struct rdma_cm_id *listen_id;
	struct rdma_cm_id *id;
	struct transport *t;
};

static const struct transport_config config = {
	.ring_bytes = RING_BYTES,
	.ring_max = RING_BYTES,
	.send_depth = QUEUE_DEPTH,
	.recv_depth = QUEUE_DEPTH,
	.max_inline = MAX_INLINE,
};

static int passed, failed;

static void verdict(const char *name, const char *fmt, ...)
{
	va_list ap;

	if (!fmt) {
		printf("ok %s\n", name);
		passed++;
		return;
	}
	printf("FAIL %s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	failed++;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Byte i of stream `seed`: a pattern that catches reordering and loss. */
static uint8_t pattern(uint32_t seed, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;

	return (uint8_t)(x >> 29 ^ x >> 47);
}

static int expect_event(struct rdma_event_channel *ch,
			enum rdma_cm_event_type type,
			struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		return -errno;
	if (ev->event != type) {
		fprintf(stderr, "cm: got %s, wanted %s (status %d)\n",
			rdma_event_str(ev->event), rdma_event_str(type),
			ev->status);
		rdma_ack_cm_event(ev);
		return -EPROTO;
	}
	if (out)
		*out = ev;
	else
		rdma_ack_cm_event(ev);
	return 0;
}

static struct sockaddr_in addr_of(const char *text, uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port) };

	inet_pton(AF_INET, text, &sin.sin_addr);
	return sin;
}

struct server_args {
	struct end *end;
	const char *addr;
	uint16_t port;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state; /* 0 starting, 1 listening, <0 error */
	int result;
};

static void server_set_state(struct server_args *a, int state)
{
	pthread_mutex_lock(&a->lock);
	a->state = state;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

static int server_accept(struct server_args *a)
{
	struct end *s = a->end;
	struct sockaddr_in sin = addr_of(a->addr, a->port);
	struct transport_ring_info mine;
	struct rdma_conn_param param = { .rnr_retry_count = 7,
					 .retry_count = 7 };
	uint8_t reply[WIRE_ACCEPT_LEN];
	struct rdma_cm_event *ev;
	struct wire_hello hello;
	int ret;

	s->channel = rdma_create_event_channel();
	if (!s->channel ||
	    rdma_create_id(s->channel, &s->listen_id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(s->listen_id, (struct sockaddr *)&sin) ||
	    rdma_listen(s->listen_id, 4))
		return -errno;
	server_set_state(a, 1);
	ret = expect_event(s->channel, RDMA_CM_EVENT_CONNECT_REQUEST, &ev);
	if (ret)
		return ret;
	s->id = ev->id;
	ret = wire_decode_hello(ev->param.conn.private_data,
				ev->param.conn.private_data_len, &hello);
	rdma_ack_cm_event(ev);
	if (ret)
		return ret;
	ret = transport_create(s->id, &config, &s->t);
	if (ret)
		return ret;
	ret = transport_connect(s->t, &hello.ring);
	if (ret)
		return ret;
	transport_local_ring(s->t, &mine);
	wire_encode_accept(&mine, reply);
	param.private_data = reply;
	param.private_data_len = sizeof(reply);
	if (rdma_accept(s->id, &param))
		return -errno;
	return expect_event(s->channel, RDMA_CM_EVENT_ESTABLISHED, NULL);
}

static void *server_main(void *arg)
{
	struct server_args *a = arg;

	a->result = server_accept(a);
	if (a->result && a->state == 0)
		server_set_state(a, a->result);
	return NULL;
}

static int client_connect(struct end *c, const char *src, const char *dst,
			  uint16_t port)
{
	struct sockaddr_in from = addr_of(src, 0), to = addr_of(dst, port);
	struct rdma_conn_param param = { .rnr_retry_count = 7,
					 .retry_count = 7 };
	struct wire_hello hello = { .tcp_source = { .port = 1,
						    .family = AF_INET } };
	uint8_t request[WIRE_HELLO_LEN];
	struct transport_ring_info peer;
	struct rdma_cm_event *ev;
	int ret;

	c->channel = rdma_create_event_channel();
	if (!c->channel ||
	    rdma_create_id(c->channel, &c->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(c->id, (struct sockaddr *)&from,
			      (struct sockaddr *)&to, CM_TIMEOUT_MS))
		return -errno;
	ret = expect_event(c->channel, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
	if (ret)
		return ret;
	if (rdma_resolve_route(c->id, CM_TIMEOUT_MS))
		return -errno;
	ret = expect_event(c->channel, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
	if (ret)
		return ret;
	ret = transport_create(c->id, &config, &c->t);
	if (ret)
		return ret;
	transport_local_ring(c->t, &hello.ring);
	wire_encode_hello(&hello, request);
	param.private_data = request;
	param.private_data_len = sizeof(request);
	if (rdma_connect(c->id, &param))
		return -errno;
	ret = expect_event(c->channel, RDMA_CM_EVENT_ESTABLISHED, &ev);
	if (ret)
		return ret;
	ret = wire_decode_accept(ev->param.conn.private_data,
				 ev->param.conn.private_data_len, &peer);
	rdma_ack_cm_event(ev);
	return ret ? ret : transport_connect(c->t, &peer);
}

/*
 * Waits a little for a completion.  Several threads wait on one transport
 * here, and one event wakes one of them: the others find the new state
 * after their short timeout.  Fails only when the test's deadline passes.
 */
static int wait_a_little(struct transport *t, double deadline)
{
	int ret = transport_wait(t, 5);

	if (ret == -ETIMEDOUT)
		ret = 0;
	if (!ret && now_s() > deadline)
		ret = -ETIMEDOUT;
	return ret;
}

static ssize_t send_bytes(struct transport *t, const void *buf, size_t len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	bool corked;

	return transport_send(t, &iov, 1, 0, &corked);
}

/*
 * Reaps completions until every staged byte is posted and completed: what
 * the library's progress thread does for a sender that went quiet.
 */
static int drain(struct transport *t)
{
	double deadline = now_s() + WAIT_MS / 1000.0;
	int ret = 0;

	while (!ret && transport_writes_in_flight(t))
		ret = wait_a_little(t, deadline);
	return ret;
}

/* Sends all of len bytes of stream `seed`, waiting for credit. */
static int send_stream(struct transport *t, uint32_t seed, uint64_t len,
		       size_t chunk)
{
	static __thread uint8_t buf[1 << 20];
	double deadline = now_s() + WAIT_MS / 1000.0;
	uint64_t sent = 0;

	if (chunk > sizeof(buf))
		chunk = sizeof(buf);
	while (sent < len) {
		size_t want = len - sent < chunk ? len - sent : chunk;
		size_t i;
		ssize_t n;

		for (i = 0; i < want; i++)
			buf[i] = pattern(seed, sent + i);
		n = send_bytes(t, buf, want);
		if (n == -EAGAIN) {
			n = wait_a_little(t, deadline);
			if (n)
				return n;
			continue;
		}
		if (n < 0)
			return n;
		/* A partial send: regenerate from where it stopped. */
		sent += n;
		deadline = now_s() + WAIT_MS / 1000.0;
	}
	return 0;
}

/* Receives exactly len bytes of stream `seed`; -EBADMSG on a mismatch. */
static int recv_stream(struct transport *t, uint32_t seed, uint64_t len)
{
	static __thread uint8_t buf[1 << 16];
	double deadline = now_s() + WAIT_MS / 1000.0;
	uint64_t got = 0;

	while (got < len) {
		size_t want = len - got < sizeof(buf) ? len - got : sizeof(buf);
		ssize_t n = transport_recv(t, buf, want);
		ssize_t i;

		if (n == -EAGAIN) {
			n = wait_a_little(t, deadline);
			if (n)
				return n;
			continue;
		}
		if (n <= 0)
			return n ? n : -EPIPE;
		deadline = now_s() + WAIT_MS / 1000.0;
		for (i = 0; i < n; i++)
			if (buf[i] != pattern(seed, got + i))
				return -EBADMSG;
		got += n;
	}
	return 0;
}

struct stream_job {
	struct transport *t;
	uint32_t seed;
	uint64_t len;
	size_t chunk;
	bool sender;
	bool then_shutdown; /* a sender's FIN after its data */
	int result;
};

static void *stream_main(void *arg)
{
	struct stream_job *j = arg;

	if (j->sender)
		j->result = send_stream(j->t, j->seed, j->len, j->chunk) ?:
			    (j->then_shutdown ? transport_shutdown(j->t) : 0) ?:
			    drain(j->t);
	else
		j->result = recv_stream(j->t, j->seed, j->len);
	return NULL;
}

/* a sends len bytes to b while b sends len bytes to a, four threads. */
static int exchange(struct transport *a, struct transport *b, uint64_t len,
		    size_t chunk, uint32_t seed)
{
	struct stream_job jobs[4] = {
		{ a, seed, len, chunk, true, false, 0 },
		{ b, seed, len, chunk, false, false, 0 },
		{ b, seed + 1, len, chunk, true, false, 0 },
		{ a, seed + 1, len, chunk, false, false, 0 },
	};
	pthread_t th[4];
	int i, ret = 0;

	for (i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, stream_main, &jobs[i]);
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		if (jobs[i].result && !ret)
			ret = jobs[i].result;
	}
	return ret;
}

static void test_small_messages_arrive_in_order(struct end *c, struct end *s)
{
	int ret = exchange(c->t, s->t, 100000, 37, 1);

	verdict("small_messages_arrive_in_order", ret ? "%s" : NULL,
		strerror(-ret));
}

static void test_large_transfer_both_ways_is_exact(struct end *c, struct end *s)
{
	double t0 = now_s();
	int ret = exchange(c->t, s->t, 32u << 20, 1u << 20, 7);
	double dt = now_s() - t0;

	verdict("large_transfer_both_ways_is_exact", ret ? "%s" : NULL,
		strerror(-ret));
	if (!ret)
		printf("# 32 MiB each way at once, 1 MiB sends: %.1f MB/s "
		       "per direction\n",
		       (32u << 20) / dt / 1e6);
}

static void test_full_ring_gives_partial_then_eagain(struct end *c,
						     struct end *s)
{
	static uint8_t big[2 * RING_BYTES];
	uint64_t sent = 0;
	ssize_t n;
	size_t i;
	int ret;

	for (i = 0; i < sizeof(big); i++)
		big[i] = pattern(3, i);
	while ((n = send_bytes(c->t, big + sent, sizeof(big) - sent)) > 0)
		sent += n;
	if (n != -EAGAIN || sent == 0 || sent > RING_BYTES) {
		verdict("full_ring_gives_partial_then_eagain",
			"sent %llu then %zd", (unsigned long long)sent, n);
		return;
	}
	ret = recv_stream(s->t, 3, sent);
	verdict("full_ring_gives_partial_then_eagain", ret ? "%s" : NULL,
		strerror(-ret));
	printf("# ring of %u bytes accepted %llu before EAGAIN\n", RING_BYTES,
	       (unsigned long long)sent);
}

static void test_peek_does_not_consume(struct end *c, struct end *s)
{
	char a[6] = "", b[6] = "";
	ssize_t n;

	n = send_bytes(c->t, "hello", 5);
	while (n == 5 && !transport_readable(s->t))
		wait_a_little(s->t, now_s() + 10);
	if (n != 5 || transport_peek_at(s->t, a, 5, 0) != 5 ||
	    transport_recv(s->t, b, 5) != 5 || strcmp(a, "hello") ||
	    strcmp(b, "hello") || transport_recv(s->t, b, 5) != -EAGAIN)
		verdict("peek_does_not_consume", "peek '%s', read '%s'", a, b);
	else
		verdict("peek_does_not_consume", NULL);
}

static void test_pingpong_latency(struct end *c, struct end *s)
{
	enum {
		ITERS = 2000,
		SIZE = 64
	};
	double t0 = now_s();
	int i, ret = 0;

	for (i = 0; i < ITERS && !ret; i++) {
		ret = send_stream(c->t, 11, SIZE, SIZE) ?:
		      recv_stream(s->t, 11, SIZE) ?:
		      send_stream(s->t, 11, SIZE, SIZE) ?:
		      recv_stream(c->t, 11, SIZE);
	}
	verdict("pingpong_64_bytes", ret ? "%s" : NULL, strerror(-ret));
	if (!ret)
		printf("# 64 B ping-pong (one thread, waiting on completion "
		       "events): "
		       "%.1f us per one-way trip\n",
		       (now_s() - t0) / ITERS / 2 * 1e6);
}

/* EOF after the data, even right behind a burst of small (corked) sends. */
static void test_shutdown_gives_eof_after_data(struct end *c, struct end *s)
{
	struct stream_job sender = { c->t, 5, 20000, 1, true, true, 0 };
	struct transport_counters before, after;
	char buf[16];
	pthread_t th;
	ssize_t n = -1;
	int ret;

	transport_counters(c->t, &before);
	pthread_create(&th, NULL, stream_main, &sender);
	ret = recv_stream(s->t, 5, 20000);
	while (!ret && (n = transport_recv(s->t, buf, sizeof(buf))) == -EAGAIN)
		ret = wait_a_little(s->t, now_s() + 10);
	pthread_join(th, NULL);
	transport_counters(c->t, &after);
	if (!ret)
		ret = sender.result;
	if (ret || n != 0)
		verdict("shutdown_gives_eof_after_data", "ret %d, read %zd",
			ret, n);
	else if (send_bytes(c->t, "x", 1) != -EPIPE)
		verdict("shutdown_gives_eof_after_data",
			"send after shutdown did not give EPIPE");
	else
		verdict("shutdown_gives_eof_after_data", NULL);
	printf("# 20000 one-byte sends went out in %llu writes\n",
	       (unsigned long long)(after.tx_msgs - before.tx_msgs));
}

static void test_iovecs_go_out_as_one_write(struct end *c, struct end *s)
{
	static const char part[3][8] = { "head", "er and", " body" };
	struct iovec iov[3] = {
		{ (void *)part[0], 4 },
		{ (void *)part[1], 6 },
		{ (void *)part[2], 5 },
	};
	struct transport_counters before, after;
	char got[16] = "";
	bool corked;
	ssize_t n;
	int ret;

	transport_counters(c->t, &before);
	n = transport_send(c->t, iov, 3, 0, &corked);
	ret = drain(c->t);
	while (!ret && transport_available(s->t) < 15)
		ret = wait_a_little(s->t, now_s() + 10);
	transport_counters(c->t, &after);
	if (n != 15 || ret || transport_recv(s->t, got, 15) != 15 ||
	    strcmp(got, "header and body"))
		verdict("iovecs_go_out_as_one_write", "sent %zd, read '%s'", n,
			got);
	else if (after.tx_msgs - before.tx_msgs != 1)
		verdict("iovecs_go_out_as_one_write", "%llu writes",
			(unsigned long long)(after.tx_msgs - before.tx_msgs));
	else
		verdict("iovecs_go_out_as_one_write", NULL);
}

int main(int argc, char **argv)
{
	struct end client = { 0 }, server = { 0 };
	struct server_args sa = {
		.end = &server,
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
	};
	pthread_t server_thread;
	struct config cfg;
	int ret;

	if (argc < 3) {
		fprintf(stderr, "usage: %s SERVER_ADDR CLIENT_ADDR [PORT]\n",
			argv[0]);
		return 2;
	}
	real_init();
	config_defaults(&cfg);
	if (rdma_stack_load(&cfg)) {
		fprintf(stderr, "cannot load libibverbs and librdmacm\n");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	sa.addr = argv[1];
	sa.port = argc > 3 ? atoi(argv[3]) : 18600;
	pthread_create(&server_thread, NULL, server_main, &sa);
	pthread_mutex_lock(&sa.lock);
	while (!sa.state)
		pthread_cond_wait(&sa.cond, &sa.lock);
	pthread_mutex_unlock(&sa.lock);
	ret = sa.state < 0 ? sa.state
			   : client_connect(&client, argv[2], argv[1], sa.port);
	pthread_join(server_thread, NULL);
	if (!ret)
		ret = sa.result;
	verdict("rings_exchanged_and_connected", ret ? "%s" : NULL,
		strerror(-ret));
	if (ret)
		goto out;
	test_small_messages_arrive_in_order(&client, &server);
	test_peek_does_not_consume(&client, &server);
	test_full_ring_gives_partial_then_eagain(&client, &server);
	test_large_transfer_both_ways_is_exact(&client, &server);
	test_iovecs_go_out_as_one_write(&client, &server);
	test_pingpong_latency(&client, &server);
	test_shutdown_gives_eof_after_data(&client, &server);
out:
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
