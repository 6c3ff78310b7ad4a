#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A registered fd closed while a dup keeps its connection open, its number
# then taken by another connection registered in the same epoll set
# (tests/fabric/epoll_reuse.py): as over kernel TCP, which keys its entries
# by file and fd, the first connection's bytes still wake the set, on RDMA
# and after its move to TCP.  The plain run is the specification.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_srcdir/tests/fabric/epoll_reuse.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-epoll-reuse.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

line() { awk '$1 == "reuse" {print $1, $2, $3, $4, $5, $6}' "$tmp/$1"; }
ends() { awk '$1 == "reuse" {print $7}' "$tmp/$1"; }

serve_and_connect "$prog" plain env
serve_and_connect "$prog" rdma "$ROCESHIM_RUN"
check_eq plain_reused_number_first_connection_wakes_the_set \
	"reuse True 5 100 5 50" "$(line plain)"
check_eq reused_number_same_as_kernel_tcp "$(line plain)" "$(line rdma)"
check_eq reused_number_first_moved_second_on_rdma "rdma,tcp" "$(ends rdma)"
finish
