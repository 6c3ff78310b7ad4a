# SPDX-License-Identifier: MIT
"""Threads blocked in reads on one device's connections, in one process.

    herd.py ADDR K ROUNDS

Makes K connected pairs to its own listener on ADDR, a thread blocked in
recv() echoing on each server end, then ROUNDS one-byte round trips on
the client ends in turn.  Prints the round trip and the process's CPU
time per round trip.
"""
import socket, sys, threading, time
addr = sys.argv[1]; k = int(sys.argv[2]); rounds = int(sys.argv[3])
lst = socket.socket(); lst.bind((addr, 0)); lst.listen(k + 8)
pairs = []
for i in range(k):
    c = socket.create_connection(lst.getsockname())
    s, _ = lst.accept()
    pairs.append((c, s))
def echo(s):
    while True:
        d = s.recv(64)
        if not d:
            return
        s.sendall(d)
ths = [threading.Thread(target=echo, args=(s,), daemon=True) for _, s in pairs]
for t in ths: t.start()
time.sleep(0.5)
t0 = time.monotonic(); c0 = time.process_time()
for r in range(rounds):
    c = pairs[r % k][0]
    c.sendall(b"x")
    c.recv(64)
dt = time.monotonic() - t0; dc = time.process_time() - c0
print("k=%d rt_us=%.1f cpu_us_rt=%.1f" % (k, dt / rounds * 1e6, dc / rounds * 1e6), flush=True)
