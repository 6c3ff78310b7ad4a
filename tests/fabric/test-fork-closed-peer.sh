#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A forking server whose client closed before the server accepted
# (tests/fabric/fork_closed_peer.py, CPython's test_socketserver shape),
# default settings.  The connection is on RDMA when the server forks, and
# the peer that closed cannot take part in a move:
#   - a client that wrote nothing: the handler the server forks reads
#     EOF, and its shutdown() and close() succeed at once, as over TCP
#     (none is needed: the handler goes on over the kernel socket);
#   - a client that wrote a request: the handler reads it whole, or (a
#     known limit: only the server's ring holds it) gets a reset; never
#     other bytes, never a wait.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/fork_closed_peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-fork-closed-peer.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
rounds=3

timeout 600 "$ROCESHIM_RUN" "$PYTHON" "$script" "$ROCESHIM_FABRIC_ADDR_B" \
	--bind "$ROCESHIM_FABRIC_ADDR_A" --rounds $rounds \
	--result "$tmp/result" >"$tmp/out" 2>&1
echo "rc $?" >>"$tmp/out"
sed 's/^/    /' "$tmp/out"
check_eq every_handler_of_an_empty_stream_reads_eof $rounds \
	"$(grep -c '^round [0-9]* size 0 ok ms ' "$tmp/out")"
check_eq every_request_read_whole_or_reset $rounds \
	"$(grep -cE '^round [0-9]* size 65536 (ok|error:Connection_reset_by_peer) ms ' "$tmp/out")"
# Over TCP a round takes a fork and an exit; a handler that waited for a
# move the closed peer cannot answer took minutes.
check_eq every_handler_done_within_5_s $((2 * rounds)) \
	"$(awk '$6 == "ms" && $7 < 5000 {n++} END {print n + 0}' "$tmp/out")"
check_eq connections_on_rdma_before_the_fork $((2 * rounds)) \
	"$(grep -c ' conn rdma none$' "$tmp/out")"
finish
