/* SPDX-License-Identifier: MIT */
/*
 * The RDMA stack (libibverbs and librdmacm), opened with dlopen on first
 * use.
 *
 * Contract: rdma_stack_load() opens both libraries and resolves every
 * function of theirs that roceshim calls, once per process, on whichever
 * thread asks first (a fork child included).  It returns 0, or -ELIBACC
 * when a library or one of its functions is missing; the answer never
 * changes afterwards, and the reason is logged once.  The tables `ibv` and
 * `rdmacm` may be used only by code reached after a call that returned 0
 * (a listener, a dial, a conn).  Nothing else in roceshim names a
 * libibverbs or librdmacm function, so the library has no link-time
 * dependency on them and a process that never makes an eligible socket
 * never maps them.  The inline data-path calls of verbs.h (ibv_post_send,
 * ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) go through the
 * provider's ops and need no symbol.
 */
#ifndef ROCESHIM_RDMA_STACK_H
#define ROCESHIM_RDMA_STACK_H

#include <stdbool.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "config.h"

/* Field names drop the prefix: ibv_reg_mr is also a function-like macro. */
struct ibv_api {
	__typeof__(ibv_get_device_list) *get_device_list;
	__typeof__(ibv_free_device_list) *free_device_list;
	__typeof__(ibv_alloc_pd) *alloc_pd;
	__typeof__(ibv_dealloc_pd) *dealloc_pd;
	__typeof__(ibv_create_comp_channel) *create_comp_channel;
	__typeof__(ibv_destroy_comp_channel) *destroy_comp_channel;
	__typeof__(ibv_create_cq) *create_cq;
	__typeof__(ibv_destroy_cq) *destroy_cq;
	__typeof__(ibv_get_cq_event) *get_cq_event;
	__typeof__(ibv_ack_cq_events) *ack_cq_events;
	__typeof__(ibv_reg_mr) *reg_mr;
	__typeof__(ibv_dereg_mr) *dereg_mr;
	__typeof__(ibv_wc_status_str) *wc_status_str;
};

struct rdmacm_api {
	__typeof__(rdma_create_event_channel) *create_event_channel;
	__typeof__(rdma_destroy_event_channel) *destroy_event_channel;
	__typeof__(rdma_get_cm_event) *get_cm_event;
	__typeof__(rdma_ack_cm_event) *ack_cm_event;
	__typeof__(rdma_event_str) *event_str;
	__typeof__(rdma_create_id) *create_id;
	__typeof__(rdma_destroy_id) *destroy_id;
	__typeof__(rdma_migrate_id) *migrate_id;
	__typeof__(rdma_set_option) *set_option;
	__typeof__(rdma_bind_addr) *bind_addr;
	__typeof__(rdma_listen) *listen;
	__typeof__(rdma_resolve_addr) *resolve_addr;
	__typeof__(rdma_resolve_route) *resolve_route;
	__typeof__(rdma_connect) *connect;
	__typeof__(rdma_accept) *accept;
	__typeof__(rdma_reject) *reject;
	__typeof__(rdma_disconnect) *disconnect;
	__typeof__(rdma_create_qp) *create_qp;
	__typeof__(rdma_init_qp_attr) *init_qp_attr;
	__typeof__(rdma_destroy_qp) *destroy_qp;
	__typeof__(rdma_get_src_port) *get_src_port;
	__typeof__(rdma_get_devices) *get_devices;
	__typeof__(rdma_free_devices) *free_devices;
};

extern struct ibv_api ibv;
extern struct rdmacm_api rdmacm;

/*
 * cfg names the two libraries (ROCESHIM_LIBIBVERBS, ROCESHIM_LIBRDMACM);
 * only the first call's cfg is used.
 */
int rdma_stack_load(const struct config *cfg);

/*
 * Whether the stack has been loaded in this process: until it is, no
 * connection can be on RDMA, and the walks that look for one are skipped.
 */
bool rdma_stack_loaded(void);

/*
 * Whether rdma_stack_load() has been called in this process, or in its
 * parent before the fork that made it.  A fork child of a process that had
 * not called it loads the stack as a new process would, unless the program
 * itself had loaded librdmacm (its state may be the parent's).
 */
bool rdma_stack_begun(void);

/* In a fork child, before anything else of roceshim runs there. */
void rdma_stack_fork_child(void);

/*
 * After a load that returned 0: whether librdmacm was loaded by roceshim
 * alone, so that no code of the program's holds what it opens.
 */
bool rdma_stack_private(void);

#endif /* ROCESHIM_RDMA_STACK_H */
