// SPDX-License-Identifier: MIT
/*
 * The peer's side of roceshim-stat --check.  The rdma_cm route is asked
 * for directly.  Whether a roceshim listener answers is asked the only way
 * that is sure to agree with a program: one real connection, made by a
 * child of this tool with the library preloaded, whose own stats then say
 * which path it took and why.  The peer's program sees a connection that
 * sends nothing and closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <roceshim/stats.h>

#include "check.h"
#include "check_impl.h"
#include "segment.h"

/* rdma_cm looks for an unresolved neighbour again only on a timeout. */
#define ROUTE_FIRST_ATTEMPT_MS 250
#define ROUTE_DEADLINE_MS      4000

/* Beyond the handshake's own timeout: a TCP connect's SYN retries. */
#define PROBE_SLACK_MS 20000

const char *check_reason_advice(unsigned int reason)
{
	switch (reason) {
	case ROCESHIM_REASON_DISABLED:
		return "the RDMA path is off (ROCESHIM_RDMA=0)";
	case ROCESHIM_REASON_EXCLUDED:
		return "ROCESHIM_INCLUDE/ROCESHIM_EXCLUDE leave this address "
		       "out";
	case ROCESHIM_REASON_NO_DEVICE:
		return "this host has no usable RDMA device";
	case ROCESHIM_REASON_NO_ROUTE:
		return "no RDMA device is on the route to the peer: the "
		       "address it leaves from has no RoCEv2 GID, or the "
		       "peer's neighbour entry does not resolve";
	case ROCESHIM_REASON_PEER_REJECTED:
		return "the peer's RDMA device answered, but no roceshim "
		       "listener is on that port: its server is not "
		       "preloaded with roceshim (or runs a version that "
		       "speaks another handshake)";
	case ROCESHIM_REASON_TIMEOUT:
		return "the RDMA handshake got no answer: the peer has no "
		       "RDMA device on this network, or RoCEv2 packets (UDP "
		       "port 4791) are dropped on the way";
	case ROCESHIM_REASON_NEGATIVE_CACHE:
		return "the peer failed recently and is not tried again "
		       "until ROCESHIM_NEGATIVE_CACHE_S has passed";
	case ROCESHIM_REASON_RESOURCE:
		return "a queue pair, completion queue or memory "
		       "registration failed on one of the two hosts";
	case ROCESHIM_REASON_NO_RDMA_LIBS:
		return "libibverbs or librdmacm cannot be loaded";
	case ROCESHIM_REASON_FD_LIMIT:
		return "a process is at its RLIMIT_NOFILE";
	case ROCESHIM_REASON_MEMLOCK_LIMIT:
		return "the rings would pass RLIMIT_MEMLOCK on one of the "
		       "two hosts";
	case ROCESHIM_REASON_PEER_TCP:
		return "the peer did not offer RDMA";
	default:
		return "the RDMA path is not available here";
	}
}

/* Splits HOST, HOST:PORT, [IPV6] or [IPV6]:PORT; port "" when absent. */
static int split_peer(const char *peer, char *host, size_t hsize, char *port,
		      size_t psize)
{
	const char *colon, *end;
	size_t len;

	port[0] = '\0';
	if (peer[0] == '[') {
		end = strchr(peer, ']');
		if (!end || (end[1] && end[1] != ':'))
			return -EINVAL;
		len = (size_t)(end - peer - 1);
		colon = end[1] ? end + 1 : NULL;
		peer++;
	} else {
		colon = strchr(peer, ':');
		if (colon && strchr(colon + 1, ':'))
			colon = NULL; /* a bare IPv6 address */
		len = colon ? (size_t)(colon - peer) : strlen(peer);
	}
	if (!len || len >= hsize)
		return -EINVAL;
	memcpy(host, peer, len);
	host[len] = '\0';
	if (colon) {
		char *tail;
		long p = strtol(colon + 1, &tail, 10);

		if (!colon[1] || *tail || p <= 0 || p > 65535 ||
		    strlen(colon + 1) >= psize)
			return -EINVAL;
		strcpy(port, colon + 1);
	}
	return 0;
}

