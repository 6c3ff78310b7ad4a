// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cq_hub.h"
#include "fork_page.h"
#include "lock_by.h"
#include "log.h"
#include "rdma_stack.h"
#include "real.h"
#include "ring.h"
#include "stream.h"
#include "transport_impl.h"
#include "wire.h"

#define POLL_BATCH 16

static int post_recv(struct transport *t)
{
	struct ibv_recv_wr wr = { .wr_id = 0 }, *bad;

	/* Writes with immediate consume a receive but need no buffer. */
	return -ibv_post_recv(t->id->qp, &wr, &bad);
}

/* The completion queue, on one of its device's hubs: 0 or -errno. */
static int cq_on_hub(struct transport *t)
{
	int ret;

	t->hub = cq_hub_get(t->id->verbs, &ret);
	if (!t->hub)
		return ret;
	t->cq = ibv.create_cq(t->id->verbs, t->send_depth + t->recv_depth, t,
			      cq_hub_channel(t->hub), 0);
	return t->cq ? 0 : -errno;
}

static int create_queues(struct transport *t)
{
	struct ibv_qp_init_attr attr = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {
			.max_send_wr = t->send_depth,
			.max_recv_wr = t->recv_depth,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = t->max_inline,
		},
	};
	uint32_t i;
	int ret;

	ret = cq_on_hub(t);
	/* A hub whose device was closed and opened again: a new one. */
	if (ret == -EINVAL && t->hub) {
		cq_hub_retire(t->hub);
		cq_hub_put(t->hub);
		t->hub = NULL;
		ret = cq_on_hub(t);
	}
	if (ret)
		return ret;
	attr.send_cq = t->cq;
	attr.recv_cq = t->cq;
	if (rdmacm.create_qp(t->id, t->pd, &attr))
		return -errno;
	/* The provider may grant less inline room than asked for. */
	t->max_inline = attr.cap.max_inline_data;
	for (i = 0; i < t->recv_depth; i++) {
		ret = post_recv(t);
		if (ret)
			return ret;
	}
	return 0;
}

/* A fresh domain and first rings; transport_destroy() frees what it got. */
static int first_rings(struct transport *t, uint32_t size)
{
	int ret;

	t->pd = ibv.alloc_pd(t->id->verbs);
	if (!t->pd)
		return errno ? -errno : -ENOMEM;
	ret = ring_mem_alloc(t, &t->rx, size, RING_RX_ACCESS);
	if (ret)
		return ret;
	return ring_mem_alloc(t, &t->tx, size, RING_TX_ACCESS);
}

int transport_create(struct rdma_cm_id *id, const struct transport_config *cfg,
		     struct transport **out)
{
	struct transport *t;
	int ret;

	if (!ring_size_valid(cfg->ring_bytes) ||
	    !ring_size_valid(cfg->ring_max) ||
	    cfg->ring_max < cfg->ring_bytes || !cfg->send_depth ||
	    !cfg->recv_depth)
		return -EINVAL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->id = id;
	t->ring_start = cfg->ring_bytes;
	t->ring_idle = cfg->ring_bytes < TRANSPORT_RING_IDLE_BYTES
			       ? cfg->ring_bytes
			       : TRANSPORT_RING_IDLE_BYTES;
	t->ring_max = cfg->ring_max;
	stream_init(&t->s, cfg->ring_bytes);
	transport_set_write_max(t);
	t->busy_mark_ms = clock_ms();
	t->send_depth = cfg->send_depth;
	t->recv_depth = cfg->recv_depth;
	t->max_inline = cfg->max_inline;
	if (!spare_take(t, id->verbs, cfg->ring_bytes)) {
		ret = first_rings(t, cfg->ring_bytes);
		if (ret)
			goto fail;
	}
	ret = create_queues(t);
	if (ret)
		goto fail;
	*out = t;
	return 0;
fail:
	transport_destroy(t);
	return ret ? ret : -EIO;
}

void transport_local_ring(const struct transport *t,
			  struct transport_ring_info *info)
{
	info->addr = (uintptr_t)t->rx.buf;
	info->rkey = t->rx.mr->rkey;
	info->size = t->rx.size;
}

int transport_connect(struct transport *t,
		      const struct transport_ring_info *peer)
{
	if (peer->size != t->tx.size)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	t->peer = *peer;
	t->connected = true;
	pthread_mutex_unlock(&t->lock);
	rings_list(t);
	return 0;
}

/*
 * The connection breaks.  Unless the peer broke the protocol or went away
 * (transport_peer_gone()), the queue pair failed, and the connection may
 * go on over TCP (transport_qp_failed()).
 */
void transport_fail_locked(struct transport *t, int err)
{
	if (!t->error)
		t->error = err;
}

/*
 * Posts one RDMA WRITE WITH IMM of the len bytes that sge holds to the
 * stream positions [pos, pos+len) in the peer's ring; len 0 carries only
 * the immediate.
 */
