/* SPDX-License-Identifier: MIT */
/*
 * The transport and the connection as test doubles, for the unit tests
 * of the handshake (test_handshake_client, test_handshake_server).  A
 * test links handshake_doubles.c with -Wl,--wrap of transport_create,
 * transport_connect, transport_local_ring, transport_destroy,
 * conn_create, conn_start, conn_discard and stats_malformed_input, sets
 * what they answer in `doubles`, and reads what they saw there.  A
 * discarded conn destroys its id through rdmacm.destroy_id (the test's
 * CM double, which makes and ends its ids with doubles_new_id() and
 * doubles_destroy_id()); every conn's memory lasts until doubles_reset().
 */
#ifndef ROCESHIM_TESTS_HANDSHAKE_DOUBLES_H
#define ROCESHIM_TESTS_HANDSHAKE_DOUBLES_H

#include <stdbool.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

/* The ring every transport double names as its own. */
#define DOUBLES_RING_SIZE (64u << 10)
#define DOUBLES_RING_RKEY 7

struct conn {
	struct rdma_cm_id *id;
	bool started;
	bool discarded;
	struct conn *next; /* every conn made since doubles_reset() */
};

struct handshake_doubles {
	/* answers */
	int create_rc;	    /* transport_create() */
	int connect_rc;	    /* transport_connect() */
	int conn_create_rc; /* conn_create() */
	/* what they saw */
	uint32_t ring_bytes;	/* the last transport_create()'s start */
	unsigned int destroyed; /* transport_destroy() */
	unsigned int conns;	/* conn_create() that made one */
	unsigned int started;	/* conn_start() */
	unsigned int discarded; /* conn_discard() */
	unsigned int malformed; /* stats_malformed_input() */
	int live_ids;		/* doubles_new_id() less doubles_destroy_id() */
	struct conn *last;	/* the latest conn made */
	struct conn *all;
};

extern struct handshake_doubles doubles;

/* An id of the CM double on ch, and its end (rdmacm.destroy_id's). */
struct rdma_cm_id *doubles_new_id(struct rdma_event_channel *ch, void *context);
int doubles_destroy_id(struct rdma_cm_id *id);

/* Frees every conn made, and zeroes `doubles`. */
void doubles_reset(void);

#endif /* ROCESHIM_TESTS_HANDSHAKE_DOUBLES_H */
