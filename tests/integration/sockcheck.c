// SPDX-License-Identifier: MIT
/*
 * sockcheck - socket-semantics conformance suite for roceshim.
 *
 * The suite is run twice, once plain and once with libroceshim.so in
 * LD_PRELOAD, and the two stdout transcripts must be byte-for-byte equal.
 * Every test therefore prints only deterministic text: its result line,
 * optionally preceded by "# NAME: ..." note lines (data digests).  Ports,
 * fds, pids and timings never reach stdout.
 *
 *	sockcheck [--server-addr A] [--client-addr B] [--only PATTERN]
 *		  [--list] [--timeout-scale N]
 *
 * Servers listen on A (ephemeral port).  Tests that say so bind their
 * client to B:0 before connecting; the others connect without a bind.
 * Both ends live in this process, so on a test fabric A and B are two
 * local addresses on different ports of the fabric.
 *
 * Each test is a function named for the one behaviour it checks and is
 * registered in the table at the bottom.  A test fails through the
 * ASSERT*() macros, which record "line N: reason" and jump to the test's
 * "out:" label, where everything it opened is released.
 *
 * Time limits: every wait inside a test has its own poll timeout.  On top
 * of that each test runs under alarm(): the first SIGALRM interrupts the
 * main thread's blocking call (EINTR, no SA_RESTART) so the test fails and
 * the suite continues; if the test still has not returned a few seconds
 * later, the second SIGALRM prints the verdict and summary and exits.
 * Helper threads block all signals so SIGALRM always reaches the main
 * thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Positive waits ("this must happen") give up after IO_MS * scale. */
#define IO_MS 3000
/* Negative waits ("this must not happen") watch for QUIET_MS. */
#define QUIET_MS 50
/* Default per-test limit; heavy tests ask for more in the table. */
#define LIMIT_S 5
/* Grace after the soft limit before the suite is aborted. */
#define GRACE_S 3
/* Whole-suite budget; tests past it are failed without running. */
#define SUITE_BUDGET_S 50

/* Socket buffer size used by tests that need to fill a connection. */
#define SMALL_BUF 65536

/* ------------------------------------------------------------------ */
/* Configuration and global state                                      */
/* ------------------------------------------------------------------ */

struct addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

static struct addr server_addr;
static struct addr client_addr;
/* The addresses as given, for a client run as a process of its own. */
static const char *server_arg = "127.0.0.1";
static const char *client_arg;
/* argv[0]: /proc/self/exe would be valgrind's tool under valgrind. */
static const char *self_path = "sockcheck";
static unsigned int timeout_scale = 1;

/* Environment probes, decided once with raw syscalls (see probe_env()). */
static bool have_ipv6;
static bool have_dual_stack;
static bool have_epoll_pwait2;

static volatile sig_atomic_t alarm_fired;
static volatile sig_atomic_t sigpipe_count;
static volatile sig_atomic_t sigusr1_count;

/* Pre-formatted verdict written by the SIGALRM handler on a hard hang. */
static char abort_msg[512];
static size_t abort_len;

static int io_ms(void)
{
	return IO_MS * (int)timeout_scale;
}

/* ------------------------------------------------------------------ */
/* Test context, failure reporting and assertion macros                */
/* ------------------------------------------------------------------ */

struct tctx {
	const char *name;
	bool failed;
	bool skipped;
	char reason[256];
	char notes[1024];
	size_t notes_len;
};

static const struct {
	int num;
	const char *name;
} errnames[] = {
/* clang-format off */
#define E(x) { x, #x }
	E(EAGAIN),	 E(EINTR),	 E(EPIPE),	 E(ECONNRESET),
	E(ECONNREFUSED), E(EINPROGRESS), E(EALREADY),	 E(EISCONN),
	E(ENOTCONN),	 E(EBADF),	 E(EINVAL),	 E(ENOENT),
	E(EEXIST),	 E(ENOSYS),	 E(ETIMEDOUT),	 E(EADDRINUSE),
	E(EAFNOSUPPORT), E(EADDRNOTAVAIL), E(ENOTSOCK),	 E(EOPNOTSUPP),
	E(ENOMEM),	 E(ENOBUFS),	 E(EMFILE),	 E(EFAULT),
	E(EPERM),	 E(EACCES),	 E(ENETUNREACH), E(EHOSTUNREACH),
#undef E
	/* clang-format on */
};

static const char *errname(int e)
{
	static __thread char buf[32];
	size_t i;

	if (e == 0)
		return "no error";
	for (i = 0; i < ARRAY_SIZE(errnames); i++)
		if (errnames[i].num == e)
			return errnames[i].name;
	snprintf(buf, sizeof(buf), "errno %d", e);
	return buf;
}

static void fail_at(struct tctx *t, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail_at(struct tctx *t, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	t->failed = true;
	n = snprintf(t->reason, sizeof(t->reason), "line %d: ", line);
	va_start(ap, fmt);
	vsnprintf(t->reason + n, sizeof(t->reason) - n, fmt, ap);
	va_end(ap);
}

static void skip(struct tctx *t, const char *why)
{
	t->skipped = true;
	snprintf(t->reason, sizeof(t->reason), "%s", why);
}

static void note(struct tctx *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note(struct tctx *t, const char *fmt, ...)
{
	size_t room = sizeof(t->notes) - t->notes_len;
	va_list ap;
	int n;

	if (room < 2)
		return;
	va_start(ap, fmt);
	n = vsnprintf(t->notes + t->notes_len, room - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > room - 2)
		n = room - 2;
	t->notes_len += n;
	t->notes[t->notes_len++] = '\n';
	t->notes[t->notes_len] = '\0';
}

static void note_digest(struct tctx *t, const char *what, size_t bytes,
			uint64_t digest)
{
	note(t, "%s: %zu bytes fnv1a64 %016" PRIx64, what, bytes, digest);
}

/*
 * The assertion macros expect a "struct tctx *t" and an "out:" label in
 * the calling function.  They record the first failure and jump to out.
 */
#define ASSERT(cond, ...)                                  \
	do {                                               \
		if (!(cond)) {                             \
			fail_at(t, __LINE__, __VA_ARGS__); \
			goto out;                          \
		}                                          \
	} while (0)

/* @expr must not return a negative value. */
#define ASSERT_OK(expr)                                                     \
	do {                                                                \
		if ((expr) < 0) {                                           \
			int e_ = errno;                                     \
			fail_at(t, __LINE__, "%s: %s", #expr, errname(e_)); \
			goto out;                                           \
		}                                                           \
	} while (0)

/* @expr must return -1 with errno @err. */
#define ASSERT_ERR(expr, err)                                             \
	do {                                                              \
		long r_ = (long)(expr);                                   \
		int e_ = errno;                                           \
		if (r_ != -1 || e_ != (err)) {                            \
			fail_at(t, __LINE__, "%s: want %s, got %ld (%s)", \
				#expr, errname(err), r_,                  \
				r_ == -1 ? errname(e_) : "no error");     \
			goto out;                                         \
		}                                                         \
	} while (0)

/* A helper that already recorded its failure returned non-zero. */
#define TRY(expr)                 \
	do {                      \
		if ((expr) != 0)  \
			goto out; \
	} while (0)

/* ------------------------------------------------------------------ */
/* Time, signals and threads                                           */
/* ------------------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* True if a call failed with EINTR that is not our timeout firing. */
static bool retry_intr(void)
{
	return errno == EINTR && !alarm_fired;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && retry_intr())
		;
}

static void on_alarm(int sig)
{
	ssize_t r;

	(void)sig;
	if (!alarm_fired) {
		alarm_fired = 1;
		alarm(GRACE_S * timeout_scale);
		return;
	}
	r = write(STDOUT_FILENO, abort_msg, abort_len);
	(void)r;
	_exit(1);
}

static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipe_count++;
}

static void on_sigusr1(int sig)
{
	(void)sig;
	sigusr1_count++;
}

static int install_handler(int sig, void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: a signal must interrupt waits */
	return sigaction(sig, &sa, NULL);
}

/* Threads start with every signal blocked; SIGALRM is the main thread's. */
static int start_thread(pthread_t *th, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(th, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

/* ------------------------------------------------------------------ */
/* Pattern generator and digest                                        */
/* ------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/*
 * Byte @off of the stream with @seed is a pure function of (seed, off), so
 * any slice of a stream can be generated or checked independently.
 */
static void pattern_fill(void *buf, size_t len, uint64_t seed, uint64_t off)
{
	unsigned char *p = buf;

	while (len) {
		uint64_t w = splitmix64((seed << 40) ^ (off >> 3));
		size_t n = 8 - (off & 7);

		w >>= (off & 7) * 8;
		if (n > len)
			n = len;
		off += n;
		len -= n;
		while (n--) {
			*p++ = w & 0xff;
			w >>= 8;
		}
	}
}

/* Returns the index of the first byte that differs, or @len if none. */
static size_t pattern_mismatch(const void *buf, size_t len, uint64_t seed,
			       uint64_t off)
{
	const unsigned char *p = buf;
	unsigned char want[4096];
	size_t done = 0;

	while (done < len) {
		size_t n = len - done, i;

		if (n > sizeof(want))
			n = sizeof(want);
		pattern_fill(want, n, seed, off + done);
		if (memcmp(want, p + done, n)) {
			for (i = 0; want[i] == p[done + i]; i++)
				;
			return done + i;
		}
		done += n;
	}
	return len;
}

#define FNV1A_INIT 0xcbf29ce484222325ULL

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* ------------------------------------------------------------------ */
/* Addresses                                                           */
/* ------------------------------------------------------------------ */

static int parse_addr(const char *s, struct addr *a)
{
	struct addrinfo hints, *res;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(s, NULL, &hints, &res))
		return -1;
	memset(a, 0, sizeof(*a));
	memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
	a->len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static int family(const struct addr *a)
{
	return a->ss.ss_family;
}

static struct sockaddr *sa(struct addr *a)
{
	return (struct sockaddr *)&a->ss;
}

static uint16_t addr_port(const struct addr *a)
{
	if (family(a) == AF_INET)
		return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
}

static void addr_set_port(struct addr *a, uint16_t port)
{
	if (family(a) == AF_INET)
		((struct sockaddr_in *)&a->ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&a->ss)->sin6_port = htons(port);
}

static bool addr_same_host(const struct addr *a, const struct addr *b)
{
	const struct sockaddr_in6 *a6, *b6;

	if (family(a) != family(b))
		return false;
	if (family(a) == AF_INET)
		return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)&b->ss)->sin_addr.s_addr;
	a6 = (const struct sockaddr_in6 *)&a->ss;
	b6 = (const struct sockaddr_in6 *)&b->ss;
	return !memcmp(&a6->sin6_addr, &b6->sin6_addr, 16);
}

static bool addr_equal(const struct addr *a, const struct addr *b)
{
	return addr_same_host(a, b) && addr_port(a) == addr_port(b);
}

/* The IPv4 address of @a, directly or from a v4-mapped IPv6 address. */
static bool addr_v4(const struct addr *a, struct in_addr *out)
{
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&a->ss;

	if (family(a) == AF_INET) {
		*out = ((const struct sockaddr_in *)&a->ss)->sin_addr;
		return true;
	}
	if (family(a) != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
		return false;
	memcpy(out, &a6->sin6_addr.s6_addr[12], 4);
	return true;
}

/* ::ffff:@v4 with @port. */
static void addr_v4_mapped(struct addr *out, struct in_addr v4, uint16_t port)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;

	memset(out, 0, sizeof(*out));
	s6->sin6_family = AF_INET6;
	s6->sin6_port = htons(port);
	s6->sin6_addr.s6_addr[10] = 0xff;
	s6->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&s6->sin6_addr.s6_addr[12], &v4, 4);
	out->len = sizeof(*s6);
}

static void addr_v6_any(struct addr *out)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;

	memset(out, 0, sizeof(*out));
	s6->sin6_family = AF_INET6;
	s6->sin6_addr = in6addr_any;
	out->len = sizeof(*s6);
}

static void addr_v6_loopback(struct addr *out)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;

	memset(out, 0, sizeof(*out));
	s6->sin6_family = AF_INET6;
	s6->sin6_addr = in6addr_loopback;
	out->len = sizeof(*s6);
}

static int local_addr(int fd, struct addr *a)
{
	memset(a, 0, sizeof(*a));
	a->len = sizeof(a->ss);
	return getsockname(fd, sa(a), &a->len);
}

static int peer_addr(int fd, struct addr *a)
{
	memset(a, 0, sizeof(*a));
	a->len = sizeof(a->ss);
	return getpeername(fd, sa(a), &a->len);
}

/* ------------------------------------------------------------------ */
/* Socket helpers                                                      */
/* ------------------------------------------------------------------ */

enum {
	PAIR_BIND_CLIENT = 1 << 0,   /* bind the client to client_addr:0 */
	PAIR_NONBLOCK = 1 << 1,	     /* both ends O_NONBLOCK once connected */
	PAIR_SMALL_BUFFERS = 1 << 2, /* SO_SNDBUF/SO_RCVBUF = SMALL_BUF */
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl);
}

static int set_int_opt(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val));
}

static int get_int_opt(int fd, int level, int name, int *val)
{
	socklen_t len = sizeof(*val);

	return getsockopt(fd, level, name, val, &len);
}

static int set_small_buffers(int fd)
{
	if (set_int_opt(fd, SOL_SOCKET, SO_SNDBUF, SMALL_BUF) < 0)
		return -1;
	return set_int_opt(fd, SOL_SOCKET, SO_RCVBUF, SMALL_BUF);
}

/* Waits up to @ms for @events; returns revents, 0 on timeout, -1 on error. */
static int wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int64_t end = now_ms() + ms;

	for (;;) {
		int64_t left = end - now_ms();
		int r = poll(&p, 1, left > 0 ? (int)left : 0);

		if (r > 0)
			return p.revents;
		if (r == 0)
			return 0;
		if (!retry_intr())
			return -1;
	}
}

static bool timeout_pending(void)
{
	return alarm_fired;
}

/* A listening socket on @at (port 0); its bound address goes to @bound. */
static int open_listener(struct tctx *t, const struct addr *at, int flags,
			 struct addr *bound)
{
	struct addr a = *at;
	int l;

	addr_set_port(&a, 0);
	l = socket(family(&a), SOCK_STREAM, 0);
	ASSERT_OK(l);
	if (flags & PAIR_SMALL_BUFFERS)
		ASSERT_OK(set_small_buffers(l));
	ASSERT_OK(bind(l, sa(&a), a.len));
	ASSERT_OK(listen(l, 16));
	ASSERT_OK(local_addr(l, bound));
	return l;
out:
	if (l >= 0)
		close(l);
	return -1;
}

/* A TCP socket of @fam, optionally bound to @bind_to:0. */
static int tcp_socket(struct tctx *t, int fam, int flags,
		      const struct addr *bind_to)
{
	struct addr a;
	int fd;

	fd = socket(fam, SOCK_STREAM, 0);
	ASSERT_OK(fd);
	if (flags & PAIR_SMALL_BUFFERS)
		ASSERT_OK(set_small_buffers(fd));
	if (bind_to) {
		a = *bind_to;
		addr_set_port(&a, 0);
		ASSERT_OK(bind(fd, sa(&a), a.len));
	}
	return fd;
out:
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Blocking connect; EINTR only when the test's time is up. */
static int connect_to(struct tctx *t, int fd, struct addr *to)
{
	int r;

	do {
		r = connect(fd, sa(to), to->len);
	} while (r < 0 && errno == EINTR && !timeout_pending());
	ASSERT_OK(r);
	return 0;
out:
	return -1;
}

/* accept4() once the listener reports a pending connection. */
static int accept_within(struct tctx *t, int l, int flags)
{
	int r, fd = -1;

	r = wait_fd(l, POLLIN, io_ms());
	ASSERT(r > 0, "listener never became readable (%d)", r);
	fd = accept4(l, NULL, NULL, flags);
	ASSERT_OK(fd);
out:
	return fd;
}

/*
 * A connected TCP pair: @server listens on @srv, @client connects to it,
 * bound to @cli:0 first when @cli is not NULL.
 */
static int make_pair_at(struct tctx *t, int *client, int *server, int flags,
			const struct addr *srv, const struct addr *cli)
{
	struct addr bound;
	int l = -1, c = -1, s = -1;

	l = open_listener(t, srv, flags, &bound);
	TRY(l < 0);
	c = tcp_socket(t, family(srv), flags, cli);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	if (flags & PAIR_NONBLOCK) {
		ASSERT_OK(set_nonblock(c, true));
		ASSERT_OK(set_nonblock(s, true));
	}
	close(l);
	*client = c;
	*server = s;
	return 0;
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
	return -1;
}

static int make_pair(struct tctx *t, int *client, int *server, int flags)
{
	return make_pair_at(t, client, server, flags, &server_addr,
			    flags & PAIR_BIND_CLIENT ? &client_addr : NULL);
}

/* Sends all of @buf, waiting for POLLOUT as needed; never raises SIGPIPE. */
static int send_all(struct tctx *t, int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t r;
	int ev;

	while (len) {
		r = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			p += r;
			len -= r;
			continue;
		}
		ASSERT(r < 0 && (errno == EAGAIN || retry_intr()),
		       "send_all: send: %s", r ? errname(errno) : "0");
		ev = wait_fd(fd, POLLOUT, io_ms());
		ASSERT(ev > 0, "send_all: socket never became writable");
	}
	return 0;
out:
	return -1;
}

/* Receives exactly @len bytes; EOF before that is a failure. */
static int recv_exact(struct tctx *t, int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t r;
	int ev;

	while (len) {
		r = recv(fd, p, len, MSG_DONTWAIT);
		if (r > 0) {
			p += r;
			len -= r;
			continue;
		}
		ASSERT(r != 0, "recv_exact: EOF with %zu bytes missing", len);
		ASSERT(errno == EAGAIN || retry_intr(), "recv_exact: recv: %s",
		       errname(errno));
		ev = wait_fd(fd, POLLIN, io_ms());
		ASSERT(ev > 0, "recv_exact: no data, %zu bytes missing", len);
	}
	return 0;
out:
	return -1;
}

static int send_pattern(struct tctx *t, int fd, uint64_t seed, size_t len)
{
	static __thread unsigned char buf[65536];
	size_t off = 0;

	while (off < len) {
		size_t n = len - off;

		if (n > sizeof(buf))
			n = sizeof(buf);
		pattern_fill(buf, n, seed, off);
		if (send_all(t, fd, buf, n))
			return -1;
		off += n;
	}
	return 0;
}

/* Receives @len bytes of stream @seed, checks them, returns their digest. */
static int recv_pattern(struct tctx *t, int fd, uint64_t seed, size_t len,
			uint64_t *digest)
{
	static __thread unsigned char buf[65536];
	uint64_t h = FNV1A_INIT;
	size_t off = 0, bad;

	while (off < len) {
		size_t n = len - off;

		if (n > sizeof(buf))
			n = sizeof(buf);
		TRY(recv_exact(t, fd, buf, n));
		bad = pattern_mismatch(buf, n, seed, off);
		ASSERT(bad == n, "data mismatch at byte %zu", off + bad);
		h = fnv1a(h, buf, n);
		off += n;
	}
	if (digest)
		*digest = h;
	return 0;
out:
	return -1;
}

/* Waits until @len bytes are queued for reading (seen with MSG_PEEK). */
static int wait_queued(struct tctx *t, int fd, size_t len)
{
	int64_t end = now_ms() + io_ms();
	char *buf = malloc(len);
	ssize_t r = 0;

	ASSERT(buf, "out of memory");
	for (;;) {
		r = recv(fd, buf, len, MSG_PEEK | MSG_DONTWAIT);
		if (r >= 0 && (size_t)r == len)
			break;
		ASSERT(r != 0, "wait_queued: EOF");
		ASSERT(r > 0 || errno == EAGAIN || retry_intr(),
		       "wait_queued: recv: %s", errname(errno));
		ASSERT(now_ms() < end, "wait_queued: only %zd of %zu bytes", r,
		       len);
		sleep_ms(1);
	}
	free(buf);
	return 0;
out:
	free(buf);
	return -1;
}

/* The next read on @fd must report end of stream. */
static int expect_eof(struct tctx *t, int fd)
{
	char c;
	ssize_t r;
	int ev;

	ev = wait_fd(fd, POLLIN, io_ms());
	ASSERT(ev > 0, "no EOF reported");
	r = recv(fd, &c, 1, MSG_DONTWAIT);
	ASSERT(r == 0, "recv after peer close: want 0, got %zd (%s)", r,
	       r < 0 ? errname(errno) : "data");
	return 0;
out:
	return -1;
}

/*
 * @len bytes of pattern @seed from @a to @b, then of @seed + 1 back, each
 * noted by digest.
 */
static int stream_both_ways(struct tctx *t, int a, int b, uint64_t seed,
			    size_t len)
{
	uint64_t h;

	TRY(send_pattern(t, a, seed, len));
	TRY(recv_pattern(t, b, seed, len, &h));
	note_digest(t, "one way", len, h);
	TRY(send_pattern(t, b, seed + 1, len));
	TRY(recv_pattern(t, a, seed + 1, len, &h));
	note_digest(t, "the other way", len, h);
	return 0;
out:
	return -1;
}

/* A short message each way proves both directions of @a <-> @b work. */
static int roundtrip(struct tctx *t, int a, int b)
{
	char buf[16];

	TRY(send_all(t, a, "ping-a-to-b", 11));
	TRY(recv_exact(t, b, buf, 11));
	ASSERT(!memcmp(buf, "ping-a-to-b", 11), "a->b data corrupted");
	TRY(send_all(t, b, "pong-b-to-a", 11));
	TRY(recv_exact(t, a, buf, 11));
	ASSERT(!memcmp(buf, "pong-b-to-a", 11), "b->a data corrupted");
	return 0;
out:
	return -1;
}

/*
 * A port on @at where nothing listens: a socket bound but not listening
 * keeps the port reserved, so a connect to it is refused without races.
 */
static int closed_port(struct tctx *t, const struct addr *at, struct addr *out)
{
	struct addr a = *at;
	int fd;

	addr_set_port(&a, 0);
	fd = socket(family(&a), SOCK_STREAM, 0);
	ASSERT_OK(fd);
	ASSERT_OK(bind(fd, sa(&a), a.len));
	ASSERT_OK(local_addr(fd, out));
	return fd;
out:
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Reaps @pid within the time limit, killing it if it hangs. */
static int wait_child(struct tctx *t, pid_t pid, int *status)
{
	int64_t end = now_ms() + io_ms();
	pid_t r;

	for (;;) {
		r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			break;
		if (now_ms() > end || timeout_pending())
			break;
		sleep_ms(2);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	ASSERT(0, "child did not exit in time");
out:
	return -1;
}

/* ------------------------------------------------------------------ */
/* Thread workers                                                      */
/* ------------------------------------------------------------------ */

/* One direction of a pattern stream, driven by a thread. */
struct stream {
	int fd;
	uint64_t seed;
	size_t len;
	uint64_t digest;
	char err[128];
};

/* Blocking sends of varying sizes (1..64 KiB), handling short writes. */
static void *stream_send(void *arg)
{
	struct stream *st = arg;
	unsigned char *buf = malloc(65536);
	size_t off = 0, i = 0;
	ssize_t r;

	if (!buf) {
		snprintf(st->err, sizeof(st->err), "out of memory");
		return NULL;
	}
	while (off < st->len) {
		size_t n = 1 + (i++ * 40503) % 65536;

		if (n > st->len - off)
			n = st->len - off;
		pattern_fill(buf, n, st->seed, off);
		r = send(st->fd, buf, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			snprintf(st->err, sizeof(st->err),
				 "send at byte %zu: %s", off,
				 r ? errname(errno) : "returned 0");
			break;
		}
		off += r;
	}
	free(buf);
	return NULL;
}

/* Reads with poll() deadlines (a stall is an error), verifying the data. */
static void *stream_recv(void *arg)
{
	struct stream *st = arg;
	unsigned char *buf = malloc(65536);
	uint64_t h = FNV1A_INIT;
	size_t off = 0, bad, i = 0;
	ssize_t r;

	if (!buf) {
		snprintf(st->err, sizeof(st->err), "out of memory");
		return NULL;
	}
	while (off < st->len) {
		size_t n = 1 + (i++ * 7919) % 65536;

		if (n > st->len - off)
			n = st->len - off;
		if (wait_fd(st->fd, POLLIN, io_ms()) <= 0) {
			snprintf(st->err, sizeof(st->err),
				 "stalled at byte %zu", off);
			break;
		}
		r = recv(st->fd, buf, n, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			snprintf(st->err, sizeof(st->err),
				 "recv at byte %zu: %s", off,
				 r ? errname(errno) : "early EOF");
			break;
		}
		bad = pattern_mismatch(buf, r, st->seed, off);
		if (bad != (size_t)r) {
			snprintf(st->err, sizeof(st->err),
				 "data mismatch at byte %zu", off + bad);
			break;
		}
		h = fnv1a(h, buf, r);
		off += r;
	}
	st->digest = h;
	free(buf);
	return NULL;
}

/*
 * Runs the @n streams in @tx (senders) and @rx (receivers) on threads and
 * joins them.  If a receiver fails, its connection is shut down so that a
 * sender blocked on it wakes up and the join cannot hang.
 */
static int run_streams(struct tctx *t, struct stream *tx, struct stream *rx,
		       size_t n)
{
	pthread_t ttx[16], trx[16];
	size_t i, started = 0;

	ASSERT(n <= ARRAY_SIZE(ttx), "too many streams");
	for (i = 0; i < n; i++) {
		if (start_thread(&trx[i], stream_recv, &rx[i]))
			break;
		if (start_thread(&ttx[i], stream_send, &tx[i])) {
			shutdown(rx[i].fd, SHUT_RDWR);
			pthread_join(trx[i], NULL);
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++) {
		pthread_join(trx[i], NULL);
		if (rx[i].err[0]) {
			shutdown(tx[i].fd, SHUT_RDWR);
			shutdown(rx[i].fd, SHUT_RDWR);
		}
	}
	for (i = 0; i < started; i++)
		pthread_join(ttx[i], NULL);
	ASSERT(started == n, "could not start threads");
	for (i = 0; i < n; i++) {
		ASSERT(!rx[i].err[0], "stream %zu receiver: %s", i, rx[i].err);
		ASSERT(!tx[i].err[0], "stream %zu sender: %s", i, tx[i].err);
	}
	return 0;
out:
	return -1;
}

/* Sends @pieces slices of a pattern stream, @delay_ms apart. */
struct dripper {
	int fd;
	uint64_t seed;
	size_t piece;
	int pieces;
	int delay_ms;
	char err[128];
};

static void *drip_send(void *arg)
{
	struct dripper *d = arg;
	unsigned char buf[4096];
	size_t off = 0;
	ssize_t r;
	int i;

	for (i = 0; i < d->pieces; i++) {
		sleep_ms(d->delay_ms);
		pattern_fill(buf, d->piece, d->seed, off);
		r = send(d->fd, buf, d->piece, MSG_NOSIGNAL);
		if (r < 0 || (size_t)r != d->piece) {
			snprintf(d->err, sizeof(d->err), "piece %d: %s", i,
				 r < 0 ? errname(errno) : "short send");
			return NULL;
		}
		off += d->piece;
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Tests: connection establishment                                     */
/* ------------------------------------------------------------------ */

static void blocking_connect_accept_without_bind(struct tctx *t)
{
	struct addr bound;
	int l = -1, c = -1, s = -1;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	c = tcp_socket(t, family(&server_addr), 0, NULL);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	/* The handshake is complete: accept() returns without waiting. */
	s = accept(l, NULL, NULL);
	ASSERT_OK(s);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

static void blocking_connect_accept_with_client_bind(struct tctx *t)
{
	struct addr bound, local;
	int l = -1, c = -1, s = -1;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	s = accept(l, NULL, NULL);
	ASSERT_OK(s);
	ASSERT_OK(local_addr(c, &local));
	ASSERT(addr_same_host(&local, &client_addr),
	       "client is not bound to the client address");
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

struct late_connect {
	struct addr to;
	int delay_ms;
	int fd;
	int err;
};

static void *connect_later(void *arg)
{
	struct late_connect *lc = arg;

	sleep_ms(lc->delay_ms);
	lc->fd = socket(family(&lc->to), SOCK_STREAM, 0);
	if (lc->fd < 0 ||
	    connect(lc->fd, (struct sockaddr *)&lc->to.ss, lc->to.len) < 0)
		lc->err = errno;
	return NULL;
}

static void blocking_accept_waits_for_client(struct tctx *t)
{
	struct late_connect lc = { .delay_ms = 100, .fd = -1 };
	bool joined = true;
	int l = -1, s = -1;
	pthread_t th;
	int64_t t0;

	l = open_listener(t, &server_addr, 0, &lc.to);
	TRY(l < 0);
	ASSERT(!start_thread(&th, connect_later, &lc), "pthread_create");
	joined = false;
	t0 = now_ms();
	s = accept(l, NULL, NULL);
	ASSERT_OK(s);
	ASSERT(now_ms() - t0 >= lc.delay_ms / 2,
	       "accept returned before the client connected");
	pthread_join(th, NULL);
	joined = true;
	ASSERT(!lc.err, "client connect: %s", errname(lc.err));
	TRY(roundtrip(t, lc.fd, s));
out:
	if (!joined) {
		/* accept failed: let the client connect, then drop it */
		pthread_join(th, NULL);
	}
	close_fd(&l);
	close_fd(&s);
	close_fd(&lc.fd);
}

/*
 * A listener (*l, at *bound) and a non-blocking client socket (*c) whose
 * connect() to it has started: 0, or -1 with the test failed.
 */
static int start_nonblocking_connect(struct tctx *t, int *l, int *c,
				     struct addr *bound)
{
	int r;

	*l = open_listener(t, &server_addr, 0, bound);
	if (*l < 0)
		return -1;
	*c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	if (*c < 0)
		return -1;
	ASSERT_OK(set_nonblock(*c, true));
	r = connect(*c, sa(bound), bound->len);
	/* Immediate success is allowed by POSIX; Linux says EINPROGRESS. */
	ASSERT(r == 0 || errno == EINPROGRESS, "connect: %s", errname(errno));
	return 0;
out:
	return -1;
}

/*
 * The one event epoll set ep reports next is EPOLLOUT with data, and c's
 * connect succeeded: 0, or -1 with the test failed.
 */
static int expect_connected_via_epollout(struct tctx *t, int ep, int c,
					 uint64_t data)
{
	struct epoll_event ev;
	int r, err = -1;

	memset(&ev, 0, sizeof(ev));
	r = epoll_wait(ep, &ev, 1, io_ms());
	ASSERT(r == 1, "epoll_wait: want 1 event, got %d", r);
	ASSERT(ev.data.u64 == data, "wrong epoll data");
	ASSERT(ev.events == EPOLLOUT, "want EPOLLOUT, got events %#x",
	       ev.events);
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_ERROR, &err));
	ASSERT(err == 0, "SO_ERROR: %s", errname(err));
	return 0;
out:
	return -1;
}

static void nonblocking_connect_completes_via_epollout(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = 7 };
	int l = -1, c = -1, s = -1, ep = -1, r;
	struct addr bound;

	TRY(start_nonblocking_connect(t, &l, &c, &bound));
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	TRY(expect_connected_via_epollout(t, ep, c, 7));
	/*
	 * The first connect() after completion reports the outcome: Linux
	 * returns 0, BSD-derived stacks EISCONN.  After that, EISCONN.
	 */
	r = connect(c, sa(&bound), bound.len);
	ASSERT(r == 0 || errno == EISCONN, "second connect: %s",
	       errname(errno));
	ASSERT_ERR(connect(c, sa(&bound), bound.len), EISCONN);
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&ep);
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/*
 * Netty's shape: the socket is in the epoll set *ep (with data) before
 * connect(), and EPOLLOUT is asked for with EPOLL_CTL_MOD once connect()
 * says EINPROGRESS; *s is the connection accepted from *l.  0, or -1 with
 * the test failed (what was opened is the caller's to close).
 */
static int connect_watched_from_the_start(struct tctx *t, int *l, int *c,
					  int *s, int *ep, uint64_t data)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET,
				  .data.u64 = data };
	struct addr bound;
	int r;

	*l = open_listener(t, &server_addr, 0, &bound);
	TRY(*l < 0);
	*c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(*c < 0);
	ASSERT_OK(set_nonblock(*c, true));
	ASSERT_OK(*ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_OK(epoll_ctl(*ep, EPOLL_CTL_ADD, *c, &ev));
	r = connect(*c, sa(&bound), bound.len);
	ASSERT(r == 0 || errno == EINPROGRESS, "connect: %s", errname(errno));
	ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
	ASSERT_OK(epoll_ctl(*ep, EPOLL_CTL_MOD, *c, &ev));
	TRY(expect_connected_via_epollout(t, *ep, *c, data));
	*s = accept_within(t, *l, 0);
	TRY(*s < 0);
	return 0;
out:
	return -1;
}

static void epoll_registration_before_connect_reports_epollout(struct tctx *t)
{
	int l = -1, c = -1, s = -1, ep = -1;

	TRY(connect_watched_from_the_start(t, &l, &c, &s, &ep, 9));
	TRY(roundtrip(t, c, s));
out:
	close_fd(&ep);
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/*
 * The next event epoll set ep reports has data and EPOLLIN, and c then
 * reads what s sent: 0, or -1 with the test failed.
 */
static int expect_data_via_epoll(struct tctx *t, int ep, int c, int s,
				 uint64_t data)
{
	struct epoll_event ev;
	char in[5];
	int r;

	ASSERT_OK(send_all(t, s, "hello", 5));
	memset(&ev, 0, sizeof(ev));
	r = epoll_wait(ep, &ev, 1, io_ms());
	ASSERT(r == 1, "epoll_wait after the data: want 1 event, got %d", r);
	ASSERT(ev.data.u64 == data, "wrong epoll data");
	ASSERT(ev.events & EPOLLIN, "want EPOLLIN, got events %#x", ev.events);
	ASSERT(recv(c, in, sizeof(in), MSG_DONTWAIT) == 5 &&
		       !memcmp(in, "hello", 5),
	       "recv after EPOLLIN: not the 5 bytes sent");
	return 0;
out:
	return -1;
}

/*
 * An event loop that registers its socket before a non-blocking connect
 * (Netty, nginx's upstreams, Boost.Asio) learns of the peer's data from
 * that registration.
 */
static void epoll_registration_before_connect_reports_the_data(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u64 = 11 };
	int l = -1, c = -1, s = -1, ep = -1;

	TRY(connect_watched_from_the_start(t, &l, &c, &s, &ep, 11));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev));
	TRY(expect_data_via_epoll(t, ep, c, s, 11));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL));
