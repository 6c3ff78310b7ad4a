/* SPDX-License-Identifier: MIT */
/*
 * Endpoints (address and port) in the one form the library, the stats
 * segment and the tools share: struct roceshim_stats_endpoint, with IPv4
 * stored v4-mapped so that rules and comparisons have one code path.
 */
#ifndef ROCESHIM_ENDPOINT_H
#define ROCESHIM_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include <roceshim/stats.h>

/* Largest string endpoint_format() writes: "[v6]:port" plus NUL. */
#define ENDPOINT_STRLEN 56

/* Returns 0, or -EAFNOSUPPORT for a family other than AF_INET/AF_INET6. */
int endpoint_from_sockaddr(struct roceshim_stats_endpoint *ep,
			   const struct sockaddr *sa, socklen_t len);

/* True for an AF_INET6 endpoint that holds a v4-mapped address. */
bool endpoint_is_v4_mapped(const struct roceshim_stats_endpoint *ep);

/*
 * An AF_INET6 socket address that holds a v4-mapped address becomes the
 * AF_INET one, in place (rdma_cm binds, resolves and routes IPv4 only in
 * that form); any other is left as it is.  Returns whether it changed.
 */
bool sockaddr_unmap_v4(struct sockaddr_storage *ss);

/* The same address, in the same form, and the same port. */
bool endpoint_equal(const struct roceshim_stats_endpoint *a,
		    const struct roceshim_stats_endpoint *b);

/* True for 0.0.0.0 and ::, in either form: any local address. */
bool endpoint_is_wildcard(const struct roceshim_stats_endpoint *ep);

/* "1.2.3.4:80" or "[::1]:80"; always NUL-terminated. */
void endpoint_format(const struct roceshim_stats_endpoint *ep, char *buf,
		     size_t size);

#endif /* ROCESHIM_ENDPOINT_H */
