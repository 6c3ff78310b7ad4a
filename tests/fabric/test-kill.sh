#!/bin/bash
# SPDX-License-Identifier: MIT
#
# kill -9 of one end in the middle of an RDMA transfer: the other end's
# reads end with EOF or ECONNRESET (never a hang, never silence) within a
# bounded time.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-kill.XXXXXX") || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
LIMIT=15

"$ROCESHIM_RUN" "$PYTHON" "$peer" drain "$ROCESHIM_FABRIC_ADDR_B" \
	>"$tmp/drain" 2>&1 &
drainer=$!
port=$(peer_port "$tmp/drain")
"$ROCESHIM_RUN" "$PYTHON" "$peer" stream "$ROCESHIM_FABRIC_ADDR_B" \
	"$port" >"$tmp/stream" 2>&1 &
streamer=$!
wait_for "$tmp/stream" streaming 300 ||
	{ echo "FAIL: stream did not start"; exit 1; }
# Connected: a second of bytes, so that the kill comes mid-transfer.
sleep 1
kill -9 "$streamer"
killed=$SECONDS
for _ in $(seq $((LIMIT * 10))); do
	kill -0 "$drainer" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$drainer" 2>/dev/null; then
	echo "FAIL: the reader still hangs ${LIMIT} s after kill -9 of the writer"
	exit 1
fi
cat "$tmp/drain"
if grep -qE '^ended (EOF|ECONNRESET) after [1-9]' "$tmp/drain"; then
	echo "PASS: reader saw the end $((SECONDS - killed)) s after kill -9"
	exit 0
fi
echo "FAIL: the reader did not end with EOF or ECONNRESET"
exit 1