out:
	close_fd(&ep);
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/*
 * A socket registered before a blocking connect (Boost.Asio's synchronous
 * connect, then asynchronous reads): the registration reports the data.
 */
static void
epoll_registration_before_blocking_connect_reports_the_data(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 12 };
	int l = -1, c = -1, s = -1, ep = -1;
	struct addr bound;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	TRY(connect_to(t, c, &bound));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(expect_data_via_epoll(t, ep, c, s, 12));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL));
out:
	close_fd(&ep);
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/*
 * Vectored calls on a socket whose non-blocking connect may still be in
 * progress: EAGAIN or success, never EPIPE, SIGPIPE or ENOTCONN.
 */
static void vectored_calls_during_nonblocking_connect_wait(struct tctx *t)
{
	char out[5] = "hello", in[5];
	struct iovec iov = { .iov_base = out, .iov_len = sizeof(out) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	int l = -1, c = -1, s = -1;
	ssize_t n;
	struct addr bound;

	TRY(start_nonblocking_connect(t, &l, &c, &bound));
	iov.iov_base = in;
	n = recvmsg(c, &msg, 0);
	ASSERT(n < 0 && errno == EAGAIN, "recvmsg: want EAGAIN, got %zd (%s)",
	       n, errname(errno));
	iov.iov_base = out;
	n = writev(c, &iov, 1);
	ASSERT(n == sizeof(out) || (n < 0 && errno == EAGAIN),
	       "writev: want 5 or EAGAIN, got %zd (%s)", n, errname(errno));
	if (n < 0) {
		ASSERT(wait_fd(c, POLLOUT, io_ms()) == POLLOUT,
		       "not writable after connect");
		ASSERT_OK(n = writev(c, &iov, 1));
		ASSERT(n == sizeof(out), "short writev: %zd", n);
	}
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(recv_exact(t, s, in, sizeof(in)));
	ASSERT(!memcmp(in, out, sizeof(in)), "wrong bytes");
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/* The connect goes on for a dup of the socket once the first fd closes. */
static void connect_completes_for_a_dup_of_a_closed_fd(struct tctx *t)
{
	int l = -1, c = -1, d = -1, s = -1, err = -1;
	struct addr bound;

	TRY(start_nonblocking_connect(t, &l, &c, &bound));
	ASSERT_OK(d = dup(c));
	close_fd(&c);
	ASSERT(wait_fd(d, POLLOUT, io_ms()) == POLLOUT,
	       "dup not writable after connect");
	ASSERT_OK(get_int_opt(d, SOL_SOCKET, SO_ERROR, &err));
	ASSERT(err == 0, "SO_ERROR: %s", errname(err));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(roundtrip(t, d, s));
out:
	close_fd(&l);
	close_fd(&d);
	close_fd(&s);
}

/* Each call succeeds: errno must still hold what the program put there. */
#define ASSERT_ERRNO_KEPT(call)                                               \
	do {                                                                  \
		errno = EDOM;                                                 \
		ASSERT_OK(call);                                              \
		ASSERT(errno == EDOM, "%s succeeded but set errno %s", #call, \
		       errname(errno));                                       \
	} while (0)

static void successful_calls_leave_errno_alone(struct tctx *t)
{
	struct addr a = server_addr, bound;
	int l = -1, c = -1, s = -1;
	char byte = 'x';

	addr_set_port(&a, 0);
	ASSERT_ERRNO_KEPT(l = socket(family(&a), SOCK_STREAM, 0));
	ASSERT_ERRNO_KEPT(bind(l, sa(&a), a.len));
	ASSERT_ERRNO_KEPT(listen(l, 16));
	ASSERT_OK(local_addr(l, &bound));
	ASSERT_ERRNO_KEPT(c = socket(family(&bound), SOCK_STREAM, 0));
	ASSERT_ERRNO_KEPT(connect(c, sa(&bound), bound.len));
	ASSERT_ERRNO_KEPT(s = accept(l, NULL, NULL));
	ASSERT_ERRNO_KEPT(send(c, &byte, 1, 0));
	ASSERT_ERRNO_KEPT(recv(s, &byte, 1, 0));
	ASSERT_ERRNO_KEPT(write(s, &byte, 1));
	ASSERT_ERRNO_KEPT(read(c, &byte, 1));
	ASSERT_ERRNO_KEPT(shutdown(c, SHUT_WR));
	ASSERT_ERRNO_KEPT(close(c));
	c = -1;
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/*
 * The same around a non-blocking connect and its epoll registration, and
 * for the vectored calls, recvmsg() with TCP_INQ's control message, and a
 * send with MSG_ZEROCOPY on a socket without SO_ZEROCOPY: gRPC 1.51 reads
 * connect()'s errno only after its epoll_ctl().
 */
static void calls_around_a_nonblocking_connect_leave_errno_alone(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLET,
				  .data.u64 = 9 };
	char buf[32] = "0123456789", control[64];
	struct iovec iov = { .iov_base = buf, .iov_len = 10 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct pollfd pfd = { .events = POLLIN };
	int l = -1, c = -1, s = -1, ep = -1, on = 1, queued = 0, i, err;
	socklen_t len = sizeof(err);
	struct addr bound;

	TRY(start_nonblocking_connect(t, &l, &c, &bound));
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_ERRNO_KEPT(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	ASSERT_ERRNO_KEPT(epoll_wait(ep, &ev, 1, 10000));
	ASSERT_ERRNO_KEPT(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len));
	ASSERT(!err, "SO_ERROR %s", errname(err));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	ASSERT_ERRNO_KEPT(setsockopt(s, IPPROTO_TCP, TCP_INQ, &on, sizeof(on)));
	ASSERT_ERRNO_KEPT(writev(c, &iov, 1));
	ASSERT_ERRNO_KEPT(send(c, buf, 10, MSG_ZEROCOPY));
	pfd.fd = s;
	ASSERT_ERRNO_KEPT(poll(&pfd, 1, 10000));
	for (i = 0; i < 1000 && queued < 20; i++) {
		ASSERT_ERRNO_KEPT(ioctl(s, FIONREAD, &queued));
		if (queued < 20)
			usleep(10000);
	}
	msg.msg_control = control;
	msg.msg_controllen = sizeof(control);
	ASSERT_ERRNO_KEPT(recvmsg(s, &msg, 0));
	ASSERT_ERRNO_KEPT(readv(s, &iov, 1));
	ASSERT_ERRNO_KEPT(epoll_ctl(ep, EPOLL_CTL_MOD, c, &ev));
	ASSERT_ERRNO_KEPT(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL));
	ASSERT_ERRNO_KEPT(shutdown(c, SHUT_WR));
out:
	close_fd(&ep);
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/* The descriptors open in this process, or -1. */
static int count_open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *entry;
	int n = 0;

	if (!dir)
		return -1;
	while ((entry = readdir(dir)))
		n += entry->d_name[0] != '.';
	closedir(dir);
	return n - 1; /* the directory's own */
}

/*
 * A program that keeps just the descriptors it needs below RLIMIT_NOFILE
 * can still listen, connect and accept: roceshim's own descriptors must
 * not take them (Twisted's test_acceptOutOfFiles does this).
 */
static void connection_fits_three_descriptors_below_the_limit(struct tctx *t)
{
	struct rlimit old, lim;
	int c = -1, s = -1, open_fds;
	bool lowered = false;
	char byte = 'x';

	ASSERT_OK(getrlimit(RLIMIT_NOFILE, &old));
	ASSERT_OK(open_fds = count_open_fds());
	lim = old;
	lim.rlim_cur = open_fds + 3;
	ASSERT_OK(setrlimit(RLIMIT_NOFILE, &lim));
	lowered = true;
	TRY(make_pair(t, &c, &s, 0));
	TRY(send_all(t, c, &byte, 1));
	ASSERT(recv(s, &byte, 1, 0) == 1, "recv: %s", errname(errno));
	note(t, "connected at the limit");
out:
	close_fd(&c);
	close_fd(&s);
	if (lowered)
		setrlimit(RLIMIT_NOFILE, &old);
}

/* Marks in open[] the descriptors below n open in this process. */
static int list_open_fds(bool *open, int n)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *entry;
	int fd;

	if (!dir)
		return -1;
	memset(open, 0, n * sizeof(*open));
	while ((entry = readdir(dir))) {
		fd = atoi(entry->d_name);
		if (entry->d_name[0] != '.' && fd != dirfd(dir) && fd < n)
			open[fd] = true;
	}
	closedir(dir);
	return 0;
}

#define LOW_FDS 1024

/*
 * A connection takes the program's two sockets below RLIMIT_NOFILE and
 * nothing else there: whatever else it needs must not shift the numbers
 * the program's own socket(), accept() and open() get.  The first pair
 * makes what a process needs once; the limit is lowered below the hard
 * one, so that there is room above it.
 */
static void
connection_takes_no_number_below_the_limit_but_its_own(struct tctx *t)
{
	static bool before[LOW_FDS], after[LOW_FDS];
	struct rlimit old, lim;
	int c = -1, s = -1, fd;
	bool lowered = false;

	ASSERT_OK(getrlimit(RLIMIT_NOFILE, &old));
	lim = old;
	lim.rlim_cur = LOW_FDS;
	if (old.rlim_max != RLIM_INFINITY && old.rlim_max <= LOW_FDS)
		lim.rlim_cur = old.rlim_max / 2;
	ASSERT_OK(setrlimit(RLIMIT_NOFILE, &lim));
	lowered = true;
	TRY(make_pair(t, &c, &s, 0));
	TRY(roundtrip(t, c, s));
	close_fd(&c);
	close_fd(&s);
	ASSERT_OK(list_open_fds(before, (int)lim.rlim_cur));
	TRY(make_pair(t, &c, &s, 0));
	TRY(roundtrip(t, c, s));
	ASSERT_OK(list_open_fds(after, (int)lim.rlim_cur));
	for (fd = 0; fd < (int)lim.rlim_cur; fd++)
		ASSERT(!after[fd] || before[fd] || fd == c || fd == s,
		       "descriptor %d is new and neither socket of the pair",
		       fd);
out:
	close_fd(&c);
	close_fd(&s);
	if (lowered)
		setrlimit(RLIMIT_NOFILE, &old);
}

static void connect_to_closed_port_is_refused(struct tctx *t)
{
	int hole = -1, c = -1;
	struct addr to;

	hole = closed_port(t, &server_addr, &to);
	TRY(hole < 0);
	c = tcp_socket(t, family(&server_addr), 0, NULL);
	TRY(c < 0);
	ASSERT_ERR(connect(c, sa(&to), to.len), ECONNREFUSED);
out:
	close_fd(&hole);
	close_fd(&c);
}

static void nonblocking_connect_to_closed_port_reports_so_error(struct tctx *t)
{
	int hole = -1, c = -1, r, ev, err = -1;
	struct addr to;

	hole = closed_port(t, &server_addr, &to);
	TRY(hole < 0);
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	ASSERT_OK(set_nonblock(c, true));
	r = connect(c, sa(&to), to.len);
	ASSERT(r < 0, "connect to a closed port succeeded");
	if (errno == ECONNREFUSED)
		goto out; /* refused synchronously: also conforming */
	ASSERT(errno == EINPROGRESS, "connect: %s", errname(errno));
	ev = wait_fd(c, POLLOUT, io_ms());
	ASSERT(ev > 0, "no poll event after refused connect");
	ASSERT(ev & (POLLERR | POLLHUP), "want POLLERR|POLLHUP, got %#x", ev);
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_ERROR, &err));
	ASSERT(err == ECONNREFUSED, "SO_ERROR: want ECONNREFUSED, got %s",
	       errname(err));
	/* Reading SO_ERROR clears it. */
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_ERROR, &err));
	ASSERT(err == 0, "SO_ERROR not cleared: %s", errname(err));
out:
	close_fd(&hole);
	close_fd(&c);
}

/*
 * A socket whose connect was refused may connect again, as a program
 * that waits for its server does.  A refused connect gives back the port
 * the kernel chose, though getsockname() goes on naming it: the next
 * connect goes out from another, and each stream must reach the other
 * end whole, whichever port that is.  bind_to: the client's address
 * (port 0), or NULL.
 */
static int connect_again_after_refusals(struct tctx *t,
					const struct addr *bind_to)
{
	const size_t len = 32 << 10;
	int l = -1, c = -1, s = -1, i, ret = -1;
	struct addr to;

	l = closed_port(t, &server_addr, &to);
	TRY(l < 0);
	c = tcp_socket(t, family(&server_addr), 0, bind_to);
	TRY(c < 0);
	for (i = 0; i < 2; i++)
		ASSERT_ERR(connect(c, sa(&to), to.len), ECONNREFUSED);
	ASSERT_OK(listen(l, 16));
	TRY(connect_to(t, c, &to));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(stream_both_ways(t, c, s, 61, len));
	ASSERT_OK(shutdown(c, SHUT_WR));
	TRY(expect_eof(t, s));
	ret = 0;
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
	return ret;
}

static void connect_again_after_refusals_carries_both_streams(struct tctx *t)
{
	connect_again_after_refusals(t, NULL);
}

static void
bound_connect_again_after_refusals_carries_both_streams(struct tctx *t)
{
	connect_again_after_refusals(t, &client_addr);
}

/*
 * A program with a fast timer (SIGUSR1 every millisecond, its handler
 * without SA_RESTART) that takes a connect's EINTR for a failure and
 * connects again on a new socket: each of its connections gets through
 * within a few tries, as the kernel's connect to a peer on the route is
 * over before most signals come, and carries bytes.  (A connect that gave
 * EINTR may still complete: its connection waits in the listener's
 * queue, and is told apart by its port.)
 */
#define FAST_TIMER_CONNECTIONS 10
#define FAST_TIMER_TRIES       100
#define FAST_TIMER_PERIOD_NS   1000000

/*
 * The end of the connection that l's queue holds for client c: from the
 * ends accepted so far (pool, *pooled of them), or accepted now, the
 * others pooled for the clients after c.
 */
static int accept_peer_of(struct tctx *t, int l, int c, int *pool, int *pooled)
{
	struct addr want, got;
	int s = -1, i;

	ASSERT_OK(local_addr(c, &want));
	for (i = 0;; i++) {
		if (i == *pooled) {
			ASSERT(*pooled < FAST_TIMER_CONNECTIONS *
						 FAST_TIMER_TRIES,
			       "no connection from the client's port");
			pool[i] = accept_within(t, l, 0);
			TRY(pool[i] < 0);
			(*pooled)++;
		}
		if (pool[i] < 0)
			continue;
		ASSERT_OK(peer_addr(pool[i], &got));
		if (addr_equal(&got, &want)) {
			s = pool[i];
			pool[i] = -1;
			return s;
		}
	}
out:
	return -1;
}

static void
connect_retried_after_eintr_under_a_fast_timer_connects(struct tctx *t)
{
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL,
				.sigev_signo = SIGUSR1 };
	struct itimerspec period = { .it_interval.tv_nsec =
					     FAST_TIMER_PERIOD_NS,
				     .it_value.tv_nsec = FAST_TIMER_PERIOD_NS };
	struct itimerspec off = { .it_value.tv_nsec = 0 };
	int c[FAST_TIMER_CONNECTIONS], l = -1, s = -1, i, tries = 0, r;
	int pool[FAST_TIMER_CONNECTIONS * FAST_TIMER_TRIES], pooled = 0;
	timer_t timer;
	bool armed = false;
	struct addr to;

	for (i = 0; i < FAST_TIMER_CONNECTIONS; i++)
		c[i] = -1;
	l = closed_port(t, &server_addr, &to);
	TRY(l < 0);
	ASSERT_OK(listen(l, FAST_TIMER_CONNECTIONS * FAST_TIMER_TRIES));
	ASSERT_OK(timer_create(CLOCK_MONOTONIC, &sev, &timer));
	armed = true;
	ASSERT_OK(timer_settime(timer, 0, &period, NULL));
	for (i = 0; i < FAST_TIMER_CONNECTIONS; i++) {
		for (tries = 1; tries <= FAST_TIMER_TRIES; tries++) {
			c[i] = tcp_socket(t, family(&server_addr), 0,
					  &client_addr);
			TRY(c[i] < 0);
			r = connect(c[i], sa(&to), to.len);
			if (!r)
				break;
			ASSERT(errno == EINTR, "connect: %s", errname(errno));
			close_fd(&c[i]);
		}
		ASSERT(c[i] >= 0, "connection %d: EINTR %d times", i,
		       FAST_TIMER_TRIES);
	}
	ASSERT_OK(timer_settime(timer, 0, &off, NULL));
	for (i = 0; i < FAST_TIMER_CONNECTIONS; i++) {
		s = accept_peer_of(t, l, c[i], pool, &pooled);
		TRY(s < 0);
		TRY(roundtrip(t, c[i], s));
		close_fd(&s);
	}
out:
	if (armed)
		timer_delete(timer);
	for (i = 0; i < FAST_TIMER_CONNECTIONS; i++)
		close_fd(&c[i]);
	for (i = 0; i < pooled; i++)
		close_fd(&pool[i]);
	close_fd(&l);
	close_fd(&s);
}

/*
 * connect() to AF_UNSPEC dissolves a connection (the kernel resets it),
 * and the socket may then connect elsewhere: the old peer reads what
 * came before and then the end, and the new one gets the whole stream.
 */
static void connect_unspec_then_elsewhere_carries_the_new_stream(struct tctx *t)
{
	const size_t len = 32 << 10;
	struct sockaddr unspec = { .sa_family = AF_UNSPEC };
	int c = -1, s1 = -1, s2 = -1, l2 = -1;
	struct addr to;
	char buf[16];
	ssize_t r;

	TRY(make_pair(t, &c, &s1, 0));
	TRY(roundtrip(t, c, s1));
	ASSERT_OK(connect(c, &unspec, sizeof(unspec)));
	r = recv(s1, buf, sizeof(buf), 0);
	note(t, "old peer reads %s",
	     r < 0 ? errname(errno)
	     : r   ? "data"
		   : "EOF");
	l2 = open_listener(t, &server_addr, 0, &to);
	TRY(l2 < 0);
	TRY(connect_to(t, c, &to));
	s2 = accept_within(t, l2, 0);
	TRY(s2 < 0);
	TRY(stream_both_ways(t, c, s2, 63, len));
out:
	close_fd(&c);
	close_fd(&s1);
	close_fd(&s2);
	close_fd(&l2);
}

/*
 * shutdown() of a socket whose connect is in progress abandons the
 * connect, as Linux's disconnect does: 0, then POLLERR and POLLHUP,
 * SO_ERROR ECONNRESET (once), and EPIPE for a send.  The listener's
 * queue is full, so the SYN goes unanswered and the connect stays in
 * progress.
 */
static void shutdown_abandons_connect_in_progress(struct tctx *t)
{
	int l = -1, filler = -1, c = -1, r, ev, err = -1;
	struct addr a = server_addr, bound;

	addr_set_port(&a, 0);
	ASSERT_OK(l = socket(family(&a), SOCK_STREAM, 0));
	ASSERT_OK(bind(l, sa(&a), a.len));
	ASSERT_OK(listen(l, 0));
	ASSERT_OK(local_addr(l, &bound));
	filler = tcp_socket(t, family(&a), 0, NULL);
	TRY(filler < 0);
	TRY(connect_to(t, filler, &bound));
	c = tcp_socket(t, family(&a), 0, &client_addr);
	TRY(c < 0);
	ASSERT_OK(set_nonblock(c, true));
	r = connect(c, sa(&bound), bound.len);
	ASSERT(r < 0 && errno == EINPROGRESS, "connect: %d, %s", r,
	       errname(errno));
	ASSERT_OK(shutdown(c, SHUT_WR));
	ev = wait_fd(c, POLLOUT, io_ms());
	ASSERT((ev & (POLLERR | POLLHUP)) == (POLLERR | POLLHUP),
	       "want POLLERR|POLLHUP, got %#x", ev);
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_ERROR, &err));
	ASSERT(err == ECONNRESET, "SO_ERROR: want ECONNRESET, got %s",
	       errname(err));
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_ERROR, &err));
	ASSERT(err == 0, "SO_ERROR not cleared: %s", errname(err));
	ASSERT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
out:
	close_fd(&c);
	close_fd(&filler);
	close_fd(&l);
}

