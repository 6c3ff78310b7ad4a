// SPDX-License-Identifier: MIT
/*
 * The local address of a connection the library left unset, from the
 * kernel's tables in /proc (proc_local.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "endpoint.h"
#include "proc_local.h"

struct wanted {
	unsigned long inode;
	struct roceshim_stats_row *row;
};

static bool unresolved(const struct roceshim_stats_row *r)
{
	return (r->state == ROCESHIM_ROW_OPEN ||
		r->state == ROCESHIM_ROW_CONNECTING) &&
	       r->role != ROCESHIM_ROLE_LISTENER && !r->local.family &&
	       r->peer.family;
}

/* The inode of the socket that fd names in pid, or 0. */
static unsigned long socket_inode(pid_t pid, int fd)
{
	char path[64], target[64];
	unsigned long inode;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	if (sscanf(target, "socket:[%lu]", &inode) != 1)
		return 0;
	return inode;
}

static int by_inode(const void *a, const void *b)
{
	const struct wanted *x = a, *y = b;

	return (x->inode > y->inode) - (x->inode < y->inode);
}

/*
 * An address as the tables print it: the raw 32-bit words of the address
 * in host order, eight hex digits each.
 */
static bool parse_address(const char *hex, int family,
			  struct sockaddr_storage *ss, unsigned int port)
{
	size_t words = family == AF_INET ? 1 : 4, i;
	uint8_t bytes[16];
	char word[9];
	char *end;
	uint32_t w;

	if (strlen(hex) != words * 8 || port > 0xffff)
		return false;
	for (i = 0; i < words; i++) {
		memcpy(word, hex + i * 8, 8);
		word[8] = '\0';
		w = strtoul(word, &end, 16);
		if (*end)
			return false;
		memcpy(bytes + i * 4, &w, 4);
	}
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, bytes, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		memcpy(&sin6->sin6_addr, bytes, 16);
	}
	return true;
}

static bool parse_endpoint(const char *hex, unsigned int port, int family,
			   struct roceshim_stats_endpoint *ep)
{
	struct sockaddr_storage ss;

	return parse_address(hex, family, &ss, port) &&
	       !endpoint_from_sockaddr(ep, (struct sockaddr *)&ss, sizeof(ss));
}

static void fill_from_table(pid_t pid, const char *table, int family,
			    struct wanted *want, size_t n)
{
	char path[64], line[512], local_hex[40], remote_hex[40];
	unsigned int local_port, remote_port;
	struct roceshim_stats_endpoint local, remote;
	struct wanted key, *hit;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)pid, table);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line,
			   " %*u: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x %*x "
			   "%*x:%*x %*x:%*x %*x %*u %*d %lu",
			   local_hex, &local_port, remote_hex, &remote_port,
			   &key.inode) != 5 ||
		    !key.inode)
			continue;
		hit = bsearch(&key, want, n, sizeof(*want), by_inode);
		if (!hit ||
		    !parse_endpoint(local_hex, local_port, family, &local) ||
		    !parse_endpoint(remote_hex, remote_port, family, &remote) ||
		    !endpoint_equal(&remote, &hit->row->peer))
			continue;
		hit->row->local = local;
	}
	fclose(f);
}

void proc_local_fill(struct snapshot *snap)
{
	pid_t pid = snap->header.pid;
	struct wanted *want;
	unsigned int i;
	size_t n = 0;

	if (!snap->alive)
		return;
	want = calloc(snap->row_count ? snap->row_count : 1, sizeof(*want));
	if (!want)
		return;
	for (i = 0; i < snap->row_count; i++) {
		struct roceshim_stats_row *r = &snap->rows[i];

		if (!unresolved(r))
			continue;
		want[n].inode = socket_inode(pid, r->fd);
		want[n].row = r;
		if (want[n].inode)
			n++;
	}
	if (n) {
		qsort(want, n, sizeof(*want), by_inode);
		fill_from_table(pid, "tcp", AF_INET, want, n);
		fill_from_table(pid, "tcp6", AF_INET6, want, n);
	}
	free(want);
}
