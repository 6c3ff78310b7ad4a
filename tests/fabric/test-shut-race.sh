#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A client's shutdown(SHUT_WR) racing the server's move of the connection
# to TCP (a forked child's first recv(), tests/fabric/shut_race.py), at
# 32 delays of the server's fork after accept(): every child must see the
# client's EOF after its bytes, so that every round reads its echo, then
# EOF, as over TCP.  A FIN lost to the race left the child and the client
# waiting for each other.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/shut_race.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-shut-race.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; pkill -f "shut_race.py server" 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
rounds=${ROCESHIM_SHUT_RACE_ROUNDS:-96}

"$ROCESHIM_RUN" "$PYTHON" "$script" server "$ROCESHIM_FABRIC_ADDR_B" \
	>"$tmp/server" 2>&1 &
port=$(peer_port "$tmp/server")
timeout 600 "$ROCESHIM_RUN" "$PYTHON" "$script" client \
	"$ROCESHIM_FABRIC_ADDR_B" "$port" --bind "$ROCESHIM_FABRIC_ADDR_A" \
	--rounds "$rounds" >"$tmp/client" 2>&1
echo "rc $?" >>"$tmp/client"
grep -v '^round .*: 200000 bytes back, same, eof$' "$tmp/client" |
	grep -v '^conn tcp none moved:peer$' | sed 's/^/    /'

check_eq client_completes "rc 0" "$(grep '^rc ' "$tmp/client")"
check_eq every_round_reads_its_echo_then_eof "$rounds" \
	"$(grep -c '^round .*: 200000 bytes back, same, eof$' "$tmp/client")"
check_eq every_connection_upgraded_then_moved_by_the_server "$rounds" \
	"$(grep -c '^conn tcp none moved:peer$' "$tmp/client")"
finish
