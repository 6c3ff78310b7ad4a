#!/bin/bash
# SPDX-License-Identifier: MIT
# Real programs whose listeners have SO_REUSEPORT, default settings, in
# one fabric boot (run from the build directory):
#   fabric/roceshim-fabric run -- \
#       ../docs/bench/2026-12-07-reuseport/programs.sh
# - nginx, "listen ... reuseport", 2 workers: 10 curls of 3 MiB, ab;
# - two asyncio servers (start_server(reuse_port=True)), 200 echo
#   connections at once from one asyncio client, three rounds;
# - one asyncio server alone, the same.
# Each prints its digests or counts, and the rows by transport.
here=$(cd "$(dirname "$0")" && pwd)
shape=setup
. "$top_srcdir/tests/fabric/servers_lib.sh"
trap 'kill $(jobs -p) 2>/dev/null; [ -f "$tmp/nginx.pid" ] && kill -QUIT "$(cat "$tmp/nginx.pid")"; sleep 1; rm -rf "$tmp"' EXIT
head -c $((3 << 20)) /dev/urandom >"$tmp/big.bin"
want=$(sha256sum <"$tmp/big.bin" | cut -d' ' -f1)
chmod -R a+rX "$tmp"

shape=nginx_reuseport
P=18501
cat >"$tmp/nginx.conf" <<CONF
worker_processes 2;
pid $tmp/nginx.pid;
error_log $tmp/nginx.err;
events { worker_connections 256; }
http {
	access_log off;
	server { listen $A:$P reuseport; root $tmp; }
}
CONF
sample_start "$tmp/$shape.stats"
"$RUN" nginx -c "$tmp/nginx.conf" -g 'daemon off;' &
sleep 3
bad=0
for i in $(seq 10); do
	got=$(timeout 60 "$RUN" curl -s --interface "$B" "http://$A:$P/big.bin" |
		sha256sum | cut -d' ' -f1)
	[ "$got" = "$want" ] || bad=$((bad + 1))
done
echo "nginx: 10 downloads, $bad wrong"
timeout 120 "$RUN" ab -q -B "$B" -n 500 -c 20 "http://$A:$P/big.bin" 2>&1 |
	grep -E "Complete requests|Failed requests"
sample_stop
echo "nginx client rows:"; conns client $P
kill -QUIT "$(cat "$tmp/nginx.pid")"

for layout in two one; do
	shape=asyncio_$layout
	[ $layout = two ] && P=18512 || P=18513
	sample_start "$tmp/$shape.stats"
	"$RUN" "$PYTHON" "$here/aio_reuse.py" serve "$A" $P >"$tmp/s1" 2>&1 &
	s1=$!
	wait_for "$tmp/s1" '^listening'
	if [ $layout = two ]; then
		"$RUN" "$PYTHON" "$here/aio_reuse.py" serve "$A" $P \
			>"$tmp/s2" 2>&1 &
		s2=$!
		wait_for "$tmp/s2" '^listening'
	fi
	for round in 1 2 3; do
		timeout 300 "$RUN" "$PYTHON" "$here/aio_reuse.py" client "$A" \
			$P 200 "$B"
	done
	sample_stop
	echo "$shape server rows:"; conns server $P
	echo "$shape client rows:"; conns client $P
	kill $s1 ${s2:-} 2>/dev/null
	s2=
done
