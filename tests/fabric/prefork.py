# SPDX-License-Identifier: MIT
"""A prefork server and its clients (tests/fabric/test-prefork.sh).

    prefork.py server ADDR
        listens on ADDR (a port the kernel picks, printed as "port N"),
        forks 3 workers that accept on the inherited listener and answer
        each line "req I" with "ok req I" before they close; the parent
        accepts nothing
    prefork.py client ADDR PORT --bind SRC --count N
        N connections one after another, each sends its line and reads
        to the end; prints "conn TRANSPORT REASON[ moved:CAUSE]" for each
        (roceshim-stat's row, own_stats.py), then "exact K" (answers as
        sent) and "ms TOTAL" (the whole run)
"""
import argparse
import os
import socket
import sys
import time

from own_stats import row

WORKERS = 3


def serve(addr):
    ls = socket.socket()
    ls.bind((addr, 0))
    ls.listen(64)
    print("port", ls.getsockname()[1], flush=True)
    workers = []
    for _ in range(WORKERS):
        pid = os.fork()
        if pid:
            workers.append(pid)
        else:
            while True:
                c, _ = ls.accept()
                line = b""
                while not line.endswith(b"\n"):
                    got = c.recv(4096)
                    if not got:
                        break
                    line += got
                c.sendall(b"ok " + line)
                c.close()
    for pid in workers:
        os.waitpid(pid, 0)


def client(args):
    exact = 0
    start = time.monotonic()
    for i in range(args.count):
        s = socket.socket()
        s.bind((args.bind, 0))
        s.settimeout(60)
        s.connect((args.addr, args.port))
        line = b"req %d\n" % i
        s.sendall(line)
        answer = b""
        while True:
            got = s.recv(4096)
            if not got:
                break
            answer += got
        exact += answer == b"ok " + line
        print("conn", row(s.fileno()), flush=True)
        s.close()
    print("exact", exact)
    print("ms", int((time.monotonic() - start) * 1000))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["server", "client"])
    p.add_argument("addr")
    p.add_argument("port", type=int, nargs="?")
    p.add_argument("--bind")
    p.add_argument("--count", type=int, default=1)
    args = p.parse_args()
    if args.mode == "server":
        serve(args.addr)
    else:
        client(args)


if __name__ == "__main__":
    sys.exit(main())