static void connect_on_connected_socket_gives_eisconn(struct tctx *t)
{
	int c = -1, s = -1;
	struct addr peer;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(peer_addr(c, &peer));
	ASSERT_ERR(connect(c, sa(&peer), peer.len), EISCONN);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

static void unconnected_socket_reports_enotconn(struct tctx *t)
{
	struct addr a;
	char buf[4];
	int c = -1;

	c = tcp_socket(t, family(&server_addr), 0, NULL);
	TRY(c < 0);
	a.len = sizeof(a.ss);
	ASSERT_ERR(getpeername(c, sa(&a), &a.len), ENOTCONN);
	ASSERT_ERR(recv(c, buf, sizeof(buf), MSG_DONTWAIT), ENOTCONN);
	ASSERT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	ASSERT_ERR(shutdown(c, SHUT_RDWR), ENOTCONN);
out:
	close_fd(&c);
}

static void accept4_applies_nonblock_and_cloexec(struct tctx *t)
{
	int l = -1, c = -1, s = -1, fl, fdfl;
	struct addr bound;
	char buf[4];

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	c = tcp_socket(t, family(&server_addr), 0, NULL);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	s = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	ASSERT_OK(s);
	ASSERT_OK(fl = fcntl(s, F_GETFL));
	ASSERT(fl & O_NONBLOCK, "O_NONBLOCK not set");
	ASSERT_OK(fdfl = fcntl(s, F_GETFD));
	ASSERT(fdfl & FD_CLOEXEC, "FD_CLOEXEC not set");
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

static void accept_does_not_inherit_listener_nonblock(struct tctx *t)
{
	int l = -1, c = -1, s = -1, fl, fdfl;
	struct addr bound;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT_OK(set_nonblock(l, true));
	c = tcp_socket(t, family(&server_addr), 0, NULL);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	/* Linux: file status flags are not inherited from the listener. */
	ASSERT_OK(fl = fcntl(s, F_GETFL));
	ASSERT(!(fl & O_NONBLOCK), "accepted socket inherited O_NONBLOCK");
	ASSERT_OK(fdfl = fcntl(s, F_GETFD));
	ASSERT(!(fdfl & FD_CLOEXEC), "accepted socket has FD_CLOEXEC");
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

static void nonblocking_accept_gives_eagain_until_client_arrives(struct tctx *t)
{
	int l = -1, c = -1, s = -1, ev;
	struct addr bound;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT_OK(set_nonblock(l, true));
	ASSERT_ERR(accept(l, NULL, NULL), EAGAIN);
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	ev = wait_fd(l, POLLIN, io_ms());
	ASSERT(ev == POLLIN, "listener: want POLLIN, got %#x", ev);
	s = accept(l, NULL, NULL);
	ASSERT_OK(s);
	ASSERT_ERR(accept(l, NULL, NULL), EAGAIN);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

static void getsockname_getpeername_agree_between_ends(struct tctx *t)
{
	struct addr bound, acc, cl, cp, sl, sp;
	int l = -1, c = -1, s = -1;
	socklen_t want_len;

	want_len = family(&server_addr) == AF_INET
			   ? sizeof(struct sockaddr_in)
			   : sizeof(struct sockaddr_in6);
	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT(addr_same_host(&bound, &server_addr),
	       "listener not bound to the server address");
	ASSERT(addr_port(&bound) != 0, "listener got no port");
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	memset(&acc, 0, sizeof(acc));
	acc.len = sizeof(acc.ss);
	ASSERT(wait_fd(l, POLLIN, io_ms()) > 0, "no pending connection");
	s = accept(l, sa(&acc), &acc.len);
	ASSERT_OK(s);
	ASSERT_OK(local_addr(c, &cl));
	ASSERT_OK(peer_addr(c, &cp));
	ASSERT_OK(local_addr(s, &sl));
	ASSERT_OK(peer_addr(s, &sp));
	ASSERT(acc.len == want_len && cl.len == want_len &&
		       cp.len == want_len && sl.len == want_len &&
		       sp.len == want_len,
	       "unexpected address length");
	ASSERT(addr_equal(&acc, &sp), "accept() address != getpeername()");
	ASSERT(addr_equal(&cl, &sp), "client local != server's peer");
	ASSERT(addr_equal(&cp, &sl), "client's peer != server local");
	ASSERT(addr_equal(&sl, &bound), "server local != listener address");
	ASSERT(addr_same_host(&cl, &client_addr),
	       "client local host != client address");
	ASSERT(addr_port(&cl) != 0, "client got no port");
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: data transfer calls                                          */
/* ------------------------------------------------------------------ */

/* The client's first 1000 bytes, seed's pattern. */
static int send_first(struct tctx *t, int c, int seed)
{
	unsigned char out_buf[1000];

	pattern_fill(out_buf, sizeof(out_buf), seed, 0);
	return send_all(t, c, out_buf, sizeof(out_buf));
}

/*
 * The server reads send_first()'s bytes whole and sends 100 of them back,
 * which the client reads.
 */
static int reply_to_first(struct tctx *t, int c, int s, int seed)
{
	unsigned char want[1000], in[1000];
	ssize_t r;

	pattern_fill(want, sizeof(want), seed, 0);
	TRY(recv_exact(t, s, in, sizeof(in)));
	ASSERT(!memcmp(in, want, sizeof(in)), "data corrupted");
	note_digest(t, "read", sizeof(in), fnv1a(FNV1A_INIT, in, sizeof(in)));
	r = write(s, in, 100);
	ASSERT(r == 100, "write back: %zd", r);
	TRY(recv_exact(t, c, in, 100));
	ASSERT(!memcmp(in, want, 100), "reply corrupted");
	return 0;
out:
	return -1;
}

/*
 * TCP_DEFER_ACCEPT (set after listen(), as Apache's AcceptFilter does):
 * accept() returns once the client's first bytes are there, and they
 * arrive whole.
 */
static void defer_accept_listener_serves_its_client(struct tctx *t)
{
	int l = -1, c = -1, s = -1, secs = 1;
	struct addr bound;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT_OK(setsockopt(l, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs,
			     sizeof(secs)));
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	TRY(send_first(t, c, 7));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(reply_to_first(t, c, s, 7));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/*
 * IP_BIND_ADDRESS_NO_PORT (curl --interface, haproxy's source): bound
 * without a port, the socket gets one at connect(), and carries bytes.
 */
static void bind_without_port_then_connect_carries_bytes(struct tctx *t)
{
	int l = -1, c = -1, s = -1, one = 1;
	struct addr bound, at = client_addr, local;

	if (family(&client_addr) != AF_INET) {
		skip(t, "IPv4 only");
		return;
	}
	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_OK(c);
	ASSERT_OK(setsockopt(c, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
			     sizeof(one)));
	addr_set_port(&at, 0);
	ASSERT_OK(bind(c, sa(&at), at.len));
	TRY(connect_to(t, c, &bound));
	ASSERT_OK(local_addr(c, &local));
	ASSERT(addr_port(&local) != 0, "no port after connect");
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(send_first(t, c, 5));
	TRY(reply_to_first(t, c, s, 5));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

static void read_write_roundtrip(struct tctx *t)
{
	unsigned char out_buf[3000], in[3000];
	int c = -1, s = -1;
	size_t got = 0;
	ssize_t r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	pattern_fill(out_buf, sizeof(out_buf), 11, 0);
	r = write(c, out_buf, sizeof(out_buf));
	ASSERT(r == (ssize_t)sizeof(out_buf), "write: %zd (%s)", r,
	       errname(errno));
	while (got < sizeof(in)) {
		ASSERT(wait_fd(s, POLLIN, io_ms()) > 0, "no data");
		r = read(s, in + got, sizeof(in) - got);
		ASSERT(r > 0, "read: %zd (%s)", r, errname(errno));
		got += r;
	}
	ASSERT(!memcmp(in, out_buf, sizeof(in)), "data corrupted");
	note_digest(t, "read", got, fnv1a(FNV1A_INIT, in, got));
	r = write(s, in, 100);
	ASSERT(r == 100, "write back: %zd", r);
	TRY(wait_queued(t, c, 100));
	r = read(c, in, sizeof(in));
	ASSERT(r == 100, "read back: %zd", r);
	ASSERT(!memcmp(in, out_buf, 100), "reply corrupted");
out:
	close_fd(&c);
	close_fd(&s);
}

static void send_recv_roundtrip(struct tctx *t)
{
	unsigned char buf[5000];
	uint64_t h = 0;
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	pattern_fill(buf, sizeof(buf), 12, 0);
	r = send(c, buf, sizeof(buf), 0);
	ASSERT(r == (ssize_t)sizeof(buf), "send: %zd (%s)", r, errname(errno));
	TRY(recv_pattern(t, s, 12, sizeof(buf), &h));
	note_digest(t, "recv", sizeof(buf), h);
	r = send(s, buf, 10, 0);
	ASSERT(r == 10, "send back: %zd", r);
	TRY(wait_queued(t, c, 10));
	r = recv(c, buf, sizeof(buf), 0);
	ASSERT(r == 10, "recv back: %zd", r);
out:
	close_fd(&c);
	close_fd(&s);
}

static void sendto_recvfrom_on_connected_stream(struct tctx *t)
{
	unsigned char buf[2048];
	struct addr from;
	int c = -1, s = -1;
	uint64_t h;
	ssize_t r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	pattern_fill(buf, sizeof(buf), 13, 0);
	r = sendto(c, buf, sizeof(buf), 0, NULL, 0);
	ASSERT(r == (ssize_t)sizeof(buf), "sendto: %zd (%s)", r,
	       errname(errno));
	TRY(wait_queued(t, s, sizeof(buf)));
	memset(buf, 0, sizeof(buf));
	from.len = sizeof(from.ss);
	r = recvfrom(s, buf, sizeof(buf), 0, sa(&from), &from.len);
	ASSERT(r == (ssize_t)sizeof(buf), "recvfrom: %zd (%s)", r,
	       errname(errno));
	ASSERT(pattern_mismatch(buf, r, 13, 0) == (size_t)r, "data corrupted");
	h = fnv1a(FNV1A_INIT, buf, r);
	note_digest(t, "recvfrom", r, h);
out:
	close_fd(&c);
	close_fd(&s);
}

/* How a client that is not connected sends its first len bytes to to. */
typedef int first_send_fn(struct tctx *t, int c, struct addr *to,
			  const void *buf, size_t len);

/*
 * A client sends its first 1000 bytes with first_send to a listener: the
 * server reads them, then the connection carries a stream each way.
 */
static void fastopen_connection(struct tctx *t, first_send_fn *first_send)
{
	const size_t stream_len = 16384;
	unsigned char buf[1000];
	struct addr bound;
	int l = -1, c = -1, s = -1;
	uint64_t h;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	pattern_fill(buf, sizeof(buf), 61, 0);
	TRY(first_send(t, c, &bound, buf, sizeof(buf)));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(recv_pattern(t, s, 61, sizeof(buf), NULL));
	TRY(send_pattern(t, s, 63, stream_len));
	TRY(recv_pattern(t, c, 63, stream_len, &h));
	note_digest(t, "client received", stream_len, h);
	TRY(send_pattern(t, c, 64, stream_len));
	TRY(recv_pattern(t, s, 64, stream_len, &h));
	note_digest(t, "server received", stream_len, h);
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/* sendto() with MSG_FASTOPEN, which connects the socket. */
static int sendto_fastopen(struct tctx *t, int c, struct addr *to,
			   const void *buf, size_t len)
{
	struct addr peer;
	ssize_t r;

	do
		r = sendto(c, buf, len, MSG_FASTOPEN | MSG_NOSIGNAL, sa(to),
			   to->len);
	while (r < 0 && retry_intr());
	ASSERT(r == (ssize_t)len, "sendto: %zd (%s)", r,
	       r < 0 ? errname(errno) : "short");
	peer.len = sizeof(peer.ss);
	ASSERT_OK(getpeername(c, sa(&peer), &peer.len));
	ASSERT(peer.len == to->len && !memcmp(&peer.ss, &to->ss, peer.len),
	       "getpeername names another address");
	return 0;
out:
	return -1;
}

/* TCP_FASTOPEN_CONNECT, connect(), then a write. */
static int connect_option_then_send(struct tctx *t, int c, struct addr *to,
				    const void *buf, size_t len)
{
	int on = 1;

	ASSERT_OK(setsockopt(c, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &on,
			     sizeof(on)));
	TRY(connect_to(t, c, to));
	TRY(send_all(t, c, buf, len));
	return 0;
out:
	return -1;
}

/*
 * sendto() with MSG_FASTOPEN on a socket that is not connected connects
 * it and sends the bytes (curl --tcp-fastopen): with or without a
 * cookie, the server reads them and the connection goes on as any other.
 */
static void fastopen_sendto_connects_and_sends(struct tctx *t)
{
	fastopen_connection(t, sendto_fastopen);
}

/*
 * TCP_FASTOPEN_CONNECT: connect() may return before the handshake, which
 * then carries the first write.  The bytes and the connection are those
 * of any other.
 */
static void fastopen_connect_option_carries_the_first_write(struct tctx *t)
{
	fastopen_connection(t, connect_option_then_send);
}

static void recvfrom_on_stream_leaves_address_empty(struct tctx *t)
{
	struct addr from;
	int c = -1, s = -1;
	char buf[8];
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	TRY(send_all(t, c, "abc", 3));
	TRY(wait_queued(t, s, 3));
	memset(&from, 0xa5, sizeof(from));
	from.len = sizeof(from.ss);
	r = recvfrom(s, buf, sizeof(buf), 0, sa(&from), &from.len);
	ASSERT(r == 3, "recvfrom: %zd (%s)", r, errname(errno));
	/* Linux TCP does not report a source address: length becomes 0. */
	ASSERT(from.len == 0, "address length: want 0, got %u",
	       (unsigned int)from.len);
out:
	close_fd(&c);
	close_fd(&s);
}

static void writev_readv_scatter_gather(struct tctx *t)
{
	static const size_t wlen[] = { 1, 100, 4096, 7, 3000 };
	static const size_t rlen[] = { 10, 3000, 1194, 3000 };
	unsigned char src[7204], dst[7204];
	struct iovec wiov[5], riov[4];
	size_t i, off = 0;
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	pattern_fill(src, sizeof(src), 14, 0);
	for (i = 0; i < ARRAY_SIZE(wlen); i++) {
		wiov[i].iov_base = src + off;
		wiov[i].iov_len = wlen[i];
		off += wlen[i];
	}
	ASSERT(off == sizeof(src), "bad iovec layout");
	r = writev(c, wiov, ARRAY_SIZE(wiov));
	ASSERT(r == (ssize_t)sizeof(src), "writev: %zd (%s)", r,
	       errname(errno));
	TRY(wait_queued(t, s, sizeof(dst)));
	for (i = 0, off = 0; i < ARRAY_SIZE(rlen); i++) {
		riov[i].iov_base = dst + off;
		riov[i].iov_len = rlen[i];
		off += rlen[i];
	}
	ASSERT(off == sizeof(dst), "bad iovec layout");
	r = readv(s, riov, ARRAY_SIZE(riov));
	ASSERT(r == (ssize_t)sizeof(dst), "readv: %zd (%s)", r, errname(errno));
	ASSERT(!memcmp(src, dst, sizeof(dst)), "data corrupted");
	note_digest(t, "readv", sizeof(dst), fnv1a(FNV1A_INIT, dst, r));
out:
	close_fd(&c);
	close_fd(&s);
}

static void sendmsg_recvmsg_with_iovecs(struct tctx *t)
{
	unsigned char src[1500], a[700], b[800];
	struct iovec wiov[3] = { { src, 500 },
				 { src + 500, 1 },
				 { src + 501, 999 } };
	struct iovec riov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct msghdr msg;
	int c = -1, s = -1;
	uint64_t h;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	pattern_fill(src, sizeof(src), 15, 0);
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = wiov;
	msg.msg_iovlen = 3;
	r = sendmsg(c, &msg, MSG_NOSIGNAL);
	ASSERT(r == (ssize_t)sizeof(src), "sendmsg: %zd (%s)", r,
	       errname(errno));
	TRY(wait_queued(t, s, sizeof(src)));
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = riov;
	msg.msg_iovlen = 2;
	msg.msg_flags = -1;
	r = recvmsg(s, &msg, 0);
	ASSERT(r == (ssize_t)sizeof(src), "recvmsg: %zd (%s)", r,
	       errname(errno));
	ASSERT(msg.msg_flags == 0, "msg_flags: %#x", msg.msg_flags);
	ASSERT(!memcmp(a, src, sizeof(a)) &&
		       !memcmp(b, src + sizeof(a), sizeof(b)),
	       "data corrupted");
	h = fnv1a(fnv1a(FNV1A_INIT, a, sizeof(a)), b, sizeof(b));
	note_digest(t, "recvmsg", sizeof(src), h);
out:
	close_fd(&c);
	close_fd(&s);
}

static void sendmmsg_recvmmsg_on_stream(struct tctx *t)
{
	unsigned char src[300], dst[300];
	struct mmsghdr out_msgs[3], in_msgs[3];
	struct iovec wiov[6], riov[3];
	int c = -1, s = -1, i, n;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	pattern_fill(src, sizeof(src), 16, 0);
	memset(out_msgs, 0, sizeof(out_msgs));
	for (i = 0; i < 3; i++) {
		/* each message is 100 bytes in two iovecs of 40 + 60 */
		wiov[2 * i].iov_base = src + 100 * i;
		wiov[2 * i].iov_len = 40;
		wiov[2 * i + 1].iov_base = src + 100 * i + 40;
		wiov[2 * i + 1].iov_len = 60;
		out_msgs[i].msg_hdr.msg_iov = &wiov[2 * i];
		out_msgs[i].msg_hdr.msg_iovlen = 2;
	}
	n = sendmmsg(c, out_msgs, 3, MSG_NOSIGNAL);
	ASSERT(n == 3, "sendmmsg: %d (%s)", n, errname(errno));
	for (i = 0; i < 3; i++)
		ASSERT(out_msgs[i].msg_len == 100, "message %d sent %u bytes",
		       i, out_msgs[i].msg_len);
	TRY(wait_queued(t, s, sizeof(dst)));
	memset(in_msgs, 0, sizeof(in_msgs));
	for (i = 0; i < 3; i++) {
		riov[i].iov_base = dst + 100 * i;
		riov[i].iov_len = 100;
		in_msgs[i].msg_hdr.msg_iov = &riov[i];
		in_msgs[i].msg_hdr.msg_iovlen = 1;
	}
	n = recvmmsg(s, in_msgs, 3, MSG_DONTWAIT, NULL);
	ASSERT(n == 3, "recvmmsg: %d (%s)", n, errname(errno));
	for (i = 0; i < 3; i++)
		ASSERT(in_msgs[i].msg_len == 100, "message %d got %u bytes", i,
		       in_msgs[i].msg_len);
	ASSERT(!memcmp(src, dst, sizeof(dst)), "data corrupted");
	note_digest(t, "recvmmsg", sizeof(dst),
		    fnv1a(FNV1A_INIT, dst, sizeof(dst)));
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * At the end of the stream every message of recvmmsg() reads as empty:
 * each of the kernel's reads returns 0 (do_recvmmsg()).
 */
static void recvmmsg_at_the_end_reads_every_message_empty(struct tctx *t)
{
	struct mmsghdr msgs[4];
	struct iovec iov[4];
	char buf[4][8];
	int c = -1, s = -1, i, n;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	TRY(send_all(t, c, "abc", 3));
	close_fd(&c);
	r = recv(s, buf[0], 3, MSG_WAITALL);
	ASSERT(r == 3, "recv of the bytes: %zd", r);
	/* A blocking peek returns once the end has come. */
	r = recv(s, buf[0], 1, MSG_PEEK);
	ASSERT(r == 0, "peek at the end: %zd", r);
	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < 4; i++) {
		iov[i].iov_base = buf[i];
		iov[i].iov_len = sizeof(buf[i]);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
		msgs[i].msg_len = 99;
	}
	n = recvmmsg(s, msgs, 4, MSG_DONTWAIT, NULL);
	ASSERT(n == 4, "recvmmsg: %d (%s)", n, n < 0 ? errname(errno) : "");
	for (i = 0; i < 4; i++)
		ASSERT(msgs[i].msg_len == 0, "message %d: %u bytes", i,
		       msgs[i].msg_len);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * poll() for POLLRDHUP alone reports the peer's FIN, bytes unread or not
 * (tcp_poll()).
 */
static void
poll_for_rdhup_alone_sees_the_end_before_the_bytes_are_read(struct tctx *t)
{
	int c = -1, s = -1, ev;

	TRY(make_pair(t, &c, &s, 0));
	TRY(send_all(t, c, "abc", 3));
	TRY(wait_queued(t, s, 3));
	ev = wait_fd(s, POLLRDHUP, 200);
	ASSERT(ev == 0, "before the end: revents %#x", ev);
	close_fd(&c);
	ev = wait_fd(s, POLLRDHUP, io_ms());
	ASSERT(ev == POLLRDHUP, "after the end: revents %#x", ev);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * A blocking recvmmsg() without MSG_WAITFORONE waits for every message:
 * each of the kernel's reads blocks (do_recvmmsg()).
 */
static void recvmmsg_blocking_waits_for_every_message(struct tctx *t)
{
	struct dripper d = {
		.seed = 37, .piece = 500, .pieces = 3, .delay_ms = 150
	};
	unsigned char buf[3][500];
	struct mmsghdr msgs[3];
	struct iovec iov[3];
	bool running = false;
	int c = -1, s = -1, i, n;
	unsigned int got = 0;
	pthread_t th;

	TRY(make_pair(t, &c, &s, 0));
	memset(msgs, 0, sizeof(msgs));
	for (i = 0; i < 3; i++) {
		iov[i].iov_base = buf[i];
		iov[i].iov_len = sizeof(buf[i]);
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	d.fd = c;
	ASSERT(!start_thread(&th, drip_send, &d), "pthread_create");
	running = true;
	n = recvmmsg(s, msgs, 3, 0, NULL);
	ASSERT(n == 3, "recvmmsg: %d (%s)", n, n < 0 ? errname(errno) : "");
	for (i = 0; i < 3; i++) {
		ASSERT(msgs[i].msg_len > 0, "message %d is empty", i);
		ASSERT(pattern_mismatch(buf[i], msgs[i].msg_len, 37, got) ==
			       msgs[i].msg_len,
		       "message %d corrupted", i);
		got += msgs[i].msg_len;
	}
out:
	if (running) {
		shutdown(c, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&c);
	close_fd(&s);
}

/*
 * A recvmsg() that fails writes nothing back: the name's length, the
 * control length and the flags stay as the caller left them.
 */
static void recvmsg_that_fails_leaves_the_header_alone(struct tctx *t)
{
	struct sockaddr_storage name;
	char ctl[64], b[8];
	struct iovec iov = { .iov_base = b, .iov_len = sizeof(b) };
	struct msghdr m = { .msg_name = &name,
			    .msg_namelen = sizeof(name),
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl,
			    .msg_controllen = sizeof(ctl),
			    .msg_flags = 0x5555 };
	int c = -1, s = -1;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_ERR(recvmsg(s, &m, MSG_DONTWAIT), EAGAIN);
	ASSERT(m.msg_namelen == sizeof(name) &&
		       m.msg_controllen == sizeof(ctl) && m.msg_flags == 0x5555,
	       "header after EAGAIN: namelen %u, controllen %zu, flags %#x",
	       m.msg_namelen, (size_t)m.msg_controllen, m.msg_flags);
out:
	close_fd(&c);
	close_fd(&s);
}

static int make_temp_file(struct tctx *t, uint64_t seed, size_t len)
{
	const char *dir = getenv("TMPDIR");
	unsigned char buf[65536];
	char path[PATH_MAX];
	size_t off = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/sockcheck.XXXXXX",
		 dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	ASSERT_OK(fd);
	unlink(path);
	while (off < len) {
		size_t n = len - off;
		ssize_t r;

		if (n > sizeof(buf))
			n = sizeof(buf);
		pattern_fill(buf, n, seed, off);
		r = write(fd, buf, n);
		ASSERT(r == (ssize_t)n, "write temp file: %s", errname(errno));
		off += n;
	}
	ASSERT_OK(lseek(fd, 0, SEEK_SET));
	return fd;
out:
	if (fd >= 0)
		close(fd);
	return -1;
}

static void sendfile_streams_file_into_socket(struct tctx *t)
{
	const size_t len = (1 << 20) + 123;
	struct stream rx = { .seed = 17, .len = len };
	unsigned char buf[4096];
	int c = -1, s = -1, f = -1;
	bool running = false;
	pthread_t th;
	off_t off = 0;
	ssize_t r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	f = make_temp_file(t, 17, len);
	TRY(f < 0);
	rx.fd = s;
	ASSERT(!start_thread(&th, stream_recv, &rx), "pthread_create");
	running = true;
	/* Into a blocking socket, one call sends all it is asked. */
	do
		r = sendfile(c, f, &off, len);
	while (r < 0 && retry_intr());
	ASSERT(r == (ssize_t)len && off == (off_t)len,
	       "sendfile: %zd (%s), offset %lld", r, errname(errno),
	       (long long)off);
	pthread_join(th, NULL);
	running = false;
	ASSERT(!rx.err[0], "receiver: %s", rx.err);
	note_digest(t, "sendfile with offset", len, rx.digest);
	/* With an offset pointer the file position is left alone. */
	ASSERT(lseek(f, 0, SEEK_CUR) == 0, "file position moved");

	/* Without one, sendfile() reads from and advances the position. */
	ASSERT(lseek(f, 8192, SEEK_SET) == 8192, "lseek");
	r = sendfile(c, f, NULL, sizeof(buf));
	ASSERT(r == (ssize_t)sizeof(buf), "sendfile: %zd (%s)", r,
	       errname(errno));
	ASSERT(lseek(f, 0, SEEK_CUR) == 8192 + (off_t)sizeof(buf),
	       "file position not advanced");
	TRY(recv_exact(t, s, buf, sizeof(buf)));
	ASSERT(pattern_mismatch(buf, sizeof(buf), 17, 8192) == sizeof(buf),
	       "data corrupted");
out:
	if (running) {
		shutdown(s, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&f);
	close_fd(&c);
	close_fd(&s);
}

/*
 * An edge-triggered EPOLLOUT registration reports room again after a
 * write said EAGAIN, once the peer has read everything: nginx and every
 * edge-triggered loop wait for that edge alone.  Four rounds, byte-exact.
 */
static void edge_triggered_epollout_returns_after_eagain(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLET,
				  .data.u64 = 21 };
	struct pollfd pfd = { .events = POLLIN };
	unsigned char *buf = malloc(65536);
	size_t sent = 0, rcvd = 0, bad;
	int c = -1, s = -1, ep = -1, round, n;
	ssize_t r;

	ASSERT(buf, "out of memory");
	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK | PAIR_SMALL_BUFFERS));
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	n = epoll_wait(ep, &ev, 1, io_ms());
	ASSERT(n == 1 && ev.events == EPOLLOUT,
	       "a new connection: want EPOLLOUT, got %d (%#x)", n, ev.events);
	for (round = 0; round < 4; round++) {
		for (;;) {
			pattern_fill(buf, 65536, 23, sent);
			r = write(c, buf, 65536);
			if (r < 0 && errno == EAGAIN)
				break;
			ASSERT(r > 0, "write: %s", r ? errname(errno) : "0");
			sent += r;
		}
		while (rcvd < sent) {
			pfd.fd = s;
			ASSERT(poll(&pfd, 1, io_ms()) == 1,
			       "round %d: %zu of %zu bytes came", round, rcvd,
			       sent);
			r = read(s, buf, 65536);
			if (r < 0 && errno == EAGAIN)
				continue;
			ASSERT(r > 0, "read: %s", r ? errname(errno) : "EOF");
			bad = pattern_mismatch(buf, r, 23, rcvd);
			ASSERT(bad == (size_t)r, "data mismatch at byte %zu",
			       rcvd + bad);
			rcvd += r;
		}
		n = epoll_wait(ep, &ev, 1, io_ms());
		ASSERT(n == 1 && (ev.events & EPOLLOUT) && ev.data.u64 == 21,
		       "round %d: no EPOLLOUT edge once the peer read all "
		       "(%d, %#x)",
		       round, n, ev.events);
	}
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
	free(buf);
}

/*
 * One thread moves 8 MiB through small socket buffers with non-blocking
 * I/O: write until EAGAIN, wait for EPOLLOUT, continue; read whatever is
 * there in odd-sized pieces.
 */
static void nonblocking_transfer_survives_partial_io(struct tctx *t)
{
	const size_t total = 8 << 20;
	unsigned char *wbuf = NULL, *rbuf = NULL;
	size_t sent = 0, rcvd = 0, bad, i = 0, j = 0;
	struct epoll_event ev, evs[2];
	int c = -1, s = -1, ep = -1, n, k;
	unsigned long eagains = 0;
	bool writer_armed = true;
	uint64_t h = FNV1A_INIT;
	ssize_t r;

	wbuf = malloc(65536);
	rbuf = malloc(65536);
	ASSERT(wbuf && rbuf, "out of memory");
	TRY(make_pair(t, &c, &s,
		      PAIR_BIND_CLIENT | PAIR_NONBLOCK | PAIR_SMALL_BUFFERS));
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ev.events = EPOLLOUT;
	ev.data.fd = c;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	ev.events = EPOLLIN;
	ev.data.fd = s;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));

	while (rcvd < total) {
		while (sent < total) {
			size_t want = 1 + (i++ * 40503) % 65536;

			if (want > total - sent)
				want = total - sent;
			pattern_fill(wbuf, want, 18, sent);
			r = write(c, wbuf, want);
			if (r < 0 && errno == EAGAIN) {
				eagains++;
				break;
			}
			ASSERT(r > 0, "write: %s", r ? errname(errno) : "0");
			sent += r;
		}
		if (sent == total && writer_armed) {
			ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL));
			writer_armed = false;
		}
		n = epoll_wait(ep, evs, 2, io_ms());
		ASSERT(n > 0, "stalled at %zu sent, %zu received (%d %s)", sent,
		       rcvd, n, n < 0 ? errname(errno) : "");
		for (k = 0; k < n; k++) {
			if (evs[k].data.fd != s)
				continue;
			for (;;) {
				size_t want = 1 + (j++ * 7919) % 65536;

				r = read(s, rbuf, want);
				if (r < 0 && errno == EAGAIN)
					break;
				ASSERT(r > 0, "read at %zu: %s", rcvd,
				       r ? errname(errno) : "early EOF");
				bad = pattern_mismatch(rbuf, r, 18, rcvd);
				ASSERT(bad == (size_t)r,
				       "data mismatch at byte %zu", rcvd + bad);
				h = fnv1a(h, rbuf, r);
				rcvd += r;
			}
		}
	}
	ASSERT(eagains > 0, "writer never saw EAGAIN");
	note_digest(t, "received", rcvd, h);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
	free(wbuf);
	free(rbuf);
}

static void full_duplex_transfer_with_blocking_threads(struct tctx *t)
{
	const size_t len = 4 << 20;
	struct stream tx[2], rx[2];
	int c = -1, s = -1;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	memset(tx, 0, sizeof(tx));
	memset(rx, 0, sizeof(rx));
	tx[0] = (struct stream){ .fd = c, .seed = 19, .len = len };
	rx[0] = (struct stream){ .fd = s, .seed = 19, .len = len };
	tx[1] = (struct stream){ .fd = s, .seed = 20, .len = len };
	rx[1] = (struct stream){ .fd = c, .seed = 20, .len = len };
	TRY(run_streams(t, tx, rx, 2));
	note_digest(t, "client to server", len, rx[0].digest);
	note_digest(t, "server to client", len, rx[1].digest);
out:
	close_fd(&c);
	close_fd(&s);
}

/* Blocking send() of all @len bytes at @buf; a short count goes on. */
static int send_blocking(struct tctx *t, int fd, const unsigned char *buf,
			 size_t len)
{
	ssize_t r;

	while (len) {
		r = send(fd, buf, len, MSG_NOSIGNAL);
		if (r < 0 && retry_intr())
			continue;
		ASSERT(r > 0, "send: %s", r ? errname(errno) : "returned 0");
		buf += r;
		len -= r;
	}
	return 0;
out:
	return -1;
}

/*
 * Large blocking sends (which roceshim may make from the program's own
 * memory) from odd offsets of one buffer, scribbled over as soon as each
 * send returns: the bytes sent must be those the buffer held during the
 * call.  Sizes cross 256 KiB and 4 MiB.
 */
static void large_sends_from_a_reused_buffer_arrive_intact(struct tctx *t)
{
	static const size_t sizes[] = { 256 << 10, (1 << 20) + 3,
					(5 << 20) + 777, (300 << 10) + 1 };
	static const size_t offsets[] = { 0, 1, 13, 4095 };
	const size_t cap = (6 << 20) + 4096;
	unsigned char *buf = malloc(cap), head[17], tail[100];
	struct stream rx = { .seed = 43 };
	struct iovec iov[3];
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 3 };
	pthread_t reader;
	bool reading = false;
	size_t off = 0, i, mid = (1 << 20) + 5;
	int c = -1, s = -1;
	ssize_t r;

	ASSERT(buf, "out of memory");
	for (i = 0; i < ARRAY_SIZE(sizes); i++)
		rx.len += sizes[i];
	rx.len += sizeof(head) + mid + sizeof(tail);
	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	rx.fd = s;
	ASSERT(!start_thread(&reader, stream_recv, &rx), "no reader thread");
	reading = true;
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		unsigned char *at = buf + offsets[i];

		pattern_fill(at, sizes[i], rx.seed, off);
		TRY(send_blocking(t, c, at, sizes[i]));
		memset(at, 0xa5, sizes[i]);
		off += sizes[i];
	}
	/* One large buffer between two small ones, in one sendmsg(). */
	pattern_fill(head, sizeof(head), rx.seed, off);
	pattern_fill(buf + 7, mid, rx.seed, off + sizeof(head));
	pattern_fill(tail, sizeof(tail), rx.seed, off + sizeof(head) + mid);
	iov[0] = (struct iovec){ head, sizeof(head) };
	iov[1] = (struct iovec){ buf + 7, mid };
	iov[2] = (struct iovec){ tail, sizeof(tail) };
	r = sendmsg(c, &msg, MSG_NOSIGNAL);
	ASSERT(r == (ssize_t)(sizeof(head) + mid + sizeof(tail)),
	       "sendmsg: %zd (%s)", r, r < 0 ? errname(errno) : "short");
	memset(buf + 7, 0xa5, mid);
	pthread_join(reader, NULL);
	reading = false;
	ASSERT(!rx.err[0], "receiver: %s", rx.err);
	note_digest(t, "received", rx.len, rx.digest);
out:
	if (reading) {
		shutdown(s, SHUT_RDWR);
		pthread_join(reader, NULL);
	}
	close_fd(&c);
	close_fd(&s);
	free(buf);
}

/*
 * SO_SNDTIMEO ends a large blocking send that the reader does not take:
 * the count it returns is exactly what arrives, though the buffer is
 * scribbled over at once.
 */
/* Shuts c down for writing: s reads len bytes of pattern seed, then EOF. */
static int expect_pattern_then_eof(struct tctx *t, int c, int s, uint64_t seed,
				   size_t len)
{
	ASSERT_OK(shutdown(c, SHUT_WR));
	TRY(recv_pattern(t, s, seed, len, NULL));
	TRY(expect_eof(t, s));
	return 0;
out:
	return -1;
}

static void sndtimeo_ends_large_send_with_exact_count(struct tctx *t)
{
	const size_t len = 16 << 20;
	struct timeval tv = { 0, 300000 };
	unsigned char *buf = malloc(len);
	int c = -1, s = -1;
	ssize_t r;

	ASSERT(buf, "out of memory");
	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ASSERT_OK(setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	pattern_fill(buf, len, 44, 0);
	do
		r = send(c, buf, len, MSG_NOSIGNAL);
	while (r < 0 && retry_intr());
	ASSERT(r > 0 && (size_t)r < len, "send: %zd (%s)", r,
	       r < 0 ? errname(errno) : "not short");
	memset(buf, 0xa5, len);
	TRY(expect_pattern_then_eof(t, c, s, 44, r));
	note(t, "short count");
out:
	close_fd(&c);
	close_fd(&s);
	free(buf);
}

/*
 * A small send buffer bounds what sends queue while the peer reads
 * nothing: a program that sets SO_SNDBUF sees back-pressure, and a peer
 * that stops reading stops its sender (asyncio's sendfile tests rely on
 * it).  The kernel's bound counts the peer's receive buffer too; both
 * stay far below the bytes offered here.
 */
static void small_sndbuf_bounds_what_sends_queue(struct tctx *t)
{
	const size_t offered = 1 << 20, bound = 128 << 10;
	unsigned char *buf = malloc(offered);
	size_t queued = 0;
	int c = -1, s = -1, round;
	ssize_t r;

	ASSERT(buf, "out of memory");
	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(set_int_opt(c, SOL_SOCKET, SO_SNDBUF, 4096));
	ASSERT_OK(set_int_opt(s, SOL_SOCKET, SO_RCVBUF, 4096));
	pattern_fill(buf, offered, 45, 0);
	for (round = 0; round < 3; round++) {
		for (;;) {
			r = send(c, buf + queued, offered - queued,
				 MSG_NOSIGNAL);
			if (r < 0 && errno == EAGAIN)
				break;
			ASSERT(r > 0, "send: %s", r ? errname(errno) : "0");
			queued += r;
			ASSERT(queued < bound, "%zu bytes queued", queued);
		}
		sleep_ms(50);
	}
	ASSERT_OK(set_nonblock(s, false));
	TRY(expect_pattern_then_eof(t, c, s, 45, queued));
	note(t, "bounded");
out:
	close_fd(&c);
	close_fd(&s);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Tests: message flags                                                */
/* ------------------------------------------------------------------ */

static void peek_does_not_consume(struct tctx *t)
{
	unsigned char src[20], a[20], b[20];
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	pattern_fill(src, sizeof(src), 21, 0);
	TRY(send_all(t, c, src, sizeof(src)));
	TRY(wait_queued(t, s, sizeof(src)));
	r = recv(s, a, 10, MSG_PEEK);
	ASSERT(r == 10, "first peek: %zd", r);
	r = recv(s, b, 10, MSG_PEEK);
	ASSERT(r == 10, "second peek: %zd", r);
	ASSERT(!memcmp(a, src, 10) && !memcmp(b, src, 10),
	       "peeked data differs");
	r = recv(s, a, sizeof(a), 0);
	ASSERT(r == (ssize_t)sizeof(src), "recv after peek: %zd", r);
	ASSERT(!memcmp(a, src, sizeof(src)), "data corrupted");
	ASSERT_ERR(recv(s, a, 1, MSG_PEEK | MSG_DONTWAIT), EAGAIN);
	note_digest(t, "received", sizeof(a), fnv1a(FNV1A_INIT, a, r));
out:
	close_fd(&c);
	close_fd(&s);
}

static void peek_fills_every_buffer_of_recvmsg(struct tctx *t)
{
	char x[5], y[5], all[16];
	struct iovec iov[2] = { { x, sizeof(x) }, { y, sizeof(y) } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	TRY(send_all(t, c, "0123456789", 10));
	TRY(wait_queued(t, s, 10));
	r = recvmsg(s, &msg, MSG_PEEK);
	ASSERT(r == 10 && !memcmp(x, "01234", 5) && !memcmp(y, "56789", 5),
	       "recvmsg(MSG_PEEK): %zd", r);
	r = recv(s, all, sizeof(all), 0);
	ASSERT(r == 10 && !memcmp(all, "0123456789", 10),
	       "recv after peek: %zd", r);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * recv(flags) of 4000 bytes that come in 4 pieces 25 ms apart: MSG_WAITALL
 * waits for all of them.  A peek takes none: a read after it gets them.
 */
static void recv_of_a_drip(struct tctx *t, uint64_t seed, int flags)
{
	struct dripper d = {
		.seed = seed, .piece = 1000, .pieces = 4, .delay_ms = 25
	};
	unsigned char buf[4000];
	bool running = false;
	int c = -1, s = -1;
	pthread_t th;
	ssize_t r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	d.fd = c;
	ASSERT(!start_thread(&th, drip_send, &d), "pthread_create");
	running = true;
	r = recv(s, buf, sizeof(buf), flags);
	ASSERT(r == (ssize_t)sizeof(buf), "recv(%#x): %zd (%s)", flags, r,
	       r < 0 ? errname(errno) : "short");
	pthread_join(th, NULL);
	running = false;
	ASSERT(!d.err[0], "sender: %s", d.err);
	ASSERT(pattern_mismatch(buf, sizeof(buf), seed, 0) == sizeof(buf),
	       "data corrupted");
	if (flags & MSG_PEEK) {
		r = recv(s, buf, sizeof(buf), MSG_WAITALL);
		ASSERT(r == (ssize_t)sizeof(buf) &&
			       pattern_mismatch(buf, sizeof(buf), seed, 0) ==
				       sizeof(buf),
		       "recv after the peek: %zd", r);
	}
	note_digest(t, "received", sizeof(buf),
		    fnv1a(FNV1A_INIT, buf, sizeof(buf)));
out:
	if (running) {
		shutdown(c, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&c);
	close_fd(&s);
}

/* MSG_PEEK with MSG_WAITALL waits for all of it, and takes none. */
static void peek_waitall_waits_for_all(struct tctx *t)
{
	recv_of_a_drip(t, 29, MSG_PEEK | MSG_WAITALL);
}

/*
 * A receive timeout of centuries, which the kernel keeps (up to LONG_MAX
 * jiffies), does not end a blocking recv() that waits for data.  This
 * one, 2^64 ms rounded up to whole seconds, is 384 ms past a 64-bit
 * count of milliseconds.
 */
static void recv_waits_out_a_timeout_of_centuries(struct tctx *t)
{
	struct timeval tv = { .tv_sec = 18446744073709552ll };
	struct dripper d = {
		.seed = 31, .piece = 100, .pieces = 1, .delay_ms = 800
	};
	unsigned char buf[100];
	bool running = false;
	int c = -1, s = -1;
	pthread_t th;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	d.fd = c;
	ASSERT(!start_thread(&th, drip_send, &d), "pthread_create");
	running = true;
	r = recv(s, buf, sizeof(buf), MSG_WAITALL);
	ASSERT(r == (ssize_t)sizeof(buf), "recv: %zd (%s)", r,
	       r < 0 ? errname(errno) : "short");
	pthread_join(th, NULL);
	running = false;
	ASSERT(!d.err[0], "sender: %s", d.err);
	ASSERT(pattern_mismatch(buf, sizeof(buf), 31, 0) == sizeof(buf),
	       "data corrupted");
out:
	if (running) {
		shutdown(c, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&c);
	close_fd(&s);
}

static void zero_length_reads_as_the_kernel_does(struct tctx *t)
{
	struct timeval tv = { .tv_usec = 100000 };
	unsigned char src[3], buf[3];
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	/* read() of nothing returns 0 at once; recv() of nothing waits. */
	r = read(s, buf, 0);
	ASSERT(r == 0, "read of 0 bytes: %zd", r);
	ASSERT_ERR(recv(s, buf, 0, MSG_DONTWAIT), EAGAIN);
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	r = recv(s, buf, 0, 0);
	ASSERT(r == 0, "recv of 0 bytes after its timeout: %zd", r);
	pattern_fill(src, sizeof(src), 23, 0);
	TRY(send_all(t, c, src, sizeof(src)));
	TRY(wait_queued(t, s, sizeof(src)));
	r = recv(s, buf, 0, 0);
	ASSERT(r == 0, "recv of 0 bytes with bytes waiting: %zd", r);
	r = recv(s, buf, sizeof(buf), 0);
	ASSERT(r == (ssize_t)sizeof(src), "recv after: %zd", r);
	ASSERT(!memcmp(buf, src, sizeof(src)), "data corrupted");
out:
	close_fd(&c);
	close_fd(&s);
}

static void trunc_takes_bytes_without_a_buffer(struct tctx *t)
{
	unsigned char src[20], buf[20];
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	pattern_fill(src, sizeof(src), 24, 0);
	TRY(send_all(t, c, src, sizeof(src)));
	TRY(wait_queued(t, s, sizeof(src)));
	r = recv(s, NULL, 5, MSG_TRUNC);
	ASSERT(r == 5, "recv(NULL, 5, MSG_TRUNC): %zd", r);
	r = recv(s, NULL, 3, MSG_TRUNC | MSG_PEEK);
	ASSERT(r == 3, "recv(NULL, 3, MSG_TRUNC | MSG_PEEK): %zd", r);
	r = recv(s, buf, sizeof(buf), 0);
	ASSERT(r == 15, "recv after: %zd", r);
	ASSERT(!memcmp(buf, src + 5, 15), "data corrupted");
	ASSERT_ERR(recv(s, NULL, 5, MSG_TRUNC | MSG_DONTWAIT), EAGAIN);
out:
	close_fd(&c);
	close_fd(&s);
}

static void empty_error_queue_leaves_the_stream(struct tctx *t)
{
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	unsigned char src[3], buf[8];
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	pattern_fill(src, sizeof(src), 25, 0);
	TRY(send_all(t, c, src, sizeof(src)));
	TRY(wait_queued(t, s, sizeof(src)));
	iov.iov_base = buf;
	iov.iov_len = sizeof(buf);
	ASSERT_ERR(recvmsg(s, &msg, MSG_ERRQUEUE), EAGAIN);
	ASSERT_ERR(recv(s, buf, sizeof(buf), MSG_ERRQUEUE), EAGAIN);
	r = recv(s, buf, sizeof(buf), 0);
	ASSERT(r == (ssize_t)sizeof(src), "recv after: %zd", r);
	ASSERT(!memcmp(buf, src, sizeof(src)), "data corrupted");
out:
	close_fd(&c);
	close_fd(&s);
}

static void buffers_are_checked_as_the_kernel_does(struct tctx *t)
{
	static struct iovec many[UIO_MAXIOV + 1];
	struct msghdr msg = { .msg_iov = many, .msg_iovlen = UIO_MAXIOV + 1 };
	/* Out of the compiler's sight: it warns of a negative count. */
	volatile int negative = -1;
	unsigned char byte = 'x';
	int c = -1, s = -1, i;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	for (i = 0; i <= UIO_MAXIOV; i++) {
		many[i].iov_base = &byte;
		many[i].iov_len = 1;
	}
	ASSERT_ERR(writev(c, many, negative), EINVAL);
	ASSERT_ERR(writev(c, many, UIO_MAXIOV + 1), EINVAL);
	ASSERT_ERR(sendmsg(c, &msg, 0), EMSGSIZE);
	ASSERT_ERR(readv(s, many, negative), EINVAL);
	ASSERT_ERR(recvmsg(s, &msg, MSG_DONTWAIT), EMSGSIZE);
	ASSERT_ERR(send(c, NULL, 1, 0), EFAULT);
	/* Nothing went: the next byte is the first. */
	TRY(send_all(t, c, "y", 1));
	TRY(wait_queued(t, s, 1));
	/* A NULL buffer takes nothing either. */
	ASSERT_ERR(recv(s, NULL, 1, 0), EFAULT);
	r = recv(s, &byte, 1, 0);
	ASSERT(r == 1 && byte == 'y', "recv after: %zd '%c'", r, byte);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * A buffer that runs past the user address space fails with EFAULT before
 * anything moves, even on a socket whose read would wait: readv(), writev(),
 * read() and write() check each whole range (import_iovec(), vfs_read()).
 * recv() and send() cap the length at MAX_RW_COUNT first
 * (import_single_range()), so a length above the buffer's is not checked.
 */
static void buffers_past_the_address_space_fail_with_efault(struct tctx *t)
{
	static unsigned char buf[64];
	struct iovec huge[2] = { { buf, SSIZE_MAX }, { buf, SSIZE_MAX } };
	/* Out of the compiler's sight: it warns of the sizes. */
	volatile size_t too_long = SSIZE_MAX, longest = SIZE_MAX;
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_ERR(readv(s, huge, 2), EFAULT);
	ASSERT_ERR(read(s, buf, too_long), EFAULT);
	ASSERT_ERR(writev(c, huge, 2), EFAULT);
	ASSERT_ERR(write(c, buf, too_long), EFAULT);
	ASSERT_ERR(recv(s, buf, longest, MSG_DONTWAIT), EAGAIN);
	TRY(send_all(t, c, "abcdef", 6));
	TRY(wait_queued(t, s, 6));
	ASSERT_ERR(readv(s, huge, 2), EFAULT);
	/* Nothing was taken, and recv() takes the bytes there are. */
	r = recv(s, buf, longest, 0);
	ASSERT(r == 6 && !memcmp(buf, "abcdef", 6), "recv after: %zd", r);
out:
	close_fd(&c);
	close_fd(&s);
}

static void waitall_blocks_until_full(struct tctx *t)
{
	recv_of_a_drip(t, 22, MSG_WAITALL);
}

/* Wall-clock seconds, for a receive timestamp's bounds. */
static int64_t wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

/*
 * recvmsg() of @len queued bytes from @fd with @room bytes of control
 * buffer: the bytes must come whole.
 */
static int recv_with_control(struct tctx *t, int fd, size_t len,
			     struct msghdr *msg, void *control, size_t room)
{
	static char data[64];
	static struct iovec iov;
	ssize_t r;

	ASSERT(len <= sizeof(data), "recv_with_control: %zu bytes", len);
	TRY(wait_queued(t, fd, len));
	iov = (struct iovec){ .iov_base = data, .iov_len = len };
	*msg = (struct msghdr){ .msg_iov = &iov,
				.msg_iovlen = 1,
				.msg_control = control,
				.msg_controllen = room };
	r = recvmsg(fd, msg, 0);
	ASSERT(r == (ssize_t)len, "recvmsg: %zd (%s)", r,
	       r < 0 ? errname(errno) : "short");
	return 0;
out:
	return -1;
}

/*
 * The kernel turns receive timestamps on for the whole host in the
 * background (net_enable_timestamp()), so bytes that come at once may
 * carry none: until one byte from @c reaches @s with a timestamp.
 */
static int timestamps_flow(struct tctx *t, int c, int s)
{
	union {
		char buf[CMSG_SPACE(16) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	int64_t end = now_ms() + io_ms();
	struct cmsghdr *cm;
	struct msghdr msg;

	for (;;) {
		TRY(send_all(t, c, "w", 1));
		TRY(recv_with_control(t, s, 1, &msg, control.buf,
				      sizeof(control.buf)));
		for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm))
			if (cm->cmsg_level == SOL_SOCKET)
				return 0;
		ASSERT(now_ms() < end, "no receive timestamp came");
		sleep_ms(10);
	}
out:
	return -1;
}

/* The seconds of the receive timestamp in @cm of @form (SO_TIMESTAMP*). */
static int64_t timestamp_seconds(const struct cmsghdr *cm, int form)
{
	struct timeval tv;
	struct timespec ts;
	int64_t wide[2];

	if (form == SO_TIMESTAMP_OLD) {
		memcpy(&tv, CMSG_DATA(cm), sizeof(tv));
		return tv.tv_sec;
	}
	if (form == SO_TIMESTAMPNS_OLD) {
		memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
		return ts.tv_sec;
	}
	memcpy(wide, CMSG_DATA(cm), sizeof(wide));
	return wide[0];
}

/*
 * SO_TIMESTAMP and SO_TIMESTAMPNS, old and new: recvmsg() gives the time
 * the bytes came in a control message of the form set last.
 */
static void receive_timestamp_comes_with_the_bytes_in_each_form(struct tctx *t)
{
	static const int forms[] = { SO_TIMESTAMP_OLD, SO_TIMESTAMPNS_OLD,
				     SO_TIMESTAMP_NEW, SO_TIMESTAMPNS_NEW };
	union {
		char buf[CMSG_SPACE(16) * 2];
		struct cmsghdr align;
	} control;
	int c = -1, s = -1, on = 1;
	struct cmsghdr *cm;
	struct msghdr msg;
	int64_t before;
	size_t i;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	for (i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		ASSERT_OK(setsockopt(s, SOL_SOCKET, forms[i], &on, sizeof(on)));
		TRY(timestamps_flow(t, c, s));
		before = wall_s();
		TRY(send_all(t, c, "stamp", 5));
		TRY(recv_with_control(t, s, 5, &msg, control.buf,
				      sizeof(control.buf)));
		ASSERT(!(msg.msg_flags & MSG_CTRUNC), "form %zu: truncated", i);
		cm = CMSG_FIRSTHDR(&msg);
		ASSERT(cm && cm->cmsg_level == SOL_SOCKET &&
			       cm->cmsg_type == forms[i] &&
			       cm->cmsg_len == CMSG_LEN(16),
		       "form %zu: no timestamp of that form", i);
		ASSERT(!CMSG_NXTHDR(&msg, cm), "form %zu: more than one", i);
		ASSERT(msg.msg_controllen == CMSG_SPACE(16),
		       "form %zu: msg_controllen %zu", i,
		       (size_t)msg.msg_controllen);
		ASSERT(timestamp_seconds(cm, forms[i]) >= before - 1 &&
			       timestamp_seconds(cm, forms[i]) <= wall_s() + 1,
		       "form %zu: not the time of the bytes", i);
	}
out:
	close_fd(&c);
	close_fd(&s);
}

/* The timestamp comes before TCP_INQ's count, as tcp_recvmsg() puts them. */
static void receive_timestamp_comes_before_the_inq_count(struct tctx *t)
{
	union {
		char buf[CMSG_SPACE(16) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	int c = -1, s = -1, on = 1, inq = -1;
	struct cmsghdr *cm;
	struct msghdr msg;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof(on)));
	ASSERT_OK(setsockopt(s, IPPROTO_TCP, TCP_INQ, &on, sizeof(on)));
	TRY(timestamps_flow(t, c, s));
	TRY(send_all(t, c, "abcd", 4));
	TRY(recv_with_control(t, s, 4, &msg, control.buf, sizeof(control.buf)));
	ASSERT(msg.msg_controllen == sizeof(control.buf), "msg_controllen %zu",
	       (size_t)msg.msg_controllen);
	cm = CMSG_FIRSTHDR(&msg);
	ASSERT(cm && cm->cmsg_level == SOL_SOCKET &&
		       cm->cmsg_type == SO_TIMESTAMP,
	       "the timestamp is not first");
	cm = CMSG_NXTHDR(&msg, cm);
	ASSERT(cm && cm->cmsg_level == SOL_TCP && cm->cmsg_type == TCP_CM_INQ,
	       "no TCP_CM_INQ after the timestamp");
	memcpy(&inq, CMSG_DATA(cm), sizeof(inq));
	ASSERT(inq == 0, "TCP_CM_INQ %d after reading all", inq);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * Without room for the timestamp the bytes still come, with MSG_CTRUNC;
 * the end of the stream carries none.
 */
static void receive_timestamp_without_room_truncates(struct tctx *t)
{
	char eof;
	int c = -1, s = -1, on = 1;
	struct iovec iov = { .iov_base = &eof, .iov_len = 1 };
	struct msghdr msg;
	union {
		char buf[CMSG_SPACE(16)];
		struct cmsghdr align;
	} control;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on)));
	TRY(timestamps_flow(t, c, s));
	TRY(send_all(t, c, "xyz", 3));
	TRY(recv_with_control(t, s, 3, &msg, NULL, 0));
	ASSERT(msg.msg_flags & MSG_CTRUNC, "no MSG_CTRUNC without room");
	ASSERT(msg.msg_controllen == 0, "msg_controllen %zu",
	       (size_t)msg.msg_controllen);
	close_fd(&c);
	TRY(expect_eof(t, s));
	msg = (struct msghdr){ .msg_iov = &iov,
			       .msg_iovlen = 1,
			       .msg_control = control.buf,
			       .msg_controllen = sizeof(control.buf) };
	ASSERT(recvmsg(s, &msg, 0) == 0, "no end of stream");
	ASSERT(msg.msg_controllen == 0 && !(msg.msg_flags & MSG_CTRUNC),
	       "a control message at the end of the stream");
out:
	close_fd(&c);
	close_fd(&s);
}

static void dontwait_gives_eagain_on_empty(struct tctx *t)
{
	int c = -1, s = -1, fl;
	char buf[8];
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	/* The flag is per call: the socket itself stays blocking. */
	ASSERT_OK(fl = fcntl(s, F_GETFL));
	ASSERT(!(fl & O_NONBLOCK), "socket became non-blocking");
	TRY(send_all(t, c, "hello", 5));
	ASSERT(wait_fd(s, POLLIN, io_ms()) > 0, "no data");
	TRY(wait_queued(t, s, 5));
	r = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
	ASSERT(r == 5, "recv(MSG_DONTWAIT): %zd", r);
	ASSERT_ERR(recv(s, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * After the peer has closed (its FIN seen as EOF), the first send is
 * answered by a reset; the next one fails with EPIPE.  Sends one byte at a
 * time, with send(MSG_NOSIGNAL) or plain write(), and returns the errno of
 * the first call that fails, 0 if none did.
 */
static int send_until_error(int fd, bool nosignal)
{
	int i, ev;
	ssize_t r;

	for (i = 0; i < 50; i++) {
		if (nosignal)
			r = send(fd, "x", 1, MSG_NOSIGNAL);
		else
			r = write(fd, "x", 1);
		if (r < 0)
			return errno;
		ev = wait_fd(fd, POLLERR | POLLHUP, 20);
		(void)ev;
	}
	return 0;
}

static void nosignal_send_to_closed_peer_gives_epipe(struct tctx *t)
{
	int c = -1, s = -1, err;
	sig_atomic_t before;

	TRY(make_pair(t, &c, &s, 0));
	close_fd(&s);
	TRY(expect_eof(t, c));
	before = sigpipe_count;
	err = send_until_error(c, true);
	ASSERT(err == EPIPE, "want EPIPE, got %s", errname(err));
	ASSERT(sigpipe_count == before, "SIGPIPE raised despite MSG_NOSIGNAL");
out:
	close_fd(&c);
	close_fd(&s);
}

static void send_to_closed_peer_raises_sigpipe(struct tctx *t)
{
	int c = -1, s = -1, err;
	sig_atomic_t before;

	TRY(make_pair(t, &c, &s, 0));
	close_fd(&s);
	TRY(expect_eof(t, c));
	before = sigpipe_count;
	err = send_until_error(c, false);
	ASSERT(err == EPIPE, "want EPIPE, got %s", errname(err));
	ASSERT(sigpipe_count == before + 1, "want one SIGPIPE, got %d",
	       (int)(sigpipe_count - before));
out:
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: shutdown, close and errors                                   */
/* ------------------------------------------------------------------ */

static void shutdown_wr_gives_peer_eof_but_keeps_reading(struct tctx *t)
{
	int c = -1, s = -1;
	char buf[16];

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(send_all(t, c, "request", 7));
	ASSERT_OK(shutdown(c, SHUT_WR));
	TRY(recv_exact(t, s, buf, 7));
	ASSERT(!memcmp(buf, "request", 7), "request corrupted");
	TRY(expect_eof(t, s));
	/* The other direction is still open. */
	TRY(send_all(t, s, "response", 8));
	TRY(recv_exact(t, c, buf, 8));
	ASSERT(!memcmp(buf, "response", 8), "response corrupted");
	close_fd(&s);
	TRY(expect_eof(t, c));
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * A peer that shut down its write side still reads: a reply longer than
 * any socket buffer (or RDMA ring) reaches it whole, though the sender has
 * to wait for room, with the peer's FIN already in, until the peer starts
 * reading.
 */
static void half_closed_peer_still_receives_a_long_reply(struct tctx *t)
{
	const size_t len = 4 << 20;
	struct stream tx = { .seed = 29, .len = len };
	struct stream rx = { .seed = 29, .len = len };
	struct timespec pause = { .tv_nsec = 300 * 1000 * 1000 };
	int c = -1, s = -1;
	bool running = false;
	pthread_t th;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ASSERT_OK(shutdown(c, SHUT_WR));
	TRY(expect_eof(t, s));
	tx.fd = s;
	ASSERT(!start_thread(&th, stream_send, &tx), "pthread_create");
	running = true;
	nanosleep(&pause, NULL);
	rx.fd = c;
	stream_recv(&rx);
	ASSERT(!rx.err[0], "receiver: %s", rx.err);
	pthread_join(th, NULL);
	running = false;
	ASSERT(!tx.err[0], "sender: %s", tx.err);
out:
	if (running) {
		shutdown(s, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&c);
	close_fd(&s);
}

/*
 * shutdown(SHUT_RD): what came before is still read, then a read returns
 * EOF at once, and poll says so (POLLIN|POLLRDHUP) while the peer sends
 * nothing more.
 */
static void shutdown_rd_ends_reads_at_once(struct tctx *t)
{
	struct pollfd pfd = { .events = POLLIN | POLLRDHUP };
	int c = -1, s = -1, n;
	char buf[16];

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(send_all(t, s, "before", 6));
	TRY(wait_queued(t, c, 6));
	ASSERT_OK(shutdown(c, SHUT_RD));
	TRY(recv_exact(t, c, buf, 6));
	ASSERT(!memcmp(buf, "before", 6), "data before SHUT_RD corrupted");
	pfd.fd = c;
	n = poll(&pfd, 1, io_ms());
	ASSERT(n == 1 && pfd.revents == (POLLIN | POLLRDHUP),
	       "poll after SHUT_RD: want POLLIN|POLLRDHUP, got %d (%#x)", n,
	       pfd.revents);
	TRY(expect_eof(t, c));
	/* The other direction is still open. */
	TRY(send_all(t, c, "after", 5));
	TRY(recv_exact(t, s, buf, 5));
	ASSERT(!memcmp(buf, "after", 5), "data after SHUT_RD corrupted");
out:
	close_fd(&c);
	close_fd(&s);
}

struct blocked_read {
	int fd;
	ssize_t got;
	int err;
};

static void *read_blocking(void *arg)
{
	struct blocked_read *b = arg;
	char byte;

	ssize_t got = recv(b->fd, &byte, 1, 0);

	b->err = got < 0 ? errno : 0;
	__atomic_store_n(&b->got, got, __ATOMIC_SEQ_CST);
	return NULL;
}

/* A thread asleep in recv() wakes with EOF when another shuts reading. */
static void shutdown_rd_wakes_a_blocked_reader(struct tctx *t)
{
	struct blocked_read b = { .got = -2 };
	int c = -1, s = -1, i;
	bool started = false;
	pthread_t th;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	b.fd = c;
	ASSERT(!start_thread(&th, read_blocking, &b), "pthread_create");
	started = true;
	usleep(200000);
	ASSERT_OK(shutdown(c, SHUT_RD));
	for (i = 0; i < io_ms() / 10 &&
		    __atomic_load_n(&b.got, __ATOMIC_SEQ_CST) == -2;
	     i++)
		usleep(10000);
	ASSERT(b.got != -2, "the blocked recv() did not wake");
	ASSERT(b.got == 0, "recv: want EOF, got %zd (%s)", b.got,
	       errname(b.err));
out:
	if (started) {
		if (b.got == -2)
			send_all(t, s, "x", 1);
		pthread_join(th, NULL);
	}
	close_fd(&c);
	close_fd(&s);
}

static void send_after_shutdown_wr_gives_epipe(struct tctx *t)
{
	sig_atomic_t before = sigpipe_count;
	int c = -1, s = -1;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(shutdown(c, SHUT_WR));
	ASSERT_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
	ASSERT(sigpipe_count == before, "SIGPIPE raised despite MSG_NOSIGNAL");
	TRY(expect_eof(t, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/* Waits until poll() says POLLERR on fd, as a reset does; 0 or -1. */
static int wait_for_pollerr(struct tctx *t, int fd, const char *who)
{
	int64_t end = now_ms() + io_ms();
	int ev;

	do
		ev = wait_fd(fd, POLLIN, io_ms());
	while (ev > 0 && !(ev & POLLERR) && !usleep(1000) && now_ms() < end);
	ASSERT(ev == (POLLIN | POLLERR | POLLHUP),
	       "%s: want POLLIN|POLLERR|POLLHUP, got %#x", who, ev);
	return 0;
out:
	return -1;
}

/*
 * Bytes that reach an end which shut down both directions reset the
 * connection (RFC 1122, 4.2.2.13): *c shut both, and *s read the EOF and
 * sent one byte after it.
 */
static int send_late_byte(struct tctx *t, int *c, int *s)
{
	TRY(make_pair(t, c, s, 0));
	ASSERT_OK(shutdown(*c, SHUT_RDWR));
	TRY(expect_eof(t, *s));
	ASSERT(send(*s, "x", 1, MSG_NOSIGNAL) == 1, "late send: %s",
	       errname(errno));
	return 0;
out:
	return -1;
}

/* As send_late_byte(), and the reset shows at *c as POLLERR. */
static int late_byte_after_shutdown_rdwr(struct tctx *t, int *c, int *s)
{
	TRY(send_late_byte(t, c, s));
	TRY(wait_for_pollerr(t, *c, "reader"));
	return 0;
out:
	return -1;
}

static void late_byte_after_shutdown_rdwr_resets_the_reader(struct tctx *t)
{
	int c = -1, s = -1;
	char buf[4];

	TRY(late_byte_after_shutdown_rdwr(t, &c, &s));
	ASSERT_ERR(recv(c, buf, sizeof(buf), 0), ECONNRESET);
	ASSERT(recv(c, buf, sizeof(buf), 0) == 0,
	       "second read after the reset: want EOF");
out:
	close_fd(&c);
	close_fd(&s);
}

/* The sender's socket, reset after the FIN it read: EPIPE, then EOF. */
static void
late_byte_after_shutdown_rdwr_fails_the_senders_writes(struct tctx *t)
{
	int c = -1, s = -1;
	char buf[4];

	TRY(late_byte_after_shutdown_rdwr(t, &c, &s));
	TRY(wait_for_pollerr(t, s, "sender"));
	ASSERT_ERR(send(s, "y", 1, MSG_NOSIGNAL), EPIPE);
	ASSERT(recv(s, buf, sizeof(buf), 0) == 0,
	       "sender's read after the reset: want EOF");
out:
	close_fd(&c);
	close_fd(&s);
}

/* An event loop that learns of the reset from epoll fails its next write. */
static void late_byte_reset_reaches_the_senders_epoll(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN }, got;
	int c = -1, s = -1, ep = -1, n;
	int64_t end;

	TRY(late_byte_after_shutdown_rdwr(t, &c, &s));
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	end = now_ms() + io_ms();
	do
		n = epoll_wait(ep, &got, 1, io_ms());
	while (n == 1 && !(got.events & EPOLLERR) && !usleep(1000) &&
	       now_ms() < end);
	ASSERT(n == 1 && got.events == (EPOLLIN | EPOLLERR | EPOLLHUP),
	       "want EPOLLIN|EPOLLERR|EPOLLHUP, got %d, %#x", n, got.events);
	ASSERT_ERR(send(s, "y", 1, MSG_NOSIGNAL), EPIPE);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/* A close after the late byte came: the sender's writes still fail. */
static void late_byte_then_close_fails_the_senders_writes(struct tctx *t)
{
	int c = -1, s = -1;

	TRY(send_late_byte(t, &c, &s));
	usleep(100000);
	close_fd(&c);
	TRY(wait_for_pollerr(t, s, "sender"));
	ASSERT_ERR(send(s, "y", 1, MSG_NOSIGNAL), EPIPE);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * Bytes that came before this end's second shutdown are not late: after
 * SHUT_WR the peer's reply comes, and after SHUT_RD it is still read.
 * (No poll between: the reply's arrival must not have been looked at.)
 */
static void bytes_before_the_second_shutdown_are_still_read(struct tctx *t)
{
	int c = -1, s = -1;
	char buf[8];

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(shutdown(c, SHUT_WR));
	TRY(expect_eof(t, s));
	TRY(send_all(t, s, "reply", 5));
	usleep(200000);
	ASSERT_OK(shutdown(c, SHUT_RD));
	TRY(recv_exact(t, c, buf, 5));
	ASSERT(!memcmp(buf, "reply", 5), "data corrupted");
	ASSERT(recv(c, buf, sizeof(buf), 0) == 0, "want EOF after the reply");
out:
	close_fd(&c);
	close_fd(&s);
}

static void eof_after_close_reads_zero_repeatedly(struct tctx *t)
{
	int c = -1, s = -1, i, ev;
	char buf[16];
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	TRY(send_all(t, c, "last words", 10));
	close_fd(&c);
	TRY(recv_exact(t, s, buf, 10));
	ASSERT(!memcmp(buf, "last words", 10), "data corrupted");
	for (i = 0; i < 3; i++) {
		ev = wait_fd(s, POLLIN, io_ms());
		ASSERT(ev & POLLIN, "EOF not readable (round %d)", i);
		r = read(s, buf, sizeof(buf));
		ASSERT(r == 0, "read %d after EOF: %zd (%s)", i, r,
		       r < 0 ? errname(errno) : "data");
	}
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * libuv closes every fd with syscall(SYS_close, fd): that close ends the
 * connection as close() does, the bytes sent before it first.
 */
static void raw_close_syscall_ends_the_connection(struct tctx *t)
{
	const size_t len = 64 << 10;
	int c = -1, s = -1;

	TRY(make_pair(t, &c, &s, 0));
	TRY(send_pattern(t, c, 61, len));
	ASSERT_OK(syscall(SYS_close, c));
	c = -1;
	TRY(recv_pattern(t, s, 61, len, NULL));
	TRY(expect_eof(t, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/* The number a raw close freed names the next socket, and only it. */
static void raw_close_syscall_frees_the_number(struct tctx *t)
{
	int c1 = -1, s1 = -1, c2 = -1, s2 = -1, old;

	TRY(make_pair(t, &c1, &s1, 0));
	old = c1;
	ASSERT_OK(syscall(SYS_close, c1));
	c1 = -1;
	TRY(make_pair(t, &c2, &s2, 0));
	TRY(roundtrip(t, c2, s2));
	TRY(expect_eof(t, s1));
	note(t, "number %s", c2 == old ? "reused" : "not reused");
out:
	close_fd(&c1);
	close_fd(&s1);
	close_fd(&c2);
	close_fd(&s2);
}

static int abortive_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) < 0)
		return -1;
	return close(fd);
}

/*
 * A reader that drains until EAGAIN and then waits, edge-triggered, as
 * an event loop does: the peer's bytes, then its reset, however the two
 * fall between the reads and the waits.
 */
static void edge_triggered_reader_gets_bytes_then_reset(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int c = -1, s = -1, ep = -1, err = 0;
	int64_t end;
	char buf[64];
	size_t got = 0;
	ssize_t r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, c, s));
	ASSERT_OK(set_nonblock(c, true));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	TRY(send_all(t, s, "abc", 3));
	ASSERT_OK(abortive_close(s));
	s = -1;
	end = now_ms() + io_ms();
	while (!err && now_ms() < end) {
		r = recv(c, buf + got, sizeof(buf) - got, 0);
		if (r > 0) {
			got += r;
			continue;
		}
		ASSERT(r < 0, "recv: EOF instead of a reset");
		if (errno != EAGAIN) {
			err = errno;
			break;
		}
		epoll_wait(ep, &ev, 1, (int)(end - now_ms()));
	}
	ASSERT(got == 3 && !memcmp(buf, "abc", 3), "got %zu bytes", got);
	ASSERT(err == ECONNRESET, "want ECONNRESET, got %s",
	       err ? errname(err) : "nothing in time");
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void linger_zero_close_resets_peer(struct tctx *t)
{
	struct linger lg;
	int c = -1, s = -1, ev;
	socklen_t len;
	char buf[4];

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, c, s));
	lg.l_onoff = 1;
	lg.l_linger = 0;
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	memset(&lg, 0, sizeof(lg));
	len = sizeof(lg);
	ASSERT_OK(getsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len));
	ASSERT(lg.l_onoff && lg.l_linger == 0, "SO_LINGER not stored");
	ASSERT_OK(close(s));
	s = -1;
	ev = wait_fd(c, POLLIN, io_ms());
	ASSERT(ev > 0, "no event after peer reset");
	ASSERT((ev & (POLLERR | POLLHUP)) == (POLLERR | POLLHUP),
	       "want POLLERR|POLLHUP, got %#x", ev);
	ASSERT_ERR(recv(c, buf, sizeof(buf), 0), ECONNRESET);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * A reset is reported once: the read that meets it fails with ECONNRESET,
 * and the reads after it find the end of the stream, with SO_ERROR clear.
 */
/*
 * A connected client *c whose peer closed abortively, and the read that
 * met the reset (ECONNRESET); 0, or -1 with the test failed.
 */
static int read_the_reset(struct tctx *t, int *c)
{
	int s = -1;
	char buf[4];

	TRY(make_pair(t, c, &s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, *c, s));
	ASSERT_OK(abortive_close(s));
	s = -1;
	ASSERT(wait_fd(*c, POLLIN, io_ms()) > 0, "no event after peer reset");
	ASSERT_ERR(recv(*c, buf, sizeof(buf), 0), ECONNRESET);
	return 0;
out:
	close_fd(&s);
	return -1;
}

static void reset_is_reported_once_then_reads_end(struct tctx *t)
{
	int c = -1, err = -1;
	socklen_t len = sizeof(err);
	char buf[4];

	TRY(read_the_reset(t, &c));
	ASSERT(recv(c, buf, sizeof(buf), 0) == 0,
	       "second read after the reset: want EOF");
	ASSERT_OK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len));
	ASSERT(err == 0, "SO_ERROR after the reported reset: want 0, got %s",
	       errname(err));
out:
	close_fd(&c);
}

/*
 * Once the reset is read, the read side stays shut: poll() and epoll say
 * hung up, readable and POLLRDHUP, which event loops take for the peer's
 * end.
 */
static void reset_read_leaves_the_read_side_shut(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP }, got[8];
	int c = -1, ep = -1, n;

	TRY(read_the_reset(t, &c));
	n = wait_fd(c, POLLIN | POLLRDHUP, io_ms());
	ASSERT(n == (POLLIN | POLLHUP | POLLRDHUP),
	       "poll: want POLLIN|POLLHUP|POLLRDHUP, got %#x", n);
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	n = epoll_wait(ep, got, 8, io_ms());
	ASSERT(n == 1 && got[0].events == (EPOLLIN | EPOLLHUP | EPOLLRDHUP),
	       "epoll: want EPOLLIN|EPOLLHUP|EPOLLRDHUP, got %d, %#x", n,
	       got[0].events);
out:
	close_fd(&ep);
	close_fd(&c);
}

/*
 * Both sides shut (the peer's FIN read, then this end's own shutdown):
 * poll() reports POLLHUP whatever the entry asks for, with events 0 (a
 * program that watches a connection for its end only) or with POLLIN.
 */
static int both_sides_shut(struct tctx *t, int *c, int *s)
{
	char byte;

	TRY(make_pair(t, c, s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, *c, *s));
	ASSERT_OK(shutdown(*s, SHUT_WR));
	ASSERT(wait_fd(*c, POLLIN, io_ms()) > 0, "no EOF at the client");
	ASSERT(recv(*c, &byte, 1, 0) == 0, "want EOF at the client");
	ASSERT_OK(shutdown(*c, SHUT_WR));
	return 0;
out:
	return -1;
}

static void
poll_without_events_reports_hangup_once_both_sides_shut(struct tctx *t)
{
	int c = -1, s = -1, ev;

	TRY(both_sides_shut(t, &c, &s));
	ev = wait_fd(c, 0, io_ms());
	ASSERT(ev == POLLHUP, "want POLLHUP, got %#x", ev);
out:
	close_fd(&c);
	close_fd(&s);
}

static void poll_for_input_reports_hangup_once_both_sides_shut(struct tctx *t)
{
	int c = -1, s = -1, ev;

	TRY(both_sides_shut(t, &c, &s));
	ev = wait_fd(c, POLLIN, io_ms());
	ASSERT(ev == (POLLIN | POLLHUP), "want POLLIN|POLLHUP, got %#x", ev);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * A reset is readable (the read gets the error) as well as an error and a
 * hang-up.  (Over RDMA, the queue pair's end may show as readable a moment
 * before the reset: the loops wait for the error.)  Event loops that take
 * EPOLLHUP without EPOLLIN for an orderly close (Twisted's) must see
 * ECONNRESET, not EOF.
 */
static void reset_reports_readable_to_poll(struct tctx *t)
{
	int c = -1, s = -1, ev;
	int64_t end;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, c, s));
	ASSERT_OK(abortive_close(s));
	s = -1;
	end = now_ms() + io_ms();
	do
		ev = wait_fd(c, POLLIN, io_ms());
	while (ev > 0 && !(ev & POLLERR) && now_ms() < end);
	ASSERT(ev == (POLLIN | POLLERR | POLLHUP),
	       "want POLLIN|POLLERR|POLLHUP, got %#x", ev);
out:
	close_fd(&c);
	close_fd(&s);
}

static void reset_reports_readable_to_epoll(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int c = -1, s = -1, ep = -1, n;
	int64_t end;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, c, s));
	ASSERT_OK(ep = epoll_create1(EPOLL_CLOEXEC));
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	ASSERT_OK(abortive_close(s));
	s = -1;
	end = now_ms() + io_ms();
	do
		n = epoll_wait(ep, &ev, 1, io_ms());
	while (n == 1 && !(ev.events & EPOLLERR) && now_ms() < end);
	ASSERT(n == 1, "epoll_wait: %d", n);
	ASSERT(ev.events == (EPOLLIN | EPOLLERR | EPOLLHUP),
	       "want EPOLLIN|EPOLLERR|EPOLLHUP, got %#x", ev.events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/* Closes an fd after a pause: the peer's read is asleep by then. */
struct delayed_close {
	int fd;
	bool abortive;
};

static void *delayed_close_thread(void *arg)
{
	struct delayed_close *d = arg;

	sleep_ms(200);
	if (d->abortive)
		abortive_close(d->fd);
	else
		close(d->fd);
	return NULL;
}

/*
 * A read asleep on an empty connection, with nothing before it but
 * blocking calls, wakes when the peer closes or resets: with EOF after a
 * close, with ECONNRESET after an abortive one.
 */
static void blocking_read_wakes_when_peer_goes(struct tctx *t, bool abortive)
{
	struct delayed_close d = { .fd = -1, .abortive = abortive };
	int c = -1, s = -1;
	bool running = false;
	pthread_t th;
	char buf[4];
	ssize_t r;
	int err;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, c, s));
	d.fd = c;
	ASSERT(!start_thread(&th, delayed_close_thread, &d), "pthread_create");
	running = true;
	c = -1; /* the thread closes it */
	r = read(s, buf, sizeof(buf));
	err = errno;
	pthread_join(th, NULL);
	running = false;
	if (abortive)
		ASSERT(r < 0 && err == ECONNRESET,
		       "read: %zd (%s), want ECONNRESET", r,
		       r < 0 ? errname(err) : "data or EOF");
	else
		ASSERT(r == 0, "read: %zd (%s), want EOF", r,
		       r < 0 ? errname(err) : "data");
out:
	if (running)
		pthread_join(th, NULL);
	close_fd(&c);
	close_fd(&s);
}

static void blocking_read_wakes_with_eof_when_peer_closes(struct tctx *t)
{
	blocking_read_wakes_when_peer_goes(t, false);
}

static void blocking_read_wakes_with_reset_when_peer_aborts(struct tctx *t)
{
	blocking_read_wakes_when_peer_goes(t, true);
}

static void rcvtimeo_makes_recv_time_out(struct tctx *t)
{
	struct timeval tv = { 0, 200000 }, got;
	int c = -1, s = -1;
	socklen_t len;
	int64_t t0, dt;
	char buf[8];

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	len = sizeof(got);
	ASSERT_OK(getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &got, &len));
	/* The kernel stores it in jiffies; 200 ms is exact at common HZ. */
	ASSERT(got.tv_sec == 0 && got.tv_usec >= 190000 &&
		       got.tv_usec <= 210000,
	       "SO_RCVTIMEO reads back wrong");
	t0 = now_ms();
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	dt = now_ms() - t0;
	ASSERT(dt >= 100, "recv returned too early");
	ASSERT(dt < io_ms(), "recv blocked far too long");
	/* Data that is there is returned at once. */
	TRY(send_all(t, c, "late", 4));
	TRY(wait_queued(t, s, 4));
	ASSERT(recv(s, buf, sizeof(buf), 0) == 4, "recv: %s", errname(errno));
out:
	close_fd(&c);
	close_fd(&s);
}

/* A new SO_RCVTIMEO holds from the next recv on. */
static void rcvtimeo_changed_between_reads_holds_for_the_next(struct tctx *t)
{
	struct timeval tv = { 0, 100000 };
	int c = -1, s = -1;
	int64_t t0, dt;
	char buf[8];

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	tv.tv_usec = 500000;
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	t0 = now_ms();
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	dt = now_ms() - t0;
	ASSERT(dt >= 400, "recv returned after %lld ms, not 500",
	       (long long)dt);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * O_NONBLOCK set and cleared by the system call itself (syscall(SYS_fcntl),
 * as some runtimes do) holds for the next recv, after one that waited.
 */
static void syscall_fcntl_nonblock_holds_for_the_next_recv(struct tctx *t)
{
	struct timeval tv = { 0, 300000 };
	int c = -1, s = -1;
	int64_t t0, dt;
	long fl;
	char buf[8];

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	ASSERT_OK(fl = syscall(SYS_fcntl, s, F_GETFL));
	ASSERT_OK(syscall(SYS_fcntl, s, F_SETFL, fl | O_NONBLOCK));
	t0 = now_ms();
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	dt = now_ms() - t0;
	ASSERT(dt < 150, "non-blocking recv waited %lld ms", (long long)dt);
	ASSERT_OK(syscall(SYS_fcntl, s, F_SETFL, fl));
	t0 = now_ms();
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	dt = now_ms() - t0;
	ASSERT(dt >= 200, "blocking recv returned after %lld ms, not 300",
	       (long long)dt);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/* Writes to non-blocking @fd until EAGAIN; the peer is not reading. */
static int fill_socket(struct tctx *t, int fd)
{
	static unsigned char junk[65536];
	size_t total = 0;
	int settle;
	ssize_t r;

	/* Loop until EAGAIN persists after the data had time to move. */
	for (settle = 0; settle < 3; settle++) {
		for (;;) {
			r = send(fd, junk, sizeof(junk),
				 MSG_DONTWAIT | MSG_NOSIGNAL);
			if (r < 0)
				break;
			total += r;
			ASSERT(total < (256u << 20), "socket never filled");
		}
		ASSERT(errno == EAGAIN, "send: %s", errname(errno));
		sleep_ms(20);
	}
	return 0;
out:
	return -1;
}

static void sndtimeo_makes_send_time_out_on_full_socket(struct tctx *t)
{
	struct timeval tv = { 0, 200000 };
	static char buf[65536];
	int c = -1, s = -1, i;
	int64_t t0, dt = 0, end;
	ssize_t r = 0;

	TRY(make_pair(t, &c, &s, PAIR_SMALL_BUFFERS));
	TRY(fill_socket(t, c));
	ASSERT_OK(setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	/*
	 * A "full" connection still takes a little more for a while: each
	 * zero-window probe lets the receiver compact its queue and reopen
	 * the window a crack.  Such a send returns a short count when its
	 * timeout expires; keep going until one copies nothing and fails.
	 */
	end = now_ms() + io_ms();
	for (i = 0; i < 20 && now_ms() < end; i++) {
		t0 = now_ms();
		r = send(c, buf, sizeof(buf), MSG_NOSIGNAL);
		dt = now_ms() - t0;
		if (r <= 0)
			break;
	}
	ASSERT(r < 0 && errno == EAGAIN, "send on a full socket: %zd (%s)", r,
	       r < 0 ? errname(errno) : "kept making progress");
	ASSERT(dt >= 100, "send returned too early");
	ASSERT(dt < io_ms(), "send blocked far too long");
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * Sends on a full socket until one copies nothing: EAGAIN, and how long
 * that last send waited (in *dt).
 */
static int send_until_timeout(struct tctx *t, int c, int64_t *dt)
{
	static char buf[65536];
	int64_t t0, end = now_ms() + io_ms();
	ssize_t r = 0;
	int i;

	for (i = 0; i < 20 && now_ms() < end; i++) {
		t0 = now_ms();
		r = send(c, buf, sizeof(buf), MSG_NOSIGNAL);
		*dt = now_ms() - t0;
		if (r <= 0)
			break;
	}
	ASSERT(r < 0 && errno == EAGAIN, "send on a full socket: %zd (%s)", r,
	       r < 0 ? errname(errno) : "kept making progress");
	return 0;
out:
	return -1;
}

/* A new SO_SNDTIMEO holds from the next send on. */
static void sndtimeo_changed_between_sends_holds_for_the_next(struct tctx *t)
{
	struct timeval tv = { 0, 100000 };
	int c = -1, s = -1;
	int64_t dt = 0;

	TRY(make_pair(t, &c, &s, PAIR_SMALL_BUFFERS));
	TRY(fill_socket(t, c));
	ASSERT_OK(setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	TRY(send_until_timeout(t, c, &dt));
	tv.tv_usec = 600000;
	ASSERT_OK(setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	TRY(send_until_timeout(t, c, &dt));
	ASSERT(dt >= 450, "send returned after %lld ms, not 600",
	       (long long)dt);
out:
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: ioctl, fcntl and socket options                              */
/* ------------------------------------------------------------------ */

static void fionread_reports_queued_bytes(struct tctx *t)
{
	unsigned char buf[1234];
	int c = -1, s = -1, n = -1;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ASSERT_OK(ioctl(s, FIONREAD, &n));
	ASSERT(n == 0, "FIONREAD on empty socket: %d", n);
	pattern_fill(buf, sizeof(buf), 23, 0);
	TRY(send_all(t, c, buf, sizeof(buf)));
	TRY(wait_queued(t, s, sizeof(buf)));
	ASSERT_OK(ioctl(s, FIONREAD, &n));
	ASSERT(n == (int)sizeof(buf), "FIONREAD: want %zu, got %d", sizeof(buf),
	       n);
	TRY(recv_exact(t, s, buf, 234));
	ASSERT_OK(ioctl(s, FIONREAD, &n));
	ASSERT(n == 1000, "FIONREAD after reading 234: %d", n);
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * The peer holds every byte @sent that the sender's SIOCOUTQ no longer
 * counts: what it read (@got) and FIONREAD there add up to @sent, at
 * once or as soon as the arrivals are counted (within the I/O timeout).
 */
static int expect_peer_holds(struct tctx *t, int s, size_t sent, size_t got)
{
	int64_t end = now_ms() + io_ms();
	int inq = -1;

	for (;;) {
		ASSERT_OK(ioctl(s, FIONREAD, &inq));
		if ((size_t)inq + got == sent)
			return 0;
		ASSERT(now_ms() < end,
		       "SIOCOUTQ said 0 with %zu of %zu bytes at the peer",
		       (size_t)inq + got, sent);
		sleep_ms(1);
	}
out:
	return -1;
}

/* Waits until @fd's SIOCOUTQ says 0: the peer has acknowledged it all. */
static int wait_outq_empty(struct tctx *t, int fd)
{
	int64_t end = now_ms() + io_ms();
	int outq = -1;

	for (;;) {
		ASSERT_OK(ioctl(fd, SIOCOUTQ, &outq));
		if (!outq)
			return 0;
		ASSERT(now_ms() < end,
		       "SIOCOUTQ still %d after the peer read every byte",
		       outq);
		sleep_ms(1);
	}
out:
	return -1;
}

/*
 * SIOCOUTQ counts the bytes the peer has not acknowledged: when it says
 * 0, the peer holds all that was sent, so a program may wait for 0
 * before it lets its process end.  Bytes a sender queued while its peer
 * read nothing count until they arrive, and SIOCOUTQNSD (those not sent
 * yet) is never more.
 */
static void siocoutq_is_zero_only_once_the_peer_holds_every_byte(struct tctx *t)
{
	const size_t offered = 1 << 20;
	unsigned char *buf = malloc(offered);
	size_t sent = 0, got = 0, bad;
	int c = -1, s = -1, round, outq = -1, unsent = -1;
	ssize_t r;

	ASSERT(buf, "out of memory");
	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	pattern_fill(buf, offered, 47, 0);
	for (round = 0; round < 4 && sent < offered; round++) {
		while (sent < offered) {
			r = send(c, buf + sent, offered - sent, MSG_NOSIGNAL);
			if (r < 0 && errno == EAGAIN)
				break;
			ASSERT(r > 0, "send: %s", r ? errname(errno) : "0");
			sent += r;
		}
		sleep_ms(200);
	}
	ASSERT_OK(ioctl(c, SIOCOUTQ, &outq));
	ASSERT_OK(ioctl(c, SIOCOUTQNSD, &unsent));
	ASSERT(outq >= 0 && (size_t)outq <= sent,
	       "SIOCOUTQ %d with %zu bytes sent", outq, sent);
	ASSERT(unsent >= 0 && unsent <= outq, "SIOCOUTQNSD %d, SIOCOUTQ %d",
	       unsent, outq);
	while (got < sent) {
		ASSERT_OK(ioctl(c, SIOCOUTQ, &outq));
		if (!outq)
			TRY(expect_peer_holds(t, s, sent, got));
		r = sent - got < 8192 ? (ssize_t)(sent - got) : 8192;
		TRY(recv_exact(t, s, buf, r));
		bad = pattern_mismatch(buf, r, 47, got);
		ASSERT(bad == (size_t)r, "data mismatch at byte %zu",
		       got + bad);
		got += r;
	}
	TRY(wait_outq_empty(t, c));
	note(t, "counted");
out:
	close_fd(&c);
	close_fd(&s);
	free(buf);
}

/*
 * A blocking read that timed out, then FIONBIO on, then off: the reads
 * after each follow the flag the kernel holds, at once and after the
 * timeout.
 */
static void
fionbio_turns_a_blocking_socket_non_blocking_and_back(struct tctx *t)
{
	struct timeval tv = { .tv_usec = 200000 };
	int c = -1, s = -1, on = 1, off = 0;
	int64_t start;
	char buf[4];

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	ASSERT_OK(ioctl(s, FIONBIO, &on));
	start = now_ms();
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	ASSERT(now_ms() - start < 150, "non-blocking recv waited %lld ms",
	       (long long)(now_ms() - start));
	ASSERT_OK(ioctl(s, FIONBIO, &off));
	start = now_ms();
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	ASSERT(now_ms() - start >= 150, "blocking recv returned after %lld ms",
	       (long long)(now_ms() - start));
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

static void fcntl_toggles_nonblock(struct tctx *t)
{
	struct dripper d = {
		.seed = 24, .piece = 100, .pieces = 1, .delay_ms = 100
	};
	bool running = false;
	int c = -1, s = -1, fl;
	unsigned char buf[100];
	pthread_t th;
	int64_t t0;
	ssize_t r;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(fl = fcntl(s, F_GETFL));
	ASSERT(!(fl & O_NONBLOCK), "new socket is non-blocking");
	ASSERT_OK(fcntl(s, F_SETFL, fl | O_NONBLOCK));
	ASSERT_OK(fl = fcntl(s, F_GETFL));
	ASSERT(fl & O_NONBLOCK, "O_NONBLOCK did not stick");
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	ASSERT_OK(fcntl(s, F_SETFL, fl & ~O_NONBLOCK));
	ASSERT_OK(fl = fcntl(s, F_GETFL));
	ASSERT(!(fl & O_NONBLOCK), "O_NONBLOCK did not clear");
	/* Blocking again: recv waits for the delayed sender. */
	d.fd = c;
	ASSERT(!start_thread(&th, drip_send, &d), "pthread_create");
	running = true;
	t0 = now_ms();
	r = recv(s, buf, sizeof(buf), MSG_WAITALL);
	ASSERT(r == (ssize_t)sizeof(buf), "blocking recv: %zd (%s)", r,
	       r < 0 ? errname(errno) : "short");
	ASSERT(now_ms() - t0 >= d.delay_ms / 2, "recv did not block");
	pthread_join(th, NULL);
	running = false;
	ASSERT(!d.err[0], "sender: %s", d.err);
out:
	if (running) {
		shutdown(c, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&c);
	close_fd(&s);
}

/* Sets @name to 1 then 0, reading it back each time. */
static int toggle_int_opt(struct tctx *t, int fd, int level, int name,
			  const char *what)
{
	int v = -1;

	ASSERT_OK(set_int_opt(fd, level, name, 1));
	ASSERT_OK(get_int_opt(fd, level, name, &v));
	ASSERT(v == 1, "%s: want 1 after set, got %d", what, v);
	ASSERT_OK(set_int_opt(fd, level, name, 0));
	ASSERT_OK(get_int_opt(fd, level, name, &v));
	ASSERT(v == 0, "%s: want 0 after clear, got %d", what, v);
	return 0;
out:
	return -1;
}

static void tcp_nodelay_set_get(struct tctx *t)
{
	int c = -1, s = -1, v = -1;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(get_int_opt(c, IPPROTO_TCP, TCP_NODELAY, &v));
	ASSERT(v == 0, "TCP_NODELAY is on by default");
	TRY(toggle_int_opt(t, c, IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY"));
	ASSERT_OK(set_int_opt(s, IPPROTO_TCP, TCP_NODELAY, 1));
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

static void so_reuseaddr_set_get(struct tctx *t)
{
	int c = -1, s = -1, l = -1, v = -1;
	struct addr bound;

	l = socket(family(&server_addr), SOCK_STREAM, 0);
	ASSERT_OK(l);
	ASSERT_OK(get_int_opt(l, SOL_SOCKET, SO_REUSEADDR, &v));
	ASSERT(v == 0, "SO_REUSEADDR is on by default");
	TRY(toggle_int_opt(t, l, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR"));
	ASSERT_OK(set_int_opt(l, SOL_SOCKET, SO_REUSEADDR, 1));
	bound = server_addr;
	addr_set_port(&bound, 0);
	ASSERT_OK(bind(l, sa(&bound), bound.len));
	ASSERT_OK(listen(l, 4));
	ASSERT_OK(local_addr(l, &bound));
	c = tcp_socket(t, family(&server_addr), 0, NULL);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(toggle_int_opt(t, s, SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR"));
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

static void so_keepalive_set_get(struct tctx *t)
{
	int c = -1, s = -1, v = -1;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_KEEPALIVE, &v));
	ASSERT(v == 0, "SO_KEEPALIVE is on by default");
	TRY(toggle_int_opt(t, c, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE"));
	ASSERT_OK(set_int_opt(c, SOL_SOCKET, SO_KEEPALIVE, 1));
	ASSERT_OK(set_int_opt(c, IPPROTO_TCP, TCP_KEEPIDLE, 30));
	ASSERT_OK(set_int_opt(c, IPPROTO_TCP, TCP_KEEPINTVL, 5));
	ASSERT_OK(set_int_opt(c, IPPROTO_TCP, TCP_KEEPCNT, 3));
	ASSERT_OK(get_int_opt(c, IPPROTO_TCP, TCP_KEEPIDLE, &v));
	ASSERT(v == 30, "TCP_KEEPIDLE: %d", v);
	ASSERT_OK(get_int_opt(c, IPPROTO_TCP, TCP_KEEPINTVL, &v));
	ASSERT(v == 5, "TCP_KEEPINTVL: %d", v);
	ASSERT_OK(get_int_opt(c, IPPROTO_TCP, TCP_KEEPCNT, &v));
	ASSERT(v == 3, "TCP_KEEPCNT: %d", v);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

static void socket_options_identify_tcp_stream(struct tctx *t)
{
	int c = -1, s = -1, l = -1, v = -1;
	struct addr bound;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT_OK(get_int_opt(l, SOL_SOCKET, SO_ACCEPTCONN, &v));
	ASSERT(v == 1, "listener: SO_ACCEPTCONN %d", v);
	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_ACCEPTCONN, &v));
	ASSERT(v == 0, "connected: SO_ACCEPTCONN %d", v);
	ASSERT_OK(get_int_opt(c, SOL_SOCKET, SO_TYPE, &v));
	ASSERT(v == SOCK_STREAM, "SO_TYPE %d", v);
	ASSERT_OK(get_int_opt(s, SOL_SOCKET, SO_PROTOCOL, &v));
	ASSERT(v == IPPROTO_TCP, "SO_PROTOCOL %d", v);
	ASSERT_OK(get_int_opt(s, SOL_SOCKET, SO_DOMAIN, &v));
	ASSERT(v == family(&server_addr), "SO_DOMAIN %d", v);
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: epoll                                                        */
/* ------------------------------------------------------------------ */

/* epoll_wait() for at most @ms into @ev (one slot); retries bare EINTR. */
static int epoll_one(int ep, struct epoll_event *ev, int ms)
{
	int r;

	memset(ev, 0, sizeof(*ev));
	do {
		r = epoll_wait(ep, ev, 1, ms);
	} while (r < 0 && retry_intr());
	return r;
}

static int epoll_add(int ep, int fd, uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static void epoll_level_triggered_repeats_until_drained(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;
	char buf[10];

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event before any data");
	TRY(send_all(t, c, "0123456789", 10));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.events == EPOLLIN, "first wait: %d %#x", n,
	       ev.events);
	TRY(wait_queued(t, s, 10));
	n = epoll_one(ep, &ev, 0);
	ASSERT(n == 1 && ev.events == EPOLLIN, "still readable: %d", n);
	TRY(recv_exact(t, s, buf, 5));
	n = epoll_one(ep, &ev, 0);
	ASSERT(n == 1 && ev.events == EPOLLIN, "half drained: %d", n);
	TRY(recv_exact(t, s, buf, 5));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event after draining");
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * EPOLLRDNORM and EPOLLWRNORM, which a TCP socket reports beside EPOLLIN
 * and EPOLLOUT, come when asked for, alone or beside them.
 */
static void epoll_rdnorm_alone_reports_an_arrival(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLRDNORM, 1));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event before any data: %#x", ev.events);
	TRY(send_all(t, c, "x", 1));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.events == EPOLLRDNORM, "want EPOLLRDNORM: %d %#x",
	       n, ev.events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_wrnorm_alone_reports_room(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, c, EPOLLWRNORM, 1));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.events == EPOLLWRNORM, "want EPOLLWRNORM: %d %#x",
	       n, ev.events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_norms_come_with_in_and_out_when_asked(struct tctx *t)
{
	const uint32_t all = EPOLLIN | EPOLLRDNORM | EPOLLOUT | EPOLLWRNORM;
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev[8];

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, all, 1));
	TRY(send_all(t, c, "x", 1));
	TRY(wait_queued(t, s, 1));
	n = epoll_wait(ep, ev, 8, io_ms());
	ASSERT(n == 1 && ev[0].events == all, "want %#x: %d %#x", all, n,
	       ev[0].events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * One slot: a readable and writable socket says both in one event, though
 * roceshim's entries for it are several.
 */
static void epoll_one_slot_reports_in_and_out_together(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN | EPOLLOUT, 1));
	TRY(send_all(t, c, "x", 1));
	TRY(wait_queued(t, s, 1));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.events == (EPOLLIN | EPOLLOUT),
	       "want EPOLLIN|EPOLLOUT: %d %#x", n, ev.events);
	n = epoll_one(ep, &ev, 0);
	ASSERT(n == 1 && ev.events == (EPOLLIN | EPOLLOUT),
	       "again: want EPOLLIN|EPOLLOUT: %d %#x", n, ev.events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_edge_triggered_reports_once_per_arrival(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;
	char buf[32];

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN | EPOLLET, 2));
	TRY(send_all(t, c, "first", 5));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && (ev.events & EPOLLIN), "first arrival: %d", n);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "reported again without new data");
	/* New data re-arms the edge even though the old was not read. */
	TRY(send_all(t, c, "second", 6));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && (ev.events & EPOLLIN), "second arrival: %d", n);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "second arrival reported twice");
	TRY(recv_exact(t, s, buf, 11));
	ASSERT(!memcmp(buf, "firstsecond", 11), "data corrupted");
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event after draining");
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_oneshot_reports_once_until_rearmed(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT };
	int c = -1, s = -1, ep = -1, n;
	char buf[8];

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN | EPOLLONESHOT, 3));
	TRY(send_all(t, c, "one", 3));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 3, "first event: %d", n);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "reported again before re-arm");
	TRY(send_all(t, c, "two", 3));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "new data reported while disarmed");
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.u64 = 33;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 33, "after re-arm: %d", n);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "reported twice after one re-arm");
	TRY(recv_exact(t, s, buf, 6));
	ASSERT(!memcmp(buf, "onetwo", 6), "data corrupted");
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/* A dup of an epoll fd is the same set: a re-arm through it works. */
static void epoll_oneshot_rearmed_through_a_dup_of_the_set(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT };
	int c = -1, s = -1, ep = -1, ep2 = -1, n;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(ep2 = dup(ep));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN | EPOLLONESHOT, 4));
	TRY(send_all(t, c, "one", 3));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 4, "first event: %d", n);
	ev.events = EPOLLIN | EPOLLONESHOT;
	ev.data.u64 = 44;
	ASSERT_OK(epoll_ctl(ep2, EPOLL_CTL_MOD, s, &ev));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 44, "after re-arm: %d", n);
	ASSERT_OK(epoll_ctl(ep2, EPOLL_CTL_DEL, s, NULL));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event after EPOLL_CTL_DEL through the dup");
out:
	close_fd(&ep2);
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * A ONESHOT registration for reading and writing fires once for the first
 * of the two; what becomes ready later (data, the peer's close) stays
 * unreported until it is re-armed.
 */
static void epoll_oneshot_disarms_every_event_of_the_socket(struct tctx *t)
{
	const uint32_t both = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLONESHOT;
	struct epoll_event ev;
	int c = -1, s = -1, ep = -1, n;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, both, 13));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.events == EPOLLOUT,
	       "first event: want EPOLLOUT, got %d (%#x)", n, ev.events);
	TRY(send_all(t, c, "x", 1));
	TRY(wait_queued(t, s, 1));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "data reported while disarmed (%#x)", ev.events);
	close_fd(&c);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "peer close reported while disarmed (%#x)", ev.events);
	ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
	ev.data.u64 = 14;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 14 &&
		       ev.events == (EPOLLIN | EPOLLRDHUP),
	       "after re-arm: want EPOLLIN|EPOLLRDHUP, got %d (%#x)", n,
	       ev.events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_ctl_mod_switches_in_to_out(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = 44 };
	int c = -1, s = -1, ep = -1, n;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 4));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "EPOLLIN on an empty socket");
	ev.events = EPOLLOUT;
	ev.data.u64 = 44;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1, "no event after MOD to EPOLLOUT");
	ASSERT(ev.events == EPOLLOUT && ev.data.u64 == 44,
	       "want EPOLLOUT/44, got %#x/%" PRIu64, ev.events, ev.data.u64);
	/* And back: with data queued, only EPOLLIN is reported. */
	TRY(send_all(t, c, "x", 1));
	TRY(wait_queued(t, s, 1));
	ev.events = EPOLLIN;
	ev.data.u64 = 45;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.events == EPOLLIN && ev.data.u64 == 45,
	       "after MOD back to EPOLLIN: %d %#x", n, ev.events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_ctl_del_stops_reports(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int c = -1, s = -1, ep = -1, n;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 5));
	ASSERT_ERR(epoll_add(ep, s, EPOLLIN, 5), EEXIST);
	TRY(send_all(t, c, "x", 1));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1, "no event while registered");
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event after EPOLL_CTL_DEL");
	ASSERT_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL), ENOENT);
	ASSERT_ERR(epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev), ENOENT);
	/* Adding it again works and reports the pending data. */
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 55));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 55, "no event after re-adding");
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * The kernel keys an epoll entry by file and fd: a dup of a registered fd,
 * the registered one since closed, has no entry of its own to change,
 * while the entry still reports.
 */
