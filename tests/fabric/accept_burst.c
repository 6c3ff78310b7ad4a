// SPDX-License-Identifier: MIT
/*
 * A burst of connects that overflows a listener's accept queue.  One
 * process, one poll() loop: a listener with backlog 16, CONNS
 * non-blocking connects to it, and no accept() for the first second.
 * Then the loop accepts whatever is queued, writes each client's index
 * once its connect is done, and reads the index on each accepted
 * connection.  The full queue makes the kernel drop the last ACK of some
 * handshakes, or answer SYNs with cookies and drop their ACK: each such
 * client's retransmitted bytes get it in.  On a slow host the queue
 * drops the retransmissions of some again and again: their backoff
 * grows past minutes, and the kernel may give up on them (the client sees
 * a reset or a timeout).  No client may be left waiting with nothing in
 * flight: that is a hang, not TCP's backoff.
 *
 *     accept_burst SERVER_ADDR CLIENT_ADDR
 *
 * Prints "accepted A of N", "read R distinct D", "failed F", "retrying
 * T" and "seconds S", and exits 0 when after at most LIMIT_S every client
 * was read on exactly one accepted connection, saw its connection fail,
 * or still retransmits.  Otherwise it names the first clients left
 * waiting.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS	       500
#define BACKLOG	       16
#define ACCEPT_AFTER_S 1
#define LIMIT_S	       180
#define POLL_MS	       200
#define NAMED_WAITING  5

static int client_fd[CONNS];
static bool client_sent[CONNS];
static int client_error[CONNS];
static int server_fd[CONNS];
static unsigned int seen[CONNS];
static struct pollfd pfd[CONNS + 1];

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int address(const char *text, struct sockaddr_in *sin)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	if (inet_pton(AF_INET, text, &sin->sin_addr) != 1) {
		fprintf(stderr, "accept_burst: %s: not an IPv4 address\n",
			text);
		return -1;
	}
	return 0;
}

static int listen_on(struct sockaddr_in *at)
{
	socklen_t len = sizeof(*at);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (l < 0 || bind(l, (struct sockaddr *)at, sizeof(*at)) ||
	    listen(l, BACKLOG) || getsockname(l, (struct sockaddr *)at, &len)) {
		perror("accept_burst: listener");
		return -1;
	}
	return l;
}

static int connect_all(struct sockaddr_in *from, const struct sockaddr_in *to)
{
	int i, fd;

	for (i = 0; i < CONNS; i++) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fd < 0 ||
		    bind(fd, (struct sockaddr *)from, sizeof(*from)) ||
		    (connect(fd, (const struct sockaddr *)to, sizeof(*to)) &&
		     errno != EINPROGRESS)) {
			perror("accept_burst: client");
			return -1;
		}
		client_fd[i] = fd;
	}
	return 0;
}

/*
 * A client whose connect is done sends its index; one whose connect or
 * connection failed records the error, as its program would see it.
 */
static int client_ready(int i)
{
	uint32_t index = htonl(i);
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(client_fd[i], SOL_SOCKET, SO_ERROR, &err, &len)) {
		printf("client %d: SO_ERROR: %s\n", i, strerror(errno));
		return -1;
	}
	if (err) {
		client_error[i] = err;
		return 0;
	}
	if (client_sent[i])
		return 0;
	if (send(client_fd[i], &index, sizeof(index), 0) != sizeof(index)) {
		client_error[i] = errno;
		return 0;
	}
	client_sent[i] = true;
	return 0;
}

/* An accepted connection's index, once it came; 0 while it has not. */
static int server_read(int j, unsigned int *read)
{
	uint32_t index;
	ssize_t n = recv(server_fd[j], &index, sizeof(index), MSG_DONTWAIT);

	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n != sizeof(index) || ntohl(index) >= CONNS) {
		printf("accepted connection %d: %zd bytes (%s)\n", j, n,
		       n < 0 ? strerror(errno) : "a bad index");
		return -1;
	}
	seen[ntohl(index)]++;
	(*read)++;
	close(server_fd[j]);
	server_fd[j] = -1;
	return 0;
}

/* Read on one accepted connection, or told of its failure. */
static bool accounted(int i)
{
	return seen[i] == 1 || (seen[i] == 0 && client_error[i]);
}

static unsigned int count_accounted(void)
{
	unsigned int n = 0;
	int i;

	for (i = 0; i < CONNS; i++)
		n += accounted(i);
	return n;
}

static void client_tcp_info(int i, struct tcp_info *info)
{
	socklen_t len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	getsockopt(client_fd[i], IPPROTO_TCP, TCP_INFO, info, &len);
}

/* The client's kernel connection still retransmits, in TCP's backoff. */
static bool retrying(int i)
{
	struct tcp_info info;

	client_tcp_info(i, &info);
	return info.tcpi_retransmits || info.tcpi_backoff || info.tcpi_unacked;
}

/* Prints the first clients left waiting with nothing in flight. */
static unsigned int name_waiting(void)
{
	unsigned int waiting = 0;
	struct tcp_info info;
	int i;

	for (i = 0; i < CONNS; i++) {
		if (accounted(i) || retrying(i))
			continue;
		if (waiting++ >= NAMED_WAITING)
			continue;
		client_tcp_info(i, &info);
		printf("client %d waits: %s, seen %u times, tcp state %u, "
		       "unacked %u\n",
		       i, client_sent[i] ? "sent" : "connecting", seen[i],
		       info.tcpi_state, info.tcpi_unacked);
	}
	return waiting;
}

static void poll_clients(int l)
{
	int i;

	pfd[0] = (struct pollfd){ .fd = l, .events = POLLIN };
	for (i = 0; i < CONNS; i++)
		pfd[i + 1] = (struct pollfd){
			.fd = client_error[i] ? -1 : client_fd[i],
			.events = client_sent[i] ? 0 : POLLOUT,
		};
	poll(pfd, CONNS + 1, POLL_MS);
}

static int run(int l)
{
	unsigned int accepted = 0, read = 0, distinct = 0, failed = 0;
	unsigned int retried = 0;
	double start = seconds();
	int i, fd;

	sleep(ACCEPT_AFTER_S);
	while (count_accounted() < CONNS && seconds() - start < LIMIT_S) {
		poll_clients(l);
		for (i = 0; i < CONNS; i++)
			if (pfd[i + 1].revents && client_ready(i))
				return 1;
		while (accepted < CONNS &&
		       (fd = accept4(l, NULL, NULL, SOCK_NONBLOCK)) >= 0)
			server_fd[accepted++] = fd;
		for (i = 0; i < (int)accepted; i++)
			if (server_fd[i] >= 0 && server_read(i, &read))
				return 1;
	}
	for (i = 0; i < CONNS; i++) {
		distinct += seen[i] == 1;
		failed += seen[i] == 0 && client_error[i];
		retried += !accounted(i) && retrying(i);
	}
	printf("accepted %u of %d\nread %u distinct %u\nfailed %u\n"
	       "retrying %u\nseconds %.2f\n",
	       accepted, CONNS, read, distinct, failed, retried,
	       seconds() - start);
	return name_waiting() || read != distinct ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in server, client;
	int l;

	if (argc != 3) {
		fprintf(stderr,
			"usage: accept_burst SERVER_ADDR CLIENT_ADDR\n");
		return 2;
	}
	if (address(argv[1], &server) || address(argv[2], &client))
		return 2;
	l = listen_on(&server);
	if (l < 0 || connect_all(&client, &server))
		return 1;
	return run(l);
}
