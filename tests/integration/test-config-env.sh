#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ROCESHIM_* variables as a user meets them: every malformed value gives
# exactly one line on stderr naming the variable, the value and what is
# used instead, and the program still runs; the switches do what the
# README says.

set -u

PYTHON=${PYTHON:-/usr/bin/python3}
holder="$top_srcdir/tests/integration/holder.py"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-config.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=../lib.sh
. "$top_srcdir/tests/lib.sh"

# Runs `true` under the preload with one variable set; checks stderr.
malformed() {
	local var=$1 value=$2
	env "$var=$value" "$ROCESHIM_RUN" true 2>"$tmp/err"
	local rc=$?
	[ "$rc" -eq 0 ] &&
		[ "$(wc -l <"$tmp/err")" -eq 1 ] &&
		grep -qF "$var='$value'" "$tmp/err" &&
		grep -q "using" "$tmp/err" || { cat "$tmp/err"; false; }
}

check enable_not_boolean malformed ROCESHIM_ENABLE maybe
check stats_not_boolean malformed ROCESHIM_STATS 2
check log_level_unknown malformed ROCESHIM_LOG_LEVEL verbose
check stats_rows_not_number malformed ROCESHIM_STATS_ROWS 12k
check stats_rows_out_of_range malformed ROCESHIM_STATS_ROWS 1
check include_malformed malformed ROCESHIM_INCLUDE 10.0.0.0/40
check exclude_malformed malformed ROCESHIM_EXCLUDE '[::1'
check zerocopy_kb_out_of_range malformed ROCESHIM_ZEROCOPY_KB 2000000

# Runs holder.py under the preload with the given variables and prints
# the JSON stats of its connection (read while it holds it open).
holder_stats() {
	mkfifo "$tmp/in"
	env "$@" "$ROCESHIM_RUN" "$PYTHON" "$holder" <"$tmp/in" >"$tmp/out" &
	local runner=$!
	exec {fd}>"$tmp/in"
	wait_for "$tmp/out" ready 100
	local pid
	pid=$(awk '/ready/ {print $2}' "$tmp/out")
	"$ROCESHIM_STAT" --json "$pid" 2>&1
	exec {fd}>&-
	wait "$runner"
	rm -f "$tmp/in"
}

conn_reasons() {
	"$PYTHON" -c '
import json, sys
s = json.load(sys.stdin)
print(" ".join(sorted(c["fallback"] for c in s["connections"]
                      if c["role"] != "listener")))'
}

check exclude_rule_marks_connections_excluded test \
	"$(holder_stats ROCESHIM_EXCLUDE=127.0.0.0/8 | conn_reasons)" = \
	"excluded excluded"
check include_rule_elsewhere_excludes_loopback test \
	"$(holder_stats ROCESHIM_INCLUDE=10.0.0.0/8 | conn_reasons)" = \
	"excluded excluded"
check broken_rule_excludes_everything test \
	"$(holder_stats ROCESHIM_INCLUDE=bogus 2>/dev/null | conn_reasons)" = \
	"excluded excluded"
out=$(holder_stats ROCESHIM_ENABLE=0)
check disable_leaves_no_segment grep -q "No such file" <<<"$out"

holder_stats ROCESHIM_LOG_LEVEL=debug \
	"ROCESHIM_LOG_FILE=$tmp/log.%p" >/dev/null
check log_file_expands_pid sh -c "ls '$tmp'/log.[0-9]* >/dev/null"
check log_file_records_decisions sh -c \
	"grep -q 'connect to 127.0.0.1:.* on tcp (no_device)' '$tmp'/log.*"

# A non-blocking connect to a closed port: the decision, then its failure.
ROCESHIM_LOG_LEVEL=debug ROCESHIM_LOG_FILE="$tmp/refused.log" \
	"$ROCESHIM_RUN" "$PYTHON" -c '
import errno, select, socket
probe = socket.socket()
probe.bind(("127.0.0.1", 0))
port = probe.getsockname()[1]
probe.close()
s = socket.socket()
s.setblocking(False)
assert s.connect_ex(("127.0.0.1", port)) == errno.EINPROGRESS
select.select([], [s], [], 5)
assert s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNREFUSED
'
check refused_connect_logs_decision_then_failure sh -c \
	"grep -A1 'connect to 127.0.0.1:.* on tcp (no_device)' '$tmp/refused.log' |
	 grep -q 'connect failed (Connection refused)'"

"$ROCESHIM_RUN" --help >"$tmp/help"
check run_help_lists_options grep -q -- '--exclude' "$tmp/help"
"$ROCESHIM_RUN" --bogus true 2>"$tmp/err"
check run_rejects_unknown_option test $? -eq 127
ROCESHIM_LIB=/nonexistent "$ROCESHIM_RUN" true 2>"$tmp/err"
check run_names_a_missing_library grep -q "/nonexistent" "$tmp/err"
"$ROCESHIM_RUN" -e ROCESHIM_LOG_LEVEL=info sh -c 'echo "$LD_PRELOAD"' \
	>"$tmp/preload" 2>/dev/null
check run_preloads_the_library grep -q "libroceshim.so" "$tmp/preload"

finish
