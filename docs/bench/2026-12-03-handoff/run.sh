#!/bin/bash
# SPDX-License-Identifier: MIT
# The handoff rows of README.md, in one boot of the fabric: a Python
# server that forks a handler per connection (forking_server.py), and
# the prefork bench's client (100 connections one after another, then
# 200 from 10 threads, each sending a line and reading the answer).
# OLD_LIB and NEW_LIB are two builds of libroceshim.so; "tcp" is OLD_LIB
# with --no-rdma.  Run from a build tree:
#   OLD_LIB=... NEW_LIB=... ../fabric/roceshim-fabric run -- \
#       /bin/bash ../docs/bench/2026-12-03-handoff/run.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
client=$here/../2026-12-03-prefork/prefork_load.py
RUN=$PWD/tools/roceshim-run
PY=/usr/bin/python3
A=10.99.0.1 B=10.99.0.2
wait_port() {
	for _ in $(seq 120); do
		(echo >"/dev/tcp/$1/$2") 2>/dev/null && return 0
		sleep 0.5
	done
	return 1
}
port=9500
for round in 1 2 3; do
	for way in old-rdma old-tcp new-rdma; do
		opt=
		[ "$way" = old-tcp ] && opt=--no-rdma
		export ROCESHIM_LIB=$OLD_LIB
		[ "$way" = new-rdma ] && export ROCESHIM_LIB=$NEW_LIB
		port=$((port + 1))
		"$RUN" $opt "$PY" "$here/forking_server.py" $A $port \
			>/dev/null 2>&1 &
		srv=$!
		wait_port $A $port
		echo "round $round $way seq:  $("$RUN" $opt "$PY" "$client" \
			client $A $port 100 1 $B | head -1)"
		echo "round $round $way conc: $("$RUN" $opt "$PY" "$client" \
			client $A $port 200 10 $B | head -1)"
		kill $srv
		wait $srv 2>/dev/null
	done
done
