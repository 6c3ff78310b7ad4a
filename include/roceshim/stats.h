/* SPDX-License-Identifier: MIT */
/*
 * roceshim statistics segment: the contract between libroceshim.so, which
 * publishes one segment per process, and any reader (roceshim-stat,
 * monitoring agents).
 *
 * Each process that opens a TCP connection under roceshim creates the POSIX
 * shared-memory object "/roceshim-<pid>" (visible as /dev/shm/roceshim-<pid>)
 * and removes it at exit.  The segment is a header followed by row_count
 * rows of row_size bytes.  Readers must check magic and layout_version
 * before anything else and refuse a segment of another layout version:
 * fields move between versions.
 *
 * Concurrency: counters are 64-bit and only grow while a row keeps its
 * identity; they are written with atomic stores or adds and may be read
 * without locking.  A row's identity (state, fd, addresses, transport,
 * reason) is published under a sequence count: the writer makes seq odd,
 * updates, then makes it even.  A reader copies the row and accepts the
 * copy only if seq was even and unchanged across the copy.
 *
 * Every byte or message counted in a row is counted in the global totals
 * first (the row's add is a release).  A reader that wants the sum of the
 * rows never to exceed the totals copies the rows first and the totals
 * after an acquire fence.
 */
#ifndef ROCESHIM_STATS_H
#define ROCESHIM_STATS_H

#include <stdint.h>

#define ROCESHIM_STATS_MAGIC	      0x4d485352u /* "RSHM" little endian */
#define ROCESHIM_STATS_LAYOUT_VERSION 5u
#define ROCESHIM_STATS_SHM_PREFIX     "/roceshim-"
#define ROCESHIM_STATS_COMMAND_LEN    64

/* Why a connection is not on RDMA.  Values are stable across versions. */
enum roceshim_reason {
	ROCESHIM_REASON_NONE = 0,	    /* on RDMA, or not decided yet */
	ROCESHIM_REASON_DISABLED = 1,	    /* ROCESHIM_RDMA=0 */
	ROCESHIM_REASON_EXCLUDED = 2,	    /* include/exclude rules */
	ROCESHIM_REASON_NO_DEVICE = 3,	    /* no RDMA device on this host */
	ROCESHIM_REASON_NO_ROUTE = 4,	    /* no RDMA device on the route */
	ROCESHIM_REASON_PEER_REJECTED = 5,  /* peer has no roceshim listener */
	ROCESHIM_REASON_TIMEOUT = 6,	    /* RDMA handshake timed out */
	ROCESHIM_REASON_NEGATIVE_CACHE = 7, /* peer recently failed */
	ROCESHIM_REASON_RESOURCE = 8,	    /* QP, CQ, MR or memory failure */
	ROCESHIM_REASON_UNSUPPORTED = 9,    /* RDMA path not available here */
	ROCESHIM_REASON_PEER_TCP = 10,	    /* the peer did not offer RDMA */
	ROCESHIM_REASON_NO_RDMA_LIBS = 11,  /* libibverbs/librdmacm unusable */
	ROCESHIM_REASON_FD_LIMIT = 12,	    /* near RLIMIT_NOFILE */
	ROCESHIM_REASON_MEMLOCK_LIMIT = 13, /* rings beyond RLIMIT_MEMLOCK */
	ROCESHIM_REASON_SHARED = 14,	    /* shared during the handshake */
	ROCESHIM_REASON_ABANDONED = 15,	    /* shut down while connecting */
	ROCESHIM_REASON_IO_URING = 16,	    /* the process set up io_uring */
	ROCESHIM_REASON_PREFORK = 17,	    /* the server's workers accept */
	ROCESHIM_REASON_HANDOFF = 18,	    /* another process takes them */
	ROCESHIM_REASON_REUSEPORT = 19,	    /* listeners of other processes
					       share the port */
	ROCESHIM_REASON_COUNT = 24	    /* array size, room to grow */
};

/*
 * Why an upgraded connection moved to its kernel TCP socket mid-stream
 * (a downgrade).  Values are stable across versions.
 */
