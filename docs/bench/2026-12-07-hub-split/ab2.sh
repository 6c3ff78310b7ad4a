#!/bin/bash
# In the guest: Gloo all_reduce world W at 1 KiB and 64 KiB, REPS rounds of:
# kernel TCP, then each library given in LIBS (label=path ...).
cd /work/main/build
J=../tests/integration/gloo_job.py
W=${W:-2}
P=29517
addrs=$ROCESHIM_FABRIC_ADDR_A
for r in $(seq 2 $W); do
	[ $((r % 2)) = 0 ] && addrs=$addrs,$ROCESHIM_FABRIC_ADDR_B ||
		addrs=$addrs,$ROCESHIM_FABRIC_ADDR_A
done
run() {
	rm -f /work/main/build/g.json
	/usr/bin/env "$@" /usr/bin/python3 $J launch --world $W \
		--ops all_reduce --bench --sizes 1024,65536 \
		--iters ${ITERS:-20} --warmup 1 --rank-addrs $addrs \
		--timeout 400 --master-port $P \
		--json-out /work/main/build/g.json $PRE >/dev/null 2>&1
	/usr/bin/python3 -c '
import json
d=json.load(open("/work/main/build/g.json"))
print(" ".join("%d:%.2f" % (b["size"], b["median_ms"]) for b in d.get("bench", [])))' 2>&1 | tail -1
}
R="ROCESHIM_RUN=$PWD/tools/roceshim-run"
for r in $(seq ${REPS:-3}); do
	echo "rep $r w$W tcp $(PRE= run -u ROCESHIM_LIB X=1)"
	for l in $LIBS; do
		echo "rep $r w$W ${l%%=*} $(PRE=--preload run $R ROCESHIM_LIB=${l#*=})"
	done
done
