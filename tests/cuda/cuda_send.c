// SPDX-License-Identifier: MIT
/*
 * cuda_send - sends from each kind of CUDA memory over one TCP connection
 * to itself, so that roceshim's memory classes, its registration cache of
 * pinned memory and its EFAULT for device memory run on real sockets:
 * plain, preloaded on kernel TCP, and over RDMA (tests/fabric/test-cuda.sh).
 * The memory is ordinary memory that the CUDA driver's test double
 * (cuda_double.h, linked as libcuda.so.1) says is CUDA's.
 *
 *	cuda_send [--expect-rdma] [--bind B] A CASE
 *
 * Listens on A (port 0), connects to it (from B:0 with --bind), accepts,
 * runs CASE and prints "ok CASE" or "FAIL CASE: why"; exits 0 or 1.  A
 * reader thread checks every byte that arrives.  Where the process has a
 * roceshim stats segment, the case checks how much the memory counters it
 * moves grew (struct roceshim_stats_memory).  --expect-rdma demands the
 * segment and the connection on RDMA, and checks the counters only the
 * RDMA path moves: registrations and zero-copy bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <roceshim/stats.h>

#include "cuda_double.h"

#define BUF_LEN	  (4u << 20)
#define TIMEOUT_S 300
#define POLL_MS	  (TIMEOUT_S * 1000)

struct conn {
	int tx; /* the connecting end */
	int rx; /* the accepted end */
};

static bool expect_rdma;
/* The first failure. */
static char why[256];
/* This process's roceshim stats segment; NULL: none, not preloaded. */
static const struct roceshim_stats_header *segment;

static void failed(const char *fmt, ...)
{
	va_list ap;

	if (why[0])
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
}

#define CHECK(cond, ...)                     \
	do {                                 \
		if (!(cond)) {               \
			failed(__VA_ARGS__); \
			goto out;            \
		}                            \
	} while (0)

/*
 * How much a memory counter grew across the case, between the snapshots
 * before and after: GREW(registrations, ==, 1).
 */
#define GREW(field, op, n)                                              \
	CHECK(after.field - before.field op(n),                         \
	      #field " grew by %" PRIu64 ", expected " #op " %" PRIu64, \
	      after.field - before.field, (uint64_t)(n))

static char timeout_line[128]; /* "FAIL CASE: timed out" */

static void timed_out(int sig)
{
	if (write(STDOUT_FILENO, timeout_line, strlen(timeout_line)) < 0)
		_exit(2);
	_exit(1);
}

/* The byte at offset i of a buffer filled with seed's pattern. */
static uint8_t pattern(uint8_t seed, size_t i)
{
	return (uint8_t)(((uint32_t)i * 2654435761u) >> 24) + seed;
}

static void fill(uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pattern(seed, i);
}

/* Anonymous memory, at exactly at if at is not NULL; NULL on failure. */
static void *map(void *at, size_t len, int prot)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	void *p;

	if (at)
		flags |= MAP_FIXED_NOREPLACE;
	p = mmap(at, len, prot, flags, -1, 0);
	if (p == MAP_FAILED || (at && p != at)) {
		failed("mmap of %zu bytes at %p: %s", len, at,
		       p == MAP_FAILED ? strerror(errno) : "elsewhere");
		if (p != MAP_FAILED)
			munmap(p, len);
		return NULL;
	}
	return p;
}

/* --- the stats segment ------------------------------------------------ */

/* Maps this process's segment, if it has one: it is roceshim's. */
static void stats_attach(void)
{
	const struct roceshim_stats_header *h;
	char name[64];
	struct stat st;
	void *seg;
	int fd;

	snprintf(name, sizeof(name), ROCESHIM_STATS_SHM_PREFIX "%d",
		 (int)getpid());
	fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return;
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(*h)) {
		failed("stats segment %s: too small", name);
		close(fd);
		return;
	}
	seg = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (seg == MAP_FAILED) {
		failed("stats segment %s: %s", name, strerror(errno));
		return;
	}
	h = seg;
	if (h->magic != ROCESHIM_STATS_MAGIC ||
	    h->layout_version != ROCESHIM_STATS_LAYOUT_VERSION ||
	    h->header_size != sizeof(*h) ||
	    h->row_size != sizeof(struct roceshim_stats_row) ||
	    st.st_size < (off_t)(h->header_size +
				 (uint64_t)h->row_count * h->row_size)) {
		failed("stats segment %s: layout version %u, expected %u", name,
		       h->layout_version, ROCESHIM_STATS_LAYOUT_VERSION);
		munmap(seg, st.st_size);
		return;
	}
	segment = h;
}

