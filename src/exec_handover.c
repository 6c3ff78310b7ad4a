// SPDX-License-Identifier: MIT
/*
 * The list travels as text: "1/PID/DEADLINE" and, per connection,
 * ",LOCAL_PORT/FAMILY/ADDRESS/PORT", the address as 32 hex digits (the
 * endpoint's 16 bytes).  Anything else in it makes the whole list void:
 * the environment is the program's user's to write.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "endpoint.h"
#include "exec_handover.h"
#include "log.h"
#include "share.h"

#define FORMAT_VERSION 1
/* ",65535/10/" + 32 hex digits + "/65535" */
#define ENTRY_TEXT_MAX	50
#define HEADER_TEXT_MAX 48

/* Set once at start; then only the claimed flags and left change. */
static struct {
	struct exec_handover list;
	size_t left; /* atomic: entries not claimed yet */
} handed;

char *exec_handover_encode(const struct exec_handover *h)
{
	size_t size, at, i, k;
	char *out;
	int n;

	if (!h->count || h->count > EXEC_HANDOVER_MAX)
		return NULL;
	size = sizeof(EXEC_HANDOVER_ENV) + HEADER_TEXT_MAX +
	       h->count * ENTRY_TEXT_MAX;
	out = malloc(size);
	if (!out)
		return NULL;
	n = snprintf(out, size, "%s=%d/%d/%lld", EXEC_HANDOVER_ENV,
		     FORMAT_VERSION, (int)h->pid, (long long)h->deadline_ms);
	at = (size_t)n;
	for (i = 0; i < h->count; i++) {
		const struct exec_handover_entry *e = &h->entries[i];

		at += (size_t)snprintf(out + at, size - at, ",%u/%u/",
				       e->local_port, e->source.family);
		for (k = 0; k < sizeof(e->source.addr); k++)
			at += (size_t)snprintf(out + at, size - at, "%02x",
					       e->source.addr[k]);
		at += (size_t)snprintf(out + at, size - at, "/%u",
				       e->source.port);
	}
	return out;
}

