# SPDX-License-Identifier: MIT
"""A send of more than an RDMA ring holds, to a peer that reads nothing
yet: kernel TCP's buffers take it, so the call returns and the program
goes on to read.  Each case prints "CASE RESULT ms N rows A B", where
RESULT is "ok" when every byte arrived in order, N the case's time and
A, B the two ends' stats rows at the end.

    send_stall.py ADDR --bind ADDR --size N CASE
      one-thread  one thread sends N bytes on one end, then reads them
                  on the other
      timeout     as one-thread, on a socket with a timeout: CPython's
                  sendall() then waits for POLLOUT between sends
      nonblocking as one-thread, on a non-blocking socket never polled
                  before: sends until EAGAIN, then polls for POLLOUT
                  (RESULT "stuck" if a poll waits 10 s)
      both-send   two processes each send N bytes, then read the other's
      grown       as nonblocking, with 4 N bytes, on a connection that has
                  carried 8 N bytes first: TCP's buffers have grown
      slow-reader one thread sends N bytes while another reads 32 KiB
                  every 100 ms
      big-send    one thread sends 6 N bytes, more than the send queue
                  takes, while another reads 256 KiB every 50 ms; RESULT
                  is "busy" if the process took more than half of the
                  time in CPU (a sender that spins for credit)
      stopped     the reader's process is stopped for 3 s while the
                  writer waits, then reads
      closed      another process sends N bytes and closes at once; this
                  one reads them 3 s later, then EOF
      closed-stalled
                  as closed, read 13 s later, past the 10 s that the
                  bytes wait on RDMA for a peer that takes none
      closed-slow-reader
                  another process sends 2 N bytes in 64 KiB pieces,
                  closes at once and lives on; this one reads 8 KiB
                  every 100 ms, then EOF
      exited      another process sends N bytes and exits without a
                  close; this one reads them once it is gone, then EOF
      close-exit  another process sends N bytes, closes and exits at
                  once; this one reads them once it is gone, then EOF
      quick-exit  another process sends N bytes and ends in _exit();
                  this one reads them once it is gone, then EOF
      close-quick-exit
                  as quick-exit, with a close() before the _exit()
      stopped-quick-exit
                  a process sends N/2 bytes, more than a new ring takes,
                  to a third one, stopped, then closes and ends in
                  _exit(); the third, continued 1.5 s later, reads those
                  that arrived and then ECONNRESET, as its stopped
                  roceshim could not answer the move: RESULT "reset"
                  ("all": the connection was not on RDMA; "short": a FIN
                  after part of the stream)
    The other end's row is "-" where it is another process's.
"""
import argparse
import hashlib
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from own_stats import row


def pair(args):
    """A connection from args.bind to args.addr: (client, server) ends."""
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(1)
    client = socket.create_connection(lsn.getsockname(),
                                      source_address=(args.bind, 0))
    server, _ = lsn.accept()
    lsn.close()
    return client, server


def read_exactly(sock, n, pause=0.0, piece=65536):
    got = hashlib.sha256()
    left = n
    while left:
        more = sock.recv(min(piece, left))
        if not more:
            break
        got.update(more)
        left -= len(more)
        if pause:
            time.sleep(pause)
    return got.hexdigest(), n - left


def one_thread(args, data):
    client, server = pair(args)
    client.sendall(data)
    digest, _ = read_exactly(server, len(data))
    return digest == hashlib.sha256(data).hexdigest(), client, server


def timeout(args, data):
    client, server = pair(args)
    client.settimeout(30)
    client.sendall(data)
    digest, _ = read_exactly(server, len(data))
    return digest == hashlib.sha256(data).hexdigest(), client, server


def nonblocking(args, data, client=None, server=None):
    if not client:
        client, server = pair(args)
    client.setblocking(False)
    poller = select.poll()
    poller.register(client, select.POLLOUT)
    sent = 0
    while sent < len(data):
        try:
            sent += client.send(data[sent:sent + 262144])
        except BlockingIOError:
            if not poller.poll(10000):
                return "stuck", client, server
    digest, _ = read_exactly(server, len(data))
    return digest == hashlib.sha256(data).hexdigest(), client, server


