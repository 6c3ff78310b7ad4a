#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP peer for the RDMA fallback, kill and churn tests.

  peer.py serve ADDR [--port P] [--count N] [--report] [--linger S]
                [--until-echoed]              echo server; prints "port P";
                                              after the last accept, stays
                                              S seconds, or with
                                              --until-echoed until every
                                              echo ended, at most S seconds
  peer.py echo ADDR PORT [--bytes N] [--bind A] [--report] [--repeat N]
  peer.py retry ADDR PORT [--nonblocking] [--bytes N] [--report]
                                              connects as PyTorch's TCPStore
                                              client does: again every
                                              millisecond while refused
                                              (blocking, or non-blocking
                                              and poll), then echoes
  peer.py stream ADDR PORT                    sends until killed
  peer.py send ADDR PORT [--bind A] [--bytes N] [--pause S]
                                              sends one byte, waits S
                                              seconds, sends N bytes and
                                              closes
  peer.py drain ADDR                          accepts one, reads until the
                                              end; prints how it ended
  peer.py churn ADDR --count N                N connections in one process
  peer.py echo-hold ADDR PORT [--bytes N] [--bind A]
                                              two echoes through one
                                              connection, with its stats
                                              row before and after; prints
                                              "held" between them and waits
                                              for a line on standard input
  peer.py fork ADDR PORT [--bind A]           an echo connection across
                                              fork (the server must serve 2)
  peer.py setuid ADDR PORT [--bind A]         an echo connection across
                                              setgid()/setuid() to nobody,
                                              then a new one (the server
                                              must serve 2)
  peer.py drop-serve ADDR [--count N] [--how H]
                                              echo server that listens as
                                              root, then becomes nobody
                                              (H setuid) or changes its
                                              credentials by capset,
                                              prctl or syscall; "port P"
  peer.py signal-wait ADDR PORT [--bind A] [--wait epoll|poll]
                                              waits for a reply that does
                                              not come, with a timeout of
                                              5 s; a signal after 0.2 s
                                              raises in its handler; prints
                                              how long the wait took to end
  peer.py daemon-serve ADDR [--count N]       echo server that listens,
                                              forks and leaves the child
                                              to serve (the parent exits);
                                              prints "port P"
  peer.py handoff ADDR --then exit|exec      accepts one, and after its
                                              first byte forks a child that
                                              echoes it all; closes its copy
                                              and at once exits or execs
                                              sleep; "port P"
  peer.py late ADDR [--delay S] [--count N] [--conns C]
                                              accepts C, sends one byte to
                                              each after S seconds, N
                                              times; "port P"
  peer.py idle ADDR PORT [--bind A] [--count N] [--conns C]
                                              N blocking one-byte reads on
                                              each of C connections, one
                                              thread each; prints the CPU
                                              time they took and the
                                              context switches and names
                                              of the process's threads
  peer.py wait-echo ADDR PORT [--bind A] [--count N] [--wait epoll|poll]
                                              N one-byte round trips through
                                              the echo server, waiting in
                                              epoll (as Gloo does) or poll
                                              on a non-blocking socket;
                                              prints whether the bytes came
                                              back and the context switches
                                              of the progress thread
                                              meanwhile