/* The memory counters now; all zero without a segment. */
static struct roceshim_stats_memory memory_now(void)
{
	struct roceshim_stats_memory m = { 0 };
	const uint64_t *from;
	uint64_t *to = (uint64_t *)&m;
	size_t i;

	if (!segment)
		return m;
	from = (const uint64_t *)&segment->global.memory;
	for (i = 0; i < sizeof(m) / sizeof(*to); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
	return m;
}

/* The stats row of fd's open connection; false if it has none. */
static bool row_of(int fd, struct roceshim_stats_row *out)
{
	const struct roceshim_stats_row *rows = (const void *)(segment + 1);
	uint32_t i, seq;

	for (i = 0; i < segment->row_count; i++) {
		do {
			seq = __atomic_load_n(&rows[i].seq, __ATOMIC_ACQUIRE);
			memcpy(out, &rows[i], sizeof(*out));
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
		} while ((seq & 1) || seq != __atomic_load_n(&rows[i].seq,
							     __ATOMIC_RELAXED));
		if (out->fd == fd && out->state == ROCESHIM_ROW_OPEN &&
		    out->role != ROCESHIM_ROLE_LISTENER)
			return true;
	}
	return false;
}

static void check_on_rdma(const struct conn *c)
{
	struct roceshim_stats_row row;

	CHECK(segment, "no roceshim stats segment: not preloaded?");
	CHECK(row_of(c->tx, &row), "no stats row for the connection");
	CHECK(row.transport == ROCESHIM_TRANSPORT_RDMA,
	      "the connection is on %s (reason %s), not rdma",
	      roceshim_transport_name(row.transport),
	      roceshim_reason_name(row.reason));
out:
	return;
}

/* --- the connection ---------------------------------------------------- */

static bool resolve(const char *host, struct sockaddr_storage *sa,
		    socklen_t *len)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST,
				  .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	int rc = getaddrinfo(host, NULL, &hints, &ai);

	if (rc) {
		failed("%s: %s", host, gai_strerror(rc));
		return false;
	}
	memcpy(sa, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return true;
}

/* A connection from bind_at (any if NULL) to a listener on at. */
static bool connect_pair(struct conn *c, const char *at, const char *bind_at)
{
	struct sockaddr_storage to, from;
	socklen_t to_len, from_len;
	int l = -1;

	c->tx = c->rx = -1;
	if (!resolve(at, &to, &to_len) ||
	    (bind_at && !resolve(bind_at, &from, &from_len)))
		goto out;
	l = socket(to.ss_family, SOCK_STREAM, 0);
	CHECK(l >= 0 && !bind(l, (struct sockaddr *)&to, to_len) &&
		      !listen(l, 1) &&
		      !getsockname(l, (struct sockaddr *)&to, &to_len),
	      "listen on %s: %s", at, strerror(errno));
	c->tx = socket(to.ss_family, SOCK_STREAM, 0);
	CHECK(c->tx >= 0, "socket: %s", strerror(errno));
	CHECK(!bind_at || !bind(c->tx, (struct sockaddr *)&from, from_len),
	      "bind to %s: %s", bind_at, strerror(errno));
	CHECK(!connect(c->tx, (struct sockaddr *)&to, to_len), "connect: %s",
	      strerror(errno));
	c->rx = accept(l, NULL, NULL);
	CHECK(c->rx >= 0, "accept: %s", strerror(errno));
out:
	if (l >= 0)
		close(l);
	return !why[0];
}

static bool set_nonblocking(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 ||
	    fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0) {
		failed("fcntl: %s", strerror(errno));
		return false;
	}
	return true;
}

/* Sends all of buf; a non-blocking fd waits for POLLOUT when full. */
static bool send_all(int fd, const uint8_t *buf, size_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	ssize_t n;

	while (len) {
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN && poll(&p, 1, POLL_MS) == 1)
			continue;
		if (n <= 0) {
			failed("send: %s", n ? strerror(errno) : "0 bytes");
			return false;
		}
		buf += n;
		len -= n;
	}
	return true;
}

struct reader {
	pthread_t thread;
	int fd;
	size_t len; /* of one copy of the pattern */
	unsigned int copies;
	uint8_t seed;
	char why[160];
};

