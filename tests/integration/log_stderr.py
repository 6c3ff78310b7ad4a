#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Puts a socket on stderr, as inetd and socket activation do, then makes
a connection; run under the preload with ROCESHIM_LOG_LEVEL=debug, so
that roceshim has a line to log about it.

    log_stderr.py KIND

KIND: connection (stderr is an accepted TCP connection: prints "peer ok"
when the peer received only the program's bytes), listener (stderr is a
listening TCP socket, as for an inetd "wait" service: prints "alive"
when the program lived on), unix (stderr is a Unix stream socket, as
journald's: prints "log ok" when roceshim's line reached it).
"""
import os
import signal
import socket
import sys


def connect_once():
    """A TCP connection of the program's own, which roceshim logs."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    for s in (client, server, listener):
        s.close()


def main():
    kind = sys.argv[1]
    saved = os.dup(2)
    if kind == "connection":
        listener = socket.create_server(("127.0.0.1", 0))
        peer = socket.create_connection(listener.getsockname())
        conn, _ = listener.accept()
        os.dup2(conn.fileno(), 2)
        connect_once()
        os.write(2, b"program bytes\n")
        os.dup2(saved, 2)
        conn.close()
        peer.settimeout(10)
        got = b""
        while True:
            chunk = peer.recv(4096)
            if not chunk:
                break
            got += chunk
        print("peer ok" if got == b"program bytes\n" else "peer got %r" % got)
    elif kind == "listener":
        # As in a program that has not set SIGPIPE aside (Python has).
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        listener = socket.create_server(("127.0.0.1", 0))
        os.dup2(listener.fileno(), 2)
        connect_once()
        os.dup2(saved, 2)
        print("alive")
    elif kind == "unix":
        ours, theirs = socket.socketpair()
        os.dup2(ours.fileno(), 2)
        connect_once()
        os.dup2(saved, 2)
        ours.close()
        theirs.settimeout(10)
        got = theirs.recv(65536)
        print("log ok" if b"roceshim[" in got else "log got %r" % got)


if __name__ == "__main__":
    main()
