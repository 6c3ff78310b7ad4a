#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Echo servers whose listeners share a port, for test-port-share.sh.

  port_share.py serve ADDR PORT   an echo server on ADDR:PORT with
                                  SO_REUSEPORT; prints "listening", then
                                  "accepted N" for each connection
  port_share.py serve-pair ADDR PORT
                                  an echo server with two listeners on
                                  PORT: an IPv6 one on :: with IPV6_V6ONLY,
                                  opened first, and an IPv4 one on ADDR
  port_share.py serve-two ADDR PORT
                                  an echo server with two SO_REUSEPORT
                                  listeners on ADDR:PORT, a thread each
  port_share.py serve-prefork ADDR PORT
                                  two SO_REUSEPORT listeners on ADDR:PORT,
                                  then two forked workers, each accepting
                                  on its own (nginx's "reuseport")
  port_share.py client ADDR PORT --conns N --bind A
                                  N concurrent connections, each echoing
                                  100 kB; prints "ok N bad M"
"""
import argparse
import os
import socket
import sys
import threading


def echo(conn):
    try:
        while True:
            data = conn.recv(65536)
            if not data:
                break
            conn.sendall(data)
    except OSError as e:
        print("server error %s" % e, flush=True)
    conn.close()


def accept_loop(ls):
    n = 0
    while True:
        conn, _ = ls.accept()
        n += 1
        print("accepted %d" % n, flush=True)
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def reuseport_listener(args):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    ls.bind((args.addr, args.port))
    ls.listen(64)
    return ls


def serve(args):
    ls = reuseport_listener(args)
    print("listening", flush=True)
    accept_loop(ls)


def serve_two(args):
    first, second = reuseport_listener(args), reuseport_listener(args)
    threading.Thread(target=accept_loop, args=(second,), daemon=True).start()
    print("listening", flush=True)
    accept_loop(first)


def serve_prefork(args):
    listeners = [reuseport_listener(args), reuseport_listener(args)]
    for mine in listeners:
        if os.fork() == 0:
            accept_loop(mine)
    print("listening", flush=True)
    os.wait()


def serve_pair(args):
    v6 = socket.socket(socket.AF_INET6)
    v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    v6.bind(("::", args.port))
    v6.listen(64)
    v4 = socket.socket()
    v4.bind((args.addr, args.port))
    v4.listen(64)
    threading.Thread(target=accept_loop, args=(v6,), daemon=True).start()
    print("listening", flush=True)
    accept_loop(v4)


def one(args, results):
    payload = os.urandom(100000)
    s = socket.socket()
    s.settimeout(30)
    try:
        s.bind((args.bind, 0))
        s.connect((args.addr, args.port))
        writer = threading.Thread(
            target=lambda: (s.sendall(payload), s.shutdown(socket.SHUT_WR)))
        writer.start()
        got = bytearray()
        while True:
            data = s.recv(65536)
            if not data:
                break
            got.extend(data)
        writer.join()
        results.append(bytes(got) == payload)
    except OSError as e:
        print("client error %s" % e, flush=True)
        results.append(False)
    s.close()


def client(args):
    results = []
    threads = [threading.Thread(target=one, args=(args, results))
               for _ in range(args.conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = sum(results)
    print("ok %d bad %d" % (ok, len(results) - ok), flush=True)
    return 0 if ok == args.conns else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("serve")
    sp.add_argument("addr")
    sp.add_argument("port", type=int)
    pp = sub.add_parser("serve-pair")
    pp.add_argument("addr")
    pp.add_argument("port", type=int)
    for name in ("serve-two", "serve-prefork"):
        tp = sub.add_parser(name)
        tp.add_argument("addr")
        tp.add_argument("port", type=int)
    cp = sub.add_parser("client")
    cp.add_argument("addr")
    cp.add_argument("port", type=int)
    cp.add_argument("--conns", type=int, default=30)
    cp.add_argument("--bind", required=True)
    args = p.parse_args()
    return {"serve": serve, "serve-pair": serve_pair,
            "serve-two": serve_two, "serve-prefork": serve_prefork,
            "client": client}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
