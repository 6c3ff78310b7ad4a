// SPDX-License-Identifier: MIT
/* Specification of TCP_INQ's control message after an upgraded recvmsg()
 * (upgraded_put_control()), as the kernel's tcp_recvmsg() and put_cmsg()
 * give it, and of the receive timestamp before it.  A connect that ended on TCP
 * counts the kernel socket's bytes: these tests use a loopback TCP pair, and a
 * sock without a connection. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "real.h"
#include "sock.h"
#include "upgraded.h"

struct pair {
	int reader;
	int writer;
	struct sock *sock; /* the reader's */
};

/* A loopback TCP pair whose reader has n bytes queued. */
static void pair_with_queued(struct pair *p, const char *bytes, int n)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int queued = 0, i;

	assert_true(listener >= 0);
	assert_int_equal(bind(listener, (struct sockaddr *)&addr, len), 0);
	assert_int_equal(listen(listener, 1), 0);
	assert_int_equal(getsockname(listener, (struct sockaddr *)&addr, &len),
			 0);
	p->writer = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(p->writer, (struct sockaddr *)&addr, len), 0);
	p->reader = accept(listener, NULL, NULL);
	assert_true(p->reader >= 0);
	close(listener);
	assert_int_equal(write(p->writer, bytes, n), n);
	for (i = 0; i < 500 && queued < n; i++) {
		assert_int_equal(ioctl(p->reader, FIONREAD, &queued), 0);
		if (queued < n)
			usleep(1000);
	}
	assert_int_equal(queued, n);
	p->sock = sock_new(AF_INET);
	assert_non_null(p->sock);
	p->sock->tcp_inq = 1;
	p->sock->rx_timestamp = 0;
}

static void pair_close(struct pair *p)
{
	close(p->reader);
	close(p->writer);
	sock_put(p->sock);
}

/*
 * upgraded_put_control() after a recvmsg() of one byte, into a control
 * buffer of room bytes (NULL for 0).
 */
static struct msghdr put_inq(struct pair *p, void *control, size_t room)
{
	struct msghdr msg = { .msg_control = room ? control : NULL,
			      .msg_controllen = room };

	upgraded_put_control(p->sock, p->reader, &msg, 1);
	return msg;
}

static int inq_of(const struct msghdr *msg)
{
	struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
	int inq;

	assert_non_null(cm);
	assert_int_equal(cm->cmsg_level, SOL_TCP);
	assert_int_equal(cm->cmsg_type, TCP_CM_INQ);
	assert_int_equal(cm->cmsg_len, CMSG_LEN(sizeof(int)));
	memcpy(&inq, CMSG_DATA(cm), sizeof(inq));
	return inq;
}

static void counts_the_bytes_still_queued(void **state)
{
	char control[64];
	struct pair p;
	struct msghdr msg;

	(void)state;
	pair_with_queued(&p, "0123456789", 10);
	msg = put_inq(&p, control, sizeof(control));
	assert_int_equal(inq_of(&msg), 10);
	assert_int_equal(msg.msg_controllen, CMSG_SPACE(sizeof(int)));
	assert_false(msg.msg_flags & MSG_CTRUNC);
	pair_close(&p);
}

static void counts_one_at_the_end_of_the_stream(void **state)
{
	char control[64], buf[4];
	struct pair p;
	struct msghdr msg;
	struct pollfd pfd;

	(void)state;
	pair_with_queued(&p, "abc", 3);
	assert_int_equal(read(p.reader, buf, sizeof(buf)), 3);
	assert_int_equal(shutdown(p.writer, SHUT_WR), 0);
	pfd = (struct pollfd){ .fd = p.reader, .events = POLLRDHUP };
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	msg = put_inq(&p, control, sizeof(control));
	assert_int_equal(inq_of(&msg), 1);
	pair_close(&p);
}

static void counts_nothing_when_the_option_is_off(void **state)
{
	char control[64];
	struct pair p;
	struct msghdr msg;

	(void)state;
	pair_with_queued(&p, "x", 1);
	p.sock->tcp_inq = 0;
	msg = put_inq(&p, control, sizeof(control));
	assert_int_equal(msg.msg_controllen, 0);
	assert_int_equal(msg.msg_flags, 0);
	pair_close(&p);
}

static void reads_the_option_from_the_kernel_once(void **state)
{
	char control[64];
	struct pair p;
	struct msghdr msg;
	int on = 1;

	(void)state;
	pair_with_queued(&p, "xy", 2);
	p.sock->tcp_inq = -1;
	assert_int_equal(
		setsockopt(p.reader, IPPROTO_TCP, TCP_INQ, &on, sizeof(on)), 0);
	msg = put_inq(&p, control, sizeof(control));
	assert_int_equal(inq_of(&msg), 2);
	assert_int_equal(p.sock->tcp_inq, 1);
	pair_close(&p);
}

