#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A server whose accept() would give up on its side of the RDMA handshake
# at its connect timeout (ROCESHIM_CONNECT_TIMEOUT_MS=10 there, so its
# progress thread's ESTABLISHED event often comes later than that) while
# the client's side is up and the client has sent its request over RDMA
# (tests/fabric/late_established.py, 200 connections at once, default
# settings on the client).  accept() waits for the CM's outcome instead,
# which the CM's retransmissions make certain: no connection is let go
# and moved, every byte arrives.  Letting go relied on a single CM
# message to tell the client, and lost a connection when it was lost.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/late_established.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-late-established.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
n=200

ROCESHIM_CONNECT_TIMEOUT_MS=10 ROCESHIM_LOG_LEVEL=info \
	timeout 150 "$ROCESHIM_RUN" "$PYTHON" "$script" server \
	"$ROCESHIM_FABRIC_ADDR_B" $n >"$tmp/server" 2>&1 &
server=$!
port=$(peer_port "$tmp/server")
timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$script" client \
	"$ROCESHIM_FABRIC_ADDR_B" "$port" $n \
	--bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/client" 2>&1
wait "$server"
sed 's/^/    client: /' "$tmp/client"
grep -v '^roceshim' "$tmp/server" | sed 's/^/    server: /'
moved=$(grep -c "gave up on was up" "$tmp/server")
echo "    server: $moved connections moved after a late handshake"
echo "    server: $(grep -c 'not completed by the client' "$tmp/server") stayed on TCP (the client gave up)"
undecided=$(grep -c 'no outcome of an answered' "$tmp/server")
echo "    server: $undecided stayed on TCP undecided"
check_eq every_request_answered_whole "client ok $n wrong 0 error 0" \
	"$(grep '^client ' "$tmp/client")"
check_eq no_server_side_failure "server wrong 0" \
	"$(grep '^server wrong' "$tmp/server")"
check_eq no_answered_handshake_let_go "0 0" "$moved $undecided"
finish
