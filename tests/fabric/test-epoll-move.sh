#!/bin/bash
# SPDX-License-Identifier: MIT
#
# An epoll registration keeps what kernel TCP gives it across its
# connection's move to TCP (tests/fabric/epoll_move.py): an EPOLLONESHOT
# one that fired stays disarmed until the program's MOD, and an
# EPOLLEXCLUSIVE one reports what comes after and refuses what the kernel
# refuses of it.  The plain run is the specification.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_srcdir/tests/fabric/epoll_move.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-epoll-move.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

saw() { awk -v k="$2" '$1 == k {print $1, $2}' "$tmp/$1"; }
row() { awk -v k="$2" '$1 == k {print $3}' "$tmp/$1"; }

serve_and_connect "$prog" plain env
serve_and_connect "$prog" rdma "$ROCESHIM_RUN"
check_eq plain_oneshot_stays_disarmed_until_mod "oneshot 1,none,1" \
	"$(saw plain oneshot)"
check_eq plain_exclusive_refuses_rdhup_and_mod \
	"exclusive EINVAL,1,EINVAL,1,EINVAL" "$(saw plain exclusive)"
check_eq oneshot_across_a_move_same_as_kernel_tcp "$(saw plain oneshot)" \
	"$(saw rdma oneshot)"
check_eq exclusive_across_a_move_same_as_kernel_tcp \
	"$(saw plain exclusive)" "$(saw rdma exclusive)"
check_eq oneshot_connection_moved "tcp/none/moved:sockopt" \
	"$(row rdma oneshot)"
check_eq exclusive_connection_moved "tcp/none/moved:sockopt" \
	"$(row rdma exclusive)"
finish
