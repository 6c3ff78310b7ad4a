# SPDX-License-Identifier: MIT
"""Socket options and receive flags whose meaning only kernel TCP gives,
on connections this process holds both ends of.

    sockopt.py ADDR

Prints one line per observation, the same over kernel TCP and under
roceshim (test-sockopt.sh compares them), and, when ROCESHIM_STAT is set,
"row NAME TRANSPORT REASON[ moved:X]" for the end each check is about.
"""
import ctypes
import fcntl
import os
import select
import signal
import socket
import struct
import sys
import termios
import threading
import time

from own_stats import row

TCP_INQ = 36
TCP_FASTOPEN_CONNECT = 30
SO_ZEROCOPY = 60
MSG_ZEROCOPY = 0x4000000
# Moments of rcvlowat_while_connecting_sweep, past a handshake's length.
SWEEP_STEPS = 40
SWEEP_STEP_S = 0.0005
libc = ctypes.CDLL(None, use_errno=True)
libc.recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.c_int]
libc.recv.restype = ctypes.c_ssize_t


def pair(listener, before_connect=None):
    c = socket.socket(listener.family, socket.SOCK_STREAM)
    if before_connect:
        before_connect(c)
    c.connect(listener.getsockname())
    s, _ = listener.accept()
    return c, s


def show_row(name, sock):
    print("row", name, row(sock.fileno()))


def queued(s):
    """FIONREAD: the bytes s has to read."""
    return struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0]


def recv_all(s, n):
    """n bytes from s (fewer at its end), each read within 5 s."""
    s.settimeout(5)
    got = b""
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return got


def readable(s, timeout):
    return bool(select.select([s], [], [], timeout)[0])


def lowat(s, c):
    """Readable only once 4 bytes wait; a read then takes all 4."""
    c.sendall(b"ab")
    print("lowat 2 bytes readable:", readable(s, 0.5))
    c.sendall(b"cd")
    print("lowat 4 bytes readable:", readable(s, 5))
    s.settimeout(5)
    print("lowat read:", s.recv(100))


def set_lowat(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 4)


def rcvlowat_on_connection(listener):
    c, s = pair(listener)
    set_lowat(s)
    lowat(s, c)
    show_row("rcvlowat_on_connection", s)
    return [c, s]


def rcvlowat_before_connect(listener):
    c, s = pair(listener, set_lowat)
    lowat(c, s)
    show_row("rcvlowat_before_connect", c)
    return [c, s]


def rcvlowat_while_connecting(listener):
    """Set while a non-blocking connect is under way."""
    c = socket.socket(listener.family, socket.SOCK_STREAM)
    c.setblocking(False)
    c.connect_ex(listener.getsockname())
    set_lowat(c)
    select.select([], [c], [], 5)
    print("connecting error:", c.getsockopt(socket.SOL_SOCKET,
                                             socket.SO_ERROR))
    s, _ = listener.accept()
    lowat(c, s)
    show_row("rcvlowat_while_connecting", c)
    return [c, s]


def rcvlowat_before_accept(listener):
    """Set on a connection the server has not accepted yet."""
    c = socket.create_connection(listener.getsockname())
    set_lowat(c)
    s, _ = listener.accept()
    lowat(c, s)
    show_row("rcvlowat_before_accept", c)
    return [c, s]


def works_both_ways(c, s):
    """4 bytes (c's low-water mark) each way within 5 s."""
    for sock in (c, s):
        sock.setblocking(True)
        sock.settimeout(5)
    try:
        s.sendall(b"from")
        c.sendall(b"back")
        return (c.recv(4, socket.MSG_WAITALL) == b"from" and
                s.recv(4, socket.MSG_WAITALL) == b"back")
    except OSError:
        return False


def rcvlowat_while_connecting_sweep(listener):
    """
    Set at SWEEP_STEPS moments of a non-blocking connect, so that some
    fall where its handshake completes: each connection works.
    """
    broken = 0
    for step in range(SWEEP_STEPS):
        c = socket.socket(listener.family, socket.SOCK_STREAM)
        c.setblocking(False)
        start = time.monotonic()
        c.connect_ex(listener.getsockname())
        while time.monotonic() - start < step * SWEEP_STEP_S:
            pass
        set_lowat(c)
        # Over RDMA a connection that moves is writable only once the
        # server has accepted it (roceshim(7), NOTES): not before this.
        select.select([], [c], [], 1)
        s, _ = listener.accept()
        broken += not works_both_ways(c, s)
        c.close()
        s.close()
    print("sweep connections that failed:", broken)
    return []


