# SPDX-License-Identifier: MIT
"""A forking server whose handler ends its connection while a handler
forked after it lives on.  Over TCP the client sees the end of its stream
at once: the later child never had that socket.

    fork_eof.py server ADDR GATE
        prints "port N"; takes connections in pairs.  It accepts the
        first, waits for the file GATE (the client's pid), forks a handler
        for it and closes its own copy; accepts the second and forks its
        handler; then wakes the client (SIGCONT).  A handler that reads
        "c" sends "bye" and closes; one that reads "h" holds its
        connection 8 s.
    fork_eof.py client ADDR PORT GATE [--bind ADDR] [--rounds N]
        per round: makes the pair, writes GATE and stops itself
        (SIGSTOP), so that while the server closes its copy of the first
        connection and forks the second handler, nothing of the first's
        can end: its peer is stopped.  Then "c" on the first, "h" on the
        second, and times the first's EOF after "bye".  Prints "round R
        ... eof_ms N" and the first connection's stats row as "conn
        TRANSPORT REASON[ moved:X]" per round, then "worst_eof_ms N".
"""
import argparse
import os
import signal
import socket
import sys
import time

from own_stats import row

HOLD_S = 8


def handle(s):
    what = s.recv(1)
    if what == b"c":
        s.sendall(b"bye")
        s.close()
    elif what == b"h":
        time.sleep(HOLD_S)
    os._exit(0)


def fork_handler(lsn, s):
    if os.fork() == 0:
        lsn.close()
        handle(s)
    s.close()


def client_pid(gate):
    while True:
        try:
            with open(gate) as f:
                pid = int(f.read())
            os.unlink(gate)
            return pid
        except (OSError, ValueError):
            time.sleep(0.01)


def server(args):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(64)
    print("port", lsn.getsockname()[1], flush=True)
    while True:
        first, _ = lsn.accept()
        pid = client_pid(args.gate)
        fork_handler(lsn, first)
        second, _ = lsn.accept()
        fork_handler(lsn, second)
        os.kill(pid, signal.SIGCONT)


def client(args):
    worst = 0.0
    for r in range(args.rounds):
        src = (args.bind, 0) if args.bind else None
        first = socket.create_connection((args.addr, args.port),
                                         source_address=src)
        second = socket.create_connection((args.addr, args.port),
                                          source_address=src)
        with open(args.gate + ".new", "w") as f:
            f.write(str(os.getpid()))
        os.rename(args.gate + ".new", args.gate)
        os.kill(os.getpid(), signal.SIGSTOP)
        first.sendall(b"c")
        second.sendall(b"h")
        got = b""
        while len(got) < 3:
            more = first.recv(3 - len(got))
            if not more:
                break
            got += more
        start = time.monotonic()
        first.settimeout(HOLD_S * 2)
        try:
            end = first.recv(1)
        except OSError as e:
            end = repr(e).encode()
        ms = (time.monotonic() - start) * 1000
        worst = max(worst, ms)
        print("round %d got %r end %r eof_ms %.0f" % (r, got, end, ms),
              flush=True)
        print("conn", row(first.fileno()), flush=True)
        first.close()
        second.close()
    print("worst_eof_ms %.0f" % worst, flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("addr")
    s.add_argument("gate")
    c = sub.add_parser("client")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("gate")
    c.add_argument("--bind")
    c.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    server(args) if args.cmd == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())
