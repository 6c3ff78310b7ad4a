#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A server hands an upgraded connection to a fork child and then leaves at
# once: it closes its copy and exits, or execs another program.  The close
# starts the connection's move to TCP, which the owner must finish before
# it goes, as the kernel finishes a closed socket's work after its process
# has gone.  netem delays lo (kernel TCP between the two local addresses,
# which carries the move) by 100 ms, so that the move outlasts the exit.
# The child must echo every byte, and the client must see the connection
# start on RDMA and end moved to TCP by its peer.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-handoff.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; tc qdisc del dev lo root 2>/dev/null;
	rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

if ! err=$(modprobe sch_netem 2>&1); then
	echo "SKIP: no netem in this guest: $err"
	exit 77
fi

# run_handoff exit|exec: the client's transcript in $tmp/$1.
run_handoff() {
	local port

	"$ROCESHIM_RUN" "$PYTHON" "$peer" handoff "$ROCESHIM_FABRIC_ADDR_A" \
		--then "$1" >"$tmp/$1.srv" 2>&1 &
	port=$(peer_port "$tmp/$1.srv")
	tc qdisc add dev lo root netem delay 100ms || exit 1
	timeout 60 "$ROCESHIM_RUN" "$PYTHON" "$peer" echo \
		"$ROCESHIM_FABRIC_ADDR_A" "$port" --bind "$ROCESHIM_FABRIC_ADDR_B" \
		--bytes 200000 --report --report-after >"$tmp/$1" 2>&1
	echo "rc $?" >>"$tmp/$1"
	tc qdisc del dev lo root
	wait
	sed "s/^/    $1: /" "$tmp/$1" "$tmp/$1.srv"
	check_eq "${1}_client_exit" "rc 0" "$(grep '^rc ' "$tmp/$1")"
	check_eq "${1}_echo_byte_exact" "echo ok" "$(grep '^echo ' "$tmp/$1")"
	check_eq "${1}_started_on_rdma" "conn rdma none" \
		"$(grep -m1 '^conn ' "$tmp/$1")"
	check_eq "${1}_moved_by_the_peer" "conn tcp none moved:peer" \
		"$(grep '^conn ' "$tmp/$1" | tail -n 1)"
}

run_handoff exit
run_handoff exec
finish
