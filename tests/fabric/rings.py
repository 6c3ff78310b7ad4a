# SPDX-License-Identifier: MIT
"""Rings that grow and shrink (tests/fabric/test-rings.sh): one process
holds both ends of one connection and moves bytes over it, one step at a
time, as its driver asks.

    rings.py SERVER_ADDR CLIENT_ADDR [--only STEP,...]

Prints "pid N" once connected, then "step NAME" when a step is done, with
a "bytes NAME ok" (or "bytes NAME MISMATCH ...") line first for a step
that moved data, and reads a line from stdin before the next step.  It
never forks: the driver reads the stats with roceshim-stat.

Steps: start (nothing sent); stream (16 MiB one way in 64 KiB sends);
idle (14 s of nothing: a ring idle for 5 s shrinks at the next reap,
which comes every 4 s by then); bursts (both ways at once: bursts of
random sizes with pauses, one of them longer than an idle ring waits to
shrink);
zerocopy (8 MiB one way in blocking 1 MiB sends, which go out of the
program's memory); unread (one thread sends 200 KB with a blocking
sendall, with nobody reading at the other end until it returns, then
reads them: prints "elapsed unread SECONDS"); end.
"""
import argparse
import hashlib
import random
import signal
import socket
import sys
import threading
import time

STEPS = ["start", "stream", "idle", "bursts", "zerocopy", "end"]
UNREAD = 200000


def pattern(seed, n):
    rnd = random.Random(seed)
    return rnd.randbytes(n)


def receive(sock, total, out):
    h = hashlib.sha256()
    got = 0
    while got < total:
        b = sock.recv(1 << 20)
        if not b:
            break
        h.update(b)
        got += len(b)
    out.append((got, h.hexdigest()))


def one_way(src, dst, total, chunk, seed):
    """total bytes from src to dst in sends of chunk: (ok, detail)."""
    result = []
    th = threading.Thread(target=receive, args=(dst, total, result))
    th.start()
    block = pattern(seed, chunk)
    h = hashlib.sha256()
    sent = 0
    while sent < total:
        b = block[:min(chunk, total - sent)]
        src.sendall(b)
        h.update(b)
        sent += len(b)
    th.join()
    return result[0] == (sent, h.hexdigest()), "%s of %d" % (result[0][0],
                                                             sent)


def bursty(src, seed, plan, digests):
    """Sends the bursts of plan from src, pausing between them."""
    h = hashlib.sha256()
    rnd = random.Random(seed)
    for size, pause in plan:
        left = size
        while left:
            n = min(left, rnd.randrange(1, 200000))
            b = rnd.randbytes(n)
            src.sendall(b)
            h.update(b)
            left -= n
        time.sleep(pause)
    digests.append(h.hexdigest())


def burst_plan(seed):
    rnd = random.Random(seed)
    plan = [(rnd.randrange(1, 3 << 20), rnd.random()) for _ in range(6)]
    plan[2] = (plan[2][0], 7.0)  # an idle ring shrinks in between
    return plan


def bursts(a, b):
    plans = {1: burst_plan(1), 2: burst_plan(2)}
    sent = {1: [], 2: []}
    got = {1: [], 2: []}
    total = {k: sum(s for s, _ in p) for k, p in plans.items()}
    threads = [
        threading.Thread(target=bursty, args=(a, 11, plans[1], sent[1])),
        threading.Thread(target=bursty, args=(b, 22, plans[2], sent[2])),
        threading.Thread(target=receive, args=(b, total[1], got[1])),
        threading.Thread(target=receive, args=(a, total[2], got[2])),
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ok = all(got[k][0] == (total[k], sent[k][0]) for k in (1, 2))
    return ok, "%r of %r" % ([got[k][0][0] for k in (1, 2)],
                            [total[k] for k in (1, 2)])


def unread(a, b):
    """A blocking sendall that only buffering can finish, then the reads."""
    payload = pattern(3, UNREAD)
    start = time.monotonic()
    signal.alarm(60)  # a hang fails the step, not the whole test
    try:
        a.sendall(payload)
    except InterruptedError:
        return False, "sendall still blocked after 60 s"
    finally:
        signal.alarm(0)
    print("elapsed unread %.3f" % (time.monotonic() - start), flush=True)
    got = b""
    while len(got) < len(payload):
        got += b.recv(65536)
    return got == payload, "%d of %d" % (len(got), len(payload))


def on_alarm(signum, frame):
    raise InterruptedError


def main():
    signal.signal(signal.SIGALRM, on_alarm)
    ap = argparse.ArgumentParser()
    ap.add_argument("server")
    ap.add_argument("client")
    ap.add_argument("--only", default=",".join(STEPS))
    args = ap.parse_args()
    lst = socket.socket()
    lst.bind((args.server, 0))
    lst.listen(1)
    a = socket.socket()
    a.bind((args.client, 0))
    a.connect(lst.getsockname())
    b, _ = lst.accept()
    print("pid", __import__("os").getpid(), flush=True)
    for step in args.only.split(","):
        sys.stdin.readline()
        moved = None
        if step == "stream":
            moved = one_way(a, b, 16 << 20, 64 << 10, 1)
        elif step == "idle":
            time.sleep(14)
        elif step == "bursts":
            moved = bursts(a, b)
        elif step == "zerocopy":
            moved = one_way(a, b, 8 << 20, 1 << 20, 2)
        elif step == "unread":
            moved = unread(a, b)
        if moved is not None:
            print("bytes", step, "ok" if moved[0] else "MISMATCH " + moved[1],
                  flush=True)
        print("step", step, flush=True)
    a.close()
    b.close()


if __name__ == "__main__":
    main()
