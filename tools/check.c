// SPDX-License-Identifier: MIT
/*
 * The host's side of roceshim-stat --check.  Everything here reads what
 * the kernel and libibverbs show; nothing is changed.  GIDs, their types
 * and netdevs come from sysfs, which names them the same way for every
 * driver; port state and active MTU come from ibv_query_port().
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <roceshim/stats.h>

#include "check.h"
#include "check_impl.h"
#include "hostinfo.h"

#define IB_CLASS      "/sys/class/infiniband"
#define NET_CLASS     "/sys/class/net"
#define GID_TABLE_MAX 256

void check_say(struct check *c, enum verdict v, const char *fmt, ...)
{
	static const char *const tags[] = {
		[VERDICT_OK] = "ok  ",
		[VERDICT_NOTE] = "note",
		[VERDICT_WARN] = "warn",
		[VERDICT_FAIL] = "FAIL",
	};
	va_list ap;

	if (v == VERDICT_FAIL)
		c->failures++;
	else if (v == VERDICT_WARN)
		c->warnings++;
	printf("  [%s] ", tags[v]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/*
 * The first line of a sysfs file, without its newline; false: none, with
 * errno ENOENT when the file does not exist.
 */
static bool read_line(const char *path, char *buf, size_t size)
{
	FILE *f;
	bool ok;

	errno = 0;
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok && buf[0];
}

/* ---- configuration and libraries --------------------------------------- */

static unsigned int config_warnings;

static void warn_config(const char *line)
{
	printf("  [warn] %s\n", line);
	config_warnings++;
}

static const char *lookup_env(const char *name)
{
	return getenv(name);
}

static void check_config(struct check *c)
{
	printf("configuration\n");
	config_load(&c->cfg, lookup_env, warn_config);
	c->warnings += config_warnings;
	if (!c->cfg.enabled)
		check_say(c, VERDICT_FAIL,
			  "ROCESHIM_ENABLE=0: roceshim leaves every socket "
			  "alone");
	else if (!c->cfg.rdma)
		check_say(c, VERDICT_FAIL,
			  "ROCESHIM_RDMA=0: every connection stays on TCP "
			  "(reason disabled)");
	else if (!config_warnings)
		check_say(c, VERDICT_OK,
			  "RDMA path on; rings of %u KiB each way, "
			  "handshake timeout %u ms",
			  c->cfg.ring_kb, c->cfg.connect_timeout_ms);
}

#define LIB_SYMBOL(field, name)            \
	{                                  \
		name, (void **)&libs.field \
	}

static bool open_lib(struct check *c, const char *file, const char *env,
		     void **handle)
{
	*handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (*handle)
		return true;
	check_say(c, VERDICT_FAIL,
		  "%s: %s; every connection stays on TCP (no_rdma_libs). "
		  "Install rdma-core's library, or point %s at it",
		  file, dlerror(), env);
	return false;
}

