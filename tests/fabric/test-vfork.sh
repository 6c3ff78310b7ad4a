#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A vfork in a process with upgraded connections is a fork (its child could
# hand an upgraded socket to the program it execs): Python's subprocess,
# given an upgraded connection as the stdio of cat, echoes it byte for
# byte over TCP after the fork downgrade, and the parent's sockets work
# after the child is gone.  A subprocess that keeps none of the upgraded
# connections (FD_CLOEXEC) leaves them on RDMA, and they end there as
# they would have without it.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
probe="$top_srcdir/tests/integration/vfork_probe.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-vfork.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

command -v strace >/dev/null || {
	echo "SKIP: strace not installed (apt-get install strace)"
	exit 77
}
out=$(PROBE_ADDR=$ROCESHIM_FABRIC_ADDR_B ROCESHIM_LOG_LEVEL=info \
	"$ROCESHIM_RUN" strace -f -qq -e trace=vfork,fork,clone,clone3 \
	-o "$tmp/trace" "$PYTHON" "$probe" 2>"$tmp/err")
check_eq subprocess_on_an_upgraded_connection_echoes_exactly "echo ok" \
	"$(grep '^echo' <<<"$out")"
check_eq parent_sockets_survive_the_child "after ok" \
	"$(grep '^after' <<<"$out")"
check vfork_with_upgraded_connections_is_a_fork \
	grep -q 'clone(.*SIGCHLD' "$tmp/trace"
check no_real_vfork bash -c "! grep -q 'vfork()' '$tmp/trace'"
check the_shared_connection_moved_to_tcp_for_the_fork \
	grep -q 'moved to TCP (fork)' "$tmp/err"
cat >"$tmp/keep.py" <<'PY'
import json, os, socket, subprocess, sys, threading
lst = socket.socket()
lst.bind((os.environ["PROBE_ADDR"], 0))
lst.listen()
cli = socket.create_connection(lst.getsockname())
srv, _ = lst.accept()
subprocess.run(["true"], close_fds=False, check=True)
payload = os.urandom(1 << 20)
sender = threading.Thread(target=cli.sendall, args=(payload,))
sender.start()
got = b""
while len(got) < len(payload):
    got += srv.recv(1 << 16)
sender.join()
print("kept", "ok" if got == payload else "differs")
stat = json.loads(os.popen("%s --json %d" % (sys.argv[1], os.getpid())).read())
ends = [c for c in stat["connections"] if c["role"] != "listener"]
print("transports", " ".join(sorted(c["transport"] + "/" + c["downgrade"]
                                    for c in ends)))
PY
out=$(PROBE_ADDR=$ROCESHIM_FABRIC_ADDR_B "$ROCESHIM_RUN" "$PYTHON" \
	"$tmp/keep.py" "$ROCESHIM_STAT" 2>&1)
check_eq connections_the_subprocess_does_not_keep_are_intact "kept ok" \
	"$(grep '^kept' <<<"$out")"
check_eq connections_the_subprocess_does_not_keep_stay_on_rdma \
	"transports rdma/none rdma/none" "$(grep '^transports' <<<"$out")"

# A child made by clone(CLONE_FILES) without CLONE_VM has a copy of the
# memory but shares the descriptor table: its fork handlers must close
# none of the parent's descriptors (the CM channels), or the parent's next
# connection could not make its handshake.
cat >"$tmp/clone_files.py" <<'PY'
import ctypes, json, os, socket, sys
CLONE_FILES, SIGCHLD, SYS_clone = 0x400, 17, 56
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
lst = socket.socket()
lst.bind((os.environ["PROBE_ADDR"], 0))
lst.listen()


def pair():
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    payload = os.urandom(100000)
    cli.sendall(payload)
    got = b""
    while len(got) < len(payload):
        got += srv.recv(1 << 16)
    return cli, srv, got == payload


first = pair()
pid = libc.syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
second = pair()
print("bytes", "ok" if first[2] and second[2] else "differs")
stat = json.loads(os.popen("%s --json %d" % (sys.argv[1], os.getpid())).read())
ends = [c for c in stat["connections"] if c["role"] != "listener"]
print("after", " ".join(c["transport"] + "/" + c["downgrade"]
                        for c in ends[2:]))
PY
out=$(PROBE_ADDR=$ROCESHIM_FABRIC_ADDR_B timeout 60 "$ROCESHIM_RUN" \
	"$PYTHON" "$tmp/clone_files.py" "$ROCESHIM_STAT" 2>&1)
check_eq clone_files_child_bytes_exact "bytes ok" "$(grep '^bytes' <<<"$out")"
check_eq clone_files_child_leaves_the_parent_its_rdma \
	"after rdma/none rdma/none" "$(grep '^after' <<<"$out")"

# A server that ran a subprocess while a connection was open, and then
# ends (exit, _exit) or closes it: the subprocess exec'd and holds none
# of it, so the connection ends on RDMA as if no subprocess had run, and
# its client reads every byte, then EOF, as over TCP.
cat >"$tmp/after_subprocess.py" <<'PY'
import json, os, socket, subprocess, sys
addr, stat = os.environ["PROBE_ADDR"], os.environ["ROCESHIM_STAT"]
if sys.argv[1] == "client":
    sock = socket.create_connection((addr, int(sys.argv[3])))
    got = []
    try:
        while True:
            got.append(sock.recv(100))
            if not got[-1]:
                break
    except OSError as exc:
        got.append(os.strerror(exc.errno))
    own = json.loads(os.popen("%s --json %d" % (stat, os.getpid())).read())
    ends = [c for c in own["connections"] if c["role"] != "listener"]
    print(sys.argv[2], got, " ".join(c["transport"] + "/" + c["downgrade"]
                                     for c in ends), flush=True)
    sys.exit(0)
lst = socket.socket()
lst.bind((addr, 0))
lst.listen()
subprocess.Popen([sys.executable, __file__, "client", sys.argv[1],
                  str(lst.getsockname()[1])])
conn, _ = lst.accept()
conn.sendall(b"hello")
subprocess.run(["true"], check=True)
if sys.argv[1] == "_exit":
    os._exit(0)
if sys.argv[1] == "close":
    conn.close()
    subprocess.run(["sleep", "3"])
sys.exit(0)
PY
for how in exit _exit close; do
	# $(...) waits for the client too: it writes to the same pipe.
	out=$(PROBE_ADDR=$ROCESHIM_FABRIC_ADDR_B ROCESHIM_STAT=$ROCESHIM_STAT \
		timeout 60 "$ROCESHIM_RUN" "$PYTHON" "$tmp/after_subprocess.py" \
		"$how" 2>&1)
	check_eq "peer_reads_eof_after_${how}_of_a_server_that_ran_a_subprocess" \
		"$how [b'hello', b''] rdma/none" "$out"
done
finish
