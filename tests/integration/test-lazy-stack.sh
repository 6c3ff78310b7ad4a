#!/bin/bash
# SPDX-License-Identifier: MIT
#
# A preloaded process pays for the RDMA stack only when it can use it.
# libroceshim.so does not link libibverbs or librdmacm; a preloaded
# process that makes no TCP connection maps neither and leaves no stats
# segment; on a host without a verbs device, even its connections load
# nothing (they stay on TCP: no_device), and their bytes and errors are
# those of TCP.  Loading on a host with a device is tested in the fabric
# (tests/fabric/test-lazy-stack.sh).

set -u

PYTHON=${PYTHON:-/usr/bin/python3}
lib="$top_builddir/src/.libs/libroceshim.so"
probe="$top_srcdir/tests/integration/lazy_probe.py"
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

probe() {
	"$ROCESHIM_RUN" "$PYTHON" "$probe" "$@"
}

check lib_has_no_link_time_rdma_dependency \
	bash -c "! readelf -d '$lib' | grep -Eq 'NEEDED.*(libibverbs|librdmacm)'"
check lib_calls_no_rdma_function_by_name \
	bash -c "! nm -D --undefined-only '$lib' | grep -Eq ' (ibv|rdma)_'"

# libc's functions are looked up (dlsym) at the first wrapped call, not at
# start; the loader's trace names each lookup.  close_range is one that
# neither libroceshim.so, these programs nor ASan's runtime imports.
libc_lookups() {
	LD_DEBUG=symbols "$ROCESHIM_RUN" "$@" 2>&1 >/dev/null |
		grep -c 'symbol=close_range;'
}
check_eq socketless_program_looks_up_no_libc_function 0 \
	"$(libc_lookups /bin/true)"
check socket_call_looks_up_libc_functions \
	test "$(libc_lookups "$PYTHON" -c 'import socket; socket.socket()')" -gt 0

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

check_eq python_without_sockets_loads_nothing "none mapped=0 shm=0" \
	"$(probe none)"
check_eq a_socket_without_connect_loads_nothing "socket mapped=0 shm=0" \
	"$(probe socket)"

if compgen -G "/sys/class/infiniband_verbs/uverbs*" >/dev/null; then
	echo "# this host has a verbs device: the device-less checks are skipped"
else
	check_eq connection_without_device_loads_nothing \
		"connect mapped=0 shm=1" "$(probe connect "$ROCESHIM_STAT" \
		"$tmp/stat.json")"
	check connection_without_device_is_on_tcp_no_device \
		"$PYTHON" - "$tmp/stat.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
conns = [c for c in s["connections"] if c["role"] != "listener"]
assert len(conns) == 2, conns
for c in conns:
    assert c["transport"] == "tcp" and c["fallback"] == "no_device", c
PY
	check_eq fork_child_connection_without_device_loads_nothing \
		"child mapped=0 shm=1|fork mapped=0 shm=0" \
		"$(probe fork | paste -sd'|')"
fi
check_eq refused_connect_is_econnrefused "refused: ECONNREFUSED" \
	"$(probe refused | sed -n 1p)"

finish
