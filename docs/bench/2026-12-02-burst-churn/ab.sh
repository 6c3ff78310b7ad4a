#!/bin/bash
# Run in the guest from the build directory (fabric/roceshim-fabric run --
# THIS): REPS rounds of the burst of tests/fabric/burst.py, kernel TCP
# (ROCESHIM_RDMA=0) and then each library of LIBS with RDMA on.
B=../tests/fabric/burst.py
export ROCESHIM_RING_KB=16 PYTHONPATH=../tests/fabric
ulimit -n 16384
A=$ROCESHIM_FABRIC_ADDR_B
set -- $LIBS
for r in $(seq "${REPS:-3}"); do
	echo "rep $r tcp $(ROCESHIM_LIB=$1 ROCESHIM_RDMA=0 tools/roceshim-run \
		python3 $B "$A" --conns 1000 2>&1 | grep -E "burst|seconds" |
		tr '\n' ' ')"
	for lib in $LIBS; do
		echo "rep $r $lib $(ROCESHIM_LIB=$lib ROCESHIM_RDMA=1 \
			tools/roceshim-run python3 $B "$A" --conns 1000 2>&1 |
			grep -E "^burst|^seconds|^rdma" | tr '\n' ' ')"
	done
done