With --report, each connection's roceshim stats row (transport and
fallback reason) is printed as "conn TRANSPORT REASON", read with
$ROCESHIM_STAT while the connection is open.
"""
import argparse
import ctypes
import errno
import json
import os
import resource
import select
import socket
import subprocess
import sys
import threading
import time

from own_stats import row, stats


def report(sock):
    # One write: threads that report at once must not mix their lines.
    print("conn %s\n" % row(sock.fileno()), end="", flush=True)


def echo_one(conn, do_report):
    if do_report:
        report(conn)
    while True:
        data = conn.recv(65536)
        if not data:
            break
        conn.sendall(data)
    conn.close()


def listening(addr, port=0):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(64)
    return ls


def echo_each(ls, count):
    """Prints the port, then echoes count connections one after another,
    reporting each."""
    print("port %d" % ls.getsockname()[1], flush=True)
    for _ in range(count):
        conn, _ = ls.accept()
        echo_one(conn, True)


def serve(args):
    ls = listening(args.addr, args.port)
    print("port %d" % ls.getsockname()[1], flush=True)
    echoes = []
    for _ in range(args.count):
        conn, _ = ls.accept()
        t = threading.Thread(target=echo_one, args=(conn, args.report),
                             daemon=True)
        t.start()
        echoes.append(t)
    if not args.until_echoed:
        time.sleep(args.linger)
        return
    # An exit with an echo under way would reset it.
    deadline = time.monotonic() + args.linger
    for t in echoes:
        t.join(max(0, deadline - time.monotonic()))


def retry(args):
    deadline = time.monotonic() + 60
    while True:
        s = socket.socket()
        try:
            if args.nonblocking:
                s.setblocking(False)
                err = s.connect_ex((args.addr, args.port))
                if err == errno.EINPROGRESS:
                    select.select([], [s], [], 30)
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    raise OSError(err, os.strerror(err))
                s.setblocking(True)
            else:
                s.connect((args.addr, args.port))
            break
        except ConnectionRefusedError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)
    if args.report:
        report(s)
    ok = echo_through(s, args.bytes)
    s.close()
    return 0 if ok else 1


def echo(args):
    rc = 0
    for _ in range(args.repeat):
        rc |= echo_once(args)
    return rc


def connect(args):
    s = socket.socket()
    if args.bind:
        s.bind((args.bind, 0))
    s.connect((args.addr, args.port))
    return s


def echo_once(args):
    start = time.monotonic()
    s = connect(args)
    print("connect_ms %d" % ((time.monotonic() - start) * 1000), flush=True)
    if args.report:
        report(s)
    if args.announce:
        print("started", flush=True)
    ok = echo_through(s, args.bytes)
    if args.report_after:
        report(s)
    s.close()
    return 0 if ok else 1


def echo_hold(args):
    s = connect(args)
    report(s)
    ok = echo_through(s, args.bytes, "first")
    print("held", flush=True)
    sys.stdin.readline()
    ok = echo_through(s, args.bytes, "second") and ok
    report(s)
    s.close()
    return 0 if ok else 1


def echo_through(s, nbytes, label="echo"):
    """Sends nbytes through the echo server on s; prints and returns
    whether the same bytes came back, and prints how long that took."""
    start = time.monotonic()
    payload = os.urandom(nbytes)
    got = bytearray()

    def reader():
        while len(got) < len(payload):
            d = s.recv(65536)
            if not d:
                break
            got.extend(d)
    t = threading.Thread(target=reader)
    t.start()
    s.sendall(payload)
    t.join(60)
    ok = bytes(got) == payload
    print("%s %s\n%s_ms %d" % (label, "ok" if ok else "MISMATCH", label,
                               (time.monotonic() - start) * 1000), flush=True)
    return ok


def outcome(call):
    """What a socket call did: "ok", "EOF" or the errno's name."""
    try:
        return "ok" if call() else "EOF"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))


def read_exactly(s, n):
    got = bytearray()
    while len(got) < n:
        d = s.recv(n - len(got))
        if not d:
            break
        got.extend(d)
    return bytes(got)


def fork(args):
    """fork() with an upgraded connection mid-transfer: the parent has sent
    bytes whose echo it has not read yet.  With --child-uses, the child
    reads that echo and sends more through the inherited connection, which
    moves to TCP for both; otherwise the child leaves it alone and it stays
    on RDMA in the parent.  Either way the child's own new connection
    works, and the parent's connection echoes byte for byte afterwards."""
    s = connect(args)
    report(s)
    echo_through(s, 100000, "parent_before")
    pending = os.urandom(50000)
    s.sendall(pending)
    half = read_exactly(s, 20000)
    pid = os.fork()
    if pid == 0:
        ok = True
        if args.child_uses:
            rest = read_exactly(s, len(pending) - len(half))
            ok = half + rest == pending
            print("child_inherited_rest %s" % ("ok" if ok else "MISMATCH"),
                  flush=True)
            ok &= echo_through(s, 100000, "child_inherited")
        s.close()
        new = connect(args)
        ok &= echo_through(new, 100000, "child_new")
        new.close()
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    print("child_exit %d" % os.waitstatus_to_exitcode(status), flush=True)
    ok = True
    if not args.child_uses:
        rest = read_exactly(s, len(pending) - len(half))
        ok = half + rest == pending
        print("parent_rest %s" % ("ok" if ok else "MISMATCH"), flush=True)
    ok &= echo_through(s, 100000, "parent_after")
    report(s)
    s.close()
    return 0 if ok else 1


