#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The peer's kernel FIN overtakes its last RDMA writes.  Once the
# connection is up, netem holds every packet that leaves vethB (the
# client's RoCE traffic; kernel TCP between the two local addresses takes
# lo) for 300 ms, longer than a close waits for its writes (200 ms) and
# shorter than rxe's retry budget.  The client then sends 100 kB and
# closes: the server's kernel socket has the FIN before the RDMA data.
# The reader must still get every byte and then EOF, not a reset.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-late-fin.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; tc qdisc del dev vethB root 2>/dev/null;
	rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
bytes=100000

"$ROCESHIM_RUN" "$PYTHON" "$peer" drain "$ROCESHIM_FABRIC_ADDR_A" \
	>"$tmp/drain" 2>&1 &
drainer=$!
port=$(peer_port "$tmp/drain")
"$ROCESHIM_RUN" "$PYTHON" "$peer" send "$ROCESHIM_FABRIC_ADDR_A" "$port" \
	--bind "$ROCESHIM_FABRIC_ADDR_B" --bytes "$bytes" --pause 2 \
	>"$tmp/send" 2>&1 &
wait_for "$tmp/send" '^connected' || { cat "$tmp/send"; exit 1; }
delay_vethb 300ms
for _ in $(seq 150); do
	kill -0 "$drainer" 2>/dev/null || break
	sleep 0.1
done
wait
cat "$tmp/send" "$tmp/drain"
check_eq reader_gets_every_byte_then_eof \
	"ended EOF after $((bytes + 1)) bytes" \
	"$(grep -m1 '^ended ' "$tmp/drain")"
finish
