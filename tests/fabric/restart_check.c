// SPDX-License-Identifier: MIT
/*
 * Blocking socket calls interrupted by a signal handler, as kernel TCP
 * treats them (signal(7)): restarted when the handler has SA_RESTART and
 * the socket has no timeout for that direction, else failing with EINTR.
 * One process holds both ends of each connection (the peer on a thread
 * that blocks SIGALRM), so with roceshim both are on RDMA.  An interval
 * timer raises SIGALRM every 20 ms while the main thread waits.
 *
 *     restart_check ADDR STATS_JSON
 *
 * Prints "ok NAME" or "FAIL NAME: why" per behaviour, and writes
 * roceshim-stat's JSON of this process (when ROCESHIM_STAT is set) to
 * STATS_JSON before it exits.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "pair_check.h"

#define CHUNK	  (1 << 20)
#define CHUNKS	  8
#define PEER_WAIT 500000 /* us the peer waits before it answers */
#define TICK_US	  20000
/* A single signal, well inside the peer's wait even on a slow guest. */
#define ONE_SHOT_US 200000
/*
 * Into a connect whose SYN a full accept queue drops: past the handshake,
 * between the SYN's first retransmission (1 s) and its second (3 s).
 */
#define QUEUE_FULL_US 1500000
/* A socket timeout set while such a connect goes on. */
#define TIMEOUT_MS 300

static volatile sig_atomic_t signals;

static void on_alarm(int sig)
{
	(void)sig;
	signals++;
}

static void handle_alarm(int flags)
{
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = flags };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
}

/* SIGALRM every us microseconds from now on (once: only once); 0: none. */
static void ticking(long us, bool once)
{
	struct timeval every = { us / 1000000, us % 1000000 };
	struct itimerval it = { once ? (struct timeval){ 0 } : every, every };

	if (us)
		signals = 0;
	setitimer(ITIMER_REAL, &it, NULL);
}

static void *accept_one(void *arg)
{
	*(int *)arg = check_accept();
	return NULL;
}

static void *answer_later(void *arg)
{
	usleep(PEER_WAIT);
	if (write(*(int *)arg, "hello", 5) != 5)
		perror("answer_later");
	return NULL;
}

static void *read_later(void *arg)
{
	static char buf[CHUNK];
	long total = 0;
	ssize_t n;

	usleep(PEER_WAIT);
	while (total < (long)CHUNK * CHUNKS &&
	       (n = read(*(int *)arg, buf, sizeof(buf))) > 0)
		total += n;
	return (void *)total;
}

/* recv() on client while the peer answers later: bytes, or -errno. */
static long recv_while_ticking(int client, int server, bool once)
{
	char buf[16];
	pthread_t t;
	ssize_t n;
	int err;

	check_thread(&t, answer_later, &server);
	ticking(once ? ONE_SHOT_US : TICK_US, once);
	n = recv(client, buf, sizeof(buf), 0);
	err = errno;
	ticking(0, false);
	pthread_join(t, NULL);
	if (n < 0 && recv(client, buf, sizeof(buf), 0) != 5)
		printf("FAIL answer_lost\n");
	return n < 0 ? -err : n;
}

static void recv_restarted_by_sa_restart(void)
{
	int client, server;
	long n;

	check_pair(&client, &server);
	handle_alarm(SA_RESTART);
	n = recv_while_ticking(client, server, false);
	check_result(__func__, n == 5 && signals > 0,
		     "recv %ld after %d signals", n, (int)signals);
	close(client);
	close(server);
}

static void recv_interrupted_without_sa_restart(void)
{
	int client, server;
	long n;

	check_pair(&client, &server);
	handle_alarm(0);
	n = recv_while_ticking(client, server, false);
	check_result(__func__, n == -EINTR, "recv %ld", n);
	close(client);
	close(server);
}

static void on_usr2(int sig)
{
	(void)sig;
}

/*
 * A one-shot handler (SA_RESETHAND) without SA_RESTART: EINTR, although
 * the disposition is back to SIG_DFL by the time the call returns, and
 * another signal's handler has SA_RESTART.
 */
