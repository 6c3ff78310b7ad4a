#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Connections across the wire, with default settings; each echoes 1 MB,
# checked byte for byte, and each end's stats row names its transport:
#   host1 -> host2, both under roceshim      -> rdma on both ends
#   host1 -> host2, server without roceshim   -> client: peer_rejected
#   host1 -> host3 (no RDMA device there)     -> client: timeout, then
#                                                negative_cache
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-echo.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# serve NAME HOST PRELOAD(0/1) PORT COUNT: a server on HOST, in the
# background; its job id in $job
serve() {
	local run=()
	[ "$3" = 1 ] && run=("$ROCESHIM_RUN")
	job=$(rsf-exec --bg "$2" "${run[@]}" "$PYTHON" "$peer" serve \
		"$(host_addr "$2")" --port "$4" --count "$5" --report \
		--linger 120 --until-echoed)
}
# client NAME ADDR PORT [REPEAT]
client() {
	"$ROCESHIM_RUN" "$PYTHON" "$peer" echo "$2" "$3" --bytes 1000000 \
		--report --repeat "${4:-1}" >"$tmp/$1.cli" 2>&1
}
conns() { awk '/^conn / {print $2, $3}' "$1" | sort -u | tr '\n' ' ' |
	sed 's/ $//'; }
echo_of() { awk '/^echo / {print $2}' "$1" | sort -u | tr '\n' ' ' |
	sed 's/ $//'; }

serve rdma host2 1 7001 1
wait_port host2 7001
client rdma "$ROCESHIM_FABRIC_HOST2" 7001
rsf-exec --wait "$job" >"$tmp/rdma.srv" 2>&1
check_eq host2_rdma_echo ok "$(echo_of "$tmp/rdma.cli")"
check_eq host2_rdma_client_transport "rdma none" "$(conns "$tmp/rdma.cli")"
check_eq host2_rdma_server_transport "rdma none" "$(conns "$tmp/rdma.srv")"

serve plain host2 0 7002 1
wait_port host2 7002
client plain "$ROCESHIM_FABRIC_HOST2" 7002
rsf-exec --wait "$job" >"$tmp/plain.srv" 2>&1
check_eq plain_server_echo ok "$(echo_of "$tmp/plain.cli")"
check_eq plain_server_client_reason "tcp peer_rejected" \
	"$(conns "$tmp/plain.cli")"

serve nordma host3 1 7003 2
wait_port host3 7003
client nordma "$ROCESHIM_FABRIC_HOST3" 7003 2
rsf-exec --wait "$job" >"$tmp/nordma.srv" 2>&1
check_eq no_rdma_host_echo ok "$(echo_of "$tmp/nordma.cli")"
check_eq no_rdma_host_client_reasons "tcp negative_cache tcp timeout" \
	"$(conns "$tmp/nordma.cli")"
check_eq no_rdma_host_server_reason "tcp no_device" \
	"$(conns "$tmp/nordma.srv")"
finish
