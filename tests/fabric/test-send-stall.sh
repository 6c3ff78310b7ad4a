#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A blocking send of 1 MiB, four times what an RDMA ring holds at the
# most, to a peer that reads nothing yet (tests/fabric/send_stall.py),
# default settings.  Kernel TCP's buffers take it; roceshim moves such a
# connection to TCP once the send has waited a second with the peer
# reading nothing (send_stall), and the call returns:
#   - one thread sends, then reads the other end;
#   - two processes both send first, then read;
#   - a reader stopped (SIGSTOP) for 3 s while the sender waits: the move
#     waits for it, as a TCP sender would, and no byte is lost.
# A reader that reads 32 KiB every 100 ms, and so returns credit every
# second, keeps the connection on RDMA.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/send_stall.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-send-stall.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

for case in one-thread both-send stopped slow-reader; do
	timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$script" \
		"$ROCESHIM_FABRIC_ADDR_B" --bind "$ROCESHIM_FABRIC_ADDR_A" \
		"$case" >>"$tmp/out" 2>&1 || echo "$case rc $?" >>"$tmp/out"
done
sed 's/^/    /' "$tmp/out"
field() { awk -v c="$1" -v f="$2" '$1 == c {print $f}' "$tmp/out"; }
for case in one-thread both-send stopped; do
	check_eq "${case}_send_returns_and_every_byte_arrives" ok \
		"$(field "$case" 2)"
done
for case in one-thread stopped; do
	check_eq "${case}_sender_moved_for_the_stall" \
		"tcp none moved:send_stall" \
		"$(awk -v c="$case" '$1 == c {print $6, $7, $8}' "$tmp/out")"
done
# Whichever end's stall came first moved both.
check_eq both_send_moved_for_a_stall 1 \
	"$(grep -cE '^both-send .* rows tcp none moved:(send_stall|peer) ' \
		"$tmp/out")"
check_eq one_thread_done_within_10_s 1 \
	"$(awk '$1 == "one-thread" && $4 < 10000 {n++} END {print n + 0}' \
		"$tmp/out")"
check_eq slow_reader_reads_every_byte ok "$(field slow-reader 2)"
check_eq slow_reader_stays_on_rdma "rdma none | rdma none" \
	"$(awk '$1 == "slow-reader" {print $6, $7, $8, $9, $10}' "$tmp/out")"
finish
