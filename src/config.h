/* SPDX-License-Identifier: MIT */
/*
 * Configuration from ROCESHIM_* environment variables.
 *
 * Contract: config_load() never fails.  Every variable is validated; a
 * malformed value produces exactly one warning line, through the warn
 * callback, naming the variable, the value and what is used instead, and
 * the default is kept.  The lookup callback makes the parser testable
 * without touching the process environment.
 */
#ifndef ROCESHIM_CONFIG_H
#define ROCESHIM_CONFIG_H

#include <stdbool.h>

#include "addr_rule.h"

#define CONFIG_PATH_MAX			  512
#define CONFIG_STATS_ROWS_MIN		  16
#define CONFIG_STATS_ROWS_MAX		  65536
#define CONFIG_STATS_ROWS_DEFAULT	  1024
#define CONFIG_RING_KB_DEFAULT		  256
#define CONFIG_RING_START_KB_DEFAULT	  64
#define CONFIG_CONNECT_TIMEOUT_MS_DEFAULT 2000
#define CONFIG_NEGATIVE_CACHE_S_DEFAULT	  60
#define CONFIG_SPIN_US_DEFAULT		  500
#define CONFIG_ZEROCOPY_KB_DEFAULT	  256
#define CONFIG_PINNED_ZEROCOPY_KB_DEFAULT 0
#define CONFIG_LIBIBVERBS_DEFAULT	  "libibverbs.so.1"
#define CONFIG_LIBRDMACM_DEFAULT	  "librdmacm.so.1"

struct config {
	bool enabled;			/* ROCESHIM_ENABLE */
	int log_level;			/* ROCESHIM_LOG_LEVEL, enum log_level */
	char log_file[CONFIG_PATH_MAX]; /* ROCESHIM_LOG_FILE, "" = stderr */
	struct addr_rules include;	/* ROCESHIM_INCLUDE, empty = all */
	struct addr_rules exclude;	/* ROCESHIM_EXCLUDE */
	bool stats;			/* ROCESHIM_STATS */
	bool rdma; /* ROCESHIM_RDMA: upgrade eligible connections */
	unsigned int stats_rows;	 /* ROCESHIM_STATS_ROWS */
	unsigned int ring_kb;		 /* ROCESHIM_RING_KB, a power of two */
	unsigned int ring_start_kb;	 /* ROCESHIM_RING_START_KB, the same */
	unsigned int connect_timeout_ms; /* ROCESHIM_CONNECT_TIMEOUT_MS */
	unsigned int negative_cache_s;	 /* ROCESHIM_NEGATIVE_CACHE_S */
	unsigned int spin_us;		 /* ROCESHIM_SPIN_US */
	unsigned int zerocopy_kb;	 /* ROCESHIM_ZEROCOPY_KB, 0 = off */
	bool cuda; /* ROCESHIM_CUDA: classify buffers (cuda_mem.h) */
	/* ROCESHIM_PINNED_ZEROCOPY_KB, 0 = only blocking pinned sends */
	unsigned int pinned_zerocopy_kb;
	unsigned int reg_cache_mb; /* ROCESHIM_REG_CACHE_MB, 0 = from memlock */
	char libibverbs[CONFIG_PATH_MAX]; /* ROCESHIM_LIBIBVERBS, for dlopen */
	char librdmacm[CONFIG_PATH_MAX];  /* ROCESHIM_LIBRDMACM, for dlopen */
};

typedef const char *(*config_lookup_fn)(const char *name);
typedef void (*config_warn_fn)(const char *line);

void config_defaults(struct config *cfg);
void config_load(struct config *cfg, config_lookup_fn lookup,
		 config_warn_fn warn);

#endif /* ROCESHIM_CONFIG_H */
