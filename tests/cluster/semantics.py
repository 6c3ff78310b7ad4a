#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""TCP socket semantics with the two ends on different hosts.

  semantics.py serve ADDR PORT        the server halves, on one host:
                                      a control listener on PORT, the data
                                      listener on PORT + 1, and one of its
                                      own from PORT + 3 on for each case
                                      whose connection another process
                                      takes over (HANDED_OVER)
  semantics.py run ADDR PORT [CASE...] the client halves, on another host,
                                      against "serve" at ADDR

Each case is one behaviour of kernel TCP: the client tells the server
over the control connection which case comes next, both run their halves
on a fresh data connection, and the client prints one line,
"case NAME: what both ends saw", the same whatever carries the bytes.
Run once without roceshim and once under it: the "case" lines must be
identical.  Under roceshim each end also prints, per case, the stats row
of its data connection while it was open: "row NAME client|server
TRANSPORT FALLBACK [moved:CAUSE]", for the burst of
many_concurrent_connects its ends by transport and the reasons of those
on TCP: "burst rdma N tcp M [REASON:N...]", and at the end the client's
connections by transport: "connections rdma N tcp M".  PORT + 2 must
have no listener.

roceshim refuses RDMA for a while on a port whose connections another
process took over (reason handoff), so each such case has a port of its
own; handed_over_port_refuses_rdma then connects to the port of the first.
"""
import asyncio
import collections
import errno
import hashlib
import json
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

SETTLE = 1.0       # for an RST or FIN to cross the wire


def pattern(n, seed=0):
    block = bytes((i * 7 + seed) & 0xFF for i in range(65536))
    return (block * (n // len(block) + 1))[:n]


def err_name(exc):
    return errno.errorcode.get(exc.errno, str(exc.errno)) \
        if isinstance(exc, OSError) and exc.errno else type(exc).__name__


def recv_all(sock):
    parts = []
    while True:
        data = sock.recv(1 << 20)
        if not data:
            return b"".join(parts)
        parts.append(data)


def recv_exact(sock, n):
    data = sock.recv(n, socket.MSG_WAITALL)
    if len(data) != n:
        raise EOFError("%d of %d bytes" % (len(data), n))
    return data


def digest(data):
    return hashlib.sha256(data).hexdigest()[:16]


def own_stats():
    """roceshim-stat --json of this process; None without roceshim."""
    stat = os.environ.get("ROCESHIM_STAT")
    if not stat or "roceshim" not in os.environ.get("LD_PRELOAD", ""):
        return None
    env = dict(os.environ)
    env.pop("LD_PRELOAD")
    # posix_spawn, not fork: a connection open across a fork moves to TCP
    # as it closes (a child may hold it), and this look must change nothing.
    # Python's sockets are close-on-exec, so none reaches the tool.
    out = subprocess.run([stat, "--json", str(os.getpid())], env=env,
                         capture_output=True, text=True,
                         close_fds=False).stdout
    return json.loads(out or "{}")


def stats_row(sock):
    """Transport and fallback of sock's stats row, None without roceshim."""
    stats = own_stats()
    if stats is None:
        return None
    rows = [r for r in stats.get("connections", [])
            if r["fd"] == sock.fileno() and r["state"] == "open"
            and r["role"] != "listener"]
    if not rows:
        return "missing missing"
    row = rows[-1]
    moved = row.get("downgrade", "none")
    return "%s %s%s" % (row["transport"], row["fallback"],
                        "" if moved == "none" else " moved:" + moved)


class Control:
    """Lines of JSON on the control connection."""

    def __init__(self, sock):
        self.sock = sock
        self.file = sock.makefile("rb")
        self.kept = None    # a case's reply that came instead of a step

    def send(self, **msg):
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def recv(self):
        line = self.file.readline()
        if not line:
            raise EOFError("control connection closed")
        return json.loads(line)


# ---------------------------------------------------------------------------
# Server halves: each gets the accepted data connection and the control
# channel, and returns what it saw (a string).
# ---------------------------------------------------------------------------

def echo_until_eof(conn):
    total = 0
    while True:
        data = conn.recv(1 << 20)
        if not data:
            return total
        conn.sendall(data)
        total += len(data)


def srv_echo(conn, ctl):
    n = echo_until_eof(conn)
    conn.close()
    return "echoed %d" % n


def srv_client_half_close(conn, ctl):
    n = len(recv_all(conn))
    conn.sendall(b"got %d" % n)
    conn.close()
    return "eof after %d" % n


