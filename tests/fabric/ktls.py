# SPDX-License-Identifier: MIT
"""TLS with the kernel's TLS layer (OpenSSL's KTLS option, which sets
TCP_ULP "tls" once the handshake is done) on a connection this process
holds both ends of: every echo comes back, and the kernel did the
encryption.

    ktls.py ADDR CERT KEY

Prints one line per observation, the same over kernel TCP and under
roceshim (test-ktls.sh compares them), and, when ROCESHIM_STAT is set,
"row client TRANSPORT REASON[ moved:X]" for the client's end.
"""
import socket
import ssl
import sys
import threading

from own_stats import row

ECHOES = 50
MESSAGE = b"kernel-tls " * 200


def tls_records_sent():
    """The kernel TLS layer's count of sessions that it encrypted for."""
    with open("/proc/net/tls_stat") as f:
        for line in f:
            name, value = line.split()
            if name == "TlsTxSw":
                return int(value)
    return 0


def serve(listener, cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE-RSA-AES128-GCM-SHA256")
    conn, _ = listener.accept()
    with ctx.wrap_socket(conn, server_side=True) as tls:
        while True:
            data = tls.recv(65536)
            if not data:
                break
            tls.sendall(data)


def main():
    addr, cert, key = sys.argv[1:4]
    listener = socket.create_server((addr, 0))
    server = threading.Thread(target=serve, args=(listener, cert, key))
    server.start()
    before = tls_records_sent()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE-RSA-AES128-GCM-SHA256")
    raw = socket.create_connection(listener.getsockname())
    tls = ctx.wrap_socket(raw)
    good = 0
    for _ in range(ECHOES):
        tls.sendall(MESSAGE)
        got = b""
        while len(got) < len(MESSAGE):
            data = tls.recv(65536)
            if not data:
                break
            got += data
        good += got == MESSAGE
    print("echoes %d of %d" % (good, ECHOES))
    print("kernel encrypted:", tls_records_sent() > before)
    print("row client", row(tls.fileno()))
    tls.close()
    server.join()
    listener.close()


if __name__ == "__main__":
    main()
