#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A server whose accept() gives up waiting for its side of the RDMA
# handshake (ROCESHIM_CONNECT_TIMEOUT_MS=10 there, so its progress
# thread's ESTABLISHED event often comes too late) while the client's side
# is up and the client has sent its request over RDMA
# (tests/fabric/late_established.py, 200 connections at once, default
# settings on the client).  The server lets the queue pair go; the
# client's marker then comes on the kernel socket and the connection
# moves to TCP with every byte, where it once stayed on TCP without them
# and handed the marker to the program as data.
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
echo "    server: $(grep -c 'not completed by the client' "$tmp/server") stayed on TCP"
check_eq every_request_answered_whole "client ok $n wrong 0 error 0" \
	"$(grep '^client ' "$tmp/client")"
check_eq no_server_side_failure "server wrong 0" \
	"$(grep '^server wrong' "$tmp/server")"
finish
