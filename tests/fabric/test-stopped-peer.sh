#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A server hands its connection to a handler while the client is stopped
# (tests/fabric/stopped_peer.py): an exec'd handler, or a fork child while
# the server holds on to its copy.  Over TCP the resumed client talks to
# the handler.  With RDMA on, the handler's use moves the connection to
# TCP, which needs the stopped client's marker: the move gives up and the
# connection is reset (README, Limitations).  The resumed client must then
# read only the server's own bytes (the payload its ring holds, never the
# move's marker), then ECONNRESET: never an early end of stream that it
# could take for a clean close, nor a wait.  The handler's end reports
# the reset as a TCP socket would: ECONNRESET once, then EPIPE and EOF.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/stopped_peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-stopped-peer.XXXXXX") || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# exchange NAME RDMA [--fork]: prints the client's "read", "prefix" and
# "end".
exchange() {
	local port server client
	ROCESHIM_RDMA=$2 ROCESHIM_LOG_FILE="$tmp/$1.server.log" \
		"$ROCESHIM_RUN" "$PYTHON" "$script" server \
		"$ROCESHIM_FABRIC_ADDR_A" "$tmp/$1.gate" "${@:3}" \
		>"$tmp/$1.server" 2>&1 &
	server=$!
	port=$(peer_port "$tmp/$1.server")
	ROCESHIM_RDMA=$2 timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$script" \
		client "$ROCESHIM_FABRIC_ADDR_A" "$port" "$tmp/$1.gate" \
		--bind "$ROCESHIM_FABRIC_ADDR_B" >"$tmp/$1.client" 2>&1 &
	client=$!
	wait "$server"
	# A server that died before its handler woke the client.
	sleep 1
	[ -f "$tmp/$1.gate" ] && kill -CONT "$(cat "$tmp/$1.gate")" 2>/dev/null
	wait "$client"
	echo "rc $?" >>"$tmp/$1.client"
	sed "s/^/    $1 client: /" "$tmp/$1.client"
	grep -hv '^port ' "$tmp/$1.server" "$tmp/$1.server.log" \
		2>/dev/null | sed "s/^/    $1 server: /"
}
field() { awk -v k="$2" '$1 == k {print $2}' "$tmp/$1.client"; }
# handler NAME STEP: what the handler said of STEP ("greeting", ...).
handler() { sed -n "s/^handler: $2 //p" "$tmp/$1.server"; }

# expect_reset NAME: the checks of a connection the failed move reset.
expect_reset() {
	check_eq "${1}_client_reads_only_the_servers_bytes" "yes" \
		"$(field "$1" prefix)"
	check_eq "${1}_client_sees_the_reset" ConnectionResetError \
		"$(field "$1" end)"
	check "${1}_client_reads_what_its_ring_held" \
		test "$(field "$1" read)" -ge $((16 << 10)) 2>/dev/null
}

for shape in exec fork; do
	flag=
	[ $shape = fork ] && flag=--fork
	exchange "tcp_$shape" 0 $flag
	check_eq "tcp_${shape}_client_talks_to_the_handler" "ok" \
		"$(field "tcp_$shape" end)"
	check_eq "tcp_${shape}_client_reads_the_servers_bytes" "yes" \
		"$(field "tcp_$shape" prefix)"
	exchange "rdma_$shape" 1 $flag
	expect_reset "rdma_$shape"
	# The handler's end failed too: first the reset, as TCP reports it.
	check_eq "rdma_${shape}_handler_sees_the_reset" ConnectionResetError \
		"$(handler "rdma_$shape" greeting)"
done
# Then, as on a TCP socket that received a reset, EPIPE and EOF (an
# exec'd image holds the socket without roceshim's state: README).
check_eq rdma_fork_handler_write_after_the_reset_is_a_broken_pipe \
	BrokenPipeError "$(handler rdma_fork "write again")"
check_eq rdma_fork_handler_read_after_the_reset_is_eof 0 \
	"$(handler rdma_fork "read again")"

finish