/* A decimal number in [min, max]; advances *p past its digits. */
static int number(const char **p, long long min, long long max, long long *out)
{
	const char *s = *p;
	long long v = 0;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	while (*s >= '0' && *s <= '9') {
		if (v > (LLONG_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (*s++ - '0');
	}
	if (v < min || v > max)
		return -EINVAL;
	*out = v;
	*p = s;
	return 0;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int address(const char **p, uint8_t addr[16])
{
	const char *s = *p;
	int hi, lo, i;

	for (i = 0; i < 16; i++, s += 2) {
		hi = hex_digit(s[0]);
		lo = hi < 0 ? -1 : hex_digit(s[1]);
		if (lo < 0)
			return -EINVAL;
		addr[i] = (uint8_t)(hi << 4 | lo);
	}
	if (*s != '/')
		return -EINVAL;
	*p = s;
	return 0;
}

/* One entry, which ends at a comma or at the end. */
static int entry(const char **p, struct exec_handover_entry *e)
{
	long long port, family, source_port;

	if (number(p, 1, 65535, &port) || *(*p)++ != '/' ||
	    number(p, 0, INT_MAX, &family) ||
	    (family != AF_INET && family != AF_INET6) || *(*p)++ != '/' ||
	    address(p, e->source.addr) || *(*p)++ != '/' ||
	    number(p, 1, 65535, &source_port) || (**p && **p != ','))
		return -EINVAL;
	e->local_port = (uint16_t)port;
	e->source.family = (uint16_t)family;
	e->source.port = (uint16_t)source_port;
	e->claimed = false;
	return 0;
}

/* The entries: one after each comma. */
static size_t count_entries(const char *s)
{
	size_t n = 0;

	for (s = strchr(s, ','); s; s = strchr(s + 1, ','))
		n++;
	return n;
}

int exec_handover_decode(const char *value, struct exec_handover *h)
{
	const char *p = value;
	long long version, pid, deadline;
	size_t n, i;

	memset(h, 0, sizeof(*h));
	if (number(&p, FORMAT_VERSION, FORMAT_VERSION, &version) ||
	    *p++ != '/' || number(&p, 1, INT_MAX, &pid) || *p++ != '/' ||
	    number(&p, 0, LLONG_MAX, &deadline) || *p != ',')
		return -EINVAL;
	n = count_entries(p);
	if (n > EXEC_HANDOVER_MAX)
		return -EINVAL;
	h->entries = calloc(n, sizeof(*h->entries));
	if (!h->entries)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (*p++ != ',' || entry(&p, &h->entries[i])) {
			free(h->entries);
			memset(h, 0, sizeof(*h));
			return -EINVAL;
		}
	}
	h->pid = (pid_t)pid;
	h->deadline_ms = deadline;
	h->count = n;
	return 0;
}

static bool is_var(const char *entry, const char *name)
{
	size_t len = strlen(name);

	return !strncmp(entry, name, len) && entry[len] == '=';
}

/*
 * The size of "LD_PRELOAD=library[ preload]" with its NUL, or 0 where
 * preload (LD_PRELOAD's value) names library's file already.
 */
static size_t preload_size(const char *preload, const char *library)
{
	const char *base = strrchr(library, '/');

	base = base ? base + 1 : library;
	if (preload && strstr(preload, base))
		return 0;
	return sizeof("LD_PRELOAD= ") + strlen(library) +
	       (preload ? strlen(preload) : 0);
}

/* Whether entry is one of the variables roceshim hands over an exec. */
static bool is_handed_over(const char *entry)
{
	return is_var(entry, EXEC_HANDOVER_ENV) || is_var(entry, SHARE_ENV);
}

char **exec_handover_env(char *const envp[], char *const vars[], size_t count,
			 const char *library)
{
	const char *preload = NULL;
	size_t n = 0, i, at = 0, extra;
	char **env, *text;

	for (n = 0; envp && envp[n]; n++)
		if (is_var(envp[n], "LD_PRELOAD"))
			preload = envp[n] + sizeof("LD_PRELOAD");
	extra = library ? preload_size(preload, library) : 0;
	env = malloc((n + count + 2) * sizeof(*env) + extra);
	if (!env)
		return NULL;
	for (i = 0; i < count; i++)
		env[at++] = vars[i];
	if (extra) {
		text = (char *)(env + n + count + 2);
		snprintf(text, extra, "LD_PRELOAD=%s%s%s", library,
			 preload ? " " : "", preload ? preload : "");
		env[at++] = text;
	}
	for (i = 0; i < n; i++)
		if (!is_handed_over(envp[i]) &&
		    !(extra && is_var(envp[i], "LD_PRELOAD")))
			env[at++] = envp[i];
	env[at] = NULL;
	return env;
}

void exec_handover_env_free(char **env)
{
	size_t i;

	if (!env)
		return;
	/* The variables lead, and no other entry has their names. */
	for (i = 0; env[i] && is_handed_over(env[i]); i++)
		free(env[i]);
	free(env);
}

void exec_handover_load(void)
{
	const char *value = getenv(EXEC_HANDOVER_ENV);
	struct exec_handover h;
	int err;

	if (!value)
		return;
	/* A set-uid program takes no such list from its user. */
	if (!secure_getenv(EXEC_HANDOVER_ENV)) {
		unsetenv(EXEC_HANDOVER_ENV);
		return;
	}
	err = exec_handover_decode(value, &h);
	unsetenv(EXEC_HANDOVER_ENV);
	if (err) {
		log_warn("%s is malformed: ignored", EXEC_HANDOVER_ENV);
		return;
	}
	if (h.pid != getpid() || h.deadline_ms <= clock_ms()) {
		free(h.entries);
		return;
	}
	log_info("the exec handed over %zu RDMA connections; each moves to "
		 "TCP when accept() takes it",
		 h.count);
	handed.list = h;
	__atomic_store_n(&handed.left, h.count, __ATOMIC_RELEASE);
}

bool exec_handover_claim(const struct roceshim_stats_endpoint *source,
			 uint16_t local_port)
{
	struct exec_handover_entry *e;
	bool unclaimed;
	size_t i;

	if (!exec_handover_waiting())
		return false;
	for (i = 0; i < handed.list.count; i++) {
		e = &handed.list.entries[i];
		unclaimed = false;
		if (e->local_port == local_port &&
		    endpoint_equal(&e->source, source) &&
		    __atomic_compare_exchange_n(&e->claimed, &unclaimed, true,
						false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			__atomic_sub_fetch(&handed.left, 1, __ATOMIC_RELAXED);
			return true;
		}
	}
	return false;
}

bool exec_handover_waiting(void)
{
	return __atomic_load_n(&handed.left, __ATOMIC_ACQUIRE) &&
	       clock_ms() < handed.list.deadline_ms;
}