/* Reads copies times len bytes of seed's pattern, checking each byte. */
static void *read_and_check(void *arg)
{
	static uint8_t buf[256 << 10];
	struct reader *r = arg;
	uint64_t total = (uint64_t)r->len * r->copies, got = 0;
	ssize_t n, i;

	while (got < total) {
		n = recv(r->fd, buf,
			 total - got < sizeof(buf) ? total - got : sizeof(buf),
			 0);
		if (n <= 0) {
			snprintf(r->why, sizeof(r->why),
				 "recv after %" PRIu64 " of %" PRIu64
				 " bytes: %s",
				 got, total, n ? strerror(errno) : "EOF");
			return NULL;
		}
		for (i = 0; i < n; i++) {
			uint8_t want = pattern(r->seed, (got + i) % r->len);

			if (buf[i] != want) {
				snprintf(r->why, sizeof(r->why),
					 "byte %" PRIu64 " is %#x, not %#x",
					 got + i, buf[i], want);
				return NULL;
			}
		}
		got += n;
	}
	return NULL;
}

/*
 * Sends the len bytes at buf, filled with seed's pattern, copies times
 * from a blocking or a non-blocking socket, while a reader thread checks
 * that exactly those bytes arrive.
 */
static bool transfer(struct conn *c, const uint8_t *buf, size_t len,
		     unsigned int copies, uint8_t seed, bool nonblocking)
{
	struct reader r = {
		.fd = c->rx, .len = len, .copies = copies, .seed = seed
	};
	unsigned int i;
	int err;

	if (!set_nonblocking(c->tx, nonblocking))
		return false;
	err = pthread_create(&r.thread, NULL, read_and_check, &r);
	if (err) {
		failed("pthread_create: %s", strerror(err));
		return false;
	}
	for (i = 0; i < copies; i++)
		if (!send_all(c->tx, buf, len))
			break;
	/* A send that failed leaves the reader waiting: EOF ends it. */
	if (i < copies)
		shutdown(c->tx, SHUT_WR);
	pthread_join(r.thread, NULL);
	if (r.why[0])
		failed("%s", r.why);
	return !why[0] && set_nonblocking(c->tx, false);
}

/* Whether a call on device memory answered -1/EFAULT, as kernel TCP does. */
static bool is_efault(const char *call, ssize_t ret)
{
	if (ret == -1 && errno == EFAULT)
		return true;
	failed("%s returned %zd (%s), not -1/EFAULT", call, ret,
	       ret < 0 ? strerror(errno) : "no error");
	return false;
}

/* Reads msg at the receiving end, into ordinary memory. */
static bool receive(struct conn *c, const char *msg)
{
	char got[64] = "";
	size_t len = strlen(msg);
	ssize_t n = recv(c->rx, got, len, MSG_WAITALL);

	if (n != (ssize_t)len || memcmp(got, msg, len)) {
		failed("recv of \"%s\" returned %zd (%s)", msg, n,
		       n < 0 ? strerror(errno) : "other bytes");
		return false;
	}
	return true;
}

/* Sends msg from ordinary memory, and reads it at the other end. */
static bool echo(struct conn *c, const char *msg)
{
	return send_all(c->tx, (const uint8_t *)msg, strlen(msg)) &&
	       receive(c, msg);
}

/*
 * roceshim looks for the driver lazily, at most once a second
 * (src/cuda_mem.h): a case starts once it has asked the driver about a
 * buffer, after as many echoes as that takes.
 */
static void wait_for_classifier(struct conn *c)
{
	int64_t deadline = time(NULL) + 10;

	while (!cuda_double_queries()) {
		CHECK(time(NULL) < deadline,
		      "roceshim never asked the CUDA driver");
		if (!echo(c, "x"))
			return;
	}
out:
	return;
}

static bool cuda_init(void)
{
	int rc = cuInit(0);

	if (rc)
		failed("cuInit: %d", rc);
	return !rc;
}

/*
 * BUF_LEN bytes that the double says are CUDA memory of kind, filled
 * with seed's pattern; after cuInit() unless cold.  NULL: failed.
 */
static uint8_t *cuda_buffer(int kind, uint8_t seed, bool cold)
{
	uint8_t *buf;

	if (!cold && !cuda_init())
		return NULL;
	buf = map(NULL, BUF_LEN, PROT_READ | PROT_WRITE);
	if (!buf)
		return NULL;
	cuda_double_mark(buf, BUF_LEN, kind);
	fill(buf, BUF_LEN, seed);
	return buf;
}

/* --- the cases --------------------------------------------------------- */

