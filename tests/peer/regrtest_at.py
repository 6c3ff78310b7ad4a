# SPDX-License-Identifier: MIT
"""Runs CPython's libregrtest with the tests' loopback address moved.

    python3 regrtest_at.py ADDR [REGRTEST ARGS...]

The network tests talk to themselves over 127.0.0.1 ("localhost").  On the
Soft-RoCE fabric that address has no RDMA device, so every connection
would stay on TCP.  With ADDR (an address of this host that has one), the
tests' own constants (test.support.socket_helper.HOST and HOSTv4, which
the modules read when they load, and bind_port()'s default argument) and
every bind or connect of an AF_INET socket to 127.0.0.1 or "localhost" go
to ADDR instead.  The run without roceshim uses this same wrapper, so both
runs see the same addresses; a test that checks for 127.0.0.1 itself
fails in both and is not a difference.  ADDR "-" moves nothing.
"""
import socket
import sys

LOOPBACK = ("127.0.0.1", "localhost")


def move_loopback(addr):
    from test.support import socket_helper

    socket_helper.HOST = addr
    socket_helper.HOSTv4 = addr
    socket_helper.bind_port.__defaults__ = (addr,)

    def moved(sock, address):
        if (sock.family == socket.AF_INET and isinstance(address, tuple)
                and len(address) == 2 and address[0] in LOOPBACK):
            return (addr, address[1])
        return address

    def wrap(name):
        original = getattr(socket.socket, name)

        def call(self, address, *args):
            return original(self, moved(self, address), *args)

        call.__name__ = name
        setattr(socket.socket, name, call)

    for name in ("bind", "connect", "connect_ex"):
        wrap(name)


def main():
    addr = sys.argv[1]
    if addr != "-":
        move_loopback(addr)
    from test.libregrtest import main as regrtest_main

    sys.argv = [sys.argv[0]] + sys.argv[2:]
    regrtest_main()


if __name__ == "__main__":
    main()
