#!/bin/bash
# SPDX-License-Identifier: MIT
#
# roceshim-stat against a live process under the preload: the list, the
# table, JSON, Prometheus, watch mode; then against a process killed with
# SIGKILL (a stale segment to clean up) and against forged segments (other
# layout version, corrupt header, truncated file) that must be refused
# with a clear message and no crash.

set -u

PYTHON=${PYTHON:-/usr/bin/python3}
holder="$top_srcdir/tests/integration/holder.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-stat.XXXXXX") || exit 1
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -f /dev/shm/roceshim-"${sleeper:-none}"
	rm -rf "$tmp"
}
trap cleanup EXIT

# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# Starts holder.py under the preload with options $2...; sets holder_pid
# once it is ready.
start_holder() {
	mkfifo "$tmp/in.$1"
	"$ROCESHIM_RUN" "$PYTHON" "$holder" "${@:2}" <"$tmp/in.$1" \
		>"$tmp/out.$1" &
	pids+=($!)
	exec {hold_fd}>"$tmp/in.$1"
	wait_for "$tmp/out.$1" ready 100
	holder_pid=$(awk '/ready/ {print $2}' "$tmp/out.$1")
	[ -n "$holder_pid" ] || { echo "FAIL holder did not start"; exit 1; }
}

start_holder live
live=$holder_pid

"$ROCESHIM_STAT" >"$tmp/list"
check list_shows_live_process grep -Eq "^$live +alive" "$tmp/list"

"$ROCESHIM_STAT" "$live" >"$tmp/table"
check table_shows_listener_and_both_ends \
	test "$(grep -Ec '^[0-9]+ +(listener|active|passive) ' "$tmp/table")" -eq 3
check table_names_the_fallback_reason grep -q no_device "$tmp/table"

"$ROCESHIM_STAT" --json "$live" >"$tmp/json"
check json_rows_carry_the_bytes "$PYTHON" - "$tmp/json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
conns = [c for c in s["connections"] if c["role"] != "listener"]
assert len(conns) == 2, conns
for c in conns:
    assert c["transport"] == "tcp" and c["fallback"] == "no_device", c
    assert c["tcp_tx_bytes"] == 100000 and c["tcp_rx_bytes"] == 100000, c
by_role = {c["role"]: c for c in s["connections"]}
lst, act, pas = by_role["listener"], by_role["active"], by_role["passive"]
assert pas["local"] == lst["local"] == act["peer"], (lst, act, pas)
assert pas["peer"] == act["local"], (act, pas)
g = s["global"]
assert g["connections_opened"] == 2 and g["listeners"] == 1, g
assert g["tcp_tx_bytes"] >= 200000 and g["fallbacks"]["no_device"] == 2, g
PY

# A refused non-blocking connect leaves a failed row, but makes no
# connection and no fallback.
start_holder refused --refused
"$ROCESHIM_STAT" --json "$holder_pid" >"$tmp/refused.json"
check refused_connect_is_a_failed_row "$PYTHON" - "$tmp/refused.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
states = sorted(c["state"] for c in s["connections"] if c["role"] == "active")
assert states == ["failed", "open"], s["connections"]
PY
check refused_connect_counts_no_connection "$PYTHON" - "$tmp/refused.json" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["global"]
assert g["connections_opened"] == 2 and g["connections_tcp"] == 2, g
assert sum(g["fallbacks"].values()) == 2, g
PY
"$ROCESHIM_STAT" >"$tmp/refused.list"
check list_counts_only_open_connections \
	grep -Eq "^$holder_pid +alive +0 +2 " "$tmp/refused.list"
{ kill -9 "$holder_pid" && wait "$holder_pid"; } 2>/dev/null

# The passive row names its peer however the program accepted: without an
# address buffer, or with one too short for the address.
for buffer in none short; do
	start_holder "accept_$buffer" --accept-buffer "$buffer"
	"$ROCESHIM_STAT" --json "$holder_pid" >"$tmp/accept_$buffer.json"
	check "passive_row_names_its_peer_accepted_with_${buffer}_buffer" \
		"$PYTHON" - "$tmp/accept_$buffer.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
