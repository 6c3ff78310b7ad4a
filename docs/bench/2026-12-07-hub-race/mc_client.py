# memcached text protocol: N connections from T threads, set/get values
# of varied sizes, each get checked against what was set.
import hashlib, os, socket, sys, threading
host, port, nconn, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ok = bad = 0
lock = threading.Lock()

def readline(s, buf):
    while b"\r\n" not in buf[0]:
        d = s.recv(65536)
        if not d:
            raise EOFError
        buf[0] += d
    line, buf[0] = buf[0].split(b"\r\n", 1)
    return line

def readn(s, buf, n):
    while len(buf[0]) < n:
        d = s.recv(1 << 20)
        if not d:
            raise EOFError
        buf[0] += d
    out, buf[0] = buf[0][:n], buf[0][n:]
    return out

def work(i):
    global ok, bad
    s = socket.create_connection((host, port))
    buf = [b""]
    g = b = 0
    for r in range(rounds):
        v = os.urandom([10, 1000, 60000, 400000][(i + r) % 4])
        k = b"k%d_%d" % (i, r)
        s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v))
        if readline(s, buf) != b"STORED":
            b += 1
            continue
        s.sendall(b"get %s\r\n" % k)
        head = readline(s, buf).split()
        data = readn(s, buf, int(head[3]) + 2)[:-2]
        if readline(s, buf) == b"END" and data == v:
            g += 1
        else:
            b += 1
    s.close()
    with lock:
        ok += g
        bad += b

ts = [threading.Thread(target=work, args=(i,)) for i in range(nconn)]
[t.start() for t in ts]
[t.join() for t in ts]
print("mc ok", ok, "bad", bad, flush=True)
