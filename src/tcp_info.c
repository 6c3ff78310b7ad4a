// SPDX-License-Identifier: MIT
#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#include "real.h"
#include "tcp_info.h"

int tcp_info_bytes_received(int fd, uint64_t *bytes)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len))
		return -errno;
	/* Older kernels fill less. */
	if (len < offsetof(struct tcp_info, tcpi_bytes_received) +
			  sizeof(ti.tcpi_bytes_received))
		return -EOPNOTSUPP;
	*bytes = ti.tcpi_bytes_received;
	return 0;
}