by_role = {c["role"]: c for c in s["connections"]}
act, pas = by_role["active"], by_role["passive"]
assert pas["peer"] == act["local"] and pas["local"] == act["peer"], (act, pas)
PY
	{ kill -9 "$holder_pid" && wait "$holder_pid"; } 2>/dev/null
done

# The library leaves a TCP connection's local address unset where it
# opened the connection itself; the tool gives it from the kernel's table.
start_holder ipv6 --ipv6
"$ROCESHIM_STAT" --json "$holder_pid" >"$tmp/ipv6.json"
check active_row_names_its_local_address_over_ipv6 \
	"$PYTHON" - "$tmp/ipv6.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
by_role = {c["role"]: c for c in s["connections"]}
act, pas = by_role["active"], by_role["passive"]
assert act["local"].startswith("[::1]:"), act
assert pas["peer"] == act["local"] and pas["local"] == act["peer"], (act, pas)
PY
{ kill -9 "$holder_pid" && wait "$holder_pid"; } 2>/dev/null

# sendto(MSG_FASTOPEN) connects a socket without connect(): it has its
# row, on TCP, with every byte the call and those after it sent.
start_holder fastopen --fastopen
"$ROCESHIM_STAT" --json "$holder_pid" >"$tmp/fastopen.json"
check fastopen_connection_has_an_active_row "$PYTHON" - "$tmp/fastopen.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
act = [c for c in s["connections"] if c["role"] == "active"]
assert len(act) == 1, s["connections"]
assert act[0]["transport"] == "tcp" and act[0]["state"] == "open", act
assert act[0]["tcp_tx_bytes"] == 100000, act
assert act[0]["tcp_rx_bytes"] == 100000, act
PY
{ kill -9 "$holder_pid" && wait "$holder_pid"; } 2>/dev/null

# Bytes move while the tool reads: the rows it shows never add up to more
# than the totals it shows.
start_holder busy --traffic
for i in $(seq 200); do
	"$ROCESHIM_STAT" --json "$holder_pid" >"$tmp/busy.$i.json"
done
check rows_never_exceed_totals_while_bytes_move "$PYTHON" - "$tmp"/busy.*.json <<'PY'
import json, sys
moved = set()
for path in sys.argv[1:]:
    s = json.load(open(path))
    for key in ("tcp_tx_bytes", "tcp_rx_bytes", "tx_msgs", "rx_msgs"):
        rows = sum(c.get(key, 0) for c in s["connections"])
        assert rows <= s["global"][key], (path, key, rows, s["global"])
    moved.add(s["global"]["tcp_tx_bytes"])
# At least a few distinct totals: the holder ran between the reads (a
# loaded host may run it less often than the tool).
assert len(moved) > 10, "traffic did not move: %d distinct totals" % len(moved)
PY
{ kill -9 "$holder_pid" && wait "$holder_pid"; } 2>/dev/null

"$ROCESHIM_STAT" --json >"$tmp/json-all"
check json_without_pid_is_a_list "$PYTHON" -c '
import json, sys
procs = json.load(open(sys.argv[1]))
assert any(p["pid"] == int(sys.argv[2]) for p in procs)' "$tmp/json-all" "$live"

"$ROCESHIM_STAT" --prometheus "$live" >"$tmp/prom"
check prometheus_lines_are_well_formed "$PYTHON" - "$tmp/prom" "$live" <<'PY'
import re, sys
sample = re.compile(r'^roceshim_[a-z_]+\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\} \d+$')
lines = open(sys.argv[1]).read().splitlines()
for line in lines:
    assert line.startswith("# HELP ") or line.startswith("# TYPE ") \
        or sample.match(line), line
want = 'roceshim_bytes_total{pid="%s"' % sys.argv[2]
assert any(l.startswith(want) and l.endswith(" 200000") for l in lines)
PY

"$ROCESHIM_STAT" --watch=0.2 --count=3 "$live" >"$tmp/watch"
check watch_repeats_count_times test "$(grep -c '^pid ' "$tmp/watch")" -eq 3

"$ROCESHIM_STAT" 999999999 >/dev/null 2>"$tmp/err"
check missing_pid_is_an_error test $? -eq 1 -a -s "$tmp/err"

