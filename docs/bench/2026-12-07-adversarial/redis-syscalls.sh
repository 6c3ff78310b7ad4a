#!/bin/bash
# In the guest: the redis server's system calls per pipelined GET batch
# (8 clients, -P 16), from strace -f -c of runs of N and 3N requests, the
# difference over 2N, RDMA on and off.
A=$ROCESHIM_FABRIC_ADDR_A
W=/tmp/rw; mkdir -p $W
N=${N:-32000}
p=19900
for m in 1 0; do
 for n in $N $((3 * N)); do
	p=$((p + 1))
	ROCESHIM_RDMA=$m strace -f -c -o $W/st.$m.$n tools/roceshim-run redis-server --bind $A --port $p --save '' --appendonly no --dir $W --protected-mode no > $W/srv.$p 2>&1 &
	for t in $(seq 300); do grep -q "Ready to accept" $W/srv.$p && break; sleep 0.3; done
	ROCESHIM_RDMA=$m timeout 300 tools/roceshim-run redis-benchmark -h $A -p $p -c 8 -P 16 -n $n -q -t get 2>&1 | tr '\r' '\n' | grep -v "rps=" | grep GET
	pkill -INT -f "redis-server.*:$p"; sleep 3
	wait
 done
 ../bench/strace-per $W/st.$m.$N $W/st.$m.$((3 * N)) $((2 * N / 16)) \
	"rdma=$m per batch of 16 GETs"
done
