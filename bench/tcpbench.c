// SPDX-License-Identifier: MIT
/*
 * tcpbench - a small TCP latency and bandwidth benchmark for roceshim.
 *
 *   tcpbench server [--addr A] [--port P] [--once]
 *   tcpbench client --addr A --port P --mode pingpong|stream --size BYTES
 *                   [--bind SRC] [--wait block|epoll|poll]
 *                   [--iters N | --seconds S] [--warmup N]
 *   tcpbench self   --mode pingpong|stream --size BYTES [--iters N | ...]
 *
 * The server prints "tcpbench listening addr=A port=P" once it listens, then
 * serves each connection in its own thread.  A client sends a 16-byte header
 * (magic, mode, size); the server touches a buffer of that size and answers
 * one byte, so that neither end's clock counts the page faults of a first
 * touch (perftest, the fabric's limit, registers its buffers before it
 * measures).  Then:
 *   pingpong: writes size bytes, reads size bytes back, repeated;
 *             reports the round trip / 2 in microseconds (median over iters);
 *   stream:   writes size bytes per write() call until done, half-closes,
 *             waits for the server's 8-byte count of what it received;
 *             reports MB/s (10^6 bytes per second) up to that reply.
 * --wait epoll makes both ends wait as Gloo does: the socket non-blocking,
 * registered level-triggered for EPOLLIN in an epoll set (EPOLLOUT added
 * while a write waits), and each read or write that would block waits in
 * epoll_wait(); --wait poll waits in poll() instead.  The client asks the
 * server for the same in the header.  The default, block, waits in read()
 * and write().
 * "self" runs a server in a child (fork + exec of this program, so a
 * preloaded library starts fresh in it) on 127.0.0.1 and a client against it.
 *
 * Each measurement is one line of key=value pairs on stdout, with cpu_s,
 * the client's CPU time (user + system, all its threads) over the
 * measurement; a --once server writes its own, from accept to the end of
 * the connection, to stderr as "tcpbench served cpu_s=X" (stderr: the
 * "self" client has closed the pipe of its stdout by then).  Diagnostics
 * go to stderr.  Exit status 0 on success, 1 on error, 2 on bad usage.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TB_MAGIC      0x54434231u /* "TCB1" */
#define MODE_PINGPONG 1
#define MODE_STREAM   2
#define MAX_SIZE      (1u << 30)
#define WAIT_BLOCK    0u /* tb_hdr.flags: how the server waits too */
#define WAIT_EPOLL    1u
#define WAIT_POLL     2u

struct tb_hdr {
	uint32_t magic;
	uint32_t mode;
	uint32_t size;
	uint32_t flags;
};

/* A connection, and how its reads and writes wait (see --wait). */
struct tb_io {
	int fd;
	unsigned int wait; /* WAIT_* */
	int epfd;	   /* WAIT_EPOLL: the set */
	uint32_t events;   /* registered in epfd */
};

static const char *const wait_names[] = { "block", "epoll", "poll" };

struct opts {
	const char *addr;
	const char *bind; /* client source address */
	const char *port;
	int mode;
	size_t size;
	long iters; /* 0: use seconds */
	double seconds;
	long warmup;
	int once;
	unsigned int wait; /* --wait: WAIT_* */
};

