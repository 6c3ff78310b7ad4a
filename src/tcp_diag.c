// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "endpoint.h"
#include "real.h"
#include "tcp_diag.h"

/* The connection's addresses as sock_diag takes them (IPv4 in word 0). */
static int fill_id(struct inet_diag_sockid *id, uint8_t *family,
		   const struct roceshim_stats_endpoint *local,
		   const struct roceshim_stats_endpoint *remote)
{
	bool v4 = endpoint_is_v4_mapped(local) || local->family == AF_INET;

	if (v4 != (endpoint_is_v4_mapped(remote) || remote->family == AF_INET))
		return -EAFNOSUPPORT;
	*family = v4 ? AF_INET : AF_INET6;
	id->idiag_sport = htons(local->port);
	id->idiag_dport = htons(remote->port);
	if (v4) {
		memcpy(id->idiag_src, local->addr + 12, 4);
		memcpy(id->idiag_dst, remote->addr + 12, 4);
	} else {
		memcpy(id->idiag_src, local->addr, 16);
		memcpy(id->idiag_dst, remote->addr, 16);
	}
	id->idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	id->idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	return 0;
}

/*
 * An exact lookup that matches no connection finds the listener: absent.
 * It finds nothing (ENOENT) only where nothing listens on the port, or
 * where the kernel has no tcp_diag (a module it could not load), which
 * answers so for every lookup: that is not known, never absent.
 */
static int stage_of(const struct inet_diag_msg *msg)
{
	switch (msg->idiag_state) {
	case TCP_SYN_RECV:
		return msg->idiag_retrans ? TCP_DIAG_HANDSHAKE_STALLED
					  : TCP_DIAG_HANDSHAKE;
	case TCP_ESTABLISHED:
		return msg->idiag_inode ? TCP_DIAG_ACCEPTED : TCP_DIAG_QUEUED;
	default:
		return TCP_DIAG_ABSENT;
	}
}

/*
 * The socket an answer describes, in *msg: 0; or the negative errno an
 * NLMSG_ERROR answer carries, or -EPROTO for a malformed one.
 */
static int socket_of(const struct nlmsghdr *h, const struct inet_diag_msg **msg)
{
	const struct nlmsgerr *err = NLMSG_DATA(h);

	if (h->nlmsg_type == NLMSG_ERROR)
		return h->nlmsg_len >= NLMSG_LENGTH(sizeof(*err)) &&
				       err->error < 0
			       ? err->error
			       : -EPROTO;
	if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(**msg)))
		return -EPROTO;
	*msg = NLMSG_DATA(h);
	return 0;
}

/* The answer to one exact lookup: a stage or a negative errno. */
static int read_answer(int fd, uint32_t seq)
{
	union {
		struct nlmsghdr h;
		char buf[1024];
	} u;
	struct nlmsghdr *h = &u.h;
	const struct inet_diag_msg *msg;
	ssize_t n;
	int ret;

	do {
		n = real.recv(fd, u.buf, sizeof(u.buf), 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_seq != seq)
			continue;
		ret = socket_of(h, &msg);
		return ret ? ret : stage_of(msg);
	}
	return -EPROTO;
}

/* One request to sock_diag. */
struct query {
	struct nlmsghdr h;
	struct inet_diag_req_v2 req;
};

static void query_init(struct query *q, uint16_t flags, uint32_t states)
{
	memset(q, 0, sizeof(*q));
	q->h.nlmsg_len = sizeof(*q);
	q->h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q->h.nlmsg_flags = NLM_F_REQUEST | flags;
	q->req.sdiag_protocol = IPPROTO_TCP;
	q->req.idiag_states = states;
}

/* Sends q on fd, numbered anew; 0 or -errno. */
static int query_send(int fd, struct query *q)
{
	static uint32_t next_seq;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };

	q->h.nlmsg_seq = __atomic_add_fetch(&next_seq, 1, __ATOMIC_RELAXED);
	if (real.sendto(fd, q, sizeof(*q), 0, (struct sockaddr *)&kernel,
			sizeof(kernel)) < 0)
		return -errno;
	return 0;
}

static int open_diag(void)
{
	int fd = real.socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
			     NETLINK_SOCK_DIAG);

	return fd < 0 ? -errno : fd;
}

int tcp_diag_stage(const struct roceshim_stats_endpoint *local,
		   const struct roceshim_stats_endpoint *remote)
{
	struct query q;
	int fd, ret;

	query_init(&q, 0, (1u << TCP_ESTABLISHED) | (1u << TCP_SYN_RECV));
	ret = fill_id(&q.req.id, &q.req.sdiag_family, local, remote);
	if (ret)
		return ret;
	fd = open_diag();
	if (fd < 0)
		return fd;
	ret = query_send(fd, &q);
	if (!ret)
		ret = read_answer(fd, q.h.nlmsg_seq);
	real.close(fd);
	return ret;
}

/*
 * Counts, from one dump's answers on fd, the listeners on port other
 * than the socket of inode except and those known; -errno if the dump
 * failed.
 */
static int count_listeners(int fd, uint32_t seq, uint16_t port, uint64_t except,
			   bool (*known)(uint64_t inode))
{
	union {
		struct nlmsghdr h;
		char buf[16384];
	} u;
	const struct inet_diag_msg *msg;
	struct nlmsghdr *h;
	int count = 0, ret;
	ssize_t n;

	for (;;) {
		n = real.recv(fd, u.buf, sizeof(u.buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPROTO;
		for (h = &u.h; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return count;
			ret = socket_of(h, &msg);
			if (ret)
				return ret;
			if (ntohs(msg->id.idiag_sport) == port &&
			    msg->idiag_inode != except &&
			    !(known && known(msg->idiag_inode)))
				count++;
		}
	}
}

int tcp_diag_listeners(uint16_t port, uint64_t except_inode,
		       bool (*known)(uint64_t inode))
{
	static const uint8_t families[] = { AF_INET, AF_INET6 };
	int fd, ret = 0, total = 0;
	struct query q;
	size_t i;

	query_init(&q, NLM_F_DUMP, 1u << TCP_LISTEN);
	fd = open_diag();
	if (fd < 0)
		return fd;
	for (i = 0; i < sizeof(families) && ret >= 0; i++) {
		q.req.sdiag_family = families[i];
		ret = query_send(fd, &q);
		if (!ret)
			ret = count_listeners(fd, q.h.nlmsg_seq, port,
					      except_inode, known);
		if (ret > 0)
			total += ret;
	}
	real.close(fd);
	return ret < 0 ? ret : total;
}