static void check_libraries(struct check *c)
{
	struct check_libs libs = { 0 };
	const struct {
		const char *name;
		void **fn;
	} verbs_syms[] = {
		LIB_SYMBOL(get_device_list, "ibv_get_device_list"),
		LIB_SYMBOL(free_device_list, "ibv_free_device_list"),
		LIB_SYMBOL(open_device, "ibv_open_device"),
		LIB_SYMBOL(close_device, "ibv_close_device"),
		LIB_SYMBOL(query_port, "ibv_query_port"),
	}, cm_syms[] = {
		LIB_SYMBOL(create_event_channel, "rdma_create_event_channel"),
		LIB_SYMBOL(destroy_event_channel, "rdma_destroy_event_channel"),
		LIB_SYMBOL(create_id, "rdma_create_id"),
		LIB_SYMBOL(destroy_id, "rdma_destroy_id"),
		LIB_SYMBOL(resolve_addr, "rdma_resolve_addr"),
		LIB_SYMBOL(resolve_route, "rdma_resolve_route"),
		LIB_SYMBOL(get_cm_event, "rdma_get_cm_event"),
		LIB_SYMBOL(ack_cm_event, "rdma_ack_cm_event"),
		LIB_SYMBOL(event_str, "rdma_event_str"),
	};
	void *verbs, *cm;
	size_t i;

	printf("libraries\n");
	if (!open_lib(c, c->cfg.libibverbs, "ROCESHIM_LIBIBVERBS", &verbs) ||
	    !open_lib(c, c->cfg.librdmacm, "ROCESHIM_LIBRDMACM", &cm))
		return;
	for (i = 0; i < sizeof(verbs_syms) / sizeof(verbs_syms[0]); i++)
		*verbs_syms[i].fn = dlsym(verbs, verbs_syms[i].name);
	for (i = 0; i < sizeof(cm_syms) / sizeof(cm_syms[0]); i++)
		*cm_syms[i].fn = dlsym(cm, cm_syms[i].name);
	for (i = 0; i < sizeof(verbs_syms) / sizeof(verbs_syms[0]); i++)
		if (!*verbs_syms[i].fn)
			goto missing;
	for (i = 0; i < sizeof(cm_syms) / sizeof(cm_syms[0]); i++)
		if (!*cm_syms[i].fn)
			goto missing;
	libs.loaded = true;
	c->libs = libs;
	check_say(c, VERDICT_OK, "%s and %s loaded", c->cfg.libibverbs,
		  c->cfg.librdmacm);
	return;
missing:
	check_say(c, VERDICT_FAIL,
		  "the RDMA libraries lack a function roceshim needs: %s; "
		  "every connection stays on TCP (no_rdma_libs)",
		  dlerror());
}

/* ---- devices and ports --------------------------------------------------- */

static unsigned int mtu_bytes(enum ibv_mtu mtu)
{
	return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? 128u << mtu : 0;
}

static const char *port_state_name(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_DOWN:
		return "DOWN";
	case IBV_PORT_INIT:
		return "INIT";
	case IBV_PORT_ARMED:
		return "ARMED";
	case IBV_PORT_ACTIVE:
		return "ACTIVE";
	case IBV_PORT_ACTIVE_DEFER:
		return "ACTIVE_DEFER";
	default:
		return "NOP";
	}
}

/* The netdev under a RoCE port: the one its GIDs name. */
static bool port_netdev(const char *dev, int port, char *buf, size_t size)
{
	char path[640];
	int i;

	for (i = 0; i < GID_TABLE_MAX; i++) {
		snprintf(path, sizeof(path),
			 IB_CLASS "/%s/ports/%d/gid_attrs/"
				  "ndevs/%d",
			 dev, port, i);
		if (read_line(path, buf, size))
			return true;
		if (errno == ENOENT)
			break;
	}
	return false;
}

static unsigned int netdev_mtu(const char *netdev)
{
	char path[640], line[32];

	snprintf(path, sizeof(path), NET_CLASS "/%s/mtu", netdev);
	return read_line(path, line, sizeof(line)) ? strtoul(line, NULL, 10)
						   : 0;
}

/*
 * The RoCE MTU a netdev MTU allows: the largest IB MTU that fits beside
 * the RoCEv2 headers (Ethernet, IPv6, UDP, BTH, ICRC and room for the
 * extended headers), as drivers compute it.
 */
#define ROCE_HEADER_ROOM 80

static unsigned int roce_mtu_for(unsigned int netdev_mtu)
{
	unsigned int mtu = 4096;

	while (mtu >= 256 && mtu + ROCE_HEADER_ROOM > netdev_mtu)
		mtu /= 2;
	return mtu >= 256 ? mtu : 0;
}

static void check_mtu(struct check *c, const struct ibv_port_attr *pa,
		      const char *netdev)
{
	unsigned int active = mtu_bytes(pa->active_mtu);
	unsigned int nd = netdev_mtu(netdev);
	unsigned int allowed = roce_mtu_for(nd);

	if (!nd) {
		check_say(c, VERDICT_NOTE, "active MTU %u", active);
	} else if (active < allowed) {
		check_say(c, VERDICT_WARN,
			  "active MTU %u, but %s's MTU %u allows %u: the "
			  "port has not caught up with the netdev",
			  active, netdev, nd, allowed);
	} else if (active < 4096) {
		check_say(c, VERDICT_NOTE,
			  "active MTU %u from %s's MTU %u; an MTU of %u on "
			  "%s (jumbo frames, end to end) allows 4096",
			  active, netdev, nd, 4096 + ROCE_HEADER_ROOM, netdev);
	} else {
		check_say(c, VERDICT_OK, "active MTU %u (%s MTU %u)", active,
			  netdev, nd);
	}
}

