/* SPDX-License-Identifier: MIT */
/*
 * The handshake's wire format: what travels in RDMA CM private data.
 *
 * The client's connect request carries a hello: magic, version, the TCP
 * endpoint its kernel connection will come from (so the server can match
 * the accept() to this RDMA connection), its receive ring, and whether
 * that TCP connection is up already (a second request, handshake.h).  The
 * server's accept carries its own ring; a refusal for want of resources
 * carries the reason (fd_limit, memlock_limit or resource), so that the
 * client records it.  Every field is in network byte
 * order at a fixed offset; nothing depends on either host's struct layout.
 *
 * When a connection leaves RDMA for its kernel TCP socket (a downgrade),
 * each end writes a marker as the first bytes of that socket: how far it
 * has consumed the peer's stream (resume: the peer sends the rest over
 * TCP), how far its own stream goes (sent), and why it moves.
 *
 * Contract: the decoders treat their input as hostile.  They accept only
 * the right magic and version, a known address family, a valid ring size,
 * and a buffer at least as long as the message (rdma_cm pads private data
 * with zeros, so longer is fine); anything else is -EPROTO.
 */
#ifndef ROCESHIM_WIRE_H
#define ROCESHIM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <roceshim/stats.h>

#include "transport.h"

#define WIRE_MAGIC	  0x52534831u /* "RSH1" */
#define WIRE_MARKER_MAGIC 0x52534447u /* "RSDG" */
/*
 * 2: both ends can move the connection to TCP (markers).  3: a hello may
 * come after its TCP connection (the connected flag).  4: rings start at
 * the client's size and change size in use (stream.h's control
 * messages); the server may start above its own starting size.
 */
#define WIRE_VERSION	4
#define WIRE_HELLO_LEN	48 /* fits RDMA_PS_TCP's 56 bytes of REQ data */
#define WIRE_ACCEPT_LEN 24
#define WIRE_REJECT_LEN 8
#define WIRE_MARKER_LEN 32

struct wire_hello {
	struct roceshim_stats_endpoint tcp_source;
	struct transport_ring_info ring;
	bool connected; /* the TCP connection from tcp_source is up */
};

void wire_encode_hello(const struct wire_hello *hello,
		       uint8_t buf[WIRE_HELLO_LEN]);
int wire_decode_hello(const void *buf, size_t len, struct wire_hello *hello);

void wire_encode_accept(const struct transport_ring_info *ring,
			uint8_t buf[WIRE_ACCEPT_LEN]);
int wire_decode_accept(const void *buf, size_t len,
		       struct transport_ring_info *ring);

void wire_encode_reject(enum roceshim_reason reason,
			uint8_t buf[WIRE_REJECT_LEN]);
/*
 * Only a resource reason (fd_limit, memlock_limit, resource), prefork,
 * handoff and reuseport are accepted; any other refusal reads as
 * peer_rejected.
 */
int wire_decode_reject(const void *buf, size_t len,
		       enum roceshim_reason *reason);

struct wire_marker {
	uint64_t resume; /* the sender consumed the receiver's stream to here */
	uint64_t sent;	 /* the sender's own stream goes to here */
	uint8_t cause;	 /* enum roceshim_downgrade */
};

/* Where this end's two streams stand (transport_freeze()). */
struct wire_positions {
	uint64_t consumed; /* of the peer's stream, by the program */
	uint64_t released; /* of this end's stream, consumed by the peer */
	uint64_t staged;   /* of this end's stream, accepted from the program */
};

void wire_encode_marker(const struct wire_marker *m,
			uint8_t buf[WIRE_MARKER_LEN]);
int wire_decode_marker(const void *buf, size_t len, struct wire_marker *m);

/*
 * Given the peer's marker, where this end's stream goes on over TCP:
 * *from, and this end resends its bytes from there.  -EPROTO if the
 * marker does not fit this end's positions (a peer that lies or a bug):
 * the connection must then be reset.
 */
int wire_marker_resend_from(const struct wire_marker *peer,
			    const struct wire_positions *mine, uint64_t *from);

#endif /* ROCESHIM_WIRE_H */
