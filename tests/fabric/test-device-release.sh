#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A removed RDMA device is let go by the processes that live on.  rxe lets
# a device be deleted only once every process has closed its context of
# it, and every process with RDMA opens every device's.  Here rxe1 (B's
# device) is deleted while a server on A and a client bound to A, whose
# connection is on rxe0, run: neither used rxe1 (a client bound to B did,
# and is gone).  The deletion must end while both still run, and their
# connection goes on over RDMA, byte for byte; once rxe1 is back, the
# server takes a new connection from B over RDMA.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-device-release.XXXXXX") || exit 1
A=$ROCESHIM_FABRIC_ADDR_A
B=$ROCESHIM_FABRIC_ADDR_B
# Seconds the deletion may take.
LIMIT=30
restore() {
	rdma link show | grep -q "^link rxe1/" ||
		rdma link add rxe1 type rxe netdev vethB
}
trap 'kill $(jobs -p) 2>/dev/null; wait; restore; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$A" --count 3 --linger 300 \
	--report >"$tmp/server" 2>&1 &
server=$!
port=$(peer_port "$tmp/server") || {
	echo "FAIL: the server did not start"
	exit 1
}
"$ROCESHIM_RUN" "$PYTHON" "$peer" echo "$A" "$port" --bind "$B" --report \
	>"$tmp/first" 2>&1
check_eq first_client_on_rdma "conn rdma none" \
	"$(grep -m1 '^conn ' "$tmp/first")"

mkfifo "$tmp/go" && exec 3<>"$tmp/go"
"$ROCESHIM_RUN" "$PYTHON" "$peer" echo-hold "$A" "$port" --bind "$A" \
	--bytes 1000000 <&3 >"$tmp/held" 2>&1 &
held=$!
wait_for "$tmp/held" '^held' 600 || {
	echo "FAIL: the held client did not echo"
	cat "$tmp/held"
	exit 1
}
check_eq held_client_starts_on_rdma "conn rdma none" \
	"$(grep -m1 '^conn ' "$tmp/held")"

rdma link delete rxe1 &
deleting=$!
start=$SECONDS
for _ in $(seq $((LIMIT * 10))); do
	kill -0 "$deleting" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$deleting" 2>/dev/null; then
	echo "# rxe1 still open after ${LIMIT} s, by:"
	for fd in /proc/[0-9]*/fd/*; do
		[[ $(readlink "$fd") == *uverbs*deleted* ]] || continue
		pid=${fd#/proc/}
		echo "#   $(tr '\0' ' ' <"/proc/${pid%%/*}/cmdline")"
	done
	check_eq deletion_ends_while_both_run "ended" "still waiting"
	# It ends once they do: end them, so that nothing hangs.
	kill "$held" "$server" 2>/dev/null
	wait "$deleting"
else
	wait "$deleting"
	echo "# the deletion took $((SECONDS - start)) s"
	check_eq deletion_ends_while_both_run "ended" "ended"
	check_eq server_runs_after_the_deletion 0 \
		"$(kill -0 "$server" 2>/dev/null; echo $?)"
fi

echo go >&3
wait "$held"
check_eq held_client_exits_0 0 $?
sed 's/^/    held client: /' "$tmp/held"
check_eq held_client_second_echo_byte_exact "second ok" \
	"$(grep -m1 '^second ' "$tmp/held")"
check_eq held_client_stays_on_rdma "conn rdma none" \
	"$(grep '^conn ' "$tmp/held" | tail -n 1)"

restore
"$ROCESHIM_RUN" "$PYTHON" "$peer" echo "$A" "$port" --bind "$B" --report \
	>"$tmp/after" 2>&1
sed 's/^/    after: /' "$tmp/after"
check_eq after_echo_byte_exact "echo ok" "$(grep -m1 '^echo ' "$tmp/after")"
check_eq after_client_on_rdma "conn rdma none" \
	"$(grep -m1 '^conn ' "$tmp/after")"
finish