def become_nobody():
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)


def setuid(args):
    """setuid() with an upgraded connection mid-transfer: the echo of bytes
    sent before it comes back whole after it, the connection goes on (on
    TCP), and a new connection works."""
    s = connect(args)
    report(s)
    echo_through(s, 100000, "before")
    pending = os.urandom(50000)
    s.sendall(pending)
    half = read_exactly(s, 20000)
    become_nobody()
    rest = read_exactly(s, len(pending) - len(half))
    ok = half + rest == pending
    print("rest %s" % ("ok" if ok else "MISMATCH"), flush=True)
    ok &= echo_through(s, 100000, "after")
    report(s)
    s.close()
    new = connect(args)
    report(new)
    ok &= echo_through(new, 100000, "new")
    new.close()
    return 0 if ok else 1


def drop_privileges(how):
    """Changes the credentials: as a daemon that drops root does (setuid),
    or on this thread alone, with capset(), prctl() or a raw system
    call, as libcap and daemons that keep one capability do."""
    if how == "setuid":
        become_nobody()
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if how == "capset":
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # version 3, self
        data = (ctypes.c_uint32 * 6)()  # no capability left
        ret = libc.capset(header, data)
    elif how == "prctl":
        ret = libc.prctl(24, 16, 0, 0, 0)  # PR_CAPBSET_DROP, SYS_MODULE
    else:
        ret = libc.syscall(117, 65534, 65534, 65534)  # SYS_setresuid
    if ret:
        raise OSError(ctypes.get_errno(), "dropping privileges: " + how)


def drop_serve(args):
    ls = listening(args.addr)
    drop_privileges(args.how)
    echo_each(ls, args.count)


def daemon_serve(args):
    ls = listening(args.addr)
    if os.fork():
        os._exit(0)
    os.setsid()
    echo_each(ls, args.count)


def activate(args):
    """Socket activation's shape (systemd-socket-activate, inetd's wait
    mode): waits until the listener has a connection, and a moment more
    for others, then execs the server, which inherits the listener."""
    ls = listening(args.addr)
    print("port %d" % ls.getsockname()[1], flush=True)
    select.select([ls], [], [])
    time.sleep(args.delay)
    os.set_inheritable(ls.fileno(), True)
    if args.fail_first:
        # As os.execvp does for each PATH entry before the right one.
        try:
            os.execv("/nonexistent/python3", ["python3"])
        except OSError:
            pass
    os.execv(sys.executable, [sys.executable, __file__, "activated",
                              "--fd", str(ls.fileno()),
                              "--count", str(args.count),
                              "--start", str(args.start)])


def activated(args):
    """The server an activator execs: echoes count connections on the
    listener it inherited as fd, after start seconds (a program slow to
    start), reporting each."""
    time.sleep(args.start)
    ls = socket.socket(fileno=args.fd)
    threads = []
    for _ in range(args.count):
        conn, _ = ls.accept()
        t = threading.Thread(target=echo_one, args=(conn, True))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def pass_listener(args):
    """A supervisor that hands its listener to a worker it started, over
    a unix socket (SCM_RIGHTS), and keeps its own copy open until the
    worker, which echoes count connections, is done."""
    ls = listening(args.addr)
    path = os.path.join(args.dir, "pass.sock")
    worker = subprocess.Popen([sys.executable, __file__, "take-listener",
                               path, "--count", str(args.count)])
    while not os.path.exists(path):
        time.sleep(0.05)
    u = socket.socket(socket.AF_UNIX)
    u.connect(path)
    socket.send_fds(u, [b"l"], [ls.fileno()])
    u.close()
    print("port %d" % ls.getsockname()[1], flush=True)
    rc = worker.wait()
    ls.close()
    return rc


def take_listener(args):
    u = socket.socket(socket.AF_UNIX)
    u.bind(args.path)
    u.listen(1)
    c, _ = u.accept()
    _, fds, _, _ = socket.recv_fds(c, 1, 1)
    activated(argparse.Namespace(fd=fds[0], count=args.count, start=0.0))


def handoff(args):
    """The inetd shape whose parent leaves at once: the connection the
    child inherited must outlive the parent that owned it."""
    ls = socket.socket()
    ls.bind((args.addr, 0))
    ls.listen(1)
    print("port %d" % ls.getsockname()[1], flush=True)
    conn, _ = ls.accept()
    first = conn.recv(1)
    if os.fork() == 0:
        ls.close()
        time.sleep(0.5)
        conn.sendall(first)
        echo_one(conn, False)
        os._exit(0)
    conn.close()
    if args.then == "exec":
        os.execv("/bin/sleep", ["sleep", "10"])
    sys.exit(0)