bool check_peer_syntax(const char *peer)
{
	char host[256], port[8];

	return !split_peer(peer, host, sizeof(host), port, sizeof(port));
}

/* Waits for the next event of id's channel; its type, or -1. */
static int next_event(struct check *c, struct rdma_event_channel *ch,
		      int *status)
{
	struct rdma_cm_event *ev;
	int type;

	if (c->libs.get_cm_event(ch, &ev))
		return -1;
	type = ev->event;
	*status = ev->status;
	c->libs.ack_cm_event(ev);
	return type;
}

static void check_route(struct check *c, const char *name, struct sockaddr *dst)
{
	struct rdma_event_channel *ch = c->libs.create_event_channel();
	struct rdma_cm_id *id = NULL;
	int attempt = ROUTE_FIRST_ATTEMPT_MS, spent = 0, type = -1;
	int status = 0;

	if (!ch || c->libs.create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		check_say(c, VERDICT_FAIL, "rdma_cm: %s", strerror(errno));
		goto out;
	}
	while (spent < ROUTE_DEADLINE_MS) {
		if (c->libs.resolve_addr(id, NULL, dst, attempt))
			break;
		type = next_event(c, ch, &status);
		spent += attempt;
		if (type != RDMA_CM_EVENT_ADDR_ERROR || status != -ETIMEDOUT)
			break;
		attempt *= 2;
	}
	if (type == RDMA_CM_EVENT_ADDR_RESOLVED &&
	    !c->libs.resolve_route(id, ROUTE_DEADLINE_MS))
		type = next_event(c, ch, &status);
	if (type == RDMA_CM_EVENT_ROUTE_RESOLVED && id->verbs) {
		check_say(c, VERDICT_OK, "rdma_cm route to %s: %s port %u",
			  name, id->verbs->device->name, id->port_num);
		goto out;
	}
	check_say(c, VERDICT_FAIL,
		  "rdma_cm finds no RDMA route to %s (%s, status %d): "
		  "connections to it stay on TCP (no_route)",
		  name, type < 0 ? strerror(errno) : c->libs.event_str(type),
		  status);
out:
	if (id)
		c->libs.destroy_id(id);
	if (ch)
		c->libs.destroy_event_channel(ch);
}

static bool library_path(char *buf, size_t size)
{
	const char *lib = getenv("ROCESHIM_LIB");

	snprintf(buf, size, "%s",
		 lib && lib[0] ? lib : ROCESHIM_LIBDIR "/libroceshim.so");
	return !access(buf, R_OK);
}

