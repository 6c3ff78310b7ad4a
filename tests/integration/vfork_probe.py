#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Opens a connection to its own listener at $PROBE_ADDR (else 127.0.0.1),
then runs `cat` with the server end as its stdin and stdout (Python's
subprocess uses vfork), sends 64 KiB through it and checks the echo byte
for byte; then checks that the client end of a second connection, made
after the child is gone, still works.  Prints "echo ok" and "after ok".
"""
import os
import socket
import subprocess

ADDR = os.environ.get("PROBE_ADDR", "127.0.0.1")
lst = socket.socket()
lst.bind((ADDR, 0))
lst.listen()
cli = socket.create_connection(lst.getsockname())
srv, _ = lst.accept()
cat = subprocess.Popen(["cat"], stdin=srv, stdout=srv, close_fds=True)
srv.close()
payload = os.urandom(64 << 10)
cli.sendall(payload)
cli.shutdown(socket.SHUT_WR)
got = b""
while True:
    data = cli.recv(65536)
    if not data:
        break
    got += data
assert cat.wait() == 0, "cat failed"
print("echo", "ok" if got == payload else "differs (%d bytes)" % len(got))
cli2 = socket.create_connection(lst.getsockname())
srv2, _ = lst.accept()
cli2.sendall(b"ping")
print("after", "ok" if srv2.recv(4) == b"ping" else "differs")
