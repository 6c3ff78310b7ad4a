#!/bin/bash
# In the guest: node_http.js server and client alone (60 POSTs, 20 at once,
# 1 MiB answers) under a fork-heavy load (runs 4 and up), with a library
# built with diag.patch: the client logs each epoll_ctl and epoll_wait
# result (ROCESHIM_DIAG=1), and, when the server moves a connection to
# TCP, that connection's state (DIAG line).  Results under np-diag/.
A=$ROCESHIM_FABRIC_ADDR_A B=$ROCESHIM_FABRIC_ADDR_B
lib=/tmp/rout/roceshim_diag/libroceshim.so
out=$PWD/np-diag; rm -rf $out; mkdir -p $out
port=18600
for i in 4 5 6 7 8 9 10 11 12 13; do
	port=$((port + 1))
	d=$out/run$i; mkdir -p $d
	if [ $i -gt 3 ]; then (while :; do for t in /proc/[0-9]*/task/*; do cut -d' ' -f3 $t/stat >/dev/null 2>&1; done; done) & load=$!; fi
	ROCESHIM_LOG_LEVEL=debug ROCESHIM_LIB=$lib tools/roceshim-run node ../tests/fabric/node_http.js serve $A $port 0 > $d/server.out 2>&1 &
	spid=$!
	for t in $(seq 100); do grep -q listening $d/server.out && break; sleep 0.3; done
	s=$(date +%s.%N)
	ROCESHIM_DIAG=1 ROCESHIM_LOG_LEVEL=error ROCESHIM_LIB=$lib timeout 300 tools/roceshim-run node ../tests/fabric/node_http.js client $A $port 20 60 $B > $d/client.out 2>&1
	e=$(date +%s.%N)
	[ -n "$load" ] && kill $load && wait $load 2>/dev/null; load=
	sleep 3
	echo "run $i: $(grep node_client $d/client.out); $(echo "$e - $s" | bc) s; stall rows $(tools/roceshim-stat $(pgrep -f "node_http.js serve $A $port" | head -1) | grep -c send_stall); diag $(grep -c DIAG $d/client.out)"
	kill $spid; wait $spid 2>/dev/null
done
