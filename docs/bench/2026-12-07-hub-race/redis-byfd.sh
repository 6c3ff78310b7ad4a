#!/bin/bash
# The redis server's read, write, ioctl and epoll calls per pipelined GET
# batch (8 clients, -P 16, N GETs), by the kind of fd (strace -y), RDMA on
# and off.
A=$ROCESHIM_FABRIC_ADDR_A
W=/tmp/rbf; mkdir -p $W
N=${N:-64000}
p=19950
for m in 1 0; do
	p=$((p + 1))
	ROCESHIM_RDMA=$m strace -f -y -e trace=read,write,ioctl,epoll_wait,epoll_ctl,epoll_pwait -o $W/tr.$m tools/roceshim-run redis-server --bind $A --port $p --save '' --appendonly no --dir $W --protected-mode no > $W/srv.$p 2>&1 &
	for t in $(seq 300); do grep -q "Ready to accept" $W/srv.$p && break; sleep 0.3; done
	ROCESHIM_RDMA=$m timeout 300 tools/roceshim-run redis-benchmark -h $A -p $p -c 8 -P 16 -n $N -q -t get 2>&1 | tr '\r' '\n' | grep -v "rps=" | grep GET
	pkill -INT -f "redis-server.*:$p"; sleep 3
	wait
	echo "rdma=$m: calls per batch of 16 GETs ($((N / 16)) batches), by fd kind"
	/usr/bin/python3 - $W/tr.$m $((N / 16)) <<'PY'
import collections, re, sys
c = collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r"\d+\s+(\w+)\((\d+)<([^>]*)>", line)
    if not m:
        m2 = re.match(r"\d+\s+(\w+)\(", line)
        if m2: c[(m2.group(1), "-")] += 1
        continue
    call, kind = m.group(1), m.group(3)
    if kind.startswith("TCP") or kind.startswith("socket"): kind = "tcp socket"
    elif "eventfd" in kind: kind = "eventfd"
    elif "uverbs" in kind or "infiniband" in kind: kind = "uverbs"
    elif "eventpoll" in kind: kind = "epoll"
    c[(call, kind)] += 1
b = int(sys.argv[2])
for (call, kind), n in sorted(c.items(), key=lambda x: -x[1]):
    if n / b >= 0.01:
        print("  %-12s %-14s %6.2f" % (call, kind, n / b))
PY
done
