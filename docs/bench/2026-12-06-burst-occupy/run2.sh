#!/bin/bash
B=../tests/fabric/burst.py
export ROCESHIM_RING_KB=16 PYTHONPATH=../tests/fabric
ulimit -n 16384
A=$ROCESHIM_FABRIC_ADDR_B
for r in $(seq 4); do
	echo "rep $r tcp $(ROCESHIM_LIB=/tmp/rout/libroceshim-94e.so ROCESHIM_RDMA=0 tools/roceshim-run \
		python3 $B "$A" --conns 1000 2>&1 | grep -E "burst|seconds" | tr '\n' ' ')"
	for lib in /tmp/rout/libroceshim-94e.so /tmp/rout/libroceshim-occupy2.so; do
		echo "rep $r $(basename $lib) $(ROCESHIM_LIB=$lib ROCESHIM_RDMA=1 \
			tools/roceshim-run python3 $B "$A" --conns 1000 2>&1 |
			grep -E "^burst|^seconds|^rdma" | tr '\n' ' ')"
	done
done
