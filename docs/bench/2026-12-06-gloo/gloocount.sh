#!/bin/bash
# in the guest: syscalls and context switches per Gloo all_reduce (world 2, 1 KiB), from runs of N and 2N iterations
cd /work/main/build
J=../tests/integration/gloo_job.py
addrs=$ROCESHIM_FABRIC_ADDR_A,$ROCESHIM_FABRIC_ADDR_B
N=${N:-40}
for v in tcp roceshim; do
	for it in $N $((2 * N)); do
		pre=(); [ $v = roceshim ] && pre=(--preload)
		perf stat -a -x, -e raw_syscalls:sys_enter,context-switches,task-clock -o /work/main/build/gc.$v.$it \
			env ROCESHIM_RUN=$PWD/tools/roceshim-run ROCESHIM_RDMA=1 /usr/bin/python3 $J launch --world 2 --ops all_reduce --bench --sizes 1024 \
			--iters $it --warmup 1 --rank-addrs $addrs --timeout 400 --json-out /work/main/build/g.json "${pre[@]}" >/dev/null 2>&1
		echo "$v iters $it median_ms $(/usr/bin/python3 -c 'import json; print(json.load(open("/work/main/build/g.json"))["bench"][0]["median_ms"])' 2>&1 | tail -1) $(grep -v '^#' /work/main/build/gc.$v.$it | awk -F, 'NF>2{printf "%s=%s ", $3, $1}')"
	done
done