static void epoll_ctl_through_a_dup_of_a_closed_fd_is_enoent(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int c = -1, s = -1, d = -1, ep = -1, n;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 6));
	ASSERT_OK(d = dup(s));
	close_fd(&s);
	TRY(send_all(t, c, "x", 1));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 6, "no event from the entry");
	ASSERT_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, d, NULL), ENOENT);
	ASSERT_ERR(epoll_ctl(ep, EPOLL_CTL_MOD, d, &ev), ENOENT);
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 6, "the entry stopped reporting");
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&d);
}

static void epoll_data_u64_and_ptr_preserved(struct tctx *t)
{
	static const uint64_t magic = 0xfedcba9876543210ULL;
	struct epoll_event ev, evs[4];
	int c = -1, s = -1, ep = -1, n, i;
	bool seen_u64 = false, seen_ptr = false;
	int marker = 0;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ev.events = EPOLLIN;
	ev.data.u64 = magic;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
	ev.events = EPOLLOUT;
	ev.data.ptr = &marker;
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	TRY(send_all(t, c, "x", 1));
	TRY(wait_queued(t, s, 1));
	n = epoll_wait(ep, evs, 4, io_ms());
	ASSERT(n == 2, "want 2 events, got %d", n);
	for (i = 0; i < n; i++) {
		if (evs[i].events == EPOLLIN && evs[i].data.u64 == magic)
			seen_u64 = true;
		else if (evs[i].events == EPOLLOUT &&
			 evs[i].data.ptr == &marker)
			seen_ptr = true;
	}
	ASSERT(seen_u64, "u64 data not preserved");
	ASSERT(seen_ptr, "ptr data not preserved");
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * One socket, ready both ways, is one event in every epoll_wait variant,
 * however many slots the caller offers.
 */
static void epoll_reports_one_event_per_ready_socket(struct tctx *t)
{
	const uint32_t both = EPOLLIN | EPOLLOUT;
	struct epoll_event evs[4];
	int c = -1, s = -1, ep = -1, n;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, both, 12));
	TRY(send_all(t, c, "x", 1));
	TRY(wait_queued(t, s, 1));
	n = epoll_wait(ep, evs, 4, io_ms());
	ASSERT(n == 1 && evs[0].events == both && evs[0].data.u64 == 12,
	       "epoll_wait: want 1 event IN|OUT, got %d (%#x)", n,
	       n > 0 ? evs[0].events : 0);
	n = epoll_pwait(ep, evs, 4, io_ms(), NULL);
	ASSERT(n == 1 && evs[0].events == both,
	       "epoll_pwait: want 1 event IN|OUT, got %d (%#x)", n,
	       n > 0 ? evs[0].events : 0);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_fd_in_two_sets_reports_in_both(struct tctx *t)
{
	int c = -1, s = -1, ep1 = -1, ep2 = -1, n;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep1 = epoll_create1(0));
	ASSERT_OK(ep2 = epoll_create1(0));
	ASSERT_OK(epoll_add(ep1, s, EPOLLIN, 61));
	ASSERT_OK(epoll_add(ep2, s, EPOLLIN | EPOLLET, 62));
	TRY(send_all(t, c, "x", 1));
	n = epoll_one(ep1, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 61, "first set: %d", n);
	n = epoll_one(ep2, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 62, "second set: %d", n);
	/* Removing it from one set leaves the other one alone. */
	ASSERT_OK(epoll_ctl(ep1, EPOLL_CTL_DEL, s, NULL));
	TRY(send_all(t, c, "y", 1));
	n = epoll_one(ep2, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 62, "second set after DEL: %d", n);
	n = epoll_one(ep1, &ev, QUIET_MS);
	ASSERT(n == 0, "first set reports after DEL");
