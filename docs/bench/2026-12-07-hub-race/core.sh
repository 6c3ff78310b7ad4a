#!/bin/bash
# usage: core.sh N RDMA: loop.sh's zmq shape N times, core dumps kept in
# ${OUT:-$PWD}/hub-race/cores (for gdb on the host, which has the same files)
n=$1; rdma=$2
HERE=$(dirname "$(readlink -f "$0")")
R=${OUT:-$PWD}/hub-race; mkdir -p "$R/cores"
echo "$R/cores/core.%p" >/proc/sys/kernel/core_pattern
ulimit -c unlimited
bash "$HERE/loop.sh" zmq "$n" "$rdma"
