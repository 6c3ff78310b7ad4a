# SPDX-License-Identifier: MIT
"""What a Gloo job's full mesh costs each rank: run inside the fabric by
bench/fabric-scale, under kernel TCP or roceshim.

    gloo_scale.py launch --world W --groups G --label L [-- WRAPPER...]

Starts W rank processes on this host, ranks alternating between the
fabric's two RDMA addresses (--addrs), each (under WRAPPER, e.g.
roceshim-run) in one Gloo process group of all ranks plus G-1 more made
with new_group(),
so that every rank holds G connections to every other.  An all_reduce of
1024 ones on every group checks each result.  Then every group streams
(an all_reduce of 1 MiB, which fills the pairs' rings) and the ranks
count their descriptors again, at once and after 4 s idle.  Prints one
line:

    gloo label=L world=W groups=G sockets=S fds=F qps=Q pinned_kib=P
         rss_kib=R setup_s=T fds_streamed=F2 fds_idle=F3
         fd_kinds=KIND:N,... ok=1

per rank, the median over ranks of what it held beyond its state after
importing torch: sockets and descriptors (/proc/self/fd), the queue
pairs (rdma resource show), pinned and resident KiB (VmPin, VmRSS);
setup_s is the slowest rank's time from init_process_group() to the
last group's checked all_reduce; fd_kinds splits fds by what they are.
On failure: ok=0 and the error.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from scale import queue_pairs, status_kib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "integration"))
from gloo_job import free_port, iface_for_addr  # noqa: E402

MARK = "@@gloo_scale "
ADDRS = "10.99.0.1,10.99.0.2"


def descriptors():
    """{kind: count} of the descriptors the process holds: socket,
    eventfd, pipe, a /dev path, or another anonymous inode by name."""
    kinds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue
        if target.startswith("anon_inode:"):
            kind = target[len("anon_inode:"):].strip("[]")
        elif target.startswith("/dev/"):
            kind = target
        else:
            kind = target.split(":")[0] if ":" in target else "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def rank_main(args):
    import datetime
    import torch
    import torch.distributed as dist

    kinds0 = descriptors()
    rss0, pin0 = status_kib("VmRSS"), status_kib("VmPin")
    start = time.monotonic()
    dist.init_process_group("gloo", rank=args.rank, world_size=args.world,
                            timeout=datetime.timedelta(seconds=900))
    groups = [dist.group.WORLD]
    for _ in range(args.groups - 1):
        groups.append(dist.new_group(list(range(args.world))))
    for g in groups:
        t = torch.ones(1024, dtype=torch.int64)
        dist.all_reduce(t, group=g)
        if not bool((t == args.world).all()):
            raise RuntimeError("wrong all_reduce result")
    setup = time.monotonic() - start
    kinds = descriptors()
    added = {k: kinds.get(k, 0) - kinds0.get(k, 0)
             for k in set(kinds) | set(kinds0)}
    rec = dict(fds=sum(added.values()), sockets=added.get("socket", 0),
               kinds={k: v for k, v in added.items() if v},
               qps=queue_pairs(), pinned_kib=status_kib("VmPin") - pin0,
               rss_kib=status_kib("VmRSS") - rss0, setup_s=setup)
    for g in groups:
        t = torch.ones(262144, dtype=torch.int32)
        dist.all_reduce(t, group=g)
        if not bool((t == args.world).all()):
            raise RuntimeError("wrong all_reduce result")
    for g in groups:
        dist.barrier(group=g)
    rec["fds_streamed"] = sum(descriptors().values()) - sum(kinds0.values())
    time.sleep(4)
    rec["fds_idle"] = sum(descriptors().values()) - sum(kinds0.values())
    # Everyone measured before anyone tears a connection down.
    for g in groups:
        dist.barrier(group=g)
    print(MARK + json.dumps(rec), flush=True)
    dist.destroy_process_group()
    return 0


def launch_main(args):
    line = "gloo label=%s world=%d groups=%d" % (args.label, args.world,
                                                 args.groups)
    addrs = args.addrs.split(",")
    ifnames = [iface_for_addr(a) for a in addrs]
    if None in ifnames:
        print(line + " ok=0 error=no_interface_for_" +
              addrs[ifnames.index(None)], flush=True)
        return 1
    port = free_port(addrs[0])
    procs = []
    for r in range(args.world):
        env = dict(os.environ, MASTER_ADDR=addrs[0], MASTER_PORT=str(port),
                   GLOO_SOCKET_IFNAME=ifnames[r % len(ifnames)])
        cmd = args.wrapper + [sys.executable, os.path.abspath(__file__),
                              "rank", "--world", str(args.world),
                              "--rank", str(r), "--groups",
                              str(args.groups)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                      text=True))
    recs, failed = [], []
    deadline = time.monotonic() + args.timeout
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(
                timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            failed.append("rank_%d_timeout" % r)
            continue
        got = [ln[len(MARK):] for ln in out.splitlines()
               if ln.startswith(MARK)]
        if p.returncode or not got:
            failed.append("rank_%d_exit_%d" % (r, p.returncode))
            continue
        recs.append(json.loads(got[-1]))
    if failed:
        print(line + " ok=0 error=" + ",".join(failed[:3]), flush=True)
        return 1
    med = {k: statistics.median(rec[k] for rec in recs)
           for k in ("sockets", "fds", "qps", "pinned_kib", "rss_kib",
                     "fds_streamed", "fds_idle")}
    names = sorted({k for rec in recs for k in rec["kinds"]})
    kinds = ",".join("%s:%g" % (k.replace(" ", "_"), statistics.median(
        rec["kinds"].get(k, 0) for rec in recs)) for k in names)
    line += (" sockets=%g fds=%g qps=%g pinned_kib=%g rss_kib=%g"
             " setup_s=%.1f fds_streamed=%g fds_idle=%g fd_kinds=%s ok=1" %
             (med["sockets"], med["fds"], med["qps"], med["pinned_kib"],
              med["rss_kib"], max(rec["setup_s"] for rec in recs),
              med["fds_streamed"], med["fds_idle"], kinds))
    print(line, flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="mode", required=True)
    la = sub.add_parser("launch")
    la.add_argument("--world", type=int, required=True)
    la.add_argument("--groups", type=int, default=1)
    la.add_argument("--label", required=True)
    la.add_argument("--timeout", type=float, default=1800)
    la.add_argument("--addrs", default=ADDRS,
                    help="ADDR,... the ranks take in turn")
    la.add_argument("wrapper", nargs="*")
    ra = sub.add_parser("rank")
    ra.add_argument("--world", type=int, required=True)
    ra.add_argument("--rank", type=int, required=True)
    ra.add_argument("--groups", type=int, default=1)
    args = ap.parse_args()
    return launch_main(args) if args.mode == "launch" else rank_main(args)


if __name__ == "__main__":
    sys.exit(main())
