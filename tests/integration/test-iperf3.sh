#!/bin/bash
# SPDX-License-Identifier: MIT
#
# iperf3 over 127.0.0.1, a fixed amount (-n 64M):
#   1. plain server and client (baseline);
#   2. server and client under roceshim-run, full speed;
#   3. server and client under roceshim-run, paced (-b) so the transfer lasts
#      about ten seconds: while it runs, roceshim-stat --json on the server
#      and on the client must show the data connection open on TCP with bytes
#      moving; after it, the server's stats must account for at least the
#      bytes iperf3 reports as received.
# Each client's -J output is checked for success and for the byte count.
#
# Environment (set by the test harness): ROCESHIM_RUN, ROCESHIM_STAT,
# PYTHON, top_builddir.  Optional: IPERF3 (default iperf3).

# $ROCESHIM_RUN, $ROCESHIM_STAT and $extra are split into words on purpose;
# cleanup is called from the trap.
# shellcheck disable=SC2086,SC2317

set -u

PYTHON=${PYTHON:-/usr/bin/python3}
IPERF3=${IPERF3:-iperf3}
builddir=${top_builddir:-}
amount=64M
amount_bytes=$((64 << 20))
pace=50M		# bit/s: 64 MiB take ~11 s, time for both looks on a busy host
client_timeout=60

skip() { echo "SKIP: $*"; exit 77; }
hard() { echo "FAIL: $*"; exit 1; }

command -v "$IPERF3" >/dev/null 2>&1 || skip "$IPERF3 not found"
command -v "$PYTHON" >/dev/null 2>&1 || skip "$PYTHON not found"
if [ -z "${ROCESHIM_RUN:-}" ] && [ -n "$builddir" ]; then
	ROCESHIM_RUN=$builddir/tools/roceshim-run
fi
if [ -z "${ROCESHIM_STAT:-}" ] && [ -n "$builddir" ]; then
	ROCESHIM_STAT=$builddir/tools/roceshim-stat
fi
if [ -z "${ROCESHIM_LIB:-}" ] && [ -n "$builddir" ] &&
   [ -f "$builddir/src/.libs/libroceshim.so" ]; then
	export ROCESHIM_LIB=$builddir/src/.libs/libroceshim.so
fi
[ -n "${ROCESHIM_RUN:-}" ] || hard "ROCESHIM_RUN is not set"
[ -n "${ROCESHIM_STAT:-}" ] || hard "ROCESHIM_STAT is not set"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-iperf3.XXXXXX") || hard "mktemp failed"
pids=()
any_alive() {
	local p
	for p in "$@"; do
		kill -0 "$p" 2>/dev/null && return 0
	done
	return 1
}

