# SPDX-License-Identifier: MIT
"""What the peer-suite runners share: running a unit of a suite without
and with roceshim, comparing the outcome of every test case, the list of
known differences, and the share of connections that went over RDMA.

A runner gives compare() its units (modules) and a function that runs
one unit in one mode and returns (exit status, {case id: verdict}), the
verdict being "pass", "fail" or "skip".  A case that passes without
roceshim and not with it is run again once, both ways, one after the
other (also when the first run ran both at once, --parallel); only a
difference that holds counts, and it fails the run unless the
known-differences file names it with its reason.
"""
import argparse
import concurrent.futures
import fnmatch
import glob
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"


def parser(doc, out):
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--addr", default="-")
    p.add_argument("--out", default=out)
    p.add_argument("--known", default=os.path.join(HERE, "known-differences"))
    p.add_argument("--min-rdma", type=float, default=0.0)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--parallel", action="store_true",
                   help="run each unit without and with roceshim at once "
                   "(a case that differs is rerun one way after the other)")
    return p


def finish_args(args):
    if not os.environ.get("ROCESHIM_RUN"):
        sys.exit("%s: set ROCESHIM_RUN to roceshim-run" %
                 os.path.basename(sys.argv[0]))
    # The tests' subprocesses run elsewhere: a relative log path would not
    # open there, and roceshim would log on their stderr, which some tests
    # read.
    args.out = os.path.abspath(args.out)
    for mode in ("plain", "preload"):
        os.makedirs(os.path.join(args.out, mode), exist_ok=True)
        for old in glob.glob(os.path.join(args.out, mode, "*")):
            os.unlink(old)
    return args


def load_known(path):
    """Patterns of case ids with their reasons; '#' starts a comment."""
    known = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            pattern, _, reason = line.partition(" ")
            if not reason.strip():
                sys.exit("%s: %r has no reason" % (path, pattern))
            known.append((pattern, reason.strip()))
    return known


def known_reason(known, case):
    for pattern, reason in known:
        if fnmatch.fnmatchcase(case, pattern):
            return reason
    return None


def launch(args, preload, logdir):
    """The command prefix and environment of a run in one mode."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    launcher = ["timeout", "-k", "10", str(args.timeout)]
    if preload:
        launcher.append(os.environ["ROCESHIM_RUN"])
        for item in args.env:
            name, _, value = item.partition("=")
            env[name] = value
        env["ROCESHIM_LOG_LEVEL"] = "debug"
        env["ROCESHIM_LOG_FILE"] = os.path.join(logdir, "roceshim.%p.log")
    return launcher, env


def run_both(args, run_unit, unit, tag, matches=(), parallel=False):
    """The unit's outcome in each mode: one after the other, or at once."""
    def run(mode):
        return run_unit(args, unit, os.path.join(args.out, mode), tag,
                        mode == "preload", matches)

    if not parallel:
        return {mode: run(mode) for mode in ("plain", "preload")}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = {mode: pool.submit(run, mode) for mode in ("plain", "preload")}
        return {mode: r.result() for mode, r in runs.items()}


def rdma_share(args):
    """Connections the preloaded runs decided, and how many on RDMA."""
    pattern = re.compile(r": (connect to|accepted from) \S+ on (rdma|tcp)")
    total = rdma = 0
    for path in glob.glob(os.path.join(args.out, "preload", "roceshim.*")):
        with open(path, errors="replace") as f:
            for line in f:
                m = pattern.search(line)
                if m:
                    total += 1
                    rdma += m.group(2) == "rdma"
    return rdma, total


def compare(args, units, run_unit, suite):
    """Runs and compares every unit; the exit status for the runner."""
    known = load_known(args.known)
    compared = differing = 0
    failures = []
    start = time.monotonic()
    for n, unit in enumerate(units, 1):
        t0 = time.monotonic()
        res = run_both(args, run_unit, unit, "", parallel=args.parallel)
        plain, pre = res["plain"][1], res["preload"][1]
        cases = sorted(set(plain) | set(pre))
        worse = [c for c in cases
                 if plain.get(c) == "pass" and pre.get(c) != "pass"]
        only_plain_failed = [c for c in cases
                             if pre.get(c) == "pass" and plain.get(c) != "pass"]
        if not cases:
            failures.append((unit, "no test case ran (exit %d/%d)" %
                             (res["plain"][0], res["preload"][0])))
        held = []
        if worse:
            again = run_both(args, run_unit, unit, ".rerun", worse)
            for c in worse:
                if (again["plain"][1].get(c) == "pass"
                        and again["preload"][1].get(c) != "pass"):
                    held.append(c)
                else:
                    print("  note: %s differed once, not on its rerun" % c)
        for c in only_plain_failed:
            print("  note: %s failed without roceshim only" % c)
        for c in held:
            reason = known_reason(known, c)
            if reason:
                print("  known: %s (%s)" % (c, reason))
            else:
                failures.append((c, "passes without roceshim, %s with it"
                                 % pre.get(c, "missing")))
        compared += len(cases)
        differing += len(held)
        print("[%d/%d %4.0f s] %s: %d cases, %d differ (%.0f s)" %
              (n, len(units), time.monotonic() - start, unit,
               len(cases), len(held), time.monotonic() - t0), flush=True)
    rdma, total = rdma_share(args)
    print("%s: %d cases compared, %d differ, %d of them unexplained; "
          "%d of %d connections on RDMA" %
          (suite, compared, differing, len(failures), rdma, total))
    for what, why in failures:
        print("FAIL %s: %s" % (what, why))
    if args.min_rdma and (not total or rdma < args.min_rdma * total):
        print("FAIL: fewer than %.0f%% of the connections were on RDMA" %
              (100 * args.min_rdma))
        return 1
    return 1 if failures else 0
