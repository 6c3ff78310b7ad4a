#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An epoll registration across its connection's move to kernel TCP
(SO_RCVLOWAT above 1 moves it: sockopt).

  epoll_move.py serve ADDR             per connection: sends 1 byte,
                                       then 2 more after the client's
                                       byte, then closes after its EOF
  epoll_move.py connect ADDR PORT      prints one line per case:
                                       NAME WHAT-EACH-WAIT-SAW ROW

oneshot: EPOLLIN | EPOLLONESHOT fires for the first byte, the connection
moves, the later bytes come: the registration stays disarmed until the
program's EPOLL_CTL_MOD, as kernel TCP keeps it.  exclusive: an
EPOLLEXCLUSIVE registration reports the bytes that come after the move,
and is refused with EPOLLRDHUP and refuses EPOLL_CTL_MOD before and
after it, as the kernel does.
ROW is the connection's row in roceshim-stat (own_stats.row()).
"""
import errno
import select
import socket
import sys

import own_stats


def serve(addr):
    lst = socket.create_server((addr, 0))
    print("port %d" % lst.getsockname()[1], flush=True)
    for _ in range(2):
        conn, _ = lst.accept()
        conn.sendall(b"a")
        conn.recv(1)
        conn.sendall(b"bc")
        while conn.recv(100):
            pass
        conn.close()


def move(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 2)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)


def seen(ep, timeout):
    return "+".join(str(ev) for _, ev in ep.poll(timeout)) or "none"


def oneshot(sock):
    ep = select.epoll()
    ep.register(sock.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
    saw = [seen(ep, 10)]
    sock.recv(1)
    move(sock)
    sock.sendall(b"g")
    saw.append(seen(ep, 1))
    ep.modify(sock.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
    saw.append(seen(ep, 10))
    return saw


def refused(call, *args):
    try:
        call(*args)
    except OSError as err:
        return errno.errorcode[err.errno]
    return "taken"


def exclusive(sock):
    ep = select.epoll()
    fd = sock.fileno()
    saw = [refused(ep.register, fd, select.EPOLLIN | select.EPOLLEXCLUSIVE |
                   select.EPOLLRDHUP)]
    ep.register(fd, select.EPOLLIN | select.EPOLLEXCLUSIVE)
    saw.append(seen(ep, 10))
    saw.append(refused(ep.modify, fd, select.EPOLLIN))
    sock.recv(1)
    move(sock)
    sock.sendall(b"g")
    saw.append(seen(ep, 10))
    saw.append(refused(ep.modify, fd, select.EPOLLIN))
    return saw


def main(argv):
    if argv[:1] == ["serve"]:
        serve(argv[1])
        return 0
    for name, case in (("oneshot", oneshot), ("exclusive", exclusive)):
        sock = socket.create_connection((argv[1], int(argv[2])))
        saw = case(sock)
        row = own_stats.row(sock.fileno()).replace(" ", "/")
        sock.shutdown(socket.SHUT_WR)
        sock.close()
        print(name, ",".join(saw), row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
