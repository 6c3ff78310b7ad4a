#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""RPC and messaging stacks for test-servers-rpc.sh, each a server and a
client that checks every reply against a digest of what it sent:

  rpc.py zmq-server HOST PORT       ROUTER socket, 2 I/O threads: answers
                                    each message with its sha256 and head
  rpc.py zmq-client HOST PORT N     N DEALER sockets in one context, 20
                                    rounds of one message each, 1 B-300 kB
  rpc.py grpc-server HOST PORT S    gRPC (8 worker threads) for S seconds:
                                    a unary and a bidi-streaming method
  rpc.py grpc-client HOST PORT      6 threads, a channel each: 40 unary
                                    calls (10 B-3 MB) and one stream of 64
  rpc.py aio-server HOST PORT       aiohttp: POST / answers sha256 + the
                                    body reversed
  rpc.py aio-client HOST PORT N     N POSTs at once, a connection each

The zmq and gRPC servers print "listening" once they take connections
(aiohttp's is not told: wait for its port); a client prints
"<kind>_client ok N bad M" and exits 0 when it finished.
"""
import asyncio
import concurrent.futures
import hashlib
import os
import sys
import threading


def digest(m):
    return hashlib.sha256(m).digest()


def zmq_server(host, port):
    import zmq

    ctx = zmq.Context(io_threads=2)
    s = ctx.socket(zmq.ROUTER)
    s.bind("tcp://%s:%d" % (host, port))
    print("listening", flush=True)
    while True:
        ident, msg = s.recv_multipart()
        if msg == b"stop":
            break
        s.send_multipart([ident, digest(msg) + msg[:16]])
    ctx.destroy(linger=1000)


def zmq_client(host, port, n):
    import zmq

    ctx = zmq.Context(io_threads=2)
    socks = []
    poller = zmq.Poller()
    for _ in range(n):
        d = ctx.socket(zmq.DEALER)
        d.connect("tcp://%s:%d" % (host, port))
        poller.register(d, zmq.POLLIN)
        socks.append(d)
    ok = bad = 0
    for rnd in range(20):
        sent = {}
        for i, d in enumerate(socks):
            m = os.urandom([1, 100, 5000, 70000, 300000][(i + rnd) % 5])
            sent[d] = m
            d.send(m)
        left = set(socks)
        while left:
            ready = dict(poller.poll(60000))
            if not ready:
                print("zmq_client timeout, %d waiting" % len(left))
                sys.exit(1)
            for d in ready:
                got = d.recv()
                m = sent[d]
                if got == digest(m) + m[:16]:
                    ok += 1
                else:
                    bad += 1
                left.discard(d)
    socks[0].send(b"stop")
    print("zmq_client ok", ok, "bad", bad)
    ctx.destroy(linger=1000)


def same(b):
    return b


def grpc_server(host, port, seconds):
    import grpc

    def unary(req, _):
        return digest(req) + req[-1000:]

    def bidi(reqs, _):
        for req in reqs:
            yield digest(req)

    methods = grpc.method_handlers_generic_handler("p.P", {
        "U": grpc.unary_unary_rpc_method_handler(unary, same, same),
        "B": grpc.stream_stream_rpc_method_handler(bidi, same, same)})
    srv = grpc.server(
        concurrent.futures.ThreadPoolExecutor(8),
        options=[("grpc.max_receive_message_length", 64 << 20)])
    srv.add_generic_rpc_handlers((methods,))
    srv.add_insecure_port("%s:%d" % (host, port))
    srv.start()
    print("listening", flush=True)
    srv.wait_for_termination(timeout=seconds)


def grpc_client(host, port):
    """wait_for_ready: gRPC 1.51 reads connect()'s errno only after other
    calls, which may change it (fixed upstream in gRPC pull request
    35064), so one of its connects in a few dozen fails at random, with
    or without roceshim; gRPC then connects again, as for any failed
    connect, instead of failing the call (the test checks the reason
    each failure gives)."""
    import grpc

    counts = {"ok": 0, "bad": 0}
    lock = threading.Lock()

    def tally(good):
        with lock:
            counts["ok" if good else "bad"] += 1

    def worker():
        ch = grpc.insecure_channel(
            "%s:%d" % (host, port),
            options=[("grpc.max_send_message_length", 64 << 20),
                     ("grpc.use_local_subchannel_pool", 1)])
        unary = ch.unary_unary("/p.P/U", same, same)
        bidi = ch.stream_stream("/p.P/B", same, same)
        for i in range(40):
            m = os.urandom([10, 4000, 100000, 3000000][i % 4])
            tally(unary(m, timeout=120, wait_for_ready=True) ==
                  digest(m) + m[-1000:])
        msgs = [os.urandom(65536 + j) for j in range(64)]
        got = list(bidi(iter(msgs), timeout=120, wait_for_ready=True))
        tally(got == [digest(m) for m in msgs])
        ch.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("grpc_client ok", counts["ok"], "bad", counts["bad"])


def aio_server(host, port):
    from aiohttp import web

    async def answer(req):
        body = await req.read()
        return web.Response(body=digest(body) + body[::-1])

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/", answer)
    web.run_app(app, host=host, port=port, print=None, backlog=1024)


def aio_client(host, port, n):
    from aiohttp import ClientSession, TCPConnector

    counts = {"ok": 0, "bad": 0}

    async def one(s, i):
        m = os.urandom([100, 20000, 700000][i % 3])
        async with s.post("http://%s:%d/" % (host, port), data=m) as r:
            got = await r.read()
        counts["ok" if got == digest(m) + m[::-1] else "bad"] += 1

    async def main():
        conn = TCPConnector(limit=0, force_close=True)
        async with ClientSession(connector=conn) as s:
            await asyncio.wait_for(
                asyncio.gather(*[one(s, i) for i in range(n)]), 180)

    asyncio.run(main())
    print("aio_client ok", counts["ok"], "bad", counts["bad"])


def main():
    mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = [int(a) for a in sys.argv[4:]]
    {"zmq-server": zmq_server, "zmq-client": zmq_client,
     "grpc-server": grpc_server, "grpc-client": grpc_client,
     "aio-server": aio_server, "aio-client": aio_client}[mode](
        host, port, *rest)


if __name__ == "__main__":
    main()