static void die(const char *what)
{
	fprintf(stderr, "tcpbench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* User and system time of the whole process, in seconds. */
static double cpu_s(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		die("getrusage");
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/*
 * Waits in epoll_wait() or poll() until io is ready for want (EPOLLIN or
 * EPOLLOUT).
 */
static int io_wait(struct tb_io *io, uint32_t want)
{
	struct epoll_event ev = { .events = EPOLLIN | want };
	struct pollfd pfd = { .fd = io->fd,
			      .events = want == EPOLLOUT ? POLLOUT : POLLIN };

	if (io->wait == WAIT_POLL) {
		while (poll(&pfd, 1, -1) < 0)
			if (errno != EINTR)
				return -1;
		return 0;
	}
	if (io->wait != WAIT_EPOLL)
		return -1;
	if (ev.events != io->events) {
		if (epoll_ctl(io->epfd, EPOLL_CTL_MOD, io->fd, &ev) < 0)
			return -1;
		io->events = ev.events;
	}
	while (epoll_wait(io->epfd, &ev, 1, -1) < 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

/* Switches io to waiting as wait says (the socket made non-blocking). */
static void io_use_wait(struct tb_io *io, unsigned int wait)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fl = fcntl(io->fd, F_GETFL);

	io->wait = wait;
	if (wait == WAIT_BLOCK)
		return;
	if (fl < 0 || fcntl(io->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl O_NONBLOCK");
	if (wait == WAIT_POLL)
		return;
	io->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (io->epfd < 0 || epoll_ctl(io->epfd, EPOLL_CTL_ADD, io->fd, &ev) < 0)
		die("epoll");
	io->events = ev.events;
}

static void io_close(struct tb_io *io)
{
	if (io->epfd >= 0)
		close(io->epfd);
	close(io->fd);
}

/* read(2), waiting as io does: bytes, 0 at EOF, -1 on error. */
static ssize_t io_read(struct tb_io *io, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = read(io->fd, buf, len);

		if (n >= 0 || errno == EINTR)
			return n;
		if (errno != EAGAIN || io_wait(io, 0) < 0)
			return -1;
	}
}

static int write_full(struct tb_io *io, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(io->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN && !io_wait(io, EPOLLOUT))
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* 1 on success, 0 on EOF before the first byte, -1 on error or short EOF. */
static int read_full(struct tb_io *io, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = io_read(io, p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return got ? -1 : 0;
		got += n;
	}
	return 1;
}

static void set_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		die("setsockopt TCP_NODELAY");
}

static struct addrinfo *resolve(const char *addr, const char *port, int passive)
{
	struct addrinfo hints = { 0 }, *res;
	int rc;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	rc = getaddrinfo(addr, port, &hints, &res);
	if (rc) {
		fprintf(stderr, "tcpbench: %s port %s: %s\n", addr ? addr : "*",
			port, gai_strerror(rc));
		exit(1);
	}
	return res;
}

static void print_sockaddr(const struct sockaddr *sa, char *host,
			   size_t hostlen, int *port)
{
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, hostlen);
		*port = ntohs(s6->sin6_port);
	} else {
		const struct sockaddr_in *s4 = (const void *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, hostlen);
		*port = ntohs(s4->sin_port);
	}
}

/* ---- server ---------------------------------------------------------- */

static void serve_pingpong(struct tb_io *io, char *buf, size_t size)
{
	for (;;) {
		int rc = read_full(io, buf, size);

		if (rc <= 0)
			return;
		if (write_full(io, buf, size) < 0)
			return;
	}
}

static void serve_stream(struct tb_io *io, char *buf, size_t size)
{
	uint64_t total = 0;

	for (;;) {
		ssize_t n = io_read(io, buf, size);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return;
		if (n == 0)
			break;
		total += n;
	}
	write_full(io, &total, sizeof(total));
}

static void *serve_conn(void *arg)
{
	struct tb_io io = { .fd = (int)(intptr_t)arg, .epfd = -1 };
	struct tb_hdr h;
	char *buf;

	if (read_full(&io, &h, sizeof(h)) != 1 || h.magic != TB_MAGIC ||
	    h.size == 0 || h.size > MAX_SIZE || h.flags > WAIT_POLL ||
	    (h.mode != MODE_PINGPONG && h.mode != MODE_STREAM)) {
		fprintf(stderr, "tcpbench: server: bad or missing header\n");
		io_close(&io);
		return NULL;
	}
	set_nodelay(io.fd);
	buf = malloc(h.size);
	if (!buf) {
		fprintf(stderr, "tcpbench: server: out of memory\n");
		io_close(&io);
		return NULL;
	}
	memset(buf, 0, h.size);
	if (write_full(&io, "R", 1) < 0) {
		fprintf(stderr, "tcpbench: server: cannot say ready\n");
		free(buf);
		io_close(&io);
		return NULL;
	}
	io_use_wait(&io, h.flags);
	if (h.mode == MODE_PINGPONG)
		serve_pingpong(&io, buf, h.size);
	else
		serve_stream(&io, buf, h.size);
	free(buf);
	io_close(&io);
	return NULL;
}

static int listen_on(const char *addr, const char *port)
{
	struct addrinfo *res = resolve(addr, port, 1);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN];
	int fd, one = 1, p;

	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) < 0)
		die("bind");
	freeaddrinfo(res);
	if (listen(fd, 16) < 0)
		die("listen");
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		die("getsockname");
	print_sockaddr((struct sockaddr *)&ss, host, sizeof(host), &p);
	printf("tcpbench listening addr=%s port=%d\n", host, p);
	fflush(stdout);
	return fd;
}

static int run_server(const struct opts *o)
{
	int lfd = listen_on(o->addr, o->port ? o->port : "0");

	for (;;) {
		pthread_t th;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		if (o->once) {
			double cpu = cpu_s();

			close(lfd);
			serve_conn((void *)(intptr_t)fd);
			fprintf(stderr, "tcpbench served cpu_s=%.6f\n",
				cpu_s() - cpu);
			return 0;
		}
		if (pthread_create(&th, NULL, serve_conn,
				   (void *)(intptr_t)fd)) {
			fprintf(stderr, "tcpbench: pthread_create failed\n");
			close(fd);
			continue;
		}
		pthread_detach(th);
	}
}

