/* SPDX-License-Identifier: MIT */
/*
 * The completion hubs: a few completion channels per device and process,
 * shared by the completion queues of the connections on that device,
 * instead of a channel (and a descriptor) per connection.  A new queue
 * goes to the hub with the fewest queues, and a device gets a new hub
 * until it has CQ_HUB_PER_DEVICE, so that a waiter is woken only by the
 * completions of the connections its hub carries, not by every one of
 * the process (a thread polling one socket is not woken by another
 * thread's traffic).  A queue's events carry its cq_context, so whoever
 * finds a hub readable takes every event it holds and has each served
 * for the queue it names (cq_hub_drain()).
 *
 * A hub lives while some completion queue uses it: cq_hub_get() counts
 * one in, cq_hub_put() (after the queue is destroyed) counts it out, and
 * the last one out closes the channel, so that a device that goes away is
 * not held open by it.  Its descriptor is out of the program's way
 * (fd_room.h).  Each hub has a slot number below CQ_HUB_SLOTS, which a
 * waiter may keep after the hub is gone: a drain by a slot whose hub
 * has gone takes nothing, or the events of the hub made there since,
 * which it serves as any drain would.
 *
 * Contract: every function is thread safe.  Drains of a hub are
 * serialised with each other and with its cq_hub_lock(): whoever makes a
 * cq_context of one of its queues invalid for serving does so between
 * cq_hub_lock() and cq_hub_unlock(), and no drain serves it after that.
 * ibv_destroy_cq() waits for the events a drain took to be acknowledged,
 * which it does after serving them, so a queue's cq_context stays valid
 * while it is served.  In a fork child the parent's hubs are dead: never
 * drained, never watched, never counted out.
 */
#ifndef ROCESHIM_CQ_HUB_H
#define ROCESHIM_CQ_HUB_H

#include <stdbool.h>

/* Hubs per device, and in all (so devices a process uses at once: 8). */
#define CQ_HUB_PER_DEVICE 8
#define CQ_HUB_SLOTS	  64

struct cq_hub;
struct ibv_comp_channel;
struct ibv_context;

/*
 * The hub for a new completion queue of ctx (made if ctx has fewer than
 * CQ_HUB_PER_DEVICE and each has a queue already; its channel is
 * non-blocking), counted in for that queue; NULL with -errno in *err.
 */
struct cq_hub *cq_hub_get(struct ibv_context *ctx, int *err);
/* A queue made on h is gone (or was never made): counts it out. */
void cq_hub_put(struct cq_hub *h);
/*
 * Making a queue on h failed for a reason of the channel's own: new
 * queues of its device go to other hubs.
 */
void cq_hub_retire(struct cq_hub *h);

/* While h is counted in: */
struct ibv_comp_channel *cq_hub_channel(const struct cq_hub *h);
int cq_hub_fd(const struct cq_hub *h);
unsigned int cq_hub_slot(const struct cq_hub *h);

/*
 * Takes the events of the hub in slot, at most max of them (0: until none
 * is left): serve(cq_context, arg) for each, then acknowledges it.
 * Returns how many were taken.
 */
typedef void (*cq_hub_serve_fn)(void *cq_context, void *arg);
unsigned int cq_hub_drain(unsigned int slot, cq_hub_serve_fn serve, void *arg,
			  unsigned int max);

/* Excludes every drain of h: see the contract. */
void cq_hub_lock(struct cq_hub *h);
void cq_hub_unlock(struct cq_hub *h);

/*
 * The progress thread drains h, with serve and arg, while some
 * connection asks it to (counted: on, then off; every caller passes the
 * same serve and arg).
 */
void cq_hub_watch(struct cq_hub *h, bool on, cq_hub_serve_fn serve, void *arg);

void cq_hub_fork_child(void);

#endif /* ROCESHIM_CQ_HUB_H */
