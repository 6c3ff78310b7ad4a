#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A client that retries connect() every millisecond while its server
# starts, as PyTorch's TCPStore client does: its connect request may reach
# the server's host before anything listens there (the CM refuses: no
# listener), and its TCP connect, a moment later, succeed.  The client
# then asks again over the CM, and the server takes the connection over
# RDMA if accept() has not taken it yet.  Every race must end byte for
# byte with both ends on the same transport, and most of them on RDMA:
# blocking connects, and non-blocking ones waited for in select().  (A
# server whose accept() takes the TCP connection before the second
# request arrives keeps it on TCP, and so does its client: README, "Known
# limits".)
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-listen-race.XXXXXX") || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
addr=$ROCESHIM_FABRIC_ADDR_B
rounds=${LISTEN_RACE_ROUNDS:-8}

# race MODE PORT: one client started before its server; the verdicts of
# both ends appended to $tmp/MODE.
race() {
	local mode=$1 port=$2 flag=
	[ "$mode" = nonblocking ] && flag=--nonblocking
	"$ROCESHIM_RUN" "$PYTHON" "$peer" retry "$addr" "$port" $flag \
		--report >"$tmp/cli" 2>&1 &
	local client=$!
	# The client is retrying by the time the server's Python starts.
	sleep 0.3
	"$ROCESHIM_RUN" "$PYTHON" "$peer" serve "$addr" --port "$port" \
		--report --linger 120 --until-echoed >"$tmp/srv" 2>&1 &
	local server=$!
	timeout 120 tail --pid="$client" -f /dev/null || kill "$client"
	wait "$client"
	echo "client rc $?" >>"$tmp/cli"
	wait "$server"
	sed "s/^/    $mode $port client: /" "$tmp/cli"
	sed "s/^/    $mode $port server: /" "$tmp/srv"
	local cli srv
	cli=$(grep -m1 '^conn ' "$tmp/cli" | cut -d' ' -f2)
	srv=$(grep -m1 '^conn ' "$tmp/srv" | cut -d' ' -f2)
	{
		grep -m1 '^echo ' "$tmp/cli"
		if [ -n "$cli" ] && [ "$cli" = "$srv" ]; then
			echo "agree $cli"
		else
			echo "disagree client '$cli' server '$srv'"
		fi
	} >>"$tmp/$mode"
}

for mode in blocking nonblocking; do
	: >"$tmp/$mode"
	# Below the ephemeral range: a client retrying towards a port its
	# own source port could land on would, some day, connect to itself.
	for i in $(seq "$rounds"); do
		race "$mode" $((22000 + i + (${#mode} - 8) * 100))
	done
	check_eq "${mode}_races_byte_exact" "$rounds" \
		"$(grep -c '^echo ok$' "$tmp/$mode")"
	check_eq "${mode}_race_ends_agree" "$rounds" \
		"$(grep -c '^agree ' "$tmp/$mode")"
	on=$(grep -c '^agree rdma$' "$tmp/$mode")
	echo "# $mode: $on of $rounds races on RDMA"
	check "${mode}_most_races_on_rdma" test "$on" -gt $((rounds / 2))
done
finish
