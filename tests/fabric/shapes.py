# SPDX-License-Identifier: MIT
"""Program shapes that move a connection between processes, as real
servers and tools do, each checked byte for byte.

    shapes.py server SHAPE ADDR     a server of that shape on ADDR; prints
                                    "port N" once it listens
    shapes.py client ADDR PORT [--conns N] [--bytes N]
                                    N connections at once, each sending N
                                    bytes and reading their echo while it
                                    sends; prints "echo ok" or "echo
                                    MISMATCH", and each connection's stats
                                    row as "conn TRANSPORT REASON[ moved:X]"
    shapes.py idle ADDR PORT        a connection that sends nothing and
                                    reads until EOF; prints "idle eof"
    shapes.py SHAPE ADDR PORT       a client that moves its own connection
                                    mid-transfer (daemon, spawn, exec,
                                    pass) against an echo server

Server shapes (all echo every byte back until EOF):
  forking     socketserver.ForkingTCPServer: accept, fork a handler
  prefork     listen, fork 8 workers that accept (the parent keeps the
              listener)
  exec        accept, fork, exec cat with the socket as stdin and stdout
  subprocess  accept, subprocess.Popen(cat) with the socket as its stdio
  workers     listen, start 2 workers as new programs that accept on the
              listener, as a supervisor that execs its workers does
              (subprocess.Popen with pass_fds, by a bare name whose first
              PATH entry fails); the parent never accepts
  spawned     the same with one worker, started by posix_spawn with the
              listener dup'd to fd 20, through a shell that execs it
  echo        one process, a thread per connection
  bgsave      as echo, but its first connection it never writes to: it
              forks a child that exits at once (a background save, as
              redis does), then closes that connection 3 s later

Client shapes (the connection is mid-transfer both ways when it moves:
bytes sent whose echo is unread, and more sent after):
  daemon      daemon(3): the daemon goes on with the connection
  spawn       posix_spawn of a helper that relays stdin to the socket and
              the socket to stdout, with the socket as its fd 3
  exec        the process execs itself, keeping the socket
  pass        the socket goes to another process over a unix socket
              (SCM_RIGHTS), which goes on with it
"""
import argparse
import ctypes
import json
import os
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

from own_stats import row, stats

def echo_loop(conn):
    while True:
        d = conn.recv(65536)
        if not d:
            break
        conn.sendall(d)


class Echo(socketserver.BaseRequestHandler):
    """Echoes, then prints how its own stats show the connection it took
    over: "handler TRANSPORT REASON[ moved:X] pinned ROW PROCESS"."""
    def handle(self):
        echo_loop(self.request)
        fd = self.request.fileno()
        report = stats()
        ends = [c for c in report.get("connections", []) if c["fd"] == fd]
        print("handler %s pinned %d %d" % (
            row(fd), ends[-1]["pinned_bytes"] if ends else -1,
            report.get("global", {}).get("rings", {}).get("pinned_bytes",
                                                          -1)),
            flush=True)


def listener(addr):
    ls = socket.socket()
    ls.bind((addr, 0))
    ls.listen(64)
    print("port %d" % ls.getsockname()[1], flush=True)
    return ls


def server(args):
    if args.shape == "forking":
        socketserver.ForkingTCPServer.allow_reuse_address = True
        srv = socketserver.ForkingTCPServer((args.addr, 0), Echo)
        print("port %d" % srv.server_address[1], flush=True)
        srv.serve_forever()
    ls = listener(args.addr)
    fd = ls.fileno()
    me = os.path.abspath(__file__)
    if args.shape == "workers":
        path = "/nonexistent:" + os.path.dirname(sys.executable)
        name = os.path.basename(sys.executable)
        for _ in range(2):
            subprocess.Popen([name, me, "worker", str(fd)], pass_fds=[fd],
                             env=dict(os.environ, PATH=path))
    if args.shape == "spawned":
        os.posix_spawn("/bin/sh", ["sh", "-c", 'exec "$0" "$@"',
                                   sys.executable, me, "worker", "20"],
                       os.environ,
                       file_actions=[(os.POSIX_SPAWN_DUP2, fd, 20)])
    if args.shape in ("workers", "spawned"):
        while True:
            time.sleep(60)
    if args.shape == "prefork":
        # The parent keeps the listener, as a server's master does.
        for _ in range(8):
            if os.fork() == 0:
                while True:
                    conn, _ = ls.accept()
                    echo_loop(conn)
                    conn.close()
        while True:
            os.wait()
    first = True
    while True:
        conn, _ = ls.accept()
        if args.shape == "bgsave" and first:
            first = False
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            time.sleep(3)
            conn.close()
            continue
        if args.shape in ("echo", "bgsave"):
            threading.Thread(target=echo_loop, args=(conn,),
                             daemon=True).start()
            continue
        if args.shape == "subprocess":
            subprocess.Popen(["cat"], stdin=conn, stdout=conn)
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            os.dup2(conn.fileno(), 0)
            os.dup2(conn.fileno(), 1)
            os.execvp("cat", ["cat"])
        conn.close()


