#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Opens a connection to its own listener at $PROBE_ADDR (else 127.0.0.1),
then runs `cat` with the server end as its stdin and stdout (Python's
subprocess uses vfork; the child closes every other fd), sends 64 KiB
through it and checks the echo byte for byte; then checks that a second
connection, made after the child is gone, works, and that a fork child
made after it tracks its own connection (its stats segment appears).
Prints "echo ok", "after ok" and "forked ok".  With STAT and OUT, writes
`STAT --json` of this process to OUT at the end.

usage: vfork_probe.py [STAT OUT]
"""
import os
import socket
import subprocess
import sys

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
print("after", "ok" if srv2.recv(4) == b"ping" else "differs", flush=True)
pid = os.fork()
if pid == 0:
    own = socket.create_connection(lst.getsockname())
    tracked = os.path.exists("/dev/shm/roceshim-%d" % os.getpid())
    own.close()
    os._exit(0 if tracked else 1)
_, status = os.waitpid(pid, 0)
print("forked", "ok" if status == 0 else "untracked", flush=True)
if len(sys.argv) > 2:
    out = os.popen("%s --json %d" % (sys.argv[1], os.getpid())).read()
    open(sys.argv[2], "w").write(out)