def stream(args):
    s = socket.socket()
    s.connect((args.addr, args.port))
    print("streaming", flush=True)
    chunk = b"s" * 65536
    while True:
        s.sendall(chunk)


def send(args):
    s = socket.socket()
    if args.bind:
        s.bind((args.bind, 0))
    s.connect((args.addr, args.port))
    s.sendall(b"h")
    print("connected", flush=True)
    time.sleep(args.pause)
    s.sendall(b"d" * args.bytes)
    s.close()
    print("sent %d bytes" % (args.bytes + 1), flush=True)
    return 0


def drain(args):
    ls = socket.socket()
    ls.bind((args.addr, 0))
    ls.listen(1)
    print("port %d" % ls.getsockname()[1], flush=True)
    conn, _ = ls.accept()
    total = 0
    while True:
        try:
            d = conn.recv(65536)
        except ConnectionResetError:
            print("ended ECONNRESET after %d bytes" % total, flush=True)
            return 0
        if not d:
            print("ended EOF after %d bytes" % total, flush=True)
            return 0
        total += len(d)


def churn(args):
    ls = socket.socket()
    ls.bind((args.addr, 0))
    ls.listen(64)
    port = ls.getsockname()[1]

    def server():
        for _ in range(args.count):
            c, _ = ls.accept()
            d = c.recv(1024)
            c.sendall(d)
            c.close()
    t = threading.Thread(target=server, daemon=True)
    t.start()
    fds_before = None
    for i in range(args.count):
        if i == 1:
            # The first connection creates the per-process constants
            # (progress thread, CM channels, health timer); count after it.
            fds_before = len(os.listdir("/proc/self/fd"))
        s = socket.create_connection((args.addr, port))
        s.sendall(b"x" * 1000)
        got = b""
        while len(got) < 1000:
            d = s.recv(1000)
            if not d:
                break
            got += d
        s.close()
        if got != b"x" * 1000:
            print("churn MISMATCH at %d" % i, flush=True)
            return 1
        if (i + 1) % 100 == 0:
            print("churn %d" % (i + 1), flush=True)
    t.join(30)
    # Closed connections are torn down in the background, and their rings
    # kept a second for the next connection.
    time.sleep(3)
    fds_after = len(os.listdir("/proc/self/fd"))
    print("fds before %d after %d" % (fds_before, fds_after), flush=True)
    with open("/proc/self/status") as f:
        rss = [l for l in f if l.startswith("VmRSS")][0].split()[1]
    print("rss_kb %s" % rss, flush=True)
    pinned = stats().get("global", {}).get("rings", {}).get("pinned_bytes", 0)
    print("pinned_bytes %d" % pinned, flush=True)
    return 0 if fds_after <= fds_before and not pinned else 1


def late(args):
    ls = socket.socket()
    ls.bind((args.addr, 0))
    ls.listen(args.conns)
    print("port %d" % ls.getsockname()[1], flush=True)
    conns = [ls.accept()[0] for _ in range(args.conns)]
    for _ in range(args.count):
        time.sleep(args.delay)
        for conn in conns:
            conn.sendall(b"!")
    for conn in conns:
        conn.recv(1)
    return 0


def task_file(tid, name):
    """The text of /proc/self/task/TID/NAME, or None once the thread is gone:
    a joined thread can still be listed in /proc/self/task for a moment."""
    try:
        with open("/proc/self/task/%s/%s" % (tid, name)) as f:
            return f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None


def thread_switches(tid):
    """Voluntary and involuntary context switches of one thread."""
    total = 0
    for line in (task_file(tid, "status") or "").splitlines():
        key, _, value = line.partition(":")
        if key.endswith("ctxt_switches"):
            total += int(value)
    return total


def thread_name(tid):
    name = task_file(tid, "comm")
    return None if name is None else name.strip()


def context_switches():
    """Summed over the threads alive now."""
    return sum(thread_switches(t) for t in os.listdir("/proc/self/task"))


def thread_names():
    names = (thread_name(t) for t in os.listdir("/proc/self/task"))
    return [n for n in names if n is not None]