def srv_server_half_close(conn, ctl):
    conn.shutdown(socket.SHUT_WR)
    n = len(recv_all(conn))
    conn.close()
    return "read %d after own shutdown" % n


def srv_close_unread(conn, ctl):
    select.select([conn], [], [], 30)
    conn.close()
    ctl.send(step="closed")
    return "closed with unread data"


def srv_linger_zero(conn, ctl):
    # Not before the client's connect() has returned: a reset that beats
    # it would make connect() itself fail, on kernel TCP too.
    select.select([conn], [], [], 30)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                    struct.pack("ii", 1, 0))
    conn.close()
    ctl.send(step="closed")
    return "closed with linger 0"


def srv_close_at_once(conn, ctl):
    conn.close()
    ctl.send(step="closed")
    return "closed"


def srv_peek_waitall(conn, ctl):
    peeked = conn.recv(5, socket.MSG_PEEK)
    whole = recv_exact(conn, 10)
    rest = recv_all(conn)
    conn.close()
    return "peek %r waitall %r rest %d" % (peeked, whole, len(rest))


def srv_forked_child(conn, ctl):
    pid = os.fork()
    if pid == 0:
        try:
            echo_until_eof(conn)
        finally:
            os._exit(0)
    conn.close()
    _, status = os.waitpid(pid, 0)
    return "child exit %d" % os.waitstatus_to_exitcode(status)


def srv_exec_cat(conn, ctl):
    proc = subprocess.Popen(["cat"], stdin=conn, stdout=conn)
    conn.close()
    return "cat exit %d" % proc.wait(60)


def srv_fd_passed(conn, ctl):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    helper = subprocess.Popen([sys.executable, __file__, "fd-helper"],
                              stdin=b, pass_fds=())
    b.close()
    socket.send_fds(a, [b"fd"], [conn.fileno()])
    conn.close()
    a.close()
    return "helper exit %d" % helper.wait(60)


def fd_helper():
    """Echoes on the connection it receives over stdin (SCM_RIGHTS)."""
    unix = socket.socket(fileno=0)
    _, fds, _, _ = socket.recv_fds(unix, 16, 1)
    conn = socket.socket(fileno=fds[0])
    echo_until_eof(conn)
    conn.close()


def srv_addresses(conn, ctl):
    ctl.send(peer=list(conn.getpeername()), local=list(conn.getsockname()))
    recv_all(conn)
    conn.close()
    return "reported"


def srv_silent(conn, ctl):
    recv_all(conn)
    conn.close()
    return "eof"


def srv_sendfile(conn, ctl):
    with tempfile.TemporaryFile() as f:
        f.write(pattern(3 << 20, 5))
        f.flush()
        sent = conn.sendfile(f, 0)
    conn.close()
    return "sendfile %d" % sent


def srv_chunks(conn, ctl):
    for i in range(10):
        conn.sendall(pattern(10000, i))
        time.sleep(0.05)
    conn.close()
    return "sent 10 chunks"


def srv_shutdown_rdwr(conn, ctl):
    time.sleep(0.2)
    conn.shutdown(socket.SHUT_RDWR)
    conn.close()
    return "shut down"


def srv_killed_holder(conn, ctl):
    select.select([conn], [], [], 30)     # the client's bytes arrive
    pid = os.fork()
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    conn.close()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    ctl.send(step="killed")
    return "holder killed"


SERVER = {
    "echo": srv_echo,
    "client_half_close": srv_client_half_close,
    "server_half_close": srv_server_half_close,
    "close_with_unread_data_resets": srv_close_unread,
    "linger_zero_resets": srv_linger_zero,
    "write_after_peer_close": srv_close_at_once,
    "peek_then_waitall": srv_peek_waitall,
    "forked_child_serves": srv_forked_child,
    "exec_cat_serves": srv_exec_cat,
    "fd_passed_to_another_process": srv_fd_passed,
    "handed_over_port_refuses_rdma": srv_echo,
    "addresses_agree": srv_addresses,
    "recv_timeout": srv_silent,
    "nonblocking_connect": srv_echo,
    "sendfile_arrives": srv_sendfile,
    "epoll_edge_triggered": srv_chunks,
    "shutdown_rdwr_gives_eof": srv_shutdown_rdwr,
    "killed_holder_resets": srv_killed_holder,
}


