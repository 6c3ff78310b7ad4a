#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The steady-state counts of README.md, run inside the fabric:
#   fabric/roceshim-fabric run -- /bin/bash steady.sh
# with top_builddir and ROCESHIM_RUN exported (as tests/fabric/suite.sh
# has them).  Per mode: redis-benchmark SET with 300 clients, 20 s to
# connect, then perf stat --per-thread of server and client for 8 s and
# the commands the server processed meanwhile; then perf record of the
# server.  Output in $top_builddir/rep/prof.
set -u
A=$ROCESHIM_FABRIC_ADDR_A; RUN=$ROCESHIM_RUN
out=$top_builddir/rep/prof; mkdir -p $out
ev=syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_ioctl,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_futex,syscalls:sys_enter_clock_gettime,syscalls:sys_enter_gettimeofday,context-switches,task-clock
for mode in ${MODES:-1 0}; do
export ROCESHIM_RDMA=$mode
("$RUN" redis-server --port 18091 --bind $A --protected-mode no --save '' --maxclients 2000 >/dev/null 2>&1) & sleep 3
srv=$(pgrep -x redis-server | head -1)
timeout 300 "$RUN" redis-benchmark -h $A -p 18091 -c ${C:-300} -n 400000 -t set -q > $out/steady$mode.bench 2>&1 &
sleep 20
cli=$(pgrep -x redis-benchmark | head -1)
c0=$(redis-cli -h $A -p 18091 info stats | awk -F: '/total_commands_processed/ {print $2+0}')
perf stat --per-thread -p $srv,$cli -e $ev -o $out/steady$mode.stat -- sleep 8
c1=$(redis-cli -h $A -p 18091 info stats | awk -F: '/total_commands_processed/ {print $2+0}')
perf record -F 1999 -p $srv -o $out/steady$mode.data -- sleep 6 >/dev/null 2>&1
perf report -i $out/steady$mode.data --sort dso,sym --stdio 2>/dev/null | grep -E "^ +[0-9]" | head -60 > $out/steady$mode.sym
echo "mode $mode: commands in window $((c1 - c0))"
pkill -f "redis-benchmark -h"; wait $! 2>/dev/null
redis-cli -h $A -p 18091 shutdown nosave >/dev/null 2>&1; sleep 2
done