def rcvlowat_on_listener(addr):
    listener = socket.create_server((addr, 0))
    set_lowat(listener)
    c, s = pair(listener)
    lowat(s, c)
    show_row("rcvlowat_on_listener", s)
    return [listener, c, s]


def inq_read(s, n, control):
    """recvmsg() of n bytes: the bytes, TCP_CM_INQ's count or None, and
    whether the control data was truncated."""
    d, anc, flags, _ = s.recvmsg(n, control)
    counts = [struct.unpack("i", data.ljust(4, b"\0"))[0]
              for level, kind, data in anc
              if (level, kind) == (socket.IPPROTO_TCP, TCP_INQ)]
    return d, counts[0] if counts else None, bool(flags & socket.MSG_CTRUNC)


def inq_pair(listener, data):
    """A connection whose accepted end has TCP_INQ on and data queued."""
    c, s = pair(listener)
    s.setsockopt(socket.IPPROTO_TCP, TCP_INQ, 1)
    c.sendall(data)
    deadline = time.time() + 5
    while queued(s) < len(data) and time.time() < deadline:
        time.sleep(0.01)
    return c, s


def inq(listener):
    """TCP_INQ: every read reports the bytes still queued, 1 at the end
    of the stream; truncated where the control buffer is too short."""
    c, s = inq_pair(listener, b"0123456789")
    print("inq read 4:", inq_read(s, 4, 64))
    print("inq read 2, no control:", inq_read(s, 2, 0))
    print("inq read 4:", inq_read(s, 4, 64))
    c.shutdown(socket.SHUT_WR)
    readable(s, 5)
    print("inq read at the end:", inq_read(s, 4, 64))
    print("inq option:", s.getsockopt(socket.IPPROTO_TCP, TCP_INQ))
    show_row("inq", s)
    return [c, s]


def inq_after_fin(listener):
    """TCP_INQ once the peer's FIN came: the FIN counts one more, as it
    takes a sequence number; this end's SHUT_RD adds nothing."""
    c, s = inq_pair(listener, b"0123456789")
    c.shutdown(socket.SHUT_WR)
    p = select.poll()
    p.register(s, select.POLLRDHUP)
    p.poll(5000)
    print("inq after fin, read 4:", inq_read(s, 4, 64))
    print("inq after fin, read 6:", inq_read(s, 6, 64))
    print("inq after fin, at the end:", inq_read(s, 4, 64))
    show_row("inq_after_fin", s)
    c2, s2 = inq_pair(listener, b"abc")
    s2.shutdown(socket.SHUT_RD)
    print("inq after shut_rd, read 3:", inq_read(s2, 3, 64))
    show_row("inq_after_shut_rd", s2)
    return [c, s, c2, s2]


def zerocopy(listener):
    """SO_ZEROCOPY: each MSG_ZEROCOPY send is reported on the error
    queue."""
    c, s = pair(listener)
    c.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
    c.send(b"z" * 4096, MSG_ZEROCOPY)
    p = select.poll()
    p.register(c, 0)
    events = p.poll(5000)
    print("zerocopy report:", bool(events and events[0][1] & select.POLLERR))
    try:
        _, anc, _, _ = c.recvmsg(0, 256, socket.MSG_ERRQUEUE)
        print("zerocopy error queue:", len(anc), "message(s)")
    except OSError as e:
        print("zerocopy error queue: errno", e.errno)
    print("zerocopy bytes:", recv_all(s, 4096) == b"z" * 4096)
    show_row("zerocopy", c)
    return [c, s]


def zerocopy_on_listener(addr):
    """SO_ZEROCOPY alone, on a listener and its connections (as gRPC
    sets it): sends without MSG_ZEROCOPY are not reported."""
    listener = socket.create_server((addr, 0))
    listener.setsockopt(socket.SOL_SOCKET, SO_ZEROCOPY, 1)
    c, s = pair(listener)
    s.sendall(b"y" * 4096)
    p = select.poll()
    p.register(s, 0)
    print("zerocopy plain send reported:", bool(p.poll(200)))
    print("zerocopy plain send bytes:", recv_all(c, 4096) == b"y" * 4096)
    show_row("zerocopy_on_listener", s)
    return [listener, c, s]


