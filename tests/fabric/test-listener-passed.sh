#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A supervisor hands its listener to a worker over a unix socket
# (SCM_RIGHTS) and keeps its own copy open; the worker accepts.  Only the
# supervisor could serve the RDMA handshakes of that listener, and the
# worker's accept() cannot take a connection the supervisor accepted on
# the CM: so a listener sent to another process takes its connections
# over TCP from then on, refused RDMA at once, with every byte exact.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-listener-passed.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

"$ROCESHIM_RUN" "$PYTHON" "$peer" pass-listener "$ROCESHIM_FABRIC_ADDR_B" \
	--dir "$tmp" --count 2 >"$tmp/srv" 2>&1 &
srv=$!
port=$(peer_port "$tmp/srv")
# A connection the worker could not serve would hang.
for i in 1 2; do
	refused_echo "client$i" "$port" --bytes 1000000
done
wait $srv
sed 's/^/    server: /' "$tmp/srv"
check_eq worker_served_both 2 "$(grep -c '^conn ' "$tmp/srv")"
finish
