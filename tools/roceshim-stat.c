// SPDX-License-Identifier: MIT
/*
 * roceshim-stat: shows, for processes running under roceshim, which
 * connections were accelerated, which fell back and why, and the bytes on
 * each path.  It reads the per-process segments described in
 * <roceshim/stats.h>; a segment is input from another program, so every
 * field that sizes or indexes anything is checked before use.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <roceshim/stats.h>

#include "check.h"
#include "endpoint.h"
#include "proc_local.h"
#include "segment.h"

enum format {
	FORMAT_TABLE,
	FORMAT_JSON,
	FORMAT_PROMETHEUS
};

struct options {
	enum format format;
	bool watch;
	double interval;
	long count;
	bool cleanup;
	bool open_only;
	bool check;
	const char *peer; /* with check */
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: roceshim-stat [OPTIONS] [PID]\n"
		"       roceshim-stat --check [PEER[:PORT]]\n"
		"Show roceshim connection statistics of running processes.\n\n"
		"Without PID, list the processes using roceshim; with PID, "
		"show\n"
		"that process's connections.\n\n"
		"  -j, --json            print JSON\n"
		"  -p, --prometheus      print Prometheus text exposition\n"
		"  -o, --open            only connections that are not closed\n"
		"  -w, --watch[=SECS]    repeat every SECS seconds (default "
		"1)\n"
		"  -n, --count=N         with --watch, stop after N rounds\n"
		"  -c, --cleanup         remove segments left by dead "
		"processes\n"
		"  -k, --check           check this host's RDMA setup and, "
		"with\n"
		"                        PEER[:PORT], the way to a peer\n"
		"  -h, --help            this help\n"
		"  -V, --version         print the version\n\n"
		"Exit status: 0 on success, 1 when PID has no readable "
		"segment\n"
		"(with --check: when RDMA cannot work), 2 on a usage "
		"error.\n");
}

static bool row_shown(const struct options *opt,
		      const struct roceshim_stats_row *row)
{
	return !opt->open_only || row->state != ROCESHIM_ROW_CLOSED;
}

static unsigned int open_connections(const struct snapshot *snap,
				     unsigned int transport)
{
	unsigned int i, n = 0;

	for (i = 0; i < snap->row_count; i++) {
		const struct roceshim_stats_row *r = &snap->rows[i];

		if (r->role != ROCESHIM_ROLE_LISTENER &&
		    r->state == ROCESHIM_ROW_OPEN && r->transport == transport)
			n++;
	}
	return n;
}

static void human_bytes(uint64_t v, char *buf, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = v;
	int u = 0;

	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	if (u)
		snprintf(buf, size, "%.1f %s", d, units[u]);
	else
		snprintf(buf, size, "%" PRIu64 " B", v);
}

static void print_list(pid_t *pids, int n)
{
	int i;

	printf("%-8s %-6s %5s %5s %10s %10s %10s %10s  %s\n", "PID", "STATE",
	       "RDMA", "TCP", "RDMA-TX", "RDMA-RX", "TCP-TX", "TCP-RX",
	       "COMMAND");
	for (i = 0; i < n; i++) {
		const struct roceshim_stats_counters *t;
		char b[4][24];
		struct snapshot snap;

		if (segment_read(pids[i], &snap, true))
			continue;
		t = &snap.header.global.totals;
		human_bytes(t->rdma_tx_bytes, b[0], sizeof(b[0]));
		human_bytes(t->rdma_rx_bytes, b[1], sizeof(b[1]));
		human_bytes(t->tcp_tx_bytes, b[2], sizeof(b[2]));
		human_bytes(t->tcp_rx_bytes, b[3], sizeof(b[3]));
		printf("%-8d %-6s %5u %5u %10s %10s %10s %10s  %s\n",
		       (int)pids[i], snap.alive ? "alive" : "dead",
		       open_connections(&snap, ROCESHIM_TRANSPORT_RDMA),
		       open_connections(&snap, ROCESHIM_TRANSPORT_TCP), b[0],
		       b[1], b[2], b[3], snap.header.command);
		segment_free(&snap);
	}
}

