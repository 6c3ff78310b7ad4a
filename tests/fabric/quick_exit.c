// SPDX-License-Identifier: MIT
/*
 * A process that ends with _exit() or _Exit(), which run no exit handler,
 * while it holds a connection: the kernel closes its TCP socket, and the
 * peer reads every byte sent, then the end of the stream; or, if the
 * process left bytes unread, what came before the kernel's reset, then
 * ECONNRESET.  So must an upgraded connection end.  A signal handler that
 * calls _exit() while the process is in the middle of a send ends it too,
 * at once.
 *
 *     quick_exit ADDR STATS_JSON
 *
 * listens on ADDR, runs each client (this program, exec'd: a fresh image
 * may use RDMA whatever its parent did) and reads what it sends.  Prints
 * "ok NAME" or "FAIL NAME: why" per behaviour, and writes roceshim-stat's
 * JSON of this process (when ROCESHIM_STAT is set) to STATS_JSON.
 *
 *     quick_exit client ADDR PORT exit|Exit|unread|signal|forked MS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pair_check.h"

#define STREAM_BYTES  (300 << 10)
#define UNREAD_BYTES  4096
#define SIGNAL_ROUNDS 10
/* A client killed by its own handler is gone well within this. */
#define SIGNAL_ROUND_LIMIT_MS 3000

/* The byte at offset i of every client's stream. */
static uint8_t pattern_byte(uint64_t i)
{
	return (uint8_t)(i * 131 + 7);
}

static void fill_pattern(uint8_t *buf, size_t len, uint64_t from)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pattern_byte(from + i);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the client --------------------------------------------------------- */

static void on_alarm(int sig)
{
	(void)sig;
	_exit(0);
}

static int send_pattern(int fd, size_t len)
{
	uint8_t buf[16384];
	uint64_t off = 0;

	while (off < len) {
		size_t n = len - off < sizeof(buf) ? len - off : sizeof(buf);
		ssize_t sent;

		fill_pattern(buf, n, off);
		sent = send(fd, buf, n, 0);
		if (sent < 0 && errno == EINTR)
			continue;
		if (sent <= 0)
			return -1;
		off += (uint64_t)sent;
	}
	return 0;
}

/* Sends 1 KiB pieces of the pattern until its own signal handler exits. */
static void send_until_signal(int fd, long ms)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { .it_value = { ms / 1000, ms % 1000 * 1000 } };
	uint8_t buf[1024];
	uint64_t off = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (;;) {
		ssize_t sent;

		fill_pattern(buf, sizeof(buf), off);
		sent = send(fd, buf, sizeof(buf), 0);
		if (sent < 0 && errno == EINTR)
			continue;
		if (sent <= 0)
			_exit(2);
		/* A partial send: the rest goes with the next piece. */
		off += (uint64_t)sent;
		if ((size_t)sent < sizeof(buf))
			off -= off % sizeof(buf);
	}
}

/*
 * A daemon's start: the parent _exit()s as soon as it has forked, and the
 * child goes on with the connection once the parent is gone.
 */
static void hand_to_child(int fd)
{
	pid_t parent = getpid();
	int64_t give_up = now_ms() + 10000;

	if (fork())
		_exit(0);
	while (getppid() == parent && now_ms() < give_up)
		usleep(1000);
	_exit(send_pattern(fd, STREAM_BYTES) ? 1 : 0);
}

static int client(const char *addr, const char *port, const char *mode, long ms)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)atoi(port)) };
	struct pollfd pfd = { .events = POLLIN };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || inet_pton(AF_INET, addr, &sin.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		return 1;
	if (!strcmp(mode, "signal"))
		send_until_signal(fd, ms);
	if (!strcmp(mode, "forked"))
		hand_to_child(fd);
	if (!strcmp(mode, "unread")) {
		pfd.fd = fd;
		if (poll(&pfd, 1, 30000) != 1)
			return 1;
	}
	if (send_pattern(fd, STREAM_BYTES))
		return 1;
	if (!strcmp(mode, "Exit"))
		_Exit(0);
	_exit(0);
}

/* ---- the checks --------------------------------------------------------- */

static const char *self_path = "/proc/self/exe";

/* Runs the client of mode; its pid, or -1. */
static pid_t start_client(const char *addr, const char *mode, long ms)
{
	char port[16], ms_arg[16];
	pid_t pid;

	snprintf(port, sizeof(port), "%u", ntohs(check_server_addr.sin_port));
	snprintf(ms_arg, sizeof(ms_arg), "%ld", ms);
	pid = fork();
	if (pid == 0) {
		execl(self_path, "quick_exit", "client", addr, port, mode,
		      ms_arg, (char *)NULL);
		_exit(127);
	}
	return pid;
}

