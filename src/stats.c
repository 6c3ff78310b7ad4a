// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fork_page.h"
#include "lock_by.h"
#include "log.h"
#include "procinfo.h"
#include "real.h"
#include "stats.h"

static struct {
	pthread_mutex_t lock;
	bool enabled;
	bool failed; /* creation failed once: do not retry per connection */
	bool unpublished; /* seg is a fork child's anonymous copy */
	/*
	 * The copy a fork child counts into: written before each fork, kept
	 * by the parent for the next one, so that a fork maps nothing.
	 */
	struct roceshim_stats_header *spare;
	unsigned int spare_rows; /* rows the last copy may have written */
	/* In a fork child: its parent's segment, unmapped when it publishes. */
	struct roceshim_stats_header *parent_seg;
	unsigned int row_count;
	unsigned int cursor; /* where the search for a row to reuse starts */
	unsigned int fresh;  /* rows from here on have never been used */
	unsigned int span;   /* rows from here on are free: the copy's bound */
	struct roceshim_stats_header *seg; /* atomic */
	size_t size;
} st FORK_DATA = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Release: a row's add is seen only after the global add before it. */
static inline void counter_add(uint64_t *counter, uint64_t value)
{
	__atomic_fetch_add(counter, value, __ATOMIC_RELEASE);
}

static inline struct roceshim_stats_row *
row_at(struct roceshim_stats_header *seg, int row)
{
	return (struct roceshim_stats_row *)((char *)seg + sizeof(*seg)) + row;
}

/* The prefix, then the pid in decimal: no stdio, as it runs at start-up. */
static void segment_name(char *buf, size_t size, pid_t pid)
{
	char digits[16];
	size_t n = 0, len = strlen(ROCESHIM_STATS_SHM_PREFIX);
	unsigned int v = (unsigned int)pid;

	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v && n < sizeof(digits));
	if (len + n + 1 > size) {
		buf[0] = '\0';
		return;
	}
	memcpy(buf, ROCESHIM_STATS_SHM_PREFIX, len);
	while (n)
		buf[len++] = digits[--n];
	buf[len] = '\0';
}

void stats_configure(bool enabled, unsigned int rows)
{
	char name[64];

	st.enabled = enabled;
	st.row_count = rows;
	/* A segment with our pid was left by the image we exec'ed from. */
	segment_name(name, sizeof(name), getpid());
	shm_unlink(name);
}

/* Maps a fresh segment for this pid; a leftover of the same name is stale. */
static struct roceshim_stats_header *segment_map(size_t size)
{
	char name[64];
	void *map;
	int fd, err;

	segment_name(name, sizeof(name), getpid());
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EEXIST) {
		shm_unlink(name);
		fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC,
			      0644);
	}
	if (fd < 0) {
		err = errno;
		/*
		 * A chroot or sandbox without a writable /dev/shm (dovecot's
		 * login processes): expected there, and the program's
		 * stderr may be its log.
		 */
		log_at(err == ENOENT || err == EACCES || err == EROFS
			       ? LOG_LEVEL_INFO
			       : LOG_LEVEL_WARN,
		       "stats: shm_open(%s): %s; stats are off", name,
		       strerror(err));
		return NULL;
	}
	/*
	 * Readable by monitoring users whatever the umask; its pages had now,
	 * since a store into one that a full tmpfs cannot give is SIGBUS.
	 */
	if (fchmod(fd, 0644) || ftruncate(fd, size)) {
		err = errno;
	} else {
		/* A signal (a stop and continue, say) interrupts tmpfs's. */
		do {
			err = posix_fallocate(fd, 0, size);
		} while (err == EINTR);
	}
	if (err) {
		log_warn("stats: sizing %s: %s; stats are off", name,
			 strerror(err));
		goto fail;
	}
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		log_warn("stats: mmap(%s): %s; stats are off", name,
			 strerror(errno));
		goto fail;
	}
	real.close(fd);
	return map;
fail:
	real.close(fd);
	shm_unlink(name);
	return NULL;
}

static void header_stamp(struct roceshim_stats_header *seg)
{
	seg->pid = getpid();
	seg->start_ticks = procinfo_start_ticks(seg->pid);
	seg->created_unix_ms = clock_unix_ms();
	procinfo_command(seg->pid, seg->command, sizeof(seg->command));
}

