#!/bin/bash
# Run in the guest from the build directory: N runs of 150 connects to a
# plain listener, both ends logging at info; a run that fails shows both
# logs and the listener's sockets.
C=$(dirname "$0")/connect.py
A=$ROCESHIM_FABRIC_ADDR_A
port=19600
for i in $(seq ${N:-8}); do
	port=$((port + 1))
	ROCESHIM_LOG_LEVEL=info tools/roceshim-run python3 "$C" serve "$A" $port plain >/tmp/srv.$i 2>&1 &
	srv=$!
	until grep -q listening /tmp/srv.$i 2>/dev/null; do sleep 0.1; done
	ROCESHIM_LOG_LEVEL=info tools/roceshim-run python3 "$C" connect "$A" $port 150 "run $i" >/tmp/cli.$i 2>&1
	rc=$?
	echo "run $i rc=$rc $(tail -n1 /tmp/cli.$i)"
	if [ $rc != 0 ]; then
		echo "--- server alive: $(kill -0 $srv 2>/dev/null && echo yes || echo no)"
		grep -v "^roceshim.*info: \(enabled\|RDMA stack\|2 RDMA\)" /tmp/srv.$i | tail -20
		echo "--- client"
		grep -v "^roceshim.*info: \(enabled\|RDMA stack\|2 RDMA\)" /tmp/cli.$i | tail -20
		ss -tan "sport = :$port" | head
	fi
	kill $srv; wait $srv 2>/dev/null
done
