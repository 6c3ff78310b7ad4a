#!/bin/bash
# in the guest: test-late-established's body REPS times, logs kept on failure
cd /work/main/build
S=/work/main/tests/fabric/late_established.py
out=/work/main/build/late-logs
for lib in ${LIBS:-/tmp/rout/libroceshim-adapt500.so /tmp/rout/libroceshim-7419.so}; do
for r in $(seq ${REPS:-4}); do
	d=$(mktemp -d)
	ROCESHIM_LIB=$lib ROCESHIM_CONNECT_TIMEOUT_MS=10 ROCESHIM_LOG_LEVEL=info \
		timeout 150 tools/roceshim-run /usr/bin/python3 $S server $ROCESHIM_FABRIC_ADDR_B 200 >$d/server 2>&1 &
	sp=$!
	for i in $(seq 100); do grep -q '^port' $d/server && break; sleep 0.1; done
	port=$(awk '$1=="port"{print $2; exit}' $d/server)
	ROCESHIM_LIB=$lib ROCESHIM_LOG_LEVEL=info timeout 120 tools/roceshim-run /usr/bin/python3 $S client $ROCESHIM_FABRIC_ADDR_B $port 200 --bind $ROCESHIM_FABRIC_ADDR_A >$d/client 2>&1
	wait $sp
	res="$(grep '^client ' $d/client) | $(grep '^server wrong' $d/server) | moved $(grep -c 'gave up on was up' $d/server) | stayed $(grep -c "not completed by the client" $d/server) undecided $(grep -c "no outcome of an answered" $d/server)"
	echo "$(basename $lib) rep $r: $res"
	case $res in
	*"ok 200 wrong 0 error 0 | server wrong 0"*) ;;
	*) cp $d/server $out/server.$(basename $lib).$r; cp $d/client $out/client.$(basename $lib).$r ;;
	esac
	rm -rf $d
done
done
