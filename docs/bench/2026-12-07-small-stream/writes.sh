#!/bin/bash
# In the guest: the bytes per RDMA write of a tcpbench stream (64 B and
# 1 KiB sends), read with roceshim-stat from the live client, for each
# library given as an argument.
cd "${BUILDDIR:-$PWD}"
tb=$PWD/bench/tcpbench; a=$ROCESHIM_FABRIC_ADDR_A; b=$ROCESHIM_FABRIC_ADDR_B
port=7400
for size in 64 1024; do
for LIB in "$@"; do
  port=$((port+1))
  env LD_PRELOAD=$LIB ROCESHIM_RDMA=1 $tb server --addr $a --port $port --once > /tmp/srv 2>&1 &
  for i in $(seq 100); do grep -q listening /tmp/srv && break; sleep 0.05; done
  env LD_PRELOAD=$LIB ROCESHIM_RDMA=1 $tb client --addr $a --port $port --bind $b --mode stream --size $size --seconds 4 > /tmp/cl 2>&1 &
  cpid=$!
  sleep 2.5
  ./tools/roceshim-stat -j $cpid > /tmp/st.json
  wait
  echo "$size $LIB $(tail -1 /tmp/cl | grep -o 'MBps=[0-9.]*')"
  python3 - <<'PY'
import json
d=json.load(open('/tmp/st.json'))
def walk(x):
    if isinstance(x,dict):
        if 'tx_msgs' in x:
            print('  tx_bytes',x.get('rdma_tx_bytes'),'tx_msgs',x['tx_msgs'],'rx_msgs',x.get('rx_msgs'), 'B/msg', (x.get('rdma_tx_bytes') or 0)/max(1,x['tx_msgs']))
        for v in x.values(): walk(v)
    elif isinstance(x,list):
        for v in x: walk(v)
walk(d)
PY
done
done
