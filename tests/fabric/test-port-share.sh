#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Listeners that share a port (default settings), each shape checked with
# 30 concurrent connections from B that echo 100 kB each, byte-exact:
# - one process listens with SO_REUSEPORT (gRPC, HAProxy, nc): alone on
#   its port, it holds the port's RDMA CM listener, and its connections
#   are on RDMA;
# - two processes listen with SO_REUSEPORT: the kernel spreads the TCP
#   connections over both, while only the first holds the CM listener.
#   The second claims what the first took on the CM and it accepted:
#   those move to TCP before their first byte (downgrade reuseport), and
#   the first then refuses the port's handshakes a while (reason
#   reuseport).  Both processes accept some, the first some on RDMA, the
#   second none on RDMA, some claimed, and each of its rows says
#   reuseport;
# - one process listens twice with SO_REUSEPORT, a thread accepting on
#   each: the second listener takes what the first's CM listener took,
#   and every connection is on RDMA;
# - two SO_REUSEPORT listeners, then two forked workers that accept on
#   one each (nginx's "reuseport"): byte-exact;
# - one process listens on [::] with IPV6_V6ONLY, then on the A address
#   (nginx's "listen [::]:80" beside "listen 80"): the IPv6 listener's CM
#   listener must not take the IPv4 handshakes, so the IPv4 listener's
#   connections are on RDMA.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
ps="$top_srcdir/tests/fabric/port_share.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-port-share.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# serve NAME MODE PORT: a server in the background, its pid in NAME.pid.
serve() {
	"$ROCESHIM_RUN" "$PYTHON" "$ps" "$2" "$ROCESHIM_FABRIC_ADDR_A" "$3" \
		>"$tmp/$1" 2>&1 &
	echo $! >"$tmp/$1.pid"
	wait_for "$tmp/$1" '^listening' || { cat "$tmp/$1"; exit 1; }
}

# echoes NAME PORT: 30 connections from B, checked.
echoes() {
	timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$ps" client \
		"$ROCESHIM_FABRIC_ADDR_A" "$2" --conns 30 \
		--bind "$ROCESHIM_FABRIC_ADDR_B" >"$tmp/$1.client" 2>&1
	echo "rc $?" >>"$tmp/$1.client"
	sed "s/^/    $1 client: /" "$tmp/$1.client" | sort | uniq -c | head
	check_eq "${1}_echoes_byte_exact" "ok 30 bad 0" \
		"$(grep '^ok ' "$tmp/$1.client")"
}

# rows NAME TRANSPORT [REASON [DOWNGRADE]]: how many of server NAME's
# connections are on it (with that fallback reason and downgrade cause).
rows() {
	"$ROCESHIM_STAT" --json "$(cat "$tmp/$1.pid")" >"$tmp/$1.json" \
		2>/dev/null
	"$PYTHON" -c '
import json, sys
rows = json.load(open(sys.argv[1]))["connections"]
print(sum(r["transport"] == sys.argv[2] and r["role"] == "passive" and
          sys.argv[3] in ("any", r["fallback"]) and
          sys.argv[4] in ("any", r["downgrade"]) for r in rows))' \
		"$tmp/$1.json" "$2" "${3:-any}" "${4:-any}"
}

serve alone serve 19098
echoes reuseport_alone 19098
check_eq reuseport_alone_conns_on_rdma 30 "$(rows alone rdma)"
kill "$(cat "$tmp/alone.pid")"

serve reuse1 serve 19099
serve reuse2 serve 19099
echoes reuseport 19099
for s in reuse1 reuse2; do
	check "${s}_accepted_some" grep -q '^accepted' "$tmp/$s"
done
check_eq reuse2_no_rdma_row 0 "$(rows reuse2 rdma)"
claimed=$(rows reuse2 tcp none reuseport)
echo "    reuse2: $claimed claimed from reuse1, $(rows reuse2 tcp reuseport)" \
	"on TCP from the start; reuse1: $(rows reuse1 rdma) on rdma"
check reuse2_claimed_some test "$claimed" -ge 1
check reuse1_some_on_rdma test "$(rows reuse1 rdma)" -ge 1
check_eq reuse2_rows_say_reuseport "$(rows reuse2 tcp)" \
	"$((claimed + $(rows reuse2 tcp reuseport)))"

serve two serve-two 19101
echoes reuseport_one_process 19101
check_eq reuseport_one_process_conns_on_rdma 30 "$(rows two rdma)"

serve prefork serve-prefork 19102
echoes reuseport_prefork 19102
pkill -P "$(cat "$tmp/prefork.pid")"

serve pair serve-pair 19100
echoes v6only_pair 19100
check_eq v6only_pair_ipv4_conns_on_rdma 30 "$(rows pair rdma)"
finish