out:
	close_fd(&ep1);
	close_fd(&ep2);
	close_fd(&c);
	close_fd(&s);
}

/*
 * Blocks SIGUSR1 and makes it pending, so that a p-variant wait whose
 * mask unblocks it must be interrupted at once.  @wait_mask gets the
 * caller's mask minus SIGUSR1, @saved the mask to restore.
 */
static int pend_sigusr1(sigset_t *wait_mask, sigset_t *saved)
{
	sigset_t usr1;

	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (pthread_sigmask(SIG_BLOCK, &usr1, saved))
		return -1;
	*wait_mask = *saved;
	sigdelset(wait_mask, SIGUSR1);
	return raise(SIGUSR1);
}

static void epoll_pwait_sigmask_lets_pending_signal_interrupt(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n, e;
	sig_atomic_t before = sigusr1_count;
	sigset_t wait_mask, saved;
	bool masked = false;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 7));
	ASSERT_OK(pend_sigusr1(&wait_mask, &saved));
	masked = true;
	ASSERT(sigusr1_count == before, "SIGUSR1 delivered while blocked");
	n = epoll_pwait(ep, &ev, 1, io_ms(), &wait_mask);
	e = errno;
	ASSERT(n == -1 && e == EINTR, "epoll_pwait: want EINTR, got %d (%s)", n,
	       n < 0 ? errname(e) : "no error");
	ASSERT(sigusr1_count == before + 1, "handler did not run");
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	masked = false;
	TRY(send_all(t, c, "x", 1));
	n = epoll_pwait(ep, &ev, 1, io_ms(), &wait_mask);
	ASSERT(n == 1 && ev.data.u64 == 7, "epoll_pwait: %d", n);
out:
	if (masked)
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_pwait2_honours_timespec_timeout(struct tctx *t)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
	struct timespec ts = { 0, 150 * 1000000L };
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;
	int64_t t0, dt;
	char buf[1];

	if (!have_epoll_pwait2) {
		skip(t, "epoll_pwait2 not supported by the kernel");
		return;
	}
	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 8));
	t0 = now_ms();
	n = epoll_pwait2(ep, &ev, 1, &ts, NULL);
	dt = now_ms() - t0;
	ASSERT(n == 0, "epoll_pwait2 on empty socket: %d (%s)", n,
	       n < 0 ? errname(errno) : "event");
	ASSERT(dt >= 100, "timeout too short");
	TRY(send_all(t, c, "x", 1));
	ts.tv_sec = io_ms() / 1000;
	ts.tv_nsec = 0;
	n = epoll_pwait2(ep, &ev, 1, &ts, NULL);
	ASSERT(n == 1 && ev.data.u64 == 8, "epoll_pwait2: %d", n);
	/* A zero timespec polls. */
	ts.tv_sec = 0;
	TRY(recv_exact(t, s, buf, 1));
	n = epoll_pwait2(ep, &ev, 1, &ts, NULL);
	ASSERT(n == 0, "zero timeout: %d", n);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
#else
	skip(t, "epoll_pwait2 not in this C library");
#endif
}

static void epoll_reports_rdhup_on_peer_close_and_hup_after_both(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, c, EPOLLIN | EPOLLRDHUP, 9));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event on an idle connection");
	close_fd(&s);
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1, "no event after peer close");
	ASSERT(ev.events == (EPOLLIN | EPOLLRDHUP),
	       "after peer close: want EPOLLIN|EPOLLRDHUP, got %#x", ev.events);
	/* Once our side is shut too, the connection is hung up. */
	ASSERT_OK(shutdown(c, SHUT_WR));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && (ev.events & EPOLLHUP),
	       "after both sides closed: want EPOLLHUP, got %#x", ev.events);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_reports_err_and_hup_after_reset(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;
	char buf[4];

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	/* EPOLLERR and EPOLLHUP are reported without being asked for. */
	ASSERT_OK(epoll_add(ep, c, EPOLLIN, 10));
	ASSERT_OK(abortive_close(s));
	s = -1;
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1, "no event after reset");
	ASSERT((ev.events & (EPOLLERR | EPOLLHUP)) == (EPOLLERR | EPOLLHUP),
	       "want EPOLLERR|EPOLLHUP, got %#x", ev.events);
	ASSERT_ERR(recv(c, buf, sizeof(buf), 0), ECONNRESET);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void
epoll_reports_listener_readable_on_pending_connection(struct tctx *t)
{
	int l = -1, c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;
	struct addr bound;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT_OK(set_nonblock(l, true));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, l, EPOLLIN, 11));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "listener readable with nobody connecting");
	c = tcp_socket(t, family(&server_addr), 0, &client_addr);
	TRY(c < 0);
	TRY(connect_to(t, c, &bound));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.events == EPOLLIN && ev.data.u64 == 11,
	       "listener event: %d %#x", n, ev.events);
	s = accept(l, NULL, NULL);
	ASSERT_OK(s);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "listener still readable after accept");
	TRY(roundtrip(t, c, s));
out:
	close_fd(&ep);
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

struct epoll_waiter {
	int ep;
	int ms; /* 0: io_ms() */
	int n;
	int err;
	struct epoll_event ev[4];
	int started;
};

static void *epoll_wait_thread(void *arg)
{
	struct epoll_waiter *w = arg;

	__atomic_store_n(&w->started, 1, __ATOMIC_SEQ_CST);
	w->n = epoll_wait(w->ep, w->ev, 4, w->ms ? w->ms : io_ms());
	if (w->n < 0)
		w->err = errno;
	return NULL;
}

/*
 * A thread sleeps in epoll_wait() on a set holding a socket and an
 * eventfd.  Another thread closes the socket, then writes the eventfd:
 * the waiter wakes for the eventfd alone, and nothing hangs or crashes.
 */
static void epoll_wait_survives_close_from_other_thread(struct tctx *t)
{
	struct epoll_waiter w = { .ep = -1 };
	int c = -1, s = -1, efd = -1, i;
	uint64_t one = 1;
	bool running = false;
	pthread_t th;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(w.ep = epoll_create1(0));
	ASSERT_OK(efd = eventfd(0, EFD_NONBLOCK));
	ASSERT_OK(epoll_add(w.ep, s, EPOLLIN | EPOLLRDHUP, 1));
	ASSERT_OK(epoll_add(w.ep, efd, EPOLLIN, 2));
	ASSERT(!start_thread(&th, epoll_wait_thread, &w), "pthread_create");
	running = true;
	while (!__atomic_load_n(&w.started, __ATOMIC_SEQ_CST))
		sleep_ms(1);
	sleep_ms(30); /* let it block */
	close_fd(&s);
	sleep_ms(30);
	ASSERT(write(efd, &one, sizeof(one)) == sizeof(one), "eventfd write");
	pthread_join(th, NULL);
	running = false;
	ASSERT(w.n >= 1, "waiter: %d (%s)", w.n, errname(w.err));
	for (i = 0; i < w.n; i++)
		ASSERT(w.ev[i].data.u64 == 2,
		       "event reported for the closed socket");
	/* The close was real: the peer sees the connection end. */
	TRY(expect_eof(t, c));
out:
	if (running) {
		ssize_t r = write(efd, &one, sizeof(one));

		(void)r;
		pthread_join(th, NULL);
	}
	close_fd(&w.ep);
	close_fd(&efd);
	close_fd(&c);
	close_fd(&s);
}