static void pinned_send_registers_once(struct conn *c)
{
	struct roceshim_stats_memory before = memory_now(), after;
	uint8_t *buf;

	buf = cuda_buffer(CUDA_DOUBLE_PINNED, 1, false);
	if (!buf)
		return;
	if (!transfer(c, buf, BUF_LEN, 8, 1, false) ||
	    !transfer(c, buf, BUF_LEN, 8, 1, true) || !segment)
		goto out;
	after = memory_now();
	GREW(tx_bytes[ROCESHIM_MEM_PINNED], ==, 16 * BUF_LEN);
	if (!expect_rdma)
		goto out;
	GREW(registrations, ==, 1);
	GREW(registration_hits, >=, 1);
	GREW(zerocopy_tx_bytes, >, 0);
out:
	cuda_double_unmark(buf);
	munmap(buf, BUF_LEN);
}

/*
 * A fork child sends from the pinned buffer on the inherited connection
 * (it moves to TCP, the child's CUDA is not usable), then the parent: the
 * bytes arrive in order, and the parent's registration was neither
 * dropped by the child nor made again.
 */
static void fork_child_sends_pinned_memory_intact(struct conn *c)
{
	struct roceshim_stats_memory before = memory_now(), after;
	struct reader r = {
		.fd = c->rx, .len = BUF_LEN, .copies = 4, .seed = 1
	};
	int status = -1;
	uint8_t *buf;
	pid_t pid;

	buf = cuda_buffer(CUDA_DOUBLE_PINNED, 1, false);
	if (!buf)
		return;
	if (!transfer(c, buf, BUF_LEN, 2, 1, false))
		goto out;
	if (pthread_create(&r.thread, NULL, read_and_check, &r)) {
		failed("pthread_create failed");
		goto out;
	}
	pid = fork();
	if (!pid)
		_exit(send_all(c->tx, buf, BUF_LEN) &&
				      send_all(c->tx, buf, BUF_LEN)
			      ? 0
			      : 1);
	/* A failure here leaves the reader waiting: the process ends. */
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && status == 0,
	      "the child's sends failed (status %d)", status);
	CHECK(send_all(c->tx, buf, BUF_LEN) && send_all(c->tx, buf, BUF_LEN),
	      "the parent's sends after the child's failed");
	pthread_join(r.thread, NULL);
	if (r.why[0])
		failed("%s", r.why);
	if (why[0] || !segment || !expect_rdma)
		goto out;
	after = memory_now();
	GREW(registrations, ==, 1);
out:
	cuda_double_unmark(buf);
	munmap(buf, BUF_LEN);
}

static void reallocated_range_registers_again(struct conn *c)
{
	struct roceshim_stats_memory before = memory_now(), after;
	uint8_t *buf;

	buf = cuda_buffer(CUDA_DOUBLE_PINNED, 1, false);
	if (!buf)
		return;
	if (!transfer(c, buf, BUF_LEN, 1, 1, false))
		goto out;
	/* Freed, and allocated again at the same address: new pages. */
	cuda_double_unmark(buf);
	munmap(buf, BUF_LEN);
	if (!map(buf, BUF_LEN, PROT_READ | PROT_WRITE))
		return;
	cuda_double_mark(buf, BUF_LEN, CUDA_DOUBLE_PINNED);
	fill(buf, BUF_LEN, 2);
	if (!transfer(c, buf, BUF_LEN, 1, 2, false) || !segment)
		goto out;
	after = memory_now();
	GREW(tx_bytes[ROCESHIM_MEM_PINNED], ==, 2 * BUF_LEN);
	if (!expect_rdma)
		goto out;
	GREW(registrations, ==, 2);
	GREW(registrations_stale, >=, 1);
out:
	cuda_double_unmark(buf);
	munmap(buf, BUF_LEN);
}

static void device_send_is_efault(struct conn *c)
{
	struct roceshim_stats_memory before = memory_now(), after;
	struct pollfd readable = { .fd = c->rx, .events = POLLIN };
	uint8_t *dev;
	struct iovec iov;

	if (!cuda_init())
		return;
	/* Not host memory: whatever touches it dies of SIGSEGV. */
	dev = map(NULL, BUF_LEN, PROT_NONE);
	if (!dev)
		return;
	cuda_double_mark(dev, BUF_LEN, CUDA_DOUBLE_DEVICE);
	iov = (struct iovec){ .iov_base = dev, .iov_len = BUF_LEN };
	if (!is_efault("send", send(c->tx, dev, BUF_LEN, MSG_NOSIGNAL)) ||
	    !is_efault("write", write(c->tx, dev, BUF_LEN)) ||
	    !is_efault("writev", writev(c->tx, &iov, 1)))
		goto out;
	/* Nothing to read yet: the kernel says so before it would copy. */
	CHECK(recv(c->rx, dev, BUF_LEN, MSG_DONTWAIT) == -1 && errno == EAGAIN,
	      "a non-blocking recv into device memory with nothing to read "
	      "did not say EAGAIN (%s)",
	      strerror(errno));
	CHECK(send_all(c->tx, (const uint8_t *)"waiting", 7) &&
		      poll(&readable, 1, POLL_MS) == 1,
	      "the bytes never arrived");
	if (!is_efault("recv", recv(c->rx, dev, BUF_LEN, 0)) ||
	    !receive(c, "waiting") || !echo(c, "after the refusals"))
		goto out;
	if (!expect_rdma)
		goto out;
	after = memory_now();
	GREW(device_refused, ==, 4);
out:
	cuda_double_unmark(dev);
	munmap(dev, BUF_LEN);
}

