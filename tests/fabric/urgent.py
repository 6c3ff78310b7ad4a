# SPDX-License-Identifier: MIT
"""Urgent data (MSG_OOB) on a connection this process holds both ends of,
as telnet and ftp clients send it.

    urgent.py ADDR

The client sends "ab", the urgent byte "!", then "cd".  The server waits
for it with select() and poll(), reads the urgent byte with MSG_OOB, then
the rest inline.  Then the same with SO_OOBINLINE on a second connection.
Prints one line per observation (compared against kernel TCP by
test-urgent.sh) and, when ROCESHIM_STAT is set, "rows TRANSPORT:DOWNGRADE
..." for the connection ends.
"""
import json
import os
import select
import socket
import subprocess
import sys

from own_stats import connections


def pair(listener):
    c = socket.create_connection(listener.getsockname())
    s, _ = listener.accept()
    return c, s


def read_inline(s, n):
    data = b""
    s.settimeout(5)
    while len(data) < n:
        b = s.recv(100)
        if not b:
            break
        data += b
    return data


def urgent(listener):
    c, s = pair(listener)
    c.sendall(b"ab")
    c.send(b"!", socket.MSG_OOB)
    c.sendall(b"cd")
    r = select.select([s], [], [s], 5.0)
    print("select readable", bool(r[0]), "exceptional", bool(r[2]))
    p = select.poll()
    p.register(s, select.POLLPRI | select.POLLIN)
    print("poll", p.poll(5000))
    print("oob", s.recv(1, socket.MSG_OOB))
    print("inline", read_inline(s, 4))
    s.settimeout(None)
    try:
        s.recv(1, socket.MSG_OOB)
        print("second oob read: no error")
    except OSError as e:
        print("second oob read: errno", e.errno)
    return [c, s]


def inline(listener):
    c, s = pair(listener)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
    c.sendall(b"ab")
    c.send(b"!", socket.MSG_OOB)
    c.sendall(b"cd")
    print("oobinline", read_inline(s, 5))
    return [c, s]


def rows():
    if not os.environ.get("ROCESHIM_STAT"):
        return
    print("rows", " ".join("%s:%s" % (c["transport"], c["downgrade"])
                           for c in connections()))


def main():
    listener = socket.create_server((sys.argv[1], 0))
    held = urgent(listener) + inline(listener)
    rows()
    for sock in held:
        sock.close()


if __name__ == "__main__":
    main()