enum roceshim_downgrade {
	ROCESHIM_DOWNGRADE_NONE = 0,	     /* still on RDMA, or never there */
	ROCESHIM_DOWNGRADE_FORK = 1,	     /* a fork child used it, or the
						parent closed it after a fork */
	ROCESHIM_DOWNGRADE_EXEC = 2,	     /* it survives an exec or spawn */
	ROCESHIM_DOWNGRADE_FD_PASSED = 3,    /* sent to another process */
	ROCESHIM_DOWNGRADE_QP_ERROR = 4,     /* the queue pair failed */
	ROCESHIM_DOWNGRADE_DEVICE = 5,	     /* the RDMA device went away */
	ROCESHIM_DOWNGRADE_PEER = 6,	     /* the peer moved it */
	ROCESHIM_DOWNGRADE_EXIT = 7,	     /* the process exited with it
						shared with a fork child */
	ROCESHIM_DOWNGRADE_QP_SILENT = 8,    /* its queue pair answered no
						write for 30 s */
	ROCESHIM_DOWNGRADE_SPLICE = 9,	     /* splice() took its bytes */
	ROCESHIM_DOWNGRADE_CREDENTIALS = 10, /* the process changed its
						credentials (setuid) */
	ROCESHIM_DOWNGRADE_STDIO = 11,	     /* libc's stdio uses it itself:
						dup'd onto fd 0, 1 or 2, or
						a stream of it open at exit */
	ROCESHIM_DOWNGRADE_URGENT = 12,	     /* urgent data (MSG_OOB) sent or
						read */
	ROCESHIM_DOWNGRADE_SOCKOPT = 13,     /* an option only kernel TCP
						has (SO_RCVLOWAT, ...) */
	ROCESHIM_DOWNGRADE_ACCEPT_QUEUE = 14, /* the listener's full accept
						 queue held its TCP
						 connection back */
	ROCESHIM_DOWNGRADE_DISCONNECT = 15,   /* connect(AF_UNSPEC)
						 dissolved it */
	ROCESHIM_DOWNGRADE_IO_URING = 16,     /* the process set up io_uring,
						 which reads and writes the
						 kernel socket itself */
	ROCESHIM_DOWNGRADE_EPOLL_DUP = 17,    /* a second fd of it joined
						 an epoll set it was in */
	ROCESHIM_DOWNGRADE_SEND_STALL = 18,   /* a blocking send waited
						 while the peer read
						 nothing */
	ROCESHIM_DOWNGRADE_REUSEPORT = 19,    /* another listener on its
						 port accepted it */
	ROCESHIM_DOWNGRADE_COUNT = 24	      /* array size, room to grow */
};

enum roceshim_row_state {
	ROCESHIM_ROW_FREE = 0,
	ROCESHIM_ROW_CONNECTING = 1,
	ROCESHIM_ROW_OPEN = 2,
	ROCESHIM_ROW_LISTENING = 3,
	ROCESHIM_ROW_FAILED = 4,
	ROCESHIM_ROW_CLOSED = 5
};

enum roceshim_role {
	ROCESHIM_ROLE_ACTIVE = 1,  /* connect() side */
	ROCESHIM_ROLE_PASSIVE = 2, /* accept() side */
	ROCESHIM_ROLE_LISTENER = 3
};

enum roceshim_transport {
	ROCESHIM_TRANSPORT_TCP = 1,
	ROCESHIM_TRANSPORT_RDMA = 2
};

/* An endpoint: IPv4 addresses are stored v4-mapped, family says how. */
struct roceshim_stats_endpoint {
	uint8_t addr[16];
	uint16_t port;	 /* host byte order */
	uint16_t family; /* AF_INET or AF_INET6 */
};

struct roceshim_stats_counters {
	uint64_t tcp_tx_bytes;
	uint64_t tcp_rx_bytes;
	uint64_t rdma_tx_bytes;
	uint64_t rdma_rx_bytes;
	uint64_t tx_msgs;
	uint64_t rx_msgs;
	uint64_t credit_stalls;
	uint64_t errors;
};

/*
 * What kind of memory a program's buffer is, as the CUDA driver says
 * (pageable when the process has no CUDA).  Values are stable.
 */
enum roceshim_mem_class {
	ROCESHIM_MEM_PAGEABLE = 0, /* ordinary host memory */
	ROCESHIM_MEM_PINNED = 1,   /* page-locked by CUDA (cudaHostAlloc,
				      cudaHostRegister) */
	ROCESHIM_MEM_DEVICE = 2,   /* GPU memory: refused with EFAULT */
	ROCESHIM_MEM_MANAGED = 3,  /* CUDA managed (unified) memory */
	ROCESHIM_MEM_CLASS_COUNT = 4
};

/*
 * The process's socket buffers by memory class, and the registration
 * cache of pinned memory (docs/cuda.md).  The byte counts are those the
 * calls moved, on either path; they stay zero in a process without CUDA.
 */
