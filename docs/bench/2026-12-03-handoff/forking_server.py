# SPDX-License-Identifier: MIT
"""A server that forks a handler per connection, as PostgreSQL and sshd
do: the parent accepts and closes its copy; the child reads a line and
answers "ok LINE".  Usage: forking_server.py ADDR PORT"""
import os
import signal
import socket
import sys

signal.signal(signal.SIGCHLD, signal.SIG_IGN)
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((sys.argv[1], int(sys.argv[2])))
ls.listen(128)
while True:
    conn, _ = ls.accept()
    if os.fork() == 0:
        ls.close()
        line = b""
        while not line.endswith(b"\n"):
            data = conn.recv(65536)
            if not data:
                break
            line += data
        if line:
            conn.sendall(b"ok " + line)
        conn.close()
        os._exit(0)
    conn.close()
