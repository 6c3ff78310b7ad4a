# SPDX-License-Identifier: MIT
"""A client that leaves (exit, an exec that closes the socket, or a close
and then exit) right after the server moved its connection to TCP, while the bytes that moved
with it are not yet all written to the kernel socket: the server must
still read every byte, then EOF.

    backlog_exit.py server ADDR
        prints "port N"; per connection, waits 0.3 s, forks a child that
        reads one byte (its recv() moves the connection), reads nothing
        more for 3 s, then reads until EOF and prints "got N
        same|DIFFERENT".
    backlog_exit.py client ADDR PORT exit|exec|close [--bind ADDR]
        sends PAYLOAD bytes, which the server's ring holds unread, sets
        SO_SNDBUF to 32 KiB, waits 0.6 s for the server's move, then
        leaves: exit() with a dup of the socket open, an exec of
        /bin/true with the socket closed on exec, or close() and then
        exit().

Over TCP the kernel keeps what the client wrote after it has gone.  Under
roceshim, what the server's program had not read when it moved is in the
client's staging ring until the kernel socket takes it, and the kernel
socket takes no more than its send buffer while the server reads nothing.
"""
import argparse
import os
import signal
import socket
import sys
import time

PAYLOAD = bytes(i * 7 % 251 for i in range(600000))


def server(args):
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(16)
    print("port", lsn.getsockname()[1], flush=True)
    while True:
        conn, _ = lsn.accept()
        time.sleep(0.3)     # the client's bytes cross over RDMA first
        if os.fork() == 0:
            lsn.close()
            got = conn.recv(1)
            time.sleep(3)
            while True:
                data = conn.recv(1 << 16)
                if not data:
                    break
                got += data
            print("got %d %s" % (len(got),
                                 "same" if got == PAYLOAD else "DIFFERENT"),
                  flush=True)
            os._exit(0)
        conn.close()


def client(args):
    src = (args.bind, 0) if args.bind else None
    s = socket.create_connection((args.addr, args.port), source_address=src)
    s.sendall(PAYLOAD)
    # Over TCP this bounds only later writes; the kernel socket then takes
    # no more than this of what moves with the connection, for a while.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32768)
    time.sleep(0.6)
    if args.how == "exec":
        os.execv("/bin/true", ["true"])
    if args.how == "close":
        s.close()
        sys.exit(0)
    # A descriptor Python does not close before the process exits.
    os.dup(s.fileno())
    sys.exit(0)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("server")
    s.add_argument("addr")
    c = sub.add_parser("client")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("how", choices=["exit", "exec", "close"])
    c.add_argument("--bind")
    args = p.parse_args()
    server(args) if args.cmd == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())