def grown(args, _):
    rand = random.Random(args.seed)
    warm, data = rand.randbytes(8 * args.size), rand.randbytes(4 * args.size)
    client, server = pair(args)
    reader = threading.Thread(target=read_exactly, args=(server, len(warm)))
    reader.start()
    client.sendall(warm)
    reader.join()
    return nonblocking(args, data, client, server)


def slow_reader(args, data):
    client, server = pair(args)
    result = {}
    reader = threading.Thread(target=lambda: result.update(
        digest=read_exactly(server, len(data), 0.1, 32768)[0]))
    reader.start()
    client.sendall(data)
    reader.join()
    return result["digest"] == hashlib.sha256(data).hexdigest(), client, \
        server


def big_send(args, _):
    data = random.Random(args.seed).randbytes(6 * args.size)
    client, server = pair(args)
    result = {}
    reader = threading.Thread(target=lambda: result.update(
        digest=read_exactly(server, len(data), 0.05, 262144)[0]))
    start, cpu = time.monotonic(), time.process_time()
    reader.start()
    client.sendall(data)
    reader.join()
    busy = time.process_time() - cpu > (time.monotonic() - start) / 2
    ok = result["digest"] == hashlib.sha256(data).hexdigest()
    return (not busy and ok) or ("busy" if ok else False), client, server


def peer(args, role):
    """Starts this script as the other end's process, which connects to a
    new listener, and accepts its connection: (process, socket)."""
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(1)
    proc = subprocess.Popen(
        [sys.executable, __file__, args.addr, "--bind", args.bind,
         "--size", str(args.size), "--seed", args.seed.hex(),
         "--peer", str(lsn.getsockname()[1]), role])
    sock, _ = lsn.accept()
    lsn.close()
    return proc, sock


def both_send(args, data):
    proc, sock = peer(args, "both-send")
    sock.sendall(data)
    ok = read_exactly(sock, len(data))[0] == hashlib.sha256(data).hexdigest()
    return proc.wait(timeout=60) == 0 and ok, sock, "-"


def stopped(args, data):
    proc, sock = peer(args, "stopped")
    proc.send_signal(signal.SIGSTOP)
    threading.Timer(3.0, proc.send_signal, (signal.SIGCONT,)).start()
    sock.sendall(data)
    return proc.wait(timeout=60) == 0, sock, "-"


def read_to_eof(sock, data):
    digest, _ = read_exactly(sock, len(data))
    return digest == hashlib.sha256(data).hexdigest() and sock.recv(1) == b""


# closed and closed-stalled: when this end reads, and how long the peer
# lives on after its close, in s.
CLOSED_TIMES = {"closed": (3, 4), "closed-stalled": (13, 15)}


def closed(args, data):
    proc, sock = peer(args, args.case)
    time.sleep(CLOSED_TIMES[args.case][0])
    ok = read_to_eof(sock, data)
    return proc.wait(timeout=60) == 0 and ok, sock, "-"


def closed_slow_reader(args, data):
    proc, sock = peer(args, "closed-slow-reader")
    data = data + data
    digest, _ = read_exactly(sock, len(data), 0.1, 8192)
    ok = digest == hashlib.sha256(data).hexdigest() and sock.recv(1) == b""
    return proc.wait(timeout=60) == 0 and ok, sock, "-"


def exited(args, data):
    proc, sock = peer(args, args.case)
    ok = proc.wait(timeout=60) == 0 and read_to_eof(sock, data)
    return ok, sock, "-"


def stopped_quick_exit(args, data):
    def spawn(role, port=None, **kw):
        return subprocess.Popen(
            [sys.executable, __file__, args.addr, "--bind", args.bind,
             "--size", str(args.size), "--seed", args.seed.hex(),
             "--peer", str(port or 1), role], text=True, **kw)

    def line(proc):
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        return proc.stdout.readline().strip() if ready else "timeout"

    reader = spawn("stopped-reader", stdout=subprocess.PIPE)
    writer = None
    try:
        port = line(reader)
        if not port.isdigit():
            return "reader:" + port, "-", "-"
        writer = spawn("stopped-writer", port, stdin=subprocess.PIPE)
        if line(reader) != "accepted":
            return "not-accepted", "-", "-"
        reader.send_signal(signal.SIGSTOP)
        writer.stdin.write("go\n")
        writer.stdin.flush()
        writer.wait(timeout=60)
        time.sleep(1.5)
        reader.send_signal(signal.SIGCONT)
        return line(reader) or "none", "-", "-"
    finally:
        for proc in (reader, writer):
            if proc:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()