static void recv_interrupted_by_one_shot_handler(void)
{
	struct sigaction usr2 = { .sa_handler = on_usr2,
				  .sa_flags = SA_RESTART };
	int client, server;
	long n;

	check_pair(&client, &server);
	sigemptyset(&usr2.sa_mask);
	sigaction(SIGUSR2, &usr2, NULL);
	handle_alarm(SA_RESETHAND);
	n = recv_while_ticking(client, server, true);
	signal(SIGUSR2, SIG_DFL);
	check_result(__func__, n == -EINTR && signals == 1, "recv %ld", n);
	close(client);
	close(server);
}

static int handler_fd = -1;

/* Sends a byte on handler_fd with errno set to EDOM, and restores errno. */
static void on_alarm_send(int sig)
{
	int saved = errno;

	(void)sig;
	signals++;
	errno = EDOM;
	if (send(handler_fd, "x", 1, MSG_DONTWAIT) != 1)
		signals = -1000;
	errno = saved;
}

/*
 * A recv() that succeeds leaves errno as it found it, even when a signal
 * handler in the middle of it sends on another connection with errno set
 * to something else.
 */
static void recv_keeps_errno_through_handler_send(void)
{
	struct sigaction sa = { .sa_handler = on_alarm_send,
				.sa_flags = SA_RESTART };
	int client, server, other, other_peer, err;
	char buf[16];
	pthread_t t;
	ssize_t n;

	check_pair(&client, &server);
	check_pair(&other, &other_peer);
	handler_fd = other;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	check_thread(&t, answer_later, &server);
	ticking(ONE_SHOT_US, true);
	errno = 0;
	n = recv(client, buf, sizeof(buf), 0);
	err = errno;
	ticking(0, false);
	pthread_join(t, NULL);
	check_result(__func__,
		     n == 5 && err == 0 && signals == 1 &&
			     recv(other_peer, buf, 1, 0) == 1,
		     "recv %zd, errno %d after %d signals", n, err,
		     (int)signals);
	close(client);
	close(server);
	close(other);
	close(other_peer);
}

static void recv_interrupted_with_rcvtimeo(void)
{
	struct timeval tv = { .tv_sec = 10 };
	int client, server;
	long n;

	check_pair(&client, &server);
	setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	handle_alarm(SA_RESTART);
	n = recv_while_ticking(client, server, false);
	check_result(__func__, n == -EINTR, "recv %ld", n);
	close(client);
	close(server);
}

static void send_restarted_by_sa_restart(void)
{
	static char buf[CHUNK];
	long sent = 0, got, all = (long)CHUNK * CHUNKS;
	int client, server, eintr = 0;
	pthread_t t;
	ssize_t n;
	void *ret;

	check_pair(&client, &server);
	handle_alarm(SA_RESTART);
	check_thread(&t, read_later, &server);
	ticking(TICK_US, false);
	/* A short send is TCP's answer too (a signal after some bytes). */
	while (sent < all) {
		n = send(client, buf, all - sent < CHUNK ? all - sent : CHUNK,
			 0);
		if (n >= 0)
			sent += n;
		else if (errno == EINTR)
			eintr++;
		else
			break;
	}
	ticking(0, false);
	pthread_join(t, &ret);
	got = (long)ret;
	check_result(__func__,
		     !eintr && sent == all && got == all && signals > 0,
		     "%d EINTR, sent %ld, read %ld after %d signals", eintr,
		     sent, got, (int)signals);
	close(client);
	close(server);
}

/*
 * A blocking connect under a fast timer: with roceshim its handshake
 * waits through the signals, as the kernel restarts the connect, and the
 * connection is on RDMA (the stats say).
 */
static void connect_restarted_by_sa_restart(void)
{
	int client, server = -1, ret, err;
	pthread_t t;

	client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	check_thread(&t, accept_one, &server);
	handle_alarm(SA_RESTART);
	ticking(200, false);
	ret = connect(client, (struct sockaddr *)&check_server_addr,
		      sizeof(check_server_addr));
	err = errno;
	ticking(0, false);
	pthread_join(t, NULL);
	check_result(__func__, !ret && server >= 0, "connect: %s",
		     strerror(err));
	close(client);
	close(server);
}

/*
 * A blocking connect under a fast timer whose handler has no SA_RESTART:
 * it connects, or fails with EINTR and goes on in the background, as the
 * kernel's does; either way the connection then works.
 */
