// SPDX-License-Identifier: MIT
/*
 * A burst of connects that overflows a listener's accept queue.  One
 * process, one poll() loop: a listener with backlog 16, CONNS
 * non-blocking connects to it, and no accept() for the first second.
 * Then the loop accepts whatever is queued, writes each client's index
 * once its connect is done, and reads the index on each accepted
 * connection.  The full queue makes the kernel drop the last ACK of some
 * handshakes, or answer SYNs with cookies and drop their ACK: each such
 * client's retransmitted bytes must get it in, as over TCP.
 *
 *     accept_burst SERVER_ADDR CLIENT_ADDR
 *
 * Prints "accepted A of N", "read R distinct D" and "seconds S", and exits
 * 0 when every client was accepted within LIMIT_S with its index read on
 * exactly one connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
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
/* Past kernel TCP's SYN and retransmission backoff (about 127 s). */
#define LIMIT_S 240
#define POLL_MS 200

static int client_fd[CONNS];
static bool client_sent[CONNS];
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

/* A client whose connect is done sends its index. */
static int client_ready(int i)
{
	uint32_t index = htonl(i);
	socklen_t len = sizeof(int);
	int err = 0;

	if (getsockopt(client_fd[i], SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		printf("client %d: %s\n", i, strerror(err ? err : errno));
		return -1;
	}
	if (send(client_fd[i], &index, sizeof(index), 0) != sizeof(index)) {
		printf("client %d: send: %s\n", i, strerror(errno));
		return -1;
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

static int run(int l)
{
	unsigned int accepted = 0, read = 0, distinct = 0;
	double start = seconds();
	int i, fd;

	sleep(ACCEPT_AFTER_S);
	while ((accepted < CONNS || read < CONNS) &&
	       seconds() - start < LIMIT_S) {
		pfd[0] = (struct pollfd){ .fd = l, .events = POLLIN };
		for (i = 0; i < CONNS; i++)
			pfd[i + 1] = (struct pollfd){
				.fd = client_sent[i] ? -1 : client_fd[i],
				.events = POLLOUT,
			};
		poll(pfd, CONNS + 1, POLL_MS);
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
	for (i = 0; i < CONNS; i++)
		distinct += seen[i] == 1;
	printf("accepted %u of %d\nread %u distinct %u\nseconds %.2f\n",
	       accepted, CONNS, read, distinct, seconds() - start);
	return accepted == CONNS && read == CONNS && distinct == CONNS ? 0 : 1;
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
