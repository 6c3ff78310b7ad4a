#!/bin/bash
# In the guest: redis-benchmark GET pipelined (-P 16) with 8 and 100 clients,
# 20000 and 200000 requests, RDMA on and off in turn (redis-steady.txt).
A=$ROCESHIM_FABRIC_ADDR_A
W=/tmp/rw; mkdir -p $W
p=19800
for c in 8 100; do
 for n in 20000 200000; do
 for m in 1 0; do
	p=$((p + 1))
	ROCESHIM_RDMA=$m tools/roceshim-run redis-server --bind $A --port $p --save '' --appendonly no --dir $W --protected-mode no --maxclients 1000 > $W/srv.$p 2>&1 &
	srv=$!
	for t in $(seq 100); do grep -q "Ready to accept" $W/srv.$p && break; sleep 0.3; done
	s=$(date +%s.%N)
	r=$(ROCESHIM_RDMA=$m timeout 200 tools/roceshim-run redis-benchmark -h $A -p $p -c $c -P 16 -n $n -q -t get 2>&1 | tr '\r' '\n' | grep -v "rps=" | grep GET)
	e=$(date +%s.%N)
	echo "c=$c n=$n rdma=$m: $r; wall $(echo "$e - $s" | bc) s"
	kill $srv; wait $srv 2>/dev/null
 done
 done
done
