// SPDX-License-Identifier: MIT
/*
 * Spares: the protection domain and first rings of a destroyed transport,
 * kept a short while for the next transport on the same device.  Mapping
 * and registering two rings and allocating a domain is a large part of
 * what setting a connection up costs, and of tearing it down; under churn
 * or a burst of connects, one that closes hands them to one that opens.
 *
 * A spare holds only what no peer can reach any more: its queue pair is
 * destroyed before it is kept, and the next transport makes a queue pair
 * of its own in the domain, so each domain serves one connection at a
 * time, as a fresh one would.  The next peer learns the receive ring's
 * key anew and only ever reads what it wrote.
 *
 * A spare outlives its connection's id, and librdmacm closes a device's
 * context when the last id on it goes after the device did: while spares
 * are in use the devices are held open (device_hold()), and a device
 * whose removal was seen keeps no spare until they are let go.
 */
#include <pthread.h>
#include <stdlib.h>

#include "clock.h"
#include "device.h"
#include "fork_page.h"
#include "rdma_stack.h"
#include "transport_impl.h"

/*
 * Kept at most this long, and at most this many bytes of rings; the
 * devices are let go this long after the last spare was kept.
 */
#define SPARE_IDLE_MS	 1000
#define SPARE_PINNED_MAX (1u << 20)
/* Removed devices remembered while the devices are held. */
#define SPARE_GONE_MAX 8

struct spare {
	struct spare *next;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ring_mem rx, tx;
	int64_t kept_ms;
};

static struct {
	pthread_mutex_t lock;
	struct spare *head; /* the newest first */
	uint64_t pinned;
	struct ibv_context **devices; /* held from the first spare kept */
	int64_t kept_ms;	      /* when the last one was */
	struct ibv_context *gone[SPARE_GONE_MAX];
	unsigned int gone_count;
	bool forked; /* a fork child's are the parent's */
	void (*count)(int64_t pinned_delta);
} sp FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t spare_bytes(const struct spare *s)
{
	return (uint64_t)s->rx.size + s->tx.size;
}

static void count(int64_t delta)
{
	void (*fn)(int64_t) = __atomic_load_n(&sp.count, __ATOMIC_ACQUIRE);

	if (fn && delta)
		fn(delta);
}

void transport_count_spares(void (*fn)(int64_t pinned_delta))
{
	__atomic_store_n(&sp.count, fn, __ATOMIC_RELEASE);
}

static void spare_free(struct spare *s)
{
	ring_mem_free(&s->rx);
	ring_mem_free(&s->tx);
	ibv.dealloc_pd(s->pd);
	free(s);
}

/* Frees the spares that pass keep() (under no lock); their bytes. */
static uint64_t drop_if(bool (*keep)(const struct spare *s, const void *arg),
			const void *arg)
{
	struct spare **sv, *s, *gone = NULL;
	uint64_t bytes = 0;

	pthread_mutex_lock(&sp.lock);
	for (sv = &sp.head; (s = *sv);) {
		if (keep(s, arg)) {
			sv = &s->next;
			continue;
		}
		*sv = s->next;
		sp.pinned -= spare_bytes(s);
		bytes += spare_bytes(s);
		s->next = gone;
		gone = s;
	}
	pthread_mutex_unlock(&sp.lock);
	while ((s = gone)) {
		gone = s->next;
		spare_free(s);
	}
	count(-(int64_t)bytes);
	return bytes;
}

bool spare_take(struct transport *t, struct ibv_context *verbs,
		uint32_t ring_bytes)
{
	struct spare **sv, *s;

	pthread_mutex_lock(&sp.lock);
	for (sv = &sp.head; (s = *sv); sv = &s->next)
		if (s->verbs == verbs && s->rx.size == ring_bytes &&
		    s->tx.size == ring_bytes)
			break;
	if (s) {
		*sv = s->next;
		sp.pinned -= spare_bytes(s);
	}
	pthread_mutex_unlock(&sp.lock);
	if (!s)
		return false;
	count(-(int64_t)spare_bytes(s));
	t->pd = s->pd;
	t->rx = s->rx;
	t->tx = s->tx;
	free(s);
	return true;
}