def stopped_reader(args, data):
    """Prints its port, "accepted", then how the stream of N/2 bytes
    ended: all, reset, short or wrong."""
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(1)
    print(lsn.getsockname()[1], flush=True)
    sock, _ = lsn.accept()
    print("accepted", flush=True)
    data = data[:len(data) // 2]
    try:
        digest, got = read_exactly(sock, len(data))
        end = sock.recv(1)
    except ConnectionResetError:
        print("reset", flush=True)
        return 0
    if got < len(data) or end:
        print("short" if got < len(data) else "wrong", flush=True)
    else:
        print("all" if digest == hashlib.sha256(data).hexdigest()
              else "wrong", flush=True)
    return 0


def run_peer(args, data):
    """The other end: exit status 0 when it read every byte in order, or
    sent them all."""
    if args.case == "stopped-reader":
        return stopped_reader(args, data)
    sock = socket.create_connection((args.addr, args.peer),
                                    source_address=(args.bind, 0))
    if args.case == "stopped-writer":
        sys.stdin.readline()
        sock.sendall(data[:len(data) // 2])
        sock.close()
        os._exit(0)
    if args.case in CLOSED_TIMES:
        sock.sendall(data)
        sock.close()
        time.sleep(CLOSED_TIMES[args.case][1])
        return 0
    if args.case == "closed-slow-reader":
        # As an HTTP server writes a file: pieces too small to go
        # zero-copy, so that the queue holds what the ring does not.
        data = data + data
        for i in range(0, len(data), 65536):
            sock.sendall(data[i:i + 65536])
        sock.close()
        time.sleep(2 + len(data) / 81920)
        return 0
    if args.case == "exited":
        sock.sendall(data)
        sock.detach()
        return 0
    if args.case == "close-exit":
        sock.sendall(data)
        sock.close()
        return 0
    if args.case in ("quick-exit", "close-quick-exit"):
        sock.sendall(data)
        if args.case == "close-quick-exit":
            sock.close()
        os._exit(0)
    if args.case == "both-send":
        sock.sendall(data)
    digest, _ = read_exactly(sock, len(data))
    return 0 if digest == hashlib.sha256(data).hexdigest() else 1


CASES = {"one-thread": one_thread, "timeout": timeout,
         "nonblocking": nonblocking, "close-exit": exited,
         "quick-exit": exited, "close-quick-exit": exited,
         "both-send": both_send, "slow-reader": slow_reader,
         "big-send": big_send, "grown": grown,
         "stopped": stopped, "closed": closed, "closed-stalled": closed,
         "closed-slow-reader": closed_slow_reader, "exited": exited,
         "stopped-quick-exit": stopped_quick_exit,
         "stopped-reader": None, "stopped-writer": None}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("addr")
    p.add_argument("--bind", required=True)
    p.add_argument("--size", type=int, default=1 << 20)
    p.add_argument("--seed", type=bytes.fromhex, default=os.urandom(8))
    p.add_argument("--peer", type=int, help=argparse.SUPPRESS)
    p.add_argument("case", choices=sorted(CASES))
    args = p.parse_args()
    data = random.Random(args.seed).randbytes(args.size)
    if args.peer:
        return run_peer(args, data)
    start = time.monotonic()
    try:
        ok, client, other = CASES[args.case](args, data)
        result = ok if isinstance(ok, str) else "ok" if ok else "wrong-bytes"
        crow = client if isinstance(client, str) else row(client.fileno())
        orow = other if isinstance(other, str) else row(other.fileno())
    except OSError as e:
        result = "error:" + (os.strerror(e.errno) if e.errno else repr(e))
        crow = orow = "none none"
    ms = (time.monotonic() - start) * 1000
    print("%s %s ms %.0f rows %s | %s" % (args.case, result.replace(" ", "_"),
                                         ms, crow, orow), flush=True)


if __name__ == "__main__":
    sys.exit(main())