static int post_write_sge(struct transport *t, uint64_t pos, uint32_t len,
			  uint32_t imm, struct ibv_sge *sge)
{
	uint32_t off = ring_offset(pos, t->tx.size);
	struct ibv_send_wr wr = {
		.wr_id = pos + len,
		.sg_list = len ? sge : NULL,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
		/* Solicited: the peer may arm for these alone (arm_locked). */
		.send_flags = IBV_SEND_SOLICITED |
			      (len && len <= t->max_inline ? IBV_SEND_INLINE :
							     0),
		.imm_data = htonl(imm),
		.wr.rdma = {
			.remote_addr = t->peer.addr + off,
			.rkey = t->peer.rkey,
		},
	};
	struct ibv_send_wr *bad;
	int ret;

	ret = ibv_post_send(t->id->qp, &wr, &bad);
	if (ret)
		return -ret;
	t->sq_outstanding++;
	return 0;
}

/* Posts the staged bytes [pos, pos+len) from the staging ring. */
static int post_write(struct transport *t, uint64_t pos, uint32_t len,
		      uint32_t imm)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(t->tx.buf + ring_offset(pos, t->tx.size)),
		.length = len,
		.lkey = t->tx.mr->lkey,
	};

	return post_write_sge(t, pos, len, imm, &sge);
}

int transport_post_imm_locked(struct transport *t, uint32_t imm)
{
	return post_write(t, t->s.tx_tail, 0, imm);
}

/*
 * Whether this end waits for its own writes to complete: corked bytes or a
 * FIN to post, staging room that the peer has already released, a
 * zero-copy send that returns only once its writes are done, or a credit
 * or control message that found the queue pair's send queue full.
 */
static bool awaits_own_completions(const struct transport *t)
{
	return stream_unsent(&t->s) || send_queue_len(&t->queued) ||
	       t->fin_pending || t->s.tx_completed < t->s.tx_released ||
	       t->s.tx_completed < t->direct_end || stream_credit_due(&t->s) ||
	       t->offer_unposted || t->grow_unposted || t->no_grow_unposted;
}

/*
 * Arms the completion queue (its events reach the hub).  Every message
 * from the peer is solicited, so an end that waits for nothing of its own
 * arms for those alone: its own write completions then wake nobody.
 */
static void arm_locked(struct transport *t, bool all)
{
	if (ibv_req_notify_cq(t->cq, !all))
		transport_fail_locked(t, -ECONNRESET);
	t->armed = true;
	t->notify_all = all;
}

/* Widens the arming once this end starts to wait for its own writes. */
static void arm_for_own_completions_locked(struct transport *t)
{
	if (!t->notify_all && !t->error && awaits_own_completions(t))
		arm_locked(t, true);
}

/* Copies len bytes to the end of the staged bytes (they fit). */
static void stage(struct transport *t, const uint8_t *buf, uint32_t len)
{
	uint64_t pos = t->s.tx_staged;
	uint32_t first = ring_contiguous(pos, len, t->tx.size);

	memcpy(t->tx.buf + ring_offset(pos, t->tx.size), buf, first);
	if (first < len)
		memcpy(t->tx.buf, buf + first, len - first);
	stream_staged(&t->s, len);
}

/*
 * Out of credit: since when this end has waited for the peer to release
 * bytes.  The wait starts when a send or a look first finds no credit,
 * not at the last credit: after an idle spell, a burst waits as long as
 * any for its first credit.  The next credit ends it.
 */
static int64_t credit_wait_since_locked(struct transport *t, int64_t now)
{
	if (!t->credit_waiting) {
		t->credit_waiting = true;
		t->credit_wait_ms = now;
	}
	return t->credit_wait_ms;
}

/*
 * Out of credit, bytes go into the send queue once the peer's reader has
 * released nothing for TRANSPORT_QUEUE_OPEN_MS, or behind bytes queued
 * already.  A reader that keeps up returns credit sooner: its sender waits
 * for that, and its bytes are copied once.
 */
static bool queue_open_locked(struct transport *t, int64_t now)
{
	return send_queue_len(&t->queued) ||
	       now - credit_wait_since_locked(t, now) >=
		       TRANSPORT_QUEUE_OPEN_MS;
}

/* Bytes in the send queues of the whole process. */
static _Atomic uint64_t queued_in_process FORK_DATA;

static void queue_took(uint64_t n)
{
	atomic_fetch_add_explicit(&queued_in_process, n, memory_order_relaxed);
}

static void queue_gave(uint64_t n)
{
	atomic_fetch_sub_explicit(&queued_in_process, n, memory_order_relaxed);
}

void FORK_CODE queue_fork_child(void)
{
	atomic_store_explicit(&queued_in_process, 0, memory_order_relaxed);
}

/*
 * What the send queue may hold now: the program's SO_SNDBUF, or what the
 * traffic has grown it to (TRANSPORT_SEND_BUFFER).
 */
static uint32_t queue_size_locked(const struct transport *t)
{
	uint64_t grown = t->s.tx_tail * 2;

	if (t->s.tx_limit_asked)
		return t->s.tx_limit_asked;
	if (grown <= TRANSPORT_SEND_BUFFER ||
	    atomic_load_explicit(&queued_in_process, memory_order_relaxed) >=
		    TRANSPORT_QUEUED_MAX)
		return TRANSPORT_SEND_BUFFER;
	return grown < TRANSPORT_SEND_BUFFER_MAX ? (uint32_t)grown
						 : TRANSPORT_SEND_BUFFER_MAX;
}

