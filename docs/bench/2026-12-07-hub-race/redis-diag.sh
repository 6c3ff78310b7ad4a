#!/bin/bash
A=$ROCESHIM_FABRIC_ADDR_A
W=/tmp/rd; mkdir -p $W
N=64000; p=19990
ROCESHIM_DIAG=1 tools/roceshim-run redis-server --bind $A --port $p --save '' --appendonly no --dir $W --protected-mode no > $W/srv 2>&1 &
for t in $(seq 300); do grep -q "Ready to accept" $W/srv && break; sleep 0.3; done
ROCESHIM_DIAG=1 timeout 300 tools/roceshim-run redis-benchmark -h $A -p $p -c 8 -P 16 -n $N -q -t get 2>$W/cli | tr '\r' '\n' | grep -v "rps=" | grep GET
pkill -INT -f "redis-server.*:$p"; sleep 3; wait
echo "server:"; grep diag $W/srv
echo "client:"; grep diag $W/cli