cleanup() {
	local p live=()
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null && live+=("$p")
	done
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		any_alive "${live[@]}" || break
		sleep 0.2
	done
	for p in "${live[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

failures=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

free_port() {
	"$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# The pid of the iperf3 process started as $1 (itself after an exec, or a
# descendant when the wrapper forks).
iperf_pid() {
	local p=$1 c
	for _ in 1 2 3 4 5; do
		if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = iperf3 ]; then
			echo "$p"
			return 0
		fi
		c=$(pgrep -P "$p" | head -n 1)
		[ -n "$c" ] || return 1
		p=$c
	done
	return 1
}

wait_listening() {
	local port=$1
	for _ in $(seq 100); do
		if ss -Hltn "sport = :$port" 2>/dev/null | grep -q .; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# start_server NAME PORT [WRAPPER...]: sets server_pid (the iperf3 process).
start_server() {
	local name=$1 port=$2
	shift 2
	"$@" "$IPERF3" -s -B 127.0.0.1 -p "$port" >"$tmp/$name-server.out" 2>&1 &
	pids+=($!)
	if ! wait_listening "$port"; then
		echo "    server output:"; sed 's/^/    /' "$tmp/$name-server.out"
		return 1
	fi
	server_pid=$(iperf_pid "$!") || return 1
	pids+=("$server_pid")
}

# check_client JSONFILE: success, bytes sent >= the amount, received about it.
# Prints "<received bytes> <client data port> <Mbit/s>".
check_client() {
	"$PYTHON" - "$1" "$amount_bytes" <<'EOF'
import json, sys
path, want = sys.argv[1], int(sys.argv[2])
try:
    r = json.load(open(path))
except ValueError as e:
    sys.exit("client printed no JSON (%s)" % e)
if r.get("error"):
    sys.exit("iperf3 error: %s" % r["error"])
end = r["end"]
sent, recv = end["sum_sent"]["bytes"], end["sum_received"]["bytes"]
# iperf3's receiver may stop counting before the last bytes arrive (seen:
# 92% of them at full speed on loopback), so "received" can be short.
if sent < want or recv > sent or recv < want * 0.5:
    sys.exit("sent %d, received %d, expected sent >= %d, received >= half of it"
             % (sent, recv, want))
port = r["start"]["connected"][0]["local_port"]
print(recv, port, "%.0f" % (end["sum_received"]["bits_per_second"] / 1e6))
EOF
}

# run_client NAME PORT EXTRA-IPERF-ARGS -- [WRAPPER...]
run_client() {
	local name=$1 port=$2 extra=$3
	shift 4
	timeout -k 5 "$client_timeout" "$@" "$IPERF3" -c 127.0.0.1 -p "$port" \
		-n "$amount" $extra -J >"$tmp/$name-client.json" \
		2>"$tmp/$name-client.err"
}

stat_json() {
	env -u LD_PRELOAD $ROCESHIM_STAT --json "$1"
}

# check_stats FILE PHASE PORT SIDE [PEERPORT WANTBYTES]
#   live:  a connection row on the iperf3 port (server: local, client:
#          peer) with the biggest byte count is open, on tcp, moving bytes.
#   final: the server row whose peer is the client's data port has
#          rx >= WANTBYTES (if the row is still there), and the global
#          tcp_rx_bytes >= WANTBYTES.
check_stats() {
	"$PYTHON" - "$@" <<'EOF'
import json, sys
path, phase, port, side = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = json.load(open(path))

def port_of(a):
    return int(a.rpartition(":")[2])

rows = [r for r in s.get("connections", []) if r.get("role") != "listener"]
key = "tcp_rx_bytes" if side == "server" else "tcp_tx_bytes"
if phase == "live":
    mine = [r for r in rows if port_of(r["local" if side == "server"
                                            else "peer"]) == port]
    if not mine:
        sys.exit("no connection on port %d yet" % port)
    data = max(mine, key=lambda r: r.get(key, 0))
    if data.get(key, 0) < (1 << 20):
        sys.exit("data connection not moving yet (%s %d)"
                 % (key, data.get(key, 0)))
    if data.get("state") != "open" or data.get("transport") != "tcp":
        sys.exit("data connection row: state %r transport %r (want open, "
                 "tcp)" % (data.get("state"), data.get("transport")))
    print("fd %d %s -> %s %s %s=%d fallback=%s" % (
        data["fd"], data["local"], data["peer"], data["state"], key,
        data[key], data.get("fallback")))
else:
    peerport, want = int(sys.argv[5]), int(sys.argv[6])
    glob = s["global"]["tcp_rx_bytes"]
    if glob < want:
        sys.exit("global tcp_rx_bytes %d < %d reported by iperf3"
                 % (glob, want))
    data = [r for r in rows if port_of(r["peer"]) == peerport]
    msg = "global tcp_rx_bytes %d >= %d" % (glob, want)
    if data:
        got = data[0].get("tcp_rx_bytes", 0)
        if got < want:
            sys.exit("data connection row (fd %d, %s) has tcp_rx_bytes %d "
                     "< %d reported by iperf3"
                     % (data[0]["fd"], data[0]["state"], got, want))
        msg += "; row fd %d (%s) tcp_rx_bytes %d >= %d" % (
            data[0]["fd"], data[0]["state"], got, want)
    else:
        msg += "; data row no longer listed"
    print(msg)
EOF
}

# poll_stats PID PORT SIDE: until the live check passes or 10 s pass.
poll_stats() {
	local pid=$1 port=$2 side=$3 out
	for _ in $(seq 100); do
		if stat_json "$pid" >"$tmp/stat-$side.json" 2>"$tmp/stat.err" &&
		   out=$(check_stats "$tmp/stat-$side.json" live "$port" \
			 "$side" 2>&1); then
			echo "$out"
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	echo "${out:-$(cat "$tmp/stat.err")}"
	return 1
}

echo "# iperf3 $($IPERF3 --version | head -n 1)"
echo "# run $ROCESHIM_RUN, stat $ROCESHIM_STAT"
start=$SECONDS

# 1. plain
port=$(free_port)
if start_server plain "$port"; then
	if run_client plain "$port" "" -- && res=$(check_client "$tmp/plain-client.json" 2>&1); then
		set -- $res
		ok "plain: $1 bytes received, $3 Mbit/s"
	else
		fail "plain: client: ${res:-$(cat "$tmp/plain-client.err")}"
	fi
	kill "$server_pid" 2>/dev/null
else
	fail "plain: server did not start on port $port"
fi

# 2. preload, full speed
port=$(free_port)
if start_server preload "$port" $ROCESHIM_RUN; then
	res=
	if run_client preload "$port" "" -- $ROCESHIM_RUN &&
	   res=$(check_client "$tmp/preload-client.json" 2>&1); then
		set -- $res
		ok "preload: $1 bytes received, $3 Mbit/s"
		if stat_json "$server_pid" >"$tmp/final.json" 2>"$tmp/stat.err" &&
		   out=$(check_stats "$tmp/final.json" final "$port" server \
			 "$2" "$1" 2>&1); then
			ok "preload: server stats: $out"
		else
			fail "preload: server stats: ${out:-$(cat "$tmp/stat.err")}"
		fi
	else
		fail "preload: client: ${res:-$(cat "$tmp/preload-client.err")}"
	fi
	kill "$server_pid" 2>/dev/null
else
	fail "preload: server did not start on port $port under $ROCESHIM_RUN"
fi

# 3. preload, paced, stats read while the data connection is open
port=$(free_port)
if start_server paced "$port" $ROCESHIM_RUN; then
	run_client paced "$port" "-b $pace" -- $ROCESHIM_RUN &
	cpid=$!
	pids+=("$cpid")
	if out=$(poll_stats "$server_pid" "$port" server); then
		ok "paced: server stats while running: $out"
	else
		fail "paced: server stats while running: $out"
	fi
	if c=$(iperf_pid "$cpid") && out=$(poll_stats "$c" "$port" client); then
		ok "paced: client stats while running: $out"
	else
		fail "paced: client stats while running: ${out:-client gone}"
	fi
	res=
	if wait "$cpid" && res=$(check_client "$tmp/paced-client.json" 2>&1); then
		set -- $res
		ok "paced: $1 bytes received, $3 Mbit/s"
		if stat_json "$server_pid" >"$tmp/final.json" 2>"$tmp/stat.err" &&
		   out=$(check_stats "$tmp/final.json" final "$port" server \
			 "$2" "$1" 2>&1); then
			ok "paced: server stats after: $out"
		else
			fail "paced: server stats after: ${out:-$(cat "$tmp/stat.err")}"
		fi
	else
		fail "paced: client: ${res:-$(cat "$tmp/paced-client.err")}"
	fi
	kill "$server_pid" 2>/dev/null
else
	fail "paced: server did not start on port $port under $ROCESHIM_RUN"
fi

echo "# $((SECONDS - start)) s"
if [ "$failures" -ne 0 ]; then
	echo "FAIL: $failures check(s) failed"
	exit 1
fi
echo "PASS"
exit 0
