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
	refused_echo "client$i" "$port"
done
sleep 1
sed 's/^/    server: /' "$tmp/srv"
check_eq daemon_conns_on_tcp 2 "$(grep -c '^conn tcp' "$tmp/srv")"
finish
