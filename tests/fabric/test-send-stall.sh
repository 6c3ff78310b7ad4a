#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A send of 300 KiB, more than an RDMA ring holds at the most, to a peer
# that reads nothing yet (tests/fabric/send_stall.py), default settings.
# Kernel TCP's send buffer takes it, and so does roceshim's send queue:
# the call returns, and the connection stays on RDMA:
#   - one thread sends, then reads the other end: blocking, with a
#     timeout (CPython then waits for POLLOUT between its sends), and
#     non-blocking, polling for POLLOUT only once a send says EAGAIN;
#   - the non-blocking one with 1.2 MiB on a connection that has carried
#     2.4 MiB: TCP's buffer has grown with the window, and so has the
#     queue (grown);
#   - two processes both send first, then read;
#   - a reader stopped (SIGSTOP) for 3 s;
#   - a reader that reads 32 KiB every 100 ms.
# A send of 1.8 MiB, more than the queue takes, to a reader that reads
# 256 KiB every 50 ms waits for credit without spinning (big-send).
# A sender that closes and lives on while its peer reads nothing for 3 s
# (closed), or reads slowly for longer than the close's 2 s linger
# (closed-slow-reader): the bytes wait on RDMA, and every one arrives,
# then EOF.  One whose peer reads nothing for 13 s (closed-stalled), or
# one that exits without a close, closes and exits at once, or ends in
# _exit(), with a close() first or without, before the peer reads: the
# bytes move with the connection to TCP, and every one still arrives.
# One that closes and ends in _exit() while its peer is stopped, so that
# the move cannot finish: the peer reads every byte that arrived, then
# ECONNRESET, never a short stream and EOF (stopped-quick-exit; over
# kernel TCP it would read them all).
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/send_stall.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-send-stall.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

cases="one-thread timeout nonblocking grown both-send stopped slow-reader
	big-send closed closed-stalled closed-slow-reader exited close-exit
	quick-exit close-quick-exit stopped-quick-exit"
for case in $cases; do
	# The debug log of the case that counts its lingers, not the others'.
	log=
	[ "$case" = closed-slow-reader ] &&
		log="ROCESHIM_LOG_LEVEL=debug ROCESHIM_LOG_FILE=$tmp/$case.%p.log"
	env $log timeout 120 "$ROCESHIM_RUN" "$PYTHON" "$script" \
		"$ROCESHIM_FABRIC_ADDR_B" --bind "$ROCESHIM_FABRIC_ADDR_A" \
		--size $((300 << 10)) "$case" >>"$tmp/out" 2>&1 ||
		echo "$case rc $?" >>"$tmp/out"
done
sed 's/^/    /' "$tmp/out"
field() { awk -v c="$1" -v f="$2" '$1 == c {print $f}' "$tmp/out"; }
for case in $cases; do
	[ "$case" = stopped-quick-exit ] && continue
	check_eq "${case}_send_returns_and_every_byte_arrives" ok \
		"$(field "$case" 2)"
done
check_eq stopped_quick_exit_resets_never_ends_short reset \
	"$(field stopped-quick-exit 2)"
for case in one-thread timeout nonblocking grown slow-reader big-send; do
	check_eq "${case}_stays_on_rdma" "rdma none | rdma none" \
		"$(awk -v c="$case" '$1 == c {print $6, $7, $8, $9, $10}' \
			"$tmp/out")"
done
for case in both-send stopped closed closed-slow-reader; do
	check_eq "${case}_stays_on_rdma" "rdma none" \
		"$(awk -v c="$case" '$1 == c {print $6, $7}' "$tmp/out")"
done
lingered=$(cat "$tmp"/closed-slow-reader.*.log | grep -c 'it lingers on')
echo "# closed-slow-reader: the linger started again $lingered times" \
	"($(cat "$tmp"/closed-slow-reader.*.log | wc -l) log lines)"
check closed_slow_reader_lingers_while_the_peer_reads [ "$lingered" -ge 1 ]
check_eq one_thread_done_within_5_s 1 \
	"$(awk '$1 == "one-thread" && $4 < 5000 {n++} END {print n + 0}' \
		"$tmp/out")"
for case in closed-stalled exited close-exit quick-exit close-quick-exit; do
	check_eq "${case}_sender_bytes_moved_to_tcp" "tcp none moved:peer" \
		"$(awk -v c="$case" '$1 == c {print $6, $7, $8}' "$tmp/out")"
done
finish
