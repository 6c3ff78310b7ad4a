#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A socket in an epoll set before its connect() (Netty and nginx's
# upstream connections register first; Boost.Asio registers at open and
# may connect synchronously): its connection goes on over RDMA, blocking
# or not, and the registration reports the peer's bytes when they come.
# Against a server without roceshim it stays on TCP, and the
# registration reports them as well.  A registration with EPOLLEXCLUSIVE
# made while a non-blocking connect goes on is refused and taken as the
# kernel does it.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_srcdir/tests/fabric/epoll_early.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-epoll-early.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# run NAME [RUNNER]: the server under RUNNER (nothing: plain)
run() {
	local name=$1 port
	shift
	"$@" "$PYTHON" "$prog" serve "$ROCESHIM_FABRIC_ADDR_B" \
		>"$tmp/$name.srv" 2>&1 &
	port=$(peer_port "$tmp/$name.srv")
	"$ROCESHIM_RUN" "$PYTHON" "$prog" connect "$ROCESHIM_FABRIC_ADDR_B" \
		"$port" "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/$name" 2>&1
	sed "s/^/    $name: /" "$tmp/$name"
}
row() { awk -v k="$2" '$1 == k {$1 = ""; print substr($0, 2)}' "$tmp/$1"; }

run rdma "$ROCESHIM_RUN"
check_eq rdma_blocking_connect_reports_the_data "ok hello rdma none" \
	"$(row rdma blocking)"
check_eq rdma_nonblocking_connect_reports_the_data "ok hello rdma none" \
	"$(row rdma nonblocking)"
check_eq rdma_exclusive_during_connect_as_the_kernel \
	"ok hello EINVAL,EINVAL rdma none" "$(row rdma exclusive)"

run plain env
check_eq tcp_blocking_connect_reports_the_data "ok hello tcp" \
	"$(row plain blocking | cut -d' ' -f1-3)"
check_eq tcp_nonblocking_connect_reports_the_data "ok hello tcp" \
	"$(row plain nonblocking | cut -d' ' -f1-3)"
check_eq tcp_exclusive_during_connect_as_the_kernel \
	"ok hello EINVAL,EINVAL tcp" "$(row plain exclusive | cut -d' ' -f1-4)"
finish
