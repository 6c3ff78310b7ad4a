#!/bin/bash
# in the guest: Gloo all_reduce world W: plain TCP, roceshim by default, and roceshim with
# the TCPStore's connections kept on TCP (ROCESHIM_EXCLUDE of its port), REPS rounds
cd /work/main/build
J=../tests/integration/gloo_job.py
W=${W:-2}
P=29517
addrs=$ROCESHIM_FABRIC_ADDR_A
for r in $(seq 2 $W); do [ $((r % 2)) = 0 ] && addrs=$addrs,$ROCESHIM_FABRIC_ADDR_B || addrs=$addrs,$ROCESHIM_FABRIC_ADDR_A; done
run() {
	rm -f /work/main/build/g.json
	/usr/bin/env "$@" /usr/bin/python3 $J launch --world $W --ops all_reduce --bench --sizes 1024,65536 \
		--iters ${ITERS:-20} --warmup 1 --rank-addrs $addrs --timeout 400 --master-port $P \
		--json-out /work/main/build/g.json $PRE >/dev/null 2>&1
	/usr/bin/python3 -c '
import json
d=json.load(open("/work/main/build/g.json"))
print(" ".join("%d:%.2f" % (b["size"], b["median_ms"]) for b in d.get("bench", [])))' 2>&1 | tail -1
}
for r in $(seq ${REPS:-3}); do
	echo "rep $r w$W tcp $(PRE= run -u ROCESHIM_LIB X=1)"
	echo "rep $r w$W default $(PRE=--preload run ROCESHIM_RUN=$PWD/tools/roceshim-run ROCESHIM_RDMA=1)"
	echo "rep $r w$W storetcp $(PRE=--preload run ROCESHIM_RUN=$PWD/tools/roceshim-run ROCESHIM_RDMA=1 ROCESHIM_EXCLUDE=:$P)"
done
