#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Who talks RDMA and who falls back, with default settings where roceshim
# runs: each scenario moves 100 KB through an echo and checks the bytes,
# and each end's stats row must name the expected transport and reason.
#   both ends under roceshim, RDMA route        -> rdma on both ends
#   server without roceshim                     -> client: peer_rejected
#   the same server again, same process         -> client: negative_cache
#                                                  (its port refused the
#                                                  request made once TCP
#                                                  was up)
#   server stopped (SIGSTOP) during handshake   -> client: timeout, then
#                                                  negative_cache; the
#                                                  server, resumed: peer_tcp
#   client without roceshim                     -> server: peer_tcp
#   peer on the route without RDMA (vethC/D)    -> client: no_route
#   client that cannot pin its rings (as nobody,
#   RLIMIT_MEMLOCK 16 KiB)                      -> client: memlock_limit, and
#                                                  its log names the limit;
#                                                  server: peer_tcp
#   client within 32 descriptors of its
#   RLIMIT_NOFILE (ulimit -n 24)                -> client: fd_limit, logged
#                                                  once; server: peer_tcp
#   client rings up to 512 KiB, server's up to
#   256 KiB                                     -> rdma on both ends: each
#                                                  end caps its own rings
#   client rings starting at 64 KiB, server's
#   up to 16 KiB                                -> client: peer_rejected;
#                                                  the server's log names
#                                                  both sizes
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-fallback.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# start_server NAME PRELOAD(0/1) ADDR [COUNT]: sets port
start_server() {
	local name=$1 pre=$2 addr=$3 count=${4:-1} run=()
	[ "$pre" = 1 ] && run=("$ROCESHIM_RUN")
	"${run[@]}" "$PYTHON" "$peer" serve "$addr" --count "$count" \
		--report --linger 120 --until-echoed >"$tmp/$name.srv" 2>&1 &
	port=$(peer_port "$tmp/$name.srv")
}

# client NAME PRELOAD ADDR PORT [BIND [REPEAT]]; $as_user, when set, is
# a command prefix (setpriv) that the client runs under.
as_user=()
client() {
	local name=$1 pre=$2 addr=$3 cport=$4 run=() bind=()
	[ "$pre" = 1 ] && run=("$ROCESHIM_RUN")
	[ -n "${5:-}" ] && bind=(--bind "$5")
	"${as_user[@]}" "${run[@]}" "$PYTHON" "$peer" echo "$addr" "$cport" \
		--report --repeat "${6:-1}" "${bind[@]}" >"$tmp/$name.cli" 2>&1
}

conn_of() { # file [N] -> "transport reason" of the Nth connection
	sleep 0.5
	awk '/^conn / {print $2, $3}' "$1" | sed -n "${2:-1}p"
}
echo_of() { awk '/^echo / {print $2}' "$1" | sort -u | tr '\n' ' ' |
	sed 's/ $//'; }

A=$ROCESHIM_FABRIC_ADDR_A
B=$ROCESHIM_FABRIC_ADDR_B

start_server both 1 "$B"
client both 1 "$B" "$port" "$A"
check_eq both_ends_echo ok "$(echo_of "$tmp/both.cli")"
check_eq both_ends_client_rdma "rdma none" "$(conn_of "$tmp/both.cli")"
check_eq both_ends_server_rdma "rdma none" "$(conn_of "$tmp/both.srv")"

start_server plain 0 "$B" 2
client rejected 1 "$B" "$port" "$A" 2
check_eq plain_server_echo ok "$(echo_of "$tmp/rejected.cli")"
check_eq plain_server_client_reason "tcp peer_rejected" \
	"$(conn_of "$tmp/rejected.cli" 1)"
check_eq same_peer_again_reason "tcp negative_cache" \
	"$(conn_of "$tmp/rejected.cli" 2)"

# The stopped server answers neither the CM request nor, until resumed,
# the echo; the kernel completes its TCP handshakes meanwhile.  Resumed, it
# sees the stale CM request and must still agree on TCP.
start_server silent 1 "$B" 2
silent_pid=$!
kill -STOP "$silent_pid"
(
	export ROCESHIM_CONNECT_TIMEOUT_MS=500 ROCESHIM_LOG_LEVEL=debug
	client silent 1 "$B" "$port" "$A" 2
) &
client_pid=$!
wait_for "$tmp/silent.cli" 'on tcp \(timeout\)' 600
kill -CONT "$silent_pid"
wait "$client_pid"
check_eq silent_server_echo ok "$(echo_of "$tmp/silent.cli")"
check_eq silent_server_client_reason "tcp timeout" \
	"$(conn_of "$tmp/silent.cli" 1)"