/*
 * Whether verbs may keep spares: a context the hold covers (one whose
 * device had gone before is not in it), and whose removal was not seen
 * since (with more removals than remembered, none may).
 */
static bool may_keep_locked(const struct ibv_context *verbs)
{
	struct ibv_context **d;
	unsigned int i;

	if (sp.gone_count > SPARE_GONE_MAX)
		return false;
	for (i = 0; i < sp.gone_count; i++)
		if (sp.gone[i] == verbs)
			return false;
	for (d = sp.devices; d && *d; d++)
		if (*d == verbs)
			return true;
	return false;
}

bool spare_keep(struct transport *t)
{
	struct spare *s;
	uint64_t bytes;

	/* Only the first rings, whole: a resize leaves others behind. */
	if (!t->pd || t->rx.size != t->ring_start ||
	    t->tx.size != t->ring_start || t->rx_offer.size ||
	    t->tx_prev.size || __atomic_load_n(&sp.forked, __ATOMIC_RELAXED))
		return false;
	s = malloc(sizeof(*s));
	if (!s)
		return false;
	*s = (struct spare){ .verbs = t->id->verbs,
			     .pd = t->pd,
			     .rx = t->rx,
			     .tx = t->tx,
			     .kept_ms = clock_ms() };
	bytes = spare_bytes(s);
	pthread_mutex_lock(&sp.lock);
	if (!sp.devices)
		sp.devices = device_hold();
	if (!may_keep_locked(s->verbs) ||
	    sp.pinned + bytes > SPARE_PINNED_MAX) {
		pthread_mutex_unlock(&sp.lock);
		free(s);
		return false;
	}
	s->next = sp.head;
	sp.head = s;
	sp.pinned += bytes;
	sp.kept_ms = s->kept_ms;
	pthread_mutex_unlock(&sp.lock);
	count((int64_t)bytes);
	t->pd = NULL;
	t->rx = (struct ring_mem){ 0 };
	t->tx = (struct ring_mem){ 0 };
	return true;
}

static bool fresh(const struct spare *s, const void *arg)
{
	return *(const int64_t *)arg - s->kept_ms < SPARE_IDLE_MS;
}

static bool on_other_device(const struct spare *s, const void *arg)
{
	return s->verbs != arg;
}

static bool none(const struct spare *s, const void *arg)
{
	(void)s;
	(void)arg;
	return false;
}

int spare_tick(int64_t now)
{
	struct ibv_context **release = NULL;
	int64_t next = -1;
	const struct spare *s;

	if (!__atomic_load_n(&sp.devices, __ATOMIC_RELAXED))
		return -1;
	drop_if(fresh, &now);
	pthread_mutex_lock(&sp.lock);
	for (s = sp.head; s; s = s->next)
		next = s->kept_ms + SPARE_IDLE_MS;
	if (next < 0 && now - sp.kept_ms >= SPARE_IDLE_MS) {
		release = sp.devices;
		sp.devices = NULL;
		sp.gone_count = 0;
	} else if (next < 0) {
		next = sp.kept_ms + SPARE_IDLE_MS;
	}
	pthread_mutex_unlock(&sp.lock);
	device_release(release);
	return next < 0 ? -1 : (int)(next > now ? next - now : 0);
}

bool spare_drop_all(void)
{
	return drop_if(none, NULL) > 0;
}

void transport_drop_spares(struct ibv_context *verbs)
{
	pthread_mutex_lock(&sp.lock);
	if (sp.devices && sp.gone_count <= SPARE_GONE_MAX) {
		if (sp.gone_count < SPARE_GONE_MAX)
			sp.gone[sp.gone_count] = verbs;
		sp.gone_count++;
	}
	pthread_mutex_unlock(&sp.lock);
	drop_if(on_other_device, verbs);
}

void FORK_CODE spare_fork_child(void)
{
	pthread_mutex_init(&sp.lock, NULL);
	if (rdma_stack_begun())
		sp.forked = true;
	sp.head = NULL;
	sp.pinned = 0;
	sp.devices = NULL;
	sp.gone_count = 0;
}