/*
 * ECN for RoCE shows in sysfs on drivers that have it (mlx5:
 * ecn/roce_np and ecn/roce_rp per priority); PFC does not, anywhere.
 */
static void check_flow_control(struct check *c, const char *dev,
			       const char *netdev)
{
	char path[640], line[16], enabled[64] = "";
	int prio;

	snprintf(path, sizeof(path), IB_CLASS "/%s/parent", dev);
	if (read_line(path, line, sizeof(line))) {
		check_say(c, VERDICT_NOTE,
			  "Soft-RoCE (rxe): no PFC or ECN; a lost packet "
			  "costs a retransmission timeout");
		return;
	}
	for (prio = 0; prio < 8; prio++) {
		snprintf(path, sizeof(path),
			 NET_CLASS "/%s/ecn/roce_np/enable/%d", netdev, prio);
		if (read_line(path, line, sizeof(line)) && line[0] == '1')
			snprintf(enabled + strlen(enabled),
				 sizeof(enabled) - strlen(enabled), " %d",
				 prio);
	}
	snprintf(path, sizeof(path), NET_CLASS "/%s/ecn", netdev);
	if (access(path, F_OK))
		check_say(c, VERDICT_NOTE,
			  "ECN: not shown by %s's driver; PFC: see "
			  "`dcb pfc show dev %s`",
			  dev, netdev);
	else if (enabled[0])
		check_say(c, VERDICT_OK,
			  "ECN on for priorities%s; PFC: see `dcb pfc show "
			  "dev %s`",
			  enabled, netdev);
	else
		check_say(c, VERDICT_WARN,
			  "ECN off for every priority on %s: congestion "
			  "means loss; PFC: see `dcb pfc show dev %s`",
			  netdev, netdev);
}

/* Whether the port is one roceshim can use. */
static bool check_port(struct check *c, struct ibv_context *ctx,
		       const char *dev, int port)
{
	struct ibv_port_attr pa;
	char netdev[IF_NAMESIZE + 1] = "";
	bool usable;

	memset(&pa, 0, sizeof(pa));
	if (c->libs.query_port(ctx, (uint8_t)port, (void *)&pa)) {
		check_say(c, VERDICT_WARN, "port %d: cannot be queried", port);
		return false;
	}
	port_netdev(dev, port, netdev, sizeof(netdev));
	usable = pa.state == IBV_PORT_ACTIVE &&
		 pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	check_say(c, usable ? VERDICT_OK : VERDICT_WARN,
		  "port %d: %s, %s%s%s%s", port, port_state_name(pa.state),
		  pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)"
							   : "InfiniBand",
		  netdev[0] ? " on " : "", netdev,
		  usable ? ""
		  : pa.link_layer != IBV_LINK_LAYER_ETHERNET
			  ? "; roceshim uses RoCE ports only"
			  : "; not ACTIVE: its netdev is down or has no "
			    "carrier");
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET && netdev[0]) {
		check_mtu(c, &pa, netdev);
		check_flow_control(c, dev, netdev);
	}
	return usable;
}

