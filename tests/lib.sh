# SPDX-License-Identifier: MIT
# Helpers shared by the test scripts (sourced, not run).

passes=0
failures=0

# check NAME CMD...: one verdict line; CMD's status decides.
check() {
	local name=$1
	shift
	if "$@"; then
		echo "ok $name"
		passes=$((passes + 1))
	else
		echo "FAIL $name"
		failures=$((failures + 1))
	fi
}

# check_eq NAME EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then
		echo "ok $1"
		passes=$((passes + 1))
	else
		echo "FAIL $1: expected '$2', got '$3'"
		failures=$((failures + 1))
	fi
}

# The closing line; the status says whether anything failed.
finish() {
	echo "$passes passed, $failures failed"
	[ "$failures" -eq 0 ]
}

# wait_for FILE REGEX [TENTHS]: until a line of FILE matches, at most
# TENTHS tenths of a second (default 20 s).  Servers start slowly under
# TCG: tests wait for readiness, never a fixed time.
wait_for() {
	local i

	for i in $(seq "${3:-200}"); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# peer_port FILE: waits as wait_for does for the "port N" line that
# tests/fabric/peer.py prints once it listens, then prints N.
peer_port() {
	wait_for "$1" '^port ' && awk '/^port / {print $2; exit}' "$1"
}

# serve_and_connect PROG NAME [RUNNER...]: "PROG serve ADDR" and then
# "PROG connect ADDR PORT" (the port the server prints), both under RUNNER
# (nothing: plain), ADDR the fabric's B address; the client's lines in
# $tmp/NAME, shown indented.  Waits for both.
serve_and_connect() {
	local prog=$1 name=$2 port

	shift 2
	"$@" timeout 60 "$PYTHON" "$prog" serve "$ROCESHIM_FABRIC_ADDR_B" \
		>"$tmp/$name.srv" 2>&1 &
	port=$(peer_port "$tmp/$name.srv")
	"$@" timeout 60 "$PYTHON" "$prog" connect "$ROCESHIM_FABRIC_ADDR_B" \
		"$port" >"$tmp/$name" 2>&1
	wait
	sed "s/^/    $name: /" "$tmp/$name"
}

# refused_echo NAME PORT [ECHO ARGS]: an echo through tests/fabric/peer.py
# to PORT on the B address, from the A address, by a client whose RDMA
# handshake must be refused at once.  Checks its exit, its bytes, its row
# (tcp, peer_rejected) and its connect() call: under 5 s, where a
# handshake left to time out takes 10 s (and a connection that hangs,
# 60); the whole client, with Python's start, may take longer on a busy
# host.  Its transcript is in $tmp/NAME.
refused_echo() {
	local name=$1 port=$2 start ms

	shift 2
	start=$(date +%s%N)
	ROCESHIM_CONNECT_TIMEOUT_MS=10000 timeout 60 "$ROCESHIM_RUN" \
		"$PYTHON" "$top_srcdir/tests/fabric/peer.py" echo \
		"$ROCESHIM_FABRIC_ADDR_B" "$port" \
		--bind "$ROCESHIM_FABRIC_ADDR_A" --report "$@" >"$tmp/$name" 2>&1
	echo "rc $?" >>"$tmp/$name"
	ms=$((($(date +%s%N) - start) / 1000000))
	sed "s/^/    $name: /" "$tmp/$name"
	echo "    $name took $ms ms"
	check_eq "${name}_exit" 0 "$(awk '$1 == "rc" {print $2}' "$tmp/$name")"
	check_eq "${name}_echo" ok \
		"$(awk '$1 == "echo" {print $2}' "$tmp/$name")"
	check_eq "${name}_on_tcp_refused" "conn tcp peer_rejected" \
		"$(grep -m1 '^conn ' "$tmp/$name")"
	check "${name}_refused_at_once" awk \
		'$1 == "connect_ms" {found = 1; if ($2 >= 5000) exit 1}
		 END {exit !found}' "$tmp/$name"
}

# delay_vethb DELAY: netem holds every packet that leaves vethB (the RoCE
# traffic of a client bound to the B address; kernel TCP between the two
# local addresses takes lo) for DELAY, "20ms" say.  Exits 77 (skip) where
# the guest has no netem.  The caller's trap removes it:
# tc qdisc del dev vethB root.
delay_vethb() {
	local err

	if ! err=$(modprobe sch_netem 2>&1); then
		echo "SKIP: no netem in this guest: $err"
		exit 77
	fi
	tc qdisc add dev vethB root netem delay "$1" || exit 1
}

# host_addr hostK: hostK's address on a cluster's wire.
host_addr() { eval echo "\$ROCESHIM_FABRIC_HOST${1#host}"; }

# wait_port HOST PORT: waits up to 2 minutes for a TCP listener on PORT
# of another cluster host.
wait_port() {
	local _
	for _ in $(seq 600); do
		rsf-exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
		sleep 0.2
	done
	return 1
}

# run_way WAY CMD...: CMD under roceshim over kernel TCP (WAY tcp:
# ROCESHIM_RDMA=0) or with RDMA on (rdma: default settings), at most
# 120 s; its transcript, with "rc N" last, goes to $tmp/WAY and is shown.
run_way() {
	local way=$1 rdma=0

	shift
	[ "$way" = rdma ] && rdma=1
	ROCESHIM_RDMA=$rdma timeout 120 "$ROCESHIM_RUN" "$@" >"$tmp/$way" 2>&1
	echo "rc $?" >>"$tmp/$way"
	sed "s/^/    $way: /" "$tmp/$way"
}

# connections_on_rdma JSON: the count of connection ends on RDMA in a
# roceshim-stat JSON report (empty if it cannot be read).
connections_on_rdma() {
	"${PYTHON:-/usr/bin/python3}" -c 'import json, sys
print(json.load(open(sys.argv[1]))["global"]["connections_rdma"])' \
		"$1" 2>/dev/null
}

# pair_check_both PROG: runs a check program of tests/fabric/pair_check.h
# on the A address both ways (run_way): each run must pass every
# behaviour and exit 0, and both must pass the same ones.  Each run's
# roceshim-stat JSON is $tmp/tcp.json and $tmp/rdma.json.
pair_check_both() {
	local way

	for way in tcp rdma; do
		run_way "$way" "$1" "$ROCESHIM_FABRIC_ADDR_A" "$tmp/$way.json"
		check_eq "${way}_every_behaviour_as_specified" "0 0" \
			"$(grep -c '^FAIL' "$tmp/$way") $(awk '$1 == "rc" {print $2}' "$tmp/$way")"
	done
	check_eq same_behaviours_as_tcp "$(grep '^ok' "$tmp/tcp")" \
		"$(grep '^ok' "$tmp/rdma")"
}
