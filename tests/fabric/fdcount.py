# SPDX-License-Identifier: MIT
"""The descriptors a process holds for its upgraded connections, by the
way it connects.

    fdcount.py ADDR WAY [--pairs N]

The process connects N pairs to its own listener on ADDR in one WAY (a
blocking connect(); "timeout": Python's connect with a timeout, which
polls a non-blocking socket; "epoll": a non-blocking connect waited on by
epoll), sends a byte each way on each, and counts /proc/self/fd by kind
before and after.  Prints:

    fds WAY PER_END K=V...   the descriptors it gained beyond the
                             program's sockets, per connection end, then
                             the gain of each kind
"""
import argparse
import collections
import os
import select
import socket
import time


def kinds():
    count = collections.Counter()
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink("/proc/self/fd/" + name)
        except OSError:
            continue
        if link.startswith("socket:"):
            link = "socket"
        elif link.startswith("pipe:"):
            link = "pipe"
        count[link.replace("anon_inode:", "")] += 1
    return count


def connect(way, addr):
    if way == "blocking":
        return socket.create_connection(addr)
    if way == "timeout":
        return socket.create_connection(addr, timeout=10)
    sock = socket.socket()
    sock.setblocking(False)
    sock.connect_ex(addr)
    ep = select.epoll()
    ep.register(sock.fileno(), select.EPOLLOUT)
    ep.poll(10)
    ep.close()
    return sock


def count_way(way, host, pairs):
    before = kinds()
    lst = socket.socket()
    lst.bind((host, 0))
    lst.listen(pairs)
    held = []
    for _ in range(pairs):
        cli = connect(way, lst.getsockname())
        srv, _ = lst.accept()
        for a, b in ((cli, srv), (srv, cli)):
            a.setblocking(True)
            a.sendall(b"x")
            assert b.recv(1) == b"x"
        held.append((cli, srv))
    # The handshakes' own descriptors are released as they end: counted
    # once two looks half a second apart agree (for at most 10 s).
    after = kinds()
    for _ in range(20):
        time.sleep(0.5)
        again, after = after, kinds()
        if again == after:
            break
    grown = {k: after[k] - before.get(k, 0) for k in after}
    extra = sum(grown.values()) - 2 * pairs - 1
    print("fds %s %.2f %s" % (way, extra / (2 * pairs), " ".join(
        "%s=%d" % (k, v) for k, v in sorted(grown.items()) if v)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("addr")
    parser.add_argument("way", choices=("blocking", "timeout", "epoll"))
    parser.add_argument("--pairs", type=int, default=20)
    args = parser.parse_args()
    count_way(args.way, args.addr, args.pairs)


if __name__ == "__main__":
    main()
