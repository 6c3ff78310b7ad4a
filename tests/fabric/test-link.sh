#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A client bound to the address of rxe0's port (vethA) reaches a server on
# rxe1's (vethB) over the link between them: the connection is on RDMA and
# vethA carries the bytes.  Neighbours are flushed first, so the RDMA CM has
# to resolve the peer's MAC address during the handshake.
#
# IPv4 only: in this one-namespace fabric nothing crosses the link on IPv6
# with rdma_cm (rping -I fd99::1 -a fd99::2 gets no reply either, even with
# permanent neighbour entries).
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-link.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

bytes=1000000

# echo_over_link NAME SERVER_ADDR CLIENT_ADDR
echo_over_link() {
	local port tx_before tx_after
	"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$2" \
		--linger 120 --until-echoed >"$tmp/$1.srv" 2>&1 &
	port=$(peer_port "$tmp/$1.srv")
	ip neigh flush dev vethA
	ip neigh flush dev vethB
	tx_before=$(cat /sys/class/net/vethA/statistics/tx_bytes)
	"$ROCESHIM_RUN" "$PYTHON" "$peer" echo "$2" "$port" --bind "$3" \
		--bytes "$bytes" --report >"$tmp/$1.cli" 2>&1
	tx_after=$(cat /sys/class/net/vethA/statistics/tx_bytes)
	sed 's/^/    /' "$tmp/$1.cli"
	echo "    vethA tx +$((tx_after - tx_before)) B"
	check_eq "${1}_conn_on_rdma" "conn rdma none" \
		"$(grep -m1 '^conn ' "$tmp/$1.cli")"
	check_eq "${1}_echo_intact" "echo ok" "$(grep -m1 '^echo ' "$tmp/$1.cli")"
	check "${1}_bytes_cross_vetha" \
		test $((tx_after - tx_before)) -ge "$bytes"
}

echo_over_link ipv4 "$ROCESHIM_FABRIC_ADDR_B" "$ROCESHIM_FABRIC_ADDR_A"
finish
