#!/bin/bash
# test-fabric.sh - prove the Soft-RoCE fabric works end to end.
#
# Four guest boots (45 s on an idle 2-core TCG host, ~100 s on a busy one):
#  1. selftest: perftest and rping across rxe0 -> rxe1, veth counters;
#  2. run: exit status, stdout/stderr come back, a file written in the
#     current directory lands on the host, fabric env vars are set;
#  3. run --user: the command runs with a non-zero uid;
#  4. SIGTERM to the script mid-boot leaves no qemu behind;
#  5. neither does SIGKILL, which no trap can see.
# Runs from the build tree (the cache is found as roceshim-fabric does);
# ends with "N passed, N failed" and exits non-zero if anything failed.

set -euo pipefail

FABRIC=$(dirname "$(readlink -f "$0")")/roceshim-fabric
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "PASS: $*"; }
nok() { fail=$((fail + 1)); echo "FAIL: $*"; }
qemu_of() { pgrep -f "roceshim-fabric-$1( |\$)" >/dev/null; }
check() { # description cmd...
	local what=$1
	shift
	if "$@"; then ok "$what"; else nok "$what"; fi
}

# Prepare here, before moving into the scratch dir, so that a cold cache
# lands where roceshim-fabric looks from here (not in the scratch dir) and
# is not billed to the first boot's time limit.
check "prepare" "$FABRIC" prepare

# Scratch dir inside the current directory: it becomes the guest's
# writable share, and the cache is still found above it.
SCRATCH=$(mktemp -d -p "$PWD" fabric-test.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
cd "$SCRATCH"

# 1. selftest, one boot.
t0=$SECONDS
rc=0
"$FABRIC" selftest >selftest.log 2>&1 || rc=$?
sed 's/^/  | /' selftest.log
check "selftest exits 0 ($((SECONDS - t0)) s)" test "$rc" -eq 0
check "selftest reports PASS" grep -q '^selftest: .*, PASS$' selftest.log

# 2. run: status, both streams, write-back, environment.
rc=0
# shellcheck disable=SC2016 # expanded by the guest shell
"$FABRIC" run -- sh -c 'echo "out $ROCESHIM_FABRIC $ROCESHIM_FABRIC_ADDR_A $ROCESHIM_FABRIC_NORDMA_B"
	echo err >&2; echo back >written-in-guest; exit 3' \
	>run.out 2>run.err || rc=$?
check "run -- sh -c 'exit 3' returns 3 (got $rc)" test "$rc" -eq 3
check "stdout comes back" grep -qx 'out 1 10.99.0.1 10.98.0.2' run.out
check "stderr comes back separately" grep -qx err run.err
check "stderr has no kernel console noise" test "$(wc -l <run.err)" -eq 1
check "file written in the guest's cwd is on the host" \
	grep -qx back written-in-guest

# 3. run --user.
rc=0
uid=$("$FABRIC" run --user -- id -u 2>run-user.err) || rc=$?
check "run --user -- id -u succeeds (rc $rc)" test "$rc" -eq 0
check "run --user -- id -u is not 0 (got '$uid')" \
	test -n "$uid" -a "$uid" != 0

# 4. SIGTERM mid-boot: the script must take qemu down with it.
"$FABRIC" run -- sleep 300 >/dev/null 2>kill.err &
pid=$!
for ((i = 0; i < 100; i++)); do
	qemu_of "$pid" && break
	sleep 0.1
done
check "qemu started for the kill test" qemu_of "$pid"
sleep 3
kill -TERM "$pid" || true
rc=0
wait "$pid" || rc=$?
check "script exits 143 on SIGTERM (got $rc)" test "$rc" -eq 143
for ((i = 0; i < 50; i++)); do
	qemu_of "$pid" || break
	sleep 0.1
done
check "no qemu left after SIGTERM" eval "! qemu_of $pid"

# 5. SIGKILL, which no trap sees: qemu must still go (parent-death signal).
"$FABRIC" run -- sleep 300 >/dev/null 2>&1 &
pid=$!
for ((i = 0; i < 100; i++)); do
	qemu_of "$pid" && break
	sleep 0.1
done
check "qemu started for the SIGKILL test" qemu_of "$pid"
kill -KILL "$pid" || true
wait "$pid" 2>/dev/null || true
for ((i = 0; i < 50; i++)); do
	qemu_of "$pid" || break
	sleep 0.1
done
check "no qemu left after SIGKILL of the script" eval "! qemu_of $pid"

echo "$pass passed, $fail failed"
((fail == 0))
