#!/bin/bash
# memcached -t 4, haproxy nbthread 2 in front of nginx, redis io-threads,
# under roceshim with default settings; bytes checked, stats shown.
set -u
A=$ROCESHIM_FABRIC_ADDR_A; B=$ROCESHIM_FABRIC_ADDR_B
RUN=$ROCESHIM_RUN; STAT=$ROCESHIM_STAT
HERE=$(dirname "$(readlink -f "$0")"); TOP=$HERE/../../..
R=${OUT:-$PWD}/hub-race; mkdir -p "$R"; T=$(mktemp -d); chmod 755 $T
ulimit -c unlimited
echo "$R/cores/core.%e.%p" > /proc/sys/kernel/core_pattern; mkdir -p $R/cores
stats() { $STAT 2>&1 | awk -v p="$1" '$0 ~ p' | head -3; $STAT --json 2>/dev/null | /usr/bin/python3 -c '
import json,sys,collections
c=collections.Counter()
for line in sys.stdin:
    line=line.strip()
    if not line: continue
    try: d=json.loads(line)
    except Exception: continue
    for p in (d if isinstance(d,list) else d.get("processes",[d])):
        for r in p.get("connections",[]):
            c[(p.get("command","?")[:40], r.get("transport"), r.get("fallback") or r.get("reason"))]+=1
for k,v in sorted(c.items(), key=str): print("   ",k,v)
'; }

echo "== memcached -t 4"
"$RUN" memcached -u root -l $A -p 11311 -t 4 -m 512 -I 2m &
mp=$!; sleep 3
timeout 300 "$RUN" /usr/bin/python3 $HERE/mc_client.py $A 11311 40 12 &
cp=$!; sleep 8; stats memcached; wait $cp; echo "client rc $?"
kill $mp; wait $mp; echo "memcached rc $?"

echo "== redis io-threads 2"
"$RUN" redis-server --bind $A --port 16390 --io-threads 2 --io-threads-do-reads yes --protected-mode no --save "" --appendonly no --daemonize no >$T/redis.log 2>&1 &
rp=$!; sleep 3
timeout 300 "$RUN" redis-benchmark -h $A -p 16390 -c 50 -n 100000 -P 8 -t set,get -q
head -c 300000 /dev/urandom > $T/v.bin; sum=$(sha256sum < $T/v.bin)
for i in $(seq 20); do timeout 60 "$RUN" redis-cli -h $A -p 16390 -x set big$i < $T/v.bin >/dev/null; done
n=0; for i in $(seq 20); do [ "$(timeout 60 "$RUN" redis-cli -h $A -p 16390 --raw get big$i | head -c 300000 | sha256sum)" = "$sum" ] && n=$((n+1)); done
echo "redis big values exact: $n/20"
stats redis
kill $rp; wait $rp; echo "redis rc $?"

echo "== haproxy nbthread 2 -> nginx"
mkdir -p $T/www; head -c 3000000 /dev/urandom > $T/www/big.bin; bsum=$(sha256sum < $T/www/big.bin)
cat > $T/nginx.conf <<EOT
daemon off; worker_processes 2; pid $T/nginx.pid; error_log $T/nginx.err;
events { worker_connections 1024; }
http { access_log off; server { listen $B:18480; root $T/www; } }
EOT
cat > $T/haproxy.cfg <<EOT
global
  nbthread 2
defaults
  mode http
  timeout connect 10s
  timeout client 60s
  timeout server 60s
frontend f
  bind $A:18481
  default_backend b
backend b
  server s1 $B:18480
EOT
"$RUN" nginx -c $T/nginx.conf -p $T &
np=$!
"$RUN" haproxy -f $T/haproxy.cfg -db >$T/haproxy.log 2>&1 &
hp=$!; sleep 4
n=0; for i in $(seq 6); do [ "$(timeout 60 "$RUN" curl -s http://$A:18481/big.bin | sha256sum)" = "$bsum" ] && n=$((n+1)); done
echo "haproxy curl 3MB exact: $n/6"
timeout 120 "$RUN" wrk -t 2 -c 100 -d 8 http://$A:18481/ 2>&1 | grep -E "Requests/sec|Non-2xx|Socket errors|requests in"
echo "wrk rc $?"
stats "haproxy|nginx"
kill $hp $np; wait $hp; echo "haproxy rc $?"; wait $np
ls -la $R/cores
