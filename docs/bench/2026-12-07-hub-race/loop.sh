#!/bin/bash
# usage: loop.sh MODE N RDMA: MODE zmq (rpc.py's ZeroMQ shape, 50 dealers) or
# jvm (JavaShapes), N runs, ROCESHIM_RDMA=RDMA; a client alive after 200 s
# is dumped with gdb (threads' stacks) and roceshim-stat, then killed
set -u
mode=$1; n=$2; rdma=$3
A=$ROCESHIM_FABRIC_ADDR_A; B=$ROCESHIM_FABRIC_ADDR_B
RUN=$ROCESHIM_RUN
HERE=$(dirname "$(readlink -f "$0")"); TOP=$HERE/../../..
R=${OUT:-$PWD}/hub-race; mkdir -p "$R"
RPC=$TOP/tests/fabric/rpc.py
export ROCESHIM_RDMA=$rdma
dump() { # pid label
	timeout 60 gdb -p $1 -batch -ex "thread apply all bt" >$R/$mode.$2.gdb 2>&1
	$ROCESHIM_STAT >$R/$mode.$2.stat 2>&1
}
if [ $mode = jvm ]; then
	mkdir -p /tmp/jvm; javac -d /tmp/jvm $TOP/tests/fabric/JavaShapes.java
fi
for i in $(seq $n); do
	PORT=$((18400 + i * 3))
	t0=$SECONDS
	if [ $mode = zmq ]; then
		"$RUN" /usr/bin/python3 $RPC zmq-server $A $PORT >$R/zmq.s.$i 2>&1 &
		spid=$!
		until grep -q listening $R/zmq.s.$i; do sleep 0.2; done
		"$RUN" /usr/bin/python3 -u $RPC zmq-client $A $PORT 50 >$R/zmq.c.$i 2>&1 &
		cpid=$!
	else
		"$RUN" java ${JVM_OPTS:-} -XX:ErrorFile=$R/hs_err_%p.log -cp /tmp/jvm JavaShapes serve $A $PORT >$R/jvm.s.$i 2>&1 &
		spid=$!
		until grep -q listening $R/jvm.s.$i; do sleep 0.5; done
		"$RUN" java ${JVM_OPTS:-} -XX:ErrorFile=$R/hs_err_%p.log -cp /tmp/jvm JavaShapes client $A $PORT $B >$R/jvm.c.$i 2>&1 &
		cpid=$!
	fi
	k=0
	while kill -0 $cpid 2>/dev/null && [ $k -lt 200 ]; do sleep 1; k=$((k+1)); done
	if kill -0 $cpid 2>/dev/null; then
		echo "run $i: client HUNG"
		dump $(pgrep -P $cpid | head -1 || echo $cpid) c$i; dump $cpid c$i.b
		dump $spid s$i
		kill -9 $cpid
	fi
	wait $cpid; crc=$?
	k=0
	while kill -0 $spid 2>/dev/null && [ $k -lt 30 ]; do sleep 1; k=$((k+1)); done
	if kill -0 $spid 2>/dev/null; then
		echo "run $i: server HUNG"; dump $spid s$i.late
		kill $spid; sleep 1; kill -9 $spid
	fi
	wait $spid; src=$?
	echo "run $i rdma=$rdma: client rc=$crc server rc=$src $((SECONDS-t0)) s: $(tail -n2 $R/$mode.c.$i | tr '\n' ' ')"
done
