// SPDX-License-Identifier: MIT
/* Specification of what the kernel tells of one TCP connection at a
 * listener (src/tcp_diag.c), asked of the real kernel over loopback: a
 * handshake it holds (TCP_DEFER_ACCEPT holds the client's ACK as a full
 * accept queue does), a connection waiting for accept(), one accepted,
 * and none; and the sockets that listen on a port.  A handshake stalled
 * past a retransmission of its SYN-ACK needs a queue that overflows
 * between the SYN and the ACK, which loopback does not do on demand:
 * test-accept-queue.sh has it. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "endpoint.h"
#include "real.h"
#include "tcp_diag.h"

struct pair {
	int listener;
	int client;
	struct roceshim_stats_endpoint local;  /* the listener's side */
	struct roceshim_stats_endpoint remote; /* the client's */
};

static struct pair pair;

static void endpoint_of(int fd, bool peer, struct roceshim_stats_endpoint *ep)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	assert_int_equal(peer ? getpeername(fd, (struct sockaddr *)&ss, &len)
			      : getsockname(fd, (struct sockaddr *)&ss, &len),
			 0);
	assert_int_equal(
		endpoint_from_sockaddr(ep, (struct sockaddr *)&ss, len), 0);
}

/* A listener on loopback; defer_s > 0 sets TCP_DEFER_ACCEPT first. */
static void listen_on_loopback(int defer_s)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};

	pair.listener = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(pair.listener >= 0);
	if (defer_s)
		assert_int_equal(setsockopt(pair.listener, IPPROTO_TCP,
					    TCP_DEFER_ACCEPT, &defer_s,
					    sizeof(defer_s)),
				 0);
	assert_int_equal(
		bind(pair.listener, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(pair.listener, 8), 0);
	endpoint_of(pair.listener, false, &pair.local);
}

/* A client that connects and sends nothing. */
static void connect_client(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	pair.client = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(pair.client >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(pair.local.port);
	assert_int_equal(
		connect(pair.client, (struct sockaddr *)&sin, sizeof(sin)), 0);
	endpoint_of(pair.client, false, &pair.remote);
}

static int close_pair(void **state)
{
	(void)state;
	close(pair.client);
	close(pair.listener);
	return 0;
}

static void a_connection_accept_has_not_taken_is_queued(void **state)
{
	(void)state;
	listen_on_loopback(0);
	connect_client();
	assert_int_equal(tcp_diag_stage(&pair.local, &pair.remote),
			 TCP_DIAG_QUEUED);
}

static void an_accepted_connection_is_accepted(void **state)
{
	int fd;

	(void)state;
	listen_on_loopback(0);
	connect_client();
	fd = accept(pair.listener, NULL, NULL);
	assert_true(fd >= 0);
	assert_int_equal(tcp_diag_stage(&pair.local, &pair.remote),
			 TCP_DIAG_ACCEPTED);
	close(fd);
}

static void a_connection_that_never_came_is_absent(void **state)
{
	struct roceshim_stats_endpoint nobody;

	(void)state;
	listen_on_loopback(0);
	connect_client();
	nobody = pair.remote;
	nobody.port = pair.remote.port == 65535 ? 1 : pair.remote.port + 1;
	assert_int_equal(tcp_diag_stage(&pair.local, &nobody), TCP_DIAG_ABSENT);
}

static void a_handshake_the_listener_holds_is_in_its_handshake(void **state)
{
	(void)state;
	listen_on_loopback(5);
	connect_client();
	assert_int_equal(tcp_diag_stage(&pair.local, &pair.remote),
			 TCP_DIAG_HANDSHAKE);
}

static void a_port_where_nothing_listens_cannot_be_told(void **state)
{
	(void)state;
	listen_on_loopback(0);
	connect_client();
	close(pair.listener);
	pair.listener = -1;
	assert_int_equal(tcp_diag_stage(&pair.local, &pair.remote), -ENOENT);
}

static uint64_t known_inode;

static bool is_known(uint64_t inode)
{
	return inode == known_inode;
}

static void listeners_on_a_port_are_counted_but_the_one_excepted(void **state)
{
	struct stat st;

	(void)state;
	listen_on_loopback(0);
	assert_int_equal(fstat(pair.listener, &st), 0);
	assert_int_equal(tcp_diag_listeners(pair.local.port, 0, NULL), 1);
	assert_int_equal(
		tcp_diag_listeners(pair.local.port, (uint64_t)st.st_ino, NULL),
		0);
	/* A connection on the port is not a listener. */
	connect_client();
	assert_int_equal(tcp_diag_listeners(pair.local.port, 0, NULL), 1);
}

static void listeners_known_to_the_caller_are_not_counted(void **state)
{
	struct stat st;

	(void)state;
	listen_on_loopback(0);
	assert_int_equal(fstat(pair.listener, &st), 0);
	known_inode = (uint64_t)st.st_ino;
	assert_int_equal(tcp_diag_listeners(pair.local.port, 0, is_known), 0);
	known_inode = (uint64_t)st.st_ino + 1;
	assert_int_equal(tcp_diag_listeners(pair.local.port, 0, is_known), 1);
	connect_client();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(
			listeners_known_to_the_caller_are_not_counted,
			close_pair),
		cmocka_unit_test_teardown(
			listeners_on_a_port_are_counted_but_the_one_excepted,
			close_pair),
		cmocka_unit_test_teardown(
			a_connection_accept_has_not_taken_is_queued,
			close_pair),
		cmocka_unit_test_teardown(an_accepted_connection_is_accepted,
					  close_pair),
		cmocka_unit_test_teardown(
			a_connection_that_never_came_is_absent, close_pair),
		cmocka_unit_test_teardown(
			a_handshake_the_listener_holds_is_in_its_handshake,
			close_pair),
		cmocka_unit_test_teardown(
			a_port_where_nothing_listens_cannot_be_told,
			close_pair),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
