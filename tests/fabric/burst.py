# SPDX-License-Identifier: MIT
"""A burst of concurrent non-blocking connects from one asyncio event loop
into a listener in the same loop (as the default-on issue describes it).

    burst.py ADDR [--conns N] [--bytes N]

Each client sends N bytes and reads their echo.  Prints "burst ok" (every
byte of every connection came back) or "burst FAILED ...", the seconds it
took ("seconds S"), the longest connect() call and the 90th percentile
("longest_connect_ms M", "p90_connect_ms P": a non-blocking connect must
not wait for the handshake), and how many of
this process's connections roceshim put on RDMA ("rdma R of T", from
roceshim-stat, when ROCESHIM_STAT is set).
"""
import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time

from own_stats import stats


async def handle(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def client(addr, port, payload, timings):
    sock = socket.socket()
    sock.setblocking(False)
    start = time.monotonic()
    try:
        sock.connect((addr, port))
    except BlockingIOError:
        pass
    timings.append(time.monotonic() - start)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (addr, port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(payload)
    await writer.drain()
    got = await reader.readexactly(len(payload))
    writer.close()
    await writer.wait_closed()
    return got == payload


async def burst(args):
    server = await asyncio.start_server(handle, args.addr, 0,
                                        backlog=args.conns)
    port = server.sockets[0].getsockname()[1]
    payload = os.urandom(args.bytes)
    timings = []
    start = time.monotonic()
    results = await asyncio.gather(
        *(client(args.addr, port, payload, timings)
          for _ in range(args.conns)), return_exceptions=True)
    took = time.monotonic() - start
    server.close()
    await server.wait_closed()
    ok = [r is True for r in results]
    failed = [r for r in results if r is not True]
    if all(ok):
        print("burst ok", flush=True)
    else:
        print("burst FAILED %d of %d: %r" % (len(failed), len(results),
                                              failed[:3]), flush=True)
    print("seconds %.2f" % took, flush=True)
    print("longest_connect_ms %.1f" % (1000 * max(timings or [0])),
          flush=True)
    ranked = sorted(timings or [0])
    print("p90_connect_ms %.1f" % (1000 * ranked[len(ranked) * 9 // 10]),
          flush=True)
    return all(ok)


def rdma_share():
    if not os.environ.get("ROCESHIM_STAT"):
        return
    g = stats().get("global", {})
    print("rdma %d of %d" % (g.get("connections_rdma", 0),
                             g.get("connections_opened", 0)), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("addr")
    p.add_argument("--conns", type=int, default=1000)
    p.add_argument("--bytes", type=int, default=2048)
    args = p.parse_args()
    ok = asyncio.run(burst(args))
    rdma_share()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
