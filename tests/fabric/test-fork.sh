#!/bin/bash
# SPDX-License-Identifier: MIT
#
# fork() with an upgraded connection mid-transfer (default settings).  A
# child that uses the inherited connection gets every byte the parent had
# not read yet, and can send: the owner moves the connection to TCP for
# both of them, and the parent goes on over TCP, byte for byte.  A child
# that leaves it alone leaves it on RDMA in the parent.  Either way the
# child's own new connection works.
#
# A fork child of a process that has not used RDMA yet makes RDMA
# connections of its own: a child, a daemonised grandchild, and two Gloo
# ranks started with multiprocessing's fork.  A child of a process that
# has keeps its new connections on TCP.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-fork.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# run_fork NAME [--child-uses]: the client's transcript in $tmp/NAME.
run_fork() {
	local name=$1 port
	shift
	"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$ROCESHIM_FABRIC_ADDR_B" \
		--count 2 --linger 120 --until-echoed >"$tmp/$name.srv" 2>&1 &
	port=$(peer_port "$tmp/$name.srv")
	"$ROCESHIM_RUN" "$PYTHON" "$peer" fork "$ROCESHIM_FABRIC_ADDR_B" \
		"$port" --bind "$ROCESHIM_FABRIC_ADDR_A" "$@" >"$tmp/$name" 2>&1
	echo "rc $?" >>"$tmp/$name"
	sed "s/^/    $name: /" "$tmp/$name"
}
field() { awk -v k="$2" '$1 == k {print $2}' "$tmp/$1" | head -n 1; }
first_conn() { grep -m1 '^conn ' "$tmp/$1"; }
last_conn() { grep '^conn ' "$tmp/$1" | tail -n 1; }

run_fork uses --child-uses
check_eq uses_client_exit 0 "$(field uses rc)"
check_eq uses_parent_conn_on_rdma "conn rdma none" "$(first_conn uses)"
check_eq uses_echo_before_fork ok "$(field uses parent_before)"
check_eq uses_child_reads_unread_echo ok "$(field uses child_inherited_rest)"
check_eq uses_child_echoes_on_inherited ok "$(field uses child_inherited)"
check_eq uses_child_new_connection ok "$(field uses child_new)"
check_eq uses_child_exit 0 "$(field uses child_exit)"
check_eq uses_parent_echo_after_child ok "$(field uses parent_after)"
check_eq uses_parent_conn_moved_by_fork "conn tcp none moved:fork" \
	"$(last_conn uses)"

run_fork ignores
check_eq ignores_client_exit 0 "$(field ignores rc)"
check_eq ignores_child_new_connection ok "$(field ignores child_new)"
check_eq ignores_child_exit 0 "$(field ignores child_exit)"
check_eq ignores_parent_reads_unread_echo ok "$(field ignores parent_rest)"
check_eq ignores_parent_echo_after_child ok "$(field ignores parent_after)"
check_eq ignores_parent_conn_still_rdma "conn rdma none" \
	"$(last_conn ignores)"

fresh=$tmp/fresh
"$ROCESHIM_RUN" "$PYTHON" "$top_srcdir/tests/fabric/fork_fresh.py" pairs \
	"$ROCESHIM_FABRIC_ADDR_A" "$ROCESHIM_FABRIC_ADDR_B" >"$fresh" 2>&1
sed 's/^/    fresh: /' "$fresh"
fresh_row() { awk -v k="$1" '$1 == k {$1 = ""; print substr($0, 2)}' "$fresh"; }
check_eq fresh_child_on_rdma "ok rdma none rdma none" "$(fresh_row child)"
check_eq fresh_daemonised_grandchild_on_rdma "ok rdma none rdma none" \
	"$(fresh_row grandchild)"
check_eq fresh_parent_after_child_on_rdma "ok rdma none rdma none" \
	"$(fresh_row parent)"
check_eq used_parent_child_on_tcp "ok tcp unsupported tcp unsupported" \
	"$(fresh_row used-parent-child)"

if "$PYTHON" -c 'import torch.distributed as d; assert d.is_available()' \
	2>/dev/null; then
	ifname=$(ip -o -4 addr show |
		awk -v a="$ROCESHIM_FABRIC_ADDR_B" 'index($4, a "/") == 1 {print $2}')
	GLOO_SOCKET_IFNAME=$ifname timeout 300 "$ROCESHIM_RUN" "$PYTHON" \
		"$top_srcdir/tests/fabric/fork_fresh.py" gloo \
		"$ROCESHIM_FABRIC_ADDR_B" >"$tmp/gloo" 2>&1
	grep -v '^[WI][0-9]' "$tmp/gloo" | sed 's/^/    gloo: /'
	for r in 0 1; do
		line=$(awk -v r=$r '$1 == "rank" && $2 == r' "$tmp/gloo")
		check_eq "gloo_fork_rank${r}_result" ok "$(echo "$line" | cut -d' ' -f3)"
		check_eq "gloo_fork_rank${r}_every_connection_on_rdma" yes \
			"$(echo "$line" | cut -d' ' -f4- | tr ',' '\n' |
				awk 'NF && $0 != "rdma none" {bad = 1}
				     NF {n++} END {print (n && !bad) ? "yes" : "no"}')"
	done
else
	echo "    gloo: skipped (torch.distributed is not importable)"
fi
finish