/* Stages what credit allows of the queued bytes, first in first. */
static void stage_queued_locked(struct transport *t)
{
	const uint8_t *p;
	uint32_t room, n;

	while (send_queue_len(&t->queued) &&
	       (room = stream_send_window(&t->s, SIZE_MAX))) {
		n = (uint32_t)send_queue_piece(&t->queued, 0, &p);
		if (n > room)
			n = room;
		stage(t, p, n);
		send_queue_drop(&t->queued, n);
		queue_gave(n);
	}
	if (!send_queue_len(&t->queued))
		t->queue_starved = false;
}

/*
 * Posts the staged bytes as the stream's policy says (stream.h), then the
 * FIN once nothing staged or queued is left.  Corked bytes go out with
 * the next completion, and queued ones with the credit that lets them
 * in: every path that reaps one calls this.  The queue pair's send queue
 * always keeps room for a credit write.
 */
static void flush_locked(struct transport *t)
{
	uint32_t n;

	if (!t->connected || t->error || t->frozen)
		return;
	stage_queued_locked(t);
	if (!stream_unsent(&t->s) && !t->fin_pending)
		return;
	while (t->sq_outstanding + 2 <= t->send_depth &&
	       (n = stream_next_write(&t->s, t->sq_outstanding,
				      t->write_max))) {
		if (post_write(t, t->s.tx_tail, n, n)) {
			transport_fail_locked(t, -ECONNRESET);
			return;
		}
		stream_sent(&t->s, n);
		t->counters.tx_msgs++;
	}
	if (rings_busy_traffic(t))
		rings_traffic_locked(t);
	if (t->fin_pending && !stream_unsent(&t->s) &&
	    !send_queue_len(&t->queued) && t->sq_outstanding < t->send_depth) {
		if (post_write(t, t->s.tx_tail, 0, IMM_FIN))
			transport_fail_locked(t, -ECONNRESET);
		t->fin_pending = false;
	}
}

static void send_credit_locked(struct transport *t)
{
	uint32_t imm = stream_credit_due(&t->s);

	if (!imm || !t->connected || t->error || t->frozen ||
	    t->sq_outstanding >= t->send_depth)
		return;
	if (post_write(t, t->s.tx_tail, 0, imm)) {
		transport_fail_locked(t, -ECONNRESET);
		return;
	}
	stream_credit_sent(&t->s);
}

/*
 * A message brought bytes after the program shut down both directions;
 * tail is where the stream's arrivals ended before it.  Its bytes are
 * dropped (transport_late_bytes()), and so are those of every message
 * after it.  Writes fail from now on, as to a peer that reset.
 */
static void late_bytes_locked(struct transport *t, uint64_t tail)
{
	t->s.rx_tail = tail;
	if (t->late == LATE_NONE)
		t->late = LATE_UNREPORTED;
	t->peer_gone = true;
}

static void handle_completion_locked(struct transport *t,
				     const struct ibv_wc *wc)
{
	uint64_t tail = t->s.rx_tail, released = t->s.tx_released;
	uint32_t imm;

	if (wc->status != IBV_WC_SUCCESS) {
		/* The first error says why; the flushes after it do not. */
		if (!t->error && wc->status != IBV_WC_WR_FLUSH_ERR)
			log_info(
				"rdma: queue pair failed: %s (vendor error %u)",
				ibv.wc_status_str(wc->status), wc->vendor_err);
		transport_fail_locked(t, -ECONNRESET);
		return;
	}
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		if (post_recv(t) || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
			transport_fail_locked(t, -ECONNRESET);
			return;
		}
		imm = ntohl(wc->imm_data);
		if (stream_apply_imm(&t->s, imm)) {
			t->counters.protocol_errors++;
			t->hostile = true;
			transport_fail_locked(t, -ECONNRESET);
		} else if (imm_is_control(imm)) {
			rings_on_control_locked(t, imm_op(imm));
		} else if (t->s.tx_released != released) {
			t->credit_waiting = false;
		} else if (!(imm & (IMM_CREDIT | IMM_FIN))) {
			t->counters.rx_msgs++;
			if ((t->rx_shut && t->tx_shut) || t->late != LATE_NONE)
				late_bytes_locked(t, tail);
		}
		return;
	}
	t->sq_outstanding--;
	t->send_completions++;
	stream_write_completed(&t->s, wc->wr_id);
}

/*
 * Reaps every completion there is; returns how many.  Only a completion
 * can make credit, a write or a wider arming due that was not before:
 * the calls that change the rest (a send, a read, a shutdown) see to it.
 */
static int progress_locked(struct transport *t)
{
	struct ibv_wc wc[POLL_BATCH];
	int n, i, total = 0;

	do {
		n = ibv_poll_cq(t->cq, POLL_BATCH, wc);
		if (n < 0) {
			transport_fail_locked(t, -ECONNRESET);
			break;
		}
		for (i = 0; i < n; i++)
			handle_completion_locked(t, &wc[i]);
		total += n;
	} while (n == POLL_BATCH);
	if (!total)
		return 0;
	send_credit_locked(t);
	if (rings_pending(t))
		rings_progress_locked(t);
	flush_locked(t);
	arm_for_own_completions_locked(t);
	return total;
}

