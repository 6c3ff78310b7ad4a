# SPDX-License-Identifier: MIT
"""A forking server whose client is gone before the server accepts, as in
CPython's test_socketserver (ErrorHandlerTest): the client connects,
writes its request (or nothing), and closes; the server then accepts,
forks a handler, and closes its own copy.  Over TCP the handler reads the
request and EOF at once, and its shutdown() and close() succeed.  The
client is this process, or another that exits once it has closed.

    fork_closed_peer.py ADDR [--bind ADDR] [--rounds N]
        per round, request size (0 and 64 KiB) and client: prints "round R
        size S client C HANDLER-RESULT ms N conn ROW exit E", where C is
        "same" or "exits", HANDLER-RESULT is "ok" when the handler read
        the whole request, then EOF, and shut down and closed without an
        error, and ms is the time from accept() until the handler has
        exited.  ROW: the accepted connection's stats row, taken in the
        server before the fork.  E: the exiting client's status, or "-".
"""
import argparse
import hashlib
import os
import socket
import subprocess
import sys
import time

from own_stats import row


def handler(conn, digest, result):
    got = hashlib.sha256()
    try:
        while True:
            more = conn.recv(65536)
            if not more:
                break
            got.update(more)
        conn.shutdown(socket.SHUT_WR)
        conn.close()
        ok = got.hexdigest() == digest
        msg = "ok" if ok else "wrong-bytes"
    except OSError as e:
        msg = "error:" + (os.strerror(e.errno) if e.errno else repr(e))
    with open(result, "w") as f:
        f.write(msg.replace(" ", "_"))


CLIENT = """
import socket, sys
src = (sys.argv[3], 0) if sys.argv[3] else None
with socket.create_connection((sys.argv[1], int(sys.argv[2])),
                              source_address=src) as client:
    client.sendall(sys.stdin.buffer.read())
"""


def one_round(args, size, client_exits, result):
    request = os.urandom(size)
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(5)
    src = (args.bind, 0) if args.bind else None
    proc = None
    if client_exits:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, lsn.getsockname()[0],
             str(lsn.getsockname()[1]), args.bind or ""],
            stdin=subprocess.PIPE)
        proc.stdin.write(request)
        proc.stdin.close()
    else:
        with socket.create_connection(lsn.getsockname(),
                                      source_address=src) as client:
            client.sendall(request)
    time.sleep(0.2)
    conn, _ = lsn.accept()
    seen = row(conn.fileno())
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            lsn.close()
            handler(conn, hashlib.sha256(request).hexdigest(), result)
        finally:
            os._exit(0)
    conn.close()
    lsn.close()
    os.waitpid(pid, 0)
    ms = (time.monotonic() - start) * 1000
    with open(result) as f:
        outcome = f.read()
    os.unlink(result)
    status = "-" if proc is None else str(proc.wait(timeout=30))
    return outcome, ms, seen, status


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--bind")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--result", default="fork_closed_peer.result")
    args = p.parse_args()
    for r in range(args.rounds):
        for size in (0, 65536):
            for exits in (False, True):
                outcome, ms, seen, status = one_round(args, size, exits,
                                                      args.result)
                print("round %d size %d client %s %s ms %.0f conn %s exit %s"
                      % (r, size, "exits" if exits else "same", outcome, ms,
                         seen, status), flush=True)


if __name__ == "__main__":
    sys.exit(main())
