#!/bin/bash
# Run in the guest from the build directory (fabric/roceshim-fabric run --
# THIS): REPS rounds of N sequential connections (tests/fabric/peer.py
# churn: connect, 1000 bytes each way, close) for each library of LIBS,
# RDMA on.  The time is the process's, less the 3 s it sleeps at the end.
export PYTHONPATH=../tests/fabric
A=$ROCESHIM_FABRIC_ADDR_B
N=${N:-300}
for r in $(seq "${REPS:-3}"); do
	for lib in $LIBS; do
		t0=$(date +%s.%N)
		out=$(ROCESHIM_LIB=$lib tools/roceshim-run python3 \
			../tests/fabric/peer.py churn "$A" --count "$N" 2>&1 |
			grep -E "MISMATCH|fds" | tr '\n' ' ')
		t1=$(date +%s.%N)
		echo "rep $r $lib churn$N $(echo "$t1 - $t0 - 3" | bc) s $out"
	done
done
