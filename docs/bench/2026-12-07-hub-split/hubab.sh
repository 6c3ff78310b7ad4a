#!/bin/bash
# In the fabric's guest: Gloo all_reduce at world W (1 KiB, 64 KiB), REPS
# rounds, each round in turn: plain kernel TCP, then every library of LIBS
# ("label=path ..."; a path ending in "+storetcp" runs that library with
# the TCPStore's port kept on TCP by ROCESHIM_EXCLUDE).
# Prints the median ms per all_reduce of each run, as size:ms.
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
		lib=${l#*=}
		ex=X=1
		case $lib in
		*+storetcp) lib=${lib%+storetcp} ex=ROCESHIM_EXCLUDE=:$P ;;
		esac
		echo "rep $r w$W ${l%%=*} $(PRE=--preload run $R ROCESHIM_LIB=$lib $ex)"
	done
done
