# SPDX-License-Identifier: MIT
"""A server hands a connection to a program it execs (inetd, CGI) while
the client is stopped (SIGSTOP, as by Ctrl-Z, a debugger, a frozen
container).  Over TCP nothing notices: the client resumes and talks to the
new program.

    stopped_peer.py server ADDR GATE [--fork]
        prints "port N"; accepts one connection, reads "hi", writes "ok",
        waits for the file GATE (the client's pid, written once it is
        about to stop) and for the client to be stopped, writes
        PAYLOAD_BYTES (less than a ring starts
        at: the stopped client's ring must take them), then puts the
        connection on its stdin and stdout and execs itself as the
        handler.  With --fork, a fork child is the handler instead, and
        the server keeps its copy of the connection open until
        PARENT_LINGER_S after the child ended (a prefork master that
        holds on to what it handed over).
    stopped_peer.py handler GATE_PID
        writes GREETING, wakes the client (SIGCONT), reads DATA_BYTES and
        writes their SHA-256; prints how each step went.
    stopped_peer.py client ADDR PORT GATE [--bind ADDR]
        connects, writes "hi", reads "ok", writes its pid to GATE and
        stops itself.  Once woken, reads the payload and the greeting,
        writes DATA_BYTES and reads their SHA-256.  Prints "read N",
        "prefix yes|no" (whether every byte read is what the server
        wrote) and "end ok|eof|ERROR" (ok: the whole exchange; eof: the
        stream ended early without an error; else the error's name).
"""
import argparse
import hashlib
import os
import signal
import socket
import sys
import time

from peer import connect

PAYLOAD_BYTES = 16 << 10
GREETING = b"handler ready\n"
DATA_BYTES = 1 << 20
PARENT_LINGER_S = 3


def payload():
    return bytes(i % 251 for i in range(PAYLOAD_BYTES))


def stopped(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def wait_gate(gate):
    """The client's pid, once the client is stopped."""
    while True:
        try:
            with open(gate) as f:
                pid = int(f.read())
            break
        except (OSError, ValueError):
            time.sleep(0.01)
    while not stopped(pid):
        time.sleep(0.01)
    return pid


def server(args):
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(1)
    print("port", lsn.getsockname()[1], flush=True)
    s, _ = lsn.accept()
    if s.recv(2) != b"hi":
        sys.exit("server: no hi")
    s.sendall(b"ok")
    pid = wait_gate(args.gate)
    s.sendall(payload())
    if args.fork:
        child = os.fork()
        if child == 0:
            lsn.close()
            handle(s.fileno(), s.fileno(), pid)
            os._exit(0)
        os.waitpid(child, 0)
        time.sleep(PARENT_LINGER_S)
        return
    os.dup2(s.fileno(), 0)
    os.dup2(s.fileno(), 1)
    s.close()
    lsn.close()
    print("server: exec", file=sys.stderr, flush=True)
    os.execv(sys.executable,
             [sys.executable, os.path.abspath(__file__), "handler", str(pid)])


def handle(rfd, wfd, pid):
    step = "greeting"
    try:
        os.write(wfd, GREETING)
        os.kill(pid, signal.SIGCONT)
        step = "data"
        got = b""
        while len(got) < DATA_BYTES:
            chunk = os.read(rfd, DATA_BYTES - len(got))
            if not chunk:
                break
            got += chunk
        os.write(wfd, hashlib.sha256(got).digest())
        print("handler: got", len(got), file=sys.stderr, flush=True)
    except OSError as e:
        print("handler:", step, type(e).__name__, file=sys.stderr,
              flush=True)
        os.kill(pid, signal.SIGCONT)
        after_error(rfd, wfd)


def after_error(rfd, wfd):
    """What a socket says once it has reported its reset."""
    try:
        os.write(wfd, GREETING)
        print("handler: write again ok", file=sys.stderr, flush=True)
    except OSError as e:
        print("handler: write again", type(e).__name__, file=sys.stderr,
              flush=True)
    try:
        print("handler: read again", len(os.read(rfd, 1)), file=sys.stderr,
              flush=True)
    except OSError as e:
        print("handler: read again", type(e).__name__, file=sys.stderr,
              flush=True)


def handler(args):
    handle(0, 1, args.pid)


def recv_exactly(s, n, got):
    while len(got) < n:
        chunk = s.recv(n - len(got))
        if not chunk:
            return False
        got += chunk
    return True


def client(args):
    s = connect(args)
    s.sendall(b"hi")
    if s.recv(2) != b"ok":
        sys.exit("client: no ok")
    with open(args.gate + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(args.gate + ".tmp", args.gate)
    os.kill(os.getpid(), signal.SIGSTOP)
    s.settimeout(60)
    expected = payload() + GREETING
    got = bytearray()
    end = "ok"
    try:
        if not recv_exactly(s, len(expected), got):
            end = "eof"
        else:
            data = os.urandom(DATA_BYTES)
            s.sendall(data)
            digest = bytearray()
            if not recv_exactly(s, 32, digest):
                end = "eof"
            elif digest != hashlib.sha256(data).digest():
                end = "bad_digest"
    except OSError as e:
        end = type(e).__name__
    print("read", len(got))
    print("prefix", "yes" if expected.startswith(got) else "no")
    print("end", end, flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="role", required=True)
    sp = sub.add_parser("server")
    sp.add_argument("addr")
    sp.add_argument("gate")
    sp.add_argument("--fork", action="store_true")
    hp = sub.add_parser("handler")
    hp.add_argument("pid", type=int)
    cp = sub.add_parser("client")
    cp.add_argument("addr")
    cp.add_argument("port", type=int)
    cp.add_argument("gate")
    cp.add_argument("--bind")
    args = p.parse_args()
    {"server": server, "handler": handler, "client": client}[args.role](args)


if __name__ == "__main__":
    main()
