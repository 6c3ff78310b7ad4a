#!/bin/bash
# SPDX-License-Identifier: MIT
#
# libc's own I/O on sockets (tests/fabric/stdio_check.c): a stream from
# fdopen() read with fgets() and written with fprintf(), dprintf(), and
# printf() on a socket dup'd onto stdout, in the process and in a fork
# child.  libc makes those system calls inside itself, out of any
# wrapper's sight, so each must reach the RDMA connection another way.
# Kernel TCP (ROCESHIM_RDMA=0) is the specification: every behaviour the
# same with RDMA on (default settings), and the program's sockets get
# the same descriptor numbers.  With RDMA on, the connections read and
# written through streams and dprintf() stay on RDMA; the one dup'd onto
# stdout moves to TCP (downgrade "stdio").  A line left in a stream at
# exit() reaches the peer.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
prog="$top_builddir/tests/fabric/stdio_check"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-stdio.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

pair_check_both "$prog"
check_eq same_descriptor_numbers_as_tcp "$(grep '^fd' "$tmp/tcp")" \
	"$(grep '^fd' "$tmp/rdma")"
# global: connections on RDMA, and downgrades by cause
stats() {
	"$PYTHON" -c 'import json, sys
g = json.load(open(sys.argv[1]))["global"]
print(g["connections_rdma"], ",".join("%s:%d" % (k, v)
      for k, v in sorted(g["downgrades"].items()) if v))' "$tmp/$1.json"
}
read -r on_rdma moves <<<"$(stats rdma 2>/dev/null)"
echo "    rdma: connection ends on RDMA ${on_rdma:-?}, moved ${moves:-?}"
# 4 connections, 2 ends each, all made on RDMA.  Only two moved: the one
# dup'd onto stdout here (stdio, and its other end: peer), and the one a
# fork child dup'd onto its stdout (fork: the child claimed it, and peer);
# those read and written through streams and dprintf() did not.
check_eq connections_made_on_rdma 8 "${on_rdma:-0}"
check_eq only_the_stdout_connections_move "fork:1,peer:2,stdio:1" \
	"${moves:-}"

# A process that exits with a line left in its stream: exit() flushes it
# to the peer (a server in another process).  Over RDMA the connection
# moves to TCP at exit for that flush.
receive() { # RDMA
	ROCESHIM_RDMA=$1 PYTHONPATH="$top_srcdir/tests/fabric" timeout 60 \
		"$ROCESHIM_RUN" "$PYTHON" -c 'import socket, sys
from own_stats import connections
l = socket.create_server((sys.argv[1], 0))
print(l.getsockname()[1], flush=True)
c, _ = l.accept()
data = b""
while True:
    b = c.recv(4096)
    if not b:
        break
    data += b
print(data.decode(errors="replace").strip(), flush=True)
print(" ".join(r["transport"] + ":" + r["downgrade"]
               for r in connections()) or "none", flush=True)' \
		"$ROCESHIM_FABRIC_ADDR_A"
}
for way in tcp rdma; do
	rdma=0
	[ "$way" = rdma ] && rdma=1
	coproc RECV { receive "$rdma" 2>&1; }
	read -r -t 30 port <&"${RECV[0]}"
	ROCESHIM_RDMA=$rdma timeout 60 "$ROCESHIM_RUN" "$prog" --send-at-exit \
		"$ROCESHIM_FABRIC_ADDR_A" "${port:-0}" >"$tmp/exit-$way" 2>&1
	echo "rc $?" >>"$tmp/exit-$way"
	read -r -t 30 got <&"${RECV[0]}"
	read -r -t 30 path <&"${RECV[0]}"
	wait "$RECV_PID" 2>/dev/null
	sed "s/^/    exit-$way: /" "$tmp/exit-$way"
	echo "    exit-$way: the peer got '${got:-}' on ${path:-?}"
	check_eq "${way}_exit_flushes_stream_to_peer" "flushed by exit 0" \
		"${got:-} $(awk '$1 == "rc" {print $2}' "$tmp/exit-$way")"
done
# Made on RDMA, and moved to TCP by the exiting peer for its stream.
check_eq exit_connection_was_on_rdma tcp:peer "${path:-}"

finish
