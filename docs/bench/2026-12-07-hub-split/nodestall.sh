#!/bin/bash
# In the guest: node_http.js server and client alone (60 POSTs, 20 at once,
# 1 MiB answers), 3 runs per library; counts the server rows that moved to
# TCP with send_stall (a close that lingered 2 s with bytes the client took
# none of). Libraries: the two paths below (a4e9540 and ef5c803 builds).
A=$ROCESHIM_FABRIC_ADDR_A B=$ROCESHIM_FABRIC_ADDR_B
port=18300
for lib in /tmp/rout/roceshim_old/libroceshim.so /tmp/rout/roceshim6/libroceshim.so; do
	for i in 1 2 3; do
		port=$((port + 1))
		ROCESHIM_LIB=$lib tools/roceshim-run node ../tests/fabric/node_http.js serve $A $port 0 > /tmp/ns.out 2>&1 &
		pid=$!
		for t in $(seq 100); do grep -q listening /tmp/ns.out && break; sleep 0.3; done
		c=$(ROCESHIM_LIB=$lib timeout 300 tools/roceshim-run node ../tests/fabric/node_http.js client $A $port 20 60 $B 2>&1 | grep node_client)
		sleep 3
		s=$(tools/roceshim-stat $pid 2>&1 | grep -c send_stall)
		echo "$lib run $i: $c; server rows with send_stall: $s"
		kill $pid; wait $pid 2>/dev/null
	done
done