def serve_many(listener, n):
    """Accepts n connections and echoes on each until its EOF."""
    import selectors
    sel = selectors.DefaultSelector()
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ)
    accepted = done = 0
    while done < n:
        for key, _ in sel.select(60):
            if key.fileobj is listener:
                try:
                    conn, _ = listener.accept()
                except BlockingIOError:
                    continue
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ)
                accepted += 1
                continue
            conn = key.fileobj
            try:
                data = conn.recv(65536)
            except BlockingIOError:
                continue
            if data:
                conn.setblocking(True)
                conn.sendall(data)
                conn.setblocking(False)
            else:
                sel.unregister(conn)
                conn.close()
                done += 1
    listener.setblocking(True)
    return "served %d" % accepted


HANDED_OVER = ("forked_child_serves", "exec_cat_serves",
               "fd_passed_to_another_process", "killed_holder_resets")


def data_port(name, port):
    """The port of case name's data connection."""
    if name == "handed_over_port_refuses_rdma":
        name = HANDED_OVER[0]
    if name in HANDED_OVER:
        return port + 3 + HANDED_OVER.index(name)
    return port + 1


def serve(addr, port):
    ctl_listener = socket.create_server((addr, port))
    # Before the data listener: a client that finds it finds them all.
    listeners = {port + 3 + i: socket.create_server((addr, port + 3 + i))
                 for i in range(len(HANDED_OVER))}
    data_listener = socket.create_server((addr, port + 1), backlog=256)
    listeners[port + 1] = data_listener
    for listener in listeners.values():
        listener.settimeout(120)
    print("port %d" % port, flush=True)
    conn, _ = ctl_listener.accept()
    ctl = Control(conn)
    while True:
        try:
            msg = ctl.recv()
        except EOFError:
            return 0
        name = msg["case"]
        if name == "many_concurrent_connects":
            ctl.send(saw=serve_many(data_listener, msg["n"]), row=None)
            continue
        data, _ = listeners[data_port(name, port)].accept()
        row = stats_row(data)
        try:
            saw = SERVER[name](data, ctl)
        except Exception as exc:        # reported, and the run goes on
            saw = "error %s" % err_name(exc)
        ctl.send(saw=saw, row=row)


# ---------------------------------------------------------------------------
# Client halves: each gets a connected socket and the control channel, and
# returns what it saw.
# ---------------------------------------------------------------------------

