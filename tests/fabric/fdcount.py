# SPDX-License-Identifier: MIT
"""The descriptors a process holds for its upgraded connections, by the
way it connects.

    fdcount.py ADDR WAY [--pairs N] [--fill]

The process connects N pairs to its own listener on ADDR in one WAY (a
blocking connect(); "timeout": Python's connect with a timeout, which
polls a non-blocking socket; "epoll": a non-blocking connect waited on by
epoll), sends a byte each way on each, and counts /proc/self/fd by kind
before and after.  Prints:

    fds WAY PER_END K=V...   the descriptors it gained beyond the
                             program's sockets, per connection end, then
                             the gain of each kind

With --fill, each client end then waits for room as Gloo does: in an
epoll set for EPOLLIN, it sends until EAGAIN, asks for EPOLLOUT too, the
server end reads every byte (checked), and once EPOLLOUT comes the
registration is for EPOLLIN again.  Prints the count right after that
(WAY "filled") and once the connections have been idle for 4 seconds
(WAY "filled-idle"), then "bytes ok".
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


def wait_for_room(cli, srv, ep):
    """Fills cli until EAGAIN and waits for room as above: whether every
    byte came through exact."""
    chunk = bytes(range(256)) * 64
    sent = []
    cli.setblocking(False)
    ep.register(cli.fileno(), select.EPOLLIN)
    while True:
        try:
            sent.append(chunk[:cli.send(chunk)])
        except BlockingIOError:
            break
    ep.modify(cli.fileno(), select.EPOLLIN | select.EPOLLOUT)
    want = b"".join(sent)
    got = bytearray()
    while len(got) < len(want):
        got += srv.recv(len(want) - len(got))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if any(fd == cli.fileno() and ev & select.EPOLLOUT
               for fd, ev in ep.poll(1)):
            break
    ep.modify(cli.fileno(), select.EPOLLIN)
    return bytes(got) == want and len(want) > 0


def settled_kinds():
    """The handshakes' own descriptors are released as they end: counted
    once two looks half a second apart agree (for at most 10 s)."""
    after = kinds()
    for _ in range(20):
        time.sleep(0.5)
        again, after = after, kinds()
        if again == after:
            break
    return after


def report(way, before, after, pairs, own):
    grown = {k: after[k] - before.get(k, 0) for k in after}
    extra = sum(grown.values()) - 2 * pairs - own
    print("fds %s %.2f %s" % (way, extra / (2 * pairs), " ".join(
        "%s=%d" % (k, v) for k, v in sorted(grown.items()) if v)))


def count_way(way, host, pairs, fill):
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
    if not fill:
        report(way, before, settled_kinds(), pairs, 1)
        return
    ep = select.epoll()
    exact = all([wait_for_room(cli, srv, ep) for cli, srv in held])
    report("filled", before, kinds(), pairs, 2)
    time.sleep(4)
    report("filled-idle", before, kinds(), pairs, 2)
    print("bytes", "ok" if exact else "wrong")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("addr")
    parser.add_argument("way", choices=("blocking", "timeout", "epoll"))
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--fill", action="store_true")
    args = parser.parse_args()
    count_way(args.way, args.addr, args.pairs, args.fill)


if __name__ == "__main__":
    main()