static struct roceshim_stats_header *segment_create_locked(void)
{
	size_t size = sizeof(struct roceshim_stats_header) +
		      (size_t)st.row_count * sizeof(struct roceshim_stats_row);
	struct roceshim_stats_header *seg = segment_map(size);

	if (!seg)
		return NULL;
	seg->layout_version = ROCESHIM_STATS_LAYOUT_VERSION;
	seg->header_size = sizeof(*seg);
	seg->row_size = sizeof(struct roceshim_stats_row);
	seg->row_count = st.row_count;
	st.fresh = 0;
	st.span = 0;
	header_stamp(seg);
	/* Readers trust nothing before the magic appears. */
	__atomic_store_n(&seg->magic, ROCESHIM_STATS_MAGIC, __ATOMIC_RELEASE);
	st.size = size;
	return seg;
}

/*
 * A fork child's copy becomes a named segment.  The copy stays mapped:
 * other threads may still hold its address, and counts they add there
 * after the switch are the only ones lost.
 */
static void segment_publish_locked(void)
{
	struct roceshim_stats_header *seg = segment_map(st.size);

	st.unpublished = false;
	if (st.parent_seg)
		munmap(st.parent_seg, st.size);
	st.parent_seg = NULL;
	if (!seg)
		return;
	memcpy(seg, st.seg, st.size);
	header_stamp(seg);
	__atomic_store_n(&st.seg, seg, __ATOMIC_RELEASE);
}

static struct roceshim_stats_header *segment_get_locked(void)
{
	if (st.unpublished)
		segment_publish_locked();
	if (!st.seg && st.enabled && !st.failed) {
		struct roceshim_stats_header *seg = segment_create_locked();

		st.failed = !seg;
		__atomic_store_n(&st.seg, seg, __ATOMIC_RELEASE);
	}
	return st.seg;
}

struct roceshim_stats_header *stats_segment(void)
{
	return __atomic_load_n(&st.seg, __ATOMIC_ACQUIRE);
}

static void count_connection(struct roceshim_stats_global *g,
			     enum roceshim_reason reason)
{
	counter_add(&g->connections_opened, 1);
	if (reason == ROCESHIM_REASON_NONE) {
		counter_add(&g->connections_rdma, 1);
		return;
	}
	counter_add(&g->connections_tcp, 1);
	if (reason < ROCESHIM_REASON_COUNT)
		counter_add(&g->fallbacks[reason], 1);
}

void stats_count_connected(enum roceshim_reason reason)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (seg)
		count_connection(&seg->global, reason);
}

/* A free row, else the next closed one after the cursor; -1 if none. */
static int row_find_locked(struct roceshim_stats_header *seg)
{
	unsigned int i, n = seg->row_count;

	/*
	 * Free rows are taken in order and never come back: each used row is
	 * passed over once, not at every open.
	 */
	while (st.fresh < n &&
	       row_at(seg, st.fresh)->state != ROCESHIM_ROW_FREE)
		st.fresh++;
	if (st.fresh < n) {
		if (st.span <= st.fresh)
			st.span = st.fresh + 1;
		return (int)st.fresh++;
	}
	for (i = 0; i < n; i++) {
		unsigned int r = (st.cursor + i) % n;

		if (row_at(seg, r)->state == ROCESHIM_ROW_CLOSED) {
			st.cursor = r + 1;
			if (st.span <= r)
				st.span = r + 1;
			return r;
		}
	}
	return -1;
}