static void managed_send_is_copied(struct conn *c)
{
	struct roceshim_stats_memory before = memory_now(), after;
	uint8_t *buf;

	buf = cuda_buffer(CUDA_DOUBLE_MANAGED, 3, false);
	if (!buf)
		return;
	if (!transfer(c, buf, BUF_LEN, 2, 3, false) || !segment)
		goto out;
	after = memory_now();
	GREW(tx_bytes[ROCESHIM_MEM_MANAGED], ==, 2 * BUF_LEN);
	GREW(registrations, ==, 0);
	GREW(zerocopy_tx_bytes, ==, 0);
out:
	cuda_double_unmark(buf);
	munmap(buf, BUF_LEN);
}

static void before_cuinit_everything_is_pageable(struct conn *c)
{
	struct roceshim_stats_memory before = memory_now(), after;
	uint8_t *buf = cuda_buffer(CUDA_DOUBLE_PINNED, 4, true);

	if (!buf)
		return;
	if (!transfer(c, buf, BUF_LEN, 2, 4, false) || !segment)
		goto out;
	after = memory_now();
	GREW(tx_bytes[ROCESHIM_MEM_PAGEABLE], ==, 2 * BUF_LEN);
	GREW(tx_bytes[ROCESHIM_MEM_PINNED], ==, 0);
	GREW(registrations, ==, 0);
out:
	cuda_double_unmark(buf);
	munmap(buf, BUF_LEN);
}

/*
 * cold: the case starts without waiting for the classifier: a refusal of
 * GPU memory may not wait for roceshim's lazy look for the driver.
 */
static const struct {
	const char *name;
	void (*run)(struct conn *c);
	bool cold;
} cases[] = {
	{ "pinned_send_registers_once", pinned_send_registers_once, false },
	{ "fork_child_sends_pinned_memory_intact",
	  fork_child_sends_pinned_memory_intact, false },
	{ "reallocated_range_registers_again",
	  reallocated_range_registers_again, false },
	{ "device_send_is_efault", device_send_is_efault, true },
	{ "managed_send_is_copied", managed_send_is_copied, false },
	{ "before_cuinit_everything_is_pageable",
	  before_cuinit_everything_is_pageable, false },
};

static int usage(void)
{
	size_t i;

	fprintf(stderr, "usage: cuda_send [--expect-rdma] [--bind B] A CASE\n"
			"cases:\n");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		fprintf(stderr, "  %s\n", cases[i].name);
	return 2;
}

int main(int argc, char **argv)
{
	const char *bind_at = NULL;
	struct conn c;
	size_t i;
	int arg;

	for (arg = 1; arg < argc && argv[arg][0] == '-'; arg++) {
		if (!strcmp(argv[arg], "--expect-rdma"))
			expect_rdma = true;
		else if (!strcmp(argv[arg], "--bind") && arg + 1 < argc)
			bind_at = argv[++arg];
		else
			return usage();
	}
	if (argc - arg != 2)
		return usage();
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(cases[i].name, argv[arg + 1]))
			break;
	if (i == sizeof(cases) / sizeof(cases[0]))
		return usage();
	snprintf(timeout_line, sizeof(timeout_line), "FAIL %s: timed out\n",
		 cases[i].name);
	signal(SIGALRM, timed_out);
	alarm(TIMEOUT_S);
	if (connect_pair(&c, argv[arg], bind_at)) {
		stats_attach();
		if (expect_rdma)
			check_on_rdma(&c);
		if (segment && !why[0] && !cases[i].cold)
			wait_for_classifier(&c);
	}
	if (!why[0])
		cases[i].run(&c);
	if (why[0])
		printf("FAIL %s: %s\n", cases[i].name, why);
	else
		printf("ok %s\n", cases[i].name);
	return why[0] ? 1 : 0;
}