static unsigned int count_ports(const char *dev)
{
	char path[640];
	struct dirent *e;
	unsigned int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), IB_CLASS "/%s/ports", dev);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void check_devices(struct check *c)
{
	struct ibv_device **list;
	unsigned int usable = 0;
	int n = 0, i;

	printf("devices\n");
	if (!hostinfo_has_uverbs()) {
		check_say(c, VERDICT_FAIL,
			  "the kernel lists no RDMA device "
			  "(" HOSTINFO_UVERBS_CLASS
			  "): every connection stays on TCP (no_device). "
			  "For Soft-RoCE: `rdma link add rxe0 type rxe "
			  "netdev IFACE`");
		return;
	}
	if (!c->libs.loaded)
		return;
	list = c->libs.get_device_list(&n);
	if (!list || n <= 0) {
		check_say(c, VERDICT_FAIL,
			  "libibverbs opens no device, though the kernel "
			  "has one: its provider library is missing "
			  "(no_device)");
		if (list)
			c->libs.free_device_list(list);
		return;
	}
	for (i = 0; i < n; i++) {
		const char *dev = list[i]->name;
		struct ibv_context *ctx = c->libs.open_device(list[i]);
		unsigned int port, ports = count_ports(dev);

		printf(" %s\n", dev);
		if (!ctx) {
			check_say(c, VERDICT_WARN,
				  "cannot be opened: %s (permissions of "
				  "/dev/infiniband?)",
				  strerror(errno));
			continue;
		}
		for (port = 1; port <= ports; port++)
			usable += check_port(c, ctx, dev, (int)port);
		c->libs.close_device(ctx);
	}
	c->libs.free_device_list(list);
	if (!usable)
		check_say(c, VERDICT_FAIL,
			  "no ACTIVE RoCE port: every connection stays on "
			  "TCP (no_route)");
}

/* ---- addresses and GIDs -------------------------------------------------- */

struct gid_match {
	char dev[256];
	int port;
	int index;
};

/* Looks through one port's GID table for a RoCEv2 entry equal to gid. */
static bool find_in_port(const char *dev, int port, const struct in6_addr *gid,
			 struct gid_match *m)
{
	char path[640], line[64];
	struct in6_addr entry;
	int i;

	for (i = 0; i < GID_TABLE_MAX; i++) {
		snprintf(path, sizeof(path), IB_CLASS "/%s/ports/%d/gids/%d",
			 dev, port, i);
		if (!read_line(path, line, sizeof(line))) {
			if (errno == ENOENT)
				break;
			continue;
		}
		if (inet_pton(AF_INET6, line, &entry) != 1 ||
		    memcmp(&entry, gid, sizeof(entry)))
			continue;
		snprintf(path, sizeof(path),
			 IB_CLASS "/%s/ports/%d/gid_attrs/types/%d", dev, port,
			 i);
		if (!read_line(path, line, sizeof(line)) ||
		    strcmp(line, "RoCE v2"))
			continue;
		snprintf(m->dev, sizeof(m->dev), "%s", dev);
		m->port = port;
		m->index = i;
		return true;
	}
	return false;
}

static bool find_gid(const struct in6_addr *gid, struct gid_match *m)
{
	DIR *d = opendir(IB_CLASS);
	struct dirent *e;
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		unsigned int port, ports;

		if (e->d_name[0] == '.')
			continue;
		ports = count_ports(e->d_name);
		for (port = 1; !found && port <= ports; port++)
			found = find_in_port(e->d_name, (int)port, gid, m);
	}
	closedir(d);
	return found;
}

/* The GID an address has: itself, IPv4 mapped into IPv6. */
static bool address_gid(const struct sockaddr *sa, struct in6_addr *gid,
			char *text, size_t size)
{
	if (sa->sa_family == AF_INET) {
		const struct in_addr *a =
			&((const struct sockaddr_in *)sa)->sin_addr;

		if ((ntohl(a->s_addr) >> 24) == 127)
			return false;
		memset(gid, 0, sizeof(*gid));
		gid->s6_addr[10] = 0xff;
		gid->s6_addr[11] = 0xff;
		memcpy(&gid->s6_addr[12], a, 4);
		inet_ntop(AF_INET, a, text, size);
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_LINKLOCAL(a))
			return false;
		*gid = *a;
		inet_ntop(AF_INET6, a, text, size);
		return true;
	}
	return false;
}

