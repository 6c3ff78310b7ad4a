#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Does something to roceshim's log file descriptor, then writes a file and
a socket; run under the preload with ROCESHIM_LOG_FILE=DIR/log.%p and
ROCESHIM_LOG_LEVEL=debug, so that the connect logs a line afterwards.

    log_fd.py DIR STEP

STEP: closerange (os.closerange over every number from 3), closefrom
(libc's closefrom(3)), close_range_syscall (syscall(SYS_close_range)),
close (close() of the log's own number), dup2 (dup2() of the program's
file onto the log's number).  Prints "file ok", "socket ok" and "log ok"
when the program's file and the server's socket received only the
program's bytes and the log file still received the connect's line, and
for "close", the error close() gave.
"""
import ctypes
import os
import socket
import sys

SYS_CLOSE_RANGE = 436
libc = ctypes.CDLL(None, use_errno=True)


def log_fds(directory):
    """The numbers of this process's descriptors open on its log file."""
    log = os.path.join(directory, "log.%d" % os.getpid())
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + name) == log:
                found.append(int(name))
        except OSError:
            pass
    return log, found


def main():
    directory, step = sys.argv[1], sys.argv[2]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    log, (log_fd,) = log_fds(directory)
    user_path = os.path.join(directory, "user.%d" % os.getpid())
    user = os.open(user_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    if step == "closerange":
        os.closerange(3, 1 << 20)
    elif step == "closefrom":
        libc.closefrom(3)
    elif step == "close_range_syscall":
        libc.syscall(SYS_CLOSE_RANGE, 3, ctypes.c_uint(0xffffffff), 0)
    elif step == "close":
        try:
            os.close(log_fd)
            print("close ok")
        except OSError as e:
            print("close", e.strerror)
    elif step == "dup2":
        os.dup2(user, log_fd)
        user = log_fd
    if step in ("closerange", "closefrom", "close_range_syscall"):
        listener.detach()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        user = os.open(user_path, os.O_WRONLY | os.O_TRUNC)
    os.write(user, b"user data\n")
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    client.sendall(b"hello\n")
    client.close()
    got = b""
    while True:
        chunk = server.recv(4096)
        if not chunk:
            break
        got += chunk
    os.write(user, b"more\n")
    os.close(user)
    with open(user_path, "rb") as f:
        print("file", "ok" if f.read() == b"user data\nmore\n" else "WRONG")
    print("socket", "ok" if got == b"hello\n" else "WRONG %r" % got)
    with open(log) as f:
        print("log", "ok" if " connect to 127.0.0.1:" in f.read() else
              "MISSING")


if __name__ == "__main__":
    main()