static void row_begin_update(struct roceshim_stats_row *row)
{
	__atomic_fetch_add(&row->seq, 1, __ATOMIC_ACQ_REL);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void row_end_update(struct roceshim_stats_row *row)
{
	__atomic_fetch_add(&row->seq, 1, __ATOMIC_RELEASE);
}

int stats_row_open(int fd, enum roceshim_role role,
		   enum roceshim_row_state state, enum roceshim_reason reason,
		   const struct roceshim_stats_endpoint *local,
		   const struct roceshim_stats_endpoint *peer)
{
	struct roceshim_stats_header *seg;
	struct roceshim_stats_row *row;
	int index = -1;

	pthread_mutex_lock(&st.lock);
	seg = segment_get_locked();
	if (!seg)
		goto out;
	if (role == ROCESHIM_ROLE_LISTENER)
		counter_add(&seg->global.listeners, 1);
	else if (state != ROCESHIM_ROW_CONNECTING)
		count_connection(&seg->global, reason);
	index = row_find_locked(seg);
	if (index < 0) {
		counter_add(&seg->global.rows_dropped, 1);
		goto out;
	}
	row = row_at(seg, index);
	row_begin_update(row);
	row->fd = fd;
	row->role = role;
	row->transport = reason == ROCESHIM_REASON_NONE
				 ? ROCESHIM_TRANSPORT_RDMA
				 : ROCESHIM_TRANSPORT_TCP;
	row->reason = reason;
	row->downgrade = ROCESHIM_DOWNGRADE_NONE;
	row->opened_unix_ms = clock_unix_ms();
	row->local = *local;
	row->peer = *peer;
	memset(&row->counters, 0, sizeof(row->counters));
	memset(&row->rings, 0, sizeof(row->rings));
	__atomic_store_n(&row->state, state, __ATOMIC_RELAXED);
	row_end_update(row);
out:
	pthread_mutex_unlock(&st.lock);
	return index;
}

/* Row index of the segment, its update begun; NULL for none. */
static struct roceshim_stats_row *row_update_begin(int index)
{
	struct roceshim_stats_header *seg = stats_segment();
	struct roceshim_stats_row *row;

	if (!seg || index < 0)
		return NULL;
	row = row_at(seg, index);
	row_begin_update(row);
	return row;
}

void stats_row_set_state(int index, enum roceshim_row_state state)
{
	struct roceshim_stats_row *row = row_update_begin(index);

	if (!row)
		return;
	__atomic_store_n(&row->state, state, __ATOMIC_RELAXED);
	row_end_update(row);
}

void stats_row_set_reason(int index, enum roceshim_reason reason)
{
	struct roceshim_stats_row *row = row_update_begin(index);

	if (!row)
		return;
	row->transport = reason == ROCESHIM_REASON_NONE
				 ? ROCESHIM_TRANSPORT_RDMA
				 : ROCESHIM_TRANSPORT_TCP;
	row->reason = reason;
	row_end_update(row);
}

void stats_row_set_local(int index, const struct roceshim_stats_endpoint *local)
{
	struct roceshim_stats_row *row = row_update_begin(index);

	if (!row)
		return;
	row->local = *local;
	row_end_update(row);
}

/* The row says TCP, moved there by cause. */
static void row_show_moved(struct roceshim_stats_header *seg, int index,
			   enum roceshim_downgrade cause)
{
	struct roceshim_stats_row *row = row_at(seg, index);

	row_begin_update(row);
	row->transport = ROCESHIM_TRANSPORT_TCP;
	row->downgrade = cause;
	row_end_update(row);
}

void stats_downgrade(int index, enum roceshim_downgrade cause)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (!seg || cause >= ROCESHIM_DOWNGRADE_COUNT)
		return;
	counter_add(&seg->global.downgrades[cause], 1);
	if (index >= 0)
		row_show_moved(seg, index, cause);
}

void stats_row_claimed(int index, bool moved)
{
	struct roceshim_stats_header *seg;

	pthread_mutex_lock(&st.lock);
	seg = segment_get_locked();
	pthread_mutex_unlock(&st.lock);
	if (seg && index >= 0 && moved)
		row_show_moved(seg, index, ROCESHIM_DOWNGRADE_FORK);
}

void stats_row_close(int index)
{
	/* Under the lock: the row becomes reusable by row_find_locked(). */
	pthread_mutex_lock(&st.lock);
	stats_row_set_state(index, ROCESHIM_ROW_CLOSED);
	pthread_mutex_unlock(&st.lock);
}

static inline __attribute__((always_inline)) void
count_io_in(struct roceshim_stats_counters *c, size_t bytes, bool tx, bool rdma)
{
	if (rdma)
		counter_add(tx ? &c->rdma_tx_bytes : &c->rdma_rx_bytes, bytes);
	else
		counter_add(tx ? &c->tcp_tx_bytes : &c->tcp_rx_bytes, bytes);
	counter_add(tx ? &c->tx_msgs : &c->rx_msgs, 1);
}

