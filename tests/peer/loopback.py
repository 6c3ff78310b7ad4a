# SPDX-License-Identifier: MIT
"""Moves a test suite's loopback address to another address of this host.

Test suites talk to themselves over 127.0.0.1 ("localhost").  On the
Soft-RoCE fabric that address has no RDMA device, so every connection
would stay on TCP.  move_sockets(ADDR) makes every bind, connect and
connect_ex of an AF_INET socket to 127.0.0.1 or "localhost" go to ADDR
instead.  The runs without roceshim use the same move, so both runs see
the same addresses; a test that checks for 127.0.0.1 itself fails in both
and is not a difference.
"""
import socket

LOOPBACK = ("127.0.0.1", "localhost")


def move_sockets(addr):
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
