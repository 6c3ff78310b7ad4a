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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sockaddr_in server_addr = { .sin_family = AF_INET };
static int listener;
static int failures;

static void result(const char *name, int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("ok %s\n", name);
	} else {
		failures++;
		printf("FAIL %s: ", name);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
	}
	fflush(stdout);
}

static void *connect_one(void *arg)
{
	int *fd = arg;

	if (connect(*fd, (struct sockaddr *)&server_addr,
		    sizeof(server_addr))) {
		close(*fd);
		*fd = -1;
	}
	return NULL;
}

/* A connection to our own listener: *client and *server, or exits. */
static void pair(int *client, int *server)
{
	pthread_t t;

	/* Made here, before accept(): the numbers do not depend on timing. */
	*client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*client >= 0)
		pthread_create(&t, NULL, connect_one, client);
	*server =
		*client < 0 ? -1 : accept4(listener, NULL, NULL, SOCK_CLOEXEC);
	if (*client >= 0)
		pthread_join(t, NULL);
	if (*client < 0 || *server < 0) {
		printf("FAIL pair: %s\n", strerror(errno));
		exit(1);
	}
}

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

	pair(&client, &server);
	printf("fd client %d\nfd server %d\n", client, server);
	in = fdopen(server, "r");
	result("fdopen_gives_a_stream", in != NULL, "%s", strerror(errno));
	if (!in)
		return;
	result("fileno_is_the_socket", fileno(in) == server, "fileno %d",
	       fileno(in));
	if (write(client, line, strlen(line)) != (ssize_t)strlen(line))
		result("write_to_stream", 0, "%s", strerror(errno));
	result("fgets_reads_the_peers_bytes",
	       fgets(buf, sizeof(buf), in) && !strcmp(buf, line), "got '%s'",
	       buf);
	out = fdopen(fcntl(server, F_DUPFD_CLOEXEC, 0), "w");
	result("fdopen_of_a_dup_gives_a_stream", out != NULL, "%s",
	       strerror(errno));
	if (!out)
		return;
	fprintf(out, "%s %d\n", "fprintf", 42);
	result("fflush_sends", fflush(out) == 0, "%s", strerror(errno));
	memset(buf, 0, sizeof(buf));
	result("peer_reads_fprintf_bytes",
	       !read_all(client, buf, 11) && !memcmp(buf, "fprintf 42\n", 11),
	       "got '%s'", buf);
	result("fclose_succeeds", (fclose(in) | fclose(out)) == 0, "%s",
	       strerror(errno));
	result("fclose_closes_the_socket",
	       fcntl(server, F_GETFD) < 0 && errno == EBADF, "still open");
	/* The peer sees EOF only once both streams (both fds) closed. */
	result("peer_sees_eof", read(client, buf, 1) == 0, "%s",
	       strerror(errno));
	close(client);
}

static void dprintf_to_socket(void)
{
	char buf[5000];
	int client, server, n;

	pair(&client, &server);
	n = dprintf(client, "dprintf %s %d\n", "works", 7);
	result("dprintf_returns_its_length", n == 16, "returned %d", n);
	memset(buf, 0, sizeof(buf));
	result("peer_reads_dprintf_bytes",
	       !read_all(server, buf, 16) &&
		       !memcmp(buf, "dprintf works 7\n", 16),
	       "got '%s'", buf);
	/* Longer than any buffer of the wrapper's own. */
	n = dprintf(client, "%4999d", 1);
	result("long_dprintf_returns_its_length", n == 4999, "returned %d", n);
	result("peer_reads_long_dprintf",
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

	pair(&client, &server);
	fflush(stdout);
	saved = fcntl(1, F_DUPFD_CLOEXEC, 0);
	dup2(server, 1);
	printf("printf %d\n", 1);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	result("peer_reads_printf_on_dup2_stdout",
	       !read_all(client, buf, 9) && !memcmp(buf, "printf 1\n", 9),
	       "got '%s'", buf);
	/* The connection still carries both ways. */
	if (write(client, "back", 4) != 4)
		buf[0] = 0;
	result("socket_still_reads_after_stdout",
	       !read_all(server, buf, 4) && !memcmp(buf, "back", 4), "got '%s'",
	       buf);
	close(client);
	close(server);
}

/* A fork child that writes to the socket as its stdout, then exits. */
static void fork_child_stdout(void)
{
	char buf[64] = "";
	int client, server, status = -1;
	pid_t pid;

	pair(&client, &server);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(server, 1);
		printf("child %d\n", 2);
		fflush(stdout);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	result("fork_child_printf_reaches_peer",
	       !read_all(client, buf, 8) && !memcmp(buf, "child 2\n", 8),
	       "got '%s'", buf);
	result("fork_child_exits_0", WIFEXITED(status) && !WEXITSTATUS(status),
	       "status %d", status);
	close(client);
	close(server);
}

/* roceshim-stat's JSON of this process, into path. */
static void save_stats(const char *path)
{
	const char *stat = getenv("ROCESHIM_STAT");
	char cmd[512];

	if (!stat)
		return;
	snprintf(cmd, sizeof(cmd), "'%s' --json %d > '%s'", stat, (int)getpid(),
		 path);
	if (system(cmd))
		printf("FAIL stats: roceshim-stat failed\n");
}

/*
 * Connects to addr:port and leaves a line in a stream from fdopen() for
 * exit() to flush, as programs do.
 */
static int send_at_exit(const char *addr, const char *port)
{
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
	socklen_t len = sizeof(server_addr);
	int fd;

	if (argc == 4 && !strcmp(argv[1], "--send-at-exit"))
		return send_at_exit(argv[2], argv[3]);
	if (argc != 3 ||
	    inet_pton(AF_INET, argv[1], &server_addr.sin_addr) != 1) {
		fprintf(stderr, "usage: stdio_check ADDR STATS_JSON\n");
		return 2;
	}
	listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (bind(listener, (struct sockaddr *)&server_addr,
		 sizeof(server_addr)) ||
	    listen(listener, 8) ||
	    getsockname(listener, (struct sockaddr *)&server_addr, &len)) {
		perror("listener");
		return 1;
	}
	fdopen_stream();
	dprintf_to_socket();
	stdout_is_socket();
	fork_child_stdout();
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	printf("fd after %d\n", fd);
	save_stats(argv[2]);
	return failures ? 1 : 0;
}