/* Starts the probe child; its stdin and stdout are pipes to us. */
static pid_t start_probe(const char *lib, const char *host, const char *port,
			 int *to_child, int *from_child)
{
	int in[2], out[2];
	pid_t pid;

	if (pipe2(in, O_CLOEXEC))
		return -1;
	if (pipe2(out, O_CLOEXEC)) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		char preload[4096];
		int n = snprintf(preload, sizeof(preload), "%s%s%s",
				 old ? old : "", old && old[0] ? " " : "", lib);

		if (n < 0 || (size_t)n >= sizeof(preload))
			_exit(127);
		setenv("LD_PRELOAD", preload, 1);
		setenv("ROCESHIM_STATS", "1", 1);
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(127);
		execl("/proc/self/exe", "roceshim-stat", "--check-probe", host,
		      port, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (pid < 0) {
		close(in[1]);
		close(out[0]);
		return -1;
	}
	*to_child = in[1];
	*from_child = out[0];
	return pid;
}

/* The child's one line, or "" when it said nothing in time. */
static void read_answer(int fd, int timeout_ms, char *buf, size_t size)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t got = 0;
	ssize_t n;

	buf[0] = '\0';
	while (got + 1 < size && !memchr(buf, '\n', got)) {
		if (poll(&p, 1, timeout_ms) <= 0)
			break;
		n = read(fd, buf + got, size - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
	}
	buf[strcspn(buf, "\n")] = '\0';
}

static void report_connection(struct check *c, pid_t child, const char *name)
{
	struct snapshot snap;
	unsigned int i;

	if (segment_read(child, &snap, false)) {
		check_say(c, VERDICT_FAIL,
			  "the probe's stats cannot be read: is /dev/shm "
			  "writable?");
		return;
	}
	for (i = 0; i < snap.row_count; i++) {
		const struct roceshim_stats_row *r = &snap.rows[i];

		if (r->role != ROCESHIM_ROLE_ACTIVE)
			continue;
		if (r->transport == ROCESHIM_TRANSPORT_RDMA)
			check_say(c, VERDICT_OK,
				  "a connection to %s went on RDMA: a "
				  "roceshim listener answered",
				  name);
		else
			check_say(c, VERDICT_FAIL,
				  "a connection to %s stays on TCP (%s): %s",
				  name, roceshim_reason_name(r->reason),
				  check_reason_advice(r->reason));
		segment_free(&snap);
		return;
	}
	segment_free(&snap);
	check_say(c, VERDICT_FAIL,
		  "the probe's connection is not in its stats: the library "
		  "did not track it (ROCESHIM_ENABLE?)");
}

static void check_connection(struct check *c, const char *host,
			     const char *port, const char *name)
{
	int timeout = (int)c->cfg.connect_timeout_ms + PROBE_SLACK_MS;
	int to_child = -1, from_child = -1, status;
	char lib[1024], answer[256];
	pid_t child;

	if (!library_path(lib, sizeof(lib))) {
		check_say(c, VERDICT_FAIL,
			  "%s: cannot be read, so no connection can be "
			  "tried; set ROCESHIM_LIB",
			  lib);
		return;
	}
	child = start_probe(lib, host, port, &to_child, &from_child);
	if (child < 0) {
		check_say(c, VERDICT_FAIL, "cannot start the probe: %s",
			  strerror(errno));
		return;
	}
	read_answer(from_child, timeout, answer, sizeof(answer));
	if (!strcmp(answer, "connected"))
		report_connection(c, child, name);
	else if (answer[0])
		check_say(c, VERDICT_FAIL, "cannot connect to %s: %s", name,
			  answer);
	else
		check_say(c, VERDICT_FAIL,
			  "no TCP connection to %s within %d s", name,
			  timeout / 1000);
	close(to_child);
	close(from_child);
	if (!answer[0])
		kill(child, SIGKILL);
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	/* Killed, it could not remove its own. */
	if (!answer[0]) {
		char path[64];

		segment_path(child, path, sizeof(path));
		unlink(path);
	}
}

void check_peer(struct check *c, const char *peer)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char host[256], port[8];
	int err;

	printf("peer %s\n", peer);
	split_peer(peer, host, sizeof(host), port, sizeof(port));
	err = getaddrinfo(host, port[0] ? port : NULL, &hints, &ai);
	if (err) {
		check_say(c, VERDICT_FAIL, "%s: %s", host, gai_strerror(err));
		return;
	}
	check_route(c, peer, ai->ai_addr);
	freeaddrinfo(ai);
	if (!port[0])
		check_say(c, VERDICT_NOTE,
			  "name a port (%s:PORT) to try a roceshim listener",
			  host);
	else if (!c->failures)
		check_connection(c, host, port, peer);
}

int check_probe_child(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char byte;
	int fd, err;

	err = getaddrinfo(host, port, &hints, &ai);
	if (err) {
		printf("%s\n", gai_strerror(err));
		return 1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		printf("%s\n", strerror(errno));
		freeaddrinfo(ai);
		return 1;
	}
	freeaddrinfo(ai);
	printf("connected\n");
	fflush(stdout);
	/* Held until the parent has read this process's stats. */
	while (read(0, &byte, 1) > 0)
		;
	close(fd);
	return 0;
}
