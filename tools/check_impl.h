/* SPDX-License-Identifier: MIT */
/*
 * What the parts of roceshim-stat --check share: the report, the
 * configuration and the RDMA libraries opened with dlopen.
 */
#ifndef ROCESHIM_TOOLS_CHECK_IMPL_H
#define ROCESHIM_TOOLS_CHECK_IMPL_H

#include <stdbool.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "config.h"

enum verdict {
	VERDICT_OK,
	VERDICT_NOTE, /* a fact worth knowing; RDMA works */
	VERDICT_WARN, /* RDMA works, but not everywhere or not at its best */
	VERDICT_FAIL  /* RDMA cannot work (for the peer, if named) */
};

/* Only the functions the check calls; see rdma_stack.h for why dlopen. */
struct check_libs {
	bool loaded;
	__typeof__(ibv_get_device_list) *get_device_list;
	__typeof__(ibv_free_device_list) *free_device_list;
	__typeof__(ibv_open_device) *open_device;
	__typeof__(ibv_close_device) *close_device;
	__typeof__(ibv_query_port) *query_port;
	__typeof__(rdma_create_event_channel) *create_event_channel;
	__typeof__(rdma_destroy_event_channel) *destroy_event_channel;
	__typeof__(rdma_create_id) *create_id;
	__typeof__(rdma_destroy_id) *destroy_id;
	__typeof__(rdma_resolve_addr) *resolve_addr;
	__typeof__(rdma_resolve_route) *resolve_route;
	__typeof__(rdma_get_cm_event) *get_cm_event;
	__typeof__(rdma_ack_cm_event) *ack_cm_event;
	__typeof__(rdma_event_str) *event_str;
};

struct check {
	struct config cfg;
	struct check_libs libs;
	unsigned int failures;
	unsigned int warnings;
};

void check_say(struct check *c, enum verdict v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Whether peer reads as HOST, HOST:PORT, [IPV6] or [IPV6]:PORT. */
bool check_peer_syntax(const char *peer);

/* The peer's section: its rdma_cm route and, with a port, a connection. */
void check_peer(struct check *c, const char *peer);

/* What a fallback reason means to the person setting up the fabric. */
const char *check_reason_advice(unsigned int reason);

#endif /* ROCESHIM_TOOLS_CHECK_IMPL_H */
