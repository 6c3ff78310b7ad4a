/* SPDX-License-Identifier: MIT */
/*
 * The handshake's wire format: what travels in RDMA CM private data.
 *
 * The client's connect request carries a hello: magic, version, the TCP
 * endpoint its kernel connection will come from (so the server can match
 * the accept() to this RDMA connection), and its receive ring.  The
 * server's accept carries its own ring.  Every field is in network byte
 * order at a fixed offset; nothing depends on either host's struct layout.
 *
 * Contract: the decoders treat their input as hostile.  They accept only
 * the right magic and version, a known address family, a valid ring size,
 * and a buffer at least as long as the message (rdma_cm pads private data
 * with zeros, so longer is fine); anything else is -EPROTO.
 */
#ifndef ROCESHIM_WIRE_H
#define ROCESHIM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <roceshim/stats.h>

#include "transport.h"

#define WIRE_MAGIC	0x52534831u /* "RSH1" */
#define WIRE_VERSION	1
#define WIRE_HELLO_LEN	40 /* fits RDMA_PS_TCP's 56 bytes of REQ data */
#define WIRE_ACCEPT_LEN 24

struct wire_hello {
	struct roceshim_stats_endpoint tcp_source;
	struct transport_ring_info ring;
};

void wire_encode_hello(const struct wire_hello *hello,
		       uint8_t buf[WIRE_HELLO_LEN]);
int wire_decode_hello(const void *buf, size_t len, struct wire_hello *hello);

void wire_encode_accept(const struct transport_ring_info *ring,
			uint8_t buf[WIRE_ACCEPT_LEN]);
int wire_decode_accept(const void *buf, size_t len,
		       struct transport_ring_info *ring);

#endif /* ROCESHIM_WIRE_H */
