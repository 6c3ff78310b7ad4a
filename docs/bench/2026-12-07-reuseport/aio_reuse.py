#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""asyncio with reuse_port, for programs.sh.

  aio_reuse.py serve ADDR PORT    an echo server, start_server(reuse_port)
  aio_reuse.py client ADDR PORT N BIND
                                  N connections at once, each echoing
                                  200 kB; prints "ok N bad M"
"""
import asyncio
import os
import sys


async def echo(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()


async def serve(addr, port):
    server = await asyncio.start_server(echo, addr, port, reuse_port=True)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


async def one(addr, port, bind):
    payload = os.urandom(200000)
    reader, writer = await asyncio.open_connection(addr, port,
                                                   local_addr=(bind, 0))
    writer.write(payload)
    await writer.drain()
    writer.write_eof()
    got = await reader.read(-1)
    writer.close()
    return got == payload


async def client(addr, port, n, bind):
    results = await asyncio.gather(*(one(addr, port, bind) for _ in range(n)),
                                   return_exceptions=True)
    ok = sum(r is True for r in results)
    print("ok %d bad %d" % (ok, n - ok), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        asyncio.run(serve(sys.argv[2], int(sys.argv[3])))
    else:
        asyncio.run(client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                           sys.argv[5]))