check_eq silent_server_again_reason "tcp negative_cache" \
	"$(conn_of "$tmp/silent.cli" 2)"
check_eq silent_server_resumed_reason "tcp peer_tcp" \
	"$(conn_of "$tmp/silent.srv" 1)"

start_server tcpclient 1 "$B"
client tcpclient 0 "$B" "$port" "$A"
check_eq plain_client_echo ok "$(echo_of "$tmp/tcpclient.cli")"
check_eq plain_client_server_reason "tcp peer_tcp" \
	"$(conn_of "$tmp/tcpclient.srv")"

start_server noroute 1 "$ROCESHIM_FABRIC_NORDMA_B"
client noroute 1 "$ROCESHIM_FABRIC_NORDMA_B" "$port" \
	"$ROCESHIM_FABRIC_NORDMA_A"
check_eq no_rdma_route_echo ok "$(echo_of "$tmp/noroute.cli")"
check_eq no_rdma_route_reason "tcp no_route" "$(conn_of "$tmp/noroute.cli")"

# Root may pin past RLIMIT_MEMLOCK (CAP_IPC_LOCK): the client runs as
# nobody, with 16 KiB where its two rings need 32 at their start.
start_server memlock 1 "$B"
(
	ulimit -l 16
	export ROCESHIM_LOG_LEVEL=info
	as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups
		--inh-caps=-all)
	client memlock 1 "$B" "$port" "$A"
)
check_eq unpinnable_rings_echo ok "$(echo_of "$tmp/memlock.cli")"
check_eq unpinnable_rings_client_reason "tcp memlock_limit" \
	"$(conn_of "$tmp/memlock.cli")"
check unpinnable_rings_log_names_the_limit \
	grep -q 'no queue pair and rings.*RLIMIT_MEMLOCK' "$tmp/memlock.cli"
check_eq unpinnable_rings_server_reason "tcp peer_tcp" \
	"$(conn_of "$tmp/memlock.srv")"

start_server fdlimit 1 "$B" 2
(
	ulimit -n 24
	export ROCESHIM_LOG_LEVEL=info
	client fdlimit 1 "$B" "$port" "$A" "" 2
)
check_eq near_fd_limit_echo ok "$(echo_of "$tmp/fdlimit.cli")"
check_eq near_fd_limit_client_reason "tcp fd_limit" \
	"$(conn_of "$tmp/fdlimit.cli")"
check_eq near_fd_limit_logged_once 1 \
	"$(grep -c 'RLIMIT_NOFILE.*(fd_limit)' "$tmp/fdlimit.cli")"
check_eq near_fd_limit_server_reason "tcp peer_tcp" \
	"$(conn_of "$tmp/fdlimit.srv")"

start_server maxima 1 "$B"
ROCESHIM_RING_KB=512 client maxima 1 "$B" "$port" "$A"
check_eq different_ring_maxima_echo ok "$(echo_of "$tmp/maxima.cli")"
check_eq different_ring_maxima_client_reason "rdma none" \
	"$(conn_of "$tmp/maxima.cli")"
check_eq different_ring_maxima_server_reason "rdma none" \
	"$(conn_of "$tmp/maxima.srv")"

ROCESHIM_RING_KB=16 ROCESHIM_LOG_LEVEL=info start_server rings 1 "$B"
ROCESHIM_RING_START_KB=64 client rings 1 "$B" "$port" "$A"
check_eq start_above_peer_maximum_echo ok "$(echo_of "$tmp/rings.cli")"
check_eq start_above_peer_maximum_client_reason "tcp peer_rejected" \
	"$(conn_of "$tmp/rings.cli")"
check start_above_peer_maximum_server_log_names_both_sizes \
	grep -q "client's ring starts at 64 KiB, above this end's ROCESHIM_RING_KB (16)" \
	"$tmp/rings.srv"

finish