def cli_echo(sock, ctl):
    sizes = [1, 1000, 65536, 1 << 20, 8 << 20]
    out = b"".join(pattern(n, i) for i, n in enumerate(sizes))

    def send():
        for i, n in enumerate(sizes):
            if i % 2:
                sock.sendmsg([pattern(n, i)[: n // 2],
                              pattern(n, i)[n // 2:]])
            else:
                sock.sendall(pattern(n, i))
        sock.shutdown(socket.SHUT_WR)
    sender = threading.Thread(target=send)
    sender.start()
    back = recv_all(sock)
    sender.join()
    return "%d bytes back, %s" % (len(back),
                                  "same" if back == out else "DIFFERENT")


def cli_client_half_close(sock, ctl):
    sock.sendall(pattern(100000))
    sock.shutdown(socket.SHUT_WR)
    return "reply %r then eof" % recv_all(sock)


def cli_server_half_close(sock, ctl):
    first = sock.recv(10)
    sock.sendall(pattern(5000))
    sock.shutdown(socket.SHUT_WR)
    return "recv %r, then sent 5000" % first


def after_step(sock, ctl):
    """Waits for the server's step; a server half that failed before it
    replies at once, and that reply is kept for run_case()."""
    msg = ctl.recv()
    if "saw" in msg:
        ctl.kept = msg
    time.sleep(SETTLE)


def cli_close_unread(sock, ctl):
    sock.sendall(pattern(1000))
    after_step(sock, ctl)
    try:
        return "recv %r" % sock.recv(10)
    except OSError as exc:
        return "recv %s" % err_name(exc)


def cli_linger_zero(sock, ctl):
    sock.sendall(b"x")
    after_step(sock, ctl)
    try:
        return "recv %r" % sock.recv(10)
    except OSError as exc:
        return "recv %s" % err_name(exc)


def cli_write_after_close(sock, ctl):
    """recv sees the FIN; the first send goes out and draws the peer's RST,
    after which a send fails (however long the RST takes to come back)."""
    after_step(sock, ctl)
    seen = ["recv %r" % sock.recv(10)]
    try:
        seen.append("send %d" % sock.send(b"x"))
    except OSError as exc:
        return ", ".join(seen + ["send %s" % err_name(exc)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(SETTLE)
        try:
            sock.send(b"x")
        except OSError as exc:
            return ", ".join(seen + ["then %s" % err_name(exc)])
    return ", ".join(seen + ["then no error in 30 s"])


def cli_peek_waitall(sock, ctl):
    sock.sendall(b"hello")
    time.sleep(0.2)
    sock.sendall(b"world!")
    sock.shutdown(socket.SHUT_WR)
    return "eof %r" % recv_all(sock)


def cli_echo_200k(sock, ctl):
    data = pattern(200000, 3)
    sender = threading.Thread(target=lambda: (sock.sendall(data),
                                              sock.shutdown(socket.SHUT_WR)))
    sender.start()
    back = recv_all(sock)
    sender.join()
    return "%d bytes back, %s" % (len(back),
                                  "same" if back == data else "DIFFERENT")


def cli_addresses(sock, ctl):
    theirs = ctl.recv()
    agree = (tuple(theirs["peer"]) == sock.getsockname() and
             tuple(theirs["local"]) == sock.getpeername())
    sock.shutdown(socket.SHUT_WR)
    return "addresses %s" % ("agree" if agree else "DIFFER")


def cli_recv_timeout(sock, ctl):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                    struct.pack("ll", 0, 300000))
    t0 = time.monotonic()
    try:
        seen = "recv %r" % sock.recv(10)
    except OSError as exc:
        seen = "recv %s" % err_name(exc)
    waited = time.monotonic() - t0
    sock.shutdown(socket.SHUT_WR)
    # Up to 10 s: a busy host may stall the guest.  A recv that ignored
    # the timeout would wait for ever: the server sends nothing.
    return "%s after %s" % (seen, "0.3 s" if 0.25 < waited < 10 else
                            "%.2f s" % waited)


def cli_sendfile(sock, ctl):
    data = recv_all(sock)
    return "%d bytes, %s" % (len(data), "same" if data ==
                             pattern(3 << 20, 5) else "DIFFERENT")


def cli_epoll_et(sock, ctl):
    sock.setblocking(False)
    ep = select.epoll()
    ep.register(sock, select.EPOLLIN | select.EPOLLET | select.EPOLLRDHUP)
    got = []
    rdhup = eof = False
    deadline = time.monotonic() + 60
    while not eof and time.monotonic() < deadline:
        for _, ev in ep.poll(5):
            rdhup |= bool(ev & select.EPOLLRDHUP)
            while True:
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    break
                if not data:
                    eof = True
                    break
                got.append(data)
    # Whether the FIN came before the last event or after it is timing;
    # a MOD checks readiness again, so the answer no longer is.
    ep.modify(sock, select.EPOLLIN | select.EPOLLRDHUP)
    for _, ev in ep.poll(0):
        rdhup |= bool(ev & select.EPOLLRDHUP)
    ep.close()
    want = b"".join(pattern(10000, i) for i in range(10))
    return "%s, rdhup %s, eof %s" % (
        "same" if b"".join(got) == want else "DIFFERENT", rdhup, eof)


def cli_shutdown_rdwr(sock, ctl):
    return "recv %r" % sock.recv(10)


def cli_killed_holder(sock, ctl):
    sock.sendall(pattern(100))
    ctl.recv()
    time.sleep(SETTLE)
    try:
        return "recv %r" % sock.recv(10)
    except OSError as exc:
        return "recv %s" % err_name(exc)


CLIENT = {
    "echo": cli_echo,
    "client_half_close": cli_client_half_close,
    "server_half_close": cli_server_half_close,
    "close_with_unread_data_resets": cli_close_unread,
    "linger_zero_resets": cli_linger_zero,
    "write_after_peer_close": cli_write_after_close,
    "peek_then_waitall": cli_peek_waitall,
    "forked_child_serves": cli_echo_200k,
    "exec_cat_serves": cli_echo_200k,
    "fd_passed_to_another_process": cli_echo_200k,
    "handed_over_port_refuses_rdma": cli_echo_200k,
    "addresses_agree": cli_addresses,
    "recv_timeout": cli_recv_timeout,
    "sendfile_arrives": cli_sendfile,
    "epoll_edge_triggered": cli_epoll_et,
    "shutdown_rdwr_gives_eof": cli_shutdown_rdwr,
    "killed_holder_resets": cli_killed_holder,
}


def nonblocking_connect(addr, port):
    sock = socket.socket()
    sock.setblocking(False)
    rc = sock.connect_ex((addr, port))
    _, writable, _ = select.select([], [sock], [], 60)
    soerr = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    return sock, "connect %s, %s, so_error %s" % (
        errno.errorcode.get(rc, rc), "writable" if writable else "TIMEOUT",
        errno.errorcode.get(soerr, soerr))


def connect_refused(addr, port):
    sock = socket.socket()
    try:
        sock.connect((addr, port))
        return "connected"
    except OSError as exc:
        return "connect %s" % err_name(exc)
    finally:
        sock.close()


async def many_connects(addr, port, n):
    async def one(i):
        reader, writer = await asyncio.open_connection(addr, port)
        data = pattern(1024, i)
        writer.write(data)
        await writer.drain()
        back = await reader.readexactly(len(data))
        writer.close()
        await writer.wait_closed()
        return back == data
    results = await asyncio.wait_for(
        asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True),
        120)
    ok = sum(1 for r in results if r is True)
    return "%d of %d echoed" % (ok, n)


def run_case(name, addr, port, ctl):
    """The case line and the client's and server's rows."""
    if name == "connect_refused":
        return connect_refused(addr, port + 2), None, None
    if name == "nonblocking_connect_refused":
        sock, seen = nonblocking_connect(addr, port + 2)
        sock.close()
        return seen, None, None
    ctl.send(case=name, n=200)
    if name == "many_concurrent_connects":
        before = ends_by_path()
        seen = asyncio.run(many_connects(addr, port + 1, 200))
        if before is not None:
            print("burst %s" % burst_paths(before, ends_by_path()),
                  flush=True)
        return "%s; server %s" % (seen, ctl.recv()["saw"]), None, None
    if name == "nonblocking_connect":
        sock, seen = nonblocking_connect(addr, port + 1)
        sock.setblocking(True)
        sock.sendall(b"ping")
        sock.shutdown(socket.SHUT_WR)
        seen += ", echo %r" % recv_all(sock)
    else:
        sock = socket.create_connection((addr, data_port(name, port)))
        try:
            seen = CLIENT[name](sock, ctl)
        except Exception as exc:        # reported, and the run goes on
            seen = "error %s" % err_name(exc)
    row = stats_row(sock)
    sock.close()
    reply, ctl.kept = ctl.kept or ctl.recv(), None
    while "saw" not in reply:           # a step the client did not wait for
        reply = ctl.recv()
    return "%s; server %s" % (seen, reply["saw"]), row, reply["row"]


CASES = list(SERVER) + ["connect_refused", "nonblocking_connect_refused",
                        "many_concurrent_connects"]


def run(addr, port, names):
    ctl = Control(socket.create_connection((addr, port)))
    for name in names or CASES:
        t0 = time.monotonic()
        seen, crow, srow = run_case(name, addr, port, ctl)
        print("case %s: %s" % (name, seen), flush=True)
        for end, row in (("client", crow), ("server", srow)):
            if row:
                print("row %s %s %s" % (name, end, row), flush=True)
        print("time %s %.2f s" % (name, time.monotonic() - t0), flush=True)
    ctl.sock.close()
    counts = global_counts()
    if counts:
        print("connections %s" % counts, flush=True)
    return 0


def global_counts():
    """This process's connections by transport, from its stats."""
    stats = own_stats()
    if stats is None:
        return None
    glob = stats.get("global", {})
    return "rdma %d tcp %d" % (glob.get("connections_rdma", 0),
                               glob.get("connections_tcp", 0))


def ends_by_path():
    """Counter of this process's connection ends, closed ones included, by
    transport and fallback reason; None without roceshim."""
    stats = own_stats()
    if stats is None:
        return None
    return collections.Counter(
        (r["transport"], r["fallback"])
        for r in stats.get("connections", []) if r["role"] != "listener")


def burst_paths(before, after):
    """The ends opened between two counts: "rdma N tcp M" and, when some
    fell back, the reasons, as in "tcp 3 timeout:3"."""
    new = after - before
    on = {t: sum(n for (tr, _), n in new.items() if tr == t)
          for t in ("rdma", "tcp")}
    why = " ".join("%s:%d" % (f, n) for (t, f), n in sorted(new.items())
                   if t == "tcp")
    return ("rdma %d tcp %d %s" % (on["rdma"], on["tcp"], why)).rstrip()


def main(argv):
    if argv[:1] == ["fd-helper"]:
        fd_helper()
        return 0
    if len(argv) >= 3 and argv[0] == "serve":
        return serve(argv[1], int(argv[2]))
    if len(argv) >= 3 and argv[0] == "run":
        unknown = [n for n in argv[3:] if n not in CASES]
        if unknown:
            print("unknown case(s): %s" % " ".join(unknown), file=sys.stderr)
            return 2
        return run(argv[1], int(argv[2]), argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
