// SPDX-License-Identifier: MIT
/*
 * cm_fuzz: hostile RDMA CM connect requests against a roceshim listener.
 *
 *	cm_fuzz SERVER_ADDR PORT COUNT
 *
 * Sends COUNT connect requests whose private data is malformed (random
 * bytes, a wrong magic or version, a bad family, port or ring size) and
 * requires every one to be refused: never ESTABLISHED.  Prints
 * "N passed, N failed" (one check per request).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* No event within 10 s: not one of enum rdma_cm_event_type's values. */
#define NO_EVENT (-1)

/* The next event's type, or NO_EVENT. */
static int next_event(struct rdma_event_channel *ch, struct rdma_cm_event **out)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };

	if (poll(&pfd, 1, 10000) != 1 || rdma_get_cm_event(ch, out))
		return NO_EVENT;
	return (*out)->event;
}

/* Fills buf with the i-th kind of malformed hello; returns its length. */
static size_t malformed(unsigned int i, unsigned int *seed, uint8_t *buf)
{
	struct wire_hello hello = {
		.tcp_source = { .port = 1000, .family = AF_INET },
		.ring = { .addr = 4096, .rkey = 1, .size = 256u << 10 },
	};
	size_t j, len = WIRE_HELLO_LEN;

	wire_encode_hello(&hello, buf);
	switch (i % 6) {
	case 0: /* random bytes, random length */
		len = rand_r(seed) % 57;
		for (j = 0; j < len; j++)
			buf[j] = rand_r(seed);
		buf[0] ^= 0x80; /* never the right magic by chance */
		break;
	case 1:
		buf[1] ^= 0xff; /* magic */
		break;
	case 2:
		buf[4] = WIRE_VERSION + 1 + rand_r(seed) % 200;
		break;
	case 3:
		buf[5] = 7; /* family */
		break;
	case 4:
		buf[6] = buf[7] = 0; /* TCP port */
		break;
	case 5:
		buf[36] = rand_r(seed); /* ring size: not a valid one */
		buf[39] = 1 | rand_r(seed);
		break;
	}
	return len;
}

int main(int argc, char **argv)
{
	unsigned int seed = 4242, i, count, refused = 0, accepted = 0;
	struct sockaddr_in dst = { .sin_family = AF_INET };

	if (argc != 4) {
		fprintf(stderr, "usage: %s SERVER_ADDR PORT COUNT\n", argv[0]);
		return 2;
	}
	inet_pton(AF_INET, argv[1], &dst.sin_addr);
	dst.sin_port = htons(atoi(argv[2]));
	count = atoi(argv[3]);
	for (i = 0; i < count; i++) {
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct rdma_conn_param param = { 0 };
		struct ibv_qp_init_attr attr = {
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1,
				 .max_recv_wr = 1,
				 .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct rdma_cm_event *ev;
		struct rdma_cm_id *id;
		uint8_t data[64];

		if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				      5000) ||
		    next_event(ch, &ev) != RDMA_CM_EVENT_ADDR_RESOLVED) {
			fprintf(stderr, "cm_fuzz: cannot resolve %s\n",
				argv[1]);
			return 1;
		}
		rdma_ack_cm_event(ev);
		if (rdma_resolve_route(id, 5000) ||
		    next_event(ch, &ev) != RDMA_CM_EVENT_ROUTE_RESOLVED ||
		    rdma_create_qp(id, NULL, &attr)) {
			fprintf(stderr, "cm_fuzz: cannot route\n");
			return 1;
		}
		rdma_ack_cm_event(ev);
		param.private_data_len = malformed(i, &seed, data);
		param.private_data = param.private_data_len ? data : NULL;
		if (rdma_connect(id, &param))
			return 1;
		switch (next_event(ch, &ev)) {
		case RDMA_CM_EVENT_ESTABLISHED:
			printf("FAIL request %u (kind %u) was accepted\n", i,
			       i % 6);
			accepted++;
			rdma_ack_cm_event(ev);
			rdma_disconnect(id);
			break;
		case NO_EVENT:
			printf("FAIL request %u: no answer\n", i);
			accepted++;
			break;
		default:
			refused++;
			rdma_ack_cm_event(ev);
			break;
		}
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		rdma_destroy_event_channel(ch);
	}
	printf("%u passed, %u failed\n", refused, accepted);
	return accepted ? 1 : 0;
}
