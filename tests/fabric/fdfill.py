# SPDX-License-Identifier: MIT
"""Connections in one process until it runs out of descriptors, as a
program that holds many does (the scale issue describes it).

    fdfill.py ADDR [--max N] [--bytes N]

Connects to its own listener on ADDR and accepts, a pair at a time, with a
byte each way, until socket(), connect() or accept() fails with EMFILE, or
N pairs.  Then every pair echoes BYTES random bytes both ways, and one
select() over every accepted socket below FD_SETSIZE, after a byte was
sent to each, must find them all readable.  Prints:

    pairs P                  the pairs it holds
    stop REASON              EMFILE, or max
    errors E                 other errors of any call (must be 0)
    bytes ok|FAILED          every echoed byte came back
    select ok|FAILED K of N  readable sockets found by select()
    path TRANSPORT REASON C  connection ends per transport and reason,
                             from roceshim-stat (when ROCESHIM_STAT is set),
                             the last three pairs closed to let it run
"""
import argparse
import collections
import errno
import json
import os
import select
import socket
import subprocess
import sys

from own_stats import connections


def stop_reason(err):
    return "EMFILE" if err.errno == errno.EMFILE else None


def open_pairs(addr, limit, errors):
    lst = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    lst.bind((addr, 0))
    lst.listen(4096)
    pairs = []
    while len(pairs) < limit:
        try:
            cli = socket.socket(lst.family)
        except OSError as err:
            if stop_reason(err):
                return lst, pairs, stop_reason(err)
            raise
        try:
            cli.connect(lst.getsockname())
            srv, _ = lst.accept()
        except OSError as err:
            cli.close()
            if stop_reason(err):
                return lst, pairs, stop_reason(err)
            errors.append("connect/accept: %s" % err)
            return lst, pairs, "error"
        try:
            cli.sendall(b"c")
            srv.sendall(b"s")
            if srv.recv(1) != b"c" or cli.recv(1) != b"s":
                errors.append("pair %d: wrong first byte" % len(pairs))
        except OSError as err:
            errors.append("pair %d: %s" % (len(pairs), err))
        pairs.append((cli, srv))
    return lst, pairs, "max"


def read_exactly(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def echo_all(pairs, nbytes, errors):
    ok = True
    for i, (cli, srv) in enumerate(pairs):
        data = os.urandom(nbytes)
        try:
            cli.sendall(data)
            got = read_exactly(srv, nbytes)
            srv.sendall(got)
            back = read_exactly(cli, nbytes)
        except OSError as err:
            errors.append("echo %d: %s" % (i, err))
            ok = False
            continue
        ok = ok and got == data and back == data
    return ok


def select_all(pairs):
    watched = [srv for _, srv in pairs if srv.fileno() < 1024]
    for cli, srv in pairs:
        if srv in watched:
            cli.sendall(b"x")
    found = set()
    for _ in range(50):
        rd, _, _ = select.select([s for s in watched if s not in found],
                                 [], [], 0.2)
        found.update(rd)
        if len(found) == len(watched):
            break
    for srv in found:
        srv.recv(1)
    return len(found), len(watched)


def paths():
    return collections.Counter((c["transport"], c["fallback"])
                               for c in connections())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("--max", type=int, default=100000)
    ap.add_argument("--bytes", type=int, default=4096)
    args = ap.parse_args()
    errors = []
    lst, pairs, why = open_pairs(args.addr, args.max, errors)
    print("pairs %d" % len(pairs))
    print("stop %s" % why)
    ok = echo_all(pairs, args.bytes, errors)
    print("bytes %s" % ("ok" if ok else "FAILED"))
    found, watched = select_all(pairs)
    print("select %s %d of %d" % ("ok" if found == watched else "FAILED",
                                  found, watched))
    # roceshim-stat runs as a child, which takes a few descriptors.
    lst.close()
    for cli, srv in pairs[-3:]:
        cli.close()
        srv.close()
    del pairs[-3:]
    for (transport, reason), count in sorted(paths().items()):
        print("path %s %s %d" % (transport, reason, count))
    for err in errors:
        print("error: %s" % err)
    print("errors %d" % len(errors), flush=True)
    for cli, srv in pairs:
        cli.close()
        srv.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
