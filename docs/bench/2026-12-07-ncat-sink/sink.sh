#!/bin/bash
# SPDX-License-Identifier: MIT
# 60 concurrent `ncat --send-only` clients of 200000 bytes each into one
# `ncat -k -l` sink, with the RDMA path off and then by default; prints
# the bytes the sink wrote, the clients' exit codes, and the sink's
# connections that got fewer than 200000 bytes (from roceshim-stat).
# Run in the fabric, from the build tree:
#   ROCESHIM_LIB=$PWD/src/.libs/libroceshim.so fabric/roceshim-fabric run \
#     --timeout 600 -- env ROCESHIM_RUN=$PWD/tools/roceshim-run \
#     ROCESHIM_STAT=$PWD/tools/roceshim-stat bash ../docs/bench/2026-12-07-ncat-sink/sink.sh
set -u
A=$ROCESHIM_FABRIC_ADDR_A
B=$ROCESHIM_FABRIC_ADDR_B
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
head -c 200000 /dev/urandom >"$tmp/chunk"
port=20741
for mode in off default; do
	run=("$ROCESHIM_RUN")
	[ $mode = off ] && run+=(--no-rdma)
	port=$((port + 1))
	"${run[@]}" ncat -k -l "$B" $port >"$tmp/sink.$mode" </dev/null &
	sink=$!
	until ss -Hltn "sport = :$port" | grep -q .; do sleep 0.2; done
	(while :; do "$ROCESHIM_STAT" --json; echo; sleep 0.2; done) \
		>"$tmp/stats.$mode" 2>/dev/null &
	sampler=$!
	start=$SECONDS
	for i in $(seq 60); do
		(timeout 120 "${run[@]}" ncat -s "$A" --send-only "$B" $port \
			<"$tmp/chunk" 2>/dev/null
		 echo $? >"$tmp/rc.$mode.$i") &
	done
	wait $(jobs -p | grep -v -e "^$sink\$" -e "^$sampler\$")
	for _ in $(seq 40); do
		[ "$(stat -c %s "$tmp/sink.$mode")" -ge 12000000 ] && break
		sleep 0.5
	done
	echo "$mode: sink $(stat -c %s "$tmp/sink.$mode") of 12000000 bytes;" \
		"client exits: $(cat "$tmp"/rc.$mode.* | sort | uniq -c |
			tr -s ' \n' ' '); $((SECONDS - start)) s"
	kill $sampler $sink
	wait $sampler $sink 2>/dev/null
	python3 - "$tmp/stats.$mode" $port <<'PY'
import json, sys
rows = {}
for line in open(sys.argv[1]):
    try:
        procs = json.loads(line)
    except ValueError:
        continue
    for p in procs:
        for c in p["connections"]:
            if c["role"] == "passive" and c["local"].endswith(":" + sys.argv[2]):
                rows[(p["pid"], c["fd"], c["opened_unix_ms"])] = c
print("  %d connections seen at the sink" % len(rows))
for c in rows.values():
    got = c["tcp_rx_bytes"] + c["rdma_rx_bytes"]
    if got != 200000:
        print("  short: %s got %d (rdma %d) %s/%s/%s errors %d" % (
            c["peer"], got, c["rdma_rx_bytes"], c["transport"],
            c["fallback"], c["downgrade"], c["errors"]))
PY
done