/*
 * Data that epoll_wait() reported, and nobody read, is still there for a
 * poll() that starts afterwards: it returns at once.
 */
static void epoll_reported_data_wakes_a_later_poll(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n, ev;
	struct epoll_event e;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
	TRY(send_all(t, c, "x", 1));
	n = epoll_one(ep, &e, io_ms());
	ASSERT(n == 1 && e.events == EPOLLIN, "epoll: %d %#x", n, e.events);
	ev = wait_fd(s, POLLIN, io_ms());
	ASSERT(ev == POLLIN, "poll after epoll: want POLLIN, got %#x", ev);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * poll() of s is woken by a byte that c sends delay_ms after it starts,
 * and leaves it unread.  Sent at once, the byte comes while the wait is
 * young; later, after it slept.
 */
static int poll_woken_by_a_byte(struct tctx *t, int c, int s, int delay_ms)
{
	struct dripper d = { .fd = c, .seed = 41, .piece = 1, .pieces = 1 };
	pthread_t th;
	int ev;

	d.delay_ms = delay_ms;
	ASSERT(!start_thread(&th, drip_send, &d), "pthread_create");
	ev = wait_fd(s, POLLIN, io_ms());
	pthread_join(th, NULL);
	ASSERT(!d.err[0], "send: %s", d.err);
	ASSERT(ev == POLLIN, "delay %d ms: poll: want POLLIN, got %#x",
	       delay_ms, ev);
	return 0;
out:
	return -1;
}

static int recv_one_byte(struct tctx *t, int s)
{
	char b;
	ssize_t n = recv(s, &b, 1, 0);

	ASSERT(n == 1, "recv: %zd (%s)", n, n < 0 ? errname(errno) : "EOF");
	return 0;
out:
	return -1;
}

static const int poll_wake_delays_ms[] = { 0, 20 };

static void poll_reported_data_stays_readable_to_the_next_poll(struct tctx *t)
{
	int c = -1, s = -1, ev;
	size_t i;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	for (i = 0; i < 2; i++) {
		TRY(poll_woken_by_a_byte(t, c, s, poll_wake_delays_ms[i]));
		ev = wait_fd(s, POLLIN, 0);
		ASSERT(ev == POLLIN, "pass %zu: the next poll: %#x", i, ev);
		TRY(recv_one_byte(t, s));
	}
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * After each poll_woken_by_a_byte(), epoll_wait() of a set holding s
 * reports EPOLLIN: a set made before the poll (made_after false) or just
 * after it.
 */
static void poll_then_epoll_reports(struct tctx *t, bool made_after)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event e;
	size_t i;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	for (i = 0; i < 2; i++) {
		if (ep < 0 && !made_after) {
			ASSERT_OK(ep = epoll_create1(0));
			ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
		}
		TRY(poll_woken_by_a_byte(t, c, s, poll_wake_delays_ms[i]));
		if (made_after) {
			close_fd(&ep);
			ASSERT_OK(ep = epoll_create1(0));
			ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
		}
		n = epoll_one(ep, &e, 0);
		ASSERT(n == 1 && e.events == EPOLLIN, "pass %zu: epoll: %d %#x",
		       i, n, e.events);
		TRY(recv_one_byte(t, s));
	}
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void poll_reported_data_wakes_a_later_epoll_wait(struct tctx *t)
{
	poll_then_epoll_reports(t, false);
}

static void poll_reported_data_shows_in_a_set_made_after(struct tctx *t)
{
	poll_then_epoll_reports(t, true);
}

static void poll_reported_data_stays_readable_to_select(struct tctx *t)
{
	struct timeval zero = { 0 };
	int c = -1, s = -1, n;
	fd_set rd;
	size_t i;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT(s < FD_SETSIZE, "fd %d above FD_SETSIZE", s);
	for (i = 0; i < 2; i++) {
		TRY(poll_woken_by_a_byte(t, c, s, poll_wake_delays_ms[i]));
		FD_ZERO(&rd);
		FD_SET(s, &rd);
		n = select(s + 1, &rd, NULL, NULL, &zero);
		ASSERT(n == 1 && FD_ISSET(s, &rd), "pass %zu: select: %d", i,
		       n);
		TRY(recv_one_byte(t, s));
	}
out:
	close_fd(&c);
	close_fd(&s);
}

/* Each round: a byte on each of two connections, then waits for an ack. */
struct two_senders {
	int first, second; /* where the bytes go out */
	int rounds;
	char err[96];
};

static void *send_on_two(void *arg)
{
	struct two_senders *ts = arg;
	char b = 'x';
	int i;

	for (i = 0; i < ts->rounds; i++) {
		if (send(ts->first, &b, 1, MSG_NOSIGNAL) != 1 ||
		    send(ts->second, &b, 1, MSG_NOSIGNAL) != 1 ||
		    recv(ts->first, &b, 1, MSG_WAITALL) != 1) {
			snprintf(ts->err, sizeof(ts->err), "round %d: %s", i,
				 errname(errno));
			break;
		}
	}
	return NULL;
}

/*
 * One poll() set over the server end of one connection and the client end
 * of another (over RDMA, ends on two devices): every round's two bytes
 * are reported, however their arrivals interleave with the wait.
 */
static void poll_over_two_connections_misses_no_arrival(struct tctx *t)
{
	struct two_senders ts = { .rounds = 300 };
	int c1 = -1, s1 = -1, c2 = -1, s2 = -1, i, n, got;
	struct pollfd p[2];
	bool running = false;
	pthread_t th;
	char b;

	TRY(make_pair(t, &c1, &s1, 0));
	TRY(make_pair(t, &c2, &s2, 0));
	ts.first = c1;
	ts.second = s2;
	ASSERT(!start_thread(&th, send_on_two, &ts), "pthread_create");
	running = true;
	for (i = 0; i < ts.rounds; i++) {
		p[0] = (struct pollfd){ .fd = s1, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = c2, .events = POLLIN };
		for (got = 0; got != 3;) {
			do {
				n = poll(p, 2, io_ms());
			} while (n < 0 && retry_intr());
			ASSERT(n > 0, "round %d: poll: %d (%s), got %d", i, n,
			       n < 0 ? errname(errno) : "timed out", got);
			if (p[0].revents & POLLIN) {
				ASSERT(recv(s1, &b, 1, 0) == 1, "recv s1");
				got |= 1;
				p[0].fd = -1;
			}
			if (p[1].revents & POLLIN) {
				ASSERT(recv(c2, &b, 1, 0) == 1, "recv c2");
				got |= 2;
				p[1].fd = -1;
			}
		}
		ASSERT(send(s1, &b, 1, MSG_NOSIGNAL) == 1, "ack: %s",
		       errname(errno));
	}
	pthread_join(th, NULL);
	running = false;
	ASSERT(!ts.err[0], "sender: %s", ts.err);
out:
	if (running) {
		shutdown(c1, SHUT_RDWR);
		shutdown(s2, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&c1);
	close_fd(&s1);
	close_fd(&c2);
	close_fd(&s2);
}

/*
 * Twice: poll() of polled finds it readable, and epoll_wait() of ep
 * reports EPOLLIN, left unread.
 */
static int poll_then_epoll_twice(struct tctx *t, int polled, int ep)
{
	struct epoll_event e;
	int n, ev, i;

	for (i = 0; i < 2; i++) {
		ev = wait_fd(polled, POLLIN, io_ms());
		ASSERT(ev == POLLIN, "poll of the set, pass %d: %#x", i, ev);
		n = epoll_one(ep, &e, 0);
		ASSERT(n == 1 && e.events == EPOLLIN, "pass %d: %d %#x", i, n,
		       e.events);
	}
	return 0;
out:
	return -1;
}

/*
 * An epoll set watched by poll(), as an event loop embeds another: data
 * that epoll_wait() reported, and the program left unread, keeps the set
 * readable.  min_fd: the set's fd is at least this.
 */
static void set_in_poll_stays_readable(struct tctx *t, int min_fd)
{
	int c = -1, s = -1, first = -1, ep = -1;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(first = epoll_create1(0));
	ASSERT_OK(ep = fcntl(first, F_DUPFD_CLOEXEC, min_fd));
	close_fd(&first);
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
	TRY(send_all(t, c, "x", 1));
	TRY(poll_then_epoll_twice(t, ep, ep));
out:
	close_fd(&first);
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void
epoll_set_in_poll_stays_readable_while_data_is_unread(struct tctx *t)
{
	set_in_poll_stays_readable(t, 0);
}

/* The same for a set above fd 4096 (roceshim tracks those apart). */
static void epoll_set_above_fd_4096_in_poll_stays_readable(struct tctx *t)
{
	struct rlimit lim;

	ASSERT_OK(getrlimit(RLIMIT_NOFILE, &lim));
	if (lim.rlim_cur <= 5000) {
		lim.rlim_cur = 5000;
		if (lim.rlim_max < lim.rlim_cur)
			lim.rlim_max = lim.rlim_cur;
		ASSERT_OK(setrlimit(RLIMIT_NOFILE, &lim));
	}
	set_in_poll_stays_readable(t, 4500);
out:;
}

/*
 * select() takes sets wider than FD_SETSIZE, as many bits as the process
 * may have descriptors (core_sys_select()): a socket at fd 1500 is
 * watched like any other.  FD_SET() stops at FD_SETSIZE, so the bits are
 * set by hand.
 */
static void select_watches_a_socket_above_fd_setsize(struct tctx *t)
{
	enum {
		HIGH = 1500,
		WORD = 8 * sizeof(unsigned long)
	};
	unsigned long bits[HIGH / WORD + 1];
	struct timeval tv = { 0 };
	struct rlimit lim;
	int c = -1, s = -1, high = -1, r;
	char b = 0;

	ASSERT_OK(getrlimit(RLIMIT_NOFILE, &lim));
	if (lim.rlim_cur <= HIGH) {
		lim.rlim_cur = HIGH + 1;
		if (lim.rlim_max < lim.rlim_cur)
			lim.rlim_max = lim.rlim_cur;
		ASSERT_OK(setrlimit(RLIMIT_NOFILE, &lim));
	}
	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(high = dup2(s, HIGH));
	memset(bits, 0, sizeof(bits));
	bits[HIGH / WORD] = 1ul << (HIGH % WORD);
	r = select(HIGH + 1, (fd_set *)bits, NULL, NULL, &tv);
	ASSERT(r == 0, "select before the data: %d (%s)", r,
	       r < 0 ? errname(errno) : "ready");
	TRY(send_all(t, c, "x", 1));
	bits[HIGH / WORD] = 1ul << (HIGH % WORD);
	tv = (struct timeval){ .tv_sec = io_ms() / 1000 };
	r = select(HIGH + 1, (fd_set *)bits, NULL, NULL, &tv);
	ASSERT(r == 1 && (bits[HIGH / WORD] >> (HIGH % WORD) & 1),
	       "select after the data: %d (%s)", r,
	       r < 0 ? errname(errno) : "not set");
	ASSERT(read(high, &b, 1) == 1 && b == 'x', "read: %c", b);
out:
	close_fd(&high);
	close_fd(&c);
	close_fd(&s);
}

/*
 * The same one level further out: a set that holds the set that holds the
 * socket, watched by poll().
 */
static void epoll_set_of_sets_in_poll_stays_readable(struct tctx *t)
{
	int c = -1, s = -1, inner = -1, outer = -1;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(inner = epoll_create1(0));
	ASSERT_OK(outer = epoll_create1(0));
	ASSERT_OK(epoll_add(inner, s, EPOLLIN, 1));
	ASSERT_OK(epoll_add(outer, inner, EPOLLIN, 2));
	TRY(send_all(t, c, "x", 1));
	TRY(poll_then_epoll_twice(t, outer, inner));
out:
	close_fd(&outer);
	close_fd(&inner);
	close_fd(&c);
	close_fd(&s);
}

/* Starts a thread in epoll_wait() on w->ep and lets it fall asleep. */
static int start_epoll_waiter(pthread_t *th, struct epoll_waiter *w)
{
	if (start_thread(th, epoll_wait_thread, w))
		return -1;
	while (!__atomic_load_n(&w->started, __ATOMIC_SEQ_CST))
		sleep_ms(1);
	sleep_ms(100);
	return 0;
}

/* Rounds of the wake-up races below: each can go either way. */
#define WAKE_ROUNDS 5

/*
 * Two threads sleep in epoll_wait() on one level-triggered set.  Data that
 * neither reads wakes both: the kernel wakes the next waiter while an
 * entry stays ready.
 */
static void epoll_unread_data_wakes_every_waiter_of_the_set(struct tctx *t)
{
	struct epoll_waiter w[2];
	pthread_t th[2];
	int c = -1, s = -1, ep = -1, running = 0, round, i;
	char byte;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
	for (round = 0; round < WAKE_ROUNDS; round++) {
		for (running = 0; running < 2; running++) {
			w[running] = (struct epoll_waiter){ .ep = ep };
			ASSERT(!start_epoll_waiter(&th[running], &w[running]),
			       "pthread_create");
		}
		TRY(send_all(t, c, "x", 1));
		for (i = 0; i < 2; i++, running--)
			pthread_join(th[i], NULL);
		for (i = 0; i < 2; i++)
			ASSERT(w[i].n == 1 && w[i].ev[0].events == EPOLLIN,
			       "round %d, waiter %d: %d events (%s), %#x",
			       round, i, w[i].n, errname(w[i].err),
			       w[i].ev[0].events);
		TRY(recv_exact(t, s, &byte, 1));
	}
out:
	for (i = 0; i < running; i++)
		pthread_join(th[i], NULL);
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

struct poll_waiter {
	int fd;
	int revents;
	int started;
};

static void *poll_wait_thread(void *arg)
{
	struct poll_waiter *w = arg;

	__atomic_store_n(&w->started, 1, __ATOMIC_SEQ_CST);
	w->revents = wait_fd(w->fd, POLLIN, io_ms());
	return NULL;
}

/*
 * One thread sleeps in poll() on an epoll set, another in epoll_wait() on
 * it.  Data that neither reads wakes both.
 */
static void epoll_set_in_poll_wakes_beside_an_epoll_waiter(struct tctx *t)
{
	struct epoll_waiter w;
	struct poll_waiter pw;
	pthread_t wth, pth;
	bool waiting = false, polling = false;
	int c = -1, s = -1, ep = -1, round;
	char byte;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
	for (round = 0; round < WAKE_ROUNDS; round++) {
		pw = (struct poll_waiter){ .fd = ep };
		ASSERT(!start_thread(&pth, poll_wait_thread, &pw),
		       "pthread_create");
		polling = true;
		while (!__atomic_load_n(&pw.started, __ATOMIC_SEQ_CST))
			sleep_ms(1);
		w = (struct epoll_waiter){ .ep = ep };
		ASSERT(!start_epoll_waiter(&wth, &w), "pthread_create");
		waiting = true;
		TRY(send_all(t, c, "x", 1));
		pthread_join(wth, NULL);
		waiting = false;
		pthread_join(pth, NULL);
		polling = false;
		ASSERT(w.n == 1 && w.ev[0].events == EPOLLIN,
		       "round %d, epoll_wait: %d (%s) %#x", round, w.n,
		       errname(w.err), w.ev[0].events);
		ASSERT(pw.revents == POLLIN, "round %d, poll of the set: %#x",
		       round, pw.revents);
		TRY(recv_exact(t, s, &byte, 1));
	}
out:
	if (waiting)
		pthread_join(wth, NULL);
	if (polling)
		pthread_join(pth, NULL);
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

struct blocked_reader {
	int fd;
	ssize_t n;
	int err;
	char byte;
};

static void *blocked_reader_thread(void *arg)
{
	struct blocked_reader *r = arg;

	r->n = recv(r->fd, &r->byte, 1, 0);
	if (r->n < 0)
		r->err = errno;
	return NULL;
}

/*
 * close() of a socket while another thread blocks in recv() on it ends
 * nothing yet: the kernel keeps the socket open for that call, which
 * returns the next byte that comes (the first of sent), and the socket
 * closes once it has returned: the peer then reads EOF, or ECONNRESET if
 * bytes were left unread (tcp_close()).
 */
static void close_beside_a_blocked_read(struct tctx *t, const char *sent)
{
	struct timeval tv = { .tv_sec = io_ms() / 1000 + 1 };
	struct blocked_reader r = { .fd = -1 };
	bool reading = false;
	pthread_t rth;
	int c = -1, s = -1;
	ssize_t n;
	char b;

	TRY(make_pair(t, &c, &s, 0));
	/* Bounds both reads if the byte or the end never comes. */
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	ASSERT_OK(setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	r.fd = s;
	ASSERT(!start_thread(&rth, blocked_reader_thread, &r),
	       "pthread_create");
	reading = true;
	sleep_ms(300); /* let it block */
	ASSERT_OK(close(s));
	s = -1;
	sleep_ms(100);
	TRY(send_all(t, c, sent, strlen(sent)));
	pthread_join(rth, NULL);
	reading = false;
	ASSERT(r.n == 1 && r.byte == sent[0], "the blocked read: %zd (%s)", r.n,
	       r.n < 0 ? errname(r.err) : "no byte");
	n = recv(c, &b, 1, 0);
	if (strlen(sent) == 1)
		ASSERT(n == 0, "the peer's read after it: %zd (%s)", n,
		       n < 0 ? errname(errno) : "a byte");
	else
		ASSERT(n < 0 && errno == ECONNRESET,
		       "the peer's read after it: %zd (%s)", n,
		       n < 0 ? errname(errno) : "not reset");
out:
	if (reading) {
		shutdown(c, SHUT_RDWR);
		pthread_join(rth, NULL);
	}
	close_fd(&c);
	close_fd(&s);
}

static void close_beside_a_blocked_read_leaves_it_the_next_byte(struct tctx *t)
{
	close_beside_a_blocked_read(t, "x");
}

static void
close_beside_a_blocked_read_resets_if_it_leaves_bytes(struct tctx *t)
{
	close_beside_a_blocked_read(t, "xy");
}

/*
 * One thread sleeps in a blocking recv() on a socket, another in
 * epoll_wait() on a set that holds it.  A byte that arrives reaches the
 * reader, whichever thread the arrival woke first.
 */
static void
epoll_waiter_beside_a_blocked_reader_leaves_it_the_data(struct tctx *t)
{
	struct epoll_waiter w;
	struct blocked_reader r;
	struct timeval tv = { .tv_sec = io_ms() / 1000 + 1 };
	bool reading = false, waiting = false;
	pthread_t rth, wth;
	int c = -1, s = -1, ep = -1, round;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
	for (round = 0; round < WAKE_ROUNDS; round++) {
		r = (struct blocked_reader){ .fd = s };
		ASSERT(!start_thread(&rth, blocked_reader_thread, &r),
		       "pthread_create");
		reading = true;
		w = (struct epoll_waiter){ .ep = ep, .ms = 300 };
		ASSERT(!start_epoll_waiter(&wth, &w), "pthread_create");
		waiting = true;
		TRY(send_all(t, c, "x", 1));
		pthread_join(rth, NULL);
		reading = false;
		pthread_join(wth, NULL);
		waiting = false;
		ASSERT(r.n == 1 && r.byte == 'x', "round %d, reader: %zd (%s)",
		       round, r.n, errname(r.err));
	}
out:
	if (reading) {
		shutdown(s, SHUT_RD);
		pthread_join(rth, NULL);
	}
	if (waiting)
		pthread_join(wth, NULL);
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_mixes_tcp_pipe_and_unix_sockets(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, p[2] = { -1, -1 }, u[2] = { -1, -1 };
	struct epoll_event ev;
	char buf[4];
	int n;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(pipe2(p, O_NONBLOCK));
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, u));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 100));
	ASSERT_OK(epoll_add(ep, p[0], EPOLLIN, 200));
	ASSERT_OK(epoll_add(ep, u[1], EPOLLIN, 300));
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event with nothing written");

	ASSERT(write(p[1], "p", 1) == 1, "pipe write");
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 200, "pipe event: %d", n);
	ASSERT(read(p[0], buf, 1) == 1, "pipe read");

	TRY(send_all(t, c, "t", 1));
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 100, "tcp event: %d", n);
	TRY(recv_exact(t, s, buf, 1));

	ASSERT(write(u[0], "u", 1) == 1, "unix write");
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 300, "unix event: %d", n);
	ASSERT(read(u[1], buf, 1) == 1, "unix read");

	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "event after draining all");
out:
	close_fd(&ep);
	close_fd(&p[0]);
	close_fd(&p[1]);
	close_fd(&u[0]);
	close_fd(&u[1]);
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: poll and select                                              */
/* ------------------------------------------------------------------ */

/*
 * A socket first used with blocking calls only, then waited on: data that
 * arrives during the wait must end it.  (roceshim watches an upgraded
 * connection's completions for readiness only from the first epoll_ctl,
 * poll or select on it.)  which: 'e' epoll, 'p' poll.
 */
static void wait_wakes_after_blocking_use(struct tctx *t, char which)
{
	struct dripper d = {
		.seed = 24, .piece = 100, .pieces = 1, .delay_ms = 50
	};
	struct pollfd pfd;
	struct epoll_event ev;
	unsigned char buf[100];
	bool running = false;
	int c = -1, s = -1, ep = -1, i, n;
	pthread_t th;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	for (i = 0; i < 3; i++)
		TRY(roundtrip(t, c, s));
	if (which == 'e') {
		ASSERT_OK(ep = epoll_create1(0));
		ASSERT_OK(epoll_add(ep, s, EPOLLIN, 7));
		n = epoll_one(ep, &ev, QUIET_MS);
		ASSERT(n == 0, "event before any data");
	}
	d.fd = c;
	ASSERT(!start_thread(&th, drip_send, &d), "pthread_create");
	running = true;
	if (which == 'e') {
		n = epoll_one(ep, &ev, io_ms());
		ASSERT(n == 1 && ev.events == EPOLLIN && ev.data.u64 == 7,
		       "epoll_wait: %d %#x", n, ev.events);
	} else {
		pfd = (struct pollfd){ .fd = s, .events = POLLIN };
		do {
			n = poll(&pfd, 1, io_ms());
		} while (n < 0 && retry_intr());
		ASSERT(n == 1 && pfd.revents == POLLIN, "poll: %d %#x", n,
		       pfd.revents);
	}
	TRY(recv_exact(t, s, buf, sizeof(buf)));
	pthread_join(th, NULL);
	running = false;
	ASSERT(!d.err[0], "sender: %s", d.err);
	ASSERT(pattern_mismatch(buf, sizeof(buf), 24, 0) == sizeof(buf),
	       "data corrupted");
out:
	if (running) {
		shutdown(c, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * A socket closed without EPOLL_CTL_DEL is gone from the set: what its
 * peer sends afterwards wakes nobody.
 */
static void epoll_forgets_a_socket_closed_without_del(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, n;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 8));
	close_fd(&s);
	/* The peer is closed: this may fail, as on TCP; it must not wake. */
	(void)!send(c, "late", 4, MSG_NOSIGNAL);
	n = epoll_one(ep, &ev, QUIET_MS);
	ASSERT(n == 0, "closed socket reported: %d event(s)", n);
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

/*
 * EPOLLRDNORM of a pipe in the same set as a socket is reported as the
 * pipe's own (roceshim uses that bit for an upgraded socket's wake-up).
 */
static void epoll_reports_rdnorm_of_a_pipe_beside_a_socket(struct tctx *t)
{
	int c = -1, s = -1, ep = -1, pfd[2] = { -1, -1 }, n;
	struct epoll_event ev;

	TRY(make_pair(t, &c, &s, PAIR_NONBLOCK));
	ASSERT_OK(pipe(pfd));
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, s, EPOLLIN, 1));
	ASSERT_OK(epoll_add(ep, pfd[0], EPOLLRDNORM, 2));
	ASSERT(write(pfd[1], "p", 1) == 1, "pipe write");
	n = epoll_one(ep, &ev, io_ms());
	ASSERT(n == 1 && ev.data.u64 == 2 && (ev.events & EPOLLRDNORM),
	       "pipe: want EPOLLRDNORM for data 2, got %d (%#x, %llu)", n,
	       ev.events, (unsigned long long)ev.data.u64);
out:
	close_fd(&ep);
	close_fd(&pfd[0]);
	close_fd(&pfd[1]);
	close_fd(&c);
	close_fd(&s);
}

static void epoll_wakes_for_data_after_blocking_use(struct tctx *t)
{
	wait_wakes_after_blocking_use(t, 'e');
}

static void poll_wakes_for_data_after_blocking_use(struct tctx *t)
{
	wait_wakes_after_blocking_use(t, 'p');
}

static void poll_reports_pollin_and_pollout(struct tctx *t)
{
	struct pollfd pfd[2];
	int c = -1, s = -1, n;

	TRY(make_pair(t, &c, &s, 0));
	pfd[0] = (struct pollfd){ .fd = c, .events = POLLIN | POLLOUT };
	pfd[1] = (struct pollfd){ .fd = s, .events = POLLIN };
	n = poll(pfd, 2, 0);
	ASSERT(n == 1, "idle pair: want 1 ready fd, got %d", n);
	ASSERT(pfd[0].revents == POLLOUT, "client: want POLLOUT, got %#x",
	       pfd[0].revents);
	ASSERT(pfd[1].revents == 0, "server: want 0, got %#x", pfd[1].revents);
	TRY(send_all(t, c, "x", 1));
	TRY(wait_queued(t, s, 1));
	n = poll(pfd, 2, io_ms());
	ASSERT(n == 2, "want 2 ready fds, got %d", n);
	ASSERT(pfd[1].revents == POLLIN, "server: want POLLIN, got %#x",
	       pfd[1].revents);
	/* A negative fd is ignored. */
	pfd[0].fd = -1;
	n = poll(pfd, 2, 0);
	ASSERT(n == 1 && pfd[0].revents == 0, "negative fd not ignored");
out:
	close_fd(&c);
	close_fd(&s);
}

static void poll_reports_rdhup_on_peer_close_and_hup_after_both(struct tctx *t)
{
	short ev_mask = POLLIN | POLLRDHUP;
	int c = -1, s = -1, ev;

	TRY(make_pair(t, &c, &s, 0));
	ev = wait_fd(c, ev_mask, QUIET_MS);
	ASSERT(ev == 0, "event on an idle connection: %#x", ev);
	close_fd(&s);
	ev = wait_fd(c, ev_mask, io_ms());
	ASSERT(ev == (POLLIN | POLLRDHUP),
	       "after peer close: want POLLIN|POLLRDHUP, got %#x", ev);
	ASSERT_OK(shutdown(c, SHUT_WR));
	ev = wait_fd(c, ev_mask, io_ms());
	ASSERT(ev > 0 && (ev & POLLHUP),
	       "after both sides closed: want POLLHUP, got %#x", ev);
out:
	close_fd(&c);
	close_fd(&s);
}

static void ppoll_sigmask_lets_pending_signal_interrupt(struct tctx *t)
{
	struct timespec ts = { io_ms() / 1000, 0 };
	sig_atomic_t before = sigusr1_count;
	sigset_t wait_mask, saved;
	bool masked = false;
	int c = -1, s = -1, n, e;
	struct pollfd pfd;

	TRY(make_pair(t, &c, &s, 0));
	pfd = (struct pollfd){ .fd = s, .events = POLLIN };
	ASSERT_OK(pend_sigusr1(&wait_mask, &saved));
	masked = true;
	n = ppoll(&pfd, 1, &ts, &wait_mask);
	e = errno;
	ASSERT(n == -1 && e == EINTR, "ppoll: want EINTR, got %d (%s)", n,
	       n < 0 ? errname(e) : "no error");
	ASSERT(sigusr1_count == before + 1, "handler did not run");
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	masked = false;
	ts.tv_sec = 0;
	ts.tv_nsec = 0;
	n = ppoll(&pfd, 1, &ts, NULL);
	ASSERT(n == 0, "ppoll on empty socket: %d", n);
	TRY(send_all(t, c, "x", 1));
	ts.tv_sec = io_ms() / 1000;
	n = ppoll(&pfd, 1, &ts, &wait_mask);
	ASSERT(n == 1 && pfd.revents == POLLIN, "ppoll: %d %#x", n,
	       pfd.revents);
out:
	if (masked)
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	close_fd(&c);
	close_fd(&s);
}

static void select_reports_read_and_write_sets(struct tctx *t)
{
	struct timeval tv;
	int c = -1, s = -1, n, nfds;
	fd_set rd, wr;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT(c < FD_SETSIZE && s < FD_SETSIZE, "fd too large for select");
	nfds = (c > s ? c : s) + 1;
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(c, &rd);
	FD_SET(s, &rd);
	FD_SET(c, &wr);
	tv = (struct timeval){ 0, 0 };
	n = select(nfds, &rd, &wr, NULL, &tv);
	ASSERT(n == 1, "idle pair: want 1, got %d", n);
	ASSERT(FD_ISSET(c, &wr) && !FD_ISSET(c, &rd) && !FD_ISSET(s, &rd),
	       "idle pair: wrong sets");
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	tv = (struct timeval){ 0, QUIET_MS * 1000 };
	n = select(nfds, &rd, NULL, NULL, &tv);
	ASSERT(n == 0 && !FD_ISSET(s, &rd), "readable with no data: %d", n);
	TRY(send_all(t, c, "x", 1));
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	tv = (struct timeval){ io_ms() / 1000, 0 };
	n = select(nfds, &rd, NULL, NULL, &tv);
	ASSERT(n == 1 && FD_ISSET(s, &rd), "data not reported: %d", n);
out:
	close_fd(&c);
	close_fd(&s);
}

static void pselect_sigmask_lets_pending_signal_interrupt(struct tctx *t)
{
	struct timespec ts = { io_ms() / 1000, 0 };
	sig_atomic_t before = sigusr1_count;
	sigset_t wait_mask, saved;
	int c = -1, s = -1, n, e;
	bool masked = false;
	fd_set rd, wr;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT(c < FD_SETSIZE && s < FD_SETSIZE, "fd too large for select");
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	ASSERT_OK(pend_sigusr1(&wait_mask, &saved));
	masked = true;
	n = pselect(s + 1, &rd, NULL, NULL, &ts, &wait_mask);
	e = errno;
	ASSERT(n == -1 && e == EINTR, "pselect: want EINTR, got %d (%s)", n,
	       n < 0 ? errname(e) : "no error");
	ASSERT(sigusr1_count == before + 1, "handler did not run");
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	masked = false;
	TRY(send_all(t, s, "x", 1));
	FD_ZERO(&rd);
	FD_ZERO(&wr);
	FD_SET(c, &rd);
	FD_SET(c, &wr);
	n = pselect(c + 1, &rd, &wr, NULL, &ts, &wait_mask);
	ASSERT(n == 2 && FD_ISSET(c, &rd) && FD_ISSET(c, &wr),
	       "pselect: want readable and writable, got %d", n);
out:
	if (masked)
		pthread_sigmask(SIG_SETMASK, &saved, NULL);
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: descriptor duplication                                       */
/* ------------------------------------------------------------------ */

static void dup_survives_close_of_original(struct tctx *t)
{
	int c = -1, s = -1, d = -1;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(d = dup(c));
	close_fd(&c);
	TRY(roundtrip(t, d, s));
	close_fd(&d);
	/* The last descriptor is gone: the peer sees EOF. */
	TRY(expect_eof(t, s));
out:
	close_fd(&c);
	close_fd(&d);
	close_fd(&s);
}

static void dup_shares_file_status_flags(struct tctx *t)
{
	int c = -1, s = -1, d = -1, fl;
	char buf[4];

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(d = dup(s));
	ASSERT_OK(set_nonblock(d, true));
	ASSERT_OK(fl = fcntl(s, F_GETFL));
	ASSERT(fl & O_NONBLOCK, "O_NONBLOCK set on dup not seen on original");
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	ASSERT_OK(set_nonblock(s, false));
	ASSERT_OK(fl = fcntl(d, F_GETFL));
	ASSERT(!(fl & O_NONBLOCK), "clearing on original not seen on dup");
	/* Both descriptors read from one queue. */
	TRY(send_all(t, c, "ab", 2));
	TRY(wait_queued(t, s, 2));
	ASSERT(recv(s, buf, 1, 0) == 1 && buf[0] == 'a', "read via original");
	ASSERT(recv(d, buf, 1, 0) == 1 && buf[0] == 'b', "read via dup");
out:
	close_fd(&c);
	close_fd(&d);
	close_fd(&s);
}

static void dup2_over_socket_closes_old_connection(struct tctx *t)
{
	int c1 = -1, s1 = -1, c2 = -1, s2 = -1, r;

	TRY(make_pair(t, &c1, &s1, 0));
	TRY(make_pair(t, &c2, &s2, PAIR_BIND_CLIENT));
	r = dup2(c2, c1);
	ASSERT(r == c1, "dup2 returned another fd");
	/* The connection c1 referred to lost its last descriptor. */
	TRY(expect_eof(t, s1));
	/* c1 now is connection 2. */
	TRY(roundtrip(t, c1, s2));
	close_fd(&c2);
	TRY(roundtrip(t, c1, s2));
	close_fd(&c1);
	TRY(expect_eof(t, s2));
out:
	close_fd(&c1);
	close_fd(&s1);
	close_fd(&c2);
	close_fd(&s2);
}

static void dup3_sets_cloexec_and_rejects_same_fd(struct tctx *t)
{
	int c = -1, s = -1, target = -1, fdfl;

	TRY(make_pair(t, &c, &s, 0));
	/* A descriptor number that is in use by an unrelated file. */
	ASSERT_OK(target = open("/dev/null", O_RDONLY));
	ASSERT(dup3(c, target, O_CLOEXEC) == target, "dup3: %s",
	       errname(errno));
	ASSERT_OK(fdfl = fcntl(target, F_GETFD));
	ASSERT(fdfl & FD_CLOEXEC, "dup3 did not set FD_CLOEXEC");
	ASSERT_OK(fdfl = fcntl(c, F_GETFD));
	ASSERT(!(fdfl & FD_CLOEXEC), "FD_CLOEXEC leaked to the original");
	ASSERT_ERR(dup3(c, c, O_CLOEXEC), EINVAL);
	close_fd(&c);
	TRY(roundtrip(t, target, s));
out:
	close_fd(&target);
	close_fd(&c);
	close_fd(&s);
}

static void fcntl_dupfd_cloexec_sets_cloexec(struct tctx *t)
{
	int c = -1, s = -1, d = -1, fdfl;

	TRY(make_pair(t, &c, &s, 0));
	ASSERT_OK(d = fcntl(c, F_DUPFD_CLOEXEC, 100));
	ASSERT(d >= 100, "F_DUPFD_CLOEXEC returned a descriptor below 100");
	ASSERT_OK(fdfl = fcntl(d, F_GETFD));
	ASSERT(fdfl & FD_CLOEXEC, "FD_CLOEXEC not set");
	close_fd(&c);
	TRY(roundtrip(t, d, s));
out:
	close_fd(&c);
	close_fd(&d);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: processes                                                    */
/* ------------------------------------------------------------------ */

/* Child side: write @len bytes of stream @seed on @fd, blocking. */
static int child_send_pattern(int fd, uint64_t seed, size_t len)
{
	unsigned char buf[8192];
	size_t off = 0;
	ssize_t r;

	while (off < len) {
		size_t n = len - off;

		if (n > sizeof(buf))
			n = sizeof(buf);
		pattern_fill(buf, n, seed, off);
		r = send(fd, buf, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += r;
	}
	return 0;
}

/* fork(), or with clone_syscall the clone system call, as vsftpd does. */
static pid_t fork_child_by(bool clone_syscall)
{
	pid_t pid;

	fflush(NULL);
	pid = clone_syscall ? syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) : fork();
	if (pid == 0) {
		/* the child must not outlive a hang of its own */
		signal(SIGALRM, SIG_DFL);
		alarm(2 * IO_MS / 1000 * timeout_scale);
	}
	return pid;
}

static pid_t fork_child(void)
{
	return fork_child_by(false);
}

static void fork_child_writes_inherited_socket(struct tctx *t)
{
	const size_t len = 64 << 10;
	int c = -1, s = -1, status;
	pid_t pid;
	uint64_t h;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0) {
		close(s);
		_exit(child_send_pattern(c, 25, len) ? 1 : 0);
	}
	TRY(recv_pattern(t, s, 25, len, &h));
	note_digest(t, "from child", len, h);
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child failed (status %#x)", status);
	/* The child's exit closed only its own copy. */
	TRY(roundtrip(t, c, s));
	close_fd(&c);
	TRY(expect_eof(t, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * O_NONBLOCK belongs to the open file, which a fork child shares: set
 * there, it holds for the parent's next read, which returns EAGAIN at
 * once instead of waiting out its timeout.
 */
static void fork_child_sets_o_nonblock_for_the_parent(struct tctx *t)
{
	struct timeval tv = { .tv_usec = 100000 };
	int c = -1, s = -1, status;
	int64_t start;
	char buf[4];
	pid_t pid;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	TRY(roundtrip(t, c, s));
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	tv = (struct timeval){ .tv_sec = 2 };
	ASSERT_OK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0)
		_exit(set_nonblock(s, true) ? 1 : 0);
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child failed (status %#x)", status);
	start = now_ms();
	ASSERT_ERR(recv(s, buf, sizeof(buf), 0), EAGAIN);
	ASSERT(now_ms() - start < 1000, "recv waited %lld ms for the timeout",
	       (long long)(now_ms() - start));
	ASSERT_OK(set_nonblock(s, false));
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * An epoll set made before a fork, waited on by the child: the parent's
 * connection in it reports the bytes its peer sends, and the child reads
 * them, as with the kernel's socket.
 */
static void fork_child_waits_in_inherited_epoll_set(struct tctx *t)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int c = -1, s = -1, ep = -1, status;
	char buf[8];
	pid_t pid;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ep = epoll_create1(0);
	ASSERT_OK(ep);
	ASSERT_OK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0) {
		close(s);
		if (epoll_wait(ep, &ev, 1, io_ms()) != 1 ||
		    !(ev.events & EPOLLIN))
			_exit(1);
		if (recv(c, buf, 4, MSG_WAITALL) != 4 || memcmp(buf, "kid!", 4))
			_exit(2);
		_exit(send(c, "ack!", 4, 0) == 4 ? 0 : 3);
	}
	TRY(send_all(t, s, "kid!", 4));
	TRY(recv_exact(t, s, buf, 4));
	ASSERT(!memcmp(buf, "ack!", 4), "the child's answer is corrupted");
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child failed (status %#x)", status);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&ep);
	close_fd(&c);
	close_fd(&s);
}

struct one_send {
	int fd;
	const unsigned char *buf;
	size_t len;
	ssize_t ret;
	int err;
};

static void *send_once(void *arg)
{
	struct one_send *o = arg;

	o->ret = send(o->fd, o->buf, o->len, MSG_NOSIGNAL);
	o->err = errno;
	return NULL;
}

/*
 * One blocking send of more than the peer's buffers take, while a fork
 * child makes a call on the socket (under roceshim, it moves to TCP
 * mid-send): the send returns every byte, as the kernel's does.
 */
static void blocking_send_completes_while_fork_child_uses_socket(struct tctx *t)
{
	const size_t len = 8 << 20;
	struct one_send o = { .len = len, .ret = -2 };
	unsigned char *buf = malloc(len);
	int c = -1, s = -1, status;
	bool running = false;
	pthread_t th;
	pid_t pid;
	uint64_t h;

	ASSERT(buf, "out of memory");
	pattern_fill(buf, len, 27, 0);
	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	o.fd = c;
	o.buf = buf;
	ASSERT(!start_thread(&th, send_once, &o), "pthread_create");
	running = true;
	usleep(200000);
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0) {
		char byte;

		_exit(recv(c, &byte, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN
			      ? 0
			      : 1);
	}
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child's recv() was not EAGAIN (status %#x)", status);
	TRY(recv_pattern(t, s, 27, len, &h));
	pthread_join(th, NULL);
	running = false;
	ASSERT(o.ret == (ssize_t)len, "send: %zd (%s)", o.ret, errname(o.err));
	note_digest(t, "one send while a child used the socket", len, h);
out:
	if (running) {
		shutdown(c, SHUT_RDWR);
		shutdown(s, SHUT_RDWR);
		pthread_join(th, NULL);
	}
	close_fd(&c);
	close_fd(&s);
	free(buf);
}

struct halves {
	int fd;	  /* sends on it */
	int peek; /* a fork child peeks at it */
	int gate[2];
	const unsigned char *buf;
	size_t len;
	int child_status;
	char err[64];
};

/* Half the buffer, then the rest once the gate opens. */
static void *send_halves(void *arg)
{
	struct halves *h = arg;
	size_t half = h->len / 2;
	char byte;

	if (send(h->fd, h->buf, half, MSG_NOSIGNAL) != (ssize_t)half ||
	    read(h->gate[0], &byte, 1) != 1 ||
	    send(h->fd, h->buf + half, h->len - half, MSG_NOSIGNAL) !=
		    (ssize_t)(h->len - half))
		snprintf(h->err, sizeof(h->err), "send: %s", errname(errno));
	return NULL;
}

/* A fork child peeks at the socket, then the gate opens. */
static void *fork_peeker(void *arg)
{
	struct halves *h = arg;
	pid_t pid;
	char byte;

	usleep(300000);
	pid = fork_child();
	if (pid == 0)
		_exit(recv(h->peek, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1 ||
				      errno == EAGAIN
			      ? 0
			      : 1);
	if (pid < 0 || waitpid(pid, &h->child_status, 0) != pid)
		h->child_status = -1;
	if (write(h->gate[1], "g", 1) != 1)
		h->child_status = -1;
	return NULL;
}

/*
 * A blocking MSG_WAITALL read of a stream that stops half-way while a
 * fork child peeks at the socket (under roceshim, it moves to TCP then):
 * the read returns every byte, as the kernel's does.
 */
static void waitall_recv_completes_while_fork_child_uses_socket(struct tctx *t)
{
	const size_t len = 8 << 20;
	struct halves h = { .len = len, .gate = { -1, -1 } };
	unsigned char *buf = malloc(len), *got = malloc(len);
	pthread_t sender, peeker;
	int c = -1, s = -1, threads = 0, err;
	sigset_t chld;
	size_t bad;
	ssize_t r;

	ASSERT(buf && got, "out of memory");
	pattern_fill(buf, len, 28, 0);
	ASSERT_OK(pipe(h.gate));
	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	h.fd = c;
	h.peek = s;
	h.buf = buf;
	ASSERT(!start_thread(&sender, send_halves, &h), "pthread_create");
	threads++;
	ASSERT(!start_thread(&peeker, fork_peeker, &h), "pthread_create");
	threads++;
	/* The child's SIGCHLD would end the kernel's read early. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	r = recv(s, got, len, MSG_WAITALL);
	err = errno;
	pthread_sigmask(SIG_UNBLOCK, &chld, NULL);
	ASSERT(r == (ssize_t)len, "recv(MSG_WAITALL): %zd (%s)", r,
	       errname(err));
	bad = pattern_mismatch(got, len, 28, 0);
	ASSERT(bad == len, "data mismatch at byte %zu", bad);
	note_digest(t, "one MSG_WAITALL read while a child peeked", len,
		    fnv1a(FNV1A_INIT, got, len));
out:
	if (threads) {
		/* Unblocks the sender wherever it waits. */
		shutdown(c, SHUT_RDWR);
		shutdown(s, SHUT_RDWR);
		close_fd(&h.gate[1]);
		pthread_join(sender, NULL);
	}
	if (threads > 1)
		pthread_join(peeker, NULL);
	if (threads > 1 && (h.err[0] || h.child_status))
		fail_at(t, __LINE__, "sender %s, child status %#x", h.err,
			h.child_status);
	close_fd(&h.gate[0]);
	close_fd(&h.gate[1]);
	close_fd(&c);
	close_fd(&s);
	free(buf);
	free(got);
}

static void fork_child_opens_own_connection(struct tctx *t)
{
	const size_t len = 32 << 10;
	struct addr bound, peer;
	int l = -1, s = -1, status;
	char ack[4];
	uint64_t h;
	pid_t pid;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0) {
		struct addr a = client_addr;
		int fd;

		close(l);
		addr_set_port(&a, 0);
		fd = socket(family(&bound), SOCK_STREAM, 0);
		if (fd < 0 || bind(fd, sa(&a), a.len) < 0 ||
		    connect(fd, sa(&bound), bound.len) < 0 ||
		    child_send_pattern(fd, 26, len) < 0)
			_exit(1);
		if (recv(fd, ack, sizeof(ack), MSG_WAITALL) != sizeof(ack) ||
		    memcmp(ack, "done", 4))
			_exit(2);
		_exit(0);
	}
	s = accept_within(t, l, 0);
	TRY(s < 0);
	ASSERT_OK(peer_addr(s, &peer));
	ASSERT(addr_same_host(&peer, &client_addr),
	       "child's connection does not come from the client address");
	TRY(recv_pattern(t, s, 26, len, &h));
	note_digest(t, "from child", len, h);
	TRY(send_all(t, s, "done", 4));
	TRY(expect_eof(t, s));
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child failed (status %#x)", status);
out:
	close_fd(&l);
	close_fd(&s);
}

/* A socket whose non-blocking connect to @to has started; -1 on failure. */
static int start_connect(struct tctx *t, struct addr *to)
{
	int c, r;

	c = tcp_socket(t, family(to), 0, &client_addr);
	TRY(c < 0);
	ASSERT_OK(set_nonblock(c, true));
	r = connect(c, sa(to), to->len);
	ASSERT(!r || errno == EINPROGRESS, "connect: %s", errname(errno));
	return c;
out:
	close_fd(&c);
	return -1;
}

/*
 * Accepts on @l the connection another process (@pid) sends @len bytes of
 * stream @seed over, and checks them, the process's exit, and that its
 * exit closed the last copy.
 */
static int take_stream_of(struct tctx *t, int l, pid_t pid, uint64_t seed,
			  size_t len)
{
	int s = -1, status;
	uint64_t h;

	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(recv_pattern(t, s, seed, len, &h));
	note_digest(t, "from the other process", len, h);
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child failed (status %#x)", status);
	TRY(expect_eof(t, s));
	close_fd(&s);
	return 0;
out:
	close_fd(&s);
	return -1;
}

/*
 * A fork while a non-blocking connect is in progress: the child shares a
 * socket that connects, and sends on it once it is writable, while the
 * parent closes its copy at once.  Over RDMA the connect is still in its
 * handshake at the fork.
 */
static void fork_child_shares_connect_in_progress(struct tctx *t)
{
	const size_t len = 32 << 10;
	int l = -1, c = -1;
	struct addr bound;
	pid_t pid;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	c = start_connect(t, &bound);
	TRY(c < 0);
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0) {
		struct pollfd pfd = { .fd = c, .events = POLLOUT };
		int err = -1;
		socklen_t elen = sizeof(err);

		close(l);
		if (poll(&pfd, 1, io_ms()) != 1 || pfd.revents != POLLOUT)
			_exit(1);
		if (getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &elen) || err)
			_exit(2);
		if (set_nonblock(c, false) ||
		    child_send_pattern(c, 29, len) < 0)
			_exit(3);
		_exit(0);
	}
	close_fd(&c);
	TRY(take_stream_of(t, l, pid, 29, len));
out:
	close_fd(&l);
	close_fd(&c);
}

/*
 * The same, as an event loop would: the socket was put in an epoll set
 * before the fork, and the child waits there.  The child's close, while it
 * lives on, ends the connection: the parent closed its copy.
 */
static void fork_child_closing_connect_in_progress_ends_it(struct tctx *t)
{
	const size_t len = 32 << 10;
	int l = -1, c = -1, s = -1, ep = -1, gate[2] = { -1, -1 }, status;
	struct addr bound;
	uint64_t h;
	pid_t pid;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT_OK(pipe(gate));
	c = start_connect(t, &bound);
	TRY(c < 0);
	ASSERT_OK(ep = epoll_create1(0));
	ASSERT_OK(epoll_add(ep, c, EPOLLOUT, 11));
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0) {
		struct epoll_event ev;
		char byte;

		close(l);
		close(gate[1]);
		if (epoll_wait(ep, &ev, 1, io_ms()) != 1 ||
		    ev.events != EPOLLOUT || ev.data.u64 != 11)
			_exit(1);
		if (set_nonblock(c, false) ||
		    child_send_pattern(c, 33, len) < 0)
			_exit(2);
		close(c);
		/* Alive until the parent has seen the end of the stream. */
		_exit(read(gate[0], &byte, 1) == 0 ? 0 : 3);
	}
	close_fd(&gate[0]);
	close_fd(&c);
	s = accept_within(t, l, 0);
	TRY(s < 0);
	TRY(recv_pattern(t, s, 33, len, &h));
	note_digest(t, "from child", len, h);
	TRY(expect_eof(t, s));
	close_fd(&gate[1]);
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child failed (status %#x)", status);
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
	close_fd(&ep);
	close_fd(&gate[0]);
	close_fd(&gate[1]);
}

/* Sends fd over the unix socket u with SCM_RIGHTS: 0 or -1. */
static int send_fd(int u, int fd)
{
	char byte = 'f';
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control = { 0 };
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(u, &msg, 0) == 1 ? 0 : -1;
}

/* The fd that send_fd() sent over u, or -1. */
static int recv_fd(int u)
{
	char byte;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(u, &msg, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/*
 * A socket whose non-blocking connect is in progress, passed with
 * SCM_RIGHTS to another process and closed here: that process finds a
 * socket that connects, and sends on it once it is writable.  Over RDMA
 * the connect is still in its handshake when the fd leaves.
 */
static void passed_fd_shares_connect_in_progress(struct tctx *t)
{
	const size_t len = 32 << 10;
	int l = -1, c = -1, u[2] = { -1, -1 };
	struct addr bound;
	pid_t pid;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, u));
	pid = fork_child();
	ASSERT_OK(pid);
	if (pid == 0) {
		struct pollfd pfd = { .events = POLLOUT };
		int err = -1;
		socklen_t elen = sizeof(err);

		close(l);
		close(u[0]);
		pfd.fd = recv_fd(u[1]);
		if (pfd.fd < 0)
			_exit(1);
		if (poll(&pfd, 1, io_ms()) != 1 || pfd.revents != POLLOUT)
			_exit(2);
		if (getsockopt(pfd.fd, SOL_SOCKET, SO_ERROR, &err, &elen) ||
		    err)
			_exit(3);
		if (set_nonblock(pfd.fd, false) ||
		    child_send_pattern(pfd.fd, 32, len) < 0)
			_exit(4);
		_exit(0);
	}
	close_fd(&u[1]);
	c = start_connect(t, &bound);
	TRY(c < 0);
	ASSERT_OK(send_fd(u[0], c));
	close_fd(&c);
	TRY(take_stream_of(t, l, pid, 32, len));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&u[0]);
	close_fd(&u[1]);
}

/* pwritev2 and preadv2 at the current position are writev and readv. */
static void pwritev2_and_preadv2_at_current_position_carry_bytes(struct tctx *t)
{
	char a[3000], b[5000], in[8000];
	struct iovec out_iov[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct iovec in_iov = { in, sizeof(in) };
	int c = -1, s = -1;
	size_t got = 0;
	ssize_t n;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	pattern_fill(a, sizeof(a), 34, 0);
	pattern_fill(b, sizeof(b), 34, sizeof(a));
	n = pwritev2(c, out_iov, 2, -1, 0);
	ASSERT(n == sizeof(a) + sizeof(b), "pwritev2: %zd, %s", n,
	       errname(errno));
	while (got < sizeof(in)) {
		in_iov.iov_base = in + got;
		in_iov.iov_len = sizeof(in) - got;
		n = preadv2(s, &in_iov, 1, -1, 0);
		ASSERT(n > 0, "preadv2: %zd, %s", n,
		       n ? errname(errno) : "EOF");
		got += n;
	}
	ASSERT(pattern_mismatch(in, sizeof(in), 34, 0) == sizeof(in),
	       "data mismatch");
	note_digest(t, "preadv2", sizeof(in), fnv1a(FNV1A_INIT, in, got));
	ASSERT_ERR(preadv2(s, &in_iov, 1, 0, 0), ESPIPE);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * preadv2 with RWF_NOWAIT does not wait on a blocking socket: EAGAIN, or
 * EOPNOTSUPP from a kernel that takes no RWF_NOWAIT on sockets (the note
 * keeps which, for the transcripts to compare).
 */
static void preadv2_nowait_on_an_empty_socket_does_not_wait(struct tctx *t)
{
	char buf[16];
	struct iovec iov = { buf, sizeof(buf) };
	int c = -1, s = -1;
	ssize_t r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	r = preadv2(s, &iov, 1, -1, RWF_NOWAIT);
	ASSERT(r < 0 && (errno == EAGAIN || errno == EOPNOTSUPP),
	       "preadv2 RWF_NOWAIT: %zd, %s", r, errname(errno));
	note(t, "preadv2 RWF_NOWAIT: %s", errname(errno));
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/*
 * Bytes spliced into a socket follow those sent before, which the peer
 * has not read: the socket is filled until it would block (over RDMA the
 * bytes wait in the ring, and move with the connection), then a pipe's
 * bytes are spliced in while the peer reads.
 */
static void splice_into_a_socket_follows_the_bytes_sent_before(struct tctx *t)
{
	static unsigned char buf[16384];
	int64_t end = now_ms() + io_ms();
	int c = -1, s = -1, p[2] = { -1, -1 };
	size_t sent = 0, got = 0, spliced = 0, bad;
	ssize_t n;

	/*
	 * Small buffers: what waits for the peer is more than its kernel
	 * connection takes at once.  How much fits differs by transport, so
	 * the transcript has no digest of it.
	 */
	TRY(make_pair(t, &c, &s,
		      PAIR_BIND_CLIENT | PAIR_NONBLOCK | PAIR_SMALL_BUFFERS));
	ASSERT_OK(pipe(p));
	for (;;) {
		pattern_fill(buf, sizeof(buf), 35, sent);
		n = send(c, buf, sizeof(buf), MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN)
			break;
		ASSERT(n > 0, "send: %s", errname(errno));
		sent += n;
	}
	pattern_fill(buf, sizeof(buf), 35, sent);
	ASSERT(write(p[1], buf, sizeof(buf)) == sizeof(buf), "pipe write: %s",
	       errname(errno));
	while (got < sent + sizeof(buf)) {
		ASSERT(now_ms() < end, "only %zu of %zu bytes", got,
		       sent + sizeof(buf));
		if (spliced < sizeof(buf)) {
			n = splice(p[0], NULL, c, NULL, sizeof(buf) - spliced,
				   0);
			ASSERT(n > 0 || errno == EAGAIN, "splice: %zd, %s", n,
			       n ? errname(errno) : "nothing moved");
			if (n > 0)
				spliced += n;
		}
		n = recv(s, buf, sizeof(buf), 0);
		if (n < 0 && errno == EAGAIN) {
			wait_fd(s, POLLIN, 10);
			continue;
		}
		ASSERT(n > 0, "recv: %zd, %s", n, n ? errname(errno) : "EOF");
		bad = pattern_mismatch(buf, n, 35, got);
		ASSERT(bad == (size_t)n, "data mismatch at byte %zu",
		       got + bad);
		got += n;
	}
out:
	close_fd(&p[0]);
	close_fd(&p[1]);
	close_fd(&c);
	close_fd(&s);
}

/*
 * splice() from a connected socket into a pipe moves the peer's bytes, in
 * order, and the connection goes on afterwards.
 */
static void splice_moves_socket_bytes_into_a_pipe(struct tctx *t)
{
	static unsigned char buf[65536];
	const size_t len = 64 << 10;
	int c = -1, s = -1, p[2] = { -1, -1 };
	int64_t end = now_ms() + io_ms();
	uint64_t h = FNV1A_INIT;
	size_t off = 0, bad;
	ssize_t n, r;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ASSERT_OK(pipe(p));
	TRY(send_pattern(t, c, 30, len));
	ASSERT_OK(set_nonblock(s, true));
	while (off < len) {
		n = splice(s, NULL, p[1], NULL, len - off, SPLICE_F_NONBLOCK);
		if (n < 0 && (errno == EAGAIN || retry_intr())) {
			ASSERT(now_ms() < end, "splice: only %zu of %zu bytes",
			       off, len);
			wait_fd(s, POLLIN, 10);
			continue;
		}
		ASSERT(n > 0, "splice: %zd, %s", n, n ? errname(errno) : "EOF");
		r = read(p[0], buf, n);
		ASSERT(r == n, "pipe gave %zd of %zd bytes", r, n);
		bad = pattern_mismatch(buf, n, 30, off);
		ASSERT(bad == (size_t)n, "data mismatch at byte %zu",
		       off + bad);
		h = fnv1a(h, buf, n);
		off += n;
	}
	note_digest(t, "spliced", len, h);
	ASSERT_OK(set_nonblock(s, false));
	TRY(roundtrip(t, c, s));
out:
	close_fd(&p[0]);
	close_fd(&p[1]);
	close_fd(&c);
	close_fd(&s);
}

/*
 * splice() from a pipe into a connected socket sends the pipe's bytes, in
 * order, and the connection goes on afterwards.
 */
static void splice_moves_pipe_bytes_into_a_socket(struct tctx *t)
{
	static unsigned char buf[16384];
	const size_t len = 64 << 10;
	int c = -1, s = -1, p[2] = { -1, -1 };
	size_t off, left;
	uint64_t h;
	ssize_t n;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	ASSERT_OK(pipe(p));
	for (off = 0; off < len; off += sizeof(buf)) {
		pattern_fill(buf, sizeof(buf), 31, off);
		ASSERT(write(p[1], buf, sizeof(buf)) == sizeof(buf),
		       "pipe write: %s", errname(errno));
		for (left = sizeof(buf); left; left -= n) {
			n = splice(p[0], NULL, c, NULL, left, 0);
			ASSERT(n > 0, "splice: %zd, %s", n,
			       n ? errname(errno) : "nothing moved");
		}
	}
	TRY(recv_pattern(t, s, 31, len, &h));
	note_digest(t, "spliced", len, h);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&p[0]);
	close_fd(&p[1]);
	close_fd(&c);
	close_fd(&s);
}

/*
 * The client of forked_handler_keeps_connection_its_parent_closes, run as
 * "sockcheck ... --pattern-client PORT": a process of its own (a fork child
 * of a process that uses RDMA would stay on TCP), which sends 32 KiB of
 * stream 28 to the server address and waits for "done".
 */
static int pattern_client(const char *port)
{
	struct addr from = client_addr, to = server_addr;
	char ack[4];
	int fd;

	addr_set_port(&from, 0);
	addr_set_port(&to, strtoul(port, NULL, 10));
	fd = socket(family(&to), SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, sa(&from), from.len) < 0 ||
	    connect(fd, sa(&to), to.len) < 0 ||
	    child_send_pattern(fd, 28, 32 << 10) < 0)
		return 1;
	if (recv(fd, ack, sizeof(ack), MSG_WAITALL) != sizeof(ack) ||
	    memcmp(ack, "done", 4))
		return 2;
	return 0;
}

static pid_t start_pattern_client(uint16_t port)
{
	char port_arg[8];
	pid_t pid;

	snprintf(port_arg, sizeof(port_arg), "%u", port);
	pid = fork_child();
	if (pid == 0) {
		execlp(self_path, "sockcheck", "--server-addr", server_arg,
		       "--client-addr", client_arg, "--pattern-client",
		       port_arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/*
 * The database shape: accept, fork a handler that reads at once, and close
 * the acceptor's copy while the handler is taking the connection over.  The
 * client is stopped meanwhile, so that the close falls inside the handover
 * wherever the connection has one to make.
 */
static void forked_handler_keeps_connection_its_parent_closes(struct tctx *t)
{
	int l = -1, s = -1, status;
	pid_t client = -1, handler;
	struct addr bound;

	l = open_listener(t, &server_addr, 0, &bound);
	TRY(l < 0);
	client = start_pattern_client(addr_port(&bound));
	ASSERT_OK(client);
	s = accept_within(t, l, 0);
	TRY(s < 0);
	ASSERT_OK(kill(client, SIGSTOP));
	handler = fork_child();
	ASSERT_OK(handler);
	if (handler == 0) {
		close(l);
		if (recv_pattern(t, s, 28, 32 << 10, NULL))
			_exit(1);
		_exit(send(s, "done", 4, MSG_NOSIGNAL) == 4 ? 0 : 2);
	}
	sleep_ms(200);
	close_fd(&s);
	kill(client, SIGCONT);
	TRY(wait_child(t, handler, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "handler failed (status %#x)", status);
	TRY(wait_child(t, client, &status));
	client = -1;
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "client failed (status %#x)", status);
out:
	if (client > 0) {
		kill(client, SIGKILL);
		waitpid(client, NULL, 0);
	}
	close_fd(&l);
	close_fd(&s);
}

/*
 * A fork made with the clone system call (vsftpd's sessions), which runs
 * no pthread_atfork handler: the child serves the connection while the
 * parent closes its copy at once.
 */
static void clone_child_serves_connection_its_parent_closes(struct tctx *t)
{
	const size_t len = 64 << 10;
	int c = -1, s = -1, status;
	pid_t pid;
	uint64_t h;

	TRY(make_pair(t, &c, &s, PAIR_BIND_CLIENT));
	pid = fork_child_by(true);
	ASSERT_OK(pid);
	if (pid == 0) {
		close(c);
		_exit(child_send_pattern(s, 29, len) ? 1 : 0);
	}
	close_fd(&s);
	TRY(recv_pattern(t, c, 29, len, &h));
	note_digest(t, "from clone child", len, h);
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child failed (status %#x)", status);
	TRY(expect_eof(t, c));
out:
	close_fd(&c);
	close_fd(&s);
}

/* Kept apart so that nothing in a test's frame lives across vfork(). */
static pid_t __attribute__((noinline)) vfork_and_exit(int code)
{
	pid_t pid = vfork();

	if (pid == 0)
		_exit(code);
	return pid;
}

static void vfork_child_exit_leaves_sockets_intact(struct tctx *t)
{
	int c = -1, s = -1, status;
	pid_t pid;

	TRY(make_pair(t, &c, &s, 0));
	fflush(NULL);
	pid = vfork_and_exit(42);
	ASSERT_OK(pid);
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 42,
	       "child status %#x", status);
	TRY(roundtrip(t, c, s));
	close_fd(&c);
	TRY(expect_eof(t, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/* The inetd shape from a vfork child: cat with fd as its stdin and stdout. */
static pid_t __attribute__((noinline)) vfork_cat_on(int fd)
{
	pid_t pid = vfork();

	if (pid == 0) {
		if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0)
			_exit(126);
		execl("/bin/cat", "cat", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void vfork_child_execs_a_handler_on_the_socket(struct tctx *t)
{
	const size_t len = 32 << 10;
	int c = -1, s = -1, status;
	uint64_t h;
	pid_t pid;

	TRY(make_pair(t, &c, &s, 0));
	fflush(NULL);
	pid = vfork_cat_on(s);
	ASSERT_OK(pid);
	close_fd(&s);
	TRY(send_pattern(t, c, 27, len));
	ASSERT_OK(shutdown(c, SHUT_WR));
	TRY(recv_pattern(t, c, 27, len, &h));
	note_digest(t, "echoed by cat", len, h);
	TRY(expect_eof(t, c));
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "cat status %#x",
	       status);
out:
	close_fd(&c);
	close_fd(&s);
}

/* A vfork child that closes both ends, as close_fds does, then exits. */
static pid_t __attribute__((noinline)) vfork_close_and_exit(int a, int b)
{
	pid_t pid = vfork();

	if (pid == 0) {
		close(a);
		close(b);
		_exit(0);
	}
	return pid;
}

static void vfork_child_closing_sockets_leaves_them_open(struct tctx *t)
{
	int c = -1, s = -1, status;
	pid_t pid;

	TRY(make_pair(t, &c, &s, 0));
	fflush(NULL);
	pid = vfork_close_and_exit(c, s);
	ASSERT_OK(pid);
	TRY(wait_child(t, pid, &status));
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "child status %#x", status);
	TRY(roundtrip(t, c, s));
	close_fd(&c);
	TRY(expect_eof(t, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: threads                                                      */
/* ------------------------------------------------------------------ */

#define STREAM_PAIRS 8

static void concurrent_streams_on_distinct_connections(struct tctx *t)
{
	const size_t len = 1 << 20;
	struct stream tx[STREAM_PAIRS], rx[STREAM_PAIRS];
	int c[STREAM_PAIRS], s[STREAM_PAIRS], i;
	uint64_t h = FNV1A_INIT;

	for (i = 0; i < STREAM_PAIRS; i++)
		c[i] = s[i] = -1;
	for (i = 0; i < STREAM_PAIRS; i++)
		TRY(make_pair(t, &c[i], &s[i], i & 1 ? PAIR_BIND_CLIENT : 0));
	memset(tx, 0, sizeof(tx));
	memset(rx, 0, sizeof(rx));
	for (i = 0; i < STREAM_PAIRS; i++) {
		/* even pairs send client->server, odd ones the other way */
		tx[i].fd = i & 1 ? s[i] : c[i];
		rx[i].fd = i & 1 ? c[i] : s[i];
		tx[i].seed = rx[i].seed = 100 + i;
		tx[i].len = rx[i].len = len;
	}
	TRY(run_streams(t, tx, rx, STREAM_PAIRS));
	for (i = 0; i < STREAM_PAIRS; i++)
		h = fnv1a(h, &rx[i].digest, sizeof(rx[i].digest));
	note(t, "%d streams of %zu bytes: combined fnv1a64 %016" PRIx64,
	     STREAM_PAIRS, len, h);
out:
	for (i = 0; i < STREAM_PAIRS; i++) {
		close_fd(&c[i]);
		close_fd(&s[i]);
	}
}

/*
 * Threads that send small records on one socket at once, one send() per
 * record, while the reader lags: every record arrives whole.  The kernel
 * copies a send that fits its buffers in one piece, and its buffers of
 * megabytes are not full here; roceshim's ring fills.
 */
enum {
	RECORD_THREADS = 4,
	RECORDS_EACH = 2000,
	RECORD_LEN = 100,
	RECORDS_PER_LAG = 64, /* the reader naps 1 ms after so many */
};

struct record_sender {
	int fd;
	unsigned char id;
	char err[128];
};

static void record_fill(unsigned char *rec, unsigned char id, uint32_t seq)
{
	int i;

	rec[0] = id;
	memcpy(rec + 1, &seq, sizeof(seq));
	for (i = 1 + sizeof(seq); i < RECORD_LEN; i++)
		rec[i] = (unsigned char)(id * 31 + seq * 7 + i);
}

static void *send_records(void *arg)
{
	struct record_sender *rs = arg;
	unsigned char rec[RECORD_LEN];
	uint32_t seq;
	ssize_t r;

	for (seq = 0; seq < RECORDS_EACH; seq++) {
		record_fill(rec, rs->id, seq);
		r = send(rs->fd, rec, sizeof(rec), MSG_NOSIGNAL);
		if (r != sizeof(rec)) {
			snprintf(rs->err, sizeof(rs->err), "record %u: %s", seq,
				 r < 0 ? errname(errno) : "short send");
			return NULL;
		}
	}
	return NULL;
}

/* Whether rec is one sender's record, whole. */
static bool record_whole(const unsigned char *rec)
{
	unsigned char want[RECORD_LEN];
	uint32_t seq;

	if (rec[0] >= RECORD_THREADS)
		return false;
	memcpy(&seq, rec + 1, sizeof(seq));
	record_fill(want, rec[0], seq);
	return !memcmp(rec, want, RECORD_LEN);
}

static void concurrent_small_sends_arrive_whole(struct tctx *t)
{
	struct record_sender rs[RECORD_THREADS];
	pthread_t th[RECORD_THREADS];
	unsigned char rec[RECORD_LEN];
	int c = -1, s = -1, started = 0, i, torn = 0;

	TRY(make_pair(t, &c, &s, 0));
	for (i = 0; i < RECORD_THREADS; i++) {
		rs[i] = (struct record_sender){ .fd = c, .id = i };
		ASSERT(!start_thread(&th[i], send_records, &rs[i]),
		       "pthread_create");
		started++;
	}
	for (i = 0; i < RECORD_THREADS * RECORDS_EACH; i++) {
		TRY(recv_exact(t, s, rec, sizeof(rec)));
		torn += !record_whole(rec);
		if (i % RECORDS_PER_LAG == 0)
			sleep_ms(1);
	}
	while (started)
		pthread_join(th[--started], NULL);
	for (i = 0; i < RECORD_THREADS; i++)
		ASSERT(!rs[i].err[0], "sender %d: %s", i, rs[i].err);
	ASSERT(!torn, "%d of %d records torn", torn,
	       RECORD_THREADS * RECORDS_EACH);
out:
	if (started)
		shutdown(c, SHUT_RDWR);
	while (started)
		pthread_join(th[--started], NULL);
	close_fd(&c);
	close_fd(&s);
}

/*
 * A thread that sends small pieces without pause, to a reader that lags,
 * does not keep another thread's small sends out: each of them ends in
 * well under a second, as the kernel's waiters for buffer room take
 * their turns.
 */
enum {
	BUSY_PIECE = 1024,
	LAGGING_READ = 4096,
	PROBE_SENDS = 20,
	PROBE_GAP_MS = 50,
	PROBE_MAX_MS = 1000,
};

struct busy_sender {
	int fd;
	bool stop; /* atomic */
};

static void *send_without_pause(void *arg)
{
	struct busy_sender *bs = arg;
	unsigned char piece[BUSY_PIECE];

	memset(piece, 'b', sizeof(piece));
	while (!__atomic_load_n(&bs->stop, __ATOMIC_ACQUIRE))
		if (send(bs->fd, piece, sizeof(piece), MSG_NOSIGNAL) < 0 &&
		    errno != EINTR)
			break;
	return NULL;
}

static void *read_with_lag(void *arg)
{
	unsigned char buf[LAGGING_READ];
	int fd = *(int *)arg;

	while (recv(fd, buf, sizeof(buf), 0) > 0)
		sleep_ms(1);
	return NULL;
}

static void small_sends_get_their_turn_beside_a_busy_sender(struct tctx *t)
{
	struct busy_sender bs = { .fd = -1 };
	pthread_t busy, reader;
	bool busy_up = false, reader_up = false;
	int c = -1, s = -1, i;
	int64_t start, took, longest = 0;
	ssize_t r;

	/* Small buffers: the kernel's own waits for room stay short. */
	TRY(make_pair(t, &c, &s, PAIR_SMALL_BUFFERS));
	bs.fd = c;
	ASSERT(!start_thread(&reader, read_with_lag, &s), "pthread_create");
	reader_up = true;
	ASSERT(!start_thread(&busy, send_without_pause, &bs), "pthread_create");
	busy_up = true;
	for (i = 0; i < PROBE_SENDS; i++) {
		sleep_ms(PROBE_GAP_MS);
		start = now_ms();
		r = send(c, "probe", 5, MSG_NOSIGNAL);
		took = now_ms() - start;
		ASSERT(r == 5, "send %d: %zd (%s)", i, r,
		       r < 0 ? errname(errno) : "short");
		if (took > longest)
			longest = took;
	}
	ASSERT(longest < PROBE_MAX_MS, "a send took %lld ms",
	       (long long)longest);
out:
	__atomic_store_n(&bs.stop, true, __ATOMIC_RELEASE);
	if (c >= 0)
		shutdown(c, SHUT_RDWR);
	if (busy_up)
		pthread_join(busy, NULL);
	if (s >= 0)
		shutdown(s, SHUT_RDWR);
	if (reader_up)
		pthread_join(reader, NULL);
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Tests: sockets the shim must leave alone                            */
/* ------------------------------------------------------------------ */

static void unix_socketpair_stream_untouched(struct tctx *t)
{
	int u[2] = { -1, -1 }, v = -1;
	unsigned char buf[4096];

	ASSERT_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, u));
	ASSERT_OK(get_int_opt(u[0], SOL_SOCKET, SO_DOMAIN, &v));
	ASSERT(v == AF_UNIX, "SO_DOMAIN %d", v);
	pattern_fill(buf, sizeof(buf), 27, 0);
	TRY(send_all(t, u[0], buf, sizeof(buf)));
	TRY(recv_pattern(t, u[1], 27, sizeof(buf), NULL));
	TRY(roundtrip(t, u[0], u[1]));
	close_fd(&u[0]);
	TRY(expect_eof(t, u[1]));
out:
	close_fd(&u[0]);
	close_fd(&u[1]);
}

static void unix_socketpair_dgram_preserves_boundaries(struct tctx *t)
{
	static const size_t sizes[] = { 1, 100, 1000 };
	unsigned char src[1000], buf[2048];
	int u[2] = { -1, -1 };
	size_t i;
	ssize_t r;

	ASSERT_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, u));
	pattern_fill(src, sizeof(src), 28, 0);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		r = send(u[0], src, sizes[i], 0);
		ASSERT(r == (ssize_t)sizes[i], "send: %s", errname(errno));
	}
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		ASSERT(wait_fd(u[1], POLLIN, io_ms()) > 0, "no datagram");
		r = recv(u[1], buf, sizeof(buf), 0);
		ASSERT(r == (ssize_t)sizes[i], "datagram %zu: %zd bytes", i, r);
		ASSERT(!memcmp(buf, src, r), "datagram %zu corrupted", i);
	}
out:
	close_fd(&u[0]);
	close_fd(&u[1]);
}

static void udp_datagrams_still_work(struct tctx *t)
{
	static const size_t sizes[] = { 1, 512, 1200 };
	unsigned char src[1200], buf[2048];
	struct addr a1, a2, from;
	int u1 = -1, u2 = -1, v = -1;
	size_t i;
	ssize_t r;

	a1 = server_addr;
	a2 = client_addr;
	addr_set_port(&a1, 0);
	addr_set_port(&a2, 0);
	ASSERT_OK(u1 = socket(family(&a1), SOCK_DGRAM, 0));
	ASSERT_OK(u2 = socket(family(&a2), SOCK_DGRAM, 0));
	ASSERT_OK(get_int_opt(u1, SOL_SOCKET, SO_TYPE, &v));
	ASSERT(v == SOCK_DGRAM, "SO_TYPE %d", v);
	ASSERT_OK(bind(u1, sa(&a1), a1.len));
	ASSERT_OK(bind(u2, sa(&a2), a2.len));
	ASSERT_OK(local_addr(u1, &a1));
	ASSERT_OK(local_addr(u2, &a2));
	pattern_fill(src, sizeof(src), 29, 0);
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		r = sendto(u2, src, sizes[i], 0, sa(&a1), a1.len);
		ASSERT(r == (ssize_t)sizes[i], "sendto: %s", errname(errno));
	}
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		ASSERT(wait_fd(u1, POLLIN, io_ms()) > 0, "no datagram");
		from.len = sizeof(from.ss);
		r = recvfrom(u1, buf, sizeof(buf), 0, sa(&from), &from.len);
		ASSERT(r == (ssize_t)sizes[i], "datagram %zu: %zd bytes", i, r);
		ASSERT(!memcmp(buf, src, r), "datagram %zu corrupted", i);
		ASSERT(addr_equal(&from, &a2), "wrong source address");
	}
	/* Connected UDP. */
	ASSERT_OK(connect(u1, sa(&a2), a2.len));
	ASSERT(send(u1, "reply", 5, 0) == 5, "send: %s", errname(errno));
	ASSERT(wait_fd(u2, POLLIN, io_ms()) > 0, "no reply");
	r = recv(u2, buf, sizeof(buf), 0);
	ASSERT(r == 5 && !memcmp(buf, "reply", 5), "reply: %zd", r);
out:
	close_fd(&u1);
	close_fd(&u2);
}

/* ------------------------------------------------------------------ */
/* Tests: IPv6                                                         */
/* ------------------------------------------------------------------ */

static void ipv6_loopback_connection_transfers_data(struct tctx *t)
{
	struct addr lo, cl, cp, sl, sp;
	int c = -1, s = -1;
	uint64_t h;

	if (!have_ipv6) {
		skip(t, "IPv6 unavailable");
		return;
	}
	addr_v6_loopback(&lo);
	TRY(make_pair_at(t, &c, &s, 0, &lo, &lo));
	ASSERT_OK(local_addr(c, &cl));
	ASSERT_OK(peer_addr(c, &cp));
	ASSERT_OK(local_addr(s, &sl));
	ASSERT_OK(peer_addr(s, &sp));
	ASSERT(family(&cl) == AF_INET6 && cl.len == sizeof(struct sockaddr_in6),
	       "client address is not IPv6");
	ASSERT(addr_equal(&cl, &sp) && addr_equal(&cp, &sl),
	       "addresses disagree between ends");
	ASSERT(addr_same_host(&sl, &lo), "server not on ::1");
	TRY(send_pattern(t, c, 30, 32 << 10));
	TRY(recv_pattern(t, s, 30, 32 << 10, &h));
	note_digest(t, "received", 32 << 10, h);
	TRY(roundtrip(t, c, s));
out:
	close_fd(&c);
	close_fd(&s);
}

/* The IPv4 address clients use in the dual-stack tests. */
static struct in_addr v4_target(void)
{
	struct in_addr v4;

	if (!addr_v4(&server_addr, &v4))
		inet_pton(AF_INET, "127.0.0.1", &v4);
	return v4;
}

static void ipv6_dual_stack_listener_accepts_ipv4_client(struct tctx *t)
{
	int l = -1, c = -1, s = -1, v = -1;
	struct addr any, bound, to, peer, cl;
	struct sockaddr_in *sin;
	struct in_addr v4;

	if (!have_dual_stack) {
		skip(t, "IPv6 dual-stack sockets unavailable");
		return;
	}
	addr_v6_any(&any);
	ASSERT_OK(l = socket(AF_INET6, SOCK_STREAM, 0));
	ASSERT_OK(set_int_opt(l, IPPROTO_IPV6, IPV6_V6ONLY, 0));
	ASSERT_OK(get_int_opt(l, IPPROTO_IPV6, IPV6_V6ONLY, &v));
	ASSERT(v == 0, "IPV6_V6ONLY did not clear");
	ASSERT_OK(bind(l, sa(&any), any.len));
	ASSERT_OK(listen(l, 4));
	ASSERT_OK(local_addr(l, &bound));

	memset(&to, 0, sizeof(to));
	sin = (struct sockaddr_in *)&to.ss;
	sin->sin_family = AF_INET;
	sin->sin_addr = v4_target();
	sin->sin_port = htons(addr_port(&bound));
	to.len = sizeof(*sin);
	c = tcp_socket(t, AF_INET, 0, NULL);
	TRY(c < 0);
	TRY(connect_to(t, c, &to));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	ASSERT_OK(peer_addr(s, &peer));
	ASSERT_OK(local_addr(c, &cl));
	ASSERT(family(&peer) == AF_INET6, "peer of an IPv6 socket not IPv6");
	ASSERT(addr_v4(&peer, &v4) && family(&peer) == AF_INET6 &&
		       v4.s_addr ==
			       ((struct sockaddr_in *)&cl.ss)->sin_addr.s_addr,
	       "peer is not the v4-mapped client address");
	ASSERT(addr_port(&peer) == addr_port(&cl), "peer port mismatch");
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

static void ipv6_v4_mapped_client_reaches_ipv4_listener(struct tctx *t)
{
	struct addr bound, to, cp, cl, sp;
	int l = -1, c = -1, s = -1;
	struct addr v4srv;
	struct in_addr v4;

	if (!have_dual_stack) {
		skip(t, "IPv6 dual-stack sockets unavailable");
		return;
	}
	memset(&v4srv, 0, sizeof(v4srv));
	((struct sockaddr_in *)&v4srv.ss)->sin_family = AF_INET;
	((struct sockaddr_in *)&v4srv.ss)->sin_addr = v4_target();
	v4srv.len = sizeof(struct sockaddr_in);
	l = open_listener(t, &v4srv, 0, &bound);
	TRY(l < 0);
	addr_v4_mapped(&to, v4_target(), addr_port(&bound));
	ASSERT_OK(c = socket(AF_INET6, SOCK_STREAM, 0));
	ASSERT_OK(set_int_opt(c, IPPROTO_IPV6, IPV6_V6ONLY, 0));
	TRY(connect_to(t, c, &to));
	s = accept_within(t, l, 0);
	TRY(s < 0);
	ASSERT_OK(peer_addr(c, &cp));
	ASSERT_OK(local_addr(c, &cl));
	ASSERT_OK(peer_addr(s, &sp));
	ASSERT(family(&cp) == AF_INET6 && addr_v4(&cp, &v4) &&
		       v4.s_addr == v4_target().s_addr,
	       "client's peer is not the v4-mapped server address");
	ASSERT(addr_port(&cp) == addr_port(&bound), "peer port mismatch");
	ASSERT(family(&cl) == AF_INET6 && addr_v4(&cl, &v4),
	       "client local address is not v4-mapped");
	ASSERT(family(&sp) == AF_INET && addr_v4(&sp, &v4) &&
		       v4.s_addr == ((struct sockaddr_in6 *)&cl.ss)
					    ->sin6_addr.s6_addr32[3] &&
		       addr_port(&sp) == addr_port(&cl),
	       "server sees a different client address");
	TRY(roundtrip(t, c, s));
out:
	close_fd(&l);
	close_fd(&c);
	close_fd(&s);
}

/* ------------------------------------------------------------------ */
/* Environment probes                                                  */
/* ------------------------------------------------------------------ */

/*
 * Skips must print the same with and without the shim, so availability is
 * decided with raw system calls that no LD_PRELOAD library can intercept.
 */
static bool raw_v6_bind(const struct in6_addr *a, bool dual)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_addr = *a };
	int off = 0, ok = 0;
	long fd;

	fd = syscall(SYS_socket, AF_INET6, SOCK_STREAM, 0);
	if (fd < 0)
		return false;
	if (!dual || !syscall(SYS_setsockopt, fd, IPPROTO_IPV6, IPV6_V6ONLY,
			      &off, sizeof(off)))
		ok = !syscall(SYS_bind, fd, &s6, sizeof(s6));
	syscall(SYS_close, fd);
	return ok;
}

static void probe_env(void)
{
	have_ipv6 = raw_v6_bind(&in6addr_loopback, false);
	have_dual_stack = raw_v6_bind(&in6addr_any, true);
#ifdef SYS_epoll_pwait2
	{
		struct epoll_event ev;
		struct timespec ts = { 0, 0 };
		long ep = syscall(SYS_epoll_create1, 0);

		if (ep >= 0) {
			have_epoll_pwait2 = syscall(SYS_epoll_pwait2, ep, &ev,
						    1, &ts, NULL, 8) >= 0 ||
					    errno != ENOSYS;
			syscall(SYS_close, ep);
		}
	}
#endif
}

/* ------------------------------------------------------------------ */
/* Test table and runner                                               */
/* ------------------------------------------------------------------ */

struct test {
	const char *name;
	void (*fn)(struct tctx *t);
	unsigned int limit_s;
};

/* clang-format off */
#define TEST(fn)		{ #fn, fn, LIMIT_S }
#define SLOW_TEST(fn, s)	{ #fn, fn, s }
/* clang-format on */

static const struct test tests[] = {
	/* connection establishment */
	TEST(blocking_connect_accept_without_bind),
	TEST(blocking_connect_accept_with_client_bind),
	TEST(blocking_accept_waits_for_client),
	TEST(nonblocking_connect_completes_via_epollout),
	TEST(epoll_registration_before_connect_reports_epollout),
	TEST(epoll_registration_before_connect_reports_the_data),
	TEST(epoll_registration_before_blocking_connect_reports_the_data),
	TEST(vectored_calls_during_nonblocking_connect_wait),
	TEST(connect_completes_for_a_dup_of_a_closed_fd),
	TEST(successful_calls_leave_errno_alone),
	TEST(calls_around_a_nonblocking_connect_leave_errno_alone),
	TEST(connection_fits_three_descriptors_below_the_limit),
	TEST(connection_takes_no_number_below_the_limit_but_its_own),
	TEST(connect_to_closed_port_is_refused),
	TEST(nonblocking_connect_to_closed_port_reports_so_error),
	TEST(connect_again_after_refusals_carries_both_streams),
	TEST(bound_connect_again_after_refusals_carries_both_streams),
	TEST(connect_unspec_then_elsewhere_carries_the_new_stream),
	TEST(connect_retried_after_eintr_under_a_fast_timer_connects),
	TEST(shutdown_abandons_connect_in_progress),
	TEST(connect_on_connected_socket_gives_eisconn),
	TEST(unconnected_socket_reports_enotconn),
	TEST(accept4_applies_nonblock_and_cloexec),
	TEST(accept_does_not_inherit_listener_nonblock),
	TEST(nonblocking_accept_gives_eagain_until_client_arrives),
	TEST(getsockname_getpeername_agree_between_ends),
	/* data transfer calls */
	TEST(read_write_roundtrip),
	TEST(defer_accept_listener_serves_its_client),
	TEST(bind_without_port_then_connect_carries_bytes),
	TEST(send_recv_roundtrip),
	TEST(sendto_recvfrom_on_connected_stream),
	TEST(fastopen_sendto_connects_and_sends),
	TEST(fastopen_connect_option_carries_the_first_write),
	TEST(recvfrom_on_stream_leaves_address_empty),
	TEST(writev_readv_scatter_gather),
	TEST(sendmsg_recvmsg_with_iovecs),
	TEST(sendmmsg_recvmmsg_on_stream),
	TEST(recvmmsg_at_the_end_reads_every_message_empty),
	TEST(recvmmsg_blocking_waits_for_every_message),
	TEST(recvmsg_that_fails_leaves_the_header_alone),
	TEST(poll_for_rdhup_alone_sees_the_end_before_the_bytes_are_read),
	SLOW_TEST(sendfile_streams_file_into_socket, 10),
	SLOW_TEST(nonblocking_transfer_survives_partial_io, 15),
	SLOW_TEST(edge_triggered_epollout_returns_after_eagain, 15),
	SLOW_TEST(full_duplex_transfer_with_blocking_threads, 15),
	SLOW_TEST(large_sends_from_a_reused_buffer_arrive_intact, 15),
	SLOW_TEST(sndtimeo_ends_large_send_with_exact_count, 15),
	TEST(small_sndbuf_bounds_what_sends_queue),
	/* message flags */
	TEST(peek_does_not_consume),
	TEST(peek_fills_every_buffer_of_recvmsg),
	TEST(peek_waitall_waits_for_all),
	TEST(recv_waits_out_a_timeout_of_centuries),
	TEST(zero_length_reads_as_the_kernel_does),
	TEST(trunc_takes_bytes_without_a_buffer),
	TEST(empty_error_queue_leaves_the_stream),
	TEST(buffers_are_checked_as_the_kernel_does),
	TEST(buffers_past_the_address_space_fail_with_efault),
	TEST(waitall_blocks_until_full),
	TEST(receive_timestamp_comes_with_the_bytes_in_each_form),
	TEST(receive_timestamp_comes_before_the_inq_count),
	TEST(receive_timestamp_without_room_truncates),
	TEST(dontwait_gives_eagain_on_empty),
	TEST(nosignal_send_to_closed_peer_gives_epipe),
	TEST(send_to_closed_peer_raises_sigpipe),
	/* shutdown, close and errors */
	TEST(shutdown_wr_gives_peer_eof_but_keeps_reading),
	TEST(half_closed_peer_still_receives_a_long_reply),
	TEST(shutdown_rd_ends_reads_at_once),
	TEST(shutdown_rd_wakes_a_blocked_reader),
	TEST(send_after_shutdown_wr_gives_epipe),
	TEST(late_byte_after_shutdown_rdwr_resets_the_reader),
	TEST(late_byte_after_shutdown_rdwr_fails_the_senders_writes),
	TEST(late_byte_reset_reaches_the_senders_epoll),
	TEST(late_byte_then_close_fails_the_senders_writes),
	TEST(bytes_before_the_second_shutdown_are_still_read),
	TEST(eof_after_close_reads_zero_repeatedly),
	TEST(raw_close_syscall_ends_the_connection),
	TEST(raw_close_syscall_frees_the_number),
	TEST(linger_zero_close_resets_peer),
	TEST(edge_triggered_reader_gets_bytes_then_reset),
	TEST(reset_is_reported_once_then_reads_end),
	TEST(reset_read_leaves_the_read_side_shut),
	TEST(poll_without_events_reports_hangup_once_both_sides_shut),
	TEST(poll_for_input_reports_hangup_once_both_sides_shut),
	TEST(reset_reports_readable_to_poll),
	TEST(reset_reports_readable_to_epoll),
	TEST(blocking_read_wakes_with_eof_when_peer_closes),
	TEST(blocking_read_wakes_with_reset_when_peer_aborts),
	TEST(rcvtimeo_makes_recv_time_out),
	TEST(rcvtimeo_changed_between_reads_holds_for_the_next),
	TEST(syscall_fcntl_nonblock_holds_for_the_next_recv),
	TEST(sndtimeo_makes_send_time_out_on_full_socket),
	TEST(sndtimeo_changed_between_sends_holds_for_the_next),
	/* ioctl, fcntl and options */
	TEST(fionread_reports_queued_bytes),
	TEST(siocoutq_is_zero_only_once_the_peer_holds_every_byte),
	TEST(fcntl_toggles_nonblock),
	TEST(fionbio_turns_a_blocking_socket_non_blocking_and_back),
	TEST(tcp_nodelay_set_get),
	TEST(so_reuseaddr_set_get),
	TEST(so_keepalive_set_get),
	TEST(socket_options_identify_tcp_stream),
	/* epoll */
	TEST(epoll_level_triggered_repeats_until_drained),
	TEST(epoll_rdnorm_alone_reports_an_arrival),
	TEST(epoll_wrnorm_alone_reports_room),
	TEST(epoll_norms_come_with_in_and_out_when_asked),
	TEST(epoll_one_slot_reports_in_and_out_together),
	TEST(epoll_edge_triggered_reports_once_per_arrival),
	TEST(epoll_oneshot_reports_once_until_rearmed),
	TEST(epoll_oneshot_disarms_every_event_of_the_socket),
	TEST(epoll_ctl_mod_switches_in_to_out),
	TEST(epoll_ctl_del_stops_reports),
	TEST(epoll_ctl_through_a_dup_of_a_closed_fd_is_enoent),
	TEST(epoll_oneshot_rearmed_through_a_dup_of_the_set),
	TEST(epoll_data_u64_and_ptr_preserved),
	TEST(epoll_reports_one_event_per_ready_socket),
	TEST(epoll_fd_in_two_sets_reports_in_both),
	TEST(epoll_pwait_sigmask_lets_pending_signal_interrupt),
	TEST(epoll_pwait2_honours_timespec_timeout),
	TEST(epoll_reports_rdhup_on_peer_close_and_hup_after_both),
	TEST(epoll_reports_err_and_hup_after_reset),
	TEST(epoll_reports_listener_readable_on_pending_connection),
	TEST(epoll_wait_survives_close_from_other_thread),
	TEST(epoll_reported_data_wakes_a_later_poll),
	TEST(poll_reported_data_stays_readable_to_the_next_poll),
	TEST(poll_reported_data_wakes_a_later_epoll_wait),
	TEST(poll_reported_data_shows_in_a_set_made_after),
	TEST(poll_reported_data_stays_readable_to_select),
	TEST(poll_over_two_connections_misses_no_arrival),
	TEST(epoll_set_in_poll_stays_readable_while_data_is_unread),
	TEST(epoll_set_above_fd_4096_in_poll_stays_readable),
	TEST(select_watches_a_socket_above_fd_setsize),
	TEST(epoll_set_of_sets_in_poll_stays_readable),
	TEST(epoll_unread_data_wakes_every_waiter_of_the_set),
	TEST(epoll_set_in_poll_wakes_beside_an_epoll_waiter),
	TEST(epoll_waiter_beside_a_blocked_reader_leaves_it_the_data),
	TEST(close_beside_a_blocked_read_leaves_it_the_next_byte),
	TEST(close_beside_a_blocked_read_resets_if_it_leaves_bytes),
	TEST(epoll_mixes_tcp_pipe_and_unix_sockets),
	TEST(epoll_forgets_a_socket_closed_without_del),
	TEST(epoll_reports_rdnorm_of_a_pipe_beside_a_socket),
	/* poll and select */
	TEST(epoll_wakes_for_data_after_blocking_use),
	TEST(poll_wakes_for_data_after_blocking_use),
	TEST(poll_reports_pollin_and_pollout),
	TEST(poll_reports_rdhup_on_peer_close_and_hup_after_both),
	TEST(ppoll_sigmask_lets_pending_signal_interrupt),
	TEST(select_reports_read_and_write_sets),
	TEST(pselect_sigmask_lets_pending_signal_interrupt),
	/* descriptor duplication */
	TEST(dup_survives_close_of_original),
	TEST(dup_shares_file_status_flags),
	TEST(dup2_over_socket_closes_old_connection),
	TEST(dup3_sets_cloexec_and_rejects_same_fd),
	TEST(fcntl_dupfd_cloexec_sets_cloexec),
	/* processes */
	TEST(fork_child_writes_inherited_socket),
	TEST(fork_child_waits_in_inherited_epoll_set),
	TEST(fork_child_sets_o_nonblock_for_the_parent),
	SLOW_TEST(blocking_send_completes_while_fork_child_uses_socket, 15),
	SLOW_TEST(waitall_recv_completes_while_fork_child_uses_socket, 15),
	TEST(fork_child_opens_own_connection),
	TEST(fork_child_shares_connect_in_progress),
	TEST(fork_child_closing_connect_in_progress_ends_it),
	TEST(passed_fd_shares_connect_in_progress),
	TEST(pwritev2_and_preadv2_at_current_position_carry_bytes),
	TEST(preadv2_nowait_on_an_empty_socket_does_not_wait),
	TEST(splice_moves_socket_bytes_into_a_pipe),
	TEST(splice_moves_pipe_bytes_into_a_socket),
	TEST(splice_into_a_socket_follows_the_bytes_sent_before),
	TEST(forked_handler_keeps_connection_its_parent_closes),
	TEST(clone_child_serves_connection_its_parent_closes),
	TEST(vfork_child_exit_leaves_sockets_intact),
	TEST(vfork_child_execs_a_handler_on_the_socket),
	TEST(vfork_child_closing_sockets_leaves_them_open),
	/* threads */
	SLOW_TEST(concurrent_streams_on_distinct_connections, 15),
	SLOW_TEST(concurrent_small_sends_arrive_whole, 15),
	SLOW_TEST(small_sends_get_their_turn_beside_a_busy_sender, 15),
	/* sockets the shim must leave alone */
	TEST(unix_socketpair_stream_untouched),
	TEST(unix_socketpair_dgram_preserves_boundaries),
	TEST(udp_datagrams_still_work),
	/* IPv6 */
	TEST(ipv6_loopback_connection_transfers_data),
	TEST(ipv6_dual_stack_listener_accepts_ipv4_client),
	TEST(ipv6_v4_mapped_client_reaches_ipv4_listener),
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sockcheck [--server-addr A] [--client-addr B] "
		"[--only PATTERN] [--skip PATTERNS] [--list] [--timeout-scale "
		"N]\n"
		"  --server-addr A    listen on A (default 127.0.0.1)\n"
		"  --client-addr B    bind clients to B (default: A)\n"
		"  --only PATTERN     run tests whose name matches (fnmatch)\n"
		"  --skip PATTERNS    do not run tests matching any of these\n"
		"                     comma-separated patterns\n"
		"  --list             print test names and exit\n"
		"  --timeout-scale N  multiply all time limits by N "
		"(slow hosts, valgrind)\n");
}

/* The text the SIGALRM handler prints if test @name never returns. */
static void prepare_abort_msg(const char *name, int passed, int failed,
			      int skipped, int remaining)
{
	int n;

	n = snprintf(abort_msg, sizeof(abort_msg),
		     "FAIL %s: hung past its time limit, suite aborted\n"
		     "%d passed, %d failed",
		     name, passed, failed + 1 + remaining);
	if (skipped)
		n += snprintf(abort_msg + n, sizeof(abort_msg) - n,
			      ", %d skipped", skipped);
	n += snprintf(abort_msg + n, sizeof(abort_msg) - n, "\n");
	abort_len = n;
}

/* --skip: comma-separated fnmatch patterns of tests not to run at all. */
static const char *skip_patterns;

static bool selected_test(const char *only, const char *name)
{
	const char *p = skip_patterns;

	if (only && fnmatch(only, name, 0))
		return false;
	while (p && *p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char pattern[128];

		if (len < sizeof(pattern)) {
			memcpy(pattern, p, len);
			pattern[len] = '\0';
			if (!fnmatch(pattern, name, 0))
				return false;
		}
		p = comma ? comma + 1 : NULL;
	}
	return true;
}

static int parse_args(int argc, char **argv, const char **only, bool *list,
		      const char **pattern_client_port)
{
	const char *srv = "127.0.0.1", *cli = NULL;
	int i;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(arg, "--list")) {
			*list = true;
			continue;
		}
		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!val) {
			usage(stderr);
			return -1;
		}
		i++;
		if (!strcmp(arg, "--server-addr")) {
			srv = val;
		} else if (!strcmp(arg, "--client-addr")) {
			cli = val;
		} else if (!strcmp(arg, "--only")) {
			*only = val;
		} else if (!strcmp(arg, "--pattern-client")) {
			*pattern_client_port = val;
		} else if (!strcmp(arg, "--skip")) {
			skip_patterns = val;
		} else if (!strcmp(arg, "--timeout-scale")) {
			timeout_scale = strtoul(val, NULL, 10);
			if (timeout_scale < 1 || timeout_scale > 100) {
				fprintf(stderr, "bad --timeout-scale\n");
				return -1;
			}
		} else {
			usage(stderr);
			return -1;
		}
	}
	if (!cli)
		cli = srv;
	server_arg = srv;
	client_arg = cli;
	if (parse_addr(srv, &server_addr) || parse_addr(cli, &client_addr)) {
		fprintf(stderr, "sockcheck: bad address\n");
		return -1;
	}
	if (family(&server_addr) != family(&client_addr)) {
		fprintf(stderr, "sockcheck: addresses of different families\n");
		return -1;
	}
	return 0;
}

static void run_one(const struct test *tc, struct tctx *t)
{
	memset(t, 0, sizeof(*t));
	t->name = tc->name;
	alarm_fired = 0;
	alarm(tc->limit_s * timeout_scale);
	tc->fn(t);
	alarm(0);
	if (alarm_fired) {
		t->skipped = false;
		if (!t->failed)
			snprintf(t->reason, sizeof(t->reason), "timed out");
		else {
			char tmp[sizeof(t->reason)];

			snprintf(tmp, sizeof(tmp), "%s", t->reason);
			snprintf(t->reason, sizeof(t->reason),
				 "timed out (%.200s)", tmp);
		}
		t->failed = true;
	}
}

int main(int argc, char **argv)
{
	int passed = 0, failed = 0, skipped = 0, selected = 0, done = 0;
	const char *only = NULL, *pattern_client_port = NULL;
	bool list = false;
	int64_t start;
	struct tctx t;
	size_t i;

	self_path = argv[0];
	if (parse_args(argc, argv, &only, &list, &pattern_client_port))
		return 2;
	if (pattern_client_port)
		return pattern_client(pattern_client_port);
	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		if (!selected_test(only, tests[i].name))
			continue;
		selected++;
		if (list)
			printf("%s\n", tests[i].name);
	}
	if (list)
		return 0;
	if (!selected) {
		fprintf(stderr, "sockcheck: no test matches '%s'\n", only);
		return 2;
	}
	if (install_handler(SIGALRM, on_alarm) ||
	    install_handler(SIGPIPE, on_sigpipe) ||
	    install_handler(SIGUSR1, on_sigusr1)) {
		perror("sigaction");
		return 2;
	}
	probe_env();
	start = now_ms();

	for (i = 0; i < ARRAY_SIZE(tests); i++) {
		const struct test *tc = &tests[i];

		if (!selected_test(only, tc->name))
			continue;
		done++;
		if (now_ms() - start >
		    (int64_t)SUITE_BUDGET_S * 1000 * timeout_scale) {
			printf("FAIL %s: not run, suite time budget spent\n",
			       tc->name);
			fflush(stdout);
			failed++;
			continue;
		}
		prepare_abort_msg(tc->name, passed, failed, skipped,
				  selected - done);
		fflush(stdout);
		run_one(tc, &t);
		if (t.notes_len) {
			char *line = t.notes, *nl;

			while ((nl = strchr(line, '\n'))) {
				printf("# %s: %.*s\n", tc->name,
				       (int)(nl - line), line);
				line = nl + 1;
			}
		}
		if (t.failed) {
			printf("FAIL %s: %s\n", tc->name, t.reason);
			failed++;
		} else if (t.skipped) {
			printf("skip %s: %s\n", tc->name, t.reason);
			skipped++;
		} else {
			printf("ok %s\n", tc->name);
			passed++;
		}
		fflush(stdout);
	}
	printf("%d passed, %d failed", passed, failed);
	if (skipped)
		printf(", %d skipped", skipped);
	printf("\n");
	fflush(stdout);
	return failed ? 1 : 0;
}
