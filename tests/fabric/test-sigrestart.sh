#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Blocking recv() and send() interrupted by a signal handler
# (tests/fabric/restart_check.c): with SA_RESTART the kernel restarts
# them, without it, or with a socket timeout set, they fail with EINTR
# (signal(7)); a blocking connect under a fast timer connects, restarted
# or (without SA_RESTART) after EINTR in the background, and so does one
# interrupted in the kernel's connect, past its handshake (its SYN
# dropped by a full accept queue); a read, a write or a connect() again
# while that connect goes on ends at the socket's timeout, or at a signal
# once a timeout is set, SA_RESTART or not; a recv() that succeeds
# leaves errno as it found it, even when a signal handler in the middle
# sends on another upgraded connection; an upgraded
# connection never has one end on RDMA and the other on TCP.  Kernel
# TCP (ROCESHIM_RDMA=0) is the specification: every behaviour the same
# with RDMA on (default settings), and the connections on RDMA.  Before,
# roceshim's own wait (poll(), which the kernel never restarts) made
# every such call fail with EINTR, and a connect's handshake give up for
# TCP.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_builddir/tests/fabric/restart_check"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-sigrestart.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

pair_check_both "$prog"
on_rdma=$(connections_on_rdma "$tmp/rdma.json")
# 21 connections, 2 ends each, on RDMA; but the one under the fast timer
# goes on over TCP if the signal came in its handshake (it may come in
# the kernel's connect, past it).
expected=42
grep -q '^note connect interrupted: yes' "$tmp/rdma" &&
	[ "${on_rdma:-0}" != 42 ] && expected=40
check_eq connections_on_rdma "$expected" "${on_rdma:-0}"
finish
