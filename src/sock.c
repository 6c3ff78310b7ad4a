// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "conn.h"
#include "connector.h"
#include "fork_page.h"
#include "handshake.h"
#include "sock.h"
#include "stats.h"

#define SOCK_POOL_GROW 64

static pthread_mutex_t pool_lock FORK_DATA = PTHREAD_MUTEX_INITIALIZER;
static struct sock *pool_free;

static int pool_grow(void)
{
	struct sock *batch = calloc(SOCK_POOL_GROW, sizeof(*batch));
	int i;

	if (!batch)
		return -ENOMEM;
	for (i = 0; i < SOCK_POOL_GROW; i++) {
		batch[i].next_free = pool_free;
		pool_free = &batch[i];
	}
	return 0;
}

struct sock *sock_new(int domain)
{
	struct sock *sock = NULL;

	pthread_mutex_lock(&pool_lock);
	if (pool_free || !pool_grow()) {
		sock = pool_free;
		pool_free = sock->next_free;
	}
	pthread_mutex_unlock(&pool_lock);
	if (!sock)
		return NULL;
	sock->domain = domain;
	sock->next_free = NULL;
	__atomic_store_n(&sock->published, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sock->connecting, 0, __ATOMIC_RELAXED);
	sock->conn = NULL;
	sock->connector = NULL;
	sock->listen_id = NULL;
	__atomic_store_n(&sock->listen_reason, ROCESHIM_REASON_NONE,
			 __ATOMIC_RELAXED);
	sock->orphans = false;
	sock->orphans_key = NULL;
	sock->listen_since_ms = -1;
	sock->bound_known = false;
	sock->abortive = false;
	sock->spawn_dup = false;
	sock->stdio_stream = false;
	sock->imported = false;
	sock->joined = 0;
	sock->dial_again = false;
	__atomic_store_n(&sock->sndbuf, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sock->tcp_inq, -1, __ATOMIC_RELAXED);
	__atomic_store_n(&sock->rx_timestamp, -1, __ATOMIC_RELAXED);
	__atomic_store_n(&sock->row, -1, __ATOMIC_RELAXED);
	/* Published last: a racing sock_tryget() sees a ready sock or 0. */
	__atomic_store_n(&sock->refs, 1, __ATOMIC_RELEASE);
	return sock;
}

void sock_get(struct sock *sock)
{
	__atomic_fetch_add(&sock->refs, 1, __ATOMIC_RELAXED);
}

void sock_put(struct sock *sock)
{
	int row, err;

	if (__atomic_sub_fetch(&sock->refs, 1, __ATOMIC_ACQ_REL))
		return;
	err = errno;
	row = __atomic_load_n(&sock->row, __ATOMIC_RELAXED);
	if (row >= 0)
		stats_row_close(row);
	if (sock->connector)
		connector_free(sock->connector);
	if (sock->conn)
		handshake_port_handed_over(
			conn_release(sock->conn, sock->abortive));
	if (sock->listen_id)
		handshake_unlisten(sock, false);
	pthread_mutex_lock(&pool_lock);
	sock->next_free = pool_free;
	pool_free = sock;
	pthread_mutex_unlock(&pool_lock);
	errno = err;
}

void sock_publish(struct sock *sock, int fd, enum roceshim_role role,
		  enum roceshim_row_state state, enum roceshim_reason reason,
		  const struct roceshim_stats_endpoint *local,
		  const struct roceshim_stats_endpoint *peer)
{
	int row;

	if (__atomic_exchange_n(&sock->published, 1, __ATOMIC_ACQ_REL))
		return;
	row = stats_row_open(fd, role, state, reason, local, peer);
	__atomic_store_n(&sock->row, row, __ATOMIC_RELEASE);
}

void sock_set_state(struct sock *sock, enum roceshim_row_state state)
{
	int row = sock_row(sock);

	if (row >= 0)
		stats_row_set_state(row, state);
}

void FORK_CODE sock_pool_lock(void)
{
	pthread_mutex_lock(&pool_lock);
}

void FORK_CODE sock_pool_unlock(void)
{
	pthread_mutex_unlock(&pool_lock);
}