/* ---- client ---------------------------------------------------------- */

/* Binds fd to source address src (any port); 0 or -1. */
static int bind_source(int fd, const char *src)
{
	struct addrinfo *res = resolve(src, "0", 1);
	int rc = bind(fd, res->ai_addr, res->ai_addrlen);

	freeaddrinfo(res);
	return rc;
}

static int connect_to(const char *addr, const char *port, const char *src)
{
	struct addrinfo *res = resolve(addr, port, 0), *ai;
	int fd = -1;

	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0)
			continue;
		if (src && bind_source(fd, src) < 0)
			die("bind");
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		die("connect");
	set_nodelay(fd);
	return fd;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *v, long n, double p)
{
	long i = (long)(p * (n - 1) + 0.5);

	return v[i];
}

static int client_pingpong(struct tb_io *io, const struct opts *o, char *buf)
{
	long cap = o->iters ? o->iters : 1024, n = 0, i;
	double *rtt = malloc(cap * sizeof(*rtt));
	double end, t0, t1, median, cpu;

	if (!rtt)
		die("malloc");
	for (i = 0; i < o->warmup; i++) {
		if (write_full(io, buf, o->size) < 0 ||
		    read_full(io, buf, o->size) != 1)
			die("pingpong warmup");
	}
	cpu = cpu_s();
	end = now_s() + o->seconds;
	for (;;) {
		if (o->iters ? n >= o->iters : now_s() >= end)
			break;
		if (n == cap) {
			cap *= 2;
			rtt = realloc(rtt, cap * sizeof(*rtt));
			if (!rtt)
				die("realloc");
		}
		t0 = now_s();
		if (write_full(io, buf, o->size) < 0 ||
		    read_full(io, buf, o->size) != 1)
			die("pingpong");
		t1 = now_s();
		rtt[n++] = (t1 - t0) * 1e6 / 2;
	}
	cpu = cpu_s() - cpu;
	if (!n) {
		fprintf(stderr, "tcpbench: no iterations measured\n");
		return 1;
	}
	qsort(rtt, n, sizeof(*rtt), cmp_double);
	median = n % 2 ? rtt[n / 2] : (rtt[n / 2 - 1] + rtt[n / 2]) / 2;
	printf("tcpbench mode=pingpong wait=%s addr=%s port=%s size=%zu "
	       "iters=%ld "
	       "lat_us_median=%.3f lat_us_min=%.3f lat_us_p90=%.3f "
	       "lat_us_p99=%.3f lat_us_max=%.3f cpu_s=%.6f\n",
	       wait_names[o->wait], o->addr, o->port, o->size, n, median,
	       rtt[0], pct(rtt, n, 0.90), pct(rtt, n, 0.99), rtt[n - 1], cpu);
	free(rtt);
	return 0;
}

static int client_stream(struct tb_io *io, const struct opts *o, char *buf)
{
	uint64_t sent = 0, acked = 0;
	long writes = 0;
	double t0, end, secs, cpu;

	cpu = cpu_s();
	t0 = now_s();
	end = t0 + o->seconds;
	for (;;) {
		if (o->iters ? writes >= o->iters : now_s() >= end)
			break;
		if (write_full(io, buf, o->size) < 0)
			die("stream write");
		sent += o->size;
		writes++;
	}
	if (shutdown(io->fd, SHUT_WR) < 0)
		die("shutdown");
	if (read_full(io, &acked, sizeof(acked)) != 1)
		die("stream: reading the server's byte count");
	secs = now_s() - t0;
	cpu = cpu_s() - cpu;
	if (acked != sent) {
		fprintf(stderr, "tcpbench: sent %llu bytes, server got %llu\n",
			(unsigned long long)sent, (unsigned long long)acked);
		return 1;
	}
	printf("tcpbench mode=stream wait=%s addr=%s port=%s size=%zu "
	       "writes=%ld "
	       "bytes=%llu seconds=%.6f MBps=%.1f cpu_s=%.6f\n",
	       wait_names[o->wait], o->addr, o->port, o->size, writes,
	       (unsigned long long)sent, secs, sent / secs / 1e6, cpu);
	return 0;
}

