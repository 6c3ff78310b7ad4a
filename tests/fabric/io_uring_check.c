// SPDX-License-Identifier: MIT
/*
 * A process that sets up io_uring and reads and writes its connections
 * through the ring: the kernel does those reads and writes on the socket
 * itself, so whatever the connection carried before, and everything after,
 * must be on the kernel socket.  Each connection's client end is driven
 * by a thread with plain send() and recv(), its server end by the ring
 * (IORING_OP_RECV, IORING_OP_SEND, IORING_OP_READ).
 *
 *     io_uring_check ADDR STATS_JSON liburing|syscall
 *
 * sets the ring up with io_uring_queue_init(), or with
 * syscall(SYS_io_uring_setup), while a client is in the middle of a send
 * its server has not read yet; the server's side then reads and writes
 * through the ring, or with system calls made through syscall() (read,
 * recvfrom, sendto), which the kernel serves on the socket as it does
 * the ring's.  Prints "ok
 * NAME" or "FAIL NAME: why" per behaviour, and writes roceshim-stat's
 * JSON of this process (when ROCESHIM_STAT is set) to STATS_JSON.
 */
#include <errno.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pair_check.h"

#define STREAM_BYTES (256 << 10)
/* How long a client's send waits for its server before the ring. */
#define SEND_AHEAD_US 300000
#define TAIL	      "tail!"

struct client {
	int fd;
	uint8_t seed;
	const char *failure; /* NULL: every byte as expected */
};

static uint8_t pattern_byte(uint64_t i, uint8_t seed)
{
	return (uint8_t)(i * 131 + seed);
}

static void fill_pattern(uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pattern_byte(i, seed);
}

static bool is_pattern(const uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != pattern_byte(i, seed))
			return false;
	return true;
}

static bool send_all(int fd, const uint8_t *buf, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			return false;
		off += (size_t)n;
	}
	return true;
}

static bool recv_all(int fd, uint8_t *buf, size_t len)
{
	size_t off = 0;
	ssize_t n;

	while (off < len) {
		n = recv(fd, buf + off, len - off, 0);
		if (n <= 0)
			return false;
		off += (size_t)n;
	}
	return true;
}

/*
 * The client's stream, then the server's, then the tail, then EOF: each
 * checked byte for byte.  One client runs at a time.
 */
static void *client_run(void *arg)
{
	struct client *c = arg;
	static uint8_t buf[STREAM_BYTES];
	char end;

	fill_pattern(buf, sizeof(buf), c->seed);
	if (!send_all(c->fd, buf, sizeof(buf))) {
		c->failure = "its send failed";
		return NULL;
	}
	memset(buf, 0, sizeof(buf));
	if (!recv_all(c->fd, buf, sizeof(buf)) ||
	    !is_pattern(buf, sizeof(buf), c->seed + 1)) {
		c->failure = "the server's stream differs";
		return NULL;
	}
	if (!send_all(c->fd, (const uint8_t *)TAIL, strlen(TAIL))) {
		c->failure = "its tail failed";
		return NULL;
	}
	if (recv(c->fd, &end, 1, 0) != 0)
		c->failure = "no EOF after the server's close";
	return NULL;
}

/*
 * How the server's side reads and writes: through a ring, or (having set
 * one up with syscall(), which is what is checked) with system calls made
 * through syscall(), which the kernel serves on the socket itself as it
 * does a ring's.
 */
struct kernel_io {
	bool by_syscall;
	int ring_fd;
	struct io_uring ring;
};

static int set_up(struct kernel_io *io)
{
	struct io_uring_params p;

	if (!io->by_syscall)
		return io_uring_queue_init(8, &io->ring, 0);
	memset(&p, 0, sizeof(p));
	io->ring_fd = (int)syscall(SYS_io_uring_setup, 8, &p);
	return io->ring_fd < 0 ? -errno : 0;
}

