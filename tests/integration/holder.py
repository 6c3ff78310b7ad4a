#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Holds one TCP connection open for a test to inspect from outside.

Opens a listener on 127.0.0.1, connects to it, sends --bytes each way,
prints "ready PID" and waits until its standard input closes.  With
--traffic it keeps the connection busy with one-byte round trips until then.
With --refused it first makes a non-blocking connect to a closed port, and
keeps that socket open.  --accept-buffer none|short accepts through libc's
accept() with no address buffer, or one too short for the address.
--ipv6 listens and connects on ::1 instead.  --fastopen connects with
sendto(MSG_FASTOPEN), its first 100 bytes in the call.
"""
import argparse
import ctypes
import errno
import os
import select
import socket
import sys
import threading

kept_open = []


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bytes", type=int, default=100000)
    parser.add_argument("--traffic", action="store_true")
    parser.add_argument("--refused", action="store_true")
    parser.add_argument("--accept-buffer", choices=("none", "short"))
    parser.add_argument("--ipv6", action="store_true")
    parser.add_argument("--fastopen", action="store_true")
    args = parser.parse_args()

    if args.refused:
        kept_open.append(refused_connect())

    if args.ipv6:
        listener = socket.socket(socket.AF_INET6)
        listener.bind(("::1", 0))
    else:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
    listener.listen()
    payload = b"r" * args.bytes
    if args.fastopen:
        client = socket.socket(listener.family)
        sent = client.sendto(payload[:100], socket.MSG_FASTOPEN,
                             listener.getsockname())
    else:
        client = socket.create_connection(listener.getsockname()[:2])
        sent = 0
    server = accept(listener, args.accept_buffer)
    for tx, rx in ((client, server), (server, client)):
        tx.sendall(payload[sent:])
        sent = 0
        got = 0
        while got < args.bytes:
            chunk = rx.recv(65536)
            if not chunk:
                sys.exit("unexpected EOF")
            got += len(chunk)
    print("ready", os.getpid(), flush=True)
    if not args.traffic:
        sys.stdin.read()
        return
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()),
                     daemon=True).start()
    while not done.is_set():
        client.sendall(b"t")
        if server.recv(1) != b"t":
            sys.exit("lost a byte")


def accept(listener, buffer):
    if not buffer:
        return listener.accept()[0]
    libc = ctypes.CDLL(None, use_errno=True)
    if buffer == "none":
        fd = libc.accept(listener.fileno(), None, None)
    else:
        addr = ctypes.create_string_buffer(4)
        size = ctypes.c_uint(len(addr))
        fd = libc.accept(listener.fileno(), addr, ctypes.byref(size))
        assert size.value > len(addr), size.value
    if fd < 0:
        sys.exit("accept: %s" % os.strerror(ctypes.get_errno()))
    return socket.socket(fileno=fd)


def refused_connect():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    sock = socket.socket()
    sock.setblocking(False)
    assert sock.connect_ex(("127.0.0.1", port)) == errno.EINPROGRESS
    select.select([], [sock], [], 5)
    err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    assert err == errno.ECONNREFUSED, err
    return sock


if __name__ == "__main__":
    main()