/* Inline in each caller, so that tx and rdma are known: straight code. */
static inline __attribute__((always_inline)) void
count_io(int index, size_t bytes, bool tx, bool rdma)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (!seg)
		return;
	count_io_in(&seg->global.totals, bytes, tx, rdma);
	if (index >= 0)
		count_io_in(&row_at(seg, index)->counters, bytes, tx, rdma);
}

void stats_tcp_tx(int index, size_t bytes)
{
	count_io(index, bytes, true, false);
}

void stats_tcp_rx(int index, size_t bytes)
{
	count_io(index, bytes, false, false);
}

void stats_rdma_tx(int index, size_t bytes)
{
	count_io(index, bytes, true, true);
}

void stats_rdma_rx(int index, size_t bytes)
{
	count_io(index, bytes, false, true);
}

void stats_error(int index)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (!seg)
		return;
	counter_add(&seg->global.totals.errors, 1);
	if (index >= 0)
		counter_add(&row_at(seg, index)->counters.errors, 1);
}

void stats_mem_bytes(bool tx, enum roceshim_mem_class cls, size_t bytes)
{
	struct roceshim_stats_header *seg = stats_segment();
	struct roceshim_stats_memory *m;

	if (!seg || cls >= ROCESHIM_MEM_CLASS_COUNT)
		return;
	m = &seg->global.memory;
	counter_add(tx ? &m->tx_bytes[cls] : &m->rx_bytes[cls], bytes);
}

void stats_mem_event(enum stats_mem_event ev, uint64_t n)
{
	struct roceshim_stats_header *seg = stats_segment();
	struct roceshim_stats_memory *m;
	uint64_t *c;

	if (!seg)
		return;
	m = &seg->global.memory;
	switch (ev) {
	case STATS_MEM_DEVICE_REFUSED:
		c = &m->device_refused;
		break;
	case STATS_MEM_ZEROCOPY_TX:
		c = &m->zerocopy_tx_bytes;
		break;
	case STATS_MEM_REGISTRATION:
		c = &m->registrations;
		break;
	case STATS_MEM_REGISTRATION_HIT:
		c = &m->registration_hits;
		break;
	case STATS_MEM_REGISTRATION_STALE:
		c = &m->registrations_stale;
		break;
	case STATS_MEM_EVICTION:
		c = &m->evictions;
		break;
	case STATS_MEM_REGISTRATION_FAILURE:
		c = &m->registration_failures;
		break;
	default:
		return;
	}
	counter_add(c, n);
}

void stats_mem_registered(int64_t delta)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (seg)
		counter_add(&seg->global.memory.registered_bytes,
			    (uint64_t)delta);
}

bool stats_rings(int index, enum stats_ring_event ev, int64_t pinned_delta,
		 const struct stats_ring_sizes *now)
{
	struct roceshim_stats_header *seg = stats_segment();
	struct roceshim_stats_rings *g;
	struct roceshim_stats_row_rings *r;

	if (!seg)
		return false;
	g = &seg->global.rings;
	counter_add(&g->pinned_bytes, (uint64_t)pinned_delta);
	if (ev == STATS_RING_GREW)
		counter_add(&g->grows, 1);
	else if (ev == STATS_RING_SHRANK)
		counter_add(&g->shrinks, 1);
	else if (ev == STATS_RING_REFUSED)
		counter_add(&g->refused, 1);
	if (index < 0)
		return true;
	r = &row_at(seg, index)->rings;
	__atomic_store_n(&r->pinned_bytes, now->pinned_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&r->rx_ring_bytes, now->rx_bytes, __ATOMIC_RELAXED);
	__atomic_store_n(&r->tx_ring_bytes, now->tx_bytes, __ATOMIC_RELAXED);
	if (ev == STATS_RING_GREW)
		counter_add(&r->grows, 1);
	else if (ev == STATS_RING_SHRANK)
		counter_add(&r->shrinks, 1);
	return true;
}

void stats_malformed_input(void)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (seg)
		counter_add(&seg->global.malformed_input, 1);
}

