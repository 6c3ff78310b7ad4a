#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Hostile connect requests against a roceshim listener (default settings):
# every malformed one is refused and counted (malformed_input), the server
# survives, and a proper client is then served over RDMA as usual.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-cm-fuzz.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
COUNT=60

"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$ROCESHIM_FABRIC_ADDR_B" \
	--count 1 --linger 120 --until-echoed --report >"$tmp/srv" 2>&1 &
server=$!
port=$(peer_port "$tmp/srv")
"$top_builddir/tests/fabric/cm_fuzz" "$ROCESHIM_FABRIC_ADDR_B" "$port" \
	"$COUNT" || exit 1
malformed=$("$ROCESHIM_STAT" --json "$server" | "$PYTHON" -c \
	'import json, sys; print(json.load(sys.stdin)["global"]["malformed_input"])')
echo "server counted $malformed malformed requests"
if [ "$malformed" != "$COUNT" ]; then
	echo "FAIL: expected $COUNT"
	exit 1
fi
"$ROCESHIM_RUN" "$PYTHON" "$peer" echo "$ROCESHIM_FABRIC_ADDR_B" "$port" \
	--report --bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/cli" 2>&1
cat "$tmp/cli"
if grep -q '^echo ok' "$tmp/cli" && grep -q '^conn rdma none' "$tmp/cli"; then
	echo "PASS: the server survived and serves RDMA"
	exit 0
fi
echo "FAIL: the server did not serve a proper client over RDMA"
exit 1