def progress_thread_switches():
    """Context switches of the thread named roceshim (0 if none)."""
    return sum(thread_switches(t) for t in os.listdir("/proc/self/task")
               if thread_name(t) == "roceshim")


def write_calls():
    """write(2)-family system calls this process made so far."""
    with open("/proc/self/io") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key == "syscw":
                return int(value)
    return 0


def wait_echo(args):
    s = connect(args)
    report(s)
    s.setblocking(False)
    if args.wait == "epoll":
        waiter = select.epoll()
        waiter.register(s.fileno(), select.EPOLLIN)
    else:
        waiter = select.poll()
        waiter.register(s.fileno(), select.POLLIN)
    payload = os.urandom(args.count)
    got = bytearray()
    switches = progress_thread_switches()
    writes = write_calls()
    deadline = time.monotonic() + 60
    for i in range(args.count):
        s.send(payload[i:i + 1])
        while len(got) <= i and time.monotonic() < deadline:
            waiter.poll(1.0 if args.wait == "epoll" else 1000)
            try:
                got += s.recv(16)
            except BlockingIOError:
                pass
    switches = progress_thread_switches() - switches
    writes = write_calls() - writes
    print("echo %s" % ("ok" if got == payload else "MISMATCH"), flush=True)
    print("progress_switches %d" % switches, flush=True)
    print("writes_per_round_trip %.2f" % (writes / args.count), flush=True)
    s.close()
    return 0


class Interrupted(Exception):
    pass


def signal_wait(args):
    import signal

    def handler(signum, frame):
        raise Interrupted()
    s = connect(args)
    report(s)
    s.setblocking(False)
    if args.wait == "epoll":
        waiter = select.epoll()
        waiter.register(s.fileno(), select.EPOLLIN)
        timeout = 5.0
    else:
        waiter = select.poll()
        waiter.register(s.fileno(), select.POLLIN)
        timeout = 5000
    signal.signal(signal.SIGALRM, handler)
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        waiter.poll(timeout)
        print("interrupted no", flush=True)
    except Interrupted:
        print("interrupted yes", flush=True)
    print("wait_ms %d" % ((time.monotonic() - start) * 1000), flush=True)
    s.close()
    return 0


