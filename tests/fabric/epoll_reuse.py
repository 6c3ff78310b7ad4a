#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A registered fd's number taken by another socket, in the same epoll set
(the kernel keys its entries by file and fd, so both stay).

  epoll_reuse.py serve ADDR            accepts 2 connections, sends 100
                                       bytes to the first, 50 more after
                                       its byte, then reads both to EOF
  epoll_reuse.py connect ADDR PORT     prints one line: reuse SAME-NUMBER
                                       EVENTS BYTES EVENTS BYTES ENDS

Connection A's fd N is registered for EPOLLIN, kept open by a dup, and
closed; a dup of connection B takes the number N and is registered for
EPOLLOUT, then closed.  A's bytes must still wake the set: EVENTS is
the union of the events the waits report for N until EPOLLIN comes
(10 s at most), BYTES what A's dup then reads.  Then A moves to TCP
(SO_RCVLOWAT above 1 moves it), and its next bytes must wake the set
too (the second EVENTS and BYTES).  ENDS: the transports of the
process's connection ends (own_stats).
"""
import os
import select
import socket
import sys
import time

import own_stats


def serve(addr):
    lst = socket.create_server((addr, 0))
    print("port %d" % lst.getsockname()[1], flush=True)
    conns = [lst.accept()[0] for _ in range(2)]
    time.sleep(0.5)
    conns[0].sendall(b"a" * 100)
    conns[0].recv(1)
    conns[0].sendall(b"b" * 50)
    for conn in conns:
        while conn.recv(100):
            pass
        conn.close()


def wake_and_read(ep, n, fd):
    """The events the waits report for n until EPOLLIN (10 s at most),
    and the bytes fd then reads."""
    union = 0
    deadline = time.monotonic() + 10
    while not union & select.EPOLLIN and time.monotonic() < deadline:
        for got, ev in ep.poll(1):
            if got == n:
                union |= ev
        time.sleep(0.01)
    return [union, len(os.read(fd, 1000)) if union & select.EPOLLIN else 0]


def connect(addr, port):
    a = socket.create_connection((addr, port))
    b = socket.create_connection((addr, port))
    ep = select.epoll()
    n = a.fileno()
    ep.register(n, select.EPOLLIN)
    a_dup = os.dup(n)
    os.close(a.detach())
    b_dup = os.dup(b.fileno())
    same = b_dup == n
    ep.register(b_dup, select.EPOLLOUT)
    os.close(b_dup)
    saw = [same] + wake_and_read(ep, n, a_dup)
    os.write(a_dup, b"g")
    sock = socket.socket(fileno=os.dup(a_dup))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 2)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
    sock.close()
    saw += wake_and_read(ep, n, a_dup)
    ends = ",".join(sorted(c["transport"] for c in own_stats.connections()))
    print("reuse", *saw, ends or "none", flush=True)
    os.close(a_dup)
    b.close()


def main(argv):
    if argv[:1] == ["serve"]:
        serve(argv[1])
    else:
        connect(argv[1], int(argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