static void check_addresses(struct check *c)
{
	struct ifaddrs *ifs, *ifa;
	unsigned int with_gid = 0, addresses = 0;

	printf("addresses\n");
	if (getifaddrs(&ifs)) {
		check_say(c, VERDICT_WARN, "cannot list addresses: %s",
			  strerror(errno));
		return;
	}
	for (ifa = ifs; ifa; ifa = ifa->ifa_next) {
		char text[INET6_ADDRSTRLEN];
		struct gid_match m;
		struct in6_addr gid;

		if (!ifa->ifa_addr ||
		    !address_gid(ifa->ifa_addr, &gid, text, sizeof(text)))
			continue;
		addresses++;
		if (find_gid(&gid, &m)) {
			with_gid++;
			check_say(c, VERDICT_OK,
				  "%s (%s): RoCEv2 GID %s port %d index %d",
				  text, ifa->ifa_name, m.dev, m.port, m.index);
		} else {
			check_say(c, VERDICT_NOTE,
				  "%s (%s): no RoCEv2 GID; connections over "
				  "it stay on TCP (no_route)",
				  text, ifa->ifa_name);
		}
	}
	freeifaddrs(ifs);
	if (addresses && !with_gid)
		check_say(c, VERDICT_FAIL,
			  "no address of this host has a RoCEv2 GID: add an "
			  "address to the netdev under the RDMA device");
}

/* ---- limits ----------------------------------------------------------------
 */

static void check_memlock(struct check *c)
{
	unsigned int start_kb = c->cfg.ring_start_kb < c->cfg.ring_kb
					? c->cfg.ring_start_kb
					: c->cfg.ring_kb;
	unsigned long long per_conn = 2ull * start_kb << 10;
	unsigned long long grown = 2ull * c->cfg.ring_kb << 10;
	struct rlimit rl;

	printf("limits\n");
	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    hostinfo_may_lock_without_limit()) {
		check_say(c, VERDICT_OK,
			  "RLIMIT_MEMLOCK: no limit for this process");
		return;
	}
	if (rl.rlim_cur < per_conn) {
		check_say(c, VERDICT_FAIL,
			  "RLIMIT_MEMLOCK %llu KiB is less than one "
			  "connection's rings at their start (%llu KiB): every "
			  "connection stays on TCP (memlock_limit). Raise it "
			  "(ulimit -l, LimitMEMLOCK= in systemd) or lower "
			  "ROCESHIM_RING_START_KB",
			  (unsigned long long)rl.rlim_cur >> 10,
			  per_conn >> 10);
		return;
	}
	check_say(c, VERDICT_OK,
		  "RLIMIT_MEMLOCK %llu KiB: room for %llu connections' rings "
		  "at their start (%llu KiB each; more stay on TCP, "
		  "memlock_limit), or %llu grown to ROCESHIM_RING_KB (%llu "
		  "KiB each; rings beyond keep their size)",
		  (unsigned long long)rl.rlim_cur >> 10,
		  (unsigned long long)rl.rlim_cur / per_conn, per_conn >> 10,
		  (unsigned long long)rl.rlim_cur / grown, grown >> 10);
}

int check_run(const char *peer)
{
	struct check c = { 0 };

	if (peer && !check_peer_syntax(peer)) {
		fprintf(stderr,
			"roceshim-stat: --check %s: expected HOST, HOST:PORT "
			"or [IPV6]:PORT\n",
			peer);
		return 2;
	}
	printf("roceshim fabric check\n");
	check_config(&c);
	check_libraries(&c);
	check_devices(&c);
	check_addresses(&c);
	check_memlock(&c);
	if (peer && !c.failures)
		check_peer(&c, peer);
	else if (peer)
		printf("peer %s: not checked, this host cannot use RDMA\n",
		       peer);
	if (c.failures)
		printf("verdict: RDMA cannot work%s; connections stay on "
		       "kernel TCP (%u problem%s above)\n",
		       peer ? " for this peer" : "", c.failures,
		       c.failures == 1 ? "" : "s");
	else
		printf("verdict: RDMA can work%s (%u warning%s)\n",
		       peer ? " with this peer" : "", c.warnings,
		       c.warnings == 1 ? "" : "s");
	return c.failures ? 1 : 0;
}
