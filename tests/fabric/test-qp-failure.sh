#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The queue pair fails in the middle of a transfer both ways while the TCP
# connection beside it still flows: the connection moves to TCP and goes
# on, byte for byte (default settings).  No other RDMA transport does this:
# rsocket, libvma and SMC-R reset.  Two ways to break it:
#   - RoCE's packets (UDP 4791) leaving vethB are dropped: the queue pair
#     exhausts its retries (kernel TCP between the two local addresses
#     goes through lo and is not touched);
#   - the server's RDMA device, rxe1, is deleted (the CM's device removal),
#     then added again for the tests after this one.
# Either way the client must end on its own, moved to TCP.
# The client echoes 40 MB through the server; the fault comes once the
# bytes flow.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-qp-failure.XXXXXX") || exit 1
restore() {
	tc qdisc del dev vethB root 2>/dev/null
	rdma link show | grep -q "^link rxe1/" ||
		rdma link add rxe1 type rxe netdev vethB
}
trap 'kill $(jobs -p) 2>/dev/null; restore; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

drop_roce() {
	modprobe -q sch_prio cls_u32 act_gact 2>/dev/null
	tc qdisc add dev vethB root handle 1: prio &&
		tc filter add dev vethB parent 1: protocol ip u32 \
			match ip protocol 17 0xff match ip dport 4791 0xffff \
			action drop
}
# The deletion waits until every process that opened rxe1 has closed it,
# the server among them (README, "Known limits"): in the background, and
# over once the server is killed below.
delete_rxe1() {
	rdma link delete rxe1 &
}

# broken NAME FAULT: an echo through a connection broken by FAULT.
broken() {
	local name=$1 fault=$2 port
	"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$ROCESHIM_FABRIC_ADDR_B" \
		--report --linger 300 >"$tmp/$name.srv" 2>&1 &
	port=$(peer_port "$tmp/$name.srv")
	timeout 300 "$ROCESHIM_RUN" "$PYTHON" "$peer" echo \
		"$ROCESHIM_FABRIC_ADDR_B" "$port" --bind "$ROCESHIM_FABRIC_ADDR_A" \
		--bytes 40000000 --report --report-after --announce \
		>"$tmp/$name.cli" 2>&1 &
	if ! wait_for "$tmp/$name.cli" '^started' 600; then
		echo "FAIL: $name: the transfer did not start"
		cat "$tmp/$name.cli"
		exit 1
	fi
	sleep 0.3
	"$fault" || {
		echo "SKIP: cannot break the path here ($fault)"
		exit 77
	}
	local t0=$SECONDS rc
	wait %2
	rc=$?
	echo "# $name: the client ended $((SECONDS - t0)) s after the fault"
	check_eq "${name}_client_exits_0" 0 "$rc"
	sed "s/^/    $name client: /" "$tmp/$name.cli"
	sed "s/^/    $name server: /" "$tmp/$name.srv"
	check_eq "${name}_starts_on_rdma" "conn rdma none" \
		"$(grep -m1 '^conn ' "$tmp/$name.cli")"
	check_eq "${name}_echo_byte_exact" "echo ok" \
		"$(grep -m1 '^echo ' "$tmp/$name.cli")"
	check "${name}_client_moved_to_tcp" \
		grep -qE '^conn tcp none moved:(qp_error|device|peer)$' \
		"$tmp/$name.cli"
	kill %1 2>/dev/null
	wait 2>/dev/null
	restore
}

broken dropped drop_roce
broken device delete_rxe1
finish
