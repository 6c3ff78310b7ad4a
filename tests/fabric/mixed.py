#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Programs that mix threads and processes around TCP, for
test-servers-mixed.sh; every byte is checked by digest.

    mixed.py mp ADDR PORT N        multiprocessing.connection: a listener
                                   whose 3 forked workers accept, and a
                                   fork pool of 4 that makes N client
                                   exchanges; prints "mp OK-COUNT"
    mixed.py aio-server ADDR PORT  an asyncio server: reads 50000 bytes,
                                   answers their digest 100 times
    mixed.py aio-clients ADDR PORT THREADS N
                                   THREADS threads, each with its own event
                                   loop and N concurrent connections;
                                   prints "aio OK-COUNT"
"""

import asyncio
import hashlib
import multiprocessing
import multiprocessing.connection as mpc
import os
import sys
import threading

AUTHKEY = b"roceshim"
AIO_REQUEST = 50000
AIO_REPEAT = 100


def mp_serve(listener):
    while True:
        conn = listener.accept()
        data = conn.recv_bytes()
        if data == b"stop":
            conn.close()
            return
        conn.send_bytes(hashlib.sha256(data).digest() * 1000)
        conn.close()


def mp_exchange(args):
    addr, i = args
    data = os.urandom(100000 + i)
    conn = mpc.Client(addr, authkey=AUTHKEY)
    conn.send_bytes(data)
    answer = conn.recv_bytes()
    conn.close()
    return answer == hashlib.sha256(data).digest() * 1000


def mp(addr, n):
    multiprocessing.set_start_method("fork")
    listener = mpc.Listener(addr, authkey=AUTHKEY)
    workers = [multiprocessing.Process(target=mp_serve, args=(listener,))
               for _ in range(3)]
    for w in workers:
        w.start()
    with multiprocessing.Pool(4) as pool:
        ok = sum(pool.map(mp_exchange, [(addr, i) for i in range(n)]))
    for _ in workers:
        conn = mpc.Client(addr, authkey=AUTHKEY)
        conn.send_bytes(b"stop")
        conn.close()
    for w in workers:
        w.join()
    print("mp", ok)


async def aio_handle(reader, writer):
    data = await reader.readexactly(AIO_REQUEST)
    writer.write(hashlib.sha256(data).digest() * AIO_REPEAT)
    await writer.drain()
    writer.close()


async def aio_serve(addr):
    server = await asyncio.start_server(aio_handle, addr[0], addr[1],
                                        backlog=1024)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


async def aio_one(addr):
    reader, writer = await asyncio.open_connection(*addr)
    data = os.urandom(AIO_REQUEST)
    writer.write(data)
    await writer.drain()
    answer = await reader.readexactly(32 * AIO_REPEAT)
    writer.close()
    return answer == hashlib.sha256(data).digest() * AIO_REPEAT


def aio_clients(addr, threads, n):
    results = []

    async def loop():
        got = await asyncio.gather(*[aio_one(addr) for _ in range(n)],
                                   return_exceptions=True)
        results.extend(g is True for g in got)

    ts = [threading.Thread(target=lambda: asyncio.run(loop()))
          for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("aio", sum(results))


def main():
    cmd, addr = sys.argv[1], (sys.argv[2], int(sys.argv[3]))
    if cmd == "mp":
        mp(addr, int(sys.argv[4]))
    elif cmd == "aio-server":
        asyncio.run(aio_serve(addr))
    elif cmd == "aio-clients":
        aio_clients(addr, int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