/* Only where there is something to say: a process with CUDA. */
static void print_memory_table(const struct roceshim_stats_memory *m)
{
	uint64_t any = m->device_refused + m->registrations;
	unsigned int c;

	for (c = 0; c < ROCESHIM_MEM_CLASS_COUNT; c++)
		any += m->tx_bytes[c] + m->rx_bytes[c];
	if (!any)
		return;
	printf("memory:");
	for (c = 0; c < ROCESHIM_MEM_CLASS_COUNT; c++)
		printf(" %s tx %" PRIu64 " rx %" PRIu64 ";",
		       roceshim_mem_class_name(c), m->tx_bytes[c],
		       m->rx_bytes[c]);
	printf(" device refused %" PRIu64 "\n", m->device_refused);
	printf("pinned registrations: %" PRIu64 " made, %" PRIu64
	       " hits, %" PRIu64 " stale, %" PRIu64 " evicted, %" PRIu64
	       " failed, %" PRIu64 " bytes now; zero-copy tx %" PRIu64 "\n",
	       m->registrations, m->registration_hits, m->registrations_stale,
	       m->evictions, m->registration_failures, m->registered_bytes,
	       m->zerocopy_tx_bytes);
}

/* A row's ring sizes in KiB, "rx/tx", or "-" for a connection with none. */
static void ring_sizes(const struct roceshim_stats_row_rings *r, char *buf,
		       size_t size)
{
	if (!r->rx_ring_bytes)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%u/%u", r->rx_ring_bytes >> 10,
			 r->tx_ring_bytes >> 10);
}

