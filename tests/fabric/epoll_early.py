# SPDX-License-Identifier: MIT
"""Sockets in an epoll set before their connect(), for test-epoll-early.sh.

    epoll_early.py serve ADDR
        Prints "port N", then for each connection: waits 0.3 s, sends
        "hello", and keeps it open for 5 s.

    epoll_early.py connect ADDR PORT BIND
        For each of `blocking` and `nonblocking`: registers a socket for
        EPOLLIN before connect(), connects (the non-blocking one waits for
        EPOLLOUT through the same registration), then waits at most 3 s in
        epoll_wait for the server's bytes and prints

            CASE ok|late DATA ROW

        ROW the connection's row in roceshim-stat (own_stats.row()).
        Then `exclusive`: a non-blocking connect, registered at once
        (while it is still going on) with EPOLLEXCLUSIVE: refused with
        EPOLLRDHUP, taken without, and a MOD refused, as the kernel does
        (EINVAL); it prints

            exclusive ok|late DATA REFUSALS ROW
"""
import errno
import select
import socket
import sys
import threading
import time

import own_stats


def serve(addr):
    lst = socket.socket()
    lst.bind((addr, 0))
    lst.listen(8)
    print("port", lst.getsockname()[1], flush=True)

    def greet(c):
        time.sleep(0.3)
        c.sendall(b"hello")
        time.sleep(5)
        c.close()

    while True:
        c, _ = lst.accept()
        threading.Thread(target=greet, args=(c,), daemon=True).start()


def one(case, addr, port, bind):
    ep = select.epoll()
    s = socket.socket()
    s.bind((bind, 0))
    ep.register(s.fileno(), select.EPOLLIN)
    if case == "blocking":
        s.connect((addr, port))
    else:
        s.setblocking(False)
        try:
            s.connect((addr, port))
        except BlockingIOError:
            pass
        ep.modify(s.fileno(), select.EPOLLIN | select.EPOLLOUT)
        ep.poll(10)
        ep.modify(s.fileno(), select.EPOLLIN)
    events = ep.poll(3)
    data = s.recv(16) if events else b"-"
    print(case, "ok" if events else "late", data.decode(),
          own_stats.row(s.fileno()), flush=True)
    ep.close()
    s.close()


def refused(call, *args):
    try:
        call(*args)
    except OSError as err:
        return errno.errorcode[err.errno]
    return "taken"


def exclusive(addr, port, bind):
    ep = select.epoll()
    s = socket.socket()
    s.bind((bind, 0))
    s.setblocking(False)
    try:
        s.connect((addr, port))
    except BlockingIOError:
        pass
    fd = s.fileno()
    base = select.EPOLLIN | select.EPOLLEXCLUSIVE
    saw = [refused(ep.register, fd, base | select.EPOLLRDHUP)]
    ep.register(fd, base)
    saw.append(refused(ep.modify, fd, select.EPOLLIN))
    events = ep.poll(3)
    data = s.recv(16) if events else b"-"
    print("exclusive", "ok" if events else "late", data.decode(),
          ",".join(saw), own_stats.row(fd), flush=True)
    ep.close()
    s.close()


def main():
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        for case in ("blocking", "nonblocking"):
            one(case, sys.argv[2], int(sys.argv[3]), sys.argv[4])
        exclusive(sys.argv[2], int(sys.argv[3]), sys.argv[4])


if __name__ == "__main__":
    main()