struct roceshim_stats_memory {
	uint64_t tx_bytes[ROCESHIM_MEM_CLASS_COUNT];
	uint64_t rx_bytes[ROCESHIM_MEM_CLASS_COUNT];
	uint64_t device_refused;	/* calls refused with EFAULT */
	uint64_t zerocopy_tx_bytes;	/* sent straight from pinned memory */
	uint64_t registrations;		/* pinned ranges registered */
	uint64_t registration_hits;	/* sends that found one registered */
	uint64_t registrations_stale;	/* dropped: the memory was freed */
	uint64_t evictions;		/* dropped to stay within the cap */
	uint64_t registered_bytes;	/* registered now */
	uint64_t registration_failures; /* refused: over the cap, or by the
					   device */
};

/*
 * The rings of the process's RDMA connections (each direction's ring
 * belongs to its receiver; the sender's staging ring mirrors it): the
 * bytes registered for them now, and how often a receive ring grew, shrank
 * back when idle, or could not grow (RLIMIT_MEMLOCK, the device).
 */
struct roceshim_stats_rings {
	uint64_t pinned_bytes;
	uint64_t grows;
	uint64_t shrinks;
	uint64_t refused;
};

struct roceshim_stats_global {
	uint64_t connections_opened; /* connected or accepted */
	uint64_t connections_tcp;
	uint64_t connections_rdma;
	uint64_t listeners;
	uint64_t fallbacks[ROCESHIM_REASON_COUNT];
	uint64_t rows_dropped;	  /* connections with no free row */
	uint64_t malformed_input; /* rejected CM or control messages */
	uint64_t downgrades[ROCESHIM_DOWNGRADE_COUNT]; /* by cause */
	struct roceshim_stats_counters totals;
	struct roceshim_stats_memory memory;
	struct roceshim_stats_rings rings;
};

/*
 * One connection's rings, on a cache line of their own: sizes now (0 on
 * TCP), registered bytes now (old and offered rings included while a
 * resize is under way), and its receive ring's resizes.
 */
struct roceshim_stats_row_rings {
	uint64_t pinned_bytes;
	uint32_t rx_ring_bytes; /* its receive ring */
	uint32_t tx_ring_bytes; /* the peer's ring, which it writes into */
	uint64_t grows;
	uint64_t shrinks;
	uint64_t reserved[4];
};

struct roceshim_stats_row {
	uint32_t seq;
	uint32_t state; /* enum roceshim_row_state */
	int32_t fd;
	uint8_t role;	   /* enum roceshim_role */
	uint8_t transport; /* enum roceshim_transport */
	uint8_t reason;	   /* enum roceshim_reason */
	uint8_t downgrade; /* enum roceshim_downgrade; transport is then tcp */
	uint64_t opened_unix_ms;
	/* Unset (family 0) on an active row whose connection is on TCP. */
	struct roceshim_stats_endpoint local;
	struct roceshim_stats_endpoint peer;
	struct roceshim_stats_counters counters;
	struct roceshim_stats_row_rings rings;
};

struct roceshim_stats_header {
	uint32_t magic;
	uint32_t layout_version;
	uint32_t header_size; /* sizeof(struct roceshim_stats_header) */
	uint32_t row_size;    /* sizeof(struct roceshim_stats_row) */
	uint32_t row_count;
	int32_t pid;
	uint64_t
		start_ticks; /* /proc/<pid>/stat starttime: detects pid reuse */
	uint64_t created_unix_ms;
	char command[ROCESHIM_STATS_COMMAND_LEN];
	struct roceshim_stats_global global;
	/* Rows start on a cache line: a row's counters fill exactly one. */
	uint8_t pad_to_cache_line[8];
};

