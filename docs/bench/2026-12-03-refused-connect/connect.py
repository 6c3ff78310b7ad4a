#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""connect.py serve ADDR PORT [reuseport] | connect ADDR PORT N LABEL

serve: a listener (SO_REUSEPORT if asked) that accepts and closes.
connect: N sequential connects and closes; prints the median and 90th
percentile of connect() in microseconds."""
import socket
import statistics
import sys
import time

if sys.argv[1] == "serve":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if sys.argv[4:] == ["reuseport"]:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind((sys.argv[2], int(sys.argv[3])))
    s.listen(128)
    print("listening", flush=True)
    while True:
        s.accept()[0].close()
else:
    addr, port, n = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    took = []
    for _ in range(n):
        t = time.perf_counter()
        c = socket.create_connection((addr, port))
        took.append(time.perf_counter() - t)
        c.close()
    took.sort()
    print("%s median_us %.0f p90_us %.0f" % (
        sys.argv[5], statistics.median(took) * 1e6,
        took[int(n * 0.9)] * 1e6))
