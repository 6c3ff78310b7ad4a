/* SPDX-License-Identifier: MIT */
/*
 * Inside the handshake module: what handshake.c (the shared CM event
 * channel and its dispatch), handshake_client.c and handshake_server.c
 * share.  Not for other modules.
 */
#ifndef ROCESHIM_HANDSHAKE_IMPL_H
#define ROCESHIM_HANDSHAKE_IMPL_H

#include <stdbool.h>

#include "handshake.h"
#include "transport.h"

/*
 * Work requests per queue.  Writes in flight are few (corking, credit),
 * and each send queue entry costs the most memory, so the send queue is
 * short.  Every write from the peer takes a receive until this end reaps
 * its completion: a short receive queue makes a reader that falls behind
 * a stream of small writes cost the writer receiver-not-ready retries.
 * Together they fill a completion queue of 127, which providers round up
 * to 128 entries, not 256.
 */
#define HANDSHAKE_SEND_DEPTH 15
#define HANDSHAKE_RECV_DEPTH 112
#define HANDSHAKE_MAX_INLINE 64
/*
 * Transport retries before a queue pair fails, and the connection moves
 * to TCP.  Not 7: Soft-RoCE takes 7 to mean "retry for ever" (as the
 * spec says of the RNR retry count only), and a broken path would then
 * hang the connection instead of failing it over.  RNR retries are never
 * needed (the receive queue is refilled at once) and stay unlimited.
 */
#define HANDSHAKE_RETRY_COUNT	  6
#define HANDSHAKE_RNR_RETRY_COUNT 7

/*
 * The CM's reject status when no listener has the service ID (the port):
 * IB_CM_REJ_INVALID_SERVICE_ID, as rdma_cm reports it for RoCE.
 */
#define HANDSHAKE_REJ_NO_LISTENER 8

/*
 * The CM event channel every established connection and listener uses,
 * served by the progress thread with the configuration of the call that
 * started it (the first to need it).  NULL: RDMA cannot run in this
 * process.
 */
struct rdma_event_channel *handshake_channel(const struct config *cfg);
/* The channel runs (not before its start, nor in a fork child). */
/*
 * get_cm_event() failed on the channel the progress thread serves at fd:
 * if the kernel refused it (EACCES: the process's credentials changed
 * since it was opened), the channel leaves the progress thread's set,
 * which would wake for it forever, and RDMA stops (policy_stop_rdma()).
 */
void handshake_channel_failed(int fd);

/*
 * Around each handshake this process starts (a dial, until it is on the
 * shared channel; a listen): false, counting nothing, once
 * policy_stop_rdma() has stopped RDMA.
 */
bool handshake_begin(void);
void handshake_end(void);
/* A handshake a CM listener answered is not over yet. */
bool handshake_server_busy(void);

/* The transport and connection this configuration asks for. */
struct transport_config handshake_transport_config(const struct config *cfg);
struct conn_options handshake_conn_options(const struct config *cfg);

/*
 * A new CM event channel, its descriptor out of the program's way
 * (fd_room.h); NULL and errno if none can be had.  refusable: one
 * connection's, refused near RLIMIT_NOFILE (EMFILE, fd_room_hide());
 * otherwise the process's own (fd_room_keep()).
 */
struct rdma_event_channel *handshake_open_channel(bool refusable);

/* Logs why this end has no queue pair for a connection. */
void handshake_log_no_transport(const char *what, int err);
/* The reason a connection stays on TCP when its resources fail with err. */
enum roceshim_reason handshake_reason_of(int err);

/* The server side of the channel's events (handshake_server.c). */
bool handshake_on_connect_request(const struct config *cfg,
				  struct rdma_cm_event *ev);
void handshake_on_established(struct conn *c);
void handshake_on_failed(struct conn *c);
bool handshake_pending_tick(void);
bool handshake_dial_tick(void);
/* share_start()'s callback: a descendant asks about a conn. */
void handshake_on_share_request(void *ctx);
void handshake_server_fork_child(void);
void handshake_client_fork_child(bool fds_shared);
/*
 * A listener id's context starts with a pointer to handshake_listener_tag
 * (struct listener), and so does a connect request's id until it is
 * accepted; connection ids carry their conn.
 */
extern char handshake_listener_tag;

#endif /* ROCESHIM_HANDSHAKE_IMPL_H */