void stats_credit_stall(int index)
{
	struct roceshim_stats_header *seg = stats_segment();

	if (!seg)
		return;
	counter_add(&seg->global.totals.credit_stalls, 1);
	if (index >= 0)
		counter_add(&row_at(seg, index)->counters.credit_stalls, 1);
}

/*
 * A fork child's copy: the header and the rows in use.  Closed rows are
 * the parent's history, and they and the never-used rows stay free in the
 * copy, so that a fork writes a few pages, not the whole segment.
 * Returns the rows the copy spans.
 */
static unsigned int FORK_CODE
copy_rows_in_use(struct roceshim_stats_header *to,
		 const struct roceshim_stats_header *from, unsigned int written)
{
	const struct roceshim_stats_row *rows = (const void *)(from + 1);
	unsigned int i,
		used = st.span < from->row_count ? st.span : from->row_count,
		end = used > written ? used : written;
	struct roceshim_stats_row *copy;

	memcpy(to, from, sizeof(*to));
	/*
	 * The rings and registrations are their owners': a child holds none
	 * of their memory.
	 */
	to->global.rings.pinned_bytes = 0;
	to->global.memory.registered_bytes = 0;
	for (i = 0; i < end; i++) {
		copy = row_at(to, (int)i);
		if (i >= used || rows[i].state == ROCESHIM_ROW_FREE ||
		    rows[i].state == ROCESHIM_ROW_CLOSED) {
			/* Read first: a page left alone is not copied. */
			if (copy->state != ROCESHIM_ROW_FREE)
				memset(copy, 0, sizeof(*copy));
			continue;
		}
		*copy = rows[i];
		copy->rings.pinned_bytes = 0;
		copy->rings.rx_ring_bytes = 0;
		copy->rings.tx_ring_bytes = 0;
		/* A row caught mid-update by a thread the fork leaves behind.
		 */
		if (copy->seq & 1)
			copy->seq++;
	}
	return used;
}

/*
 * Writing through the parent's mapping would corrupt its stats, so the
 * child counts into a private copy.  It is made here, before the fork,
 * so that it holds the rows as they are at the fork (the parent goes on
 * changing its segment at once); the child keeps it and publishes a
 * segment of its own only when it opens a connection: most children
 * exec at once, and a segment named after them would outlive the exec.
 */
void FORK_CODE stats_fork_prepare(void)
{
	pthread_mutex_lock(&st.lock);
	if (!st.seg)
		return;
	if (!st.spare) {
		void *spare = mmap(NULL, st.size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (spare == MAP_FAILED)
			return;
		st.spare = spare;
		st.spare_rows = 0;
	}
	/* The rows of the last copy that are not in use now must be free. */
	st.spare_rows = copy_rows_in_use(st.spare, st.seg, st.spare_rows);
}

void FORK_CODE stats_fork_parent(void)
{
	pthread_mutex_unlock(&st.lock);
}

void FORK_CODE stats_fork_child(void)
{
	if (st.seg) {
		/* A fork of a child that never published: its parent's too. */
		if (st.parent_seg)
			munmap(st.parent_seg, st.size);
		/*
		 * Unmapped when the child publishes: most exit or exec first.
		 * A child without a copy never publishes.
		 */
		st.parent_seg = st.spare ? st.seg : NULL;
		if (!st.spare)
			munmap(st.seg, st.size);
		st.seg = st.spare;
		st.unpublished = st.spare != NULL;
		st.failed = !st.spare;
		/* The rows left out are free in the copy. */
		st.fresh = 0;
		st.span = st.spare_rows;
	}
	st.spare = NULL;
	st.spare_rows = 0;
	pthread_mutex_unlock(&st.lock);
}

void stats_shutdown(int64_t deadline_ms)
{
	char name[64];

	/*
	 * Only the name goes: other threads may still be counting into the
	 * mapping while the process exits.
	 */
	if (deadline_ms < 0)
		pthread_mutex_lock(&st.lock);
	else if (!lock_by(&st.lock, deadline_ms))
		return;
	if (st.seg && !st.unpublished) {
		segment_name(name, sizeof(name), getpid());
		shm_unlink(name);
	}
	pthread_mutex_unlock(&st.lock);
}