/* One operation, waited for: its result. */
static int kernel_op(struct kernel_io *io, int op, int fd, void *buf,
		     size_t len)
{
	struct __kernel_timespec limit = { .tv_sec = 10 };
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int ret;

	if (io->by_syscall) {
		if (op == IORING_OP_RECV)
			ret = (int)syscall(SYS_recvfrom, fd, buf, len, 0, NULL,
					   NULL);
		else if (op == IORING_OP_SEND)
			ret = (int)syscall(SYS_sendto, fd, buf, len,
					   MSG_NOSIGNAL, NULL, 0);
		else
			ret = (int)syscall(SYS_read, fd, buf, len);
		return ret < 0 ? -errno : ret;
	}
	sqe = io_uring_get_sqe(&io->ring);
	if (!sqe)
		return -EBUSY;
	if (op == IORING_OP_RECV)
		io_uring_prep_recv(sqe, fd, buf, len, 0);
	else if (op == IORING_OP_SEND)
		io_uring_prep_send(sqe, fd, buf, len, MSG_NOSIGNAL);
	else
		io_uring_prep_read(sqe, fd, buf, (unsigned int)len, 0);
	ret = io_uring_submit(&io->ring);
	if (ret < 0)
		return ret;
	ret = io_uring_wait_cqe_timeout(&io->ring, &cqe, &limit);
	if (ret)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(&io->ring, cqe);
	return ret;
}

static bool kernel_all(struct kernel_io *io, int op, int fd, uint8_t *buf,
		       size_t len)
{
	size_t off = 0;
	int n;

	while (off < len) {
		n = kernel_op(io, op, fd, buf + off, len - off);
		if (n <= 0)
			return false;
		off += (size_t)n;
	}
	return true;
}

/* The server's side of one connection, by io; NULL: as TCP. */
static const char *serve(struct kernel_io *io, int fd, uint8_t seed)
{
	static uint8_t buf[STREAM_BYTES];
	char tail[sizeof(TAIL)] = "";

	if (!kernel_all(io, IORING_OP_RECV, fd, buf, sizeof(buf)))
		return "a receive failed";
	if (!is_pattern(buf, sizeof(buf), seed))
		return "the client's stream differs";
	fill_pattern(buf, sizeof(buf), seed + 1);
	if (!kernel_all(io, IORING_OP_SEND, fd, buf, sizeof(buf)))
		return "a send failed";
	if (!kernel_all(io, IORING_OP_READ, fd, (uint8_t *)tail,
			strlen(TAIL)) ||
	    strcmp(tail, TAIL))
		return "a read failed";
	return NULL;
}

static void check_connection(const char *name, struct kernel_io *io,
			     bool set_up_now, uint8_t seed)
{
	struct client c = { .seed = seed };
	const char *failure = NULL;
	pthread_t t;
	int server, ret;

	check_pair(&c.fd, &server);
	check_thread(&t, client_run, &c);
	if (set_up_now) {
		/* The client is in the middle of its send. */
		usleep(SEND_AHEAD_US);
		ret = set_up(io);
		if (ret) {
			printf("FAIL ring: %s\n", strerror(-ret));
			exit(1);
		}
	}
	failure = serve(io, server, seed);
	close(server);
	pthread_join(t, NULL);
	close(c.fd);
	if (!failure)
		failure = c.failure;
	check_result(name, !failure, "%s", failure);
}

int main(int argc, char **argv)
{
	struct kernel_io io = { .ring_fd = -1 };

	if (argc != 4 ||
	    (strcmp(argv[3], "liburing") && strcmp(argv[3], "syscall"))) {
		fprintf(stderr, "usage: io_uring_check ADDR STATS_JSON "
				"liburing|syscall\n");
		return 2;
	}
	io.by_syscall = !strcmp(argv[3], "syscall");
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (check_listen(argv[1])) {
		printf("FAIL listen: %s\n", strerror(errno));
		return 1;
	}
	check_connection("ring_set_up_mid_stream_carries_every_byte", &io, true,
			 7);
	check_connection("connection_after_the_ring_carries_every_byte", &io,
			 false, 40);
	check_save_stats(argv[2]);
	if (io.by_syscall)
		close(io.ring_fd);
	else
		io_uring_queue_exit(&io.ring);
	return check_failures ? 1 : 0;
}
