#!/bin/bash
# in the guest: syscalls by name per Gloo all_reduce (world 2, 1 KiB), from strace -c -f of runs of N and 3N iterations
cd /work/main/build
J=../tests/integration/gloo_job.py
addrs=$ROCESHIM_FABRIC_ADDR_A,$ROCESHIM_FABRIC_ADDR_B
N=${N:-20}
for v in tcp roceshim; do
	for it in $N $((3 * N)); do
		pre=(); [ $v = roceshim ] && pre=(--preload)
		strace -f -c -o /work/main/build/st.$v.$it \
			env ROCESHIM_RUN=$PWD/tools/roceshim-run ROCESHIM_RDMA=1 /usr/bin/python3 $J launch --world 2 --ops all_reduce --bench --sizes 1024 \
			--iters $it --warmup 1 --rank-addrs $addrs --timeout 600 --json-out /work/main/build/g.json "${pre[@]}" >/dev/null 2>&1
		echo "$v $it $(/usr/bin/python3 -c 'import json; print(json.load(open("/work/main/build/g.json"))["bench"][0]["median_ms"])' 2>&1 | tail -1)"
	done
	../bench/strace-per /work/main/build/st.$v.$N /work/main/build/st.$v.$((3 * N)) \
		$((2 * N)) "$v per iteration" --digits 0 --min 5
done
