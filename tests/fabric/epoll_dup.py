#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A connected socket and a dup() of it, registered for EPOLLIN in one
epoll set (kernel TCP keys its entries by file and fd: both may join), or
in two sets.

  epoll_dup.py serve ADDR              accepts 2 connections; on each,
                                       after one byte, sends 100000 bytes
                                       and closes
  epoll_dup.py connect ADDR PORT       prints, for "same" and "other" sets:
                                       NAME REGISTER EVENTS BYTES ROW

REGISTER is "ok" or the errno of the dup's registration, EVENTS what the
sets reported once the bytes came, BYTES whether the dup read them all
exactly, ROW the connection's row in roceshim-stat (own_stats.row()).
"""
import errno
import os
import select
import socket
import sys
import time

import own_stats

PAYLOAD = bytes(range(256)) * 390 + bytes(160)


def serve(addr):
    lst = socket.create_server((addr, 0))
    print("port %d" % lst.getsockname()[1], flush=True)
    for _ in range(2):
        conn, _ = lst.accept()
        conn.recv(1)
        conn.sendall(PAYLOAD)
        conn.close()


def one(name, addr, port):
    sock = socket.create_connection((addr, port))
    first = select.epoll()
    first.register(sock.fileno(), select.EPOLLIN)
    dup = os.dup(sock.fileno())
    second = first if name == "same" else select.epoll()
    try:
        second.register(dup, select.EPOLLIN)
        register = "ok"
    except OSError as exc:
        register = errno.errorcode.get(exc.errno, str(exc.errno))
    sock.sendall(b"g")
    # Level-triggered: once the first wait ends, a second look a moment
    # later sees every entry that the byte made ready (the first may end
    # before the kernel has queued them all).
    first.poll(10)
    if second is not first:
        second.poll(10)
    time.sleep(0.2)
    seen = first.poll(0)
    if second is not first:
        seen += second.poll(0)
    events = ",".join(sorted("%s:%d" % ("orig" if fd == sock.fileno()
                                        else "dup", ev) for fd, ev in seen))
    got = b""
    while True:
        data = os.read(dup, 65536)
        if not data:
            break
        got += data
    row = own_stats.row(sock.fileno()).replace(" ", "/")
    print(name, register, events, got == PAYLOAD, row, flush=True)
    os.close(dup)
    sock.close()


def main(argv):
    if argv[:1] == ["serve"]:
        serve(argv[1])
        return 0
    for name in ("same", "other"):
        one(name, argv[1], int(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
