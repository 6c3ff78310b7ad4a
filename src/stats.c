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

#include "log.h"
#include "procinfo.h"
#include "real.h"
#include "stats.h"

static struct {
	pthread_mutex_t lock;
	bool enabled;
	bool failed; /* creation failed once: do not retry per connection */
	bool unpublished; /* seg is a fork child's anonymous copy */
	/* A fork child's view of its parent's segment, not yet copied. */
	struct roceshim_stats_header *inherited; /* atomic */
	unsigned int row_count;
	unsigned int cursor; /* where the search for a row to reuse starts */
	unsigned int fresh;  /* rows from here on have never been used */
	struct roceshim_stats_header *seg; /* atomic */
	size_t size;
} st = { .lock = PTHREAD_MUTEX_INITIALIZER };

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

static uint64_t unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void segment_name(char *buf, size_t size, pid_t pid)
{
	snprintf(buf, size, "%s%d", ROCESHIM_STATS_SHM_PREFIX, (int)pid);
}

void stats_configure(bool enabled, unsigned int rows)
{
	st.enabled = enabled;
	st.row_count = rows;
}

/* Maps a fresh segment for this pid; a leftover of the same name is stale. */
static struct roceshim_stats_header *segment_map(size_t size)
{
	char name[64];
	void *map;
	int fd;

	segment_name(name, sizeof(name), getpid());
	fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EEXIST) {
		shm_unlink(name);
		fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC,
			      0644);
	}
	if (fd < 0) {
		log_warn("stats: shm_open(%s): %s; stats are off", name,
			 strerror(errno));
		return NULL;
	}
	/* Readable by monitoring users whatever the umask. */
	if (fchmod(fd, 0644) || ftruncate(fd, size)) {
		log_warn("stats: sizing %s: %s; stats are off", name,
			 strerror(errno));
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
	seg->created_unix_ms = unix_ms();
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
	if (!seg)
		return;
	memcpy(seg, st.seg, st.size);
	__atomic_store_n(&st.seg, seg, __ATOMIC_RELEASE);
}

/*
 * A fork child counts into a private copy of its parent's segment, made
 * on its first count: most children exec or exit at once and never need
 * it.  Writing through the parent's mapping would corrupt its stats.
 */
static void segment_adopt_locked(void)
{
	struct roceshim_stats_header *parent = st.inherited;
	void *copy;

	if (!parent)
		return;
	__atomic_store_n(&st.inherited, NULL, __ATOMIC_RELAXED);
	copy = mmap(NULL, st.size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (copy != MAP_FAILED) {
		memcpy(copy, parent, st.size);
		header_stamp(copy);
	}
	munmap(parent, st.size);
	st.unpublished = copy != MAP_FAILED;
	st.failed = copy == MAP_FAILED;
	__atomic_store_n(&st.seg, st.unpublished ? copy : NULL,
			 __ATOMIC_RELEASE);
}

static struct roceshim_stats_header *segment_get_locked(void)
{
	segment_adopt_locked();
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
	struct roceshim_stats_header *seg;

	seg = __atomic_load_n(&st.seg, __ATOMIC_ACQUIRE);
	if (__builtin_expect(!seg, 0) &&
	    __atomic_load_n(&st.inherited, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&st.lock);
		segment_adopt_locked();
		seg = st.seg;
		pthread_mutex_unlock(&st.lock);
	}
	return seg;
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
	if (st.fresh < n)
		return (int)st.fresh++;
	for (i = 0; i < n; i++) {
		unsigned int r = (st.cursor + i) % n;

		if (row_at(seg, r)->state == ROCESHIM_ROW_CLOSED) {
			st.cursor = r + 1;
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
	row->opened_unix_ms = unix_ms();
	row->local = *local;
	row->peer = *peer;
	memset(&row->counters, 0, sizeof(row->counters));
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

void stats_downgrade(int index, enum roceshim_downgrade cause)
{
	struct roceshim_stats_header *seg = stats_segment();
	struct roceshim_stats_row *row;

	if (!seg || cause >= ROCESHIM_DOWNGRADE_COUNT)
		return;
	counter_add(&seg->global.downgrades[cause], 1);
	if (index < 0)
		return;
	row = row_at(seg, index);
	row_begin_update(row);
	row->transport = ROCESHIM_TRANSPORT_TCP;
	row->downgrade = cause;
	row_end_update(row);
}

void stats_row_close(int index)
{
	/* Under the lock: the row becomes reusable by row_find_locked(). */
	pthread_mutex_lock(&st.lock);
	segment_adopt_locked();
	stats_row_set_state(index, ROCESHIM_ROW_CLOSED);
	pthread_mutex_unlock(&st.lock);
}

static void count_io(int index, size_t bytes, bool tx, bool rdma)
{
	struct roceshim_stats_header *seg = stats_segment();
	struct roceshim_stats_counters *c;
	int i;

	if (!seg)
		return;
	for (i = 0; i < 2; i++) {
		if (i == 0) {
			c = &seg->global.totals;
		} else {
			if (index < 0)
				return;
			c = &row_at(seg, index)->counters;
		}
		if (rdma)
			counter_add(tx ? &c->rdma_tx_bytes : &c->rdma_rx_bytes,
				    bytes);
		else
			counter_add(tx ? &c->tcp_tx_bytes : &c->tcp_rx_bytes,
				    bytes);
		counter_add(tx ? &c->tx_msgs : &c->rx_msgs, 1);
	}
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

void stats_fork_prepare(void)
{
	pthread_mutex_lock(&st.lock);
}

void stats_fork_parent(void)
{
	pthread_mutex_unlock(&st.lock);
}

void stats_fork_child(void)
{
	/*
	 * The copy waits for the child's first count (segment_adopt_locked).
	 * A parent's anonymous copy is shared with the child just the same.
	 */
	if (st.seg) {
		__atomic_store_n(&st.inherited, st.seg, __ATOMIC_RELAXED);
		__atomic_store_n(&st.seg, NULL, __ATOMIC_RELAXED);
		st.unpublished = false;
	}
	pthread_mutex_unlock(&st.lock);
}

void stats_exec_prepare(void)
{
	char name[64];

	/*
	 * The new image would inherit our pid, and with it our segment's name.
	 * If the exec fails, the mapping is still ours: the next row opened
	 * publishes it again.
	 */
	pthread_mutex_lock(&st.lock);
	if (st.seg && !st.unpublished) {
		segment_name(name, sizeof(name), getpid());
		shm_unlink(name);
		st.unpublished = true;
	}
	pthread_mutex_unlock(&st.lock);
}

void stats_shutdown(void)
{
	char name[64];

	/*
	 * Only the name goes: other threads may still be counting into the
	 * mapping while the process exits.
	 */
	pthread_mutex_lock(&st.lock);
	if (st.seg && !st.unpublished) {
		segment_name(name, sizeof(name), getpid());
		shm_unlink(name);
	}
	pthread_mutex_unlock(&st.lock);
}
