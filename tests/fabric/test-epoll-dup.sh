#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A socket and a dup() of it in one epoll set, as kernel TCP allows (its
# entries are keyed by file and fd): the dup's registration succeeds, both
# report the bytes, and the connection moves to TCP first (downgrade
# epoll_dup), since its eventfds are in the set already.  A dup in another
# set leaves it on RDMA.  The plain run is the specification.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_srcdir/tests/fabric/epoll_dup.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-epoll-dup.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# line NAME CASE: the case's line without its row
line() { awk -v k="$2" '$1 == k {print $1, $2, $3, $4}' "$tmp/$1"; }
row() { awk -v k="$2" '$1 == k {print $5}' "$tmp/$1"; }

serve_and_connect "$prog" plain env
serve_and_connect "$prog" rdma "$ROCESHIM_RUN"
check_eq plain_dup_in_one_set_registers_and_reports \
	"same ok dup:1,orig:1 True" "$(line plain same)"
check_eq dup_in_one_set_same_as_kernel_tcp "$(line plain same)" \
	"$(line rdma same)"
check_eq dup_in_another_set_same_as_kernel_tcp "$(line plain other)" \
	"$(line rdma other)"
check_eq dup_in_one_set_moves_the_connection_to_tcp "tcp/none/moved:epoll_dup" \
	"$(row rdma same)"
check_eq dup_in_another_set_stays_on_rdma "rdma/none" "$(row rdma other)"
finish