static void without_a_buffer_is_truncated(void **state)
{
	struct pair p;
	struct msghdr msg;

	(void)state;
	pair_with_queued(&p, "x", 1);
	msg = put_inq(&p, NULL, 0);
	assert_int_equal(msg.msg_controllen, 0);
	assert_true(msg.msg_flags & MSG_CTRUNC);
	pair_close(&p);
}

static void a_receive_timestamp_comes_before_the_count(void **state)
{
	char control[64];
	struct timeval tv;
	struct cmsghdr *cm;
	struct msghdr msg;
	struct pair p;
	time_t before = time(NULL);

	(void)state;
	pair_with_queued(&p, "x", 1);
	p.sock->rx_timestamp = SO_TIMESTAMP_OLD;
	msg = put_inq(&p, control, sizeof(control));
	assert_false(msg.msg_flags & MSG_CTRUNC);
	assert_int_equal(msg.msg_controllen,
			 CMSG_SPACE(sizeof(tv)) + CMSG_SPACE(sizeof(int)));
	cm = CMSG_FIRSTHDR(&msg);
	assert_int_equal(cm->cmsg_level, SOL_SOCKET);
	assert_int_equal(cm->cmsg_type, SO_TIMESTAMP_OLD);
	assert_int_equal(cm->cmsg_len, CMSG_LEN(sizeof(tv)));
	memcpy(&tv, CMSG_DATA(cm), sizeof(tv));
	assert_true(tv.tv_sec >= before && tv.tv_sec <= time(NULL));
	cm = CMSG_NXTHDR(&msg, cm);
	assert_non_null(cm);
	assert_int_equal(cm->cmsg_type, TCP_CM_INQ);
	pair_close(&p);
}

static void a_read_of_nothing_has_no_timestamp(void **state)
{
	char control[64];
	struct msghdr msg = { .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct pair p;

	(void)state;
	pair_with_queued(&p, "x", 1);
	p.sock->rx_timestamp = SO_TIMESTAMPNS_NEW;
	p.sock->tcp_inq = 0;
	upgraded_put_control(p.sock, p.reader, &msg, 0);
	assert_int_equal(msg.msg_controllen, 0);
	assert_false(msg.msg_flags & MSG_CTRUNC);
	pair_close(&p);
}

static void without_room_for_a_header_is_truncated(void **state)
{
	char control[64];
	struct pair p;
	struct msghdr msg;

	(void)state;
	pair_with_queued(&p, "x", 1);
	msg = put_inq(&p, control, sizeof(struct cmsghdr) - 1);
	assert_int_equal(msg.msg_controllen, 0);
	assert_true(msg.msg_flags & MSG_CTRUNC);
	pair_close(&p);
}

static void without_room_for_the_count_keeps_the_header(void **state)
{
	char control[64];
	struct pair p;
	struct msghdr msg;
	struct cmsghdr *cm;

	(void)state;
	pair_with_queued(&p, "x", 1);
	msg = put_inq(&p, control, sizeof(struct cmsghdr));
	assert_int_equal(msg.msg_controllen, sizeof(struct cmsghdr));
	assert_true(msg.msg_flags & MSG_CTRUNC);
	cm = (struct cmsghdr *)control;
	assert_int_equal(cm->cmsg_len, sizeof(struct cmsghdr));
	assert_int_equal(cm->cmsg_type, TCP_CM_INQ);
	pair_close(&p);
}

static void without_room_for_the_padding_is_whole(void **state)
{
	char control[64];
	struct pair p;
	struct msghdr msg;

	(void)state;
	pair_with_queued(&p, "xyz", 3);
	msg = put_inq(&p, control, CMSG_LEN(sizeof(int)));
	assert_int_equal(msg.msg_controllen, CMSG_LEN(sizeof(int)));
	assert_false(msg.msg_flags & MSG_CTRUNC);
	assert_int_equal(inq_of(&msg), 3);
	pair_close(&p);
}

static void leaves_errno_alone(void **state)
{
	char control[64];
	struct pair p;

	(void)state;
	pair_with_queued(&p, "x", 1);
	p.sock->tcp_inq = -1;
	close(p.reader);
	p.reader = -1;
	errno = 12345;
	(void)put_inq(&p, control, sizeof(control));
	assert_int_equal(errno, 12345);
	pair_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(counts_the_bytes_still_queued),
		cmocka_unit_test(counts_one_at_the_end_of_the_stream),
		cmocka_unit_test(counts_nothing_when_the_option_is_off),
		cmocka_unit_test(reads_the_option_from_the_kernel_once),
		cmocka_unit_test(without_a_buffer_is_truncated),
		cmocka_unit_test(a_receive_timestamp_comes_before_the_count),
		cmocka_unit_test(a_read_of_nothing_has_no_timestamp),
		cmocka_unit_test(without_room_for_a_header_is_truncated),
		cmocka_unit_test(without_room_for_the_count_keeps_the_header),
		cmocka_unit_test(without_room_for_the_padding_is_whole),
		cmocka_unit_test(leaves_errno_alone),
	};

	real_init();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
