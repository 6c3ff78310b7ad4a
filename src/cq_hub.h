/* SPDX-License-Identifier: MIT */
/*
 * The completion hub: one completion channel per device and process,
 * shared by the completion queues of every connection on that device,
 * instead of a channel (and a descriptor) per connection.  A queue's
 * events carry its cq_context, so whoever finds the channel readable
 * takes every event it holds and has each served for the queue it names
 * (cq_hub_drain()).
 *
 * A hub lives while some completion queue uses it: cq_hub_get() counts
 * one in, cq_hub_put() (after the queue is destroyed) counts it out, and
 * the last one out closes the channel, so that a device that goes away is
 * not held open by it.  Its descriptor is out of the program's way
 * (fd_room.h).
 *
 * Contract: every function is thread safe.  Drains are serialised with
 * each other and with cq_hub_lock(): whoever makes a cq_context invalid
 * for serving does so between cq_hub_lock() and cq_hub_unlock(), and no
 * drain serves it after that.  ibv_destroy_cq() waits for the events a
 * drain took to be acknowledged, which it does after serving them, so a
 * queue's cq_context stays valid while it is served.  In a fork child
 * the parent's hubs are dead: never drained, never watched.
 */
#ifndef ROCESHIM_CQ_HUB_H
#define ROCESHIM_CQ_HUB_H

#include <stdbool.h>

#include "progress.h"

struct ibv_comp_channel;
struct ibv_context;

/*
 * The hub's channel for ctx (made on first use, non-blocking), counted in
 * for one completion queue; NULL with -errno in *err.
 */
struct ibv_comp_channel *cq_hub_get(struct ibv_context *ctx, int *err);
/* A queue made on ch is gone (or was never made): counts it out. */
void cq_hub_put(struct ibv_comp_channel *ch);
/*
 * Making a queue on ch failed for a reason of the channel's own: new
 * queues of its device get a new hub.
 */
void cq_hub_retire(struct ibv_comp_channel *ch);

/*
 * Takes the events of every live hub, at most max of them (0: until none
 * is left): serve(cq_context, arg) for each, then acknowledges it.
 * Returns how many were taken.
 */
typedef void (*cq_hub_serve_fn)(void *cq_context, void *arg);
unsigned int cq_hub_drain(cq_hub_serve_fn serve, void *arg, unsigned int max);

/* Excludes every drain: see the contract. */
void cq_hub_lock(void);
void cq_hub_unlock(void);

/*
 * The progress thread watches ch with w while some connection asks it to
 * (counted: on, then off).
 */
void cq_hub_watch(struct ibv_comp_channel *ch, bool on,
		  struct progress_watcher *w);

void cq_hub_fork_child(void);

#endif /* ROCESHIM_CQ_HUB_H */
