#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Socket activation: an activator listens, waits for the first connection,
# then execs the server, which inherits the listener and accepts
# (systemd-socket-activate without --accept, inetd's wait mode).  The
# connections that reached the activator before the exec were accepted on
# its RDMA CM listener, and their clients sent over RDMA; the exec ends
# those queue pairs.  The exec hands them to the new program, whose
# accept() moves each to TCP from its first byte: every byte comes back,
# and the server's row says `exec`.  Connections after the exec find no
# CM listener and use TCP at once.  Both the test's own activator (which
# waits a moment, so that two connections are pending at the exec) and
# systemd's, which gives the server a fresh environment without
# LD_PRELOAD (the exec puts roceshim back in it).
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-activation.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

export ROCESHIM_CONNECT_TIMEOUT_MS=10000

# client NAME PORT: an echo of 1 MB, its transcript in $tmp/NAME.
client() {
	timeout 60 "$ROCESHIM_RUN" "$PYTHON" "$peer" echo \
		"$ROCESHIM_FABRIC_ADDR_B" "$2" --bind "$ROCESHIM_FABRIC_ADDR_A" \
		--bytes 1000000 --report >"$tmp/$1" 2>&1
	echo "rc $?" >>"$tmp/$1"
}

# check_client NAME
check_client() {
	sed "s/^/    $1: /" "$tmp/$1"
	check_eq "${1}_exit" 0 "$(awk '$1 == "rc" {print $2}' "$tmp/$1")"
	check_eq "${1}_echo" ok "$(awk '$1 == "echo" {print $2}' "$tmp/$1")"
}

# --- the test's activator: two connections pending at the exec ----------
# Its first exec fails, as os.execvp's do for PATH entries before the
# right one: the second must hand the connections over all the same.
# Its 10 s leave the second client, which starts 0.5 s after the first,
# time for Python's start and its handshake on a busy host.
"$ROCESHIM_RUN" "$PYTHON" "$peer" activate "$ROCESHIM_FABRIC_ADDR_B" \
	--count 3 --delay 10 --fail-first >"$tmp/srv" 2>&1 &
srv=$!
port=$(peer_port "$tmp/srv")
client first "$port" &
c1=$!
sleep 0.5
client second "$port" &
c2=$!
wait $c1 $c2
check_client first
check_client second
refused_echo after "$port" --bytes 1000000
wait $srv
sed 's/^/    server: /' "$tmp/srv"
check_eq pending_moved_by_exec 2 "$(grep -o 'conn tcp none moved:exec' "$tmp/srv" | wc -l)"

# --- a server slower to start than the move timeout ----------------------
# Over TCP the client waits for the accept() of a server still starting.
# Its peer having consumed and sent nothing, the client's move waits as
# long as a move may, not the move timeout (10 s here), and a server that
# takes 14 s to start gets the connection.
"$ROCESHIM_RUN" "$PYTHON" "$peer" activate "$ROCESHIM_FABRIC_ADDR_B" \
	--count 1 --start 14 >"$tmp/slow" 2>&1 &
srv=$!
port=$(peer_port "$tmp/slow")
client slow_client "$port"
check_client slow_client
wait $srv
sed 's/^/    slow server: /' "$tmp/slow"
check_eq slow_pending_moved_by_exec 1 \
	"$(grep -o 'conn tcp none moved:exec' "$tmp/slow" | wc -l)"

# --- systemd-socket-activate ----------------------------------------------
if command -v systemd-socket-activate >/dev/null; then
	port=$("$PYTHON" -c 'import socket, sys; s = socket.socket()
s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$ROCESHIM_FABRIC_ADDR_B")
	# It gives its program a fresh environment: no LD_PRELOAD.
	"$ROCESHIM_RUN" systemd-socket-activate \
		-l "$ROCESHIM_FABRIC_ADDR_B:$port" -E ROCESHIM_STAT \
		"$PYTHON" "$peer" activated --fd 3 --count 2 >"$tmp/sd" 2>&1 &
	srv=$!
	wait_for "$tmp/sd" '^Listening on '
	client sd_first "$port"
	check_client sd_first
	client sd_after "$port"
	check_client sd_after
	wait $srv
	sed 's/^/    systemd: /' "$tmp/sd"
	check_eq sd_pending_moved_by_exec 1 \
		"$(grep -o 'conn tcp none moved:exec' "$tmp/sd" | wc -l)"
else
	echo "    no systemd-socket-activate in this guest: its part skipped"
fi
finish
