#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A forking server (default settings) whose handler closes its connection
# while a handler forked just after it lives on: the client sees the end
# of its stream at once, as over TCP, and not when the later child exits
# (tests/fabric/fork_eof.py).  The server closes its copy of the first
# connection while it is still on RDMA, so roceshim keeps the socket
# until it has moved; the client is stopped meanwhile, so the move is
# still under way when the server forks the second handler.  That child
# must not inherit roceshim's copy of the first connection's socket.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/fork_eof.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-fork-eof.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; pkill -f "fork_eof.py server" 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
rounds=5

# A server per round: once a handler has taken a connection over, the
# server refuses the next ones on its port (handoff), and they start on
# TCP.
for round in $(seq $rounds); do
	"$ROCESHIM_RUN" "$PYTHON" "$script" server "$ROCESHIM_FABRIC_ADDR_B" \
		"$tmp/gate" >"$tmp/server" 2>&1 &
	port=$(peer_port "$tmp/server")
	timeout 300 "$ROCESHIM_RUN" "$PYTHON" "$script" client \
		"$ROCESHIM_FABRIC_ADDR_B" "$port" "$tmp/gate" \
		--bind "$ROCESHIM_FABRIC_ADDR_A" --rounds 1 >"$tmp/client" 2>&1
	sed "s/^/    $round: /" "$tmp/client"
	cat "$tmp/client" >>"$tmp/clients"
	kill %1 2>/dev/null
	pkill -f "fork_eof.py server" 2>/dev/null
	wait 2>/dev/null
done

check_eq every_round_reads_bye_then_eof $rounds \
	"$(grep -c "got b'bye' end b'' " "$tmp/clients")"
# The later child holds its connection 8 s: an EOF that waited for it
# comes after that.
check_eq eof_within_2_s yes \
	"$(awk '$1 == "worst_eof_ms" && $2 >= 2000 {n++}
		END {print n ? "no" : "yes"}' "$tmp/clients")"
check_eq connections_upgraded_then_moved_by_the_server $rounds \
	"$(grep -c '^conn tcp none moved:peer$' "$tmp/clients")"
finish
