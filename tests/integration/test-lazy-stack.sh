#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The RDMA stack is loaded on first use.  libroceshim.so does not link
# libibverbs or librdmacm; a preloaded process that makes no eligible TCP
# socket maps neither and leaves no stats segment; the first eligible
# socket loads them, on the main thread, on another thread while one sits
# in epoll_wait, or in a fork child.  When the libraries cannot be loaded,
# connections stay on TCP with the reason no_rdma_libs and the program's
# bytes and errors do not change.  Runs on any host: loading the stack
# does not need an RDMA device.

set -u

PYTHON=${PYTHON:-/usr/bin/python3}
lib="$top_builddir/src/.libs/libroceshim.so"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-lazy.XXXXXX") || exit 1
sleeper=
cleanup() {
	[ -n "$sleeper" ] && kill -9 "$sleeper" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# The probe: ACTION, then one line "mapped=M shm=S" about this process.
# Actions: none, socket (a socket, no connect), connect, thread, fork,
# refused (a connect to a closed port).
cat >"$tmp/probe.py" <<'PY'
import errno, os, select, socket, sys, threading

def state(pid=None):
    pid = pid or os.getpid()
    maps = open(f"/proc/{pid}/maps").read()
    mapped = ("libibverbs" in maps) + ("librdmacm" in maps)
    shm = os.path.exists(f"/dev/shm/roceshim-{pid}")
    return f"mapped={mapped} shm={int(shm)}"

def echo_pair():
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen()
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    payload = os.urandom(200000)
    cli.sendall(payload)
    got = b""
    while len(got) < len(payload):
        got += srv.recv(65536)
    assert got == payload, "bytes differ"
    return [lst, cli, srv]

action = sys.argv[1]
keep = []
if action == "socket":
    keep.append(socket.socket())
elif action == "connect":
    keep += echo_pair()
elif action == "thread":
    ep = select.epoll()
    r, w = os.pipe()
    ep.register(r, select.EPOLLIN)
    def connect_then_wake():
        keep.extend(echo_pair())
        os.write(w, b"x")
    t = threading.Thread(target=connect_then_wake)
    t.start()
    assert ep.poll(30), "epoll_wait never woke"
    t.join()
elif action == "fork":
    pid = os.fork()
    if pid == 0:
        echo_pair()
        print("child", state(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
elif action == "refused":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    try:
        socket.create_connection(("127.0.0.1", port))
        print("refused: connected")
    except OSError as e:
        print("refused:", errno.errorcode[e.errno])
print(action, state(), flush=True)
if len(sys.argv) > 2:
    out = os.popen(f"{sys.argv[2]} --json {os.getpid()}").read()
    open(sys.argv[3], "w").write(out)
PY

probe() {
	env "$@" "$ROCESHIM_RUN" "$PYTHON" "$tmp/probe.py" "${probe_args[@]}"
}

check lib_has_no_link_time_rdma_dependency \
	bash -c "! readelf -d '$lib' | grep -Eq 'NEEDED.*(libibverbs|librdmacm)'"
check lib_calls_no_rdma_function_by_name \
	bash -c "! nm -D --undefined-only '$lib' | grep -Eq ' (ibv|rdma)_'"

# A program without sockets, seen from outside while it runs.
"$ROCESHIM_RUN" sleep 30 &
sleeper=$!
for _ in $(seq 50); do
	grep -q sleep "/proc/$sleeper/cmdline" 2>/dev/null && break
	sleep 0.1
done
check_eq socketless_program_maps_no_rdma_library 0 \
	"$(grep -Ec 'libibverbs|librdmacm' "/proc/$sleeper/maps")"
check socketless_program_has_no_stats_segment \
	test ! -e "/dev/shm/roceshim-$sleeper"
kill -9 "$sleeper"
wait "$sleeper" 2>/dev/null
sleeper=

probe_args=(none)
check_eq python_without_sockets_loads_nothing "none mapped=0 shm=0" \
	"$(probe)"
probe_args=(socket)
check_eq a_socket_without_connect_loads_nothing "socket mapped=0 shm=0" \
	"$(probe)"
probe_args=(connect)
check_eq first_connect_loads_the_stack "connect mapped=2 shm=1" "$(probe)"
probe_args=(thread)
check_eq stack_loads_on_a_thread_while_another_waits_in_epoll \
	"thread mapped=2 shm=1" "$(probe)"
probe_args=(fork)
check_eq stack_loads_in_a_fork_child \
	"child mapped=2 shm=1|fork mapped=0 shm=0" \
	"$(probe | paste -sd'|')"
probe_args=(connect)
check_eq rdma_path_off_never_loads_the_stack "connect mapped=0 shm=1" \
	"$(probe ROCESHIM_RDMA=0)"
check_eq excluded_addresses_never_load_the_stack "connect mapped=0 shm=1" \
	"$(probe ROCESHIM_EXCLUDE='*')"

# Libraries that cannot be loaded: missing, or present without the API.
probe_args=(connect "$ROCESHIM_STAT" "$tmp/stat.json")
for bad in "ROCESHIM_LIBIBVERBS=$tmp/none/libibverbs.so.1" \
	"ROCESHIM_LIBRDMACM=$tmp/none/librdmacm.so.1" \
	"ROCESHIM_LIBIBVERBS=libc.so.6"; do
	name=${bad%%=*}
	name=${name#ROCESHIM_}
	[ "${bad#*=}" = libc.so.6 ] && name="${name}_without_verbs"
	rm -f "$tmp/stat.json"
	out=$(probe "$bad" 2>"$tmp/err.$name")
	check_eq "unusable_${name,,}_keeps_bytes_exact" connect \
		"${out%% *}"
	check "unusable_${name,,}_gives_reason_no_rdma_libs" \
		"$PYTHON" - "$tmp/stat.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
conns = [c for c in s["connections"] if c["role"] != "listener"]
assert len(conns) == 2, conns
for c in conns:
    assert c["transport"] == "tcp" and c["fallback"] == "no_rdma_libs", c
assert s["global"]["fallbacks"]["no_rdma_libs"] == 2, s["global"]
PY
done
check missing_symbol_is_reported_once \
	test "$(grep -c 'has no ibv_' "$tmp/err.LIBIBVERBS_without_verbs")" -eq 1
check missing_library_is_not_a_warning \
	test ! -s "$tmp/err.LIBIBVERBS" -a ! -s "$tmp/err.LIBRDMACM"

probe_args=(refused)
check_eq refused_connect_is_econnrefused_without_libraries \
	"refused: ECONNREFUSED" \
	"$(probe ROCESHIM_LIBIBVERBS=/nonexistent 2>&1 | head -1)"
check_eq refused_connect_is_econnrefused_with_libraries \
	"refused: ECONNREFUSED" "$(probe | head -1)"

finish
