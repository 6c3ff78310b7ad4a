// SPDX-License-Identifier: MIT
/*
 * Sends from CUDA-pinned memory, as Gloo stages CUDA tensors: one
 * connection, a receiver process that reads and discards, and a sender
 * that writes --total bytes in --size pieces from one buffer, non-blocking
 * (poll for POLLOUT, as Gloo's pairs do) or blocking.  "Pinned" is the
 * test double's (tests/cuda/cuda_double.h): the buffer is ordinary memory
 * that the double calls pinned, so this measures roceshim's paths (copy,
 * or zero-copy from a cached registration; ROCESHIM_CUDA=0 is the copy
 * path), not a GPU.  Prints one line: bandwidth and the sender's CPU time
 * (its threads, roceshim's included) per MiB.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_double.h"

struct options {
	const char *server, *client;
	size_t size, total;
	bool pinned, nonblock;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int receive(int lfd, size_t total)
{
	static char buf[1 << 20];
	int fd = accept(lfd, NULL, NULL);
	ssize_t n;

	if (fd < 0)
		return 1;
	while (total) {
		n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			return 1;
		total -= n;
	}
	close(fd);
	return 0;
}

static int send_all(int fd, const char *buf, const struct options *o)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	size_t left = o->total, off = 0;
	ssize_t n;

	while (left) {
		size_t want = o->size - off < left ? o->size - off : left;

		n = write(fd, buf + off, want);
		if (n < 0 && errno == EAGAIN) {
			poll(&pfd, 1, -1);
			continue;
		}
		if (n <= 0)
			return 1;
		left -= n;
		off = (off + n) % o->size;
	}
	return 0;
}

static int parse(int argc, char **argv, struct options *o)
{
	static const struct option longs[] = {
		{ "server", required_argument, NULL, 's' },
		{ "client", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 'z' },
		{ "total", required_argument, NULL, 't' },
		{ "pinned", no_argument, NULL, 'p' },
		{ "nonblock", no_argument, NULL, 'n' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .server = "127.0.0.1",
			       .client = "127.0.0.1",
			       .size = 1 << 20,
			       .total = 64 << 20 };
	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		switch (c) {
		case 's':
			o->server = optarg;
			break;
		case 'c':
			o->client = optarg;
			break;
		case 'z':
			o->size = strtoull(optarg, NULL, 0);
			break;
		case 't':
			o->total = strtoull(optarg, NULL, 0);
			break;
		case 'p':
			o->pinned = true;
			break;
		case 'n':
			o->nonblock = true;
			break;
		default:
			return -1;
		}
	}
	return o->size && o->total ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET }, ca = sa;
	socklen_t len = sizeof(sa);
	struct options o;
	int lfd, fd, status;
	double t0, t1, cpu0;
	pid_t pid;
	char *buf;

	if (parse(argc, argv, &o)) {
		fprintf(stderr, "usage: pinned_bench [--server A] [--client A] "
				"[--size N] [--total N] [--pinned] "
				"[--nonblock]\n");
		return 2;
	}
	inet_pton(AF_INET, o.server, &sa.sin_addr);
	inet_pton(AF_INET, o.client, &ca.sin_addr);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&sa, &len)) {
		perror("pinned_bench: listen");
		return 1;
	}
	pid = fork();
	if (!pid)
		_exit(receive(lfd, o.total));
	close(lfd);
	buf = mmap(NULL, o.size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(buf, 0x5a, o.size);
	if (o.pinned) {
		cuInit(0);
		cuda_double_mark(buf, o.size, CUDA_DOUBLE_PINNED);
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ca, sizeof(ca)) ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("pinned_bench: connect");
		return 1;
	}
	if (o.nonblock)
		fcntl(fd, F_SETFL, O_NONBLOCK);
	t0 = now_s();
	cpu0 = cpu_s();
	if (send_all(fd, buf, &o)) {
		perror("pinned_bench: send");
		return 1;
	}
	close(fd);
	if (waitpid(pid, &status, 0) != pid || status) {
		fprintf(stderr, "pinned_bench: the receiver failed\n");
		return 1;
	}
	t1 = now_s();
	printf("size=%zu total=%zu %s %s MBps=%.1f "
	       "sender_cpu_ms_per_MiB=%.3f\n",
	       o.size, o.total, o.pinned ? "pinned" : "pageable",
	       o.nonblock ? "nonblock" : "block", o.total / (t1 - t0) / 1e6,
	       (cpu_s() - cpu0) * 1e3 / (o.total >> 20));
	return 0;
}
