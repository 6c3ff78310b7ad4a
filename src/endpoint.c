// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "endpoint.h"

static const unsigned char v4_mapped_prefix[12] = { 0, 0, 0, 0, 0,    0,
						    0, 0, 0, 0, 0xff, 0xff };

int endpoint_from_sockaddr(struct roceshim_stats_endpoint *ep,
			   const struct sockaddr *sa, socklen_t len)
{
	memset(ep, 0, sizeof(*ep));
	if (!sa || len < sizeof(sa_family_t))
		return -EINVAL;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in sin;

		if (len < sizeof(sin))
			return -EINVAL;
		memcpy(&sin, sa, sizeof(sin));
		memcpy(ep->addr, v4_mapped_prefix, sizeof(v4_mapped_prefix));
		memcpy(ep->addr + 12, &sin.sin_addr, 4);
		ep->port = ntohs(sin.sin_port);
		ep->family = AF_INET;
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 sin6;

		if (len < sizeof(sin6))
			return -EINVAL;
		memcpy(&sin6, sa, sizeof(sin6));
		memcpy(ep->addr, &sin6.sin6_addr, 16);
		ep->port = ntohs(sin6.sin6_port);
		ep->family = AF_INET6;
		return 0;
	}
	return -EAFNOSUPPORT;
}

bool endpoint_is_v4_mapped(const struct roceshim_stats_endpoint *ep)
{
	return !memcmp(ep->addr, v4_mapped_prefix, sizeof(v4_mapped_prefix));
}

bool sockaddr_unmap_v4(struct sockaddr_storage *ss)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr_in6 sin6;

	if (ss->ss_family != AF_INET6)
		return false;
	memcpy(&sin6, ss, sizeof(sin6));
	if (!IN6_IS_ADDR_V4MAPPED(&sin6.sin6_addr))
		return false;
	sin.sin_port = sin6.sin6_port;
	memcpy(&sin.sin_addr, &sin6.sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &sin, sizeof(sin));
	return true;
}

bool endpoint_equal(const struct roceshim_stats_endpoint *a,
		    const struct roceshim_stats_endpoint *b)
{
	return a->port == b->port && !memcmp(a->addr, b->addr, sizeof(a->addr));
}

bool endpoint_is_wildcard(const struct roceshim_stats_endpoint *ep)
{
	static const uint8_t zero[16];

	if (endpoint_is_v4_mapped(ep))
		return !memcmp(ep->addr + 12, zero, 4);
	return !memcmp(ep->addr, zero, sizeof(zero));
}

void endpoint_format(const struct roceshim_stats_endpoint *ep, char *buf,
		     size_t size)
{
	char text[INET6_ADDRSTRLEN];

	if (ep->family == AF_INET) {
		inet_ntop(AF_INET, ep->addr + 12, text, sizeof(text));
		snprintf(buf, size, "%s:%u", text, ep->port);
	} else if (ep->family == AF_INET6) {
		inet_ntop(AF_INET6, ep->addr, text, sizeof(text));
		snprintf(buf, size, "[%s]:%u", text, ep->port);
	} else {
		snprintf(buf, size, "-");
	}
}
