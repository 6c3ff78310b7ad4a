# fdpass.py server HOST PORT NWORKERS | client HOST PORT BIND N NBYTES
# server: parent accepts, hands each connection to a pre-forked worker over a unix socketpair (SCM_RIGHTS), closes its copy; workers echo with threads
import socket, sys, os, threading, hashlib, time
mode = sys.argv[1]
if mode == "server":
    host, port, nw = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind((host, port)); l.listen(128)
    pairs = []
    for w in range(nw):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            l.close(); a.close()
            def serve(fd):
                c = socket.socket(fileno=fd)
                try:
                    while True:
                        d = c.recv(65536)
                        if not d: break
                        c.sendall(d)
                    c.shutdown(socket.SHUT_WR)
                except OSError as e:
                    print("worker", w, "error", repr(e), flush=True)
                c.close()
            while True:
                msg, fds, fl, ad = socket.recv_fds(b, 16, 1)
                if not msg: os._exit(0)
                for fd in fds: threading.Thread(target=serve, args=(fd,)).start()
        b.close(); pairs.append(a)
    print("listening workers", nw, flush=True)
    i = 0
    while True:
        c, _ = l.accept()
        socket.send_fds(pairs[i % nw], [b"x"], [c.fileno()])
        c.close(); i += 1
else:
    host, port, bind, n, nb = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
    res = []
    def one(i):
        data = hashlib.sha256(str(i).encode()).digest() * (nb // 32)
        s = socket.socket(); s.bind((bind, 0)); s.settimeout(120)
        try:
            s.connect((host, port))
            t = threading.Thread(target=lambda: (s.sendall(data), s.shutdown(socket.SHUT_WR))); t.start()
            got = bytearray()
            while True:
                b = s.recv(65536)
                if not b: break
                got += b
            t.join(); res.append(bytes(got) == data)
        except Exception as e:
            print("client", i, repr(e), flush=True); res.append(False)
        s.close()
    t0 = time.time()
    ths = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    [t.start() for t in ths]; [t.join() for t in ths]
    print("fdpass_client n=%d ok=%d t=%.2f" % (n, sum(res), time.time() - t0))
    sys.exit(0 if sum(res) == n else 1)