static void print_table(const struct options *opt, const struct snapshot *snap)
{
	const struct roceshim_stats_global *g = &snap->header.global;
	char rings[32];
	unsigned int i;

	printf("pid %d (%s)%s: %" PRIu64 " connections (%" PRIu64
	       " rdma, %" PRIu64 " tcp), %" PRIu64 " listeners\n",
	       snap->header.pid, snap->header.command,
	       snap->alive ? "" : " [dead]", g->connections_opened,
	       g->connections_rdma, g->connections_tcp, g->listeners);
	printf("bytes: rdma tx %" PRIu64 " rx %" PRIu64 ", tcp tx %" PRIu64
	       " rx %" PRIu64 "; errors %" PRIu64 "; rows dropped %" PRIu64
	       "\n",
	       g->totals.rdma_tx_bytes, g->totals.rdma_rx_bytes,
	       g->totals.tcp_tx_bytes, g->totals.tcp_rx_bytes, g->totals.errors,
	       g->rows_dropped);
	printf("fallbacks:");
	for (i = 1; i < ROCESHIM_REASON_COUNT; i++)
		if (g->fallbacks[i])
			printf(" %s=%" PRIu64, roceshim_reason_name(i),
			       g->fallbacks[i]);
	printf("\nmoved to tcp:");
	for (i = 1; i < ROCESHIM_DOWNGRADE_COUNT; i++)
		if (g->downgrades[i])
			printf(" %s=%" PRIu64, roceshim_downgrade_name(i),
			       g->downgrades[i]);
	printf("\n");
	print_memory_table(&g->memory);
	printf("rings: %" PRIu64 " KiB pinned; %" PRIu64 " grown, %" PRIu64
	       " shrunk when idle, %" PRIu64 " not grown\n",
	       g->rings.pinned_bytes >> 10, g->rings.grows, g->rings.shrinks,
	       g->rings.refused);
	printf("\n%-5s %-8s %-10s %-28s %-28s %-8s %-14s %12s %12s %7s %11s "
	       "%10s\n",
	       "FD", "ROLE", "STATE", "LOCAL", "PEER", "PATH", "REASON",
	       "TX-BYTES", "RX-BYTES", "ERRORS", "RING-RX/TX", "PINNED-KIB");
	for (i = 0; i < snap->row_count; i++) {
		const struct roceshim_stats_row *r = &snap->rows[i];
		const struct roceshim_stats_counters *c = &r->counters;
		char local[ENDPOINT_STRLEN], peer[ENDPOINT_STRLEN];

		if (!row_shown(opt, r))
			continue;
		endpoint_format(&r->local, local, sizeof(local));
		endpoint_format(&r->peer, peer, sizeof(peer));
		ring_sizes(&r->rings, rings, sizeof(rings));
		printf("%-5d %-8s %-10s %-28s %-28s %-8s %-14s %12" PRIu64
		       " %12" PRIu64 " %7" PRIu64 " %11s %10" PRIu64 "\n",
		       r->fd, roceshim_role_name(r->role),
		       roceshim_state_name(r->state), local,
		       r->role == ROCESHIM_ROLE_LISTENER ? "-" : peer,
		       r->downgrade ? "rdma>tcp"
				    : roceshim_transport_name(r->transport),
		       r->downgrade ? roceshim_downgrade_name(r->downgrade)
				    : roceshim_reason_name(r->reason),
		       c->tcp_tx_bytes + c->rdma_tx_bytes,
		       c->tcp_rx_bytes + c->rdma_rx_bytes, c->errors, rings,
		       r->rings.pinned_bytes >> 10);
	}
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = *s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void json_memory(const struct roceshim_stats_memory *m)
{
	unsigned int c;

	printf("\"memory\":{");
	for (c = 0; c < ROCESHIM_MEM_CLASS_COUNT; c++)
		printf("\"%s_tx_bytes\":%" PRIu64 ",\"%s_rx_bytes\":%" PRIu64
		       ",",
		       roceshim_mem_class_name(c), m->tx_bytes[c],
		       roceshim_mem_class_name(c), m->rx_bytes[c]);
	printf("\"device_refused\":%" PRIu64 ",\"zerocopy_tx_bytes\":%" PRIu64
	       ",\"registrations\":%" PRIu64 ",\"registration_hits\":%" PRIu64
	       ",\"registrations_stale\":%" PRIu64 ",\"evictions\":%" PRIu64
	       ",\"registered_bytes\":%" PRIu64
	       ",\"registration_failures\":%" PRIu64 "}",
	       m->device_refused, m->zerocopy_tx_bytes, m->registrations,
	       m->registration_hits, m->registrations_stale, m->evictions,
	       m->registered_bytes, m->registration_failures);
}

static void json_counters(const struct roceshim_stats_counters *c)
{
	printf("\"tcp_tx_bytes\":%" PRIu64 ",\"tcp_rx_bytes\":%" PRIu64
	       ",\"rdma_tx_bytes\":%" PRIu64 ",\"rdma_rx_bytes\":%" PRIu64
	       ",\"tx_msgs\":%" PRIu64 ",\"rx_msgs\":%" PRIu64
	       ",\"credit_stalls\":%" PRIu64 ",\"errors\":%" PRIu64,
	       c->tcp_tx_bytes, c->tcp_rx_bytes, c->rdma_tx_bytes,
	       c->rdma_rx_bytes, c->tx_msgs, c->rx_msgs, c->credit_stalls,
	       c->errors);
}

static void print_json(const struct options *opt, const struct snapshot *snap)
{
	const struct roceshim_stats_global *g = &snap->header.global;
	unsigned int i;
	bool first = true;

	printf("{\"pid\":%d,\"layout_version\":%u,\"alive\":%s,\"command\":",
	       snap->header.pid, snap->header.layout_version,
	       snap->alive ? "true" : "false");
	json_string(snap->header.command);
	printf(",\"global\":{\"connections_opened\":%" PRIu64
	       ",\"connections_rdma\":%" PRIu64 ",\"connections_tcp\":%" PRIu64
	       ",\"listeners\":%" PRIu64 ",\"rows_dropped\":%" PRIu64
	       ",\"malformed_input\":%" PRIu64 ",\"fallbacks\":{",
	       g->connections_opened, g->connections_rdma, g->connections_tcp,
	       g->listeners, g->rows_dropped, g->malformed_input);
	for (i = 1; i < ROCESHIM_REASON_COUNT; i++) {
		if (!strcmp(roceshim_reason_name(i), "unknown"))
			continue;
		printf("%s\"%s\":%" PRIu64, first ? "" : ",",
		       roceshim_reason_name(i), g->fallbacks[i]);
		first = false;
	}
	printf("},\"downgrades\":{");
	first = true;
	for (i = 1; i < ROCESHIM_DOWNGRADE_COUNT; i++) {
		if (!strcmp(roceshim_downgrade_name(i), "unknown"))
			continue;
		printf("%s\"%s\":%" PRIu64, first ? "" : ",",
		       roceshim_downgrade_name(i), g->downgrades[i]);
		first = false;
	}
	printf("},");
	json_counters(&g->totals);
	printf(",");
	json_memory(&g->memory);
	printf(",\"rings\":{\"pinned_bytes\":%" PRIu64 ",\"grows\":%" PRIu64
	       ",\"shrinks\":%" PRIu64 ",\"refused\":%" PRIu64 "}",
	       g->rings.pinned_bytes, g->rings.grows, g->rings.shrinks,
	       g->rings.refused);
	printf("},\"connections\":[");
	first = true;
	for (i = 0; i < snap->row_count; i++) {
		const struct roceshim_stats_row *r = &snap->rows[i];
		char local[ENDPOINT_STRLEN], peer[ENDPOINT_STRLEN];

		if (!row_shown(opt, r))
			continue;
		endpoint_format(&r->local, local, sizeof(local));
		endpoint_format(&r->peer, peer, sizeof(peer));
		printf("%s{\"fd\":%d,\"role\":\"%s\",\"state\":\"%s\","
		       "\"local\":\"%s\",\"peer\":\"%s\",\"transport\":\"%s\","
		       "\"fallback\":\"%s\",\"downgrade\":\"%s\","
		       "\"opened_unix_ms\":%" PRIu64 ",",
		       first ? "" : ",", r->fd, roceshim_role_name(r->role),
		       roceshim_state_name(r->state), local,
		       r->role == ROCESHIM_ROLE_LISTENER ? "" : peer,
		       roceshim_transport_name(r->transport),
		       roceshim_reason_name(r->reason),
		       roceshim_downgrade_name(r->downgrade),
		       r->opened_unix_ms);
		json_counters(&r->counters);
		printf(",\"pinned_bytes\":%" PRIu64 ",\"rx_ring_bytes\":%u"
		       ",\"tx_ring_bytes\":%u,\"ring_grows\":%" PRIu64
		       ",\"ring_shrinks\":%" PRIu64 "}",
		       r->rings.pinned_bytes, r->rings.rx_ring_bytes,
		       r->rings.tx_ring_bytes, r->rings.grows,
		       r->rings.shrinks);
		first = false;
	}
	printf("]}");
}

static void prom_metric(const char *name, const char *type, const char *help)
{
	printf("# HELP roceshim_%s %s\n# TYPE roceshim_%s %s\n", name, help,
	       name, type);
}

static void prom_labels(const struct snapshot *snap)
{
	const char *s;

	printf("pid=\"%d\",command=\"", snap->header.pid);
	for (s = snap->header.command; *s && *s != ' '; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		if (*s != '\n')
			putchar(*s);
	}
	putchar('"');
}

struct prom_event {
	const char *name;
	uint64_t value;
};

/* One process's series of a counter by event: NAME{...,event="E"}. */
static void prom_events(const struct snapshot *snap, const char *name,
			const struct prom_event *e, size_t count)
{
	size_t k;

	for (k = 0; k < count; k++) {
		printf("roceshim_%s{", name);
		prom_labels(snap);
		printf(",event=\"%s\"} %" PRIu64 "\n", e[k].name, e[k].value);
	}
}

/* One series per process: the memory counter at offset. */
static void prom_memory_field(struct snapshot *snaps, int n, const char *name,
			      const char *type, const char *help, size_t offset)
{
	int i;

	prom_metric(name, type, help);
	for (i = 0; i < n; i++) {
		const uint8_t *m =
			(const uint8_t *)&snaps[i].header.global.memory;
		uint64_t value;

		memcpy(&value, m + offset, sizeof(value));
		printf("roceshim_%s{", name);
		prom_labels(&snaps[i]);
		printf("} %" PRIu64 "\n", value);
	}
}

static void print_prometheus_memory(struct snapshot *snaps, int n)
{
	static const char *const dir[] = { "tx", "rx" };
	unsigned int c, d;
	int i;

	prom_metric("memory_bytes_total", "counter",
		    "Bytes moved, by the memory class of the program's buffer "
		    "(CUDA processes only).");
	for (i = 0; i < n; i++) {
		const struct roceshim_stats_memory *m =
			&snaps[i].header.global.memory;

		for (d = 0; d < 2; d++)
			for (c = 0; c < ROCESHIM_MEM_CLASS_COUNT; c++) {
				printf("roceshim_memory_bytes_total{");
				prom_labels(&snaps[i]);
				printf(",class=\"%s\",direction=\"%s\"} "
				       "%" PRIu64 "\n",
				       roceshim_mem_class_name(c), dir[d],
				       d ? m->rx_bytes[c] : m->tx_bytes[c]);
			}
	}
	prom_memory_field(
		snaps, n, "device_refused_total", "counter",
		"Calls refused with EFAULT: the buffer was GPU "
		"memory.",
		offsetof(struct roceshim_stats_memory, device_refused));
	prom_memory_field(
		snaps, n, "zerocopy_bytes_total", "counter",
		"Bytes sent straight from registered pinned memory.",
		offsetof(struct roceshim_stats_memory, zerocopy_tx_bytes));
	prom_metric("registrations_total", "counter",
		    "Pinned-memory registration cache events.");
	for (i = 0; i < n; i++) {
		const struct roceshim_stats_memory *m =
			&snaps[i].header.global.memory;
		const struct prom_event e[] = {
			{ "registered", m->registrations },
			{ "hit", m->registration_hits },
			{ "stale", m->registrations_stale },
			{ "evicted", m->evictions },
			{ "failed", m->registration_failures },
		};

		prom_events(&snaps[i], "registrations_total", e,
			    sizeof(e) / sizeof(e[0]));
	}
	prom_memory_field(
		snaps, n, "registered_bytes", "gauge",
		"Pinned memory registered by the cache now.",
		offsetof(struct roceshim_stats_memory, registered_bytes));
}

static void print_prometheus(struct snapshot *snaps, int n)
{
	int i;
	unsigned int r;

	prom_metric("connections_total", "counter",
		    "Connections opened, by transport.");
	for (i = 0; i < n; i++) {
		const struct roceshim_stats_global *g = &snaps[i].header.global;

		printf("roceshim_connections_total{");
		prom_labels(&snaps[i]);
		printf(",transport=\"rdma\"} %" PRIu64 "\n",
		       g->connections_rdma);
		printf("roceshim_connections_total{");
		prom_labels(&snaps[i]);
		printf(",transport=\"tcp\"} %" PRIu64 "\n", g->connections_tcp);
	}
	prom_metric("fallbacks_total", "counter",
		    "Connections kept on TCP, by reason.");
	for (i = 0; i < n; i++) {
		for (r = 1; r < ROCESHIM_REASON_COUNT; r++) {
			if (!strcmp(roceshim_reason_name(r), "unknown"))
				continue;
			printf("roceshim_fallbacks_total{");
			prom_labels(&snaps[i]);
			printf(",reason=\"%s\"} %" PRIu64 "\n",
			       roceshim_reason_name(r),
			       snaps[i].header.global.fallbacks[r]);
		}
	}
	prom_metric("downgrades_total", "counter",
		    "Connections moved from RDMA to TCP mid-stream, by cause.");
	for (i = 0; i < n; i++) {
		for (r = 1; r < ROCESHIM_DOWNGRADE_COUNT; r++) {
			if (!strcmp(roceshim_downgrade_name(r), "unknown"))
				continue;
			printf("roceshim_downgrades_total{");
			prom_labels(&snaps[i]);
			printf(",cause=\"%s\"} %" PRIu64 "\n",
			       roceshim_downgrade_name(r),
			       snaps[i].header.global.downgrades[r]);
		}
	}
	prom_metric("bytes_total", "counter",
		    "Bytes moved, by transport and direction.");
	for (i = 0; i < n; i++) {
		const struct roceshim_stats_counters *t =
			&snaps[i].header.global.totals;
		const struct {
			const char *transport, *direction;
			uint64_t value;
		} b[] = {
			{ "rdma", "tx", t->rdma_tx_bytes },
			{ "rdma", "rx", t->rdma_rx_bytes },
			{ "tcp", "tx", t->tcp_tx_bytes },
			{ "tcp", "rx", t->tcp_rx_bytes },
		};

		for (r = 0; r < 4; r++) {
			printf("roceshim_bytes_total{");
			prom_labels(&snaps[i]);
			printf(",transport=\"%s\",direction=\"%s\"} %" PRIu64
			       "\n",
			       b[r].transport, b[r].direction, b[r].value);
		}
	}
	prom_metric("ring_pinned_bytes", "gauge",
		    "Memory registered for the rings of RDMA connections now.");
	for (i = 0; i < n; i++) {
		printf("roceshim_ring_pinned_bytes{");
		prom_labels(&snaps[i]);
		printf("} %" PRIu64 "\n",
		       snaps[i].header.global.rings.pinned_bytes);
	}
	prom_metric("ring_resizes_total", "counter",
		    "Receive rings grown, shrunk when idle, or not grown.");
	for (i = 0; i < n; i++) {
		const struct roceshim_stats_rings *g =
			&snaps[i].header.global.rings;
		const struct prom_event e[] = {
			{ "grow", g->grows },
			{ "shrink", g->shrinks },
			{ "refused", g->refused },
		};

		prom_events(&snaps[i], "ring_resizes_total", e,
			    sizeof(e) / sizeof(e[0]));
	}
	prom_metric("errors_total", "counter", "Socket calls that failed.");
	for (i = 0; i < n; i++) {
		printf("roceshim_errors_total{");
		prom_labels(&snaps[i]);
		printf("} %" PRIu64 "\n", snaps[i].header.global.totals.errors);
	}
	prom_metric("open_connections", "gauge",
		    "Connections open now, by transport.");
	for (i = 0; i < n; i++) {
		printf("roceshim_open_connections{");
		prom_labels(&snaps[i]);
		printf(",transport=\"rdma\"} %u\n",
		       open_connections(&snaps[i], ROCESHIM_TRANSPORT_RDMA));
		printf("roceshim_open_connections{");
		prom_labels(&snaps[i]);
		printf(",transport=\"tcp\"} %u\n",
		       open_connections(&snaps[i], ROCESHIM_TRANSPORT_TCP));
	}
	print_prometheus_memory(snaps, n);
}

/* Reads the processes asked for: one pid, or every segment present. */
static int collect(pid_t pid, struct snapshot **out)
{
	struct snapshot *snaps;
	pid_t *pids = NULL;
	int i, n, got = 0;

	if (pid) {
		snaps = calloc(1, sizeof(*snaps));
		if (!snaps || segment_read(pid, snaps, false)) {
			free(snaps);
			return -1;
		}
		proc_local_fill(snaps);
		*out = snaps;
		return 1;
	}
	n = segment_list_pids(&pids);
	snaps = calloc(n + 1, sizeof(*snaps));
	if (!snaps) {
		free(pids);
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!segment_read(pids[i], &snaps[got], true))
			proc_local_fill(&snaps[got++]);
	free(pids);
	*out = snaps;
	return got;
}

static int show_once(const struct options *opt, pid_t pid)
{
	struct snapshot *snaps;
	int i, n;

	if (opt->format == FORMAT_TABLE && !pid) {
		pid_t *pids = NULL;

		n = segment_list_pids(&pids);
		print_list(pids, n);
		free(pids);
		return 0;
	}
	n = collect(pid, &snaps);
	if (n < 0)
		return 1;
	switch (opt->format) {
	case FORMAT_TABLE:
		print_table(opt, &snaps[0]);
		break;
	case FORMAT_JSON:
		if (!pid)
			putchar('[');
		for (i = 0; i < n; i++) {
			if (i)
				putchar(',');
			print_json(opt, &snaps[i]);
		}
		if (!pid)
			putchar(']');
		putchar('\n');
		break;
	case FORMAT_PROMETHEUS:
		print_prometheus(snaps, n);
		break;
	}
	for (i = 0; i < n; i++)
		segment_free(&snaps[i]);
	free(snaps);
	return 0;
}

static int cleanup(void)
{
	pid_t *pids = NULL;
	int i, n = segment_list_pids(&pids), removed = 0;

	for (i = 0; i < n; i++) {
		struct snapshot snap;
		char path[64];
		bool dead;

		segment_path(pids[i], path, sizeof(path));
		if (segment_read(pids[i], &snap, true) == 0) {
			dead = !snap.alive;
			segment_free(&snap);
		} else {
			/* Unreadable or foreign layout: judge by the pid. */
			dead = !segment_pid_alive(pids[i], 0);
		}
		if (!dead)
			continue;
		if (unlink(path)) {
			fprintf(stderr, "roceshim-stat: %s: %s\n", path,
				strerror(errno));
			continue;
		}
		printf("removed %s (pid %d is gone)\n", path, (int)pids[i]);
		removed++;
	}
	printf("%d stale segment(s) removed\n", removed);
	free(pids);
	return 0;
}

static int parse_args(int argc, char **argv, struct options *opt, pid_t *pid)
{
	static const struct option longs[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "open", no_argument, NULL, 'o' },
		{ "watch", optional_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'n' },
		{ "cleanup", no_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "jpow::n:ckhV", longs, NULL)) !=
	       -1) {
		switch (c) {
		case 'j':
			opt->format = FORMAT_JSON;
			break;
		case 'p':
			opt->format = FORMAT_PROMETHEUS;
			break;
		case 'o':
			opt->open_only = true;
			break;
		case 'w':
			opt->watch = true;
			if (optarg) {
				opt->interval = strtod(optarg, &end);
				if (*end || opt->interval < 0.1 ||
				    opt->interval > 86400) {
					fprintf(stderr,
						"roceshim-stat: --watch=%s: "
						"expected seconds in [0.1, "
						"86400]\n",
						optarg);
					return -1;
				}
			}
			break;
		case 'n':
			opt->count = strtol(optarg, &end, 10);
			if (*end || opt->count <= 0) {
				fprintf(stderr,
					"roceshim-stat: --count=%s: expected a "
					"positive integer\n",
					optarg);
				return -1;
			}
			break;
		case 'c':
			opt->cleanup = true;
			break;
		case 'k':
			opt->check = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("roceshim-stat %s (stats layout %u)\n",
			       PACKAGE_VERSION, ROCESHIM_STATS_LAYOUT_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (opt->check) {
		if (optind + 1 < argc) {
			fprintf(stderr, "roceshim-stat: --check takes one "
					"PEER[:PORT]\n");
			return -1;
		}
		opt->peer = optind < argc ? argv[optind] : NULL;
		return 0;
	}
	if (optind < argc) {
		long v = strtol(argv[optind], &end, 10);

		if (*end || v <= 0 || v > INT32_MAX || optind + 1 < argc) {
			fprintf(stderr, "roceshim-stat: '%s' is not a pid\n",
				argv[optind]);
			return -1;
		}
		*pid = v;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct options opt = { .interval = 1.0 };
	pid_t pid = 0;
	long round;
	int ret = 0;

	if (argc == 4 && !strcmp(argv[1], "--check-probe"))
		return check_probe_child(argv[2], argv[3]);
	if (parse_args(argc, argv, &opt, &pid))
		return 2;
	if (opt.check)
		return check_run(opt.peer);
	if (opt.cleanup)
		return cleanup();
	for (round = 1;; round++) {
		struct timespec ts;

		if (opt.watch && opt.format == FORMAT_TABLE && isatty(1))
			printf("\033[H\033[2J");
		ret = show_once(&opt, pid);
		fflush(stdout);
		if (!opt.watch || ret || (opt.count && round >= opt.count))
			break;
		if (opt.format == FORMAT_TABLE)
			putchar('\n');
		ts.tv_sec = (time_t)opt.interval;
		ts.tv_nsec = (long)((opt.interval - ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
	return ret;
}
