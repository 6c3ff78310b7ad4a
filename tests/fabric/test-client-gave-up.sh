#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Connect requests whose clients gave up before the server's progress
# thread came to them (tests/fabric/late_established.py: 5 connections at
# once, each sending 4 KiB and reading its digest).  The server is stopped
# (SIGSTOP) for 2 s while its clients, with a connect timeout of 200 ms,
# give up on RDMA and connect over TCP.  Resumed, the server finds their
# requests in its queue with the CM past them, and refuses them without
# setting up a queue pair and rings; every connection is answered over
# TCP, byte-exact.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/late_established.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-client-gave-up.XXXXXX") || exit 1
trap 'kill -CONT $(jobs -p) 2>/dev/null; kill $(jobs -p) 2>/dev/null;
	rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
n=5

ROCESHIM_LOG_LEVEL=debug ROCESHIM_LOG_FILE="$tmp/server.log" \
	"$ROCESHIM_RUN" "$PYTHON" "$script" server "$ROCESHIM_FABRIC_ADDR_B" \
	$n >"$tmp/server" 2>&1 &
server=$!
port=$(peer_port "$tmp/server")
kill -STOP $server
ROCESHIM_CONNECT_TIMEOUT_MS=200 ROCESHIM_LOG_LEVEL=debug \
	ROCESHIM_LOG_FILE="$tmp/client.log" timeout 120 "$ROCESHIM_RUN" \
	"$PYTHON" "$script" client "$ROCESHIM_FABRIC_ADDR_B" "$port" $n \
	--bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/client" 2>&1 &
client=$!
sleep 2
kill -CONT $server
wait $client
( sleep 60; kill $server 2>/dev/null ) &
wait $server
sed 's/^/    client: /' "$tmp/client"
sed 's/^/    server: /' "$tmp/server"
gave_up=$(grep -c 'on tcp (timeout)' "$tmp/client.log")
on_rdma=$(grep -c ' on rdma' "$tmp/client.log")
dropped=$(grep -c 'its client gave up' "$tmp/server.log")
pinned=$(grep -c 'no queue pair and rings' "$tmp/server.log")
echo "    client: $gave_up connects gave up on RDMA (timeout)"
echo "    server: $dropped requests refused for a client that gave up," \
	"$pinned that failed after setting up"
check_eq every_connection_answered_whole "client ok $n wrong 0 error 0" \
	"$(grep '^client ' "$tmp/client")"
check_eq no_server_side_failure "server wrong 0" \
	"$(grep '^server wrong' "$tmp/server")"
check_eq no_connection_on_rdma 0 "$on_rdma"
check clients_gave_up_on_rdma [ "$gave_up" -ge 1 ]
check requests_of_clients_that_gave_up_are_refused [ "$dropped" -ge 1 ]
check_eq none_is_set_up_for_nothing 0 "$pinned"
finish
