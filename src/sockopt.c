// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <sys/socket.h>

#include "real.h"
#include "sockopt.h"

struct tcp_only_option {
	int level;
	int name;
	int off; /* the kernel's value while it is off */
	const char *label;
};

#define OPTION(level, name, off)        \
	{                               \
		level, name, off, #name \
	}

/*
 * SO_TIMESTAMPING comes in _OLD and _NEW forms; a kernel may read back
 * only the one set.  SO_PEEK_OFF reads back as an error where the
 * kernel's TCP has no peek offset (Linux 6.1 has none).
 */
static const struct tcp_only_option options[] = {
	OPTION(SOL_SOCKET, SO_RCVLOWAT, 1),
	OPTION(SOL_SOCKET, SO_PEEK_OFF, -1),
	OPTION(SOL_SOCKET, SO_TIMESTAMPING_OLD, 0),
	OPTION(SOL_SOCKET, SO_TIMESTAMPING_NEW, 0),
	/* Its SYN waits for the first write, which the kernel never sees. */
	OPTION(IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 0),
};

#define OPTION_COUNT (sizeof(options) / sizeof(options[0]))

bool sockopt_tcp_only(int level, int name)
{
	size_t i;

	for (i = 0; i < OPTION_COUNT; i++)
		if (options[i].level == level && options[i].name == name)
			return true;
	return false;
}

const char *sockopt_tcp_only_on(int fd, bool listener)
{
	const char *label = NULL;
	int err = errno, val;
	socklen_t len;
	size_t i;

	/*
	 * O_ASYNC: the kernel raises SIGIO when its socket has news.  A
	 * listener's connections still arrive there, and those it accepts
	 * do not inherit the flag.
	 */
	val = listener ? 0 : real.fcntl(fd, F_GETFL);
	if (val >= 0 && (val & O_ASYNC))
		label = "O_ASYNC";
	for (i = 0; i < OPTION_COUNT && !label; i++) {
		val = options[i].off;
		len = sizeof(val);
		if (!real.getsockopt(fd, options[i].level, options[i].name,
				     &val, &len) &&
		    val != options[i].off)
			label = options[i].label;
	}
	errno = err;
	return label;
}

/*
 * The receive timestamps roceshim gives.  Asked in this order, the first
 * that reads back on is the one set last: SO_TIMESTAMP_NEW reads back on
 * while SO_TIMESTAMPNS_NEW is, too (sk_getsockopt()).
 */
static const int rx_timestamps[] = { SO_TIMESTAMPNS_OLD, SO_TIMESTAMPNS_NEW,
				     SO_TIMESTAMP_OLD, SO_TIMESTAMP_NEW };

#define RX_TIMESTAMP_COUNT (sizeof(rx_timestamps) / sizeof(rx_timestamps[0]))

bool sockopt_rx_timestamp(int level, int name)
{
	size_t i;

	for (i = 0; level == SOL_SOCKET && i < RX_TIMESTAMP_COUNT; i++)
		if (rx_timestamps[i] == name)
			return true;
	return false;
}

int sockopt_rx_timestamp_on(int fd)
{
	int err = errno, val;
	socklen_t len;
	size_t i;

	for (i = 0; i < RX_TIMESTAMP_COUNT; i++) {
		val = 0;
		len = sizeof(val);
		if (!real.getsockopt(fd, SOL_SOCKET, rx_timestamps[i], &val,
				     &len) &&
		    val)
			break;
	}
	errno = err;
	return i < RX_TIMESTAMP_COUNT ? rx_timestamps[i] : 0;
}
