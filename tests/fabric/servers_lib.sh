# SPDX-License-Identifier: MIT
# What the tests that run real servers under roceshim share
# (test-servers.sh, test-servers-mixed.sh, test-servers-rpc.sh): sourced
# first, not run.  It makes their directory (tmp), names the fabric's
# addresses (A, B) and sources tests/lib.sh; the test sets shape (the
# shape under test) and kills the sampler (if set) when it ends.
set -u
PYTHON=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$(basename "$0" .sh).XXXXXX") || exit 1
chmod 755 "$tmp"
# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"
A=$ROCESHIM_FABRIC_ADDR_A
B=$ROCESHIM_FABRIC_ADDR_B
RUN=$ROCESHIM_RUN
sampler=

have() { # PROGRAM... : all installed, else a skip line
	local p

	for p in "$@"; do
		if ! command -v "$p" >/dev/null 2>&1 && [ ! -x "$p" ]; then
			echo "SKIP $shape: $p is not installed"
			return 1
		fi
	done
}

# The stats of every roceshim process, sampled every 0.2 s into FILE, so
# that short-lived processes (curl, forked children) are seen too.
sample_start() {
	shape_start=$SECONDS
	(
		while :; do
			"$ROCESHIM_STAT" --json 2>/dev/null
			echo
			sleep 0.2
		done
	) >"$1" &
	sampler=$!
}
sample_stop() {
	"$ROCESHIM_STAT" --json >>"$tmp/$shape.stats" 2>/dev/null
	echo >>"$tmp/$shape.stats"
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	sampler=
	echo "    $shape: $((SECONDS - shape_start)) s"
}

# conns SIDE PORT: from $tmp/$shape.stats, the last state of every
# connection row (per process) whose server end is PORT, seen from SIDE
# (server: local port is PORT; client: peer port is PORT), counted by
# "transport/fallback/downgrade", one "KEY COUNT" line each.
conns() {
	"$PYTHON" - "$tmp/$shape.stats" "$1" "$2" <<'EOF'
import collections, json, sys
path, side, port = sys.argv[1], sys.argv[2], ":" + sys.argv[3]
rows = {}
for line in open(path, errors="replace"):
    line = line.strip()
    if not line:
        continue
    try:
        procs = json.loads(line)
    except ValueError:
        continue
    for p in procs:
        for c in p.get("connections", []):
            if c["role"] == "listener":
                continue
            end = c["local"] if side == "server" else c["peer"]
            if not end.endswith(port):
                continue
            # Not the local address: a client's row on TCP shows it
            # only while open.
            key = (p["pid"], c["fd"], c["opened_unix_ms"], c["role"],
                   c["peer"])
            rows[key] = c
n = collections.Counter("%s/%s/%s" % (c["transport"], c["fallback"],
                                     c["downgrade"]) for c in rows.values())
for k, v in sorted(n.items()):
    print(k, v)
EOF
}

# count KEY SUMMARY: the count of KEY in a conns summary (0 if absent);
# KEY "any": of every key
count() { awk -v k="$1" 'k == "any" || $1 == k {n += $2} END {print n + 0}' <<<"$2"; }
# wait_seen SIDE PORT KEY N: waits, at most 60 s, until the sampler has
# seen N rows of KEY (count).  A program that holds its connection open until then
# cannot end before the sampler saw it; the checks decide either way.
wait_seen() {
	local i

	for i in $(seq 200); do
		[ "$(count "$3" "$(conns "$1" "$2")")" -ge "$4" ] && return
		sleep 0.3
	done
}
# wait_handed_over PORT N: for a server that hands each connection to a
# child (handed_over in test-servers.sh), waits until the sampler has seen
# the first client connection moved by the server, and N client rows in
# all.  Only the first one moves while its client runs; the later ones
# are refused at their handshake, so whatever state is seen is their last.
wait_handed_over() {
	wait_seen client "$1" tcp/none/peer 1
	wait_seen client "$1" any "$2"
}
# others KEY... SUMMARY-last: the keys of the summary not in the list
others() {
	local s=${!#}
	local keys=("${@:1:$#-1}")
	awk -v ks="${keys[*]}" 'BEGIN {n = split(ks, a, " "); for (i in a) ok[a[i]]=1}
		NF && !($1 in ok) {printf "%s%s=%s", sep, $1, $2; sep=" "}' <<<"$s"
}
# at_least NAME MIN ACTUAL
at_least() {
	if [ "${3:-0}" -ge "$2" ]; then
		echo "ok $1 ($3)"
		passes=$((passes + 1))
	else
		echo "FAIL $1: expected at least $2, got '$3'"
		failures=$((failures + 1))
	fi
}
# at_most NAME MAX ACTUAL
at_most() {
	if [ "${3:-0}" -le "$2" ]; then
		echo "ok $1 ($3)"
		passes=$((passes + 1))
	else
		echo "FAIL $1: expected at most $2, got '$3'"
		failures=$((failures + 1))
	fi
}

# report SIDE PORT: prints and returns the summary for SIDE
report() {
	local s

	s=$(conns "$1" "$2")
	sed "s/^/    $shape $1 conns: /" <<<"$s" >&2
	echo "$s"
}

sha() { sha256sum | cut -d' ' -f1; }

# curls NAME URL N: N downloads at once of the file whose digest is
# big_sha; how many were exact (-k: a test's certificate is its own)
curls() {
	local i pids=

	for i in $(seq "$3"); do
		timeout 180 "$RUN" curl -sSk -m 150 "$2" \
			2>>"$tmp/$1.curl.err" | sha >"$tmp/$1.curl.$i" &
		pids="$pids $!"
	done
	wait $pids
	cat "$tmp/$1".curl.* | grep -cx "$big_sha"
}

# stop PID: ends a server started in the background
stop() {
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# The EXIT trap of a test without servers of its own to stop: ends the
# sampler and every background job, and removes tmp.
servers_cleanup() {
	[ -n "$sampler" ] && kill "$sampler" 2>/dev/null
	kill $(jobs -p) 2>/dev/null
	sleep 1
	kill -9 $(jobs -p) 2>/dev/null
	rm -rf "$tmp"
}
