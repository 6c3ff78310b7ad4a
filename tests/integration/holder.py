#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Holds one TCP connection open for a test to inspect from outside.

Opens a listener on 127.0.0.1, connects to it, sends --bytes each way,
prints "ready PID" and waits until its standard input closes.  With
--traffic it keeps the connection busy with one-byte round trips until then.
"""
import argparse
import os
import socket
import sys
import threading


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bytes", type=int, default=100000)
    parser.add_argument("--traffic", action="store_true")
    args = parser.parse_args()

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    payload = b"r" * args.bytes
    for tx, rx in ((client, server), (server, client)):
        tx.sendall(payload)
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


if __name__ == "__main__":
    main()
