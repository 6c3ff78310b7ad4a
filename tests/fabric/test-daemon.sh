#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A server that daemonizes after it listens (lighttpd without -D, rsync
# --daemon, dnsmasq): its parent made the RDMA CM listener beside the
# listener, forks and exits, and the child serves.  A fork child serves
# no RDMA handshake, and lets go of its copy of the parent's CM channel,
# so that the kernel drops the CM listener with the parent and refuses
# handshakes at once: clients use TCP without waiting for the handshake's
# timeout, and every byte comes back.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-daemon.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; pkill -f "peer.py daemon-serve" ; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

"$ROCESHIM_RUN" "$PYTHON" "$peer" daemon-serve "$ROCESHIM_FABRIC_ADDR_B" \
	--count 2 >"$tmp/srv" 2>&1
port=$(peer_port "$tmp/srv")
for i in 1 2; do
	# A handshake that waited for its timeout would take 10 s.
	start=$(date +%s%N)
	ROCESHIM_CONNECT_TIMEOUT_MS=10000 "$ROCESHIM_RUN" "$PYTHON" "$peer" \
		echo "$ROCESHIM_FABRIC_ADDR_B" "$port" \
		--bind "$ROCESHIM_FABRIC_ADDR_A" --report >"$tmp/cli$i" 2>&1
	echo "rc $?" >>"$tmp/cli$i"
	ms=$((($(date +%s%N) - start) / 1000000))
	sed "s/^/    client $i: /" "$tmp/cli$i"
	echo "    client $i took $ms ms"
	check_eq "client${i}_exit" 0 "$(awk '$1 == "rc" {print $2}' "$tmp/cli$i")"
	check_eq "client${i}_echo" ok "$(awk '$1 == "echo" {print $2}' "$tmp/cli$i")"
	check_eq "client${i}_on_tcp_refused" "conn tcp peer_rejected" \
		"$(grep -m1 '^conn ' "$tmp/cli$i")"
	check "client${i}_refused_at_once" [ "$ms" -lt 6000 ]
done
sleep 1
sed 's/^/    server: /' "$tmp/srv"
check_eq daemon_conns_on_tcp 2 "$(grep -c '^conn tcp' "$tmp/srv")"
finish
