# SPDX-License-Identifier: MIT
"""A client that shuts down its write side while the server's fork moves
the connection to TCP: the forked child must still see the client's EOF.

    shut_race.py server ADDR
        prints "port N"; for each connection, writes a greeting byte,
        waits round % 32 ms (the round is the connection's count), forks
        a child that echoes until EOF, and closes its own copy.  (The
        greeting keeps every connection on RDMA: a server that hands
        connections it never wrote to refuses the later ones.)
    shut_race.py client ADDR PORT [--bind ADDR] [--rounds N]
        per round: reads the greeting, then sends 200000 bytes and shuts
        down its write side, from a thread, while it reads the echo until
        EOF (10 s at most).
        Prints "round R: N bytes back, same|DIFFERENT, eof|TIMEOUT" and
        the connection's stats row as "conn TRANSPORT REASON[ moved:X]",
        then "rounds N".

Over TCP every round reads its bytes back, then EOF.  The child's first
recv() asks the server's roceshim to move the connection, while the
client's shutdown() is under way at some round's delay.
"""
import argparse
import os
import signal
import socket
import sys
import threading
import time

from own_stats import row

PAYLOAD = bytes(range(256)) * 781 + bytes(64)   # 200000 bytes
DELAYS_MS = 32
GREETING = b"g"


def echo_until_eof(s):
    while True:
        data = s.recv(1 << 16)
        if not data:
            return
        s.sendall(data)


def server(args):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(16)
    print("port", lsn.getsockname()[1], flush=True)
    n = 0
    while True:
        conn, _ = lsn.accept()
        conn.sendall(GREETING)
        time.sleep((n % DELAYS_MS) / 1000)
        n += 1
        if os.fork() == 0:
            lsn.close()
            try:
                echo_until_eof(conn)
            finally:
                os._exit(0)
        conn.close()


def one_round(args, r):
    src = (args.bind, 0) if args.bind else None
    s = socket.create_connection((args.addr, args.port), source_address=src)
    s.settimeout(10)
    if s.recv(1) != GREETING:
        print("round %d: no greeting" % r, flush=True)
    sender = threading.Thread(
        target=lambda: (s.sendall(PAYLOAD), s.shutdown(socket.SHUT_WR)))
    sender.start()
    s.settimeout(10)
    back, end = b"", "eof"
    try:
        while True:
            data = s.recv(1 << 16)
            if not data:
                break
            back += data
    except socket.timeout:
        end = "TIMEOUT"
    sender.join()
    print("round %d: %d bytes back, %s, %s" % (
        r, len(back), "same" if back == PAYLOAD else "DIFFERENT", end),
        flush=True)
    print("conn", row(s.fileno()), flush=True)
    s.close()


def client(args):
    for r in range(args.rounds):
        one_round(args, r)
    print("rounds", args.rounds, flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("addr")
    c = sub.add_parser("client")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("--bind")
    c.add_argument("--rounds", type=int, default=64)
    args = p.parse_args()
    server(args) if args.cmd == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())
