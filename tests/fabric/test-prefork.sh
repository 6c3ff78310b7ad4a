#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A prefork server (default settings): the parent listens and its forked
# workers accept (tests/fabric/prefork.py; gunicorn, puma, php-fpm,
# apache's prefork).  The parent's CM listener takes each handshake, but
# the connection it set up on RDMA must move to TCP in the worker that
# accepts it.  Once a worker has claimed one, the parent refuses the
# handshakes on that port (reason prefork), and the client remembers the
# refusal (negative_cache): the later connections go straight to TCP
# instead of paying for a queue pair and a move each.  Every answer is
# exact.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
script="$top_srcdir/tests/fabric/prefork.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-prefork.XXXXXX") || exit 1
trap 'pkill -f "prefork.py server" 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
A=$ROCESHIM_FABRIC_ADDR_A
B=$ROCESHIM_FABRIC_ADDR_B
count=40

"$ROCESHIM_RUN" "$PYTHON" "$script" server "$B" >"$tmp/server" 2>&1 &
port=$(peer_port "$tmp/server")
client() { # OUT COUNT
	timeout 300 "$ROCESHIM_RUN" "$PYTHON" "$script" client "$B" "$port" \
		--bind "$A" --count "$2" >"$tmp/$1" 2>&1
}
rows() { # OUT ROW: how many connections of OUT have ROW
	grep -c "^conn $2\$" "$tmp/$1"
}

client many $count
sed 's/^/    /' "$tmp/many" | sort | uniq -c
check_eq every_answer_exact "exact $count" "$(grep '^exact' "$tmp/many")"
moved=$(rows many 'tcp none moved:peer')
check_eq at_most_2_connections_set_up_on_rdma_and_moved yes \
	"$([ "$moved" -ge 1 ] && [ "$moved" -le 2 ] && echo yes)"
check_eq then_one_refused_as_prefork 1 "$(rows many 'tcp prefork')"
check_eq then_the_rest_straight_to_tcp $((count - moved - 1)) \
	"$(rows many 'tcp negative_cache')"

# A client process of its own knows nothing of the refusal before.
client second 2
check_eq new_client_refused_at_once_then_remembers \
	"exact 2|tcp negative_cache|tcp prefork" \
	"$(grep -e '^exact' -e '^conn' "$tmp/second" | sed 's/^conn //' |
		sort | paste -sd'|')"
finish