static inline const char *roceshim_reason_name(unsigned int reason)
{
	static const char *const names[] = {
		[ROCESHIM_REASON_NONE] = "none",
		[ROCESHIM_REASON_DISABLED] = "disabled",
		[ROCESHIM_REASON_EXCLUDED] = "excluded",
		[ROCESHIM_REASON_NO_DEVICE] = "no_device",
		[ROCESHIM_REASON_NO_ROUTE] = "no_route",
		[ROCESHIM_REASON_PEER_REJECTED] = "peer_rejected",
		[ROCESHIM_REASON_TIMEOUT] = "timeout",
		[ROCESHIM_REASON_NEGATIVE_CACHE] = "negative_cache",
		[ROCESHIM_REASON_RESOURCE] = "resource",
		[ROCESHIM_REASON_UNSUPPORTED] = "unsupported",
		[ROCESHIM_REASON_PEER_TCP] = "peer_tcp",
		[ROCESHIM_REASON_NO_RDMA_LIBS] = "no_rdma_libs",
		[ROCESHIM_REASON_FD_LIMIT] = "fd_limit",
		[ROCESHIM_REASON_MEMLOCK_LIMIT] = "memlock_limit",
		[ROCESHIM_REASON_SHARED] = "shared",
		[ROCESHIM_REASON_ABANDONED] = "abandoned",
		[ROCESHIM_REASON_IO_URING] = "io_uring",
		[ROCESHIM_REASON_PREFORK] = "prefork",
		[ROCESHIM_REASON_HANDOFF] = "handoff",
		[ROCESHIM_REASON_REUSEPORT] = "reuseport",
	};

	if (reason >= sizeof(names) / sizeof(names[0]) || !names[reason])
		return "unknown";
	return names[reason];
}

static inline const char *roceshim_mem_class_name(unsigned int cls)
{
	static const char *const names[] = {
		[ROCESHIM_MEM_PAGEABLE] = "pageable",
		[ROCESHIM_MEM_PINNED] = "pinned",
		[ROCESHIM_MEM_DEVICE] = "device",
		[ROCESHIM_MEM_MANAGED] = "managed",
	};

	if (cls >= ROCESHIM_MEM_CLASS_COUNT)
		return "unknown";
	return names[cls];
}

static inline const char *roceshim_downgrade_name(unsigned int cause)
{
	static const char *const names[] = {
		[ROCESHIM_DOWNGRADE_NONE] = "none",
		[ROCESHIM_DOWNGRADE_FORK] = "fork",
		[ROCESHIM_DOWNGRADE_EXEC] = "exec",
		[ROCESHIM_DOWNGRADE_FD_PASSED] = "fd_passed",
		[ROCESHIM_DOWNGRADE_QP_ERROR] = "qp_error",
		[ROCESHIM_DOWNGRADE_DEVICE] = "device",
		[ROCESHIM_DOWNGRADE_PEER] = "peer",
		[ROCESHIM_DOWNGRADE_EXIT] = "exit",
		[ROCESHIM_DOWNGRADE_QP_SILENT] = "qp_silent",
		[ROCESHIM_DOWNGRADE_SPLICE] = "splice",
		[ROCESHIM_DOWNGRADE_CREDENTIALS] = "credentials",
		[ROCESHIM_DOWNGRADE_STDIO] = "stdio",
		[ROCESHIM_DOWNGRADE_URGENT] = "urgent",
		[ROCESHIM_DOWNGRADE_SOCKOPT] = "sockopt",
		[ROCESHIM_DOWNGRADE_ACCEPT_QUEUE] = "accept_queue",
		[ROCESHIM_DOWNGRADE_DISCONNECT] = "disconnect",
		[ROCESHIM_DOWNGRADE_IO_URING] = "io_uring",
		[ROCESHIM_DOWNGRADE_EPOLL_DUP] = "epoll_dup",
		[ROCESHIM_DOWNGRADE_SEND_STALL] = "send_stall",
		[ROCESHIM_DOWNGRADE_REUSEPORT] = "reuseport",
	};

	if (cause >= sizeof(names) / sizeof(names[0]) || !names[cause])
		return "unknown";
	return names[cause];
}

static inline const char *roceshim_state_name(unsigned int state)
{
	static const char *const names[] = {
		[ROCESHIM_ROW_FREE] = "free",
		[ROCESHIM_ROW_CONNECTING] = "connecting",
		[ROCESHIM_ROW_OPEN] = "open",
		[ROCESHIM_ROW_LISTENING] = "listening",
		[ROCESHIM_ROW_FAILED] = "failed",
		[ROCESHIM_ROW_CLOSED] = "closed",
	};

	if (state >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[state];
}

static inline const char *roceshim_role_name(unsigned int role)
{
	switch (role) {
	case ROCESHIM_ROLE_ACTIVE:
		return "active";
	case ROCESHIM_ROLE_PASSIVE:
		return "passive";
	case ROCESHIM_ROLE_LISTENER:
		return "listener";
	}
	return "unknown";
}

static inline const char *roceshim_transport_name(unsigned int transport)
{
	switch (transport) {
	case ROCESHIM_TRANSPORT_TCP:
		return "tcp";
	case ROCESHIM_TRANSPORT_RDMA:
		return "rdma";
	}
	return "unknown";
}

#endif /* ROCESHIM_STATS_H */
