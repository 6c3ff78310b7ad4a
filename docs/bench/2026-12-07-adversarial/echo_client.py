# echo_client.py HOST PORT BIND NBYTES SEED : send NBYTES, half-close, read echo to EOF, compare
import socket, sys, hashlib, threading, os, time
host, port, bind, n, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
data = hashlib.sha256(str(seed).encode()).digest() * (n // 32 + 1)
data = data[:n]
t0 = time.time()
s = socket.socket(); s.bind((bind, 0)); s.settimeout(120)
s.connect((host, port))
err = []
def snd():
    try:
        v = memoryview(data); o = 0
        while o < len(v):
            k = s.send(v[o:o+65536 - (o % 7) * 1000]); o += k
        s.shutdown(socket.SHUT_WR)
    except Exception as e:
        err.append(repr(e))
th = threading.Thread(target=snd); th.start()
got = bytearray()
try:
    while True:
        b = s.recv(100000)
        if not b: break
        got += b
except Exception as e:
    err.append("recv " + repr(e))
th.join()
ok = bytes(got) == data
print("client seed=%d sent=%d got=%d match=%s err=%s t=%.2f" % (seed, len(data), len(got), ok, err, time.time() - t0))
sys.exit(0 if ok and not err else 1)