# A process killed with SIGKILL leaves its segment behind.
kill -9 "$live"
wait "$live" 2>/dev/null
"$ROCESHIM_STAT" >"$tmp/list"
check killed_process_is_listed_dead grep -Eq "^$live +dead" "$tmp/list"
"$ROCESHIM_STAT" --cleanup >"$tmp/cleanup"
check cleanup_removes_the_dead_segment test ! -e "/dev/shm/roceshim-$live"
check cleanup_reports_what_it_removed grep -q "pid $live is gone" "$tmp/cleanup"

# _exit() runs no exit handler: roceshim's wrapper of it removes the name.
"$ROCESHIM_RUN" "$PYTHON" -c 'import os, socket
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen()
print(os.getpid(), flush=True)
os._exit(0)' >"$tmp/quick"
quick=$(cat "$tmp/quick")
check quick_exit_removes_its_segment \
	test -n "$quick" -a ! -e "/dev/shm/roceshim-${quick:-none}"

# Forged segments, named after a live process so cleanup would keep them.
sleep 60 &
sleeper=$!
pids+=($sleeper)
forge() { "$PYTHON" - "/dev/shm/roceshim-$sleeper" "$@" <<'PY'
import struct, sys
path, version, rows, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
head = struct.pack("<IIIIIi", 0x4d485352, version, 768, 192, rows, 0)
open(path, "wb").write((head + bytes(size))[:size])
PY
}
forge 99 0 4096
"$ROCESHIM_STAT" "$sleeper" >/dev/null 2>"$tmp/err"
rc=$?
check other_layout_version_is_refused test "$rc" -eq 1
check refusal_names_both_versions grep -q "layout version 99, this tool reads version 5" "$tmp/err"

# A segment of the previous layout (before the io_uring reason and cause).
forge 4 0 4096
"$ROCESHIM_STAT" "$sleeper" >/dev/null 2>"$tmp/err"
rc=$?
check previous_layout_version_is_refused test "$rc" -eq 1
check refusal_names_the_previous_version grep -q "layout version 4, this tool reads version 5" "$tmp/err"

forge 5 1000000 4096
"$ROCESHIM_STAT" "$sleeper" >/dev/null 2>"$tmp/err"
check oversized_row_count_is_refused test $? -eq 1
check refusal_says_corrupt grep -q "corrupt header" "$tmp/err"

forge 3 0 10
"$ROCESHIM_STAT" "$sleeper" >/dev/null 2>"$tmp/err"
check truncated_segment_is_refused test $? -eq 1
check refusal_says_size grep -q "unexpected size" "$tmp/err"
"$ROCESHIM_STAT" >/dev/null 2>&1
check list_survives_foreign_segments test $? -eq 0

# ROCESHIM_STATS=0: connections, but no segment.
ROCESHIM_STATS=0 start_holder nostats
check stats_off_publishes_nothing test ! -e "/dev/shm/roceshim-$holder_pid"

# --check on this host (the fabric's cluster suite checks it where RDMA
# works): its verdict agrees with the kernel's device list.
"$ROCESHIM_STAT" --check >"$tmp/check" 2>&1
rc=$?
if ls /sys/class/infiniband_verbs 2>/dev/null | grep -q '^uverbs'; then
	check check_exit_is_a_verdict test "$rc" -le 1
else
	check check_without_device_exits_1 test "$rc" -eq 1
	check check_names_no_device grep -q "(no_device)" "$tmp/check"
fi
check check_ends_with_verdict grep -q "^verdict: RDMA can" "$tmp/check"
ROCESHIM_RDMA=0 "$ROCESHIM_STAT" --check >"$tmp/check" 2>&1
check check_with_rdma_off_exits_1 test $? -eq 1
check check_names_rdma_off grep -q "ROCESHIM_RDMA=0" "$tmp/check"
ROCESHIM_RING_KB=33 "$ROCESHIM_STAT" --check >"$tmp/check" 2>&1
check check_reports_bad_variable grep -q "ROCESHIM_RING_KB='33'" "$tmp/check"
"$ROCESHIM_STAT" --check a b >/dev/null 2>&1
check check_with_two_peers_is_usage_error test $? -eq 2
for bad in '[::1' 'host:0' 'host:99999' 'host:' ':80' '[::1]x'; do
	"$ROCESHIM_STAT" --check "$bad" >/dev/null 2>"$tmp/check"
	check "malformed_peer_${bad}_is_usage_error" test $? -eq 2
done

finish
