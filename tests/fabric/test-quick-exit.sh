#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A process that ends with _exit() or _Exit(), from its code or from a
# signal handler in the middle of a send (tests/fabric/quick_exit.c):
# kernel TCP (ROCESHIM_RDMA=0) is the specification.  The peer reads
# every byte, then EOF; or, with bytes left unread, ECONNRESET; and a
# handler's _exit() ends the process at once.  The same with RDMA on
# (default settings), every client's connection on RDMA.  Before, no
# exit handler ran, the last writes died with the process, and the peer
# read ECONNRESET where TCP gives EOF.  A parent that _exit()s once it
# has forked, as a daemon starts, leaves its connection to the child.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_builddir/tests/fabric/quick_exit"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-quick-exit.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

pair_check_both "$prog"
# The server's ends: one per client, 14 clients.
on_rdma=$(connections_on_rdma "$tmp/rdma.json")
check_eq server_ends_on_rdma 14 "${on_rdma:-0}"
finish
