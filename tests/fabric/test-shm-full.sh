#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A full /dev/shm (leaked segments, a container's small one): a preloaded
# program's first connection finds no room for its stats segment, so
# stats are off, with one warning, and the program runs as it would
# without roceshim, with the RDMA path off and on.  Before, the segment
# was sized sparse, and the first store into one of its pages killed the
# program with SIGBUS.  Each way runs in a mount namespace of its own
# with a 64 KiB tmpfs on /dev/shm, filled.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-shm-full.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

cat >"$tmp/echo.py" <<'PY'
import socket, sys, threading
addr = sys.argv[1]
srv = socket.socket()
srv.bind((addr, 0))
srv.listen(1)
def serve():
    c, _ = srv.accept()
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
threading.Thread(target=serve).start()
data = bytes(range(256)) * 400
s = socket.create_connection(srv.getsockname())
s.sendall(data)
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    got += d
print("echo", "ok" if got == data else "differs")
PY

for way in tcp rdma; do
	rdma=0
	[ "$way" = rdma ] && rdma=1
	ROCESHIM_RDMA=$rdma unshare -m /bin/bash -c '
		mount -t tmpfs -o size=64k roceshim-full /dev/shm || exit 3
		dd if=/dev/zero of=/dev/shm/filler bs=4k 2>/dev/null
		ROCESHIM_LOG_FILE="$1" timeout 60 "$ROCESHIM_RUN" "$2" "$3" "$4"
	' full "$tmp/$way.log" "$PYTHON" "$tmp/echo.py" \
		"$ROCESHIM_FABRIC_ADDR_A" >"$tmp/$way.out" 2>&1
	echo "rc $?" >>"$tmp/$way.out"
	sed "s/^/    $way: /" "$tmp/$way.out" "$tmp/$way.log" 2>/dev/null
	check_eq "${way}_program_runs_with_dev_shm_full" "echo ok
rc 0" "$(cat "$tmp/$way.out")"
	check_eq "${way}_says_stats_are_off" 1 \
		"$(grep -c 'stats are off' "$tmp/$way.log" 2>/dev/null)"
done
finish
