# SPDX-License-Identifier: MIT
"""A blocking send of more than an RDMA ring holds, to a peer that reads
nothing yet: kernel TCP's buffers take it, so the call returns and the
program goes on to read.  Each case prints "CASE RESULT ms N rows A B",
where RESULT is "ok" when every byte arrived in order, N the case's time
and A, B the two ends' stats rows at the end.

    send_stall.py ADDR --bind ADDR --size N CASE
      one-thread  one thread sends N bytes on one end, then reads them
                  on the other
      both-send   two processes each send N bytes, then read the other's
      slow-reader one thread sends N bytes while another reads 32 KiB
                  every 100 ms
      stopped     the reader's process is stopped for 3 s while the
                  writer waits, then reads
    The other end's row is "-" where it is another process's.
"""
import argparse
import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

from own_stats import row


def pair(args):
    """A connection from args.bind to args.addr: (client, server) ends."""
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(1)
    client = socket.create_connection(lsn.getsockname(),
                                      source_address=(args.bind, 0))
    server, _ = lsn.accept()
    lsn.close()
    return client, server


def read_exactly(sock, n, pause=0.0, piece=65536):
    got = hashlib.sha256()
    left = n
    while left:
        more = sock.recv(min(piece, left))
        if not more:
            break
        got.update(more)
        left -= len(more)
        if pause:
            time.sleep(pause)
    return got.hexdigest(), n - left


def one_thread(args, data):
    client, server = pair(args)
    client.sendall(data)
    digest, _ = read_exactly(server, len(data))
    return digest == hashlib.sha256(data).hexdigest(), client, server


def slow_reader(args, data):
    client, server = pair(args)
    result = {}
    reader = threading.Thread(target=lambda: result.update(
        digest=read_exactly(server, len(data), 0.1, 32768)[0]))
    reader.start()
    client.sendall(data)
    reader.join()
    return result["digest"] == hashlib.sha256(data).hexdigest(), client, \
        server


def peer(args, role):
    """Starts this script as the other end's process, which connects to a
    new listener, and accepts its connection: (process, socket)."""
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(1)
    proc = subprocess.Popen(
        [sys.executable, __file__, args.addr, "--bind", args.bind,
         "--size", str(args.size), "--seed", args.seed.hex(),
         "--peer", str(lsn.getsockname()[1]), role])
    sock, _ = lsn.accept()
    lsn.close()
    return proc, sock


def both_send(args, data):
    proc, sock = peer(args, "both-send")
    sock.sendall(data)
    ok = read_exactly(sock, len(data))[0] == hashlib.sha256(data).hexdigest()
    return proc.wait(timeout=60) == 0 and ok, sock, "-"


def stopped(args, data):
    proc, sock = peer(args, "stopped")
    proc.send_signal(signal.SIGSTOP)
    threading.Timer(3.0, proc.send_signal, (signal.SIGCONT,)).start()
    sock.sendall(data)
    return proc.wait(timeout=60) == 0, sock, "-"


def run_peer(args, data):
    """The other end: exit status 0 when it read every byte in order."""
    sock = socket.create_connection((args.addr, args.peer),
                                    source_address=(args.bind, 0))
    if args.case == "both-send":
        sock.sendall(data)
    digest, _ = read_exactly(sock, len(data))
    return 0 if digest == hashlib.sha256(data).hexdigest() else 1


CASES = {"one-thread": one_thread, "both-send": both_send,
         "slow-reader": slow_reader, "stopped": stopped}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--bind", required=True)
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--seed", type=bytes.fromhex, default=os.urandom(8))
    p.add_argument("--peer", type=int, help=argparse.SUPPRESS)
    p.add_argument("case", choices=sorted(CASES))
    args = p.parse_args()
    data = random.Random(args.seed).randbytes(args.size)
    if args.peer:
        return run_peer(args, data)
    start = time.monotonic()
    try:
        ok, client, other = CASES[args.case](args, data)
        result = "ok" if ok else "wrong-bytes"
        crow = row(client.fileno())
        orow = other if isinstance(other, str) else row(other.fileno())
    except OSError as e:
        result = "error:" + (os.strerror(e.errno) if e.errno else repr(e))
        crow = orow = "none none"
    ms = (time.monotonic() - start) * 1000
    print("%s %s ms %.0f rows %s | %s" % (args.case, result.replace(" ", "_"),
                                         ms, crow, orow), flush=True)


if __name__ == "__main__":
    sys.exit(main())
