#!/bin/bash
# SPDX-License-Identifier: MIT
#
# fork with an upgraded connection open (ROCESHIM_RDMA=1): in the child,
# the inherited connection fails as a reset one does (select: ready both
# ways at once, write EPIPE, read ECONNRESET) and a new connection works; in the parent, the inherited one
# keeps echoing byte for byte on RDMA before and after the child.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-fork.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
export ROCESHIM_RDMA=1
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$ROCESHIM_FABRIC_ADDR_B" --count 2 \
	>"$tmp/srv" 2>&1 &
port=$(peer_port "$tmp/srv")
"$ROCESHIM_RUN" "$PYTHON" "$peer" fork "$ROCESHIM_FABRIC_ADDR_B" "$port" \
	--bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/cli" 2>&1
rc=$?
sed 's/^/    /' "$tmp/cli"

field() { awk -v k="$1" '$1 == k {print $2}' "$tmp/cli" | head -n 1; }
check_eq client_exit 0 "$rc"
check_eq parent_conn_on_rdma "conn rdma none" "$(grep -m1 '^conn ' "$tmp/cli")"
check_eq parent_echo_before_fork ok "$(field parent_before)"
check_eq child_select_sees_inherited_ready r,w "$(field child_select)"
check_eq child_write_on_inherited EPIPE "$(field child_send)"
check_eq child_read_on_inherited ECONNRESET "$(field child_recv)"
check_eq child_new_connection_echo ok "$(field child_new)"
check_eq child_exit 0 "$(field child_exit)"
check_eq parent_echo_after_child ok "$(field parent_after)"
check_eq parent_conn_still_rdma "conn rdma none" \
	"$(grep '^conn ' "$tmp/cli" | tail -n 1)"
finish
