# SPDX-License-Identifier: MIT
"""Connections made by fork children, for test-fork.sh.

    fork_fresh.py pairs A B
        A process that has made no connection forks.  The child, then a
        grandchild that daemonises (fork, setsid, fork), then the parent
        each connect to a listener of their own on B from A, send 256 KiB
        each way and print

            LABEL ok|DIFFERENT CLIENT-ROW SERVER-ROW

        with each end's row in roceshim-stat (own_stats.row()).  Then the
        parent, which has connections of its own now, forks once more:
        that child's connection is printed as `used-parent-child ...`.

    fork_fresh.py gloo B
        A process that has made no connection starts two Gloo ranks with
        multiprocessing's fork; they all_reduce over B.  For each rank the
        parent prints `rank R ok|WRONG ROWS`, ROWS the rank's connections'
        rows, sorted.
"""
import hashlib
import os
import queue
import socket
import sys
import threading

import own_stats

SIZE = 256 * 1024


def pattern(seed):
    return hashlib.shake_256(seed).digest(SIZE)


def exchange(s, out):
    """Sends out while it reads as many bytes: neither end waits on the other."""
    got = bytearray()
    sender = threading.Thread(target=s.sendall, args=(out,))
    sender.start()
    while len(got) < len(out):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    sender.join()
    return bytes(got)


def pair(label, a, b):
    lst = socket.socket()
    lst.bind((b, 0))
    lst.listen(8)
    cli = socket.socket()
    cli.bind((a, 0))
    cli.connect(lst.getsockname())
    srv, _ = lst.accept()
    result = {}
    t = threading.Thread(target=lambda: result.update(
        srv=exchange(srv, pattern(b"server"))))
    t.start()
    got = exchange(cli, pattern(b"client"))
    t.join()
    same = got == pattern(b"server") and result["srv"] == pattern(b"client")
    print(label, "ok" if same else "DIFFERENT", own_stats.row(cli.fileno()),
          own_stats.row(srv.fileno()), flush=True)
    for s in (cli, srv, lst):
        s.close()


def in_child(fn, *args):
    pid = os.fork()
    if pid == 0:
        try:
            fn(*args)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def daemonised(fn, *args):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.setsid()
        if os.fork() == 0:
            try:
                fn(*args)
            finally:
                os.close(w)
                os._exit(0)
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    # Until the grandchild ends: it holds the pipe's write end.
    os.read(r, 1)
    os.close(r)


def pairs(a, b):
    in_child(pair, "child", a, b)
    daemonised(pair, "grandchild", a, b)
    pair("parent", a, b)
    in_child(pair, "used-parent-child", a, b)


def rank(r, b, port, results):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="tcp://%s:%d" % (b, port),
                            rank=r, world_size=2)
    t = torch.arange(1 << 18, dtype=torch.int64) * (r + 1)
    dist.all_reduce(t)
    right = torch.equal(t, torch.arange(1 << 18, dtype=torch.int64) * 3)
    rows = sorted(own_stats.row(c["fd"]) for c in own_stats.connections())
    dist.barrier()
    results.put("rank %d %s %s" % (r, "ok" if right else "WRONG",
                                   ",".join(rows)))
    dist.destroy_process_group()


def gloo(b):
    import multiprocessing
    import torch  # noqa: F401 (loaded before the fork, as a job would)

    probe = socket.socket()
    probe.bind((b, 0))
    port = probe.getsockname()[1]
    probe.close()
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    ranks = [ctx.Process(target=rank, args=(r, b, port, results))
             for r in range(2)]
    for p in ranks:
        p.start()
    # Printed here, one line each: the ranks' own prints would interleave.
    lines = []
    for _ in ranks:
        try:
            lines.append(results.get(timeout=300))
        except queue.Empty:
            break
    for line in sorted(lines):
        print(line, flush=True)
    for p in ranks:
        p.join(60)
        if p.exitcode != 0:
            print("rank exit", p.exitcode, flush=True)


def main():
    if sys.argv[1] == "pairs":
        pairs(sys.argv[2], sys.argv[3])
    else:
        gloo(sys.argv[2])


if __name__ == "__main__":
    main()
