// SPDX-License-Identifier: MIT
/* Specification of the options only kernel TCP has (src/sockopt.c): which
 * calls may turn one on, and what a kernel TCP socket reads back. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/net_tstamp.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "real.h"
#include "sockopt.h"

static int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	return fd;
}

static void set_int(int fd, int level, int name, int val)
{
	assert_int_equal(setsockopt(fd, level, name, &val, sizeof(val)), 0);
}

static void new_socket_has_none(void **state)
{
	int fd = tcp_socket();

	(void)state;
	assert_null(sockopt_tcp_only_on(fd, false));
	close(fd);
}

static void rcvlowat_above_one_is_tcp_only(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, SOL_SOCKET, SO_RCVLOWAT, 4);
	assert_string_equal(sockopt_tcp_only_on(fd, false), "SO_RCVLOWAT");
	close(fd);
}

static void rcvlowat_back_to_one_is_not(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, SOL_SOCKET, SO_RCVLOWAT, 4);
	set_int(fd, SOL_SOCKET, SO_RCVLOWAT, 0);
	assert_null(sockopt_tcp_only_on(fd, false));
	close(fd);
}

static void tcp_inq_is_not_tcp_only(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, IPPROTO_TCP, TCP_INQ, 1);
	assert_null(sockopt_tcp_only_on(fd, false));
	close(fd);
}

static void zerocopy_alone_is_not_tcp_only(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, SOL_SOCKET, SO_ZEROCOPY, 1);
	assert_null(sockopt_tcp_only_on(fd, false));
	close(fd);
}

static void new_form_of_timestamping_is_seen(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, SOL_SOCKET, SO_TIMESTAMPING_NEW, SOF_TIMESTAMPING_SOFTWARE);
	assert_non_null(sockopt_tcp_only_on(fd, false));
	close(fd);
}

static void receive_timestamps_are_not_tcp_only(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, SOL_SOCKET, SO_TIMESTAMP_OLD, 1);
	assert_null(sockopt_tcp_only_on(fd, false));
	set_int(fd, SOL_SOCKET, SO_TIMESTAMPNS_NEW, 1);
	assert_null(sockopt_tcp_only_on(fd, false));
	close(fd);
}

static void new_socket_has_no_receive_timestamp(void **state)
{
	int fd = tcp_socket();

	(void)state;
	assert_int_equal(sockopt_rx_timestamp_on(fd), 0);
	close(fd);
}

/* Each form turns the others off: the last one set is the one on. */
static void last_receive_timestamp_set_is_on(void **state)
{
	const int forms[] = { SO_TIMESTAMP_OLD, SO_TIMESTAMPNS_OLD,
			      SO_TIMESTAMP_NEW, SO_TIMESTAMPNS_NEW,
			      SO_TIMESTAMP_OLD };
	int fd = tcp_socket();
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		set_int(fd, SOL_SOCKET, forms[i], 1);
		assert_int_equal(sockopt_rx_timestamp_on(fd), forms[i]);
	}
	set_int(fd, SOL_SOCKET, SO_TIMESTAMP_OLD, 0);
	assert_int_equal(sockopt_rx_timestamp_on(fd), 0);
	close(fd);
}

static void receive_timestamp_options_are_known(void **state)
{
	(void)state;
	assert_true(sockopt_rx_timestamp(SOL_SOCKET, SO_TIMESTAMPNS_OLD));
	assert_true(sockopt_rx_timestamp(SOL_SOCKET, SO_TIMESTAMP_NEW));
	assert_false(sockopt_rx_timestamp(SOL_SOCKET, SO_TIMESTAMPING_OLD));
	assert_false(sockopt_rx_timestamp(IPPROTO_TCP, SO_TIMESTAMP_OLD));
}

static void async_is_tcp_only(void **state)
{
	int fd = tcp_socket();

	(void)state;
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC), 0);
	assert_string_equal(sockopt_tcp_only_on(fd, false), "O_ASYNC");
	close(fd);
}

static void listener_async_is_not(void **state)
{
	int fd = tcp_socket();

	(void)state;
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC), 0);
	assert_null(sockopt_tcp_only_on(fd, true));
	close(fd);
}

static void listener_rcvlowat_is(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, SOL_SOCKET, SO_RCVLOWAT, 4);
	assert_string_equal(sockopt_tcp_only_on(fd, true), "SO_RCVLOWAT");
	close(fd);
}

static void errno_is_kept(void **state)
{
	int fd = tcp_socket();

	(void)state;
	set_int(fd, SOL_SOCKET, SO_RCVLOWAT, 4);
	errno = EINTR;
	assert_non_null(sockopt_tcp_only_on(fd, false));
	assert_int_equal(errno, EINTR);
	close(fd);
}

static void not_a_socket_has_none(void **state)
{
	(void)state;
	assert_null(sockopt_tcp_only_on(-1, false));
}

static void only_those_options_may_turn_one_on(void **state)
{
	(void)state;
	assert_true(sockopt_tcp_only(SOL_SOCKET, SO_RCVLOWAT));
	assert_true(sockopt_tcp_only(SOL_SOCKET, SO_TIMESTAMPING_OLD));
	assert_true(sockopt_tcp_only(IPPROTO_TCP, TCP_FASTOPEN_CONNECT));
	assert_false(sockopt_tcp_only(IPPROTO_TCP, TCP_INQ));
	assert_false(sockopt_tcp_only(SOL_SOCKET, SO_ZEROCOPY));
	assert_false(sockopt_tcp_only(SOL_SOCKET, SO_SNDBUF));
	assert_false(sockopt_tcp_only(IPPROTO_TCP, TCP_NODELAY));
	assert_false(sockopt_tcp_only(IPPROTO_TCP, SO_RCVLOWAT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(new_socket_has_none),
		cmocka_unit_test(rcvlowat_above_one_is_tcp_only),
		cmocka_unit_test(rcvlowat_back_to_one_is_not),
		cmocka_unit_test(tcp_inq_is_not_tcp_only),
		cmocka_unit_test(zerocopy_alone_is_not_tcp_only),
		cmocka_unit_test(new_form_of_timestamping_is_seen),
		cmocka_unit_test(receive_timestamps_are_not_tcp_only),
		cmocka_unit_test(new_socket_has_no_receive_timestamp),
		cmocka_unit_test(last_receive_timestamp_set_is_on),
		cmocka_unit_test(receive_timestamp_options_are_known),
		cmocka_unit_test(async_is_tcp_only),
		cmocka_unit_test(listener_async_is_not),
		cmocka_unit_test(listener_rcvlowat_is),
		cmocka_unit_test(errno_is_kept),
		cmocka_unit_test(not_a_socket_has_none),
		cmocka_unit_test(only_those_options_may_turn_one_on),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