static void connect_goes_on_after_eintr(void)
{
	int client, server = -1, ret, err, so_error = 0;
	struct pollfd pfd = { .events = POLLOUT };
	socklen_t len = sizeof(so_error);
	bool interrupted;
	pthread_t t;
	char byte;

	client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	check_thread(&t, accept_one, &server);
	handle_alarm(0);
	ticking(200, false);
	ret = connect(client, (struct sockaddr *)&check_server_addr,
		      sizeof(check_server_addr));
	err = errno;
	ticking(0, false);
	interrupted = ret && err == EINTR;
	if (interrupted) {
		pfd.fd = client;
		poll(&pfd, 1, 5000);
		getsockopt(client, SOL_SOCKET, SO_ERROR, &so_error, &len);
		ret = so_error ? -1 : 0;
		err = so_error;
	}
	pthread_join(t, NULL);
	printf("note connect interrupted: %s\n", interrupted ? "yes" : "no");
	check_result(__func__,
		     !ret && server >= 0 && write(client, "x", 1) == 1 &&
			     read(server, &byte, 1) == 1,
		     "connect: %s", strerror(err));
	close(client);
	close(server);
}

/* A listener beside the check's, on its address, with no backlog. */
static int listen_no_backlog(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*addr = check_server_addr;
	addr->sin_port = 0;
	if (fd < 0 || bind(fd, (struct sockaddr *)addr, len) || listen(fd, 0) ||
	    getsockname(fd, (struct sockaddr *)addr, &len)) {
		perror("listen_no_backlog");
		exit(1);
	}
	return fd;
}

/* fd is readable within ms, then one byte is read: the byte, or -1. */
static int read_byte(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char byte;

	if (poll(&pfd, 1, ms) != 1 || read(fd, &byte, 1) != 1)
		return -1;
	return byte;
}

/*
 * A blocking connect whose SYN the listener drops (its accept queue is
 * full), so that a signal without SA_RESTART interrupts it in the
 * kernel's own connect: EINTR, and the kernel goes on with it.  Then
 * then_what(client, its peer) runs, after the listener made room
 * (room_first) or before: with the queue still full, the connect goes
 * on until the SYN's next retransmission (3 s).  Once there is room it
 * connects, and the connection carries both ways.  Over RDMA the
 * handshake is over by then, and the connection goes on with it.
 */
static void interrupted_in_tcp(const char *name,
			       ssize_t (*then_what)(int,
						    const struct sockaddr_in *),
			       bool room_first)
{
	int listener, filler, filler_end, client, server = -1, ret, err;
	int so_error = -1;
	ssize_t then;
	socklen_t len = sizeof(so_error);
	struct sockaddr_in addr;
	bool ok;

	listener = listen_no_backlog(&addr);
	filler = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (connect(filler, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("filler");
		exit(1);
	}
	client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	handle_alarm(0);
	ticking(QUEUE_FULL_US, true);
	ret = connect(client, (struct sockaddr *)&addr, sizeof(addr));
	err = errno;
	ticking(0, false);
	if (room_first)
		filler_end = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	then = ret && err == EINTR ? then_what(client, &addr) : -1;
	if (!room_first)
		filler_end = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	getsockopt(client, SOL_SOCKET, SO_ERROR, &so_error, &len);
	if (then >= 0 && !so_error)
		server = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	ok = server >= 0 && (then || write(client, "x", 1) == 1) &&
	     read_byte(server, 5000) == 'x' && write(server, "y", 1) == 1 &&
	     read_byte(client, 5000) == 'y';
	check_result(name, ok, "connect %d (%s), then %zd, SO_ERROR %d", ret,
		     strerror(err), then, so_error);
	close(client);
	close(server);
	close(filler_end);
	close(filler);
	close(listener);
}

/* A blocking write waits for the connect, as TCP's does: 1. */
static ssize_t write_byte(int client, const struct sockaddr_in *peer)
{
	(void)peer;
	return write(client, "x", 1);
}

/* connect() again waits for it, and returns 0 (__inet_stream_connect()). */
static ssize_t connect_again(int client, const struct sockaddr_in *peer)
{
	return connect(client, (const struct sockaddr *)peer, sizeof(*peer));
}

static void set_timeout(int fd, int name, long ms)
{
	struct timeval tv = { ms / 1000, ms % 1000 * 1000 };

	setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv));
}

