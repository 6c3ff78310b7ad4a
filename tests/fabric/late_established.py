# SPDX-License-Identifier: MIT
"""Connections whose server gives up waiting for its side of the RDMA
handshake while the client's side is up: every byte must still arrive.

    late_established.py server ADDR N
        listens (printing "port P"), accepts N connections, and answers
        each, in a thread of its own, with the SHA-256 of the SIZE bytes
        it reads; prints "server wrong W" (W: connections that failed)
    late_established.py client ADDR PORT N --bind ADDR
        opens N connections at once, sends SIZE random bytes on each and
        checks the digest; prints "client ok K wrong W error E"
"""
import argparse
import hashlib
import os
import socket
import threading

SIZE = 4096


def read_exactly(sock, n):
    got = b""
    while len(got) < n:
        more = sock.recv(n - len(got))
        if not more:
            break
        got += more
    return got


def server(args):
    lsn = socket.socket()
    lsn.bind((args.addr, 0))
    lsn.listen(256)
    print("port %d" % lsn.getsockname()[1], flush=True)
    failed = []

    def answer(conn):
        conn.settimeout(30)
        try:
            conn.sendall(hashlib.sha256(
                read_exactly(conn, SIZE)).hexdigest().encode())
        except OSError:
            failed.append(1)
        conn.close()

    threads = []
    for _ in range(args.n):
        conn, _ = lsn.accept()
        threads.append(threading.Thread(target=answer, args=(conn,)))
        threads[-1].start()
    for t in threads:
        t.join()
    print("server wrong %d" % len(failed), flush=True)


def client(args):
    results = []

    def one():
        data = os.urandom(SIZE)
        try:
            sock = socket.create_connection((args.addr, args.port), 60,
                                            (args.bind, 0))
            sock.sendall(data)
            digest = read_exactly(sock, 64)
            sock.close()
            want = hashlib.sha256(data).hexdigest().encode()
            results.append("ok" if digest == want else "wrong")
        except OSError:
            results.append("error")

    threads = [threading.Thread(target=one) for _ in range(args.n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("client ok %d wrong %d error %d" % (
        results.count("ok"), results.count("wrong"),
        results.count("error")), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["server", "client"])
    p.add_argument("addr")
    p.add_argument("port", type=int, nargs="?")
    p.add_argument("n", type=int)
    p.add_argument("--bind")
    args = p.parse_args()
    if args.role == "server":
        server(args)
    else:
        client(args)


if __name__ == "__main__":
    main()