struct ending {
	uint64_t bytes; /* read, each as the pattern says */
	int err;	/* 0: EOF; else errno, or -1: a wrong byte */
	int status;	/* the client's wait status */
};

/* Reads fd to its end, checking every byte, then reaps pid. */
static void read_to_end(int fd, pid_t pid, struct ending *e)
{
	uint8_t buf[65536];
	ssize_t n, i;

	e->bytes = 0;
	e->err = 0;
	for (;;) {
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			e->err = n ? errno : 0;
			break;
		}
		for (i = 0; i < n; i++)
			if (buf[i] != pattern_byte(e->bytes + (uint64_t)i))
				break;
		if (i < n) {
			e->err = -1;
			break;
		}
		e->bytes += (uint64_t)n;
	}
	close(fd);
	waitpid(pid, &e->status, 0);
}

static bool run(const char *addr, const char *mode, long ms, struct ending *e)
{
	uint8_t unread[UNREAD_BYTES] = { 0 };
	pid_t pid = start_client(addr, mode, ms);
	int fd;

	if (pid < 0)
		return false;
	fd = check_accept();
	if (fd < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return false;
	}
	if (!strcmp(mode, "unread") &&
	    send(fd, unread, sizeof(unread), 0) != sizeof(unread)) {
		close(fd);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return false;
	}
	read_to_end(fd, pid, e);
	return true;
}

static void exit_gives_every_byte_then_eof(const char *addr, const char *mode,
					   const char *name)
{
	struct ending e;
	bool ran = run(addr, mode, 0, &e);

	check_result(name,
		     ran && e.bytes == STREAM_BYTES && !e.err &&
			     WIFEXITED(e.status) && !WEXITSTATUS(e.status),
		     "ran %d, %llu bytes, ended with %s, status %#x", ran,
		     (unsigned long long)e.bytes,
		     e.err ? strerror(e.err > 0 ? e.err : EILSEQ) : "EOF",
		     e.status);
}

static void exit_with_bytes_unread_resets(const char *addr)
{
	struct ending e;
	bool ran = run(addr, "unread", 0, &e);

	check_result("exit_with_bytes_unread_resets_after_what_came",
		     ran && e.err == ECONNRESET && e.bytes <= STREAM_BYTES,
		     "ran %d, %llu bytes, ended with %s", ran,
		     (unsigned long long)e.bytes,
		     e.err ? strerror(e.err > 0 ? e.err : EILSEQ) : "EOF");
}

/*
 * The signal comes at a different point of the sends each round: in the
 * middle of a send, of a wait for room, or between calls.
 */
static void exit_in_a_signal_handler_ends_at_once(const char *addr)
{
	int64_t slowest = 0, start;
	int round, bad = 0, wrong_byte = 0;
	struct ending e;

	for (round = 0; round < SIGNAL_ROUNDS; round++) {
		start = now_ms();
		if (!run(addr, "signal", 1 + round * 3, &e)) {
			bad++;
			continue;
		}
		if (now_ms() - start > slowest)
			slowest = now_ms() - start;
		if (e.err == -1)
			wrong_byte++;
		else if (e.err && e.err != ECONNRESET)
			bad++;
		else if (!WIFEXITED(e.status) || WEXITSTATUS(e.status))
			bad++;
	}
	check_result("exit_in_a_signal_handler_ends_within_the_limit",
		     !bad && slowest <= SIGNAL_ROUND_LIMIT_MS,
		     "%d of %d rounds failed, the slowest took %lld ms", bad,
		     SIGNAL_ROUNDS, (long long)slowest);
	check_result("exit_in_a_signal_handler_sends_only_the_stream",
		     !wrong_byte, "%d rounds read a wrong byte", wrong_byte);
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argv[4], atol(argv[5]));
	if (argc != 3) {
		fprintf(stderr, "usage: quick_exit ADDR STATS_JSON\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (check_listen(argv[1])) {
		printf("FAIL listen: %s\n", strerror(errno));
		return 1;
	}
	exit_gives_every_byte_then_eof(argv[1], "exit",
				       "_exit_gives_every_byte_then_eof");
	exit_gives_every_byte_then_eof(argv[1], "Exit",
				       "_Exit_gives_every_byte_then_eof");
	exit_gives_every_byte_then_eof(
		argv[1], "forked",
		"_exit_after_fork_leaves_the_connection_to_the_child");
	exit_with_bytes_unread_resets(argv[1]);
	exit_in_a_signal_handler_ends_at_once(argv[1]);
	check_save_stats(argv[2]);
	return check_failures ? 1 : 0;
}
