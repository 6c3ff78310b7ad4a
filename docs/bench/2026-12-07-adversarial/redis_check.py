# redis_check.py HOST PORT BIND NTHREADS NKEYS : pipelined SET then GET with random-size values, verify
import socket, sys, threading, random, time
host, port, bind, nt, nk = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
res = []
def readn(f, n):
    return f.read(n)
def one(t):
    rnd = random.Random(t)
    vals = [bytes(rnd.getrandbits(8) for _ in range(rnd.choice([1, 10, 100, 1000, 5000, 20000]))) for i in range(nk)]
    s = socket.socket(); s.bind((bind, 0)); s.settimeout(120); s.connect((host, port))
    f = s.makefile("rb")
    out = bytearray()
    for i, v in enumerate(vals):
        k = b"k%d:%d" % (t, i)
        out += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(k), k, len(v)) + v + b"\r\n"
    w = threading.Thread(target=s.sendall, args=(bytes(out),)); w.start()
    bad = 0
    for i in range(nk):
        if f.readline() != b"+OK\r\n": bad += 1
    w.join()
    out = bytearray()
    for i in range(nk):
        k = b"k%d:%d" % (t, i)
        out += b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k)
    w = threading.Thread(target=s.sendall, args=(bytes(out),)); w.start()
    for i, v in enumerate(vals):
        h = f.readline()
        if not h.startswith(b"$"): bad += 1; continue
        ln = int(h[1:])
        d = f.read(ln + 2)
        if d[:-2] != v: bad += 1
    w.join(); s.close()
    res.append(bad)
t0 = time.time()
ths = [threading.Thread(target=one, args=(t,)) for t in range(nt)]
[t.start() for t in ths]; [t.join() for t in ths]
print("redis_check threads=%d keys=%d bad=%s t=%.2f" % (nt, nk, res, time.time() - t0))
sys.exit(0 if len(res) == nt and sum(res) == 0 else 1)
