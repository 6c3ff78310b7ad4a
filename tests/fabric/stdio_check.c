// SPDX-License-Identifier: MIT
/*
 * libc's own I/O on connected sockets, as C programs do it: a stream from
 * fdopen() read with fgets() and written with fprintf(), dprintf(), and a
 * socket dup'd onto stdout and written with printf(), in this process and
 * in a fork child.  One process holds both ends of each connection (the
 * client on a thread), so with roceshim both are on RDMA.
 *
 *     stdio_check ADDR STATS_JSON
 *     stdio_check --send-at-exit ADDR PORT
 *
 * Prints "ok NAME" or "FAIL NAME: why" per behaviour, "fd NAME N" for the
 * numbers the program's sockets got, and writes roceshim-stat's JSON of
 * this process (when ROCESHIM_STAT is set) to STATS_JSON before it exits.
 * Every socket is close-on-exec, so that the popen() of roceshim-stat
 * moves none of them.  With --send-at-exit it connects to ADDR:PORT,
 * prints a line into a stream from fdopen() and exits without fflush():
 * exit() must flush it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pair_check.h"

/* Reads exactly len bytes (blocking), 0 on success. */
static int read_all(int fd, char *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static void fdopen_stream(void)
{
	static const char line[] = "a line written with write()\n";
	char buf[128] = "";
	int client, server;
	FILE *in, *out;

	check_pair(&client, &server);
	printf("fd client %d\nfd server %d\n", client, server);
	in = fdopen(server, "r");
	check_result("fdopen_gives_a_stream", in != NULL, "%s",
		     strerror(errno));
	if (!in)
		return;
	check_result("fileno_is_the_socket", fileno(in) == server, "fileno %d",
		     fileno(in));
	if (write(client, line, strlen(line)) != (ssize_t)strlen(line))
		check_result("write_to_stream", 0, "%s", strerror(errno));
	check_result("fgets_reads_the_peers_bytes",
		     fgets(buf, sizeof(buf), in) && !strcmp(buf, line),
		     "got '%s'", buf);
	out = fdopen(fcntl(server, F_DUPFD_CLOEXEC, 0), "w");
	check_result("fdopen_of_a_dup_gives_a_stream", out != NULL, "%s",
		     strerror(errno));
	if (!out)
		return;
	fprintf(out, "%s %d\n", "fprintf", 42);
	check_result("fflush_sends", fflush(out) == 0, "%s", strerror(errno));
	memset(buf, 0, sizeof(buf));
	check_result("peer_reads_fprintf_bytes",
		     !read_all(client, buf, 11) &&
			     !memcmp(buf, "fprintf 42\n", 11),
		     "got '%s'", buf);
	check_result("fclose_succeeds", (fclose(in) | fclose(out)) == 0, "%s",
		     strerror(errno));
	check_result("fclose_closes_the_socket",
		     fcntl(server, F_GETFD) < 0 && errno == EBADF,
		     "still open");
	/* The peer sees EOF only once both streams (both fds) closed. */
	check_result("peer_sees_eof", read(client, buf, 1) == 0, "%s",
		     strerror(errno));
	close(client);
}

static void dprintf_to_socket(void)
{
	char buf[5000];
	int client, server, n;

	check_pair(&client, &server);
	n = dprintf(client, "dprintf %s %d\n", "works", 7);
	check_result("dprintf_returns_its_length", n == 16, "returned %d", n);
	memset(buf, 0, sizeof(buf));
	check_result("peer_reads_dprintf_bytes",
		     !read_all(server, buf, 16) &&
			     !memcmp(buf, "dprintf works 7\n", 16),
		     "got '%s'", buf);
	/* Longer than any buffer of the wrapper's own. */
	n = dprintf(client, "%4999d", 1);
	check_result("long_dprintf_returns_its_length", n == 4999,
		     "returned %d", n);
	check_result("peer_reads_long_dprintf",
		     !read_all(server, buf, 4999) && buf[4998] == '1' &&
			     buf[0] == ' ',
		     "short or wrong");
	close(client);
	close(server);
}

/* printf() on a socket dup'd onto stdout, then stdout put back. */
static void stdout_is_socket(void)
{
	char buf[64] = "";
	int client, server, saved;

	check_pair(&client, &server);
	fflush(stdout);
	saved = fcntl(1, F_DUPFD_CLOEXEC, 0);
	dup2(server, 1);
	printf("printf %d\n", 1);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	check_result("peer_reads_printf_on_dup2_stdout",
		     !read_all(client, buf, 9) && !memcmp(buf, "printf 1\n", 9),
		     "got '%s'", buf);
	/* The connection still carries both ways. */
	if (write(client, "back", 4) != 4)
		buf[0] = 0;
	check_result("socket_still_reads_after_stdout",
		     !read_all(server, buf, 4) && !memcmp(buf, "back", 4),
		     "got '%s'", buf);
	close(client);
	close(server);
}

/* A fork child that writes to the socket as its stdout, then exits. */
static void fork_child_stdout(void)
{
	char buf[64] = "";
	int client, server, status = -1;
	pid_t pid;

	check_pair(&client, &server);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(server, 1);
		printf("child %d\n", 2);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	check_result("fork_child_printf_reaches_peer",
		     !read_all(client, buf, 8) && !memcmp(buf, "child 2\n", 8),
		     "got '%s'", buf);
	check_result("fork_child_exits_0",
		     WIFEXITED(status) && !WEXITSTATUS(status), "status %d",
		     status);
	close(client);
	close(server);
}

/*
 * Connects to addr:port and leaves a line in a stream from fdopen() for
 * exit() to flush, as programs do.
 */
static int send_at_exit(const char *addr, const char *port)
{
	struct sockaddr_in server_addr = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	FILE *out;

	server_addr.sin_port = htons((unsigned short)atoi(port));
	if (inet_pton(AF_INET, addr, &server_addr.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&server_addr, sizeof(server_addr))) {
		perror("connect");
		return 1;
	}
	out = fdopen(fd, "w");
	if (!out)
		return 1;
	fprintf(out, "flushed by exit\n");
	exit(0);
}

int main(int argc, char **argv)
{
	int fd;

	if (argc == 4 && !strcmp(argv[1], "--send-at-exit"))
		return send_at_exit(argv[2], argv[3]);
	if (argc != 3) {
		fprintf(stderr, "usage: stdio_check ADDR STATS_JSON\n");
		return 2;
	}
	if (check_listen(argv[1])) {
		perror("listener");
		return 1;
	}
	fdopen_stream();
	dprintf_to_socket();
	stdout_is_socket();
	fork_child_stdout();
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	printf("fd after %d\n", fd);
	check_save_stats(argv[2]);
	return check_failures ? 1 : 0;
}
