#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kill -9 of the reader while the writer is inside one large blocking
# send (a zero-copy send, ROCESHIM_ZEROCOPY_KB).  The send must fail the
# way TCP's does (EPIPE or ECONNRESET) within a bounded time, never hang:
# - stalled: the reader never reads, so the send waits for credit;
# - in_flight: the reader drains, but netem holds the writer's RoCE
#   packets (vethB) for 300 ms, so the send is waiting for the
#   completions of writes that the dead reader will never acknowledge.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-kill-reader.XXXXXX") || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; tc qdisc del dev vethB root 2>/dev/null;
	rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
LIMIT=15

# kill_reader NAME READER_ARGS...: a 64 MiB send to a reader started with
# tests/fabric/peer.py READER_ARGS; kill -9 of the reader mid-send.
kill_reader() {
	local name=$1 reader writer port killed
	shift
	"$ROCESHIM_RUN" "$PYTHON" "$peer" "$@" >"$tmp/$name.reader" 2>&1 &
	reader=$!
	port=$(peer_port "$tmp/$name.reader")
	ROCESHIM_LOG_LEVEL=debug ROCESHIM_LOG_FILE="$tmp/$name.log" \
		"$ROCESHIM_RUN" "$PYTHON" "$peer" send \
		"$ROCESHIM_FABRIC_ADDR_A" "$port" \
		--bind "$ROCESHIM_FABRIC_ADDR_B" --bytes $((64 << 20)) \
		>"$tmp/$name.send" 2>&1 &
	writer=$!
	check "${name}_send_is_zero_copy" \
		wait_for "$tmp/$name.log" 'zero-copy send of'
	sleep 1
	kill -9 "$reader"
	wait "$reader" 2>/dev/null
	killed=$SECONDS
	for _ in $(seq $((LIMIT * 10))); do
		kill -0 "$writer" 2>/dev/null || break
		sleep 0.1
	done
	check "${name}_send_ends" bash -c "! kill -0 $writer 2>/dev/null"
	kill -9 "$writer" 2>/dev/null
	wait "$writer" 2>/dev/null
	sed 's/^/    /' "$tmp/$name.send"
	echo "# $name: the send ended $((SECONDS - killed)) s after kill -9"
	check "${name}_writer_was_on_rdma" \
		grep -q 'connect to .* on rdma' "$tmp/$name.log"
	check "${name}_send_fails_like_tcp" \
		grep -qE '(BrokenPipe|ConnectionReset)Error' "$tmp/$name.send"
}

kill_reader stalled late "$ROCESHIM_FABRIC_ADDR_A" --delay 60
delay_vethb 300ms
kill_reader in_flight drain "$ROCESHIM_FABRIC_ADDR_A"
finish
