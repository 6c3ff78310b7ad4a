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
	/usr/bin/python3 - $v $N <<'PY'
import sys
v, n = sys.argv[1], int(sys.argv[2])
def load(p):
    d = {}
    for ln in open(p):
        f = ln.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            try:
                d[f[-1]] = int(f[3])
            except ValueError:
                pass
    return d
a = load("/work/main/build/st.%s.%d" % (v, n))
b = load("/work/main/build/st.%s.%d" % (v, 3 * n))
per = {k: (b.get(k, 0) - a.get(k, 0)) / (2.0 * n) for k in set(a) | set(b)}
tot = sum(per.values())
print("%s per iteration: %.0f syscalls: %s" % (v, tot, ", ".join("%s %.0f" % (k, c) for k, c in sorted(per.items(), key=lambda x: -x[1]) if c >= 5)))
PY
done