def worker(args):
    """A worker exec'd with the listener as fd: accepts and echoes."""
    ls = socket.socket(fileno=int(args.fd))
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=echo_loop, args=(conn,), daemon=True).start()


def exchange(s, nbytes, label):
    """Sends nbytes while reading their echo; prints and returns ok."""
    payload = os.urandom(nbytes)
    got = bytearray()

    def reader():
        while len(got) < nbytes:
            d = s.recv(65536)
            if not d:
                break
            got.extend(d)
    t = threading.Thread(target=reader)
    t.start()
    s.sendall(payload)
    t.join(120)
    ok = bytes(got) == payload
    # One write: the lines of threads that end together stay apart.
    sys.stdout.write("%s %s\n" % (label, "ok" if ok else "MISMATCH %d of %d"
                                   % (len(got), nbytes)))
    sys.stdout.flush()
    return ok


def client(args):
    socks = [socket.create_connection((args.addr, args.port))
             for _ in range(args.conns)]
    results = [False] * args.conns

    def one(i):
        results[i] = exchange(socks[i], args.bytes, "conn%d" % i)
    threads = [threading.Thread(target=one, args=(i,))
               for i in range(args.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    for s in socks:
        print("conn %s" % row(s.fileno()), flush=True)
        s.close()
    print("echo %s" % ("ok" if all(results) else "MISMATCH"), flush=True)
    return 0 if all(results) else 1


def idle(args):
    s = socket.create_connection((args.addr, args.port))
    while s.recv(65536):
        pass
    print("idle eof", flush=True)


def read_exactly(s, n):
    got = bytearray()
    while len(got) < n:
        d = s.recv(n - len(got))
        if not d:
            break
        got.extend(d)
    return bytes(got)


def half_done(s):
    """Sends 60000 bytes and reads 20000 of their echo: the rest is unread
    when the connection moves.  Returns (sent, read)."""
    sent = os.urandom(60000)
    s.sendall(sent)
    return sent, read_exactly(s, 20000)


def finish(s, sent, read, label):
    """Reads the rest of the echo, then a whole exchange more."""
    rest = read_exactly(s, len(sent) - len(read))
    ok = read + rest == sent
    print("%s_rest %s" % (label, "ok" if ok else "MISMATCH"), flush=True)
    return exchange(s, 200000, label) and ok


def daemon(args):
    s = socket.create_connection((args.addr, args.port))
    print("before %s" % row(s.fileno()), flush=True)
    sent, read = half_done(s)
    out = args.out
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.daemon(1, 1):
        print("daemon failed", flush=True)
        return 1
    # The daemon: its parent has exited; it reports to a file.
    with open(out, "w") as f:
        sys.stdout = f
        ok = finish(s, sent, read, "daemon")
        print("after %s" % row(s.fileno()), flush=True)
        print("done", flush=True)
    return 0 if ok else 1


def spawn(args):
    s = socket.create_connection((args.addr, args.port))
    print("before %s" % row(s.fileno()), flush=True)
    sent, read = half_done(s)
    relay = [sys.executable, os.path.abspath(__file__), "relay"]
    acts = [(os.POSIX_SPAWN_DUP2, s.fileno(), 3)]
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    acts += [(os.POSIX_SPAWN_DUP2, r_in, 0), (os.POSIX_SPAWN_DUP2, w_out, 1)]
    pid = os.posix_spawn(relay[0], relay, os.environ, file_actions=acts)
    os.close(r_in)
    os.close(w_out)
    s.close()
    # The helper carries the connection now: this end talks through it.
    to_helper = os.fdopen(w_in, "wb", buffering=0)
    from_helper = os.fdopen(r_out, "rb", buffering=0)
    rest = b""
    while len(rest) < len(sent) - len(read):
        d = from_helper.read(len(sent) - len(read) - len(rest))
        if not d:
            break
        rest += d
    ok = read + rest == sent
    print("spawn_rest %s" % ("ok" if ok else "MISMATCH"), flush=True)
    payload = os.urandom(100000)
    got = bytearray()

    def reader():
        while len(got) < len(payload):
            d = from_helper.read(65536)
            if not d:
                break
            got.extend(d)
    t = threading.Thread(target=reader)
    t.start()
    to_helper.write(payload)
    t.join(120)
    ok &= bytes(got) == payload
    print("spawn %s" % ("ok" if bytes(got) == payload else "MISMATCH"),
          flush=True)
    to_helper.close()
    os.waitpid(pid, 0)
    return 0 if ok else 1


def relay(args):
    """The spawned helper: fd 0 to the socket on fd 3, the socket to 1."""
    s = socket.socket(fileno=3)

    def up():
        while True:
            d = os.read(0, 65536)
            if not d:
                s.shutdown(socket.SHUT_WR)
                return
            s.sendall(d)
    t = threading.Thread(target=up, daemon=True)
    t.start()
    while True:
        d = s.recv(65536)
        if not d:
            break
        os.write(1, d)
    return 0


def save_state(sent, read):
    """What a process that takes over the connection must know, in a
    file (too long for an argument); returns its path."""
    fd, path = tempfile.mkstemp(prefix="shapes-")
    with os.fdopen(fd, "w") as f:
        f.write("%s:%s" % (sent.hex(), read.hex()))
    return path


def load_state(path):
    with open(path) as f:
        sent, read = f.read().split(":")
    os.unlink(path)
    return bytes.fromhex(sent), bytes.fromhex(read)


def exec_self(args):
    if args.fd is None:
        s = socket.create_connection((args.addr, args.port))
        print("before %s" % row(s.fileno()), flush=True)
        sent, read = half_done(s)
        os.set_inheritable(s.fileno(), True)
        state = save_state(sent, read)
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__),
                                  "exec", args.addr, str(args.port),
                                  "--fd", "%d:%s" % (s.fileno(), state)])
    fd, state = args.fd.split(":")
    s = socket.socket(fileno=int(fd))
    sent, read = load_state(state)
    ok = finish(s, sent, read, "exec")
    print("after %s" % row(s.fileno()), flush=True)
    return 0 if ok else 1


