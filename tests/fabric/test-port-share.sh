#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Listeners that share a port (default settings), each shape checked with
# 30 concurrent connections from B that echo 100 kB each, byte-exact:
# - two processes listen with SO_REUSEPORT: the kernel spreads the TCP
#   connections over both, while only one could hold the port's RDMA CM
#   listener.  Such listeners stay on TCP, and so do their clients: both
#   processes accept some, no row says rdma, and each accepted row names
#   the listener's reason (unsupported), not the client's;
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

# rows NAME TRANSPORT [REASON]: how many of server NAME's connections are
# on it (with that fallback reason).
rows() {
	"$ROCESHIM_STAT" --json "$(cat "$tmp/$1.pid")" >"$tmp/$1.json" \
		2>/dev/null
	"$PYTHON" -c '
import json, sys
rows = json.load(open(sys.argv[1]))["connections"]
print(sum(r["transport"] == sys.argv[2] and r["role"] == "passive" and
          sys.argv[3] in ("any", r["fallback"]) for r in rows))' \
		"$tmp/$1.json" "$2" "${3:-any}"
}

serve reuse1 serve 19099
serve reuse2 serve 19099
echoes reuseport 19099
for s in reuse1 reuse2; do
	check "${s}_accepted_some" grep -q '^accepted' "$tmp/$s"
	check_eq "${s}_no_rdma_row" 0 "$(rows $s rdma)"
	check "${s}_rows_say_unsupported" test "$(rows $s tcp unsupported)" -ge 1
	check_eq "${s}_no_other_reason" "$(rows $s tcp)" \
		"$(rows $s tcp unsupported)"
done

serve pair serve-pair 19100
echoes v6only_pair 19100
check_eq v6only_pair_ipv4_conns_on_rdma 30 "$(rows pair rdma)"
finish
