#!/bin/bash
# in the guest: the burst, kernel TCP then each library, REPS rounds; whole-process wall time too
B=../tests/fabric/burst.py
export ROCESHIM_RING_KB=16 PYTHONPATH=../tests/fabric
ulimit -n 16384
A=$ROCESHIM_FABRIC_ADDR_B
TIMEFORMAT=%R
for r in $(seq ${REPS:-4}); do
	s=$( { time ROCESHIM_LIB=/tmp/rout/libroceshim-a369.so ROCESHIM_RDMA=0 tools/roceshim-run \
		python3 $B "$A" --conns 1000 2>&1 | grep -E "burst|seconds" | tr '\n' ' '; } 2>&1 )
	echo "rep $r tcp $s" | tr '\n' ' '; echo
	for lib in $LIBS; do
		s=$( { time ROCESHIM_LIB=$lib ROCESHIM_RDMA=1 tools/roceshim-run python3 $B "$A" --conns 1000 2>&1 |
			grep -E "^burst|^seconds|^rdma" | tr '\n' ' '; } 2>&1 )
		echo "rep $r $(basename $lib) $s" | tr '\n' ' '; echo
	done
done
