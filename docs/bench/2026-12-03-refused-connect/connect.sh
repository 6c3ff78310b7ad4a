#!/bin/bash
# Run in the guest from the build directory (fabric/roceshim-fabric run --
# THIS): REPS rounds of 150 sequential connects from one process to a
# listener of another, both preloaded, for each listener kind (plain, and
# SO_REUSEPORT, which takes no RDMA handshake): kernel TCP
# (ROCESHIM_RDMA=0), then each library of LIBS with RDMA on.
C=$(dirname "$0")/connect.py
A=$ROCESHIM_FABRIC_ADDR_A
port=19500
one() { # LIB RDMA KIND LABEL
	port=$((port + 1))
	ROCESHIM_LIB=$1 ROCESHIM_RDMA=$2 tools/roceshim-run python3 "$C" \
		serve "$A" $port "$3" >/tmp/connect.srv 2>&1 &
	local srv=$!
	until grep -q listening /tmp/connect.srv 2>/dev/null; do sleep 0.1; done
	if ! ROCESHIM_LIB=$1 ROCESHIM_RDMA=$2 tools/roceshim-run python3 \
		"$C" connect "$A" $port 150 "$4"; then
		echo "$4 failed; server alive: $(kill -0 $srv 2>/dev/null &&
			echo yes || echo no); its log:"
		tail -n 20 /tmp/connect.srv
	fi
	kill $srv
	wait $srv 2>/dev/null
}
set -- $LIBS
for r in $(seq "${REPS:-3}"); do
	for kind in plain reuseport; do
		echo "rep $r $(one "$1" 0 $kind "$kind tcp")"
		for lib in $LIBS; do
			echo "rep $r $(one "$lib" 1 $kind "$kind $(basename "$lib")")"
		done
	done
done
