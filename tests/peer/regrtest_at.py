# SPDX-License-Identifier: MIT
"""Runs CPython's libregrtest with the tests' loopback address moved.

    python3 regrtest_at.py ADDR [REGRTEST ARGS...]

Besides the sockets' addresses (loopback.py), the tests' own constants
move: test.support.socket_helper.HOST and HOSTv4, which the modules read
when they load, and bind_port()'s default argument.  ADDR "-" moves
nothing.
"""
import sys

from loopback import move_sockets


def move_loopback(addr):
    from test.support import socket_helper

    socket_helper.HOST = addr
    socket_helper.HOSTv4 = addr
    socket_helper.bind_port.__defaults__ = (addr,)
    move_sockets(addr)


def main():
    addr = sys.argv[1]
    if addr != "-":
        move_loopback(addr)
    from test.libregrtest import main as regrtest_main

    sys.argv = [sys.argv[0]] + sys.argv[2:]
    regrtest_main()


if __name__ == "__main__":
    main()
