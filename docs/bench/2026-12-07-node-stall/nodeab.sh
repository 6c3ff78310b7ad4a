#!/bin/bash
# node_http.js server and client alone under a fork-heavy load, alternating
# libraries; counts the server's send_stall rows and times the client.
A=$ROCESHIM_FABRIC_ADDR_A B=$ROCESHIM_FABRIC_ADDR_B
port=18700
for i in 1 2 3 4 5 6; do
 for lib in $LIBS; do
	port=$((port + 1))
	(while :; do for t in /proc/[0-9]*/task/*; do cut -d' ' -f3 $t/stat >/dev/null 2>&1; done; done) & load=$!
	ROCESHIM_LIB=$lib tools/roceshim-run node ../tests/fabric/node_http.js serve $A $port 0 > /tmp/ns.out 2>&1 &
	spid=$!
	for t in $(seq 100); do grep -q listening /tmp/ns.out && break; sleep 0.3; done
	s=$(date +%s.%N)
	c=$(ROCESHIM_LIB=$lib timeout 300 tools/roceshim-run node ../tests/fabric/node_http.js client $A $port 20 60 $B 2>&1 | grep node_client)
	e=$(date +%s.%N)
	kill $load; wait $load 2>/dev/null
	sleep 3
	echo "$lib run $i: $c; $(echo "$e - $s" | bc) s; send_stall rows $(tools/roceshim-stat $(pgrep -f "node_http.js serve $A $port" | head -1) | grep -c send_stall)"
	kill $spid; wait $spid 2>/dev/null
 done
done