static int run_client(const struct opts *o)
{
	struct tb_hdr h = { TB_MAGIC, (uint32_t)o->mode, (uint32_t)o->size,
			    o->wait };
	struct tb_io io = { .epfd = -1 };
	char *buf, ready;
	int rc;

	buf = malloc(o->size);
	if (!buf)
		die("malloc");
	memset(buf, 0xa5, o->size);
	io.fd = connect_to(o->addr, o->port, o->bind);
	if (write_full(&io, &h, sizeof(h)) < 0)
		die("write header");
	if (read_full(&io, &ready, 1) != 1)
		die("reading the server's ready byte");
	io_use_wait(&io, o->wait);
	if (o->mode == MODE_PINGPONG)
		rc = client_pingpong(&io, o, buf);
	else
		rc = client_stream(&io, o, buf);
	io_close(&io);
	free(buf);
	return rc;
}

/* ---- self: server child + client ------------------------------------- */

static int run_self(struct opts *o)
{
	char line[256], portbuf[16], *p;
	int pfd[2], status, rc;
	FILE *f;
	pid_t pid;

	if (pipe(pfd) < 0)
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execl("/proc/self/exe", "tcpbench", "server", "--addr", o->addr,
		      "--port", "0", "--once", (char *)NULL);
		fprintf(stderr, "tcpbench: exec /proc/self/exe: %s\n",
			strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	if (!f || !fgets(line, sizeof(line), f)) {
		fprintf(stderr, "tcpbench: self: server did not start\n");
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 1;
	}
	fclose(f);
	p = strstr(line, "port=");
	if (!p || sscanf(p, "port=%15[0-9]", portbuf) != 1) {
		fprintf(stderr, "tcpbench: self: bad server line: %s", line);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return 1;
	}
	o->port = portbuf;
	rc = run_client(o);
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "tcpbench: self: server exited abnormally\n");
		rc = 1;
	}
	return rc;
}

/* ---- options --------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: tcpbench server [--addr A] [--port P] [--once]\n"
		"       tcpbench client --addr A --port P\n"
		"                       --mode pingpong|stream --size BYTES\n"
		"                       [--iters N | --seconds S]\n"
		"                       [--warmup N] [--bind SRC]\n"
		"                       [--wait block|epoll|poll]\n"
		"       tcpbench self --mode pingpong|stream --size BYTES\n"
		"                     [--iters N | --seconds S] [--warmup N]\n"
		"                     [--wait block|epoll|poll]\n"
		"sizes take a K, M or G suffix (binary)\n");
	exit(2);
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		usage();
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v == 0 || v > MAX_SIZE) {
		fprintf(stderr, "tcpbench: bad size '%s' (1 .. 1G)\n", s);
		exit(2);
	}
	return v;
}

static long parse_long(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0) {
		fprintf(stderr, "tcpbench: bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	int i;

	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--once")) {
			o->once = 1;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--addr")) {
			o->addr = v;
		} else if (!strcmp(a, "--bind")) {
			o->bind = v;
		} else if (!strcmp(a, "--port")) {
			o->port = v;
		} else if (!strcmp(a, "--mode")) {
			if (!strcmp(v, "pingpong"))
				o->mode = MODE_PINGPONG;
			else if (!strcmp(v, "stream"))
				o->mode = MODE_STREAM;
			else
				usage();
		} else if (!strcmp(a, "--size")) {
			o->size = parse_size(v);
		} else if (!strcmp(a, "--iters")) {
			o->iters = parse_long(v);
		} else if (!strcmp(a, "--seconds")) {
			o->seconds = strtod(v, NULL);
		} else if (!strcmp(a, "--warmup")) {
			o->warmup = parse_long(v);
		} else if (!strcmp(a, "--wait")) {
			for (o->wait = WAIT_BLOCK; o->wait <= WAIT_POLL;
			     o->wait++)
				if (!strcmp(v, wait_names[o->wait]))
					break;
			if (o->wait > WAIT_POLL)
				usage();
		} else {
			usage();
		}
	}
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };

	if (argc < 2)
		usage();
	signal(SIGPIPE, SIG_IGN);
	o.warmup = -1;
	parse_opts(argc, argv, &o);

	if (!strcmp(argv[1], "server"))
		return run_server(&o);

	if (strcmp(argv[1], "client") && strcmp(argv[1], "self"))
		usage();
	if (!o.mode || !o.size)
		usage();
	if (!o.iters && o.seconds <= 0)
		o.seconds = 2.0;
	if (o.warmup < 0)
		o.warmup = o.mode == MODE_PINGPONG ? 100 : 0;
	if (!strcmp(argv[1], "self")) {
		if (!o.addr)
			o.addr = "127.0.0.1";
		return run_self(&o);
	}
	if (!o.addr || !o.port)
		usage();
	return run_client(&o);
}
