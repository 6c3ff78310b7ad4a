#!/bin/bash
# in the guest, from the build dir: burst with default spin vs no spin
B=../tests/fabric/burst.py
export ROCESHIM_RING_KB=16 PYTHONPATH=../tests/fabric
ulimit -n 16384
A=$ROCESHIM_FABRIC_ADDR_B
L=${LIB:-/tmp/rout/libroceshim-adapt500.so}
for r in $(seq "${REPS:-3}"); do
	echo "rep $r tcp $(ROCESHIM_LIB=$L ROCESHIM_RDMA=0 tools/roceshim-run \
		python3 $B "$A" --conns 1000 2>&1 | grep -E "burst|seconds" | tr '\n' ' ')"
	for v in ${VARIANTS:-default spin0 old occupy}; do
		case $v in
		default) env=() lib=$L ;;
		spin0) env=(ROCESHIM_SPIN_US=0) lib=$L ;;
		old) env=() lib=/tmp/rout/libroceshim-7419.so ;;
		occupy) env=() lib=/tmp/rout/libroceshim-occupy.so ;;
		*) env=() lib=$v ;;
		esac
		echo "rep $r $v $(env "${env[@]}" ROCESHIM_LIB=$lib ROCESHIM_RDMA=1 \
			tools/roceshim-run python3 $B "$A" --conns 1000 2>&1 |
			grep -E "^burst|^seconds|^rdma" | tr '\n' ' ')"
	done
done
