#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Program shapes that hand a connection to another process, with
# default settings, each byte for byte (tests/fabric/shapes.py):
#   - servers: accept-then-fork (socketserver.ForkingTCPServer), prefork
#     workers, a handler exec'd with the socket as its stdio (fork+exec,
#     and subprocess.Popen), workers started as new programs with the
#     listener (subprocess.Popen by a PATH search whose first try fails,
#     and posix_spawn of a shell that execs the worker), against 6
#     concurrent clients of 200 KB each;
#   - clients that move their connection mid-transfer, both ways: daemon(),
#     posix_spawn of a helper that carries it, exec of itself, and
#     SCM_RIGHTS to another process.
# The stats say how each connection went: moved to TCP where another
# process took it over, or, once one has been, refused by the server
# (prefork where workers accept, handoff where a handler takes each
# accepted connection) and remembered by the client (negative_cache).
# (A daemon and an exec'd image have no stats of their own for it: the
# move is counted in the process that left.)  A server that forks for
# another reason (bgsave) and later closes a connection it never wrote
# to refuses nothing.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
shapes="$top_srcdir/tests/fabric/shapes.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-shapes.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; pkill -f "shapes.py (server|worker)" 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
addr=$ROCESHIM_FABRIC_ADDR_B

# start_server SHAPE: a server of that shape; its port in $port.
start_server() {
	"$ROCESHIM_RUN" "$PYTHON" "$shapes" server "$1" "$addr" \
		>"$tmp/server-$1" 2>&1 &
	port=$(peer_port "$tmp/server-$1")
}

for shape in forking prefork exec subprocess workers spawned; do
	start_server "$shape"
	timeout 300 "$ROCESHIM_RUN" "$PYTHON" "$shapes" client "$addr" "$port" \
		>"$tmp/client-$shape" 2>&1
	sed "s/^/    $shape: /" "$tmp/client-$shape"
	check_eq "${shape}_server_echoes_6_clients" ok \
		"$(awk '$1 == "echo" {print $2}' "$tmp/client-$shape")"
	moved=$(grep -c '^conn tcp none moved:peer$' "$tmp/client-$shape")
	case $shape in
	prefork | workers | spawned) why=prefork ;;
	*) why=handoff ;;
	esac
	# Once another process has taken a connection over, the server
	# refuses the handshakes on its port ($why): the later ones go on TCP.
	check "${shape}_first_client_connection_moved_by_the_server" \
		[ "$moved" -ge 1 ]
	check_eq "${shape}_client_connections_moved_or_refused" 6 \
		"$(grep -cE "^conn tcp (none moved:peer|$why|negative_cache)$" \
			"$tmp/client-$shape")"
	if [ "$shape" = forking ]; then
		grep '^handler' "$tmp/server-$shape" | sed 's/^/    server: /'
		# Each handler's own stats: the connection it took over, moved
		# by the fork, and none of the parent's pinned rings; one that
		# the server refused is on TCP from the start, and the handler
		# that only inherited it publishes nothing.
		check_eq forking_handlers_show_their_connection_moved_by_fork \
			"$moved" "$(grep -c '^handler tcp none moved:fork pinned 0 0$' \
				"$tmp/server-$shape")"
		check_eq forking_handlers_of_refused_connections_show_none \
			$((6 - moved)) "$(grep -c '^handler none none pinned -1 -1$' \
				"$tmp/server-$shape")"
		# A later client: refused, then remembered.
		timeout 300 "$ROCESHIM_RUN" "$PYTHON" "$shapes" client "$addr" \
			"$port" >"$tmp/client-again" 2>&1
		sed "s/^/    $shape, again: /" "$tmp/client-again"
		check_eq forking_later_client_echoes ok \
			"$(awk '$1 == "echo" {print $2}' "$tmp/client-again")"
		check_eq forking_later_client_refused_then_remembered 6 \
			"$(grep -cE '^conn tcp (handoff|negative_cache)$' \
				"$tmp/client-again")"
	fi
	kill %1 2>/dev/null
	pkill -f "shapes.py worker"
	wait 2>/dev/null
done

# A server that forks for something else (a background save) and later
# closes a connection it never wrote to has handed nothing over: its
# later clients stay on RDMA.
start_server bgsave
timeout 60 "$ROCESHIM_RUN" "$PYTHON" "$shapes" idle "$addr" "$port" \
	>"$tmp/idle" 2>&1
check_eq bgsave_idle_connection_ends eof \
	"$(awk '$1 == "idle" {print $2}' "$tmp/idle")"
timeout 300 "$ROCESHIM_RUN" "$PYTHON" "$shapes" client "$addr" "$port" \
	>"$tmp/client-bgsave" 2>&1
sed "s/^/    bgsave: /" "$tmp/client-bgsave"
check_eq bgsave_server_echoes_6_clients ok \
	"$(awk '$1 == "echo" {print $2}' "$tmp/client-bgsave")"
check_eq bgsave_later_clients_stay_on_rdma 6 \
	"$(grep -c '^conn rdma none$' "$tmp/client-bgsave")"
kill %1 2>/dev/null
wait 2>/dev/null

start_server echo
for shape in daemon spawn exec pass; do
	out=$tmp/$shape.daemon
	timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$shapes" "$shape" "$addr" \
		"$port" --out "$out" >"$tmp/$shape" 2>&1
	echo "rc $?" >>"$tmp/$shape"
	if [ "$shape" = daemon ]; then
		wait_for "$out" '^done' 600
		cat "$out" >>"$tmp/$shape"
	fi
	sed "s/^/    $shape: /" "$tmp/$shape"
	check_eq "${shape}_starts_on_rdma" "rdma none" \
		"$(awk '$1 == "before" {print $2, $3}' "$tmp/$shape")"
	for label in ${shape} ${shape}_rest; do
		[ "$shape" = pass ] && label=${label/pass/passed}
		check_eq "${label}_byte_exact" ok \
			"$(awk -v k="$label" '$1 == k {print $2}' "$tmp/$shape")"
	done
done
check_eq pass_sender_moved "tcp none moved:fd_passed" \
	"$(awk '$1 == "sender" {print $2, $3, $4}' "$tmp/pass")"
check_eq pass_receiver_exit 0 "$(awk '$1 == "receiver_exit" {print $2}' "$tmp/pass")"
finish
