#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A client that exits, execs with the socket closed on exec, or closes the
# socket and exits, right after the server moved the connection to TCP, while the bytes that moved
# with it are still in the client's staging ring (tests/fabric/
# backlog_exit.py): the server reads every byte, then EOF, as over TCP,
# where the kernel keeps what a process wrote after it has gone.  The
# server reads nothing for 3 s, longer than a close lingers (2 s), and
# less than the move's timeout, after which a peer that takes none of the
# backlog gets a reset.  The rings are 1 MiB so that the whole payload
# crosses before the move.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/backlog_exit.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-backlog-exit.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; pkill -f "backlog_exit.py server" 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
export ROCESHIM_RING_KB=1024 ROCESHIM_RING_START_KB=1024

"$ROCESHIM_RUN" "$PYTHON" "$script" server "$ROCESHIM_FABRIC_ADDR_B" \
	>"$tmp/server" 2>&1 &
port=$(peer_port "$tmp/server")
n=0
for how in exit exec close; do
	timeout 60 "$ROCESHIM_RUN" "$PYTHON" "$script" client \
		"$ROCESHIM_FABRIC_ADDR_B" "$port" "$how" \
		--bind "$ROCESHIM_FABRIC_ADDR_A" >"$tmp/client.$how" 2>&1
	echo "rc $?" >>"$tmp/client.$how"
	sed "s/^/    $how: /" "$tmp/client.$how"
	# The server's child reports 3 s after its first byte.
	n=$((n + 1))
	for _ in $(seq 200); do
		[ "$(grep -c '^got ' "$tmp/server")" -ge "$n" ] && break
		sleep 0.1
	done
done
sed 's/^/    server: /' "$tmp/server"

check_eq client_exit_completes "rc 0" "$(grep '^rc ' "$tmp/client.exit")"
check_eq client_exec_completes "rc 0" "$(grep '^rc ' "$tmp/client.exec")"
check_eq client_close_completes "rc 0" "$(grep '^rc ' "$tmp/client.close")"
check_eq server_reads_all_then_eof_after_exit "got 600000 same" \
	"$(grep '^got ' "$tmp/server" | sed -n 1p)"
check_eq server_reads_all_then_eof_after_exec "got 600000 same" \
	"$(grep '^got ' "$tmp/server" | sed -n 2p)"
check_eq server_reads_all_then_eof_after_close_and_exit "got 600000 same" \
	"$(grep '^got ' "$tmp/server" | sed -n 3p)"
finish