def idle(args):
    socks = [connect(args) for _ in range(args.conns)]
    report(socks[0])
    got = [b""] * args.conns

    def reader(i):
        got[i] = b"".join(socks[i].recv(1) for _ in range(args.count))

    # One connection reads on the main thread: a thread's start and join
    # would count in the context switches of an idle process.
    threads = [threading.Thread(target=reader, args=(i,))
               for i in range(1, args.conns)]
    switches = context_switches()
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.time()
    for t in threads:
        t.start()
    reader(0)
    for t in threads:
        t.join()
    after, end = resource.getrusage(resource.RUSAGE_SELF), time.time()
    switches = context_switches() - switches
    cpu = (after.ru_utime + after.ru_stime) - \
        (before.ru_utime + before.ru_stime)
    ok = all(g == b"!" * args.count for g in got)
    print("read %s" % ("ok" if ok else "MISMATCH"), flush=True)
    print("cpu_s %.3f" % cpu, flush=True)
    print("waited_s %.3f" % (end - start), flush=True)
    print("context_switches %d" % switches, flush=True)
    print("threads %s" % ",".join(sorted(thread_names())), flush=True)
    for s in socks:
        s.close()
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("serve")
    sp.add_argument("addr")
    sp.add_argument("--port", type=int, default=0)
    sp.add_argument("--count", type=int, default=1)
    sp.add_argument("--linger", type=float, default=2.0)
    sp.add_argument("--until-echoed", action="store_true")
    sp.add_argument("--report", action="store_true")
    ep = sub.add_parser("echo")
    ep.add_argument("addr")
    ep.add_argument("port", type=int)
    ep.add_argument("--bytes", type=int, default=100000)
    ep.add_argument("--bind")
    ep.add_argument("--report", action="store_true")
    ep.add_argument("--announce", action="store_true",
                    help='print "started" as the bytes start to flow')
    ep.add_argument("--report-after", action="store_true",
                    help="report the stats row again after the echo")
    ep.add_argument("--repeat", type=int, default=1,
                    help="connections, one after another, in this process")
    eh = sub.add_parser("echo-hold")
    eh.add_argument("addr")
    eh.add_argument("port", type=int)
    eh.add_argument("--bytes", type=int, default=100000)
    eh.add_argument("--bind")
    rt = sub.add_parser("retry")
    rt.add_argument("addr")
    rt.add_argument("port", type=int)
    rt.add_argument("--nonblocking", action="store_true")
    rt.add_argument("--bytes", type=int, default=100000)
    rt.add_argument("--report", action="store_true")
    st = sub.add_parser("stream")
    st.add_argument("addr")
    st.add_argument("port", type=int)
    sn = sub.add_parser("send")
    sn.add_argument("addr")
    sn.add_argument("port", type=int)
    sn.add_argument("--bind")
    sn.add_argument("--bytes", type=int, default=100000)
    sn.add_argument("--pause", type=float, default=0.0)
    dr = sub.add_parser("drain")
    dr.add_argument("addr")
    ch = sub.add_parser("churn")
    ch.add_argument("addr")
    ch.add_argument("--count", type=int, default=1000)
    fk = sub.add_parser("fork")
    fk.add_argument("addr")
    fk.add_argument("port", type=int)
    fk.add_argument("--bind")
    fk.add_argument("--child-uses", action="store_true")
    su = sub.add_parser("setuid")
    su.add_argument("addr")
    su.add_argument("port", type=int)
    su.add_argument("--bind")
    ds = sub.add_parser("drop-serve")
    ds.add_argument("addr")
    ds.add_argument("--count", type=int, default=1)
    ds.add_argument("--how", default="setuid",
                    choices=("setuid", "capset", "prctl", "syscall"))
    sw = sub.add_parser("signal-wait")
    sw.add_argument("addr")
    sw.add_argument("port", type=int)
    sw.add_argument("--bind")
    sw.add_argument("--wait", choices=("epoll", "poll"), default="epoll")
    dm = sub.add_parser("daemon-serve")
    dm.add_argument("addr")
    dm.add_argument("--count", type=int, default=1)
    ac = sub.add_parser("activate")
    ac.add_argument("addr")
    ac.add_argument("--count", type=int, default=1)
    ac.add_argument("--delay", type=float, default=0.0)
    ac.add_argument("--fail-first", action="store_true",
                    help="an exec that fails comes first")
    ac.add_argument("--start", type=float, default=0.0,
                    help="the server's start-up time before it accepts")
    ad = sub.add_parser("activated")
    ad.add_argument("--fd", type=int, required=True)
    ad.add_argument("--count", type=int, default=1)
    ad.add_argument("--start", type=float, default=0.0)
    pl = sub.add_parser("pass-listener")
    pl.add_argument("addr")
    pl.add_argument("--dir", required=True)
    pl.add_argument("--count", type=int, default=1)
    tl = sub.add_parser("take-listener")
    tl.add_argument("path")
    tl.add_argument("--count", type=int, default=1)
    ho = sub.add_parser("handoff")
    ho.add_argument("addr")
    ho.add_argument("--then", choices=("exit", "exec"), required=True)
    lt = sub.add_parser("late")
    lt.add_argument("addr")
    lt.add_argument("--delay", type=float, default=2.0)
    lt.add_argument("--count", type=int, default=1)
    lt.add_argument("--conns", type=int, default=1)
    il = sub.add_parser("idle")
    il.add_argument("addr")
    il.add_argument("port", type=int)
    il.add_argument("--bind")
    il.add_argument("--count", type=int, default=1)
    il.add_argument("--conns", type=int, default=1)
    we = sub.add_parser("wait-echo")
    we.add_argument("addr")
    we.add_argument("port", type=int)
    we.add_argument("--bind")
    we.add_argument("--count", type=int, default=200)
    we.add_argument("--wait", choices=("epoll", "poll"), default="epoll")
    args = p.parse_args()
    return {"serve": serve, "wait-echo": wait_echo, "echo": echo,
            "echo-hold": echo_hold,
            "retry": retry, "stream": stream, "send": send,
            "drain": drain, "churn": churn, "fork": fork, "late": late,
            "handoff": handoff, "setuid": setuid, "drop-serve": drop_serve,
            "daemon-serve": daemon_serve, "signal-wait": signal_wait,
            "activate": activate, "activated": activated,
            "pass-listener": pass_listener, "take-listener": take_listener,
            "idle": idle}[args.cmd](args) or 0


if __name__ == "__main__":
    sys.exit(main())
