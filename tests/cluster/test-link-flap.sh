#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A link flap in the middle of a transfer across the wire: host1 echoes
# 100 MB through a server on host2, both under roceshim with default
# settings, and host2's wire0 goes down for 10 s once the bytes flow.
# Kernel TCP rides that out; so must the connection: on RDMA, if its
# queue pairs' retries outlast the flap, or moved to its TCP socket
# (qp_error, qp_silent) if they do not.  Either way the client must end
# on its own, soon after the link is back, with every byte exact and no
# error, as over kernel TCP; how it got through is printed.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
peer="$top_srcdir/tests/fabric/peer.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-link-flap.XXXXXX") || exit 1
link_up() { rsf-exec host2 ip link set wire0 up; }
trap 'link_up; rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

down_s=10
settle_s=120
port=7301
job=$(rsf-exec --bg host2 "$ROCESHIM_RUN" "$PYTHON" "$peer" serve \
	"$ROCESHIM_FABRIC_HOST2" --port "$port" --count 1 --report \
	--linger 600)
wait_port host2 "$port"
ROCESHIM_LOG_LEVEL=info "$ROCESHIM_RUN" "$PYTHON" "$peer" echo \
	"$ROCESHIM_FABRIC_HOST2" "$port" --bytes 100000000 --report --announce \
	>"$tmp/cli" 2>&1 &
client=$!
if ! wait_for "$tmp/cli" '^started' 600; then
	echo "FAIL: the transfer did not start"
	cat "$tmp/cli"
	exit 1
fi
sleep 0.3
rsf-exec host2 ip link set wire0 down
t0=$SECONDS
sleep "$down_s"
running_at_link_up=no
kill -0 "$client" 2>/dev/null && running_at_link_up=yes
link_up
# Kernel TCP is through the flap within a few retransmissions: a client
# still running $settle_s s later is hung.  What its stack shows then is
# kept for the report.
for _ in $(seq "$settle_s"); do
	kill -0 "$client" 2>/dev/null || break
	sleep 1
done
if kill -0 "$client" 2>/dev/null; then
	echo "# the client still runs $settle_s s after the link came back:"
	for p in $(pgrep -f "peer.py echo $ROCESHIM_FABRIC_HOST2"); do
		"$ROCESHIM_STAT" "$p" | sed 's/^/    stat: /'
	done
	rdma resource show qp | sed 's/^/    host1 qp: /'
	ss -tni "dport = :$port" | sed 's/^/    host1 ss: /'
	rsf-exec host2 rdma resource show qp | sed 's/^/    host2 qp: /'
	kill "$client"
fi
wait "$client"
rc=$?
echo "# the client ended $((SECONDS - t0)) s after the link went down"
sed 's/^/    client: /' "$tmp/cli"
check_eq client_exits_0 0 "$rc"
check_eq client_starts_on_rdma "conn rdma none" \
	"$(grep -m1 '^conn ' "$tmp/cli")"
check_eq echo_byte_exact "echo ok" "$(grep -m1 '^echo ' "$tmp/cli")"
check_eq transfer_spans_the_flap yes "$running_at_link_up"
how=$(grep -oE 'moved to TCP \((qp_error|qp_silent|peer)\)' "$tmp/cli" |
	head -n1)
echo "# the connection got through ${how:-on RDMA}"
rsf-exec host2 pkill -f "serve $ROCESHIM_FABRIC_HOST2 --port $port"
rsf-exec --wait "$job" >"$tmp/srv" 2>&1
sed 's/^/    server: /' "$tmp/srv"
check_eq server_starts_on_rdma "conn rdma none" \
	"$(grep -m1 '^conn ' "$tmp/srv")"
finish
