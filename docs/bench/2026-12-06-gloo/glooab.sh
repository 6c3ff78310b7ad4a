#!/bin/bash
# in the guest: Gloo all_reduce world W, plain TCP vs roceshim default vs ROCESHIM_SPIN_US=0, REPS rounds
cd /work/main/build
J=../tests/integration/gloo_job.py
W=${W:-2}
addrs=$ROCESHIM_FABRIC_ADDR_A
for r in $(seq 2 $W); do [ $((r % 2)) = 0 ] && addrs=$addrs,$ROCESHIM_FABRIC_ADDR_B || addrs=$addrs,$ROCESHIM_FABRIC_ADDR_A; done
for r in $(seq ${REPS:-3}); do
	for v in tcp default spin0 $EXTRA; do
		rm -f /work/main/build/g.json
		case $v in
		tcp) env -u ROCESHIM_LIB /usr/bin/python3 $J launch --world $W --ops all_reduce --bench --sizes 1024,65536 --iters ${ITERS:-20} --warmup 1 --rank-addrs $addrs --timeout 400 --json-out /work/main/build/g.json >/dev/null 2>&1 ;;
		default) ROCESHIM_RUN=$PWD/tools/roceshim-run ROCESHIM_RDMA=1 /usr/bin/python3 $J launch --world $W --ops all_reduce --bench --sizes 1024,65536 --iters ${ITERS:-20} --warmup 1 --rank-addrs $addrs --timeout 400 --json-out /work/main/build/g.json --preload >/dev/null 2>&1 ;;
		spin0) ROCESHIM_SPIN_US=0 ROCESHIM_RUN=$PWD/tools/roceshim-run ROCESHIM_RDMA=1 /usr/bin/python3 $J launch --world $W --ops all_reduce --bench --sizes 1024,65536 --iters ${ITERS:-20} --warmup 1 --rank-addrs $addrs --timeout 400 --json-out /work/main/build/g.json --preload >/dev/null 2>&1 ;;
		esac
		echo "rep $r w$W $v $(python3 -c '
import json,sys
d=json.load(open("/work/main/build/g.json"))
print(" ".join("%d:%.2f" % (b["size"], b["median_ms"]) for b in d.get("bench", [])))' 2>&1 | tail -1)"
	done
done
