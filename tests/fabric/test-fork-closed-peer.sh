#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A forking server whose client closed before the server accepted
# (tests/fabric/fork_closed_peer.py, CPython's test_socketserver shape),
# default settings, with the client in the server's process or in one
# that exits after its close.  The connection is on RDMA when the server
# forks:
#   - a client that wrote nothing: the handler the server forks reads
#     EOF, and its shutdown() and close() succeed at once, as over TCP
#     (no move is needed: the handler goes on over the kernel socket);
#   - a client that wrote a request: the handler reads it whole, then EOF.
#     The closed client kept its end until the server took its bytes, so
#     it could send them again over TCP in the move.
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
check_eq every_handler_of_an_empty_stream_reads_eof $((2 * rounds)) \
	"$(grep -c '^round [0-9]* size 0 client [a-z]* ok ms ' "$tmp/out")"
check_eq every_request_read_whole $((2 * rounds)) \
	"$(grep -c '^round [0-9]* size 65536 client [a-z]* ok ms ' "$tmp/out")"
# Over TCP a round takes a fork and an exit; a handler that waited for a
# move the closed peer cannot answer took minutes.
check_eq every_handler_done_within_5_s $((4 * rounds)) \
	"$(awk '$8 == "ms" && $9 < 5000 {n++} END {print n + 0}' "$tmp/out")"
check_eq every_exiting_client_exits_cleanly $((2 * rounds)) \
	"$(grep -c ' client exits .* exit 0$' "$tmp/out")"
check_eq connections_on_rdma_before_the_fork $((4 * rounds)) \
	"$(grep -c ' conn rdma none exit [-0-9]*$' "$tmp/out")"
finish
