#!/bin/bash
# SPDX-License-Identifier: MIT
#
# roceshim-stat --check on each kind of host of the cluster:
#   host1 (rxe on the wire)             -> exit 0, its port and GID named
#   host3 (no RDMA device)              -> exit 1, no_device
#   host1 as nobody, RLIMIT_MEMLOCK 64K -> exit 1, memlock_limit
# and towards peers, from host1:
#   host2, a roceshim listener on PORT  -> exit 0, the connection on RDMA
#   host2, a listener without roceshim  -> exit 1, peer_rejected
#   host3, a listener (no RDMA there)   -> exit 1, timeout
#   host2 without a port                -> exit 0, the rdma_cm route
#   an address nobody answers on        -> exit 1, no RDMA route
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# run_check NAME [WRAPPER...] -- [PEER]: the check's output in $tmp/NAME,
# its exit status in $rc
run_check() {
	local name=$1
	shift
	local pre=()
	while [ "$1" != -- ]; do
		pre+=("$1")
		shift
	done
	shift
	"${pre[@]}" "$ROCESHIM_STAT" --check "$@" >"$tmp/$name" 2>&1
	rc=$?
	sed "s/^/$name: /" "$tmp/$name"
}
has() { grep -qF -- "$2" "$tmp/$1" && echo yes || echo no; }
# serve HOST PRELOAD(0/1) PORT: a one-connection server; its job in $job
serve() {
	local run=()
	[ "$2" = 1 ] && run=("$ROCESHIM_RUN")
	job=$(rsf-exec --bg "$1" "${run[@]}" "$PYTHON" "$peer" serve \
		"$(host_addr "$1")" --port "$3" \
		--count 1 --linger 0)
	wait_port "$1" "$3"
}

run_check host1 --
check_eq rdma_host_exits_0 0 "$rc"
check_eq rdma_host_port_active yes \
	"$(has host1 "port 1: ACTIVE, Ethernet (RoCE) on wire0")"
check_eq rdma_host_gid_found yes \
	"$(has host1 "$ROCESHIM_FABRIC_HOST1 (wire0): RoCEv2 GID rxe_wire")"
check_eq rdma_host_mtu_named yes "$(has host1 "active MTU 4096 (wire0 MTU")"
check_eq rdma_host_soft_roce_named yes "$(has host1 "Soft-RoCE (rxe)")"

run_check host3 rsf-exec host3 --
check_eq plain_host_exits_1 1 "$rc"
check_eq plain_host_no_device yes "$(has host3 "(no_device)")"

run_check memlock prlimit --memlock=65536:65536 \
	setpriv --reuid=65534 --regid=65534 --clear-groups --
check_eq low_memlock_exits_1 1 "$rc"
check_eq low_memlock_named yes "$(has memlock "RLIMIT_MEMLOCK 64 KiB")"
check_eq low_memlock_reason yes "$(has memlock "(memlock_limit)")"

serve host2 1 7201
run_check listener -- "$ROCESHIM_FABRIC_HOST2:7201"
rsf-exec --wait "$job" >/dev/null 2>&1
check_eq roceshim_listener_exits_0 0 "$rc"
check_eq roceshim_listener_on_rdma yes "$(has listener "went on RDMA")"

serve host2 0 7202
run_check plain -- "$ROCESHIM_FABRIC_HOST2:7202"
rsf-exec --wait "$job" >/dev/null 2>&1
check_eq plain_listener_exits_1 1 "$rc"
check_eq plain_listener_peer_rejected yes \
	"$(has plain "stays on TCP (peer_rejected)")"

serve host3 1 7203
run_check nordma -- "$ROCESHIM_FABRIC_HOST3:7203"
rsf-exec --wait "$job" >/dev/null 2>&1
check_eq no_rdma_peer_exits_1 1 "$rc"
check_eq no_rdma_peer_timeout yes "$(has nordma "stays on TCP (timeout)")"

run_check route -- "$ROCESHIM_FABRIC_HOST2"
check_eq route_only_exits_0 0 "$rc"
check_eq route_only_names_device yes \
	"$(has route "rdma_cm route to $ROCESHIM_FABRIC_HOST2: rxe_wire port 1")"

run_check nobody -- 10.100.0.99:7204
check_eq unanswered_address_exits_1 1 "$rc"
check_eq unanswered_address_no_route yes \
	"$(has nobody "rdma_cm finds no RDMA route to 10.100.0.99:7204")"
finish