int transport_progress_locked(struct transport *t)
{
	return progress_locked(t);
}

int transport_progress(struct transport *t)
{
	int ret;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	ret = t->error;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/*
 * 0 if this end may send; as on TCP, EPIPE once the peer has gone;
 * -EXDEV once the connection moves to TCP.
 */
static int send_refused_locked(const struct transport *t)
{
	if (t->frozen)
		return -EXDEV;
	if (t->peer_gone || t->tx_shut || (t->error && t->s.rx_eof))
		return -EPIPE;
	return t->error;
}

/* A send found no credit: it waits for the completions that bring it. */
static int credit_stall_locked(struct transport *t)
{
	t->counters.credit_stalls++;
	rings_stalled_locked(t);
	arm_for_own_completions_locked(t);
	return -EAGAIN;
}

/*
 * Stages what credit allows of the bytes of iov after the first skip,
 * once nothing queued is left before them, and queues what the send
 * queue has room for of the rest; returns how many it took.
 */
static size_t stage_or_queue_locked(struct transport *t,
				    const struct iovec *iov, int iovcnt,
				    size_t skip)
{
	size_t staged = 0, queued, left, space;
	uint32_t room, n, size;
	int i = 0;

	stage_queued_locked(t);
	room = send_queue_len(&t->queued) ? 0
					  : stream_send_window(&t->s, SIZE_MAX);
	while (i < iovcnt && skip >= iov[i].iov_len)
		skip -= iov[i++].iov_len;
	for (; i < iovcnt && staged < room; i++, skip = 0) {
		size_t len = iov[i].iov_len - skip;

		n = len < room - staged ? (uint32_t)len
					: room - (uint32_t)staged;
		stage(t, (const uint8_t *)iov[i].iov_base + skip, n);
		staged += n;
		if (n < len) {
			skip += n;
			break;
		}
	}
	if (i == iovcnt || !queue_open_locked(t, clock_ms()))
		return staged;
	left = iov_bytes(iov + i, iovcnt - i) - skip;
	size = queue_size_locked(t);
	space = size > send_queue_len(&t->queued)
			? size - send_queue_len(&t->queued)
			: 0;
	queued = send_queue_push(&t->queued, iov + i, iovcnt - i, skip, size);
	queue_took(queued);
	/* Memory ran out: writability waits for the queue to drain. */
	if (queued < left && queued < space)
		t->queue_starved = true;
	/* Past the ring's credit: a bigger ring would help. */
	if (queued)
		rings_stalled_locked(t);
	return staged + queued;
}

static ssize_t send_locked(struct transport *t, const struct iovec *iov,
			   int iovcnt, size_t skip)
{
	size_t taken;
	int i = 0, ret;

	ret = send_refused_locked(t);
	if (ret)
		return ret;
	while (i < iovcnt && skip >= iov[i].iov_len)
		skip -= iov[i++].iov_len;
	while (i < iovcnt && !iov[i].iov_len)
		i++;
	if (i == iovcnt)
		return 0;
	taken = stage_or_queue_locked(t, iov + i, iovcnt - i, skip);
	if (!taken)
		return credit_stall_locked(t);
	t->counters.tx_bytes += taken;
	flush_locked(t);
	arm_for_own_completions_locked(t);
	return t->error ? t->error : (ssize_t)taken;
}

struct ibv_mr *transport_register(struct transport *t, const void *buf,
				  size_t len)
{
	/* The writes only read it: no write access, so no copy-on-write. */
	return ibv.reg_mr(t->pd, (void *)buf, len, 0);
}

void transport_deregister(struct ibv_mr *mr)
{
	ibv.dereg_mr(mr);
}

/*
 * Copies the bytes of stream positions [pos, pos + len), held at src, into
 * the staging ring, where the peer may not have consumed them: a
 * connection that moves to TCP resends what the peer has not consumed
 * from the staging ring (transport_freeze()).  The staging ring's place
 * for a position is its own until the position is released, so nothing
 * else is there.
 */
static void keep_unreleased_locked(struct transport *t, uint64_t pos,
				   uint32_t len, const uint8_t *src)
{
	uint64_t from = pos > t->s.tx_released ? pos : t->s.tx_released;
	uint64_t end = pos + len;
	uint32_t n;

	for (; from < end; from += n) {
		n = ring_contiguous(from, end - from, t->tx.size);
		memcpy(t->tx.buf + ring_offset(from, t->tx.size),
		       src + (from - pos), n);
	}
}

/* Records a zero-copy write; false: no room to record it (stage it). */
static bool direct_record_locked(struct transport *t, uint64_t pos,
				 uint32_t len, const uint8_t *src)
{
	struct direct_run *last =
		t->direct_count ? &t->direct[t->direct_count - 1] : NULL;

	if (last && last->pos + last->len == pos &&
	    last->src + last->len == src) {
		last->len += len;
		return true;
	}
	if (t->direct_count == DIRECT_RUNS)
		return false;
	t->direct[t->direct_count++] =
		(struct direct_run){ .pos = pos, .len = len, .src = src };
	return true;
}

/* Keeps the bytes of the zero-copy runs within [buf, buf + len), forgets them.
 */
static void direct_retire_locked(struct transport *t, const uint8_t *buf,
				 size_t len)
{
	unsigned int i = 0;

	while (i < t->direct_count) {
		struct direct_run *r = &t->direct[i];

		if (buf && (r->src < buf || r->src >= buf + len)) {
			i++;
			continue;
		}
		keep_unreleased_locked(t, r->pos, r->len, r->src);
		*r = t->direct[--t->direct_count];
	}
}

void transport_direct_retire(struct transport *t, const void *buf, size_t len)
{
	pthread_mutex_lock(&t->lock);
	direct_retire_locked(t, buf, len);
	if (rings_pending(t))
		rings_progress_locked(t);
	pthread_mutex_unlock(&t->lock);
}

/*
 * Posts writes of buf's bytes as credit and the send queue allow, in the
 * pieces that staged bytes would go out in; returns how many.
 */
static uint32_t post_direct_locked(struct transport *t, struct ibv_mr *mr,
				   const uint8_t *buf, uint32_t len)
{
	struct ibv_sge sge = { .lkey = mr->lkey };
	uint32_t posted = 0, n;

	while (posted < len && t->sq_outstanding + 2 <= t->send_depth) {
		n = ring_contiguous(t->s.tx_tail, len - posted, t->tx.size);
		if (n > t->write_max)
			n = t->write_max;
		if (!direct_record_locked(t, t->s.tx_tail, n, buf + posted))
			break;
		sge.addr = (uintptr_t)(buf + posted);
		sge.length = n;
		if (post_write_sge(t, t->s.tx_tail, n, n, &sge)) {
			transport_fail_locked(t, -ECONNRESET);
			break;
		}
		stream_staged(&t->s, n);
		stream_sent(&t->s, n);
		t->counters.tx_msgs++;
		posted += n;
	}
	if (rings_busy_traffic(t))
		rings_traffic_locked(t);
	return posted;
}

ssize_t transport_send_direct(struct transport *t, struct ibv_mr *mr,
			      const void *buf, size_t len, uint64_t *end)
{
	uint32_t window, posted;
	ssize_t ret;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	ret = send_refused_locked(t);
	if (ret)
		goto out;
	/* Bytes staged or queued before must go out first. */
	ret = -ENOBUFS;
	if (stream_unsent(&t->s) || send_queue_len(&t->queued))
		goto out;
	window = stream_send_window(&t->s, len);
	if (!window) {
		ret = credit_stall_locked(t);
		goto out;
	}
	posted = post_direct_locked(t, mr, buf, window);
	if (!posted)
		goto out;
	t->counters.tx_bytes += posted;
	t->direct_end = t->s.tx_tail;
	*end = t->direct_end;
	arm_for_own_completions_locked(t);
	ret = t->error ? t->error : (ssize_t)posted;
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* Staged bytes wait for a completion to go out, or queued ones for credit. */
static bool corked_locked(const struct transport *t)
{
	return (stream_unsent(&t->s) || send_queue_len(&t->queued)) &&
	       !t->error;
}

/*
 * Whether a send must reap before it stages: for credit or staging room,
 * or because its write would be corked behind writes that may have
 * completed.  Otherwise the reaping waits for a later call.
 */
static bool send_needs_progress(const struct transport *t, size_t len)
{
	return t->sq_outstanding + 1 >= STREAM_CORK_DEPTH ||
	       stream_send_window(&t->s, len) < len;
}

ssize_t transport_send(struct transport *t, const struct iovec *iov, int iovcnt,
		       size_t skip, bool *corked)
{
	size_t len = iov_bytes(iov, iovcnt);
	ssize_t ret;

	len = len > skip ? len - skip : 0;
	pthread_mutex_lock(&t->lock);
	if (send_needs_progress(t, len))
		progress_locked(t);
	ret = send_locked(t, iov, iovcnt, skip);
	*corked = corked_locked(t);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* Copies the n bytes from stream position pos on out of this end's ring. */
static void copy_out_locked(struct transport *t, uint64_t pos, uint8_t *buf,
			    uint64_t n)
{
	uint32_t first = ring_contiguous(pos, n, t->rx.size);

	memcpy(buf, t->rx.buf + ring_offset(pos, t->rx.size), first);
	if (first < n)
		memcpy(buf + first, t->rx.buf, n - first);
}

/* Up to len bytes from skip past the next unread one; a peek takes none. */
static ssize_t recv_locked(struct transport *t, void *buf, size_t len,
			   uint64_t skip, bool peek)
{
	uint64_t avail, n;

	progress_locked(t);
	avail = stream_available(&t->s);
	if (t->frozen)
		return -EXDEV;
	if (avail <= skip) {
		if (t->late == LATE_UNREPORTED) {
			t->late = LATE_REPORTED;
			return -ECONNRESET;
		}
		if (t->s.rx_eof || t->rx_shut)
			return 0;
		return t->error ? t->error : -EAGAIN;
	}
	avail -= skip;
	n = len < avail ? len : avail;
	if (buf)
		copy_out_locked(t, t->s.rx_head + skip, buf, n);
	if (!peek) {
		stream_consumed(&t->s, (uint32_t)n);
		t->counters.rx_bytes += n;
		send_credit_locked(t);
		if (rings_pending(t))
			rings_progress_locked(t);
	}
	return (ssize_t)n;
}

ssize_t transport_recv(struct transport *t, void *buf, size_t len)
{
	ssize_t ret;

	pthread_mutex_lock(&t->lock);
	ret = recv_locked(t, buf, len, 0, false);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

ssize_t transport_peek_at(struct transport *t, void *buf, size_t len,
			  uint64_t skip)
{
	ssize_t ret;

	pthread_mutex_lock(&t->lock);
	ret = recv_locked(t, buf, len, skip, true);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void transport_limit_send(struct transport *t, uint32_t bytes)
{
	pthread_mutex_lock(&t->lock);
	stream_limit_send(&t->s, bytes);
	pthread_mutex_unlock(&t->lock);
}

/* Under t->lock, neither frozen nor failed: the FIN goes after the data. */
static void send_fin_locked(struct transport *t)
{
	if (t->tx_shut)
		return;
	t->tx_shut = true;
	t->fin_pending = true;
	flush_locked(t);
}

int transport_shutdown(struct transport *t)
{
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	if (t->frozen) {
		t->tx_shut = true;
	} else if (t->error) {
		ret = t->error;
	} else if (!t->tx_shut) {
		progress_locked(t);
		send_fin_locked(t);
		arm_for_own_completions_locked(t);
		ret = t->error;
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/*
 * Under t->lock: the writes not completed yet, one more for what is
 * still to post (staged bytes, the FIN); none once frozen, since a move
 * posts nothing more.  While bytes are queued, the rest waits for the
 * peer's reader, not for writes (transport_queued()).
 */
static unsigned int writes_left_locked(const struct transport *t)
{
	if (t->frozen)
		return 0;
	if (send_queue_len(&t->queued))
		return t->sq_outstanding;
	if (stream_unsent(&t->s) || t->fin_pending)
		return t->sq_outstanding + 1;
	return t->sq_outstanding;
}

int transport_finish_by(struct transport *t, int64_t deadline_ms)
{
	static const struct timespec pause = { .tv_nsec = 50000 };
	int ret;

	if (!lock_by(&t->lock, deadline_ms))
		return -ETIMEDOUT;
	progress_locked(t);
	if (t->frozen || t->error) {
		ret = t->error;
		goto out;
	}
	if (stream_available(&t->s)) {
		ret = -ECONNRESET;
		goto out;
	}
	send_fin_locked(t);
	while (!t->error && writes_left_locked(t)) {
		pthread_mutex_unlock(&t->lock);
		if (clock_ms() >= deadline_ms)
			return -ETIMEDOUT;
		nanosleep(&pause, NULL);
		if (!lock_by(&t->lock, deadline_ms))
			return -ETIMEDOUT;
		progress_locked(t);
	}
	ret = t->error;
	if (!ret && send_queue_len(&t->queued))
		ret = -EINPROGRESS;
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

void transport_shutdown_read(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	/* What came before the shutdown is not late (late_bytes_locked()). */
	progress_locked(t);
	t->rx_shut = true;
	pthread_mutex_unlock(&t->lock);
}

bool transport_late_bytes(struct transport *t)
{
	bool late;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	late = t->late != LATE_NONE;
	pthread_mutex_unlock(&t->lock);
	return late;
}

int transport_freeze(struct transport *t, struct wire_positions *pos,
		     bool *tx_shut)
{
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	if (t->frozen) {
		ret = -EALREADY;
	} else {
		/* Credit that came releases bytes the peer need not get again.
		 */
		progress_locked(t);
		/* Zero-copy sends in flight may return once this is set. */
		direct_retire_locked(t, NULL, 0);
		t->frozen = true;
	}
	pos->consumed = t->s.rx_head;
	pos->released = t->s.tx_released;
	pos->staged = t->s.tx_staged + send_queue_len(&t->queued);
	*tx_shut = t->tx_shut;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int transport_staged_iov(struct transport *t, uint64_t from, uint64_t to,
			 struct iovec iov[2])
{
	const uint8_t *p;
	uint32_t first;
	int ret;

	pthread_mutex_lock(&t->lock);
	ret = -EINVAL;
	if (!t->frozen || from >= to || from < t->s.tx_released ||
	    to > t->s.tx_staged + send_queue_len(&t->queued))
		goto out;
	if (from >= t->s.tx_staged) {
		first = send_queue_piece(&t->queued, from - t->s.tx_staged, &p);
		iov[0].iov_base = (void *)p;
		iov[0].iov_len = first < to - from ? first : to - from;
		ret = 1;
		goto out;
	}
	if (to > t->s.tx_staged)
		to = t->s.tx_staged;
	iov[0].iov_base = t->tx.buf + ring_offset(from, t->tx.size);
	first = ring_contiguous(from, to - from, t->tx.size);
	iov[0].iov_len = first;
	iov[1].iov_base = t->tx.buf;
	iov[1].iov_len = to - from - first;
	ret = iov[1].iov_len ? 2 : 1;
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

bool transport_qp_failed(struct transport *t)
{
	bool failed;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	failed = t->error && !t->hostile && !t->peer_gone;
	pthread_mutex_unlock(&t->lock);
	return failed;
}

void transport_unfreeze(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	t->frozen = false;
	pthread_mutex_unlock(&t->lock);
}

void transport_peer_closed(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	t->peer_closed = true;
	pthread_mutex_unlock(&t->lock);
}

/* For transport_wait(): whichever queue the event is for. */
static void take_only(void *cq_context, void *arg)
{
	(void)arg;
	transport_event_taken(cq_context);
}

int transport_wait(struct transport *t, int timeout_ms)
{
	struct pollfd pfd = { .fd = cq_hub_fd(t->hub), .events = POLLIN };
	int reaped, ret;

	pthread_mutex_lock(&t->lock);
	arm_locked(t, true);
	/* A completion that came before the arm raised no event: reap it. */
	reaped = progress_locked(t);
	ret = t->error;
	pthread_mutex_unlock(&t->lock);
	if (ret || reaped)
		return ret;
	ret = real.poll(&pfd, 1, timeout_ms);
	if (ret < 0)
		return -errno;
	if (!ret)
		return -ETIMEDOUT;
	cq_hub_drain(cq_hub_slot(t->hub), take_only, NULL, 0);
	return 0;
}

void transport_peer_gone(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	t->peer_gone = true;
	if (!t->s.rx_eof)
		transport_fail_locked(t, -ECONNRESET);
	pthread_mutex_unlock(&t->lock);
}

int transport_event_fd(const struct transport *t)
{
	return cq_hub_fd(t->hub);
}

struct cq_hub *transport_hub(const struct transport *t)
{
	return t->hub;
}

/* Arms unless an event is still to come, then reaps. */
static void arm_and_reap_locked(struct transport *t)
{
	if (!t->armed)
		arm_locked(t, awaits_own_completions(t));
	progress_locked(t);
}

/* What a blocking call waits for is there, or it must look elsewhere. */
static bool readable_locked(const struct transport *t)
{
	return stream_available(&t->s) || t->s.rx_eof || t->error || t->frozen;
}

int transport_arm(struct transport *t)
{
	int ret;

	pthread_mutex_lock(&t->lock);
	arm_and_reap_locked(t);
	ret = t->error;
	pthread_mutex_unlock(&t->lock);
	return ret;
}

bool transport_arm_for_read(struct transport *t)
{
	bool ready;

	pthread_mutex_lock(&t->lock);
	arm_and_reap_locked(t);
	ready = readable_locked(t);
	pthread_mutex_unlock(&t->lock);
	return ready;
}

bool transport_direct_done(struct transport *t, uint64_t end)
{
	bool done;

	pthread_mutex_lock(&t->lock);
	arm_and_reap_locked(t);
	done = t->s.tx_completed >= end || t->error || t->peer_gone ||
	       t->frozen;
	pthread_mutex_unlock(&t->lock);
	return done;
}

bool transport_direct_credit(struct transport *t)
{
	bool ready;

	pthread_mutex_lock(&t->lock);
	arm_and_reap_locked(t);
	ready = send_refused_locked(t) || t->peer_closed ||
		(!stream_unsent(&t->s) && !send_queue_len(&t->queued) &&
		 stream_send_window(&t->s, 1));
	pthread_mutex_unlock(&t->lock);
	return ready;
}

void transport_event_taken(struct transport *t)
{
	pthread_mutex_lock(&t->lock);
	t->armed = false;
	pthread_mutex_unlock(&t->lock);
}

void transport_set_owner(struct transport *t, void *owner)
{
	cq_hub_lock(t->hub);
	t->owner = owner;
	cq_hub_unlock(t->hub);
}

void *transport_owner(const struct transport *t)
{
	return t->owner;
}

unsigned int transport_writes_in_flight(struct transport *t)
{
	unsigned int n;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	n = writes_left_locked(t);
	pthread_mutex_unlock(&t->lock);
	return n;
}

bool transport_queue_takes(struct transport *t, size_t len, bool grown)
{
	uint32_t size;
	bool room;

	pthread_mutex_lock(&t->lock);
	size = queue_size_locked(t);
	if (!grown && !t->s.tx_limit_asked)
		size = TRANSPORT_SEND_BUFFER;
	room = !send_refused_locked(t) && !t->queue_starved &&
	       queue_open_locked(t, clock_ms()) &&
	       send_queue_len(&t->queued) + len <= size;
	pthread_mutex_unlock(&t->lock);
	return room;
}

static int queue_opens_in_locked(struct transport *t)
{
	int64_t left, now;

	if (t->error || t->frozen || t->tx_shut || t->peer_gone ||
	    t->peer_closed || send_queue_len(&t->queued) ||
	    stream_send_window(&t->s, 1))
		return -1;
	now = clock_ms();
	left = credit_wait_since_locked(t, now) + TRANSPORT_QUEUE_OPEN_MS - now;
	return left < 0 ? 0 : (int)left;
}

int transport_queue_opens_in(struct transport *t)
{
	int ms;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	ms = queue_opens_in_locked(t);
	pthread_mutex_unlock(&t->lock);
	return ms;
}

size_t transport_queued(struct transport *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	n = t->peer_gone ? 0 : send_queue_len(&t->queued);
	pthread_mutex_unlock(&t->lock);
	return n;
}

unsigned int transport_posted_writes(struct transport *t, uint64_t *completions)
{
	unsigned int n;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	n = t->frozen ? 0 : t->sq_outstanding;
	*completions = t->send_completions;
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t transport_available(struct transport *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	n = t->frozen ? 0 : stream_available(&t->s);
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t transport_unacked(struct transport *t, size_t *unsent)
{
	size_t queued, n;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	queued = send_queue_len(&t->queued);
	*unsent = stream_unsent(&t->s) + queued;
	n = t->s.tx_staged - t->s.tx_completed + queued;
	pthread_mutex_unlock(&t->lock);
	return n;
}

uint64_t transport_peer_consumed(struct transport *t, uint64_t *unconsumed)
{
	uint64_t consumed;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	consumed = t->s.tx_released;
	*unconsumed = t->s.tx_staged + send_queue_len(&t->queued) - consumed;
	pthread_mutex_unlock(&t->lock);
	return consumed;
}

bool transport_peer_took_all(struct transport *t)
{
	bool done;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	done = (t->s.tx_released == t->s.tx_staged &&
		!send_queue_len(&t->queued)) ||
	       t->peer_gone || t->error;
	pthread_mutex_unlock(&t->lock);
	return done;
}

bool transport_read_to_fin(struct transport *t)
{
	bool done;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	/* After the FIN, an error cannot change what the stream held. */
	done = t->s.rx_eof && !stream_available(&t->s) && !t->hostile &&
	       t->late == LATE_NONE;
	pthread_mutex_unlock(&t->lock);
	return done;
}

bool transport_readable(struct transport *t)
{
	bool ready;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	ready = readable_locked(t);
	pthread_mutex_unlock(&t->lock);
	return ready;
}

/*
 * As TCP's (sk_stream_is_writeable()): while what is queued takes at
 * most two thirds of the send queue's room.
 */
static bool writable_locked(struct transport *t)
{
	if (t->error || t->tx_shut || t->peer_gone || t->peer_closed ||
	    t->frozen)
		return true;
	if (!send_queue_len(&t->queued) && stream_send_window(&t->s, 1))
		return true;
	if (t->queue_starved || !queue_open_locked(t, clock_ms()))
		return false;
	return (uint64_t)send_queue_len(&t->queued) * 3 <=
	       (uint64_t)queue_size_locked(t) * 2;
}

bool transport_writable(struct transport *t)
{
	bool ready;

	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	ready = writable_locked(t);
	pthread_mutex_unlock(&t->lock);
	return ready;
}

static uint64_t arrivals_locked(const struct transport *t)
{
	return t->s.rx_tail + t->s.rx_eof + (t->error != 0);
}

void transport_readiness(struct transport *t, struct transport_readiness *out)
{
	pthread_mutex_lock(&t->lock);
	progress_locked(t);
	/* Moving to TCP: nothing until the kernel socket carries it. */
	out->readable = (stream_available(&t->s) || t->error || t->s.rx_eof ||
			 t->rx_shut) &&
			!t->frozen;
	out->writable = writable_locked(t) && !t->frozen;
	out->queue_opens_in = out->writable ? -1 : queue_opens_in_locked(t);
	out->eof = t->s.rx_eof || t->rx_shut;
	out->fin = t->s.rx_eof;
	out->failed = t->error != 0;
	out->shut = t->tx_shut;
	out->arrivals = arrivals_locked(t);
	out->corked = corked_locked(t);
	pthread_mutex_unlock(&t->lock);
}

uint64_t transport_arrivals(struct transport *t)
{
	uint64_t n;

	pthread_mutex_lock(&t->lock);
	n = arrivals_locked(t);
	pthread_mutex_unlock(&t->lock);
	return n;
}

void transport_counters(struct transport *t, struct transport_counters *out)
{
	pthread_mutex_lock(&t->lock);
	*out = t->counters;
	pthread_mutex_unlock(&t->lock);
}

void transport_destroy(struct transport *t)
{
	if (!t)
		return;
	rings_forget(t);
	if (t->id->qp)
		rdmacm.destroy_qp(t->id);
	if (t->cq)
		ibv.destroy_cq(t->cq);
	if (t->hub)
		cq_hub_put(t->hub);
	/* A transport that failed may have lost its device with it. */
	if (!t->error)
		spare_keep(t);
	rings_destroy(t);
	queue_gave(send_queue_len(&t->queued));
	send_queue_clear(&t->queued);
	if (t->pd)
		ibv.dealloc_pd(t->pd);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
