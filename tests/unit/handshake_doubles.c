// SPDX-License-Identifier: MIT
/* The transport and connection doubles of the handshake's unit tests:
 * see handshake_doubles.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "conn.h"
#include "handshake_doubles.h"
#include "rdma_stack.h"
#include "transport.h"

struct transport {
	int unused;
};

struct handshake_doubles doubles;
static struct transport the_transport;

void doubles_reset(void)
{
	struct conn *c;

	while ((c = doubles.all)) {
		doubles.all = c->next;
		free(c);
	}
	memset(&doubles, 0, sizeof(doubles));
}

struct rdma_cm_id *doubles_new_id(struct rdma_event_channel *ch, void *context)
{
	struct rdma_cm_id *id = calloc(1, sizeof(*id));

	assert_non_null(id);
	id->channel = ch;
	id->context = context;
	doubles.live_ids++;
	return id;
}

int doubles_destroy_id(struct rdma_cm_id *id)
{
	free(id);
	doubles.live_ids--;
	return 0;
}

int __wrap_transport_create(struct rdma_cm_id *id,
			    const struct transport_config *tc,
			    struct transport **out);
int __wrap_transport_create(struct rdma_cm_id *id,
			    const struct transport_config *tc,
			    struct transport **out)
{
	(void)id;
	doubles.ring_bytes = tc->ring_bytes;
	if (doubles.create_rc)
		return doubles.create_rc;
	*out = &the_transport;
	return 0;
}

int __wrap_transport_connect(struct transport *t,
			     const struct transport_ring_info *peer);
int __wrap_transport_connect(struct transport *t,
			     const struct transport_ring_info *peer)
{
	(void)t;
	(void)peer;
	return doubles.connect_rc;
}

void __wrap_transport_local_ring(const struct transport *t,
				 struct transport_ring_info *info);
void __wrap_transport_local_ring(const struct transport *t,
				 struct transport_ring_info *info)
{
	(void)t;
	*info = (struct transport_ring_info){ .addr = 4096,
					      .rkey = DOUBLES_RING_RKEY,
					      .size = DOUBLES_RING_SIZE };
}

void __wrap_transport_destroy(struct transport *t);
void __wrap_transport_destroy(struct transport *t)
{
	assert_ptr_equal(t, &the_transport);
	doubles.destroyed++;
}

int __wrap_conn_create(struct rdma_cm_id *id, struct transport *t,
		       const struct conn_options *opt, struct conn **out);
int __wrap_conn_create(struct rdma_cm_id *id, struct transport *t,
		       const struct conn_options *opt, struct conn **out)
{
	struct conn *c;

	(void)t;
	(void)opt;
	if (doubles.conn_create_rc)
		return doubles.conn_create_rc;
	c = calloc(1, sizeof(*c));
	assert_non_null(c);
	c->id = id;
	c->next = doubles.all;
	doubles.all = c;
	doubles.last = c;
	doubles.conns++;
	*out = c;
	return 0;
}

void __wrap_conn_start(struct conn *c);
void __wrap_conn_start(struct conn *c)
{
	c->started = true;
	doubles.started++;
}

void __wrap_conn_discard(struct conn *c);
void __wrap_conn_discard(struct conn *c)
{
	c->discarded = true;
	doubles.discarded++;
	rdmacm.destroy_id(c->id);
}

void __wrap_stats_malformed_input(void);
void __wrap_stats_malformed_input(void)
{
	doubles.malformed++;
}