static long ms_since(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start->tv_sec) * 1000 +
	       (now.tv_nsec - start->tv_nsec) / 1000000;
}

/*
 * call(client, peer) under a socket timeout (name) of timeout_ms while the
 * connect goes on, with a signal after ONE_SHOT_US or none: it fails with
 * err, after that timeout (or at the signal) and well before the connect
 * ends.  The kernel waits with sock_sndtimeo() or sock_rcvtimeo(), and a
 * signal ends a wait that has a timeout even with SA_RESTART
 * (sock_intr_errno()).  0, or -1.
 */
static ssize_t ends_early(int client, const struct sockaddr_in *peer, int name,
			  long timeout_ms, bool signal, int err,
			  ssize_t (*call)(int, const struct sockaddr_in *))
{
	long at_least = signal ? 0 : timeout_ms - 20;
	struct timespec start;
	ssize_t ret;
	long ms;
	int got;

	set_timeout(client, name, timeout_ms);
	if (signal) {
		handle_alarm(SA_RESTART);
		ticking(ONE_SHOT_US, true);
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	ret = call(client, peer);
	got = errno;
	ms = ms_since(&start);
	ticking(0, false);
	set_timeout(client, name, 0);
	if (ret == -1 && got == err && ms >= at_least && ms < 1000)
		return 0;
	printf("note %zd (%s) after %ld ms\n", ret, strerror(got), ms);
	return -1;
}

static ssize_t write_interrupted_with_sndtimeo(int client,
					       const struct sockaddr_in *peer)
{
	return ends_early(client, peer, SO_SNDTIMEO, 2000, true, EINTR,
			  write_byte);
}

static ssize_t read_byte_now(int client, const struct sockaddr_in *peer)
{
	char byte;

	(void)peer;
	return read(client, &byte, 1);
}

static ssize_t read_times_out(int client, const struct sockaddr_in *peer)
{
	return ends_early(client, peer, SO_RCVTIMEO, TIMEOUT_MS, false, EAGAIN,
			  read_byte_now);
}

static ssize_t write_times_out(int client, const struct sockaddr_in *peer)
{
	return ends_early(client, peer, SO_SNDTIMEO, TIMEOUT_MS, false, EAGAIN,
			  write_byte);
}

static ssize_t connect_again_times_out(int client,
				       const struct sockaddr_in *peer)
{
	return ends_early(client, peer, SO_SNDTIMEO, TIMEOUT_MS, false,
			  EALREADY, connect_again);
}

static void write_after_eintr_in_tcp_waits(void)
{
	interrupted_in_tcp(__func__, write_byte, true);
}

static void connect_again_after_eintr_in_tcp_waits(void)
{
	interrupted_in_tcp(__func__, connect_again, true);
}

static void read_while_connecting_ends_at_rcvtimeo(void)
{
	interrupted_in_tcp(__func__, read_times_out, false);
}

static void write_while_connecting_ends_at_sndtimeo(void)
{
	interrupted_in_tcp(__func__, write_times_out, false);
}

static void connect_again_while_connecting_ends_at_sndtimeo(void)
{
	interrupted_in_tcp(__func__, connect_again_times_out, false);
}

static void write_while_connecting_with_sndtimeo_ends_at_signal(void)
{
	interrupted_in_tcp(__func__, write_interrupted_with_sndtimeo, false);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s ADDR STATS_JSON\n", argv[0]);
		return 2;
	}
	if (check_listen(argv[1])) {
		perror("listener");
		return 1;
	}
	recv_restarted_by_sa_restart();
	recv_interrupted_without_sa_restart();
	recv_interrupted_with_rcvtimeo();
	recv_interrupted_by_one_shot_handler();
	recv_keeps_errno_through_handler_send();
	send_restarted_by_sa_restart();
	connect_restarted_by_sa_restart();
	connect_goes_on_after_eintr();
	write_after_eintr_in_tcp_waits();
	connect_again_after_eintr_in_tcp_waits();
	read_while_connecting_ends_at_rcvtimeo();
	write_while_connecting_ends_at_sndtimeo();
	connect_again_while_connecting_ends_at_sndtimeo();
	write_while_connecting_with_sndtimeo_ends_at_signal();
	check_save_stats(argv[2]);
	return check_failures ? 1 : 0;
}
