// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "log.h"

struct parser {
	config_lookup_fn lookup;
	config_warn_fn warn;
};

static void warnf(const struct parser *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void warnf(const struct parser *p, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	p->warn(line);
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

static void load_bool(const struct parser *p, const char *name, bool *value)
{
	const char *s = p->lookup(name);

	if (!s)
		return;
	if (parse_bool(s, value))
		warnf(p,
		      "%s='%s' is not a boolean (expected 1/0, yes/no, "
		      "true/false, on/off); using %d",
		      name, s, *value);
}

static int parse_uint(const char *s, unsigned int min, unsigned int max,
		      unsigned int *out)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

static void load_uint(const struct parser *p, const char *name,
		      unsigned int min, unsigned int max, unsigned int *value)
{
	const char *s = p->lookup(name);

	if (!s)
		return;
	if (parse_uint(s, min, max, value))
		warnf(p, "%s='%s' is not an integer in [%u, %u]; using %u",
		      name, s, min, max, *value);
}

/* A ring is a power of two between 4 KiB and 512 MiB (ring.h). */
static void load_ring_kb(const struct parser *p, const char *name,
			 unsigned int *value)
{
	const char *s = p->lookup(name);
	unsigned int kb;

	if (!s)
		return;
	if (parse_uint(s, 4, 524288, &kb) || (kb & (kb - 1))) {
		warnf(p,
		      "%s='%s' is not a power of two in [4, 524288]; "
		      "using %u",
		      name, s, *value);
		return;
	}
	*value = kb;
}

static int parse_log_level(const char *s, int *level)
{
	static const char *const names[] = {
		[LOG_LEVEL_NONE] = "none",   [LOG_LEVEL_ERROR] = "error",
		[LOG_LEVEL_WARN] = "warn",   [LOG_LEVEL_INFO] = "info",
		[LOG_LEVEL_DEBUG] = "debug",
	};
	unsigned int n;
	int i;

	for (i = LOG_LEVEL_NONE; i <= LOG_LEVEL_DEBUG; i++) {
		if (!strcasecmp(s, names[i])) {
			*level = i;
			return 0;
		}
	}
	if (!strcasecmp(s, "warning")) {
		*level = LOG_LEVEL_WARN;
		return 0;
	}
	if (parse_uint(s, LOG_LEVEL_NONE, LOG_LEVEL_DEBUG, &n))
		return -EINVAL;
	*level = n;
	return 0;
}

static void load_log_level(const struct parser *p, int *level)
{
	const char *s = p->lookup("ROCESHIM_LOG_LEVEL");

	if (!s)
		return;
	if (parse_log_level(s, level))
		warnf(p,
		      "ROCESHIM_LOG_LEVEL='%s' is not a level (none, error, "
		      "warn, info, debug or 0-4); using warn",
		      s);
}

/* instead: what the warning says is used when the value is refused. */
static void load_path(const struct parser *p, const char *name, char *out,
		      size_t size, const char *instead)
{
	const char *s = p->lookup(name);

	if (!s)
		return;
	if (strlen(s) >= size) {
		warnf(p, "%s='%.64s...' is longer than %zu bytes; using %s",
		      name, s, size - 1, instead);
		return;
	}
	strcpy(out, s);
}

/* An empty name would make dlopen() return the program itself. */
static void load_library(const struct parser *p, const char *name, char *out,
			 size_t size)
{
	const char *s = p->lookup(name);

	if (s && !*s) {
		warnf(p, "%s is empty; using %s", name, out);
		return;
	}
	load_path(p, name, out, size, out);
}

static void exclude_everything(struct addr_rules *exclude)
{
	memset(exclude, 0, sizeof(*exclude));
	exclude->count = 1;
	exclude->rule[0].port_hi = 65535;
}

/*
 * A malformed rule list must not widen what is accelerated: whichever list
 * is broken, every connection is excluded (and so stays on kernel TCP).
 */
static int load_rules(const struct parser *p, const char *name,
		      struct addr_rules *rules)
{
	const char *s = p->lookup(name);
	char bad[64];
	int ret;

	if (!s)
		return 0;
	ret = addr_rules_parse(rules, s, bad, sizeof(bad));
	if (!ret)
		return 0;
	if (ret == -E2BIG)
		warnf(p,
		      "%s has more than %d rules; using ROCESHIM_EXCLUDE='*' "
		      "(every connection on TCP)",
		      name, ADDR_RULES_MAX);
	else
		warnf(p,
		      "%s='%s': rule '%s' is malformed; using "
		      "ROCESHIM_EXCLUDE='*' (every connection on TCP)",
		      name, s, bad);
	return ret;
}

void config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->enabled = true;
	cfg->rdma = true;
	cfg->log_level = LOG_LEVEL_WARN;
	cfg->stats = true;
	cfg->stats_rows = CONFIG_STATS_ROWS_DEFAULT;
	cfg->ring_kb = CONFIG_RING_KB_DEFAULT;
	cfg->ring_start_kb = CONFIG_RING_START_KB_DEFAULT;
	cfg->connect_timeout_ms = CONFIG_CONNECT_TIMEOUT_MS_DEFAULT;
	cfg->spin_us = CONFIG_SPIN_US_DEFAULT;
	cfg->zerocopy_kb = CONFIG_ZEROCOPY_KB_DEFAULT;
	cfg->cuda = true;
	cfg->pinned_zerocopy_kb = CONFIG_PINNED_ZEROCOPY_KB_DEFAULT;
	cfg->negative_cache_s = CONFIG_NEGATIVE_CACHE_S_DEFAULT;
	strcpy(cfg->libibverbs, CONFIG_LIBIBVERBS_DEFAULT);
	strcpy(cfg->librdmacm, CONFIG_LIBRDMACM_DEFAULT);
}

void config_load(struct config *cfg, config_lookup_fn lookup,
		 config_warn_fn warn)
{
	const struct parser p = { .lookup = lookup, .warn = warn };

	config_defaults(cfg);
	load_bool(&p, "ROCESHIM_ENABLE", &cfg->enabled);
	load_log_level(&p, &cfg->log_level);
	load_path(&p, "ROCESHIM_LOG_FILE", cfg->log_file, sizeof(cfg->log_file),
		  "stderr");
	if (load_rules(&p, "ROCESHIM_INCLUDE", &cfg->include) |
	    load_rules(&p, "ROCESHIM_EXCLUDE", &cfg->exclude))
		exclude_everything(&cfg->exclude);
	load_bool(&p, "ROCESHIM_STATS", &cfg->stats);
	load_bool(&p, "ROCESHIM_RDMA", &cfg->rdma);
	load_uint(&p, "ROCESHIM_STATS_ROWS", CONFIG_STATS_ROWS_MIN,
		  CONFIG_STATS_ROWS_MAX, &cfg->stats_rows);
	load_ring_kb(&p, "ROCESHIM_RING_KB", &cfg->ring_kb);
	load_ring_kb(&p, "ROCESHIM_RING_START_KB", &cfg->ring_start_kb);
	load_uint(&p, "ROCESHIM_CONNECT_TIMEOUT_MS", 10, 600000,
		  &cfg->connect_timeout_ms);
	load_uint(&p, "ROCESHIM_NEGATIVE_CACHE_S", 0, 86400,
		  &cfg->negative_cache_s);
	load_uint(&p, "ROCESHIM_SPIN_US", 0, 1000000, &cfg->spin_us);
	load_uint(&p, "ROCESHIM_ZEROCOPY_KB", 0, 1048576, &cfg->zerocopy_kb);
	load_bool(&p, "ROCESHIM_CUDA", &cfg->cuda);
	load_uint(&p, "ROCESHIM_PINNED_ZEROCOPY_KB", 0, 1048576,
		  &cfg->pinned_zerocopy_kb);
	load_uint(&p, "ROCESHIM_REG_CACHE_MB", 0, 1048576, &cfg->reg_cache_mb);
	load_library(&p, "ROCESHIM_LIBIBVERBS", cfg->libibverbs,
		     sizeof(cfg->libibverbs));
	load_library(&p, "ROCESHIM_LIBRDMACM", cfg->librdmacm,
		     sizeof(cfg->librdmacm));
}
