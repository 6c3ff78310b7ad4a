# SPDX-License-Identifier: MIT
"""What connections cost one process: run inside the fabric by
bench/fabric-scale, under kernel TCP, roceshim or rsocket's preload.

    scale.py ADDR --ends N --label L

Opens N/2 connected pairs to its own listener on ADDR, a byte each way on
each as it is made, then sends one byte round trip on every pair in turn,
then lets them idle for IDLE_S seconds.  Prints one line:

    scale label=L ends=N fds=F pinned_kib=P rss_kib=R qps=Q
          setup_ms=S rtt_us=T idle_pinned_kib=IP idle_rss_kib=IR ok=1

fds, pinned_kib and rss_kib are per connection end, beyond what the
process held before its first connection (/proc/self/fd; VmPin and VmRSS
of /proc/self/status); qps is the queue pairs the process holds (rdma
resource show); setup_ms is per connection (pair), rtt_us per round trip;
idle_pinned_kib and idle_rss_kib are pinned_kib and rss_kib again once
every connection has idled IDLE_S seconds (roceshim shrinks a ring idle
for 5 s).  On failure: ok=0 and the error.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import time

IDLE_S = 8


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def queue_pairs():
    try:
        out = subprocess.run(["rdma", "resource", "show", "qp"],
                             capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return -1
    # The kernel names the thread that made a queue pair.
    tids = set(os.listdir("/proc/self/task"))
    return sum(pid in tids for pid in re.findall(r"\bpid (\d+)\b", out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("--ends", type=int, required=True)
    ap.add_argument("--label", required=True)
    args = ap.parse_args()
    npairs = max(1, args.ends // 2)
    fds0, rss0, pin0 = open_fds(), status_kib("VmRSS"), status_kib("VmPin")
    lst = socket.socket(socket.AF_INET)
    lst.bind((args.addr, 0))
    lst.listen(4096)
    pairs = []
    line = "scale label=%s ends=%d" % (args.label, 2 * npairs)
    try:
        start = time.monotonic()
        for _ in range(npairs):
            cli = socket.create_connection(lst.getsockname())
            srv, _ = lst.accept()
            pairs.append((cli, srv))
            cli.sendall(b"c")
            srv.sendall(b"s")
            if srv.recv(1) != b"c" or cli.recv(1) != b"s":
                raise RuntimeError("wrong byte")
        setup = time.monotonic() - start
        ends = 2 * npairs
        fds = (open_fds() - fds0 - 1) / ends  # less the listener
        rss = (status_kib("VmRSS") - rss0) / ends
        pin = (status_kib("VmPin") - pin0) / ends
        qps = queue_pairs()
        start = time.monotonic()
        for cli, srv in pairs:
            cli.sendall(b"x")
            srv.recv(1)
            srv.sendall(b"y")
            cli.recv(1)
        rtt = time.monotonic() - start
        time.sleep(IDLE_S)
        idle_rss = (status_kib("VmRSS") - rss0) / ends
        idle_pin = (status_kib("VmPin") - pin0) / ends
        line += (" fds=%.2f pinned_kib=%.1f rss_kib=%.1f qps=%d"
                 " setup_ms=%.2f rtt_us=%.1f idle_pinned_kib=%.1f"
                 " idle_rss_kib=%.1f ok=1" %
                 (fds, pin, rss, qps, 1000 * setup / npairs,
                  1e6 * rtt / npairs, idle_pin, idle_rss))
    except (OSError, RuntimeError) as err:
        line += " pairs=%d ok=0 error=%s" % (len(pairs),
                                             str(err).replace(" ", "_"))
    print(line, flush=True)
    for cli, srv in pairs:
        cli.close()
        srv.close()
    lst.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
