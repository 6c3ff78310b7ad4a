# SPDX-License-Identifier: MIT
"""A client that wrote and closed before it received a byte keeps its end
on RDMA until the server has read what it sent (docs/design.md,
"Downgrade").  What the program sees of the closed socket must be what
TCP gives: its epoll entries go with its close.

    closed_linger.py ADDR --bind ADDR
        the client registers its socket in an epoll set, writes 1 KiB and
        closes it without EPOLL_CTL_DEL; the server then resets the
        connection (closes with the bytes unread).  Prints "events N":
        what epoll_wait() gave in the next 500 ms (0 over TCP), then
        "row ROW" for the client's connection before the close.
"""
import argparse
import select
import socket
import struct
import sys

from own_stats import row
from send_stall import pair


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--bind", required=True)
    args = p.parse_args()
    client, server = pair(args)
    ep = select.epoll()
    ep.register(client.fileno(),
                select.EPOLLIN | select.EPOLLOUT | select.EPOLLRDHUP)
    ep.poll(1)
    seen = row(client.fileno())
    client.sendall(b"x" * 1024)
    client.close()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                      struct.pack("ii", 1, 0))
    server.close()
    events = ep.poll(0.5)
    print("events %d" % len(events), flush=True)
    print("row %s" % seen, flush=True)


if __name__ == "__main__":
    sys.exit(main())