def pass_fd(args):
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        # The receiver: it never had the connection, it is sent it.
        a.close()
        msg, fds, _, _ = socket.recv_fds(b, 4096, 1)
        s = socket.socket(fileno=fds[0])
        sent, read = load_state(msg.decode())
        ok = finish(s, sent, read, "passed")
        print("receiver %s" % row(s.fileno()), flush=True)
        os._exit(0 if ok else 1)
    b.close()
    s = socket.create_connection((args.addr, args.port))
    print("before %s" % row(s.fileno()), flush=True)
    sent, read = half_done(s)
    socket.send_fds(a, [save_state(sent, read).encode()], [s.fileno()])
    print("sender %s" % row(s.fileno()), flush=True)
    s.close()
    _, status = os.waitpid(pid, 0)
    print("receiver_exit %d" % os.waitstatus_to_exitcode(status), flush=True)
    return os.waitstatus_to_exitcode(status)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("server")
    sp.add_argument("shape", choices=("forking", "prefork", "exec",
                                      "subprocess", "echo", "workers",
                                      "spawned", "bgsave"))
    sp.add_argument("addr")
    cp = sub.add_parser("client")
    cp.add_argument("addr")
    cp.add_argument("port", type=int)
    cp.add_argument("--conns", type=int, default=6)
    cp.add_argument("--bytes", type=int, default=200000)
    for name in ("daemon", "spawn", "exec", "pass"):
        q = sub.add_parser(name)
        q.add_argument("addr")
        q.add_argument("port", type=int)
        q.add_argument("--out", default="/dev/null")
        q.add_argument("--fd")
    ip = sub.add_parser("idle")
    ip.add_argument("addr")
    ip.add_argument("port", type=int)
    sub.add_parser("relay")
    sub.add_parser("worker").add_argument("fd")
    args = p.parse_args()
    fn = {"server": server, "client": client, "daemon": daemon,
          "spawn": spawn, "exec": exec_self, "pass": pass_fd,
          "relay": relay, "worker": worker, "idle": idle}[args.cmd]
    return fn(args) or 0


if __name__ == "__main__":
    sys.exit(main())