def error_queue(listener):
    """An empty error queue: EAGAIN, and the stream is untouched."""
    c, s = pair(listener)
    c.sendall(b"xyz")
    time.sleep(0.2)
    try:
        s.recvmsg(100, 64, socket.MSG_ERRQUEUE)
        print("errqueue: no error")
    except OSError as e:
        print("errqueue: errno", e.errno)
    try:
        s.recv(100, socket.MSG_ERRQUEUE)
        print("errqueue recv: no error")
    except OSError as e:
        print("errqueue recv: errno", e.errno)
    s.settimeout(5)
    print("errqueue stream:", s.recv(100))
    show_row("error_queue", s)
    return [c, s]


def async_io(listener):
    """O_ASYNC: SIGIO once bytes arrive."""
    c, s = pair(listener)
    raised = []
    signal.signal(signal.SIGIO, lambda *_: raised.append(1))
    fcntl.fcntl(s, fcntl.F_SETOWN, os.getpid())
    fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) | os.O_ASYNC)
    # Only the bytes sent from now on count (a move's marker raises one).
    time.sleep(0.2)
    raised.clear()
    c.sendall(b"io")
    deadline = time.monotonic() + 5
    while not raised and time.monotonic() < deadline:
        time.sleep(0.01)
    print("sigio raised:", bool(raised))
    s.settimeout(5)
    print("sigio data:", s.recv(10))
    show_row("async", s)
    fcntl.fcntl(s, fcntl.F_SETFL, fcntl.fcntl(s, fcntl.F_GETFL) & ~os.O_ASYNC)
    signal.signal(signal.SIGIO, signal.SIG_IGN)
    return [c, s]


def discard(fd, n, flags):
    ret = libc.recv(fd, None, n, flags)
    return ret if ret >= 0 else -ctypes.get_errno()


def trunc(listener):
    """MSG_TRUNC: bytes taken off the stream, not copied (NULL buffer)."""
    c, s = pair(listener)
    big = bytes(range(256)) * 4096
    c.sendall(b"0123456789")
    fd = s.fileno()
    print("trunc 4:", discard(fd, 4, socket.MSG_TRUNC | socket.MSG_WAITALL))
    print("trunc peek 3:", discard(fd, 3, socket.MSG_TRUNC | socket.MSG_PEEK))
    print("trunc rest:", s.recv(6, socket.MSG_WAITALL))
    print("trunc empty:", discard(fd, 8, socket.MSG_TRUNC |
                                  socket.MSG_DONTWAIT))
    sender = threading.Thread(target=c.sendall, args=(big + b"end",))
    sender.start()
    print("trunc 1 MiB:", discard(fd, len(big),
                                  socket.MSG_TRUNC | socket.MSG_WAITALL))
    sender.join()
    print("trunc after:", s.recv(3, socket.MSG_WAITALL))
    show_row("trunc", s)
    return [c, s]


def fastopen_connect(addr):
    """TCP_FASTOPEN_CONNECT: once the client holds the server's cookie,
    connect() returns at once and the SYN waits for the first write,
    which it carries.  (The server hands out cookies where the guest's
    net.ipv4.tcp_fastopen allows it: test-sockopt.sh sets it.)"""
    listener = socket.create_server((addr, 0))
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 16)
    listener.settimeout(10)
    held = [listener]
    for i in range(3):
        c = socket.socket(listener.family, socket.SOCK_STREAM)
        c.setsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN_CONNECT, 1)
        c.settimeout(10)
        held.append(c)
        try:
            c.connect(listener.getsockname())
            c.sendall(b"fast%d" % i)
            s, _ = listener.accept()
            held.append(s)
            s.settimeout(10)
            print("fastopen", i, "server read:", s.recv(10))
            s.sendall(b"back%d" % i)
            print("fastopen", i, "client read:", c.recv(10))
        except OSError as e:
            print("fastopen", i, "failed:", type(e).__name__)
    show_row("fastopen_connect", c)
    return held


def main():
    addr = sys.argv[1]
    listener = socket.create_server((addr, 0))
    held = [listener]
    for check in (rcvlowat_on_connection, rcvlowat_before_connect,
                  rcvlowat_while_connecting, rcvlowat_before_accept,
                  rcvlowat_while_connecting_sweep, inq, inq_after_fin,
                  zerocopy, async_io, error_queue, trunc):
        held += check(listener)
    held += rcvlowat_on_listener(addr)
    held += zerocopy_on_listener(addr)
    held += fastopen_connect(addr)
    for sock in held:
        sock.close()


if __name__ == "__main__":
    main()
